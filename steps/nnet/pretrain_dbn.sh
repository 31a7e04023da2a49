#!/usr/bin/env bash
# DBN pretraining with stacked RBMs (Kaldi's steps/nnet/pretrain_dbn.sh): the first layer a
# Gaussian-Bernoulli RBM on spliced (+-5), globally normalised features, the others
# Bernoulli-Bernoulli; CD-1, minibatch 100, L2 0.0002; momentum 0.9 with the step lr (1 - m), m ramped
# 0.5 -> 0.9 over 20M frames (rbm-train-cd1-frmshuff's default), anti-weight-explosion protection.
# Writes <exp-dir>/{1..N}.rbm (a rerun continues after the last finished layer), final.dbn and,
# under the names Kaldi's recipes use, <N>.dbn (the same file) and final.feature_transform (the
# input transform in nnet1's text form), feature_transform.pt, log/pretrain.log, log/rbm.json
# (reconstruction error per epoch), pretrain_opts.json (the options and data of the layers: a
# rerun with others is an error).  Kaldi nnet1's --cmvn-opts/--delta-opts are taken (written to
# <exp-dir>/cmvn_opts, delta_opts for steps/nnet/train.sh --feature-transform, as in Kaldi).

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
# Kaldi nnet1's options
cmvn_opts=          # apply-cmvn options: given, per-speaker mean normalisation (sets --apply-cmvn)
delta_opts=         # add-deltas options: given, deltas (--delta-order=N, default 2)
input_vis_type=gauss      # (gauss only: the first RBM is Gaussian-Bernoulli)
param_stddev_first=0.1    # (0.1 only: the initial weights' std of every RBM)
param_stddev=0.1
copy_feats=true           # (ignored: features are read where they are)
copy_feats_tmproot=
copy_feats_compress=true
skip_cuda_check=false     # (ignored)
verbose=1                 # (ignored)
rbm_extra_opts=           # (refused)
feature_transform=        # (refused: the DBN makes its own, final.feature_transform)
feature_transform_proto=  # (refused)
ivector=                  # (refused)
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
  --cmvn-opts <opts>  --delta-opts <opts>   # Kaldi nnet1's form of --apply-cmvn, --delta-order
  --num-threads <n>            # threads of the training process (default $num_threads)
  --device <cpu|cuda>     # where the RBMs train (default $device)
  --cmd <run.pl ...>      # job runner (default: run directly)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1
. steps/libs/nnet1_opts.sh
nnet1_feature_opts
[ "$input_vis_type" = gauss ] || nnet1_refuse input-vis-type "$input_vis_type" "only gauss (a Gaussian-Bernoulli first RBM)"
for o in param_stddev_first param_stddev; do
  [ "${!o}" = 0.1 ] || nnet1_refuse "${o//_/-}" "${!o}" "only 0.1 (pynnet's RBMs start from weights of std 0.1)"
done
nnet1_refuse rbm-extra-opts "$rbm_extra_opts" "not supported"
nnet1_refuse feature-transform "$feature_transform" "pynnet's pretraining makes its own (splice + global CMVN)"
nnet1_refuse feature-transform-proto "$feature_transform_proto" "not supported"
nnet1_refuse ivector "$ivector" "i-vector inputs are not supported"
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
nnet1_write_feature_opts "$dir"

opts=(--nn-depth "$nn_depth" --hid-dim "$hid_dim" --rbm-iter "$rbm_iter" --rbm-lrate "$rbm_lrate"
      --rbm-lrate-low "$rbm_lrate_low" --rbm-l2penalty "$rbm_l2penalty" --minibatch-size "$minibatch_size"
      --splice "$splice" --apply-cmvn "$apply_cmvn" --delta-order "$delta_order" --seed "$seed"
      --device "$device")
echo "$0: pretraining $nn_depth RBMs of $hid_dim units on $data (log: $dir/log/pretrain.log)"
# progress bars on the terminal (not through tee or into $cmd's log: they would fill the log);
# the time estimates are messages, in the log too
[ -t 2 ] && export PYNNET_PROGRESS_TTY=1
if [ -n "$cmd" ]; then
  $cmd "$dir/log/pretrain.log" pynnet-rbm-train "${opts[@]}" "$data" "$dir" || {
    echo "$0: pretraining failed: $(grep -m1 '^ERROR' "$dir/log/pretrain.log") (see $dir/log/pretrain.log)" >&2; exit 1; }
else
  pynnet-rbm-train "${opts[@]}" "$data" "$dir" 2> >(tee -a "$dir/log/pretrain.log" >&2) || {
    echo "$0: pretraining failed (see $dir/log/pretrain.log)" >&2; exit 1; }
fi
[ -f "$dir/final.dbn" ] || { echo "$0: no $dir/final.dbn was written" >&2; exit 1; }
for f in "$dir"/[0-9]*.dbn; do [ -L "$f" ] && rm -f "$f"; done   # (a shallower run's name)
ln -sfn final.dbn "$dir/$nn_depth.dbn"   # (the name Kaldi's recipes give the DBN)
echo "$0: done: $dir/final.dbn ($dir/$nn_depth.dbn), $dir/final.feature_transform"
echo "$0: reconstruction errors per RBM and epoch: $dir/log/rbm.json"
exit 0
