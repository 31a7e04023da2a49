#!/usr/bin/env bash
# Triphone GMM-HMM training on LDA+MLLT features (Kaldi's steps/train_lda_mllt.sh): CMVN features
# spliced (--splice-opts; splice-feats' +-4 frames by default), LDA to --dim from pdf-level class statistics of the source alignments
# (silence weighted 0), a decision tree on those features, then EM passes in which MLLT (a
# semi-tied covariance transform) is re-estimated on --mllt-iters and composed into the
# transform, the model's means transformed with it; realignment on --realign-iters.
# Writes <exp-dir>/{final.mdl,final.mat (the LDA+MLLT transform, Kaldi's format),full.mat,
# splice_opts,cmvn_opts,tree,ali.JOB.gz,fsts.JOB.gz,final.occs,num_jobs,phones.txt,log/}.

# Begin configuration section.
stage=-5
cmd=run.pl
nj=            # default: as many jobs as the alignment dir has (Kaldi takes its num_jobs)
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"
realign_iters="10 20 30"
mllt_iters="2 4 6 12"
num_iters=35     # number of EM passes
max_iter_inc=25  # Gaussians are added up to this pass
dim=40           # LDA output dimension
beam=10
careful=false
retry_beam=40
boost_silence=1.0
power=0.25       # Gaussians per pdf ~ occupancy^power
cluster_thresh=-1
splice_opts=     # splice-feats options (Kaldi's default: none, i.e. +-4 frames; its wsj recipe passes +-3)
cmvn_opts=       # default: as the alignment dir's
context_opts=
# End configuration section.

help_message="Usage: $0 [options] <num-leaves> <tot-gauss> <data-dir> <lang-dir> <ali-dir> <exp-dir>
 e.g.: $0 --splice-opts \"--left-context=3 --right-context=3\" 2500 15000 data/train data/lang exp/tri2_ali exp/tri3
Options:
  --cmd <cmd>               # job runner (default $cmd)
  --splice-opts <opts>      # splice-feats options (default: +-4 frames, splice-feats')
  --dim <n>                 # LDA dimension (default $dim)
  --mllt-iters <list>       # passes that re-estimate MLLT (default \"$mllt_iters\")
  --num-iters <n>           # EM passes (default $num_iters)
  --realign-iters <list>    # passes that realign (default \"$realign_iters\")
  --boost-silence <f>       # silence likelihood factor in alignment (default $boost_silence)
  --power <f>               # mix-up power (default $power)
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
    $lang/phones/silence.csl $lang/phones/optional_silence.csl; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
[ -z "$nj" ] || jobs_check_nj "$nj"
utils/lang/check_phones_compatible.sh $alidir/phones.txt $lang/phones.txt || exit 1
cmd="jobs_report $cmd"
case "$numleaves$totgauss$dim" in *[!0-9]*|"") echo "$0: <num-leaves>, <tot-gauss> and --dim must be integers" >&2; exit 1;; esac
for x in $mllt_iters; do
  case "$x" in *[!0-9]*) echo "$0: --mllt-iters: '$x' is not a pass number" >&2; exit 1;; esac
done

ali_nj=$(cat $alidir/num_jobs)
if [ -n "$nj" ] && [ "$nj" != "$ali_nj" ]; then
  echo "$0: --nj $nj differs from the $ali_nj jobs of $alidir; using $ali_nj" >&2
fi
nj=$ali_nj
numgauss=$numleaves
incgauss=$(( (totgauss - numgauss) / max_iter_inc ))
silphonelist=$(cat $lang/phones/silence.csl)
ciphonelist=$(cat $lang/phones/context_indep.csl)

