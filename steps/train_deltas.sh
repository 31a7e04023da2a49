#!/usr/bin/env bash
# Triphone GMM-HMM training on delta features (Kaldi's steps/train_deltas.sh): tree statistics
# from the source alignments, questions by phone clustering, a decision tree with <num-leaves>
# leaves, model initialised from the tree stats, alignments converted to the new tree, then EM
# passes with realignment on --realign-iters and Gaussians added up to <tot-gauss>.
# Writes <exp-dir>/{1.mdl..final.mdl,tree,questions.qst,final.occs,ali.JOB.gz,fsts.JOB.gz,num_jobs,
# cmvn_opts,delta_opts,phones.txt,log/}.

# Begin configuration section.
stage=-4
cmd=run.pl
nj=            # default: as many jobs as the alignment dir has (Kaldi takes its num_jobs)
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"
realign_iters="10 20 30"
num_iters=35     # number of EM passes
max_iter_inc=25  # Gaussians are added up to this pass
beam=10
careful=false
retry_beam=40
boost_silence=1.0  # factor on silence likelihoods in alignment
power=0.25       # Gaussians per pdf ~ occupancy^power
cluster_thresh=-1  # for build-tree post-clustering
delta_opts=      # add-deltas options, e.g. "--delta-order=3" (default: order 2)
cmvn_opts=       # default: as the alignment dir's
norm_vars=false  # deprecated (Kaldi's too): prefer --cmvn-opts "--norm-vars=true"
context_opts=    # e.g. "--context-width 3 --central-position 1"
# End configuration section.

help_message="Usage: $0 [options] <num-leaves> <tot-gauss> <data-dir> <lang-dir> <ali-dir> <exp-dir>
 e.g.: $0 2000 10000 data/train data/lang exp/mono_ali exp/tri1
Options:
  --cmd <cmd>               # job runner (default $cmd)
  --nj <nj>                 # must equal the alignment dir's num_jobs (the default)
  --num-iters <n>           # EM passes (default $num_iters)
  --realign-iters <list>    # passes that realign (default \"$realign_iters\")
  --boost-silence <f>       # silence likelihood factor in alignment (default $boost_silence)
  --power <f>               # mix-up power (default $power)
  --delta-opts <opts>       # add-deltas options, e.g. \"--delta-order=3\" (default: order 2)
  --stage <stage>           # resume from this stage (default $stage)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 6 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
set -euo pipefail

numleaves=$1
totgauss=$2
data=$3
lang=$4
alidir=$5
dir=$6

for f in $alidir/final.mdl $alidir/ali.1.gz $alidir/num_jobs $data/feats.scp $data/text $lang/phones.txt \
    $lang/topo $lang/L.fst $lang/phones/roots.int $lang/phones/sets.int $lang/phones/context_indep.csl \
    $lang/phones/optional_silence.csl; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
[ -z "$nj" ] || jobs_check_nj "$nj"
# A model trained with another phone set cannot be trained on with this lang dir.
utils/lang/check_phones_compatible.sh $alidir/phones.txt $lang/phones.txt || exit 1
cmd="jobs_report $cmd"  # a failed job's ERROR line is the reason given
case "$numleaves$totgauss" in *[!0-9]*|"") echo "$0: <num-leaves> and <tot-gauss> must be integers" >&2; exit 1;; esac

ali_nj=$(cat $alidir/num_jobs)
if [ -n "$nj" ] && [ "$nj" != "$ali_nj" ]; then
  echo "$0: --nj $nj differs from the $ali_nj jobs of $alidir; using $ali_nj" >&2
fi
nj=$ali_nj
numgauss=$numleaves
incgauss=$(( (totgauss - numgauss) / max_iter_inc ))
oov=$(cat $lang/oov.int)
ciphonelist=$(cat $lang/phones/context_indep.csl)

[ -z "$cmvn_opts" ] && cmvn_opts=$(cat $alidir/cmvn_opts 2>/dev/null || true)
[ "$norm_vars" = true ] && cmvn_opts="--norm-vars=true $cmvn_opts"
. steps/libs/train_gmm.sh
gmm_train_setup  # sdata, feat_opts, cache_opts, boost_opts

gmm_build_tree  # stages -3..0

x=1
while [ $x -lt $num_iters ]; do
  echo "$0: training pass $x"
  if [ $stage -le $x ]; then
    gmm_train_pass $x $beam $retry_beam
  fi
  [ $x -le $max_iter_inc ] && numgauss=$((numgauss + incgauss))
  x=$((x + 1))
done

gmm_train_finish $x
echo "$0: Done training system with delta+delta-delta features in $dir"
