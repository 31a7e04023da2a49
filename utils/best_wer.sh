#!/usr/bin/env bash
# Prints the best (lowest error rate) line among the lines on stdin (or in the files given), as
# Kaldi's utils/best_wer.sh does, for both of its inputs:
#   compute-wer lines:    grep WER exp/tri1/decode_test/wer_* | utils/best_wer.sh
#     in:  exp/tri1/decode_test/wer_10_0.5:%WER 12.34 [ 123 / 1000, 10 ins, 30 del, 83 sub ]
#     out: %WER 12.34 [ 123 / 1000, 10 ins, 30 del, 83 sub ] exp/tri1/decode_test/wer_10_0.5
#   sclite summary lines: grep Sum exp/tri1/decode_test/score_*/*.sys | utils/best_wer.sh
#     in:  exp/tri1/decode_test/score_10/test.ctm.filt.sys:| Sum/Avg | 4043 80101 | 89.9 7.8 2.3 1.8 11.9 71.0 |
#     out: %WER 11.9 | 4043 80101 | 89.9 7.8 2.3 1.8 11.9 71.0 | exp/tri1/decode_test/score_10/test.ctm.filt.sys
# (an sclite row is ranked by its Err column).  The first of equal rates wins and the line is
# printed as Kaldi's script prints it.  Unlike Kaldi's, lines whose rate is not a number (-nan)
# are ignored, and no usable line at all is an exit status of 1 (Kaldi's prints nothing, status 0).
# %CER and %SER lines are not %WER lines: ignored, as by Kaldi's.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0
fi
# (pynnet/score/wer.py's best_wer is the same procedure in Python: keep the two in step.)
cat "$@" | LC_ALL=C awk '
  function rate_ok(s) { return s ~ /^[0-9]+(\.[0-9]*)?$/ || s == "inf"; }
  function less(a, b) {  # a < b for rate strings (inf is never less)
    if (a == "inf") return 0;
    if (b == "inf") return 1;
    return a + 0 < b + 0;
  }
  # "|5" -> "| 5" and "5|" -> "5 |": sclite squeezes large counts against the bars.
  function space_bars(s,   i, c, n, out, prev) {
    out = ""; n = length(s); prev = "";
    for (i = 1; i <= n; i++) {
      c = substr(s, i, 1);
      if (c == "|" && prev ~ /^[0-9]$/) out = out " ";
      out = out c;
      if (c == "|" && substr(s, i + 1, 1) ~ /^[0-9]$/) out = out " ";
      prev = c;
    }
    return out;
  }
  {
    line = space_bars($0); r = "";
    p = index(line, "%WER ");
    if (p > 0) {
      tok = substr(line, p + 5);
      if (match(tok, /^[^[:space:]]+/)) tok = substr(tok, 1, RLENGTH); else tok = "";
      if (rate_ok(tok)) r = tok;
    }
    if (r == "" && match(line, / (Mean|Sum\/Avg)?[[:space:]]*\|[[:space:]]*[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+\|[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+[^[:space:]]+[[:space:]]+\|/)) {
      # sclite: | <spk or Sum/Avg> | #Snt #Wrd | Corr Sub Del Ins Err S.Err |: Err is the 8th
      # field after the first bar of the match
      m = substr(line, RSTART, RLENGTH);
      m = substr(m, index(m, "|") + 1);
      sub(/^[[:space:]]+/, "", m);
      split(m, t, /[[:space:]]+/);
      if (rate_ok(t[8])) r = t[8];
    }
    if (r != "" && (best == "" || less(r, best))) { best = r; bestline = line; }
  }
  END {
    if (best == "") exit 1;
    s = bestline;
    # Kaldi prints: the file name (grep prefix) moved after the %WER part, a Sum/Avg row
    # rearranged likewise, "%WER <9th field>" put first when the line does not start with %WER,
    # whitespace squeezed, the grep separator ":" or ":|" at the end dropped.
    if (split(s, a, "%WER") == 2) s = "%WER" a[2] " " a[1];
    if (split(s, a, "Sum/Avg") == 2) s = a[2] " " a[1];
    split(s, f);
    if (f[1] !~ /%WER/) s = "%WER " f[9] " " s;
    gsub(/[[:space:]]+/, " ", s);
    sub(/:$/, "", s);
    sub(/:[[:space:]]*\|[[:space:]]*$/, "", s);
    print s;
  }'
