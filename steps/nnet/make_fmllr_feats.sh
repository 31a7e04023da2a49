#!/usr/bin/env bash
# fMLLR features for a DNN (Kaldi nnet1's steps/nnet/make_fmllr_feats.sh): a copy of <src-data-dir>
# whose feats.scp holds the GMM system's speaker-adapted features -- CMVN, then splice +
# final.mat (LDA+MLLT) or deltas, then the per-speaker fMLLR transforms of --transform-dir (the
# SAT system's steps/align_fmllr.sh dir for training data, its steps/decode_fmllr.sh dir for test
# data; its trans.* are used whatever its number of jobs).  The copy has no cmvn.scp: the DNN
# normalises these features globally (its feature transform), as nnet1's recipes do.
# Writes <tgt-data-dir> and <fea-dir>/feats_fmllr_<name>.JOB.{ark,scp}; logs in <log-dir>.

# Begin configuration section.
nj=4
cmd=run.pl
transform_dir=   # the dir with trans.* (required; Kaldi also allows none: speaker-independent features)
# End configuration section.

help_message="Usage: $0 [options] <tgt-data-dir> <src-data-dir> <gmm-dir> <log-dir> <fea-dir>
 e.g.: $0 --nj 4 --transform-dir exp/tri4/decode_test data-fmllr/test data/test exp/tri4 data-fmllr/test/log data-fmllr/test/data
Options:
  --nj <nj>                 # number of parallel jobs (default $nj)
  --cmd <cmd>               # job runner (default $cmd)
  --transform-dir <dir>     # dir with the fMLLR transforms trans.* (empty: speaker-independent features)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 5 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
set -euo pipefail

data=$1
srcdata=$2
gmmdir=$3
logdir=$4
feadir=$5

for f in $srcdata/feats.scp $srcdata/utt2spk $gmmdir/final.mdl; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
jobs_check_nj "$nj"
[ "$(cd "$srcdata" && pwd)" != "$(mkdir -p "$data" && cd "$data" && pwd)" ] || { echo "$0: <tgt-data-dir> must differ from <src-data-dir>" >&2; exit 1; }
. steps/libs/gmm_feats.sh
gmm_feat_opts $gmmdir
if [ -n "$transform_dir" ]; then
  [ -f $transform_dir/trans.1 ] || { echo "$0: no such file $transform_dir/trans.1 (--transform-dir)" >&2; exit 1; }
  gmm_check_transform_dir $gmmdir $transform_dir
  # every job's transforms, keyed by speaker: the data may be split otherwise than the transform dir's
  feat_opts+=(--fmllr "ark:cat $transform_dir/trans.* |")
else
  echo "$0: no --transform-dir: speaker-independent $feat_type features"
fi

name=$(basename "$data")
mkdir -p "$logdir" "$feadir"
feadir=$(cd "$feadir" && pwd)
utils/copy_data_dir.sh "$srcdata" "$data" >/dev/null
rm -f "$data/feats.scp" "$data/cmvn.scp"
sdata=$srcdata/split$nj
[[ -d $sdata && $srcdata/feats.scp -ot $sdata ]] || utils/split_data.sh $srcdata $nj >/dev/null

echo "$0: writing $feat_type + fMLLR features of $srcdata to $feadir"
jobs_report $cmd JOB=1:$nj $logdir/make_fmllr_feats.JOB.log \
  pynnet-transform-feats "${feat_opts[@]}" $sdata/JOB \
    ark,scp:$feadir/feats_fmllr_$name.JOB.ark,$feadir/feats_fmllr_$name.JOB.scp
for n in $(seq $nj); do cat $feadir/feats_fmllr_$name.$n.scp; done > $data/feats.scp.tmp
nin=$(wc -l < $srcdata/feats.scp)
nout=$(wc -l < $data/feats.scp.tmp)
mv $data/feats.scp.tmp $data/feats.scp
[ "$nout" -eq "$nin" ] || echo "$0: WARNING: $nout of $nin utterances have features (no transform for the others' speakers?)" >&2
utils/fix_data_dir.sh $data >/dev/null
echo "$0: done: $data ($nout utterances)"
