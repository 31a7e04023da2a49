#!/usr/bin/env bash
# DNN cross-entropy training on GMM alignments (Kaldi's steps/nnet/train.sh + train_scheduler.sh).
# Frames of <data> (feats.scp, per-speaker CMVN from cmvn.scp if present) spliced +-5 with a global
# CMVN computed here; targets are the pdfs of <ali-dir>/ali.*.gz through <ali-dir>/final.mdl;
# 10% of the utterances are held out for cross-validation (or, in Kaldi nnet1's six-argument form,
# <data-cv> aligned in <ali-cv> is the CV set and all of <data-tr> trains); newbob learning rate (nnet1) or
# exponential decay (nnet2); NG-SGD (default), SGD or AdaGrad.
# Writes <exp-dir>/{nnet.init,final.nnet,final.mdl,tree,log/train.log,log/train.json,train_curve.png}.
# Interrupted? Rerun the same command: it resumes exactly from <exp-dir>/checkpoint.pt.

# Begin configuration section.
cmd=            # if set (e.g. run.pl), run the training through it (log in <exp-dir>/log/train.log)
dbn=            # initialise the hidden layers from this DBN (steps/nnet/pretrain_dbn.sh)
nn_depth=            # hidden layers (empty: 4, Kaldi nnet1's, or the DBN's with --dbn)
hid_dim=             # units per hidden layer (empty: 1024, or the DBN's)
activation=          # sigmoid | relu | pnorm (empty: sigmoid; a DBN's layers are sigmoid)
optimizer=ngsgd      # ngsgd | sgd | adagrad
learn_rate=0.008
momentum=0.0
minibatch_size=256
schedule=newbob      # newbob | exponential
max_epochs=20
start_halving_impr=0.01
end_halving_impr=0.001
halving_factor=0.5
num_epochs=4         # exponential: epochs of decay from learn_rate to final_learn_rate,
final_learn_rate=0.0008
num_epochs_extra=1   # then epochs at final_learn_rate (nnet2 train_pnorm_fast.sh: 15 + 5)
splice=              # frames of context each side (empty: 5, or the DBN's)
apply_cmvn=auto      # per-speaker mean normalisation from <data>/cmvn.scp: true|false|auto
delta_order=0
cv_percent=10
buffer_frames=32768
checkpoint_every=1000
seed=777
num_threads=         # torch threads per rank (empty: 1; with --num-workers K: cores / K; exact resume needs the same)
device=cpu           # cpu | cuda
# Data-parallel training (pynnet.parallel; docs/notes/parallel.md)
num_workers=1        # K ranks started by --mpirun (1: one process, no MPI)
sync=average         # average (model averaging, Su & Chen) | allreduce (fp32 gradients) | average-1bit
                     # | 1bit (1-bit SGD, Seide et al.: --optimizer adagrad|sgd, global --minibatch-size)
average_every=10     # minibatches between averages, or auto: the period at which the averages take
                     # --comm-share of the step time, by the calibrated model (pynnet-parallel-model)
comm_share=0.05      # --average-every auto: the averages' target share of the step time
calibration=         # --average-every auto: pynnet-parallel-model --calibrate's file (empty: measured
                     # into <exp-dir>/calibration.json once, before the training)
double_buffering=false  # 1bit: exchange one half-minibatch's gradient while computing the next
error_feedback=true  # 1bit, average-1bit: carry the quantization error into the next exchange
lr_scaling=linear    # learning rate times K | sqrt(K) | 1 (none)
model_parallel=1     # M: groups of M workers split every layer (model parallelism); K/M groups train
                     # data-parallel by --sync (Seide's 4 x 2: --num-workers 8 --model-parallel 2)
comm_backend=mpi     # mpi (mpi4py) | torch (torch.distributed: gloo on CPUs, nccl on GPUs)
comm_timeout=        # seconds a collective waits before the job ends naming the missing rank (default 45)
elastic=false        # true: averaging goes on without a rank that is lost (over torch.distributed; the
                     # ranks are started by pynnet-mpirun itself, on this host; a --mpirun of your own
                     # must not kill the others when one dies: srun --kill-on-bad-exit=0)
