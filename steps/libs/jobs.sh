# Job running for the GMM scripts (steps/train_mono.sh, steps/train_deltas.sh, steps/align_si.sh)
# and the decoding scripts (through steps/libs/decode.sh),
# sourced after their options are parsed (". steps/libs/jobs.sh").

# jobs_check_nj <value>: exit 1 with one line unless <value> (the --nj option) is a positive integer.
jobs_check_nj() {
  case "$1" in
    ''|*[!0-9]*|0*) echo "$0: --nj must be a positive integer, got '$1'" >&2; exit 1 ;;
  esac
}

# jobs_report [--what <name>] [--prefer <pattern>] <cmd...> [JOB=a:b] <log> <command...>: run a
# $cmd line (run.pl, queue.pl, ...); when it fails, say why in one line: from the first failed job's
# log that has one, its first line matching <pattern> (grep; e.g. a write failure that the other
# errors follow from) or else its first ERROR line, naming the log (the job runner itself only names
# the log), and return the runner's status.  <name> is what failed (default: the log's name up to
# its first dot, e.g. "align").  The GMM scripts prefix their $cmd with it (cmd="jobs_report $cmd"),
# so that the calls in steps/libs/train_gmm.sh report too; steps/libs/decode.sh calls it directly.
jobs_report() {
  local what="" prefer=""
  while true; do
    case "$1" in
      --what) what=$2; shift 2 ;;
      --prefer) prefer=$2; shift 2 ;;
      *) break ;;
    esac
  done
  local rc=0
  "$@" || rc=$?
  [ "$rc" -eq 0 ] && return 0
  local a var="" first=1 last=1 log="" n l err=""
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
  if [ -z "$what" ]; then what=$(basename "$log"); what=${what%%.*}; fi
  for n in $(seq "$first" "$last"); do
    if [ -n "$var" ]; then l=${log//$var/$n}; else l=$log; fi
    err=""
    if [ -n "$prefer" ]; then err=$(grep -m1 -e "$prefer" "$l" 2>/dev/null || true); fi
    if [ -z "$err" ]; then err=$(grep -m1 "^ERROR" "$l" 2>/dev/null || true); fi
    if [ -n "$err" ]; then
      echo "$0: $what failed: $err (see $l)" >&2
      return $rc
    fi
  done
  if [ -n "$var" ]; then l=${log//$var/*}; else l=$log; fi
  echo "$0: $what failed, see $l" >&2
  return $rc
}
