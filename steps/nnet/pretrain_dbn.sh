#!/usr/bin/env bash
# DBN pretraining with stacked RBMs (Kaldi's steps/nnet/pretrain_dbn.sh): the first layer a
# Gaussian-Bernoulli RBM on spliced (+-5), globally normalised features, the others
# Bernoulli-Bernoulli; CD-1, minibatch 100, L2 0.0002; momentum 0.9 with the step lr (1 - m), m ramped
# 0.5 -> 0.9 over 20M frames (rbm-train-cd1-frmshuff's default), anti-weight-explosion protection.
# Writes <exp-dir>/{1..N}.rbm (a rerun continues after the last finished layer), final.dbn,
# feature_transform.pt, log/pretrain.log, log/rbm.json (reconstruction error per epoch),
# pretrain_opts.json (the options and data of the layers: a rerun with others is an error).

# Begin configuration section.
cmd=
nn_depth=6
hid_dim=2048
rbm_iter=1          # epochs per Bernoulli-Bernoulli RBM (the Gaussian one gets twice as many)
rbm_lrate=0.4
rbm_lrate_low=0.01  # Gaussian-Bernoulli RBM
rbm_l2penalty=0.0002
minibatch_size=100
splice=5
apply_cmvn=auto
delta_order=0
seed=777
num_threads=1       # torch threads of the training process (exact resume needs the same number)
device=cpu          # cpu | cuda[:N]
# End configuration section.

help_message="Usage: $0 [options] <data> <exp-dir>
 e.g.: $0 --nn-depth 6 --hid-dim 2048 data-fbank/train exp/dbn
Options:
  --nn-depth <n>          # number of RBMs (default $nn_depth)
  --hid-dim <n>           # units per RBM (default $hid_dim)
  --rbm-iter <n>          # epochs per RBM (default $rbm_iter; the first RBM gets twice as many)
  --rbm-lrate <lr>        # Bernoulli-Bernoulli learning rate (default $rbm_lrate)
  --rbm-lrate-low <lr>    # Gaussian-Bernoulli learning rate (default $rbm_lrate_low)
  --apply-cmvn <true|false|auto>  # per-speaker mean normalisation (default $apply_cmvn)
  --num-threads <n>            # threads of the training process (default $num_threads)
  --device <cpu|cuda>     # where the RBMs train (default $device)
  --cmd <run.pl ...>      # job runner (default: run directly)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1
case "$num_threads" in ''|*[!0-9]*|0) echo "$0: --num-threads must be a positive integer" >&2; exit 1 ;; esac
export OMP_NUM_THREADS=$num_threads

if [ $# -ne 2 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
data=$1
dir=$2
[ -f "$data/feats.scp" ] || { echo "$0: no such file $data/feats.scp" >&2; exit 1; }
mkdir -p "$dir/log"

opts=(--nn-depth "$nn_depth" --hid-dim "$hid_dim" --rbm-iter "$rbm_iter" --rbm-lrate "$rbm_lrate"
      --rbm-lrate-low "$rbm_lrate_low" --rbm-l2penalty "$rbm_l2penalty" --minibatch-size "$minibatch_size"
      --splice "$splice" --apply-cmvn "$apply_cmvn" --delta-order "$delta_order" --seed "$seed"
      --device "$device")
echo "$0: pretraining $nn_depth RBMs of $hid_dim units on $data (log: $dir/log/pretrain.log)"
if [ -n "$cmd" ]; then
  $cmd "$dir/log/pretrain.log" pynnet-rbm-train "${opts[@]}" "$data" "$dir" || {
    echo "$0: pretraining failed: $(grep -m1 '^ERROR' "$dir/log/pretrain.log") (see $dir/log/pretrain.log)" >&2; exit 1; }
else
  [ -t 2 ] && export PYNNET_PROGRESS_TTY=1   # progress bars on the terminal, not in the log
  pynnet-rbm-train "${opts[@]}" "$data" "$dir" 2> >(tee -a "$dir/log/pretrain.log" >&2) || {
    echo "$0: pretraining failed (see $dir/log/pretrain.log)" >&2; exit 1; }
fi
[ -f "$dir/final.dbn" ] || { echo "$0: no $dir/final.dbn was written" >&2; exit 1; }
echo "$0: done: $dir/final.dbn"
exit 0
