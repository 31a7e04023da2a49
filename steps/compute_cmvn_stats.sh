#!/usr/bin/env bash
# Kaldi's steps/compute_cmvn_stats.sh: per-speaker cepstral mean and variance statistics of a data
# dir's features (2 x (dim+1) double matrices: sums + count, sums of squares) -> <data>/cmvn.scp.
set -o pipefail

fake=false   # --fake true: stats that do no normalization (mean 0, variance 1)

echo "$0 $*"
help_message="Usage: $0 [options] <data-dir> [<log-dir> [<cmvn-dir>] ]
e.g.: $0 data/train exp/make_mfcc/train mfcc
Note: <log-dir> defaults to <data-dir>/log, and <cmvn-dir> defaults to <data-dir>/data
Options:
  --fake [true|false]     # write stats that do no normalization (default false; bare --fake as Kaldi's)"

utils=$(dirname "$0")/../utils
[ -f path.sh ] && . ./path.sh
# Kaldi's forms, read before parse_options.sh (which needs a value for each option): a bare --fake
case "${1:-}" in
  --fake) case "${2:-}" in true|false) ;; *) fake=true; shift ;; esac ;;
  --fake-dims|--two-channel) echo "$0: $1 is not supported (Kaldi's compute_cmvn_stats.sh has it)" >&2; exit 1 ;;
esac
. "$utils/parse_options.sh" || exit 1

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi

data=$1
logdir=${2:-$data/log}
cmvndir=${3:-$data/data}
case "$cmvndir" in /*) ;; *) cmvndir=$PWD/$cmvndir ;; esac
name=$(basename "$data")

for f in "$data/feats.scp" "$data/utt2spk"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done
mkdir -p "$cmvndir" "$logdir" || exit 1

spk2utt=$data/spk2utt
if [ ! -f "$spk2utt" ]; then
  spk2utt=$logdir/spk2utt_$name
  "$utils/utt2spk_to_spk2utt.pl" "$data/utt2spk" > "$spk2utt" || exit 1
fi

if ! pynnet-compute-cmvn-stats --spk2utt=ark:"$spk2utt" $( $fake && echo --fake-stats=true ) \
    scp:"$data/feats.scp" ark,scp:"$cmvndir/cmvn_$name.ark","$cmvndir/cmvn_$name.scp" \
    2> "$logdir/cmvn_$name.log"; then
  echo "$0: error computing CMVN stats for $name:" >&2
  grep "^ERROR" "$logdir/cmvn_$name.log" >&2 || tail -5 "$logdir/cmvn_$name.log" >&2
  exit 1
fi

cp "$cmvndir/cmvn_$name.scp" "$data/cmvn.scp.tmp" && mv "$data/cmvn.scp.tmp" "$data/cmvn.scp" || exit 1

nc=$(wc -l < "$data/cmvn.scp")
nu=$(wc -l < "$spk2utt")
if [ "$nc" -ne "$nu" ]; then
  echo "$0: warning: it seems not all of the speakers got cmvn stats ($nc != $nu); see $logdir/cmvn_$name.log" >&2
  [ "$nc" -eq 0 ] && exit 1
fi
echo "Succeeded creating CMVN stats for $name"
