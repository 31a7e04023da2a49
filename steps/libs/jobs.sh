# Job running for the GMM scripts (steps/train_mono.sh, steps/train_deltas.sh, steps/align_si.sh)
# and the decoding scripts (through steps/libs/decode.sh),
# sourced after their options are parsed (". steps/libs/jobs.sh").

# jobs_check_nj <value>: exit 1 with one line unless <value> (the --nj option) is a positive integer.
jobs_check_nj() {
  case "$1" in
    ''|*[!0-9]*|0*) echo "$0: --nj must be a positive integer, got '$1'" >&2; exit 1 ;;
  esac
}

# jobs_report <cmd...> [JOB=a:b] <log> <command...>: run a $cmd line (run.pl, queue.pl, ...); when
# it fails, say why in one line: the first ERROR line of the failed jobs' logs, naming the log (the
# job runner itself only names the log), and return its status.  The scripts prefix their $cmd
# with it (cmd="jobs_report $cmd"), so that the calls in steps/libs/train_gmm.sh report too.
jobs_report() {
  local rc=0
  "$@" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  local a var="" first=1 last=1 log="" n l err="" stage
  shift  # the job runner
  for a in "$@"; do
    if [ -z "$var" ] && [ -z "$log" ] && [[ $a =~ ^([A-Za-z_][A-Za-z0-9_]*)=([0-9]+)(:([0-9]+))?$ ]]; then
      var=${BASH_REMATCH[1]}
      first=${BASH_REMATCH[2]}
      last=${BASH_REMATCH[4]:-$first}
      continue
    fi
    case "$a" in *.log) log=$a; break ;; esac
  done
  if [ -z "$log" ]; then
    echo "$0: a job failed (exit status $rc)" >&2
    return $rc
  fi
  stage=$(basename "$log"); stage=${stage%%.*}
  for n in $(seq "$first" "$last"); do
    if [ -n "$var" ]; then l=${log//$var/$n}; else l=$log; fi
    err=$(grep -m1 "^ERROR" "$l" 2>/dev/null || true)
    if [ -n "$err" ]; then
      echo "$0: $stage failed: $err (see $l)" >&2
      return $rc
    fi
  done
  if [ -n "$var" ]; then l=${log//$var/*}; else l=$log; fi
  echo "$0: $stage failed, see $l" >&2
  return $rc
}
