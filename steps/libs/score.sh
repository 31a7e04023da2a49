# Pieces shared by steps/score_kaldi.sh (= steps/scoring/score_kaldi_wer.sh) and
# steps/scoring/score_kaldi_cer.sh, sourced after their options are parsed
# (". steps/libs/score.sh").  The functions read the scoring scripts' variables:
# help_message cmd decode_mbr min_lmwt max_lmwt word_ins_penalty stats lmwt_extend max_lmwt_cap.

# score_setup "$@": the arguments <data-dir> <lang-dir|graph-dir> <decode-dir> -> data
# lang_or_graph dir symtab (else the usage and exit 1); checks the inputs and options; sets the
# filters (local/wer_{output,ref,hyp}_filter as in Kaldi), wips (the penalties, space-separated);
# writes <decode-dir>/scoring_kaldi/test_filt.txt (the filtered reference).
score_setup() {
  if [ $# -ne 3 ]; then
    printf "%s\n" "$help_message" >&2
    exit 1
  fi
  data=$1
  lang_or_graph=$2
  dir=$3
  symtab=$lang_or_graph/words.txt
  local f
  for f in "$symtab" "$dir/lat.1.gz" "$data/text"; do
    [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
  done
  if $decode_mbr; then
    echo "$0: --decode-mbr true is not supported (no MBR decoding in pynnet yet)" >&2; exit 1
  fi
  case "$min_lmwt$max_lmwt" in *[!0-9]*) echo "$0: --min-lmwt/--max-lmwt must be integers" >&2; exit 1 ;; esac
  [ "$min_lmwt" -le "$max_lmwt" ] || { echo "$0: --min-lmwt $min_lmwt > --max-lmwt $max_lmwt" >&2; exit 1; }
  case "$lmwt_extend$max_lmwt_cap" in *[!0-9]*|"") echo "$0: --lmwt-extend/--max-lmwt-cap must be integers" >&2; exit 1 ;; esac

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
}

# score_extend_grid: while the best LM weight of wer_<LMWT>_<WIP> lies only on an edge of the grid
# (the top, or the bottom when that is above 1), the grid is extended past that edge by
# $lmwt_extend weights (up to $max_lmwt_cap at the top, 1 at the bottom), and only the new weights'
# best paths and wer_* files are computed; one line says so, and one when the cap stops it.  A
# weight tied with the best inside the grid is inside: no extension.  The grid scored is then
# min_lmwt..max_lmwt, recorded by score_record_grid.  --lmwt-extend 0 turns it off.
score_extend_grid() {
  local best lo hi old_min=$min_lmwt old_max=$max_lmwt
  while [ "$lmwt_extend" -gt 0 ]; do
    best=$(_score_best_lmwt wer) || break
    if [ "$best" = top ] && [ "$max_lmwt" -lt "$max_lmwt_cap" ]; then
      lo=$((max_lmwt + 1)); hi=$((max_lmwt + lmwt_extend))
      [ "$hi" -le "$max_lmwt_cap" ] || hi=$max_lmwt_cap
      echo "$0: the best LM weight $max_lmwt is at the top of the grid $min_lmwt-$max_lmwt: extended to $min_lmwt-$hi"
      _score_extend_to "$lo" "$hi"
      max_lmwt=$hi
    elif [ "$best" = bottom ] && [ "$min_lmwt" -gt 1 ]; then
      hi=$((min_lmwt - 1)); lo=$((min_lmwt - lmwt_extend))
      [ "$lo" -ge 1 ] || lo=1
      echo "$0: the best LM weight $min_lmwt is at the bottom of the grid $min_lmwt-$max_lmwt: extended to $lo-$max_lmwt"
      _score_extend_to "$lo" "$hi"
      min_lmwt=$lo
    else
      if [ "$best" = top ]; then
        echo "$0: the best LM weight $max_lmwt is at the top of the grid $min_lmwt-$max_lmwt, the cap (--max-lmwt-cap $max_lmwt_cap): not extended further"
      elif [ "$best" = bottom ] && [ "$min_lmwt" -lt "$old_min" ]; then
        echo "$0: the best LM weight 1 is still at the bottom of the grid $min_lmwt-$max_lmwt, the lowest weight: not extended further"
      fi
      break
    fi
  done
  score_record_grid "$old_min" "$old_max"
}

