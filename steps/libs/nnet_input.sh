# The input side of the scripts that forward data through a DNN (steps/nnet/decode.sh, align.sh,
# make_denlats.sh, make_priors.sh), sourced after their options are parsed
# (". steps/libs/nnet_input.sh").

# nnet_cmvn_args <nnet> <data-dir> <dir>: sets cmvn_args to pynnet-nnet-forward's per-speaker CMVN
# options for the data (or split data) dir <dir> (e.g. "$sdata/JOB") when the DNN was trained with
# per-speaker CMVN (its input pipeline says so; <data-dir>/cmvn.scp must then exist: one line and
# exit 1 if not), else to nothing.  Exits 1 if the model cannot be read (pynnet-nnet-info's error).
nnet_cmvn_args() {
  local info
  # (the whole info is read first: `| grep -q` would close the pipe at the first match, which the
  # program reports as an error, and would hide a failure of the program itself)
  info=$(pynnet-nnet-info "$1") || exit 1
  cmvn_args=""
  if grep -q "'apply_cmvn': True" <<< "$info"; then
    [ -f "$2/cmvn.scp" ] || { echo "$0: the DNN needs per-speaker CMVN: no such file $2/cmvn.scp" >&2; exit 1; }
    cmvn_args="--utt2spk $3/utt2spk --cmvn-scp $3/cmvn.scp"
  fi
}
