#!/usr/bin/env bash
# Decoding with a DNN (Kaldi's steps/nnet/decode.sh): pynnet-nnet-forward computes
# pseudo-log-likelihoods (log posterior - log prior) which pynnet-decode-faster-mapped decodes over
# HCLG into lattices; then scoring. The DNN is <decode-dir>/../final.nnet and the transition model
# <decode-dir>/../final.mdl (steps/nnet/train.sh copies it from the alignment dir).
# Writes <decode-dir>/{lat.JOB.gz,num_jobs,log/decode.JOB.log} and the scoring outputs.

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
scoring_opts=
device=cpu
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
  --skip-scoring <true|false> # (default $skip_scoring)
  --scoring-opts <opts>       # e.g. \"--min-lmwt 7 --max-lmwt 17\"
  --stage <stage>             # 1: only score"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1

if [ $# -ne 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
graphdir=$1
data=$2
dir=$3
srcdir=$(dirname "$dir")
[ -z "$nnet" ] && nnet=$srcdir/final.nnet
[ -z "$model" ] && model=$srcdir/final.mdl

for f in "$graphdir/HCLG.fst" "$graphdir/words.txt" "$data/feats.scp" "$nnet" "$model"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done
case "$nj" in ''|*[!0-9]*|0) echo "$0: --nj must be a positive integer, got '$nj'" >&2; exit 1 ;; esac

mkdir -p "$dir/log"
echo "$nj" > "$dir/num_jobs"
sdata=$data/split$nj
[[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh "$data" "$nj" >/dev/null || exit 1

# per-speaker CMVN only if the DNN was trained with it (its input pipeline says so)
cmvn_args=""
if pynnet-nnet-info "$nnet" | grep -q "'apply_cmvn': True"; then
  [ -f "$data/cmvn.scp" ] || { echo "$0: the DNN needs per-speaker CMVN: no $data/cmvn.scp" >&2; exit 1; }
  cmvn_args="--utt2spk $sdata/JOB/utt2spk --cmvn-scp $sdata/JOB/cmvn.scp"
fi

if [ "$stage" -le 0 ]; then
  rm -f "$dir"/lat.*.gz
  echo "$0: decoding $data with $nnet ($nj jobs)"
  # shellcheck disable=SC2086
  if ! $cmd JOB=1:$nj "$dir/log/decode.JOB.log" \
      pynnet-nnet-forward --prior-subtract --device $device $cmvn_args "$nnet" "scp:$sdata/JOB/feats.scp" ark:- \| \
      pynnet-decode-faster-mapped --max-active $max_active --min-active $min_active --beam $beam \
        --lattice-beam $lattice_beam --acoustic-scale $acwt --allow-partial true \
        --word-symbol-table "$graphdir/words.txt" "$model" "$graphdir/HCLG.fst" ark:- \
        "ark:|gzip -c > $dir/lat.JOB.gz"; then
    rm -f "$dir"/lat.*.gz
    for n in $(seq "$nj"); do
      err=$(grep -m1 "^ERROR" "$dir/log/decode.$n.log" 2>/dev/null || true)
      if [ -n "$err" ]; then echo "$0: decoding failed: $err (see $dir/log/decode.$n.log)" >&2; exit 1; fi
    done
    echo "$0: decoding failed, see $dir/log/decode.*.log" >&2
    exit 1
  fi
fi

if ! $skip_scoring; then
  if [ -x local/score.sh ]; then
    # shellcheck disable=SC2086
    local/score.sh $scoring_opts --cmd "$cmd" "$data" "$graphdir" "$dir" || exit 1
  else
    # shellcheck disable=SC2086
    steps/score_kaldi.sh $scoring_opts --cmd "$cmd" "$data" "$graphdir" "$dir" || exit 1
  fi
fi
echo "$0: done decoding $dir"
exit 0