# (_score_best_lmwt <kind>: "top" or "bottom" when the fewest errors of <kind>_<LMWT>_<WIP> over
# the grid are found only at max_lmwt or only at min_lmwt, else "inside"; status 1 when no file
# has a %WER line.  Error counts, not rates, so that ties are exact.)
_score_best_lmwt() {
  local kind=$1 wip lmwt
  for wip in $wips; do
    for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
      awk -v l="$lmwt" '/^%WER / { print l, $4; exit }' "$dir/${kind}_${lmwt}_${wip}" 2>/dev/null
    done
  done | awk -v lo="$min_lmwt" -v hi="$max_lmwt" '
    $2 ~ /^[0-9]+$/ { n++; e = $2 + 0; if (!(best_set) || e < best) { best = e; best_set = 1; delete at } if (e == best) at[$1] = 1 }
    END {
      if (!n) exit 1
      inside = 0; for (l in at) if (l + 0 != lo && l + 0 != hi) inside = 1
      if (lo == hi || inside) print "inside"
      else if ((hi in at) && !(lo in at)) print "top"
      else if ((lo in at) && !(hi in at)) print "bottom"
      else print "inside"
    }'
}

# (_score_extend_to <lo> <hi>: the best paths and wer_* files of LM weights lo..hi alone, added to
# those of the grid; on failure the hypotheses go, as in score_best_paths.)
_score_extend_to() {
  local min_lmwt=$1 max_lmwt=$2   # (dynamic scope: the functions below see the new weights only)
  if ! _score_best_paths_run; then
    score_clear_hyps
    exit 1
  fi
  score_grid wer
}

# score_record_grid <min> <max>: scoring_kaldi/lmwt_grid = "<min> <max> <min_lmwt> <max_lmwt>":
# the grid options and the (extended) grid their word scoring ended with.
score_record_grid() {
  echo "$1 $2 $min_lmwt $max_lmwt" > "$dir/scoring_kaldi/lmwt_grid.tmp" && \
    mv "$dir/scoring_kaldi/lmwt_grid.tmp" "$dir/scoring_kaldi/lmwt_grid" || exit 1
}

# score_read_grid: a later stage (best-WER picking, the CER scoring of the word hypotheses) takes
# the extended grid of the word scoring that ran with the same --min-lmwt/--max-lmwt, so that it
# covers every weight scored (min_lmwt max_lmwt set from scoring_kaldi/lmwt_grid).
score_read_grid() {
  local f=$dir/scoring_kaldi/lmwt_grid a b c d
  [ -f "$f" ] || return 0
  read -r a b c d < "$f" || return 0
  if [ "$a" = "$min_lmwt" ] && [ "$b" = "$max_lmwt" ] && [[ "$c$d" =~ ^[0-9]+$ ]] && [ -n "$d" ]; then
    if [ "$c" != "$min_lmwt" ] || [ "$d" != "$max_lmwt" ]; then
      echo "$0: the grid $min_lmwt-$max_lmwt was extended to $c-$d by the word scoring ($f)"
    fi
    min_lmwt=$c; max_lmwt=$d
  fi
}

# score_grid_opts: the grid options of the pynnet programs (an array, grid_opts).
score_grid_opts() {
  grid_opts=(--min-lmwt "$min_lmwt" --max-lmwt "$max_lmwt" --word-ins-penalty "$word_ins_penalty")
}

# score_best_paths: the best path of every lattice at every grid point, filtered (local/wer_hyp_filter),
# as <decode-dir>/scoring_kaldi/penalty_<WIP>/<LMWT>.txt.  The results of an earlier scoring (by
# words or characters), its hypotheses included, are removed first: they must not pass for these
# lattices' (nor for lattices that are missing or unreadable).  On failure no hypotheses and no
# scoring_kaldi/grid.N are left: one line, exit 1.
score_best_paths() {
  score_clear_hyps
  rm -rf "$dir"/wer_* "$dir"/scoring_kaldi/{best_wer,wer_details} "$dir"/cer_* \
    "$dir"/scoring_kaldi/{best_cer,cer_details}
  if ! _score_best_paths_run; then
    score_clear_hyps
    exit 1
  fi
}