mpirun=              # the MPI launcher (default "mpiexec -n K"; e.g. "mpiexec -n 8 -f hosts", "srun --mpi=pmi2")
# Kaldi nnet1's options
hid_layers=          # = --nn-depth (with --dbn: hidden layers on top of the DBN's; only 0)
feature_transform=   # nnet1 feature transform (Splice, AddShift, Rescale), e.g. <dbn-dir>/final.feature_transform;
                     # its dir's cmvn_opts/delta_opts apply (as in Kaldi)
cmvn_opts=           # apply-cmvn options: given, per-speaker mean normalisation (sets --apply-cmvn)
delta_opts=          # add-deltas options: given, deltas (--delta-order=N, default 2)
network_type=dnn     # (dnn only)
feat_type=plain      # (plain only)
feats_std=1.0        # (1.0 only)
copy_feats=true      # (ignored: features are read where they are)
copy_feats_tmproot=
copy_feats_compress=true
skip_cuda_check=false      # (ignored)
skip_phoneset_check=false  # (ignored)
nnet_init=; nnet_proto=; proto_opts=; bn_dim=; labels=; num_tgt=; ivector=; online_cmvn_opts=
scheduler_opts=; train_tool=; train_tool_opts=; frame_weights=; utt_weights=; split_feats=
feature_transform_proto=; transf=   # (all refused when given)
# End configuration section.

help_message="Usage: $0 [options] <data> <lang> <ali-dir> <exp-dir>
   or: $0 [options] <data-tr> <data-cv> <lang> <ali-tr> <ali-cv> <exp-dir>   (Kaldi nnet1's form)
 e.g.: $0 --dbn exp/dbn/final.dbn data-fbank/train data/lang exp/tri2_ali exp/dnn
Options:
  --dbn <file>                 # DBN to initialise the hidden layers (it decides the options below)
  --nn-depth <n>               # hidden layers (default 4; Kaldi's --hid-layers)
  --hid-dim <n>                # hidden units (default 1024)
  --feature-transform <file>   # Kaldi nnet1 input transform (default: splice + global CMVN of <data>)
  --cmvn-opts <opts>  --delta-opts <opts>   # Kaldi nnet1's form of --apply-cmvn, --delta-order
  --activation <sigmoid|relu|pnorm>  (default sigmoid)
  --splice <n>                 # frames of context each side (default 5)
  --optimizer <ngsgd|sgd|adagrad>  (default $optimizer)
  --learn-rate <lr>            # per frame; gradients are sums over the minibatch (default $learn_rate)
  --minibatch-size <n>         # (default $minibatch_size)
  --schedule <newbob|exponential>  --max-epochs <n>  (newbob)
  --num-epochs <n>  --final-learn-rate <lr>  --num-epochs-extra <n>  (exponential, decayed per minibatch)
  --cv-percent <p>             # utterances held out for cross-validation (default $cv_percent; 4 arguments)
  --device <cpu|cuda>          # (default $device)
  --num-threads <n>            # threads per training process (default 1; with --num-workers K: cores / K)
  --num-workers <K>            # data-parallel ranks (default 1), started by --mpirun (default: mpiexec -n K)
  --sync <average|allreduce|average-1bit|1bit>  --average-every <n|auto>  --lr-scaling <linear|sqrt|none>
  --comm-share <f>  --calibration <file>   (--average-every auto)
  --model-parallel <M>         # split every layer over groups of M workers (default 1)
  --double-buffering <true|false>  --error-feedback <true|false>   (1bit)
  --comm-backend <mpi|torch>  --comm-timeout <s>  --mpirun <launcher command>
  --elastic <true|false>       # averaging survives a lost rank (docs/notes/parallel.md, Faults)
  --cmd <run.pl ...>           # job runner for the training job (default: run directly)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1
. steps/libs/nnet1_opts.sh
if [ -n "$feature_transform" ]; then   # (Kaldi: the transform's input pipeline comes with it)
  [ -f "$feature_transform" ] || { echo "$0: no such file $feature_transform" >&2; exit 1; }
  d=$(dirname "$feature_transform")
  [ -f "$d/cmvn_opts" ] && cmvn_opts=$(cat "$d/cmvn_opts")
  [ -f "$d/delta_opts" ] && delta_opts=$(cat "$d/delta_opts")
fi
nnet1_feature_opts
if [ -n "$hid_layers" ]; then
  if [ -n "$dbn" ]; then
    [ "$hid_layers" = 0 ] || nnet1_refuse hid-layers "$hid_layers" "with --dbn only 0 (no hidden layers added on top of the DBN's)"
  elif [ -n "$nn_depth" ] && [ "$nn_depth" != "$hid_layers" ]; then
    nnet1_refuse hid-layers "$hid_layers" "--nn-depth says $nn_depth"
  else
    nn_depth=$hid_layers
  fi
fi
[ "$network_type" = dnn ] || nnet1_refuse network-type "$network_type" "only dnn (feed-forward)"
[ "$feat_type" = plain ] || nnet1_refuse feat-type "$feat_type" "only plain"
[ "$feats_std" = 1.0 ] || [ "$feats_std" = 1 ] || nnet1_refuse feats-std "$feats_std" "only 1.0"
for o in nnet_init nnet_proto proto_opts bn_dim labels num_tgt ivector online_cmvn_opts scheduler_opts \
    train_tool train_tool_opts frame_weights utt_weights split_feats feature_transform_proto transf; do
  nnet1_refuse "${o//_/-}" "${!o}" "not supported by pynnet's steps/nnet/train.sh"
done
case "$num_workers" in ''|*[!0-9]*|0) echo "$0: --num-workers must be a positive integer, not '$num_workers'" >&2; exit 1 ;; esac
case "$model_parallel" in ''|*[!0-9]*|0) echo "$0: --model-parallel must be a positive integer, not '$model_parallel'" >&2; exit 1 ;; esac
[ $((num_workers % model_parallel)) -eq 0 ] || {
  echo "$0: --model-parallel $model_parallel must divide --num-workers $num_workers" >&2; exit 1; }
