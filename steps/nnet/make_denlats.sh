#!/usr/bin/env bash
# Denominator lattices for sequence-discriminative training (Kaldi nnet1's steps/nnet/make_denlats.sh):
# a unigram LM over the training transcripts (pynnet-make-unigram-grammar: Kaldi's
# make_unigram_grammar.pl) in <exp-dir>/<lang-name>/G.fst, its graph <exp-dir>/dengraph
# (utils/mkgraph.sh with the DNN's tree and final.mdl), then the training data decoded with the DNN
# (pynnet-nnet-forward --prior-subtract | pynnet-decode-faster-mapped) into state-level lattices.
# Writes <exp-dir>/{lat.JOB.gz,num_jobs,final.mdl,tree,dengraph/,log/decode_den.JOB.log}.
# (Kaldi writes one gzipped lattice per utterance and a lat.scp for random access; pynnet's
# steps/nnet/train_mpe.sh reads lat.JOB.gz in order, so these are written as the decoders'
# lat.JOB.gz.)

# Begin configuration section.
nj=4
cmd=run.pl
beam=13.0
lattice_beam=7.0
acwt=0.1
max_active=5000
nnet=                # default: <src-dir>/final.nnet
nnet_forward_opts=   # more options for pynnet-nnet-forward (Kaldi's "--no-softmax=true --prior-scale=1.0" is
                     # accepted: logits and log-softmax differ by a per-frame constant)
num_threads=1        # utterances decoded at once in each job
use_gpu=no           # yes|no|optional|wait (pynnet-nnet-forward's --use-gpu)
stage=0
# Kaldi nnet1 options
sub_split=1          # (only 1: jobs are not sub-split)
max_mem=             # (ignored: pynnet's lattices are not determinized)
parallel_opts=       # (ignored, as in Kaldi: --num-threads tells $cmd)
ivector=             # (refused: i-vectors are not supported)
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir> <src-dir> <exp-dir>
 e.g.: $0 --nj 20 --acwt 0.1 data-fbank/train data/lang exp/dnn exp/dnn_denlats
<src-dir> is the DNN's exp dir (final.nnet, final.mdl, tree), <lang-dir> the lang dir without G.fst.
Options:
  --nj <nj>                   # parallel jobs (default $nj)
  --cmd <cmd>                 # job runner (default $cmd)
  --beam <f>                  # decoding beam (default $beam)
  --lattice-beam <f>          # (default $lattice_beam)
  --acwt <f>                  # acoustic scale (default $acwt)
  --max-active <n>            # (default $max_active)
  --nnet <file>               # a DNN other than <src-dir>/final.nnet
  --num-threads <n>           # utterances decoded at once in each job (default $num_threads)
  --use-gpu <yes|no|optional> # the DNN forward pass on a GPU (default $use_gpu)"

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

. steps/libs/decode.sh   # decode_refuse, decode_setup, decode_run_jobs, decode_lat_wspec
decode_refuse ivector "$ivector" "i-vector inputs are not supported"
[ "$sub_split" = 1 ] || decode_refuse sub-split "$sub_split" "jobs are not sub-split (use more --nj)"
[[ $num_threads =~ ^[1-9][0-9]*$ ]] || { echo "$0: --num-threads must be a positive integer, not '$num_threads'" >&2; exit 1; }
case "$use_gpu" in
  yes|no|optional|wait) ;;
  *) echo "$0: --use-gpu must be yes, no, optional or wait, not '$use_gpu'" >&2; exit 1 ;;
esac
[ -z "$nnet" ] && nnet=$srcdir/final.nnet
for f in $data/feats.scp $data/text $lang/L_disambig.fst $lang/words.txt $lang/oov.txt $lang/phones.txt \
    $nnet $srcdir/final.mdl $srcdir/tree; do
  [ -f $f ] || { echo "$0: no such file $f" >&2; exit 1; }
