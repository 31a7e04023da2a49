#!/usr/bin/env bash
# Sequence-discriminative training of a DNN (Kaldi nnet1's steps/nnet/train_mpe.sh): sMBR (default)
# or MPE (--do-smbr false: phone-level accuracy, MPFE), --num-iters passes of SGD with
# per-utterance updates (pynnet-nnet-train-sequential), starting from <src-dir>'s DNN, against
# the numerator alignments in <ali-dir> (steps/nnet/align.sh) and the denominator lattices in
# <denlat-dir> (steps/nnet/make_denlats.sh).
# Writes <exp-dir>/{0.nnet,1.nnet,...,final.nnet -> N.nnet,final.mdl,tree,phones.txt,
# log/mpe.N.log,log/train.json,log/train.png,prior_counts}. Interrupted? Rerun: finished passes (N.nnet) are kept,
# the interrupted one is redone from the start (same seed: the same result).
# steps/nnet/train_mmi.sh runs this script for MMI (log/mmi.N.log; --drop-frames).

# Begin configuration section.
cmd=run.pl
num_iters=4
acwt=0.1
lmwt=1.0
learn_rate=0.00001
momentum=0.0
halving_factor=1.0   # learning rate x this after each pass (1.0: no halving)
do_smbr=true         # true: sMBR; false: MPE (phone-frame accuracy)
one_silence_class=true  # all silence phones one class in the accuracies (false: silence frames count as wrong)
silphonelist=        # colon-separated silence phone ids (default: <lang>/phones/silence.csl)
nnet=                # default: <src-dir>/final.nnet
seed=777             # utterance order
drop_frames=true     # (MMI) frames whose reference pdf has no denominator posterior are dropped
use_gpu=no           # yes|no|optional|wait
# Kaldi nnet1 options
unkphonelist=        # (deprecated in Kaldi: ignored with a warning)
exclude_silphones=   # (deprecated in Kaldi: ignored with a warning)
verbose=0            # (ignored)
skip_cuda_check=false  # (ignored: CPU is the default)
boost=0.0            # (MMI; ignored, as by Kaldi's train_mmi.sh, which does not pass it on)
ivector=             # (refused: i-vectors are not supported)
# End configuration section.

script=${__pynnet_seq_script:-$0}
mode=${__pynnet_seq_criterion:-mpe}   # mpe (this script) | mmi (steps/nnet/train_mmi.sh)
help_message="Usage: $script [options] <data> <lang> <src-dir> <ali-dir> <denlat-dir> <exp-dir>
 e.g.: $script --num-iters 4 --acwt 0.1 data-fbank/train data/lang exp/dnn exp/dnn_ali exp/dnn_denlats exp/dnn_smbr
Options:
  --cmd <cmd>                  # job runner (default $cmd)
  --num-iters <n>              # passes over the data (default $num_iters)
  --acwt <f>                   # acoustic scale (default $acwt)
  --lmwt <f>                   # language-model scale (default $lmwt)
  --learn-rate <f>             # per-utterance SGD learning rate (default $learn_rate)
  --momentum <f>               # (default $momentum)
  --halving-factor <f>         # learning rate x this after each pass (default $halving_factor)
  --do-smbr <true|false>       # (MPE) sMBR, else MPE (default $do_smbr)
  --one-silence-class <true|false> # (MPE) (default $one_silence_class)
  --drop-frames <true|false>   # (MMI) (default $drop_frames)
  --use-gpu <yes|no|optional>  # (default $use_gpu)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 6 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
set -euo pipefail

data=$1
lang=$2
srcdir=$3
alidir=$4
denlatdir=$5
dir=$6

[ -n "$ivector" ] && { echo "$script: --ivector $ivector: i-vector inputs are not supported" >&2; exit 1; }
case "$use_gpu" in
  yes|no|optional|wait) ;;
  *) echo "$script: --use-gpu must be yes, no, optional or wait, not '$use_gpu'" >&2; exit 1 ;;
esac
[[ $num_iters =~ ^[1-9][0-9]*$ ]] || { echo "$script: --num-iters must be a positive integer, not '$num_iters'" >&2; exit 1; }
[ -n "$unkphonelist" ] && echo "$script: WARNING: --unkphonelist is deprecated (in Kaldi too) and ignored"
[ -n "$exclude_silphones" ] && echo "$script: WARNING: --exclude-silphones is deprecated (in Kaldi too) and ignored"
[ -z "$nnet" ] && nnet=$srcdir/final.nnet
for f in $data/feats.scp $lang/phones.txt $lang/phones/silence.csl $alidir/final.mdl $alidir/tree \
    $alidir/ali.1.gz $denlatdir/lat.1.gz $nnet; do
  [ -f $f ] || { echo "$script: no such file $f" >&2; exit 1; }
done
utils/lang/check_phones_compatible.sh $lang/phones.txt $srcdir/phones.txt || exit 1
utils/lang/check_phones_compatible.sh $lang/phones.txt $alidir/phones.txt || exit 1

mkdir -p $dir/log
cp $lang/phones.txt $dir
cp -L $alidir/final.mdl $dir/final.mdl
cp $alidir/tree $dir/tree
[ -z "$silphonelist" ] && silphonelist=$(cat $lang/phones/silence.csl)
[ -f $dir/0.nnet ] || cp -L "$nnet" $dir/0.nnet
criterion=smbr; [ "$do_smbr" = true ] || criterion=mpfe
[ "$mode" = mmi ] && criterion=mmi

cur=$dir/0.nnet
for x in $(seq $num_iters); do
  echo "$script: pass $x (learning rate $learn_rate)"
  if [ -f $dir/$x.nnet ]; then
    echo "$script: skipped, $dir/$x.nnet exists"
  else
    # (the program writes $x.nnet only when the pass is complete)
    if ! $cmd $dir/log/$mode.$x.log \
        pynnet-nnet-train-sequential --criterion $criterion --acoustic-scale $acwt --lm-scale $lmwt \
          --learn-rate $learn_rate --momentum $momentum --one-silence-class $one_silence_class \
          --drop-frames $drop_frames --silence-phones "$silphonelist" --seed $((seed + x - 1)) --use-gpu $use_gpu \
          --iter $x --history $dir/log/train.json \
          $cur $dir/final.mdl $data $denlatdir $alidir $dir/$x.nnet; then
      echo "$script: pass $x failed: $(grep -m1 "^ERROR" $dir/log/$mode.$x.log || tail -1 $dir/log/$mode.$x.log) (see $dir/log/$mode.$x.log)" >&2
      exit 1
    fi
  fi
  grep "Overall average" $dir/log/$mode.$x.log | sed 's/^LOG ([^)]*) /  /' || true
  cur=$dir/$x.nnet
  learn_rate=$(awk -v r=$learn_rate -v h=$halving_factor 'BEGIN { print r * h }')
done
ln -sfn $num_iters.nnet $dir/final.nnet
# the priors of the sequence-trained network, from its own posteriors (Kaldi's make_priors.sh;
# steps/nnet/decode.sh prefers <dir>/prior_counts to the model's priors)
if [ -f $dir/prior_counts ] && [ $dir/prior_counts -nt $dir/$num_iters.nnet ]; then
  echo "$script: priors already re-estimated ($dir/prior_counts)"
else
  steps/nnet/make_priors.sh --cmd "$cmd" --nj $(cat $alidir/num_jobs 2>/dev/null || echo 4) --use-gpu $use_gpu $data $dir
fi
echo "$script: done: $dir/final.nnet ($criterion, $num_iters passes; decode with steps/nnet/decode.sh --nnet $dir/final.nnet)"
