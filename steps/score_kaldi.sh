#!/usr/bin/env bash
# WER scoring of a decode dir over the LM-weight x word-insertion-penalty grid (Kaldi's
# steps/score_kaldi.sh).  Reads <decode-dir>/lat.*.gz, writes
#   <decode-dir>/scoring_kaldi/test_filt.txt              the filtered reference
#   <decode-dir>/scoring_kaldi/penalty_<WIP>/<LMWT>.txt   hypotheses per grid point
#   <decode-dir>/wer_<LMWT>_<WIP>                         compute-wer output per grid point
#   <decode-dir>/scoring_kaldi/best_wer                   the best %WER line (utils/best_wer.sh)
#   <decode-dir>/scoring_kaldi/wer_details/{lmwt,wip,per_utt,per_spk,ops}   at the best point
# As in Kaldi, local/wer_output_filter, local/wer_ref_filter and local/wer_hyp_filter (if
# executable) filter references and hypotheses.

# Begin configuration section.
cmd=run.pl
stage=0
decode_mbr=false
stats=true
beam=6             # (Kaldi's lattice-prune beam for MBR; unused without MBR)
word_ins_penalty=0.0,0.5,1.0
min_lmwt=7
max_lmwt=17
iter=final
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir|graph-dir> <decode-dir>
 e.g.: $0 data/test exp/tri1/graph exp/tri1/decode_test
Options:
  --cmd <cmd>                         # job runner (default $cmd)
  --stage <0|1>                       # 1: only pick the best WER and write the details
  --min-lmwt <int>                    # minimum LM weight (default $min_lmwt)
  --max-lmwt <int>                    # maximum LM weight (default $max_lmwt)
  --word-ins-penalty <list>           # comma-separated penalties (default $word_ins_penalty)
  --stats <true|false>                # write scoring_kaldi/wer_details (default $stats)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
data=$1
lang_or_graph=$2
dir=$3
symtab=$lang_or_graph/words.txt

for f in "$symtab" "$dir/lat.1.gz" "$data/text"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done
if $decode_mbr; then
  echo "$0: --decode-mbr true is not supported (no MBR decoding in pynnet yet)" >&2; exit 1
fi
case "$min_lmwt$max_lmwt" in *[!0-9]*) echo "$0: --min-lmwt/--max-lmwt must be integers" >&2; exit 1 ;; esac
[ "$min_lmwt" -le "$max_lmwt" ] || { echo "$0: --min-lmwt $min_lmwt > --max-lmwt $max_lmwt" >&2; exit 1; }

ref_filtering_cmd="cat"
[ -x local/wer_output_filter ] && ref_filtering_cmd="local/wer_output_filter"
[ -x local/wer_ref_filter ] && ref_filtering_cmd="local/wer_ref_filter"
hyp_filtering_cmd="cat"
[ -x local/wer_output_filter ] && hyp_filtering_cmd="local/wer_output_filter"
[ -x local/wer_hyp_filter ] && hyp_filtering_cmd="local/wer_hyp_filter"

echo "$0: scoring with word insertion penalty=$word_ins_penalty"
mkdir -p "$dir/scoring_kaldi/log"
$ref_filtering_cmd < "$data/text" > "$dir/scoring_kaldi/test_filt.txt.tmp" || exit 1
mv "$dir/scoring_kaldi/test_filt.txt.tmp" "$dir/scoring_kaldi/test_filt.txt"
wips=$(echo "$word_ins_penalty" | sed 's/,/ /g')

