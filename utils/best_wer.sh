#!/usr/bin/env bash
# Prints the line with the lowest %WER among the lines on stdin (or in the files given), as
# Kaldi's utils/best_wer.sh does:   grep WER exp/tri1/decode_test/wer_* | utils/best_wer.sh
#   input:  exp/tri1/decode_test/wer_10_0.5:%WER 12.34 [ 123 / 1000, 10 ins, 30 del, 83 sub ]
#   output: %WER 12.34 [ 123 / 1000, 10 ins, 30 del, 83 sub ] exp/tri1/decode_test/wer_10_0.5
# The first of equal WERs wins; lines without a numeric %WER (nan) are ignored.
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0
fi
cat "$@" | awk '
  {
    p = index($0, "%WER");
    if (p == 0) next;
    where = substr($0, 1, p - 1); body = substr($0, p);
    sub(/[ \t]+$/, "", where); sub(/:$/, "", where);
    n = split(body, f, /[ \t]+/);
    if (n < 2 || f[2] !~ /^[0-9]+(\.[0-9]*)?$/) next;
    v = f[2] + 0;
    if (!have || v < best) { have = 1; best = v; line = body; file = where; }
  }
  END {
    if (!have) exit 1;
    gsub(/[ \t]+/, " ", line); sub(/ $/, "", line);
    if (file != "") print line " " file; else print line;
  }'
