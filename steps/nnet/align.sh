#!/usr/bin/env bash
# Align a data dir with a DNN (Kaldi nnet1's steps/nnet/align.sh): training graphs compiled from
# the transcripts (pynnet-compile-train-graphs), pseudo-log-likelihoods from the DNN
# (pynnet-nnet-forward --prior-subtract, with per-speaker CMVN when the model was trained with it)
# piped into pynnet-align-compiled-mapped (beam, then --retry-beam).  Utterances that fail even
# with the retry beam are named in the logs, counted here, and left out of ali.JOB.gz.
# <src-dir> is the DNN's exp dir: final.nnet, final.mdl (the GMM's transition model), tree.
# Writes <align-dir>/{ali.JOB.gz,final.mdl,tree,num_jobs,phones.txt,log/}.

# Begin configuration section.
nj=4
cmd=run.pl
stage=0
scale_opts="--transition-scale=1.0 --acoustic-scale=0.1 --self-loop-scale=0.1"
beam=10
retry_beam=40
careful=false
nnet_forward_opts=   # more options for pynnet-nnet-forward (Kaldi's "--no-softmax=true --prior-scale=1.0"
                     # is accepted: logits and log-softmax differ by a per-frame constant)
text=                # (optional) transcripts to align to, instead of <data-dir>/text
use_gpu=no           # yes|no|optional|wait (pynnet-nnet-forward's --use-gpu)
nnet=                # default: <src-dir>/final.nnet
# Kaldi nnet1 options pynnet does not support
ivector=             # (refused: i-vectors are not supported)
align_to_lats=false  # (true is refused: no lattice alignments)
lats_decode_opts=    # (ignored: only for --align-to-lats)
lats_graph_scales=   # (ignored: only for --align-to-lats)
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <src-dir> <align-dir>
 e.g.: $0 --nj 20 --cmd run.pl data/train data/lang exp/dnn exp/dnn_ali
Options:
  --nj <nj>                  # number of parallel jobs (default $nj)
  --cmd <cmd>                # job runner (default $cmd)
  --beam <f>                 # alignment beam (default $beam)
  --retry-beam <f>           # beam for utterances that fail with --beam (default $retry_beam)
  --scale-opts <opts>        # (default \"$scale_opts\")
  --text <file>              # transcripts to align to (default <data-dir>/text)
  --use-gpu <yes|no|optional> # the DNN forward pass on a GPU (default $use_gpu)
  --nnet-forward-opts <opts> # more options for pynnet-nnet-forward, e.g. \"--prior-scale=0.8\""

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

. steps/libs/jobs.sh
jobs_check_nj "$nj"
if [ -n "$ivector" ]; then
  echo "$0: --ivector $ivector: i-vector inputs are not supported" >&2; exit 1
fi
if [ "$align_to_lats" = true ]; then
  echo "$0: --align-to-lats true: alignments as lattices are not supported (use ali.JOB.gz)" >&2; exit 1
fi
case "$use_gpu" in
  yes|no|optional|wait) ;;
  *) echo "$0: --use-gpu must be yes, no, optional or wait, not '$use_gpu'" >&2; exit 1 ;;
esac
[ -z "$nnet" ] && nnet=$srcdir/final.nnet
[ -z "$text" ] && text_file=$data/text || text_file=$text
for f in $data/feats.scp $data/utt2spk $text_file $lang/L.fst $lang/words.txt $lang/oov.int \
    $nnet $srcdir/final.mdl $srcdir/tree; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
# A model trained with another phone set cannot align with this lang dir (as align_si.sh).
utils/lang/check_phones_compatible.sh $srcdir/phones.txt $lang/phones.txt || exit 1

. steps/libs/nnet_input.sh
nnet_cmvn_args "$nnet" "$data" "$data/split$nj/JOB"   # per-speaker CMVN if the DNN was trained with it

cmd="jobs_report $cmd"  # a failed job's ERROR line is the reason given
mkdir -p $dir/log
echo $nj > $dir/num_jobs
sdata=$data/split$nj
[[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh $data $nj >/dev/null
cp $srcdir/tree $dir/tree
cp -L $srcdir/final.mdl $dir/final.mdl
cp $lang/phones.txt $dir 2>/dev/null || true

# the transcripts of each job: <data-dir>/splitN/JOB/text, or --text's lines of the job's utterances
tra=$sdata
if [ -n "$text" ]; then
  tra=$dir/tra
  for n in $(seq $nj); do
    mkdir -p $tra/$n
    utils/filter_scp.pl $sdata/$n/utt2spk $text > $tra/$n/text
  done
fi

if [ "$stage" -le 0 ]; then
  echo "$0: aligning data in $data using the DNN $nnet and model from $srcdir, putting alignments in $dir"
  rm -f $dir/ali.*.gz   # (a run with another --nj may have left more)
  $cmd JOB=1:$nj $dir/log/compile_graphs.JOB.log \
    pynnet-compile-train-graphs $dir/tree $dir/final.mdl $lang $tra/JOB $dir/fsts.JOB.gz
  # (a failed job leaves no alignments: the others' would look like a complete set)
  # shellcheck disable=SC2086
  if ! $cmd JOB=1:$nj $dir/log/align.JOB.log \
      pynnet-nnet-forward --prior-subtract --use-gpu $use_gpu $nnet_forward_opts $cmvn_args \
        "$nnet" "scp:$sdata/JOB/feats.scp" ark:- \| \
      pynnet-align-compiled-mapped $scale_opts --beam $beam --retry-beam $retry_beam --careful $careful \
        $dir/final.mdl $dir/fsts.JOB.gz ark:- $dir/ali.JOB.gz; then
    rm -f $dir/ali.*.gz
    exit 1
  fi
  rm -f $dir/fsts.*.gz
  [ -n "$text" ] && rm -rf $dir/tra
fi

logs=$(for n in $(seq $nj); do echo $dir/log/align.$n.log; done)
for f in $logs; do
  [ -f $f ] || { echo "$0: no such file $f (run from --stage 0)" >&2; exit 1; }
done
nfail=$(cat $logs | grep -c "^WARNING: alignment failed" || true)
ndone=$(cat $logs | sed -n 's/^LOG (pynnet-align-compiled-mapped) Done \([0-9]*\),.*/\1/p' | awk '{s += $1} END {print s + 0}')
ntot=$(wc -l < $data/feats.scp)
if [ "$nfail" -gt 0 ]; then
  echo "$0: WARNING: $nfail of $ntot utterances failed to align even with --retry-beam $retry_beam and are left out:"
  cat $logs | awk '/^WARNING: alignment failed for utterance/{print "  " $6}' | head -20
fi
if [ "$ndone" -lt "$ntot" ] && [ "$((ntot - ndone))" -gt "$nfail" ]; then
  echo "$0: WARNING: $((ntot - ndone - nfail)) utterances have no (or an empty) transcript and are left out (see $dir/log/compile_graphs.*.log)"
fi
echo "$0: done aligning data ($ndone of $ntot utterances aligned)."