done
utils/lang/check_phones_compatible.sh $srcdir/phones.txt $lang/phones.txt || exit 1

. steps/libs/nnet_input.sh
nnet_cmvn_args "$nnet" "$data" "$data/splitNJ/JOB"   # per-speaker CMVN if the DNN was trained with it

decode_setup  # checks --nj, makes $dir/log and num_jobs, splits the data (sdata)
cmvn_args=${cmvn_args//splitNJ/split$nj}
cp $srcdir/tree $dir/tree
cp -L $srcdir/final.mdl $dir/final.mdl
cp $lang/phones.txt $dir/phones.txt

new_lang=$dir/$(basename "$lang")
if [ $stage -le 0 ]; then
  echo "$0: making the unigram grammar of $data/text in $new_lang"
  rm -rf "$new_lang.tmp"
  cp -r "$lang" "$new_lang.tmp"
  rm -f "$new_lang.tmp/G.fst"
  pynnet-make-unigram-grammar "$lang/words.txt" "$data/text" "$new_lang.tmp/G.fst" 2> $dir/log/unigram_grammar.log || {
    echo "$0: $(tail -1 $dir/log/unigram_grammar.log)" >&2; rm -rf "$new_lang.tmp"; exit 1; }
  if [ -f "$new_lang/G.fst" ] && cmp -s "$new_lang/G.fst" "$new_lang.tmp/G.fst" && \
      diff -rq -x G.fst "$lang" "$new_lang" >/dev/null 2>&1; then
    rm -rf "$new_lang.tmp"   # the same grammar: the graph made from it stays valid
  else
    rm -rf "$new_lang"
    mv "$new_lang.tmp" "$new_lang"
  fi
  if [ -s $dir/dengraph/HCLG.fst ] && [ $dir/dengraph/HCLG.fst -nt $srcdir/final.mdl ] && \
      [ $dir/dengraph/HCLG.fst -nt $new_lang/G.fst ]; then
    echo "$0: $dir/dengraph/HCLG.fst is newer than the model and G.fst: not rebuilt"
  else
    echo "$0: compiling the denominator graph $dir/dengraph"
    utils/mkgraph.sh "$new_lang" "$dir" "$dir/dengraph" > $dir/log/mkgraph.log 2>&1 || {
      echo "$0: utils/mkgraph.sh failed: $(grep -m1 -E "ERROR|error" $dir/log/mkgraph.log || tail -1 $dir/log/mkgraph.log)" >&2
      exit 1
    }
  fi
fi

if [ $stage -le 1 ]; then
  echo "$0: generating denominator lattices of $data with $nnet in $dir ($nj jobs)"
  # (decode_run_jobs' logs are decode.JOB.log; Kaldi names them decode_den.JOB.log: linked below)
  # shellcheck disable=SC2086
  decode_run_jobs \
    pynnet-nnet-forward --prior-subtract --use-gpu $use_gpu $nnet_forward_opts $cmvn_args \
      "$nnet" "scp:$sdata/JOB/feats.scp" ark:- \| \
    pynnet-decode-faster-mapped --max-active $max_active --beam $beam --lattice-beam $lattice_beam \
      --acoustic-scale $acwt --allow-partial false --num-threads $num_threads \
      --word-symbol-table "$lang/words.txt" "$dir/final.mdl" "$dir/dengraph/HCLG.fst" ark:- \
      "$(decode_lat_wspec)"
  for n in $(seq $nj); do ln -sf decode.$n.log $dir/log/decode_den.$n.log; done
fi
n_lat=$(for n in $(seq $nj); do [ -f $dir/lat.$n.gz ] && echo $n; done | wc -l)
[ "$n_lat" -eq "$nj" ] || { echo "$0: only $n_lat of $nj jobs wrote lattices (see $dir/log/decode.*.log)" >&2; exit 1; }
echo "$0: done generating denominator lattices in $dir."
