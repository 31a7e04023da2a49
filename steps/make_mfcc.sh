#!/usr/bin/env bash
# Copyright: pynnet authors. Kaldi's steps/make_mfcc.sh: MFCC features of a data dir, in parallel.
# Also steps/make_fbank.sh (the same script, run under that name, computes fbank features).
set -o pipefail

nj=4
cmd=run.pl
mfcc_config=conf/mfcc.conf
fbank_config=conf/fbank.conf
compress=true
write_utt2num_frames=true
write_utt2dur=true

# steps/make_fbank.sh runs this script with these two set.
kind=${__pynnet_feat_kind:-mfcc}
me=${__pynnet_feat_script:-$0}
unset __pynnet_feat_kind __pynnet_feat_script
utils=$(dirname "$0")/../utils

echo "$me $*"
help_message="Usage: $me [options] <data-dir> [<log-dir> [<${kind}-dir>] ]
e.g.: $me data/train
Note: <log-dir> defaults to <data-dir>/log, and <${kind}-dir> defaults to <data-dir>/data.
Options:
  --${kind}-config <config-file>                   # config passed to pynnet-compute-${kind}-feats (default conf/${kind}.conf)
  --nj <nj>                                        # number of parallel jobs (default 4)
  --cmd (utils/run.pl|utils/slurm.pl <options>)    # how to run jobs (default run.pl)
  --compress <true|false>                          # compress the features (default true, as Kaldi)
  --write-utt2num-frames <true|false>              # write <data-dir>/utt2num_frames (default true)
  --write-utt2dur <true|false>                     # write <data-dir>/utt2dur (default true)"

[ -f path.sh ] && . ./path.sh
. "$utils/parse_options.sh" || exit 1

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi

data=$1
logdir=${2:-$data/log}
featdir=${3:-$data/data}
if [ $kind = mfcc ]; then config=$mfcc_config; else config=$fbank_config; fi
prog=pynnet-compute-${kind}-feats

# The scp files hold absolute ark paths, so the data dir can be used from anywhere.
case "$featdir" in /*) ;; *) featdir=$PWD/$featdir ;; esac
name=$(basename "$data")

for f in "$data/wav.scp" "$config"; do
  [ -f "$f" ] || { echo "$me: no such file $f" >&2; exit 1; }
done
command -v $prog >/dev/null || { echo "$me: $prog not on PATH (source path.sh)" >&2; exit 1; }
mkdir -p "$featdir" "$logdir" || exit 1

if [ -f "$data/feats.scp" ]; then
  mkdir -p "$data/.backup"
  echo "$me: moving $data/feats.scp to $data/.backup"
  mv "$data/feats.scp" "$data/.backup"
fi

"$utils/validate_data_dir.sh" --no-text --no-feats "$data" || exit 1

vtln_opts=
if [ -f "$data/spk2warp" ]; then
  echo "$me [info]: using VTLN warp factors from $data/spk2warp"
  vtln_opts="--vtln-map=ark:$data/spk2warp --utt2spk=ark:$data/utt2spk"
elif [ -f "$data/utt2warp" ]; then
  echo "$me [info]: using VTLN warp factors from $data/utt2warp"
  vtln_opts="--vtln-map=ark:$data/utt2warp"
fi

extra_opts=
if [ -f "$data/segments" ]; then
  echo "$me [info]: segments file exists: using that."
  split_files=; for n in $(seq $nj); do split_files="$split_files $logdir/segments.$n"; done
  "$utils/split_scp.pl" "$data/segments" $split_files || exit 1
  input="scp:$data/wav.scp"
  extra_opts="--segments=$logdir/segments.JOB"
else
  split_files=; for n in $(seq $nj); do split_files="$split_files $logdir/wav_${name}.$n.scp"; done
  "$utils/split_scp.pl" "$data/wav.scp" $split_files || exit 1
  input="scp:$logdir/wav_${name}.JOB.scp"
fi

if ! $cmd JOB=1:$nj "$logdir/make_${kind}_${name}.JOB.log" \
    $prog --config="$config" $vtln_opts $extra_opts --compress=$compress \
      --write-num-frames=ark,t:"$logdir/utt2num_frames.JOB" --write-utt2dur=ark,t:"$logdir/utt2dur.JOB" \
      "$input" ark,scp:"$featdir/raw_${kind}_$name.JOB.ark","$featdir/raw_${kind}_$name.JOB.scp"; then
  echo "$me: error computing ${kind} features for $name; the errors:" >&2
  grep -h "^ERROR\|^WARNING" "$logdir"/make_${kind}_${name}.*.log | head -20 >&2
  echo "$me: see $logdir/make_${kind}_${name}.*.log" >&2
  exit 1
fi

for n in $(seq $nj); do
  cat "$featdir/raw_${kind}_$name.$n.scp" || exit 1
done > "$data/feats.scp.tmp" && mv "$data/feats.scp.tmp" "$data/feats.scp" || exit 1
if $write_utt2num_frames; then
  for n in $(seq $nj); do cat "$logdir/utt2num_frames.$n" || exit 1; done > "$data/utt2num_frames.tmp" \
    && mv "$data/utt2num_frames.tmp" "$data/utt2num_frames" || exit 1
fi
if $write_utt2dur; then
  for n in $(seq $nj); do cat "$logdir/utt2dur.$n" || exit 1; done > "$data/utt2dur.tmp" \
    && mv "$data/utt2dur.tmp" "$data/utt2dur" || exit 1
fi

# Store the frame shift and the config along with the features, as Kaldi does.
frame_shift=$(sed -n 's/^--frame-shift=\([0-9.]*\).*/\1/p' "$config" | tail -1)
awk -v s="${frame_shift:-10}" 'BEGIN { printf "%.3f\n", 0.001 * s }' > "$data/frame_shift"
mkdir -p "$data/conf" && cp "$config" "$data/conf/${kind}.conf" || exit 1
rm -f "$logdir"/wav_${name}.*.scp "$logdir"/segments.* "$logdir"/utt2num_frames.* "$logdir"/utt2dur.* 2>/dev/null

nf=$(wc -l < "$data/feats.scp")
nu=$(wc -l < "$data/utt2spk")
if [ "$nf" -ne "$nu" ]; then
  echo "$me: not all utterances got features ($nf != $nu); see $logdir/make_${kind}_${name}.*.log" >&2
  exit 1
fi
echo "$me: Succeeded creating $(echo $kind | tr a-z A-Z) features for $name"
