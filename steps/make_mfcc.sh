#!/usr/bin/env bash
# Copyright: pynnet authors. Kaldi's steps/make_mfcc.sh: MFCC features of a data dir, in parallel.
# Also steps/make_fbank.sh (the same script, run under that name, computes fbank features).
#
# As Kaldi: an utterance that fails (unreadable recording, segment past the end, too short for a
# frame ...) is a warning in the logs and is left out of feats.scp; a count mismatch is a warning
# (run utils/fix_data_dir.sh next), fewer than 95% of the utterances is an error.
# Unlike Kaldi, the jobs write new archives beside the old ones and they replace them only when
# the run succeeds: on failure <data-dir>/feats.scp (moved to .backup/ meanwhile, as Kaldi) is put
# back and still reads the old, untouched features.
set -o pipefail

nj=4
cmd=run.pl
mfcc_config=conf/mfcc.conf
fbank_config=conf/fbank.conf
compress=true
write_utt2num_frames=true
write_utt2dur=true

# steps/make_fbank.sh runs this script with __pynnet_feat_kind=fbank and __pynnet_feat_script set.
# kind, me and utils are set only after the options are parsed: a variable set before that is an
# option (make_fbank.sh --kind mfcc would compute MFCCs).
echo "${__pynnet_feat_script:-$0} $*"
help_message="Usage: ${__pynnet_feat_script:-$0} [options] <data-dir> [<log-dir> [<${__pynnet_feat_kind:-mfcc}-dir>] ]
e.g.: ${__pynnet_feat_script:-$0} data/train
Note: <log-dir> defaults to <data-dir>/log, and <${__pynnet_feat_kind:-mfcc}-dir> defaults to <data-dir>/data.
Options:
  --${__pynnet_feat_kind:-mfcc}-config <config-file>                   # config passed to pynnet-compute-${__pynnet_feat_kind:-mfcc}-feats (default conf/${__pynnet_feat_kind:-mfcc}.conf)
  --nj <nj>                                        # number of parallel jobs (default 4)
  --cmd (utils/run.pl|utils/slurm.pl <options>)    # how to run jobs (default run.pl)
  --compress <true|false>                          # compress the features (default true, as Kaldi)
  --write-utt2num-frames <true|false>              # write <data-dir>/utt2num_frames (default true)
  --write-utt2dur <true|false>                     # write <data-dir>/utt2dur (default true)"

[ -f path.sh ] && . ./path.sh
. "$(dirname "$0")/../utils/parse_options.sh" || exit 1

kind=${__pynnet_feat_kind:-mfcc}
me=${__pynnet_feat_script:-$0}
unset __pynnet_feat_kind __pynnet_feat_script
utils=$(dirname "$0")/../utils

if [ $# -lt 1 ] || [ $# -gt 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi

case "$nj" in ''|*[!0-9]*|0*) echo "$me: --nj must be a positive integer, got '$nj'" >&2; exit 1 ;; esac

data=$1
logdir=${2:-$data/log}
featdir=${3:-$data/data}
if [ $kind = mfcc ]; then config=$mfcc_config; else config=$fbank_config; fi
prog=pynnet-compute-${kind}-feats