if [ "$stage" -le 0 ]; then
  # One pass over the lattices gives every grid point (Kaldi runs lattice-scale |
  # lattice-add-penalty | lattice-best-path once per point); one job per lat.JOB.gz.
  nj=$(cat "$dir/num_jobs" 2>/dev/null || echo 0)
  # the previous scoring's results go first: they must not pass for these lattices' (nor for
  # lattices that are missing)
  rm -rf "$dir"/scoring_kaldi/grid.* "$dir"/wer_* "$dir/scoring_kaldi/best_wer"
  for n in $(seq "$nj"); do
    [ -f "$dir/lat.$n.gz" ] || { echo "$0: no $dir/lat.$n.gz (of num_jobs $nj): decoding incomplete?" >&2; exit 1; }
  done
  if [ "$nj" -gt 0 ]; then
    # shellcheck disable=SC2086
    $cmd JOB=1:$nj "$dir/scoring_kaldi/log/best_path.JOB.log" \
      pynnet-lattice-best-path-grid --min-lmwt $min_lmwt --max-lmwt $max_lmwt \
        --word-ins-penalty "$word_ins_penalty" --word-symbol-table "$symtab" \
        "$dir/lat.JOB.gz" "$dir/scoring_kaldi/grid.JOB" || \
      { echo "$0: $(grep -h -m1 ^ERROR "$dir"/scoring_kaldi/log/best_path.*.log | head -1) (see $dir/scoring_kaldi/log/best_path.*.log)" >&2; exit 1; }
    for wip in $wips; do
      mkdir -p "$dir/scoring_kaldi/penalty_$wip"
      for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
        cat $(for n in $(seq "$nj"); do echo "$dir/scoring_kaldi/grid.$n/penalty_$wip/$lmwt.txt"; done) | \
          sort > "$dir/scoring_kaldi/penalty_$wip/$lmwt.txt.tmp" || exit 1
        mv "$dir/scoring_kaldi/penalty_$wip/$lmwt.txt.tmp" "$dir/scoring_kaldi/penalty_$wip/$lmwt.txt"
      done
    done
    rm -rf "$dir"/scoring_kaldi/grid.*
  else
    # shellcheck disable=SC2086
    $cmd "$dir/scoring_kaldi/log/best_path.log" \
      pynnet-lattice-best-path-grid --min-lmwt $min_lmwt --max-lmwt $max_lmwt \
        --word-ins-penalty "$word_ins_penalty" --word-symbol-table "$symtab" \
        "$dir"/lat.*.gz "$dir/scoring_kaldi" || \
      { echo "$0: $(grep -m1 ^ERROR "$dir/scoring_kaldi/log/best_path.log") (see $dir/scoring_kaldi/log/best_path.log)" >&2; exit 1; }
  fi
  for wip in $wips; do
    mkdir -p "$dir/scoring_kaldi/penalty_$wip/log"
    if [ "$hyp_filtering_cmd" != cat ]; then
      for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
        f=$dir/scoring_kaldi/penalty_$wip/$lmwt.txt
        $hyp_filtering_cmd < "$f" > "$f.tmp" && mv "$f.tmp" "$f" || exit 1
      done
    fi
  done
  # compute-wer --text --mode=present for every grid point, in one process (the same output
  # as Kaldi's per-LMWT compute-wer jobs, without 33 program start-ups).
  $cmd "$dir/scoring_kaldi/log/score.log" \
    pynnet-score-grid --min-lmwt $min_lmwt --max-lmwt $max_lmwt --word-ins-penalty "$word_ins_penalty" \
      "$dir/scoring_kaldi/test_filt.txt" "$dir/scoring_kaldi" "$dir" || \
    { echo "$0: $(grep -m1 ^ERROR "$dir/scoring_kaldi/log/score.log") (see $dir/scoring_kaldi/log/score.log)" >&2; exit 1; }
fi

if [ "$stage" -le 1 ]; then
  for wip in $wips; do
    for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
      # /dev/null makes grep print the file name
      grep WER "$dir/wer_${lmwt}_${wip}" /dev/null
    done
  done | utils/best_wer.sh > "$dir/scoring_kaldi/best_wer.tmp" || \
    { echo "$0: no %WER lines in $dir/wer_*; something went wrong" >&2; exit 1; }
  mv "$dir/scoring_kaldi/best_wer.tmp" "$dir/scoring_kaldi/best_wer"

  best_wer_file=$(awk '{print $NF}' "$dir/scoring_kaldi/best_wer")
  best_wip=$(echo "$best_wer_file" | awk -F_ '{print $NF}')
  best_lmwt=$(echo "$best_wer_file" | awk -F_ '{N=NF-1; print $N}')
  if [ -z "$best_lmwt" ]; then
    echo "$0: could not get the best WER from $dir/wer_*" >&2; exit 1
  fi
  cat "$dir/scoring_kaldi/best_wer"

  if $stats; then
    mkdir -p "$dir/scoring_kaldi/wer_details"
    echo "$best_lmwt" > "$dir/scoring_kaldi/wer_details/lmwt"
    echo "$best_wip" > "$dir/scoring_kaldi/wer_details/wip"
    utt2spk_opt=()
    [ -f "$data/utt2spk" ] && utt2spk_opt=(--utt2spk "$data/utt2spk")
    $cmd "$dir/scoring_kaldi/log/stats1.log" \
      pynnet-wer-details "${utt2spk_opt[@]}" --special-symbol "'***'" \
        "$dir/scoring_kaldi/test_filt.txt" "$dir/scoring_kaldi/penalty_$best_wip/$best_lmwt.txt" \
        "$dir/scoring_kaldi/wer_details" || \
      { echo "$0: wer details failed, see $dir/scoring_kaldi/log/stats1.log" >&2; exit 1; }
  fi
fi

# Remove wer_{?,??} files of older scoring scripts, as Kaldi does, to avoid confusion.
rm -f "$dir"/wer_? "$dir"/wer_?? 2>/dev/null
exit 0
