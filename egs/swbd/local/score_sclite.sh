#!/usr/bin/env bash
# Hub-5 scoring of a decode dir against <data-dir>/stm with <data-dir>/glm (Kaldi's
# egs/swbd/s5c/local/score_sclite.sh, with pynnet-score-stm in place of hubscr.pl/sclite).
# For every LM weight LMWT x word insertion penalty WIP (the grid of steps/score_kaldi.sh: the
# penalty is added to each word's graph cost, acoustics scaled by 1/LMWT):
#   score_<LMWT>_<WIP>/<name>.ctm.unfiltered   best path, times relative to the recording
#                                              (segments + reco2file_and_channel)
#   score_<LMWT>_<WIP>/<name>.ctm               without [noise] [laughter] [vocalized-noise] <unk>,
#                                              hesitations (uh um eh mm hm ah huh ha er oof hee ach
#                                              eee ew) and partial words (ending in -); acronyms
#                                              u._c._l._a. split into letters sharing the duration
#   score_<LMWT>_<WIP>/<name>.ctm.filt          the ctm after the GLM (as csrfilt writes it)
#   score_<LMWT>_<WIP>/<name>.ctm.filt.sys      sclite-like report + a %WER line, the whole set
#   score_<LMWT>_<WIP>/<name>.ctm.swbd.filt.sys     Switchboard part  (grep -v '^en_' of stm and ctm)
#   score_<LMWT>_<WIP>/<name>.ctm.callhm.filt.sys   CallHome part     (grep -v '^sw_')
#   wer_<LMWT>_<WIP>                            the whole set's %WER line
# and the best grid point (lowest %WER, the first on a tie; wip outer, lmwt inner):
#   scoring_sclite/best_wer{,_swbd,_callhm}     utils/best_wer.sh lines of the .sys files' %WER lines
#   scoring_kaldi/best_wer, scoring_kaldi/wer_details/{lmwt,wip}   as steps/score_kaldi.sh's
# Logs: <decode-dir>/scoring_sclite/log.  A subset with no segment in the stm is not scored (no
# best_wer_<subset>).  Without <data-dir>/glm the words are scored unmapped (one line says so).

# begin configuration section.
cmd=run.pl
stage=0
min_lmwt=5
max_lmwt=17
word_ins_penalty=0.0,0.5,1.0
frame_shift=0.01
decode_mbr=false   # (refused when true, as in steps/score_kaldi.sh)
stats=true         # (steps/score_kaldi.sh's; accepted so that local/score.sh passes the same options)
beam=6             # (likewise)
iter=final         # (likewise)
# end configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir|graph-dir> <decode-dir>
 e.g.: $0 data/eval2000 exp/tri4/graph_sw1_tg exp/tri4/decode_eval2000_sw1_tg
Options:
  --cmd <cmd>                   # job runner (default $cmd)
  --stage <0|1|2|3>             # 0: ctms from the lattices, 1: ctm filters, 2: scoring, 3: best WER
  --min-lmwt <int>              # minimum LM weight (default $min_lmwt)
  --max-lmwt <int>              # maximum LM weight (default $max_lmwt)
  --word-ins-penalty <list>     # comma-separated penalties (default $word_ins_penalty)
  --frame-shift <seconds>       # of the lattices (default $frame_shift)
Needs <data-dir>/{stm,segments,reco2file_and_channel} (and glm), <lang>/words.txt,
<lang>/phones/word_boundary.int, <decode-dir>/../final.mdl, <decode-dir>/lat.*.gz."

echo "$0 $*"

[ -f ./path.sh ] && . ./path.sh
. utils/parse_options.sh || exit 1
. steps/libs/ctm.sh   # ctm_inputs, jobs_report