# The scp files hold absolute ark paths, so the data dir can be used from anywhere.
case "$featdir" in /*) ;; *) featdir=$PWD/$featdir ;; esac
name=$(basename "$data")
raw=$featdir/raw_${kind}_$name    # raw.N.ark, raw.N.scp: job N's features (Kaldi's names)

for f in "$data/wav.scp" "$config"; do
  [ -f "$f" ] || { echo "$me: no such file $f" >&2; exit 1; }
done
command -v $prog >/dev/null || { echo "$me: $prog not on PATH (source path.sh)" >&2; exit 1; }
mkdir -p "$featdir" "$logdir" || exit 1

# Until the new features are installed, any exit puts the old feats.scp back (its archives are
# untouched: the jobs write raw.N.new.ark) and removes the new files, and the temp files of
# killed jobs' outputs (.raw_mfcc_train.1.new.ark.<random>.tmp: pynnet programs remove their own on
# SIGTERM, but not on SIGKILL).
backed_up=false
committing=false
finish() {
  local rc=$?
  rm -f "$raw".*.new.ark "$raw".*.new.scp "$raw".*.scp.tmp "$featdir"/.raw_${kind}_${name}.*.new.*.tmp \
        "$logdir"/.utt2num_frames.*.tmp "$logdir"/.utt2dur.*.tmp \
        "$data/feats.scp.tmp" "$data/utt2num_frames.tmp" "$data/utt2dur.tmp" 2>/dev/null
  if [ $rc -ne 0 ] && $backed_up && [ ! -e "$data/feats.scp" ]; then
    if $committing; then
      echo "$me: failed while installing the new features; $data has no feats.scp, run this again" >&2
    elif mv "$data/.backup/feats.scp" "$data/feats.scp"; then
      echo "$me: $data/feats.scp is the previous one again (its features are unchanged)" >&2
    fi
  fi
  exit $rc
}
trap finish EXIT
# On a signal: stop the jobs (run.pl passes SIGTERM on to them and waits for them), then exit,
# which puts the old feats.scp back. The jobs run in the background and this shell waits for
# them with 'wait', which a trapped signal interrupts at once: bash runs a trap only after the
# foreground command ends, which was after all the jobs. (A background command of a
# non-interactive shell ignores SIGINT, so every signal is forwarded as SIGTERM.)
on_signal() {
  trap '' INT TERM HUP
  local pids
  pids=$(jobs -p)
  if [ -n "$pids" ]; then
    kill -TERM $pids 2>/dev/null
    wait $pids 2>/dev/null
  fi
  echo "$me: interrupted" >&2
  exit $1
}
trap 'on_signal 130' INT
trap 'on_signal 143' TERM
trap 'on_signal 129' HUP

if [ -f "$data/feats.scp" ]; then
  mkdir -p "$data/.backup" || exit 1
  echo "$me: moving $data/feats.scp to $data/.backup"
  mv "$data/feats.scp" "$data/.backup/feats.scp" || exit 1
  backed_up=true
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

# Nothing from an earlier run may pass for this run's output.
rm -f "$raw".*.new.ark "$raw".*.new.scp "$logdir"/utt2num_frames.* "$logdir"/utt2dur.* 2>/dev/null

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

# A job fails only when none of its utterances got features (or on a real error).
logs="$logdir/make_${kind}_${name}.*.log"
these_logs=; for n in $(seq $nj); do these_logs="$these_logs $logdir/make_${kind}_${name}.$n.log"; done
$cmd JOB=1:$nj "$logdir/make_${kind}_${name}.JOB.log" \
    $prog --config="$config" $vtln_opts $extra_opts --compress=$compress \
      --write-num-frames=ark,t:"$logdir/utt2num_frames.JOB" --write-utt2dur=ark,t:"$logdir/utt2dur.JOB" \
      "$input" ark,scp:"$raw.JOB.new.ark","$raw.JOB.new.scp" &
if ! wait $!; then
  # A full disk or a read-only <mfcc-dir> fails every job the same way: one line, the first job's.
  for l in $these_logs; do
    err=$(grep -m1 -E "^ERROR .*(No space left on device|Read-only file system|Disk quota exceeded|File too large|Input/output error)" "$l" 2>/dev/null)
    if [ -n "$err" ]; then
      echo "$me: error computing ${kind} features for $name: $err (see $l)" >&2
      exit 1
    fi
  done
  echo "$me: error computing ${kind} features for $name; the errors:" >&2
  { grep -h "^ERROR" $these_logs 2>/dev/null | head -10; grep -h "^WARNING" $these_logs 2>/dev/null | head -10; } >&2
  echo "$me: see $logs" >&2
  exit 1
fi

# The jobs' scp files point at raw.N.new.ark: point them at raw.N.ark, where those will go.
for n in $(seq $nj); do
  from="$raw.$n.new.ark:" to="$raw.$n.ark:" awk '
    { i = index($0, " " ENVIRON["from"])
      if (i == 0) { print "unexpected line in " FILENAME ": " $0 > "/dev/stderr"; exit 1 }
      print substr($0, 1, i) ENVIRON["to"] substr($0, i + 1 + length(ENVIRON["from"])) }' \
    "$raw.$n.new.scp" > "$raw.$n.scp.tmp" || exit 1
done
for n in $(seq $nj); do cat "$raw.$n.scp.tmp" || exit 1; done > "$data/feats.scp.tmp" || exit 1
if $write_utt2num_frames; then
  for n in $(seq $nj); do cat "$logdir/utt2num_frames.$n" || exit 1; done > "$data/utt2num_frames.tmp" || exit 1
fi
if $write_utt2dur; then
  for n in $(seq $nj); do cat "$logdir/utt2dur.$n" || exit 1; done > "$data/utt2dur.tmp" || exit 1
fi

nf=$(wc -l < "$data/feats.scp.tmp")
nu=$(wc -l < "$data/utt2spk")
if [ "$nf" -ne "$nu" ]; then
  echo "$me: warning: it seems not all of the utterances got features ($nf != $nu; the warnings" \
       "in $logs say why); consider using utils/fix_data_dir.sh $data" >&2
fi
if [ "$nf" -lt $((nu - nu / 20)) ]; then
  echo "$me: error: less than 95% of the ${kind} features were successfully generated ($nf of $nu" \
       "utterances); probably a serious error. The first warnings:" >&2
  grep -h "^WARNING" $these_logs 2>/dev/null | head -10 >&2
  exit 1
fi

# Install: the archives, then the scp files that point at them. A signal now waits until all is
# installed (a few renames): stopping half-way would leave a data dir that is neither the old one
# nor the new one. committing is true once an old archive may have been replaced (the old
# feats.scp no longer reads its features).
signalled=
trap 'signalled=130' INT
trap 'signalled=143' TERM
trap 'signalled=129' HUP
for n in $(seq $nj); do
  mv "$raw.$n.new.ark" "$raw.$n.ark" || exit 1
  committing=true
  mv "$raw.$n.scp.tmp" "$raw.$n.scp" || exit 1
done
mv "$data/feats.scp.tmp" "$data/feats.scp" || exit 1
committing=false
if $write_utt2num_frames; then mv "$data/utt2num_frames.tmp" "$data/utt2num_frames" || exit 1; fi
if $write_utt2dur; then mv "$data/utt2dur.tmp" "$data/utt2dur" || exit 1; fi

# Store the frame shift and the config along with the features, as Kaldi does.
frame_shift=$(sed -n 's/^--frame-shift=\([0-9.]*\).*/\1/p' "$config" | tail -1)
awk -v s="${frame_shift:-10}" 'BEGIN { printf "%.3f\n", 0.001 * s }' > "$data/frame_shift"
mkdir -p "$data/conf" && cp "$config" "$data/conf/${kind}.conf" || exit 1
rm -f "$logdir"/wav_${name}.*.scp "$logdir"/segments.* "$logdir"/utt2num_frames.* "$logdir"/utt2dur.* 2>/dev/null
if [ -n "$signalled" ]; then
  echo "$me: interrupted after installing the new ${kind} features for $name" >&2
  exit $signalled
fi

echo "$me: Succeeded creating $(echo $kind | tr a-z A-Z) features for $name"
