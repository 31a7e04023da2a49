# Pieces shared by steps/decode.sh and steps/nnet/decode.sh, sourced after their options are
# parsed (". steps/libs/decode.sh").  The functions read the decoding scripts' variables:
# nj cmd data graphdir dir skip_scoring scoring_opts.

# decode_args "$@": the decoding scripts' arguments <graph-dir> <data-dir> <decode-dir> ->
# graphdir data dir, and srcdir (the exp dir above <decode-dir>); else the usage and exit 1.
decode_args() {
  if [ $# -ne 3 ]; then
    printf "%s\n" "$help_message" >&2
    exit 1
  fi
  graphdir=$1
  data=$2
  dir=$3
  srcdir=$(dirname "$dir")
}

# decode_setup: --nj must be a positive integer; the decode dir gets log/ and num_jobs, the data
# its split (sets sdata).
decode_setup() {
  case "$nj" in ''|*[!0-9]*|0) echo "$0: --nj must be a positive integer, got '$nj'" >&2; exit 1 ;; esac
  mkdir -p "$dir/log"
  if [ "${stage:-0}" -ge 1 ] && [ -f "$dir/num_jobs" ]; then
    nj=$(cat "$dir/num_jobs")  # --stage 1 only scores: the lattices are those of the earlier decode
  else
    echo "$nj" > "$dir/num_jobs"
  fi
  sdata=$data/split$nj
  [[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh "$data" "$nj" >/dev/null || exit 1
}

# decode_run_jobs <command...>: run the decoding command (which writes $dir/lat.JOB.gz; a "|" word
# pipes, as with $cmd) as JOB=1:$nj with logs $dir/log/decode.JOB.log.  On failure no lattices
# are left and the first ERROR line of a failed job's log is the one-line reason; exit 1.
decode_run_jobs() {
  rm -f "$dir"/lat.*.gz
  # shellcheck disable=SC2086
  if ! $cmd JOB=1:$nj "$dir/log/decode.JOB.log" "$@"; then
    rm -f "$dir"/lat.*.gz  # the gzip pipes leave partial lattices behind
    local n err
    for n in $(seq "$nj"); do
      err=$(grep -m1 "^ERROR" "$dir/log/decode.$n.log" 2>/dev/null || true)
      if [ -n "$err" ]; then echo "$0: decoding failed: $err (see $dir/log/decode.$n.log)" >&2; exit 1; fi
    done
    echo "$0: decoding failed, see $dir/log/decode.*.log" >&2
    exit 1
  fi
}

# decode_score: unless --skip-scoring true, score the lattices with the recipe's local/score.sh
# if it has one, else steps/score_kaldi.sh (as Kaldi's decoding scripts); a failure exits 1.
decode_score() {
  if ! $skip_scoring; then
    if [ -x local/score.sh ]; then
      # shellcheck disable=SC2086
      local/score.sh $scoring_opts --cmd "$cmd" "$data" "$graphdir" "$dir" || exit 1
    else
      # shellcheck disable=SC2086
      steps/score_kaldi.sh $scoring_opts --cmd "$cmd" "$data" "$graphdir" "$dir" || exit 1
    fi
  fi
}
