#!/usr/bin/env bash
# Align a data dir with fMLLR-adapted features (Kaldi's steps/align_fmllr.sh): a first alignment
# on the speaker-independent features with the source system's alignment model (final.alimdl of a
# SAT system, else final.mdl), per-speaker fMLLR transforms estimated from it (silence weighted
# --silence-weight), then the final alignment with final.mdl on the adapted features.
# Works for SAT systems and, as Kaldi's, for speaker-independent LDA+MLLT/delta systems (their
# trans.JOB then start steps/train_sat.sh).
# Writes <align-dir>/{ali.JOB.gz,trans.JOB,pre_ali.JOB.gz,final.mdl,final.alimdl,tree,final.mat,splice_opts|delta_opts,
# cmvn_opts,final.occs,num_jobs,phones.txt,log/}.

# Begin configuration section.
nj=4
cmd=run.pl
use_graphs=false
scale_opts="--transition-scale 1.0 --acoustic-scale 0.1 --self-loop-scale 0.1"
beam=10
retry_beam=40
careful=false
boost_silence=1.0
fmllr_update_type=full
fmllr_min_count=500
silence_weight=0.0   # weight of silence frames in fMLLR estimation
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <src-dir> <align-dir>
 e.g.: $0 data/train data/lang exp/tri3 exp/tri3_ali
Options:
  --nj <nj>                   # number of parallel jobs (default $nj)
  --cmd <cmd>                 # job runner (default $cmd)
  --use-graphs true|false     # reuse the source dir's training graphs (same data and nj)
  --fmllr-update-type <type>  # full|diag|offset|none (default $fmllr_update_type)
  --fmllr-min-count <n>       # frames for a full update (default $fmllr_min_count)
  --boost-silence <f>         # silence likelihood factor (default $boost_silence)"

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

for f in $data/text $data/feats.scp $data/utt2spk $lang/L.fst $lang/words.txt $lang/phones/silence.csl \
    $lang/phones/optional_silence.csl $srcdir/tree $srcdir/final.mdl; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
jobs_check_nj "$nj"
case "$fmllr_update_type" in full|diag|offset|none) ;; *) echo "$0: --fmllr-update-type must be full, diag, offset or none" >&2; exit 1;; esac
utils/lang/check_phones_compatible.sh $srcdir/phones.txt $lang/phones.txt || exit 1
cmd="jobs_report $cmd"

mkdir -p $dir/log
echo $nj > $dir/num_jobs
sdata=$data/split$nj
[[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh $data $nj >/dev/null

. steps/libs/gmm_feats.sh
rm -f $dir/delta_opts $dir/splice_opts $dir/final.mat $dir/full.mat $dir/final.alimdl
gmm_copy_feat_files $srcdir $dir   # cmvn_opts, delta_opts or splice_opts + final.mat, final.alimdl
gmm_feat_opts $dir
si_opts=("${feat_opts[@]}")
cp $srcdir/tree $dir/tree
cp -L $srcdir/final.mdl $dir/final.mdl
[ -f $srcdir/final.occs ] && cp -L $srcdir/final.occs $dir/final.occs
cp $lang/phones.txt $dir 2>/dev/null || true
alimdl=$dir/final.mdl
[ -f $dir/final.alimdl ] && alimdl=$dir/final.alimdl
silphones=$(cat $lang/phones/silence.csl)
align_opts="$scale_opts --beam $beam --retry-beam $retry_beam --careful $careful --boost-silence $boost_silence --silence-phones $(cat $lang/phones/optional_silence.csl)"

if [ "$use_graphs" = true ]; then
  [ "$(cat $srcdir/num_jobs)" = "$nj" ] || { echo "$0: --use-graphs true needs --nj $(cat $srcdir/num_jobs)" >&2; exit 1; }
  graphs=$srcdir/fsts.JOB.gz
else
  echo "$0: compiling training graphs"
  $cmd JOB=1:$nj $dir/log/compile_graphs.JOB.log \
    pynnet-compile-train-graphs $dir/tree $dir/final.mdl $lang $sdata/JOB $dir/fsts.JOB.gz
  graphs=$dir/fsts.JOB.gz
fi

echo "$0: aligning data in $data with $(basename $alimdl) on speaker-independent features"
$cmd JOB=1:$nj $dir/log/align_pass1.JOB.log \
  pynnet-gmm-align-compiled "${si_opts[@]}" $align_opts $alimdl $graphs $sdata/JOB $dir/pre_ali.JOB.gz

echo "$0: computing fMLLR transforms"
gpost_opts=
[ "$alimdl" != "$dir/final.mdl" ] && gpost_opts="--gpost-model $alimdl"
$cmd JOB=1:$nj $dir/log/fmllr.JOB.log \
  pynnet-gmm-est-fmllr "${si_opts[@]}" $gpost_opts --fmllr-update-type $fmllr_update_type \
    --fmllr-min-count $fmllr_min_count --silence-weight $silence_weight --silence-phones $silphones \
    $dir/final.mdl $sdata/JOB $dir/pre_ali.JOB.gz ark:$dir/trans.JOB

echo "$0: doing final alignment"
$cmd JOB=1:$nj $dir/log/align_pass2.JOB.log \
  pynnet-gmm-align-compiled "${si_opts[@]}" --fmllr $dir/trans.JOB $align_opts $dir/final.mdl $graphs \
    $sdata/JOB $dir/ali.JOB.gz
[ "$use_graphs" = true ] || rm -f $dir/fsts.*.gz

nfail=$(cat $dir/log/align_pass2.*.log | grep -c "^WARNING: alignment failed" || true)
ntot=$(wc -l < $data/text)
if [ "$nfail" -gt 0 ]; then
  echo "$0: WARNING: $nfail of $ntot utterances failed to align even with --retry-beam $retry_beam and are left out:"
  cat $dir/log/align_pass2.*.log | awk '/^WARNING: alignment failed for utterance/{print "  " $6}' | head -20
fi
echo "$0: done aligning data ($((ntot - nfail)) of $ntot utterances aligned)."