if [ -z "$num_threads" ]; then
  num_threads=1
  if [ "$num_workers" -gt 1 ]; then num_threads=$(( $(nproc) / num_workers )); [ "$num_threads" -ge 1 ] || num_threads=1; fi
fi
case "$num_threads" in *[!0-9]*|0) echo "$0: --num-threads must be a positive integer" >&2; exit 1 ;; esac
export OMP_NUM_THREADS=$num_threads

cv_opts=(--cv-percent "$cv_percent")
if [ $# -eq 6 ]; then
  data=$1; cv_data=$2; lang=$3; alidir=$4; cv_alidir=$5; dir=$6
  for f in "$cv_data/feats.scp" "$cv_alidir/final.mdl" "$cv_alidir/ali.1.gz"; do
    [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
  done
  cv_opts=(--cv-data "$cv_data" --cv-ali "$cv_alidir")
elif [ $# -eq 4 ]; then
  data=$1; lang=$2; alidir=$3; dir=$4
else
  printf "%s\n" "$help_message" >&2
  exit 1
fi

for f in "$data/feats.scp" "$alidir/final.mdl" "$alidir/ali.1.gz"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done
[ -d "$lang" ] || { echo "$0: no such directory $lang" >&2; exit 1; }
[ -z "$dbn" ] || [ -f "$dbn" ] || { echo "$0: no such file $dbn" >&2; exit 1; }

mkdir -p "$dir/log"
nnet1_write_feature_opts "$dir"
cp "$alidir/final.mdl" "$dir/final.mdl"
[ -f "$alidir/tree" ] && cp "$alidir/tree" "$dir/tree"
[ -f "$lang/phones.txt" ] && cp "$lang/phones.txt" "$dir/phones.txt"

opts=(--optimizer "$optimizer"
      --learn-rate "$learn_rate" --momentum "$momentum" --minibatch-size "$minibatch_size"
      --schedule "$schedule" --max-epochs "$max_epochs" --start-halving-impr "$start_halving_impr"
      --end-halving-impr "$end_halving_impr" --halving-factor "$halving_factor" --num-epochs "$num_epochs"
      --final-learn-rate "$final_learn_rate" --num-epochs-extra "$num_epochs_extra" --apply-cmvn "$apply_cmvn"
      --delta-order "$delta_order" "${cv_opts[@]}" --buffer-frames "$buffer_frames"
      --checkpoint-every "$checkpoint_every" --seed "$seed" --device "$device")
[ -n "$dbn" ] && opts+=(--dbn "$dbn")
[ -n "$feature_transform" ] && opts+=(--feature-transform "$feature_transform")
# the model's shape: only what was given (with --dbn the DBN's, which a given value must match)
[ -n "$nn_depth" ] && opts+=(--nn-depth "$nn_depth")
[ -n "$hid_dim" ] && opts+=(--hid-dim "$hid_dim")
[ -n "$activation" ] && opts+=(--activation "$activation")
[ -n "$splice" ] && opts+=(--splice "$splice")
launch=()
if [ "$num_workers" -gt 1 ]; then
  opts+=(--num-workers "$num_workers" --sync "$sync" --average-every "$average_every" --lr-scaling "$lr_scaling"
         --model-parallel "$model_parallel"
         --double-buffering "$double_buffering" --error-feedback "$error_feedback")
  [ -n "$comm_timeout" ] && opts+=(--comm-timeout "$comm_timeout")
  if [ "$elastic" = true ]; then
    opts+=(--elastic true)
    [ "$comm_backend" = mpi ] && comm_backend=torch   # (the elastic job's backend)
  fi
  if [ "$average_every" = auto ]; then
    if [ -z "$calibration" ]; then
      calibration=$dir/calibration.json
      if [ ! -f "$calibration" ]; then
        echo "$0: --average-every auto: measuring this machine into $calibration (log: $dir/log/calibrate.log)"
        pynnet-parallel-model --calibrate --out "$calibration" > "$dir/log/calibrate.log" 2>&1 || {
          echo "$0: the calibration failed: $(grep -m1 '^ERROR' "$dir/log/calibrate.log") (see $dir/log/calibrate.log)" >&2; exit 1; }
      fi
    fi
    opts+=(--comm-share "$comm_share" --calibration "$calibration")
  fi
  opts+=(--comm-backend "$comm_backend")
  launch=(pynnet-mpirun --num-workers "$num_workers" --comm-backend "$comm_backend" --log-dir "$dir/log"
          --elastic "$elastic" --mpirun "${mpirun:-$([ "$elastic" = true ] || echo "mpiexec -n $num_workers")}" --)
fi

echo "$0: training $dir from $data and $alidir (log: $dir/log/train.log)" \
  "$([ "$num_workers" -gt 1 ] && echo "on $num_workers workers ($sync$([ "$model_parallel" -gt 1 ] && echo ", model-parallel groups of $model_parallel"), $num_threads threads each)")"
if [ -n "$cmd" ]; then
  $cmd "$dir/log/train.log" "${launch[@]}" pynnet-nnet-train "${opts[@]}" "$data" "$alidir" "$dir" || {
    echo "$0: training failed: $(grep -m1 '^ERROR' "$dir/log/train.log") (see $dir/log/train.log)" >&2; exit 1; }
else
  # progress bars on the terminal (not through tee: they would fill the log), everything else also
  # in the log
  [ -t 2 ] && export PYNNET_PROGRESS_TTY=1
  "${launch[@]}" pynnet-nnet-train "${opts[@]}" "$data" "$alidir" "$dir" 2> >(tee -a "$dir/log/train.log" >&2) || {
    echo "$0: training failed (see $dir/log/train.log)" >&2; exit 1; }
  wait $! 2>/dev/null || true   # tee may still be writing the log's last lines (read below)
fi
[ -f "$dir/final.nnet" ] || { echo "$0: no $dir/final.nnet was written" >&2; exit 1; }
# The last epoch's lines: only when $cmd sent them to the log alone (without --cmd the user has
# just seen them, through tee)
[ -n "$cmd" ] && grep -h "^epoch\|^finished\|final.nnet" "$dir/log/train.log" | tail -n 3
echo "$0: done: $dir/final.nnet"
msg="$0: per-epoch losses and frame accuracies: $dir/log/train.json"
[ -f "$dir/train_curve.png" ] && msg="$msg, plotted in $dir/train_curve.png"
echo "$msg"
exit 0
