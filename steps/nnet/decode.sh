#!/usr/bin/env bash
# Decoding with a DNN (Kaldi's steps/nnet/decode.sh): pynnet-nnet-forward computes
# pseudo-log-likelihoods (log posterior - log prior) which pynnet-decode-faster-mapped decodes over
# HCLG into lattices; then scoring. The DNN is <decode-dir>/../final.nnet and the transition model
# <decode-dir>/../final.mdl (steps/nnet/train.sh copies it from the alignment dir).
# Writes <decode-dir>/{lat.JOB.gz,num_jobs,rtf,log/decode.JOB.log} (rtf: the real-time factor line
# it prints) and the scoring outputs
# (none when <data-dir> has no text: unlabelled data is decoded, not scored).

# Begin configuration section.
nj=4
cmd=run.pl
nnet=           # default: <decode-dir>/../final.nnet
model=          # default: <decode-dir>/../final.mdl
acwt=0.1        # acoustic scale (Kaldi nnet1 default 0.10)
beam=13.0
lattice_beam=8.0
max_active=7000
min_active=200
stage=0
skip_scoring=false
scoring_opts=   # the GMM stage's grid (steps/score_kaldi.sh: LM weights 7-17, penalties 0, 0.5, 1),
                # so DNN and GMM WERs are chosen alike (nnet1 uses --min-lmwt 4 --max-lmwt 15)
device=cpu
# Kaldi nnet1 options
srcdir=              # the DNN's exp dir (default: the parent of <decode-dir>)
class_frame_counts=  # priors from these frame counts (Kaldi's ali_train_pdf.counts) instead of the model's
num_threads=1        # utterances decoded at once in each job (Kaldi: latgen-faster-mapped-parallel)
use_gpu=             # yes|no|optional: Kaldi's form of --device
nnet_forward_opts=   # more options for pynnet-nnet-forward, e.g. "--prior-scale=0.8"
max_mem=             # (ignored: our lattices are not determinized)
parallel_opts=       # (ignored, as in Kaldi)
feature_transform=   # (refused: the model holds its feature transform)
ivector=             # (refused: i-vectors are not supported)
blocksoftmax_dims=   # (refused: no block-softmax)
blocksoftmax_active=
# End configuration section.

help_message="Usage: $0 [options] <graph-dir> <data-dir> <decode-dir>
 e.g.: $0 --nj 4 exp/tri2/graph data-fbank/test exp/dnn/decode_test
Options:
  --nj <nj>                   # parallel jobs (default $nj)
  --cmd <cmd>                 # job runner (default $cmd)
  --acwt <float>              # acoustic scale (default $acwt)
  --beam <float>              # decoding beam (default $beam)
  --lattice-beam <float>      # (default $lattice_beam)
  --nnet <file>               # a DNN other than <decode-dir>/../final.nnet
  --srcdir <dir>              # the DNN's exp dir, if not the parent of <decode-dir>
  --class-frame-counts <file> # priors from these counts (e.g. <srcdir>/ali_train_pdf.counts)
  --num-threads <n>           # utterances decoded at once in each job (default $num_threads)
  --device <cpu|cuda>         # (default $device; Kaldi's --use-gpu yes|no|optional also works)
  --skip-scoring <true|false> # (default $skip_scoring)
  --scoring-opts <opts>       # options for the scoring script, e.g. \"--min-lmwt 4 --max-lmwt 15\"
  --stage <stage>             # 1: only score"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1
. steps/libs/decode.sh

srcdir_opt=$srcdir
decode_args "$@"  # graphdir data dir srcdir
[ -n "$srcdir_opt" ] && srcdir=$srcdir_opt
decode_refuse feature-transform "$feature_transform" "a pynnet DNN holds its own feature transform"
decode_refuse ivector "$ivector" "i-vector inputs are not supported"
decode_refuse blocksoftmax-dims "$blocksoftmax_dims" "block-softmax outputs are not supported"
device_opts="--device $device"
case "$use_gpu" in
  "") ;;
  yes|no|optional|wait) device_opts="--use-gpu $use_gpu" ;;  # (pynnet-nnet-forward maps it)
  *) echo "$0: --use-gpu must be yes, no, optional or wait, not '$use_gpu'" >&2; exit 1 ;;
esac
[ -z "$nnet" ] && nnet=$srcdir/final.nnet
[ -z "$model" ] && model=$srcdir/final.mdl

# priors re-estimated from the network's own outputs (steps/nnet/make_priors.sh) first, as Kaldi's
[ -z "$class_frame_counts" ] && [ -f $srcdir/prior_counts ] && class_frame_counts=$srcdir/prior_counts
prior_opts=
[ -n "$class_frame_counts" ] && prior_opts="--class-frame-counts $class_frame_counts"
for f in "$graphdir/HCLG.fst" "$graphdir/words.txt" "$data/feats.scp" "$nnet" "$model" $class_frame_counts; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done

decode_setup  # checks --nj, makes the decode dir, sets sdata

. steps/libs/nnet_input.sh
nnet_cmvn_args "$nnet" "$data" "$sdata/JOB"   # per-speaker CMVN if the DNN was trained with it

if [ "$stage" -le 0 ]; then
  echo "$0: decoding $data with $nnet ($nj jobs)"
  decode_start_clock
  # shellcheck disable=SC2086
  decode_run_jobs \
    pynnet-nnet-forward --prior-subtract $prior_opts $nnet_forward_opts $device_opts $cmvn_args \
      "$nnet" "scp:$sdata/JOB/feats.scp" ark:- \| \
    pynnet-decode-faster-mapped --max-active $max_active --min-active $min_active --beam $beam \
      --lattice-beam $lattice_beam --acoustic-scale $acwt --allow-partial true --num-threads $num_threads \
      --word-symbol-table "$graphdir/words.txt" "$model" "$graphdir/HCLG.fst" ark:- \
      "$(decode_lat_wspec)"
  decode_report_rtf  # real-time factor line, <decode-dir>/rtf
fi

decode_score
echo "$0: done decoding $dir"
exit 0