# score_clear_hyps: remove the hypotheses of every grid point (scoring_kaldi/penalty_*/*.txt, the
# *.chars.txt of the CER scoring among them, and temp files), the per-job scoring_kaldi/grid.N and
# the record of the extended grid (scoring_kaldi/lmwt_grid).
score_clear_hyps() {
  rm -rf "$dir"/scoring_kaldi/grid.* "$dir"/scoring_kaldi/penalty_*/*.txt "$dir"/scoring_kaldi/penalty_*/*.tmp \
    "$dir"/scoring_kaldi/lmwt_grid
}

# (score_best_paths's work: the best paths into penalty_<WIP>/<LMWT>.txt; else one line, return 1)
_score_best_paths_run() {
  # One pass over the lattices gives every grid point (Kaldi runs lattice-scale |
  # lattice-add-penalty | lattice-best-path once per point); one job per lat.JOB.gz.
  local nj n wip lmwt f
  nj=$(cat "$dir/num_jobs" 2>/dev/null || echo 0)
  score_grid_opts
  for n in $(seq "$nj"); do
    [ -f "$dir/lat.$n.gz" ] || { echo "$0: no $dir/lat.$n.gz (of num_jobs $nj): decoding incomplete?" >&2; return 1; }
  done
  if [ "$nj" -gt 0 ]; then
    # shellcheck disable=SC2086
    $cmd JOB=1:$nj "$dir/scoring_kaldi/log/best_path.JOB.log" \
      pynnet-lattice-best-path-grid "${grid_opts[@]}" --word-symbol-table "$symtab" \
        "$dir/lat.JOB.gz" "$dir/scoring_kaldi/grid.JOB" || \
      { echo "$0: $(grep -h -m1 ^ERROR "$dir"/scoring_kaldi/log/best_path.*.log | head -1) (see $dir/scoring_kaldi/log/best_path.*.log)" >&2; return 1; }
    for wip in $wips; do
      mkdir -p "$dir/scoring_kaldi/penalty_$wip"
      for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
        cat $(for n in $(seq "$nj"); do echo "$dir/scoring_kaldi/grid.$n/penalty_$wip/$lmwt.txt"; done) | \
          sort > "$dir/scoring_kaldi/penalty_$wip/$lmwt.txt.tmp" || return 1
        mv "$dir/scoring_kaldi/penalty_$wip/$lmwt.txt.tmp" "$dir/scoring_kaldi/penalty_$wip/$lmwt.txt" || return 1
      done
    done
    rm -rf "$dir"/scoring_kaldi/grid.*
  else
    # shellcheck disable=SC2086
    $cmd "$dir/scoring_kaldi/log/best_path.log" \
      pynnet-lattice-best-path-grid "${grid_opts[@]}" --word-symbol-table "$symtab" \
        "$dir"/lat.*.gz "$dir/scoring_kaldi" || \
      { echo "$0: $(grep -m1 ^ERROR "$dir/scoring_kaldi/log/best_path.log") (see $dir/scoring_kaldi/log/best_path.log)" >&2; return 1; }
  fi
  for wip in $wips; do
    mkdir -p "$dir/scoring_kaldi/penalty_$wip/log"
    if [ "$hyp_filtering_cmd" != cat ]; then
      for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
        f=$dir/scoring_kaldi/penalty_$wip/$lmwt.txt
        $hyp_filtering_cmd < "$f" > "$f.tmp" && mv "$f.tmp" "$f" || return 1
      done
    fi
  done
}

# score_check_hyps: every grid point's scoring_kaldi/penalty_<WIP>/<LMWT>.txt is there (a later
# stage reads the hypotheses of an earlier run; a failed word scoring and a new decode remove
# them, so those found are the present lattices'); else one line and exit 1.
score_check_hyps() {
  local wip lmwt f
  for wip in $wips; do
    for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
      f=$dir/scoring_kaldi/penalty_$wip/$lmwt.txt
      [ -f "$f" ] || { echo "$0: no $f (the word hypotheses are missing): score the words first (steps/score_kaldi.sh or steps/scoring/score_kaldi_wer.sh with the same grid options), or use --stage 0" >&2; exit 1; }
    done
  done
}