if [ $# -ne 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
data=$1
lang=$2
dir=$3
model=$dir/../final.mdl
name=$(basename "$data")
sdir=$dir/scoring_sclite

if $decode_mbr; then
  echo "$0: --decode-mbr true is not supported (no MBR decoding in pynnet)" >&2; exit 1
fi
[[ $min_lmwt =~ ^[1-9][0-9]*$ && $max_lmwt =~ ^[1-9][0-9]*$ ]] || \
  { echo "$0: --min-lmwt/--max-lmwt must be positive integers, got '$min_lmwt'/'$max_lmwt'" >&2; exit 1; }
[ "$min_lmwt" -le "$max_lmwt" ] || { echo "$0: --min-lmwt $min_lmwt > --max-lmwt $max_lmwt" >&2; exit 1; }
wips=$(echo "$word_ins_penalty" | tr ',' ' ')
[ -n "$wips" ] || { echo "$0: --word-ins-penalty: empty list" >&2; exit 1; }
for wip in $wips; do
  [[ $wip =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "$0: --word-ins-penalty: '$wip' is not a non-negative number" >&2; exit 1; }
done
for f in "$data/stm" "$data/segments" "$data/reco2file_and_channel"; do
  [ -f "$f" ] || { echo "$0: expecting file $f to exist" >&2; exit 1; }
done
glm_opt=()
if [ -f "$data/glm" ]; then
  glm_opt=(--glm "$data/glm")
else
  echo "$0: no $data/glm: scoring without word mappings"
fi
grid() {  # "LMWT WIP" lines, penalty outer (score_kaldi.sh's order)
  local wip lmwt
  for wip in $wips; do
    for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do echo "$lmwt $wip"; done
  done
}

mkdir -p "$sdir/log"

if [ "$stage" -le 0 ]; then
  ctm_inputs "$lang" "$dir" "$model"  # nj word_boundary
  # Older results of these grid points must not pass for the new lattices'.
  grid | while read -r lmwt wip; do rm -rf "$dir/score_${lmwt}_${wip}" "$dir/wer_${lmwt}_${wip}"; done
  rm -rf "$sdir"/ctm.* "$sdir"/best_wer* "$dir/scoring_kaldi/best_wer" "$dir/scoring_kaldi/wer_details"
  # One pass over each job's lattices for the whole grid (the penalty per word, as
  # steps/score_kaldi.sh's: lattice-1best's --word-ins-penalty LMWT*WIP at --lm-scale LMWT).
  jobs_report --what "CTM generation" \
    $cmd JOB=1:"$nj" "$sdir/log/get_ctm.JOB.log" \
      pynnet-lattice-to-ctm --min-lmwt "$min_lmwt" --max-lmwt "$max_lmwt" \
        --grid-word-ins-penalty "$(echo $wips | tr ' ' ,)" --frame-shift "$frame_shift" \
        --word-symbol-table "$lang/words.txt" --segments-of "$data" \
        "$word_boundary" "$model" "$dir/lat.JOB.gz" "$sdir/ctm.JOB/LMWT_WIP.ctm" || exit 1
  grid | while read -r lmwt wip; do
    mkdir -p "$dir/score_${lmwt}_${wip}"
    for n in $(seq "$nj"); do cat "$sdir/ctm.$n/${lmwt}_${wip}.ctm" || exit 1; done \
      > "$dir/score_${lmwt}_${wip}/$name.ctm.unfiltered.tmp" || exit 1
    mv "$dir/score_${lmwt}_${wip}/$name.ctm.unfiltered.tmp" "$dir/score_${lmwt}_${wip}/$name.ctm.unfiltered"
  done || exit 1
  rm -rf "$sdir"/ctm.*
fi

if [ "$stage" -le 1 ]; then
  # The hub5 filters: words the reference has as optional (or not at all) cannot be wrong when
  # left out; acronyms back into the reference's letters.
  grid | while read -r lmwt wip; do
    x=$dir/score_${lmwt}_${wip}/$name.ctm
    [ -f "$x.unfiltered" ] || { echo "$0: no $x.unfiltered: run stage 0 first" >&2; exit 1; }
    LC_ALL=C awk '
      NF < 5 { print "'"$0"': " FILENAME ":" FNR ": expected <file> <channel> <start> <dur> <word>" > "/dev/stderr"; exit 1 }
      {
        w = tolower($5)
        if (w == "[noise]" || w == "[laughter]" || w == "[vocalized-noise]" || w == "<unk>") next
        if (w ~ /^(uh|um|eh|mm|hm|ah|huh|ha|er|oof|hee|ach|eee|ew)$/) next
        if (w ~ /-$/) next
        if ($5 ~ /^([A-Za-z]\._)+[A-Za-z]\.('"'"'?s)?$/) {
          # u._c._l._a. -> u c l a (a plural or possessive stays on the last letter); equal
          # shares of the duration to 2 decimals, the last letter takes what is left
          n = split($5, part, "_")
          share = sprintf("%.2f", $4 / n) + 0
          for (i = 1; i <= n; i++) {
            l = part[i]; sub(/\./, "", l)
            d = (i < n) ? share : $4 - share * (n - 1)
            printf "%s %s %.2f %.2f %s\n", $1, $2, $3 + share * (i - 1), d, l
          }
          next
        }
        print
      }' "$x.unfiltered" > "$x.tmp" || { rm -f "$x.tmp"; exit 1; }
    mv "$x.tmp" "$x"
  done || exit 1
fi

# score_args <suffix> <stm>: pynnet-score-stm's triples for score_*/<name>.ctm<suffix> against
# <stm>, every grid point (appended to the array args)
score_args() {
  local suffix=$1 stm=$2 lmwt wip x
  while read -r lmwt wip; do
    x=$dir/score_${lmwt}_${wip}/$name.ctm$suffix
    args+=("$stm" "$x" "$x.filt.sys")
  done < <(grid)
}

has_segments() { grep -v '^;;' "$1" | grep -q '[^[:space:]]'; }

if [ "$stage" -le 2 ]; then
  cp "$data/stm" "$sdir/stm"
  grep -v '^en_' "$data/stm" > "$sdir/stm.swbd"
  grep -v '^sw_' "$data/stm" > "$sdir/stm.callhm"
  grid | while read -r lmwt wip; do
    x=$dir/score_${lmwt}_${wip}/$name.ctm
    [ -f "$x" ] || { echo "$0: no $x: run stage 1 first" >&2; exit 1; }
    rm -f "$x".*.sys "$x".filt "$x".swbd* "$x".callhm*
    grep -v '^en_' "$x" > "$x.swbd"
    grep -v '^sw_' "$x" > "$x.callhm"
  done || exit 1
  args=()
  score_args "" "$sdir/stm"
  for subset in swbd callhm; do
    if has_segments "$sdir/stm.$subset"; then
      score_args ".$subset" "$sdir/stm.$subset"
    else
      echo "$0: no $subset segments in $data/stm: that subset is not scored"
    fi
  done
  # one process for all of them: the stms and the GLM read once, repeated alignments reused
  jobs_report --what "scoring" \
    $cmd "$sdir/log/score.log" \
      pynnet-score-stm "${glm_opt[@]}" --filtered-suffix .filt "${args[@]}" || exit 1
fi

if [ "$stage" -le 3 ]; then
  grid | while read -r lmwt wip; do
    sys=$dir/score_${lmwt}_${wip}/$name.ctm.filt.sys
    grep '^%WER' "$sys" > "$dir/wer_${lmwt}_${wip}" || { echo "$0: no %WER line in $sys" >&2; exit 1; }
  done || exit 1
  for subset in "" swbd callhm; do
    suffix=${subset:+.$subset}
    [ -n "$subset" ] && ! has_segments "$sdir/stm.$subset" && continue
    grid | while read -r lmwt wip; do
      grep -H '^%WER' "$dir/score_${lmwt}_${wip}/$name.ctm$suffix.filt.sys"
    done | utils/best_wer.sh > "$sdir/best_wer${subset:+_$subset}.tmp" || \
      { echo "$0: no %WER lines in $dir/score_*/$name.ctm$suffix.filt.sys" >&2; exit 1; }
    mv "$sdir/best_wer${subset:+_$subset}.tmp" "$sdir/best_wer${subset:+_$subset}"
  done
  mkdir -p "$dir/scoring_kaldi/wer_details"
  grid | while read -r lmwt wip; do grep WER "$dir/wer_${lmwt}_${wip}" /dev/null; done | \
    utils/best_wer.sh > "$dir/scoring_kaldi/best_wer" || exit 1
  best=$(awk '{print $NF}' "$dir/scoring_kaldi/best_wer")   # <dir>/wer_<LMWT>_<WIP>
  echo "$best" | awk -F_ '{print $(NF-1)}' > "$dir/scoring_kaldi/wer_details/lmwt"
  echo "$best" | awk -F_ '{print $NF}' > "$dir/scoring_kaldi/wer_details/wip"
  cat "$sdir"/best_wer*
fi
exit 0
