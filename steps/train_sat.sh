#!/usr/bin/env bash
# Speaker adapted training (Kaldi's steps/train_sat.sh): a triphone GMM system on fMLLR-adapted
# features, on top of the alignment dir's LDA+MLLT (final.mat) or delta features.  The starting
# per-speaker transforms are the alignment dir's trans.JOB (steps/align_fmllr.sh) or are
# estimated from its alignments; a decision tree on the adapted features; then EM passes in which
# the transforms are re-estimated on --fmllr-iters (composed with the previous ones) and the data
# realigned on --realign-iters.  Last, the alignment model final.alimdl: the final model's
# Gaussians re-estimated on the speaker-independent features (with the adapted features'
# posteriors), for the first pass of steps/decode_fmllr.sh and steps/align_fmllr.sh.
# Writes <exp-dir>/{final.mdl,final.alimdl,trans.JOB,final.mat,splice_opts|delta_opts,cmvn_opts,tree,
# ali.JOB.gz,fsts.JOB.gz,final.occs,num_jobs,phones.txt,log/}.

# Begin configuration section.
stage=-5
cmd=run.pl
nj=              # default: as many jobs as the alignment dir has
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"
fmllr_update_type=full
fmllr_min_count=500  # frames a speaker needs for a full fMLLR update (fewer: diag/offset, logged)
realign_iters="10 20 30"
fmllr_iters="2 4 6 12"
silence_weight=0.0   # weight of silence frames in fMLLR estimation
num_iters=35
max_iter_inc=25
beam=10
careful=false
retry_beam=40
boost_silence=1.0
power=0.25
cluster_thresh=-1
context_opts=
# End configuration section.

help_message="Usage: $0 [options] <num-leaves> <tot-gauss> <data-dir> <lang-dir> <ali-dir> <exp-dir>
 e.g.: $0 2500 15000 data/train data/lang exp/tri3_ali exp/tri4
Options:
  --cmd <cmd>                 # job runner (default $cmd)
  --fmllr-update-type <type>  # full|diag|offset|none (default $fmllr_update_type)
  --fmllr-min-count <n>       # frames for a full update (default $fmllr_min_count)
  --fmllr-iters <list>        # passes that re-estimate the transforms (default \"$fmllr_iters\")
  --silence-weight <f>        # silence weight in fMLLR estimation (default $silence_weight)
  --num-iters <n>             # EM passes (default $num_iters)
  --realign-iters <list>      # passes that realign (default \"$realign_iters\")
  --boost-silence <f>         # silence likelihood factor in alignment (default $boost_silence)
  --power <f>                 # mix-up power (default $power)
  --stage <stage>             # resume from this stage (default $stage)"

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

for f in $alidir/final.mdl $alidir/ali.1.gz $alidir/num_jobs $data/feats.scp $data/text $data/utt2spk \
    $lang/phones.txt $lang/topo $lang/L.fst $lang/phones/roots.int $lang/phones/sets.int \
    $lang/phones/context_indep.csl $lang/phones/silence.csl $lang/phones/optional_silence.csl; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
[ -z "$nj" ] || jobs_check_nj "$nj"
utils/lang/check_phones_compatible.sh $alidir/phones.txt $lang/phones.txt || exit 1
cmd="jobs_report $cmd"
case "$numleaves$totgauss" in *[!0-9]*|"") echo "$0: <num-leaves> and <tot-gauss> must be integers" >&2; exit 1;; esac
case "$fmllr_update_type" in full|diag|offset|none) ;; *) echo "$0: --fmllr-update-type must be full, diag, offset or none" >&2; exit 1;; esac

ali_nj=$(cat $alidir/num_jobs)
if [ -n "$nj" ] && [ "$nj" != "$ali_nj" ]; then
  echo "$0: --nj $nj differs from the $ali_nj jobs of $alidir; using $ali_nj" >&2
fi
nj=$ali_nj
numgauss=$numleaves
incgauss=$(( (totgauss - numgauss) / max_iter_inc ))
silphonelist=$(cat $lang/phones/silence.csl)
ciphonelist=$(cat $lang/phones/context_indep.csl)

