#!/usr/bin/env bash
# Viterbi-align a data dir with a GMM system (Kaldi's steps/align_si.sh): speaker-independent
# features as the source system used them (its cmvn_opts/delta_opts, or splice_opts + final.mat
# for LDA+MLLT; a SAT system's fMLLR is steps/align_fmllr.sh's), training graphs compiled
# from the transcripts, beam then --retry-beam.  Utterances that fail even with the retry beam
# are named in the logs, counted here, and left out of ali.JOB.gz.
# Writes <align-dir>/{ali.JOB.gz,final.mdl,tree,final.occs,num_jobs,cmvn_opts,delta_opts|splice_opts+final.mat,phones.txt,log/}.

# Begin configuration section.
nj=4
cmd=run.pl
use_graphs=false   # true: reuse <src-dir>/fsts.JOB.gz (same data and nj; Kaldi's name, or our old fsts.JOB.ark)
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"
beam=10
retry_beam=40
careful=false
boost_silence=1.0  # factor on silence likelihoods (Kaldi recipes use 1.25 for mono/tri1)
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <src-dir> <align-dir>
 e.g.: $0 data/train data/lang exp/tri1 exp/tri1_ali
Options:
  --nj <nj>                 # number of parallel jobs (default $nj)
  --cmd <cmd>               # job runner (default $cmd)
  --beam <f>                # alignment beam (default $beam)
  --retry-beam <f>          # beam for utterances that fail with --beam (default $retry_beam)
  --boost-silence <f>       # silence likelihood factor (default $boost_silence)
  --use-graphs true|false   # reuse the source dir's training graphs (default $use_graphs)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 4 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
set -euo pipefail

data=$1
lang=$2
srcdir=$3
dir=$4

for f in $data/text $data/feats.scp $data/utt2spk $lang/L.fst $lang/words.txt \
    $lang/phones/optional_silence.csl $srcdir/tree $srcdir/final.mdl; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
jobs_check_nj "$nj"
# A model trained with another phone set cannot align with this lang dir (as utils/mkgraph.sh).
utils/lang/check_phones_compatible.sh $srcdir/phones.txt $lang/phones.txt || exit 1
cmd="jobs_report $cmd"  # a failed job's ERROR line is the reason given

mkdir -p $dir/log
echo $nj > $dir/num_jobs
sdata=$data/split$nj
[[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh $data $nj >/dev/null

. steps/libs/gmm_feats.sh
rm -f $dir/delta_opts $dir/splice_opts $dir/final.mat $dir/full.mat $dir/final.alimdl
gmm_copy_feat_files $srcdir $dir   # cmvn_opts, delta_opts or splice_opts + final.mat
[ -f $dir/cmvn_opts ] || touch $dir/cmvn_opts
[ -f $dir/final.mat ] || [ -f $dir/delta_opts ] || touch $dir/delta_opts   # empty: add-deltas' order 2
gmm_feat_opts $dir   # feat_opts: speaker-independent features (delta, or LDA+MLLT with final.mat)
cp $srcdir/tree $dir/tree
cp -L $srcdir/final.mdl $dir/final.mdl
[ -f $srcdir/final.occs ] && cp -L $srcdir/final.occs $dir/final.occs
cp $lang/phones.txt $dir 2>/dev/null || true
silphones=$(cat $lang/phones/optional_silence.csl)
align_opts="$scale_opts --beam $beam --retry-beam $retry_beam --careful $careful --boost-silence $boost_silence --silence-phones $silphones"

echo "$0: aligning data in $data using model from $srcdir, putting alignments in $dir"
if [ "$use_graphs" = true ]; then
  [ "$(cat $srcdir/num_jobs)" = "$nj" ] || { echo "$0: --use-graphs true needs --nj $(cat $srcdir/num_jobs)" >&2; exit 1; }
  graphs=$srcdir/fsts.JOB.gz
  [ ! -f $srcdir/fsts.1.gz ] && [ -f $srcdir/fsts.1.ark ] && graphs=$srcdir/fsts.JOB.ark   # (older pynnet)
  $cmd JOB=1:$nj $dir/log/align.JOB.log \
    pynnet-gmm-align-compiled "${feat_opts[@]}" $align_opts $dir/final.mdl $graphs \
      $sdata/JOB $dir/ali.JOB.gz
else
  $cmd JOB=1:$nj $dir/log/align.JOB.log \
    pynnet-gmm-align "${feat_opts[@]}" $align_opts $dir/tree $dir/final.mdl $lang $sdata/JOB $dir/ali.JOB.gz
fi

nfail=$(cat $dir/log/align.*.log | grep -c "^WARNING: alignment failed" || true)
ntot=$(wc -l < $data/text)
if [ "$nfail" -gt 0 ]; then
  echo "$0: WARNING: $nfail of $ntot utterances failed to align even with --retry-beam $retry_beam and are left out:"
  cat $dir/log/align.*.log | awk '/^WARNING: alignment failed for utterance/{print "  " $6}' | head -20
fi
echo "$0: done aligning data ($((ntot - nfail)) of $ntot utterances aligned)."