[ -z "$cmvn_opts" ] && cmvn_opts=$(cat $alidir/cmvn_opts 2>/dev/null || true)
delta_opts=
. steps/libs/train_gmm.sh
gmm_train_setup  # sdata, cache_opts, boost_opts
rm -f $dir/delta_opts   # an LDA system's features: splice_opts + final.mat (as Kaldi's dirs)
[ -n "$splice_opts" ] || splice_opts="--left-context=4 --right-context=4"   # splice-feats' defaults
echo "$splice_opts" > $dir/splice_opts
# The source system's features (delta or LDA+MLLT) make the statistics of its alignments; this
# system's are CMVN -> splice -> <n>.mat (the feature cache holds the CMVN features only).
. steps/libs/gmm_feats.sh
spliced_opts=(--cmvn-opts "$cmvn_opts" --delta-order 0 --splice-opts "$splice_opts" $cache_opts)
lda_feats() { feat_opts=(--cmvn-opts "$cmvn_opts" --delta-order 0 --splice-opts "$splice_opts" --transform $dir/$1.mat); }

if [ $stage -le -5 ]; then
  echo "$0: accumulating LDA statistics"
  $cmd JOB=1:$nj $dir/log/lda_acc.JOB.log \
    pynnet-acc-lda "${spliced_opts[@]}" --silence-weight 0.0 --silence-phones $silphonelist \
      $alidir/final.mdl $sdata/JOB $alidir/ali.JOB.gz $dir/lda.JOB.acc
  $cmd $dir/log/lda_est.log \
    pynnet-est-lda --write-full-matrix $dir/full.mat --dim $dim $dir/0.mat \
      $(for n in $(seq $nj); do echo $dir/lda.$n.acc; done)
  rm -f $dir/lda.*.acc
fi

cur_lda_iter=0
lda_feats $cur_lda_iter
gmm_build_tree  # stages -3..0 (-4: as Kaldi's, nothing more)

x=1
while [ $x -lt $num_iters ]; do
  echo "$0: training pass $x"
  mllt=false
  echo " $mllt_iters " | grep -q " $x " && mllt=true
  if [ $stage -le $x ]; then
    if gmm_is_realign_pass $x; then
      # the statistics of this pass need the features of the new MLLT transform: align only
      if $mllt; then gmm_align_pass $x $beam $retry_beam; else gmm_align_pass $x $beam $retry_beam --acc-out $dir/$x.JOB.acc; fi
    fi
    if $mllt; then
      echo "$0: estimating MLLT"
      # <x>.mdl is rewritten with transformed means: keep the pass's own model until the pass is
      # done, so that a rerun of this pass starts from it again
      [ -f $dir/$x.premllt.mdl ] || cp $dir/$x.mdl $dir/$x.premllt.mdl
      $cmd JOB=1:$nj $dir/log/macc.$x.JOB.log \
        pynnet-gmm-acc-mllt "${feat_opts[@]}" $cache_opts --silence-weight 0.0 --silence-phones $silphonelist \
          $dir/$x.premllt.mdl $sdata/JOB $dir/ali.JOB.gz $dir/$x.JOB.macc
      $cmd $dir/log/mupdate.$x.log \
        pynnet-est-mllt $dir/$x.mat.new $(for n in $(seq $nj); do echo $dir/$x.$n.macc; done)
      $cmd $dir/log/transform_means.$x.log \
        pynnet-gmm-transform-means $dir/$x.mat.new $dir/$x.premllt.mdl $dir/$x.mdl
      $cmd $dir/log/compose.$x.log \
        pynnet-compose-transforms $dir/$x.mat.new $dir/$cur_lda_iter.mat $dir/$x.mat
      rm -f $dir/$x.*.macc $dir/$x.mat.new
    fi
  fi
  if $mllt; then
    cur_lda_iter=$x
    lda_feats $cur_lda_iter
  fi
  if [ $stage -le $x ]; then
    if $mllt || ! gmm_is_realign_pass $x; then gmm_acc_pass $x; fi
    gmm_est_pass $x
    rm -f $dir/$x.premllt.mdl
  fi
  [ $x -le $max_iter_inc ] && numgauss=$((numgauss + incgauss))
  x=$((x + 1))
done

( cd $dir; rm -f final.mat; ln -s $cur_lda_iter.mat final.mat )
gmm_train_finish $x
echo "$0: Done training system with LDA+MLLT features in $dir"
