#!/usr/bin/env bash
# Flat-start monophone GMM-HMM training (Kaldi's steps/train_mono.sh).
# Global mean/variance -> one Gaussian per pdf; equal alignment for pass 0; then EM passes with
# Viterbi realignment on --realign-iters and Gaussians added each pass up to --totgauss.
# Writes <exp-dir>/{0.mdl,1.mdl,...,final.mdl,tree,final.occs,ali.JOB.gz,fsts.JOB.gz,num_jobs,
# cmvn_opts,delta_opts,phones.txt,log/}.

# Begin configuration section.
nj=4
cmd=run.pl
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"
num_iters=40     # number of EM passes
max_iter_inc=30  # Gaussians are added up to this pass
totgauss=1000    # target total number of Gaussians
initial_beam=6   # beam of the first pass
regular_beam=10  # beam after the first pass
retry_beam=40
careful=false
boost_silence=1.0  # factor on silence likelihoods during alignment
realign_iters="1 2 3 4 5 6 7 8 9 10 12 14 16 18 20 23 26 29 32 35 38"
power=0.25       # Gaussians per pdf ~ occupancy^power
cmvn_opts=       # e.g. "--norm-vars=true"
norm_vars=false
delta_opts=      # add-deltas options, e.g. "--delta-order=3" (default: order 2)
stage=-4
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <exp-dir>
 e.g.: $0 data/train data/lang exp/mono
Options:
  --nj <nj>                 # number of parallel jobs (default $nj)
  --cmd <cmd>               # job runner, e.g. run.pl (default $cmd)
  --num-iters <n>           # EM passes (default $num_iters)
  --totgauss <n>            # target number of Gaussians (default $totgauss)
  --boost-silence <f>       # silence likelihood factor in alignment (default $boost_silence)
  --realign-iters <list>    # passes that realign (default \"$realign_iters\")
  --power <f>               # mix-up power (default $power)
  --cmvn-opts <opts>        # CMVN options, e.g. \"--norm-vars=true\" (default: mean normalisation)
  --delta-opts <opts>       # add-deltas options, e.g. \"--delta-order=3\" (default: order 2)
  --initial-beam <f>        # alignment beam of the first pass (default $initial_beam)
  --regular-beam <f>        # alignment beam after it (default $regular_beam)
  --retry-beam <f>          # beam of the retry of a failed alignment (default $retry_beam)
  --stage <stage>           # resume from this stage (default $stage)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
set -euo pipefail

data=$1
lang=$2
dir=$3

for f in $data/feats.scp $data/text $data/utt2spk $lang/topo $lang/L.fst $lang/words.txt \
    $lang/phones/sets.int $lang/phones/optional_silence.csl; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
jobs_check_nj "$nj"
cmd="jobs_report $cmd"  # a failed job's ERROR line is the reason given
[ "$norm_vars" = true ] && cmvn_opts="--norm-vars=true $cmvn_opts"
if [ -z "$cmvn_opts" ] || ! echo "$cmvn_opts" | grep -q -- "--norm-means=false"; then
  [ -f $data/cmvn.scp ] || { echo "$0: no such file $data/cmvn.scp (run steps/compute_cmvn_stats.sh)" >&2; exit 1; }
fi

. steps/libs/train_gmm.sh
gmm_train_setup  # sdata, feat_opts, cache_opts, boost_opts

if [ $stage -le -3 ]; then
  echo "$0: initializing monophone system"
  # JOB=1: the first part of the data is enough for the global mean and variance.
  $cmd JOB=1 $dir/log/init.log \
    pynnet-gmm-init-mono "${feat_opts[@]}" --num-utts 200 --shared-phones $lang/phones/sets.int \
      $lang/topo $sdata/JOB $dir/0.mdl $dir/tree
fi

numgauss=$(pynnet-gmm-info $dir/0.mdl | awk '/gaussians/{print $NF}')
incgauss=$(( (totgauss - numgauss) / max_iter_inc ))

if [ $stage -le -2 ]; then
  echo "$0: compiling training graphs"
  $cmd JOB=1:$nj $dir/log/compile_graphs.JOB.log \
    pynnet-compile-train-graphs $dir/tree $dir/0.mdl $lang $sdata/JOB $dir/fsts.JOB.gz
fi

if [ $stage -le -1 ]; then
  echo "$0: aligning data equally (pass 0)"
  $cmd JOB=1:$nj $dir/log/align.0.JOB.log \
    pynnet-align-equal-compiled "${feat_opts[@]}" $dir/fsts.JOB.gz $sdata/JOB $dir/ali.JOB.gz
  $cmd JOB=1:$nj $dir/log/acc.0.JOB.log \
    pynnet-gmm-acc-stats-ali "${feat_opts[@]}" $cache_opts $dir/0.mdl $sdata/JOB $dir/ali.JOB.gz $dir/0.JOB.acc
fi

# --min-gaussian-occupancy 3 on the first update: otherwise rare phones are not estimated and
# never align properly later.
if [ $stage -le 0 ]; then
  $cmd $dir/log/update.0.log \
    pynnet-gmm-est --min-gaussian-occupancy 3 --mix-up $numgauss --power $power \
      $dir/0.mdl $(for n in $(seq $nj); do echo $dir/0.$n.acc; done) $dir/1.mdl
  rm -f $dir/0.*.acc
fi

beam=$initial_beam  # $regular_beam after the first pass
x=1
while [ $x -lt $num_iters ]; do
  echo "$0: pass $x"
  if [ $stage -le $x ]; then
    gmm_train_pass $x $beam $retry_beam
  fi
  if [ $x -le $max_iter_inc ]; then
    numgauss=$((numgauss + incgauss))
  fi
  beam=$regular_beam
  x=$((x + 1))
done

gmm_train_finish $x
echo "$0: Done training monophone system in $dir"