cmvn_opts=$(cat $alidir/cmvn_opts 2>/dev/null || true)
delta_opts=$(cat $alidir/delta_opts 2>/dev/null || true)
. steps/libs/train_gmm.sh
gmm_train_setup  # sdata, cache_opts, boost_opts
. steps/libs/gmm_feats.sh
rm -f $dir/delta_opts $dir/splice_opts $dir/final.mat $dir/full.mat
gmm_copy_feat_files $alidir $dir
rm -f $dir/final.alimdl   # (this system's own is made at the end)
gmm_feat_opts $dir        # the speaker-independent features: delta or LDA+MLLT
echo "$0: feature type is $feat_type"
si_opts=("${feat_opts[@]}")
adapted() { feat_opts=("${si_opts[@]}" --fmllr $1/trans.JOB); }
fmllr_opts="--fmllr-update-type $fmllr_update_type --fmllr-min-count $fmllr_min_count --silence-weight $silence_weight --silence-phones $silphonelist"

if [ -f $alidir/trans.1 ]; then
  echo "$0: using transforms from $alidir"
  [ -f $alidir/trans.$nj ] || { echo "$0: no such file $alidir/trans.$nj" >&2; exit 1; }
  cur_trans_dir=$alidir
else
  if [ $stage -le -4 ]; then
    echo "$0: obtaining initial fMLLR transforms since not present in $alidir"
    $cmd JOB=1:$nj $dir/log/fmllr.0.JOB.log \
      pynnet-gmm-est-fmllr "${si_opts[@]}" $cache_opts $fmllr_opts \
        $alidir/final.mdl $sdata/JOB $alidir/ali.JOB.gz ark:$dir/trans.JOB
  fi
  cur_trans_dir=$dir
fi
adapted $cur_trans_dir

gmm_build_tree  # stages -3..0, on the adapted features

x=1
while [ $x -lt $num_iters ]; do
  echo "$0: training pass $x"
  fmllr=false
  echo " $fmllr_iters " | grep -q " $x " && fmllr=true
  if [ $stage -le $x ]; then
    if gmm_is_realign_pass $x; then
      if $fmllr; then gmm_align_pass $x $beam $retry_beam; else gmm_align_pass $x $beam $retry_beam --acc-out $dir/$x.JOB.acc; fi
    fi
    if $fmllr; then
      echo "$0: estimating fMLLR transforms"
      # a transform on top of the current ones, composed with them
      $cmd JOB=1:$nj $dir/log/fmllr.$x.JOB.log \
        pynnet-gmm-est-fmllr "${feat_opts[@]}" $cache_opts $fmllr_opts \
          $dir/$x.mdl $sdata/JOB $dir/ali.JOB.gz ark:$dir/tmp_trans.JOB
      $cmd JOB=1:$nj $dir/log/compose_transforms.$x.JOB.log \
        pynnet-compose-transforms --b-is-affine true ark:$dir/tmp_trans.JOB ark:$cur_trans_dir/trans.JOB \
          ark:$dir/composed_trans.JOB
      for n in $(seq $nj); do mv $dir/composed_trans.$n $dir/trans.$n; rm -f $dir/tmp_trans.$n; done
    fi
  fi
  if $fmllr; then
    cur_trans_dir=$dir
    adapted $cur_trans_dir
  fi
  if [ $stage -le $x ]; then
    if $fmllr || ! gmm_is_realign_pass $x; then gmm_acc_pass $x; fi
    gmm_est_pass $x
  fi
  [ $x -le $max_iter_inc ] && numgauss=$((numgauss + incgauss))
  x=$((x + 1))
done

if [ $stage -le $x ]; then
  # the alignment model: speaker-independent statistics with the adapted features' posteriors,
  # Gaussian for Gaussian as the final model (no Gaussian removed)
  echo "$0: estimating the alignment model"
  $cmd JOB=1:$nj $dir/log/acc_alimdl.JOB.log \
    pynnet-gmm-acc-stats-twofeats "${feat_opts[@]}" $cache_opts $dir/$x.mdl $sdata/JOB $dir/ali.JOB.gz $dir/$x.JOB.acc
  $cmd $dir/log/est_alimdl.log \
    pynnet-gmm-est --power $power --remove-low-count-gaussians false $dir/$x.mdl \
      $(for n in $(seq $nj); do echo $dir/$x.$n.acc; done) $dir/$x.alimdl
  rm -f $dir/$x.*.acc
fi
( cd $dir; rm -f final.alimdl; ln -s $x.alimdl final.alimdl )
gmm_train_finish $x
echo "$0: Done training SAT system in $dir"
