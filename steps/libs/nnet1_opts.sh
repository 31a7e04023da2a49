# Kaldi nnet1's options of steps/nnet/pretrain_dbn.sh and steps/nnet/train.sh, mapped onto
# pynnet's or refused in one line; sourced after the options are parsed
# (". steps/libs/nnet1_opts.sh").  The functions read and set the scripts' variables.

# nnet1_refuse <option> <value> <why>: a Kaldi option pynnet does not support: one line on
# stderr and exit 1, when it is given a value.
nnet1_refuse() {
  [ -z "$2" ] && return 0
  echo "$0: --$1 $2: $3" >&2
  exit 1
}

# nnet1_feature_opts: Kaldi's --cmvn-opts (apply-cmvn's options: per-speaker CMVN in the input
# pipeline) and --delta-opts (add-deltas' options) -> apply_cmvn and delta_order.  Kaldi adds
# neither when they are empty; then pynnet's --apply-cmvn/--delta-order stand.
nnet1_feature_opts() {
  local o means=true
  if [ -n "$cmvn_opts" ]; then
    for o in $cmvn_opts; do
      case "$o" in
        --norm-means=true|--norm-vars=false) ;;
        --norm-means=false) means=false ;;
        --norm-vars=true) nnet1_refuse cmvn-opts "$cmvn_opts" "variance normalisation is not supported (pynnet's DNN input pipeline normalises means per speaker; the global CMVN of the feature transform scales)" ;;
        *) nnet1_refuse cmvn-opts "$cmvn_opts" "option $o is not supported (only --norm-means, --norm-vars=false)" ;;
      esac
    done
    apply_cmvn=$means
  fi
  if [ -n "$delta_opts" ]; then
    delta_order=2   # add-deltas' default
    set -- $delta_opts
    while [ $# -gt 0 ]; do
      case "$1" in
        --delta-order=*) delta_order=${1#--delta-order=} ;;
        --delta-order) delta_order=$2; shift ;;
        --delta-window=2) ;;
        *) nnet1_refuse delta-opts "$delta_opts" "option $1 is not supported (only --delta-order)" ;;
      esac
      shift
    done
    case "$delta_order" in ''|*[!0-9]*) nnet1_refuse delta-opts "$delta_opts" "the delta order must be a number" ;; esac
  fi
}

# nnet1_write_feature_opts <dir>: <dir>/cmvn_opts and delta_opts as Kaldi's scripts leave them
# (when given), for the scripts that read them from a DBN or DNN dir.
nnet1_write_feature_opts() {
  [ -n "$cmvn_opts" ] && echo "$cmvn_opts" > "$1/cmvn_opts"
  [ -n "$delta_opts" ] && echo "$delta_opts" > "$1/delta_opts"
  return 0
}