# score_grid <kind> [<pynnet-score-grid options>]: <decode-dir>/<kind>_<LMWT>_<WIP> (compute-wer
# --text --mode=present output) for every grid point, in one process (the same output as Kaldi's
# per-LMWT compute-wer jobs, without 33 program start-ups); log scoring_kaldi/log/score[.<kind>].log.
score_grid() {
  local kind=$1 log
  shift
  log=$dir/scoring_kaldi/log/score.log
  [ "$kind" = wer ] || log=$dir/scoring_kaldi/log/score.$kind.log
  score_grid_opts
  $cmd "$log" \
    pynnet-score-grid "${grid_opts[@]}" --out-prefix "$kind" "$@" \
      "$dir/scoring_kaldi/test_filt.txt" "$dir/scoring_kaldi" "$dir" || \
    { echo "$0: $(grep -m1 ^ERROR "$log") (see $log)" >&2; exit 1; }
}

# score_pick_best <kind> <hyp-suffix> <ref>: the best %WER line of <decode-dir>/<kind>_* into
# scoring_kaldi/best_<kind> (utils/best_wer.sh), printed; with --stats true the best grid point's
# scoring_kaldi/<kind>_details/{lmwt,wip,per_utt,per_spk,ops} for hypotheses
# penalty_<WIP>/<LMWT><hyp-suffix> against <ref>; logs scoring_kaldi/log/stats1[.<kind>].log.
score_pick_best() {
  local kind=$1 suffix=$2 ref=$3 wip lmwt best_file best_wip best_lmwt log
  for wip in $wips; do
    for lmwt in $(seq "$min_lmwt" "$max_lmwt"); do
      # /dev/null makes grep print the file name
      grep WER "$dir/${kind}_${lmwt}_${wip}" /dev/null
    done
  done | utils/best_wer.sh > "$dir/scoring_kaldi/best_$kind.tmp" || \
    { rm -f "$dir/scoring_kaldi/best_$kind.tmp"; echo "$0: no %WER lines in $dir/${kind}_*; something went wrong" >&2; exit 1; }
  mv "$dir/scoring_kaldi/best_$kind.tmp" "$dir/scoring_kaldi/best_$kind"

  best_file=$(awk '{print $NF}' "$dir/scoring_kaldi/best_$kind")
  best_wip=$(echo "$best_file" | awk -F_ '{print $NF}')
  best_lmwt=$(echo "$best_file" | awk -F_ '{N=NF-1; print $N}')
  if [ -z "$best_lmwt" ]; then
    echo "$0: could not get the best ${kind^^} from $dir/${kind}_*" >&2; exit 1
  fi
  cat "$dir/scoring_kaldi/best_$kind"

  if $stats; then
    mkdir -p "$dir/scoring_kaldi/${kind}_details"
    echo "$best_lmwt" > "$dir/scoring_kaldi/${kind}_details/lmwt"
    echo "$best_wip" > "$dir/scoring_kaldi/${kind}_details/wip"
    local utt2spk_opt=()
    [ -f "$data/utt2spk" ] && utt2spk_opt=(--utt2spk "$data/utt2spk")
    log=$dir/scoring_kaldi/log/stats1.log
    [ "$kind" = wer ] || log=$dir/scoring_kaldi/log/stats1.$kind.log
    $cmd "$log" \
      pynnet-wer-details "${utt2spk_opt[@]}" --special-symbol "'***'" \
        "$ref" "$dir/scoring_kaldi/penalty_$best_wip/$best_lmwt$suffix" \
        "$dir/scoring_kaldi/${kind}_details" || \
      { echo "$0: ${kind} details failed, see $log" >&2; exit 1; }
  fi
}

# score_done: remove wer_{?,??} and cer_{?,??} files of older scoring scripts, as Kaldi does, to
# avoid confusion.
score_done() {
  rm -f "$dir"/wer_? "$dir"/wer_?? "$dir"/cer_? "$dir"/cer_?? 2>/dev/null
  return 0
}
