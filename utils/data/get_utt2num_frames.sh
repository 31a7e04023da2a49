#!/usr/bin/env bash
# Kaldi's utils/data/get_utt2num_frames.sh: writes <data>/utt2num_frames (frames per utterance)
# unless it is there already.  With feats.scp: the feature lengths (pynnet-feat-to-len, in $nj
# jobs run with $cmd, logs in <data>/log).  Without: from utt2dur (made by get_utt2dur.sh if
# missing) as int((duration - frame_overlap) / frame_shift), as Kaldi's.
__top=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
export PATH=$__top/tools/venv/bin:$__top/utils:$PATH LC_ALL=C
cmd=run.pl
nj=4
frame_shift=0.01
frame_overlap=0.015
help_message="Usage: $0 [options] <data-dir>
Writes <data-dir>/utt2num_frames: the number of frames of each utterance, from feats.scp, or
(no feats.scp) from the durations in utt2dur and the frame shift and overlap.
Options: --cmd <run.pl|slurm.pl ...>  how to run the jobs (default run.pl)
         --nj <n>                    number of parallel jobs (default 4)
         --frame-shift <seconds>     without feats.scp (default 0.01)
         --frame-overlap <seconds>   without feats.scp: frame length - frame shift (default 0.015)
e.g.: $0 data/train"
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 1 ]; then printf "%s\n" "$help_message" >&2; exit 1; fi
data=$1
[ -d "$data" ] || { echo "$0: no such directory $data" >&2; exit 1; }
if [ -s "$data/utt2num_frames" ]; then
  echo "$0: $data/utt2num_frames already present!" >&2
  exit 0
fi
case "$nj" in ''|*[!0-9]*|0) echo "$0: --nj must be a positive integer, got '$nj'" >&2; exit 1 ;; esac
tmp=$data/.get_utt2num_frames.$$
trap 'rm -rf "$tmp"' EXIT
rm -rf "$tmp"; mkdir -p "$tmp" || exit 1

if [ ! -f "$data/feats.scp" ]; then
  if ! [ -s "$data/utt2dur" ] || [ "$(wc -l < "$data/utt2dur")" -ne "$(wc -l < "$data/utt2spk")" ]; then
    "$__top/utils/data/get_utt2dur.sh" --nj "$nj" --cmd "$cmd" "$data" || exit 1
  fi
  awk -v fs="$frame_shift" -v fovlp="$frame_overlap" -v f="$data/utt2dur" -v me="$0" '
    function num(x) { return x ~ /^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/ }
    BEGIN { if (!num(fs) || fs + 0 <= 0 || !num(fovlp)) {
              print me ": bad --frame-shift \"" fs "\" or --frame-overlap \"" fovlp "\" (seconds, e.g. 0.01 0.015)" > "/dev/stderr"; exit 1 } }
    { if (NF != 2 || !num($2)) { print me ": " f ":" NR ": expected <utt> <duration>: " $0 > "/dev/stderr"; exit 1 }
      n = int(($2 - fovlp) / fs)
      if (n <= 0) { print me ": " f ":" NR ": utterance " $1 " of " $2 " seconds is shorter than one frame (" n " frames)" > "/dev/stderr"; exit 1 }
      print $1, n }' < "$data/utt2dur" > "$tmp/utt2num_frames" || exit 1
else
  n=$(wc -l < "$data/feats.scp")
  [ "$n" -ge 1 ] || { echo "$0: $data/feats.scp is empty" >&2; exit 1; }
  [ "$nj" -gt "$n" ] && nj=$n
  split_scp.pl "$data/feats.scp" $(for j in $(seq "$nj"); do echo "$tmp/feats.$j.scp"; done) || exit 1
  $cmd JOB=1:"$nj" "$data/log/get_utt2num_frames.JOB.log" \
    pynnet-feat-to-len "scp:$tmp/feats.JOB.scp" "ark,t:$tmp/utt2num_frames.JOB" || exit 1
  for j in $(seq "$nj"); do cat "$tmp/utt2num_frames.$j"; done | sort -k1,1 > "$tmp/utt2num_frames" || exit 1
fi
mv "$tmp/utt2num_frames" "$data/utt2num_frames" || exit 1
echo "$0: Computed and wrote $data/utt2num_frames" >&2
