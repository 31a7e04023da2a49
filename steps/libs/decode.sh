# Pieces shared by steps/decode.sh and steps/nnet/decode.sh, sourced after their options are
# parsed (". steps/libs/decode.sh").  The functions read the decoding scripts' variables:
# nj cmd data graphdir dir skip_scoring scoring_opts.
. steps/libs/jobs.sh   # jobs_check_nj, jobs_report

# decode_args "$@": the decoding scripts' arguments <graph-dir> <data-dir> <decode-dir> ->
# graphdir data dir, and srcdir (the exp dir above <decode-dir>); else the usage and exit 1.
# Also checks --num-threads (a positive integer).
decode_args() {
  if [ $# -ne 3 ]; then
    printf "%s\n" "$help_message" >&2
    exit 1
  fi
  graphdir=$1
  data=$2
  dir=$3
  srcdir=$(dirname "$dir")
  [[ ${num_threads:-1} =~ ^[1-9][0-9]*$ ]] || { echo "$0: --num-threads must be a positive integer, not '$num_threads'" >&2; exit 1; }
}

# decode_refuse <option> <value> <why>: a Kaldi option pynnet does not support: one line, exit 1,
# when it is given a value.
decode_refuse() {
  [ -z "$2" ] && return 0
  echo "$0: --$1 $2: $3" >&2
  exit 1
}

# decode_setup: --nj must be a positive integer; the decode dir gets log/ and num_jobs, the data
# its split (sets sdata).
decode_setup() {
  jobs_check_nj "$nj"
  mkdir -p "$dir/log"
  if [ "${stage:-0}" -ge 1 ] && [ -f "$dir/num_jobs" ]; then
    nj=$(cat "$dir/num_jobs")  # --stage 1 only scores: the lattices are those of the earlier decode
  else
    echo "$nj" > "$dir/num_jobs"
  fi
  sdata=$data/split$nj
  [[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh "$data" "$nj" >/dev/null || exit 1
}

# decode_lat_wspec: the decoding programs' lattice wspecifier, "ark:|gzip -n -c > $dir/lat.JOB.gz.tmp"
# (-n: no time stamp in the header, so identical lattices are identical files)
# (decode_run_jobs renames the files to lat.JOB.gz once every job has succeeded: a killed or failed
# decode leaves no truncated lat.JOB.gz for --stage 1 or scoring to read), with a check of gzip's
# exit status: when gzip cannot write the file (disk full, a file size limit: it is killed by
# SIGXFSZ) the job's log gets an ERROR line naming the file, which
# decode_run_jobs gives as the reason (the decoder only sees its output pipe closed, or the
# pipe's command fail).  No double quotes in it: run.pl passes it to bash inside double quotes.
decode_lat_wspec() {
  local lat="$dir/lat.JOB.gz"
  printf '%s' "ark:|gzip -n -c > $lat.tmp || { echo 'ERROR (gzip): writing $lat failed (disk full or a file size limit?)' >&2; exit 1; }"
}

# decode_run_jobs <command...>: run the decoding command (which writes $dir/lat.JOB.gz.tmp, see
# decode_lat_wspec, renamed to lat.JOB.gz when all jobs succeed; a "|" word pipes, as with $cmd)
# as JOB=1:$nj with logs $dir/log/decode.JOB.log, telling $cmd each job's $num_threads.
# On failure no lattices are left and the one-line reason (steps/libs/jobs.sh's jobs_report) is,
# from the first failed job's log, the lattice write failure if there was one (the pipe errors of
# the programs follow from it), else its first ERROR line; exit 1.
decode_run_jobs() {
  # (and the previous scoring's results, its hypotheses scoring_kaldi/penalty_<WIP>/<LMWT>.txt
  # among them: a killed decode must not leave them to be reported, nor a later CER --stage 2
  # score the old lattices' hypotheses as the new ones')
  rm -rf "$dir"/lat.*.gz "$dir"/lat.*.gz.tmp "$dir"/wer_* "$dir"/cer_* "$dir"/rtf \
    "$dir"/scoring_kaldi/{best_wer,best_cer,wer_details,cer_details} "$dir"/scoring_kaldi/grid.* \
    "$dir"/scoring_kaldi/penalty_*/*.txt "$dir"/scoring_kaldi/penalty_*/*.tmp "$dir"/scoring_kaldi/lmwt_grid
  # shellcheck disable=SC2086
  if ! jobs_report --what decoding --prefer "^ERROR (gzip): writing " \
      $cmd --num-threads "${num_threads:-1}" JOB=1:$nj "$dir/log/decode.JOB.log" "$@"; then
    rm -f "$dir"/lat.*.gz "$dir"/lat.*.gz.tmp  # the gzip pipes leave partial lattices behind
    exit 1
  fi
  local n
  for n in $(seq "$nj"); do
    [ -e "$dir/lat.$n.gz.tmp" ] || continue  # a job that wrote nothing
    mv -f "$dir/lat.$n.gz.tmp" "$dir/lat.$n.gz" || { echo "$0: cannot rename $dir/lat.$n.gz.tmp" >&2; exit 1; }
  done
}

# decode_start_clock: note the wall-clock time the decoding starts (for decode_report_rtf).
decode_start_clock() {
  decode_t0=$(date +%s.%N)
}

# decode_report_rtf: after decode_run_jobs, one line
#   <script>: real-time factor X (Y s of audio decoded in Z s, N jobs)
# also written to <decode-dir>/rtf (with the decoders' CPU real-time factor on a second line).  Z is the wall-clock time since decode_start_clock (all jobs,
# feature and network passes included); Y the frames the decoders logged ("over N frames") times
# the frame shift (<data>/frame_shift, else 0.01 s), or, without such log lines, the duration in
# <data>/utt2dur or <data>/segments.  Nothing when the duration is unknown.
decode_report_rtf() {
  local t1 shift=0.01 audio line
  t1=$(date +%s.%N)
  [ -s "$data/frame_shift" ] && shift=$(cat "$data/frame_shift")
  audio=$(awk -v s="$shift" '/Overall log-likelihood per frame is .* over [0-9]+ frames/ {f += $(NF-1)}
    END {if (f > 0) printf "%.2f", f * s}' $(seq -f "$dir/log/decode.%g.log" "$nj") 2>/dev/null)
  if [ -z "$audio" ] && [ -s "$data/utt2dur" ]; then
    audio=$(awk '{d += $2} END {if (d > 0) printf "%.2f", d}' "$data/utt2dur")
  elif [ -z "$audio" ] && [ -s "$data/segments" ]; then
    audio=$(awk '{d += $4 - $3} END {if (d > 0) printf "%.2f", d}' "$data/segments")
  fi
  [ -n "$audio" ] || return 0
  line=$(awk -v p="$0" -v a="$audio" -v t0="$decode_t0" -v t1="$t1" -v nj="$nj" 'BEGIN {
    t = t1 - t0; printf "%s: real-time factor %.4f (%.1f s of audio decoded in %.1f s, %d job%s)", p, t / a, a, t, nj, nj == 1 ? "" : "s" }')
  echo "$line"
  {
    echo "$line"
    # (the CPU time the decoders logged, summed over jobs: steadier than wall-clock time on a
    # loaded machine)
    awk -v a="$audio" '/CPU time taken [0-9.]+s/ {c += $6 + 0; n++}
      END {if (n) printf "CPU real-time factor %.4f (%.1f s of CPU time in the decoders, summed over jobs)\n", c / a, c}' \
      $(seq -f "$dir/log/decode.%g.log" "$nj") 2>/dev/null
  } > "$dir/rtf.tmp" && mv "$dir/rtf.tmp" "$dir/rtf"
}

# decode_score: unless --skip-scoring true, score the lattices with the recipe's local/score.sh
# if it has one, else steps/score_kaldi.sh (as Kaldi's decoding scripts); a failure exits 1.
# Data without a transcript (no <data>/text: unlabelled data) is decoded, not scored: one line says
# so and the script goes on (exit 0).
decode_score() {
  if $skip_scoring; then
    return 0
  fi
  if [ ! -f "$data/text" ]; then
    echo "$0: no $data/text: lattices written to $dir, not scoring"
    return 0
  fi
  if [ -x local/score.sh ]; then
    # shellcheck disable=SC2086
    local/score.sh $scoring_opts --cmd "$cmd" "$data" "$graphdir" "$dir" || exit 1
  else
    # shellcheck disable=SC2086
    steps/score_kaldi.sh $scoring_opts --cmd "$cmd" "$data" "$graphdir" "$dir" || exit 1
  fi
}
