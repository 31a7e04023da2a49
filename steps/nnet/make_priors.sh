#!/usr/bin/env bash
# Re-estimate a DNN's priors from its own outputs (Kaldi nnet1's steps/nnet/make_priors.sh): the
# softmax posteriors of up to 10000 utterances (10000/nj from each of the nj parts of the data,
# chosen as Kaldi does: utils/shuffle_list.pl --srand 777), summed per pdf, in
# <nnet-dir>/prior_counts (a Kaldi text vector, as analyze-counts writes ali_train_pdf.counts).
# steps/nnet/decode.sh then takes them as --class-frame-counts, as Kaldi's does; sequence training
# (steps/nnet/train_mpe.sh) calls this at its end.

# Begin configuration section.
nj=4
cmd=run.pl
use_gpu=no           # yes|no|optional|wait
nnet=                # default: <nnet-dir>/final.nnet
ivector=             # (refused: i-vectors are not supported)
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <nnet-dir>
 e.g.: $0 --nj 4 data-fbank/train exp/dnn_smbr
Options:
  --nj <nj>                   # parts of the data to draw the utterances from (default $nj)
  --cmd <cmd>                 # job runner (default $cmd)
  --use-gpu <yes|no|optional> # the forward pass on a GPU (default $use_gpu)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 2 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
set -euo pipefail

data=$1
dir=$2

[ -n "$ivector" ] && { echo "$0: --ivector $ivector: i-vector inputs are not supported" >&2; exit 1; }
case "$use_gpu" in
  yes|no|optional|wait) ;;
  *) echo "$0: --use-gpu must be yes, no, optional or wait, not '$use_gpu'" >&2; exit 1 ;;
esac
[ -z "$nnet" ] && nnet=$dir/final.nnet
for f in $data/feats.scp "$nnet"; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
. steps/libs/jobs.sh
jobs_check_nj "$nj"
. steps/libs/nnet_input.sh
nnet_cmvn_args "$nnet" "$data" "$data"   # per-speaker CMVN if the DNN was trained with it

mkdir -p $dir/log
sdata=$data/split$nj
[[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh $data $nj >/dev/null
echo "$0: accumulating prior stats by forwarding $data with $nnet"
N=$((10000 / nj))
for n in $(seq $nj); do
  utils/shuffle_list.pl --srand 777 $sdata/$n/feats.scp | awk -v n=$N 'NR <= n'
done > $dir/prior_utts.scp
# shellcheck disable=SC2086
if ! jobs_report $cmd $dir/log/prior_stats.log \
    pynnet-nnet-forward --use-gpu $use_gpu $cmvn_args "$nnet" scp:$dir/prior_utts.scp ark:- \| \
    pynnet-matrix-sum-rows ark:- $dir/prior_counts; then
  rm -f $dir/prior_counts $dir/prior_utts.scp
  exit 1
fi
echo "$0: wrote $dir/prior_counts from $(wc -l < $dir/prior_utts.scp) utterances of $data"
rm -f $dir/prior_utts.scp
