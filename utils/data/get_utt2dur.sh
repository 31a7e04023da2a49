#!/usr/bin/env bash
# Kaldi's utils/data/get_utt2dur.sh: writes <data>/utt2dur (utterance duration in seconds), as
# Kaldi's, from the first of: segments (end - start); frame_shift + utt2num_frames; every recording
# of wav.scp (read in $nj parallel jobs); feats.scp (frames x frame shift).  From frames, Kaldi's
# (frames + 1.5) x frame shift (1.5: the typical (frame length - frame shift) / frame shift).
__top=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
export PATH=$__top/tools/venv/bin:$__top/utils:$PATH LC_ALL=C
cmd=run.pl
nj=4
read_entire_file=false
frame_shift=0.01
help_message="Usage: $0 [options] <data-dir>
Options: --cmd <run.pl|slurm.pl ...>  how to run the jobs (default run.pl)
         --nj <n>                    number of parallel jobs reading wav.scp (default 4)
         --frame-shift <seconds>     for durations from feats.scp when <data-dir>/frame_shift
                                     does not exist (default 0.01)
         --read-entire-file <bool>   accepted for Kaldi compatibility (audio is always read entirely)
e.g.: $0 data/train"
. "$__top/utils/parse_options.sh" || exit 1

# frames_to_dur <frame-shift> <where-it-came-from> <frames-file-name> < "utt frames" lines > $data/utt2dur.tmp
frames_to_dur() {
  awk -v fs="$1" -v src="$2" -v f="$3" 'BEGIN { if (!(fs ~ /^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$/) || fs + 0 <= 0) {
      print "ERROR (get_utt2dur.sh): " src ": bad frame shift \"" fs "\" (seconds, e.g. 0.01)" > "/dev/stderr"; exit 1 } }
    { if (NF != 2 || !($2 ~ /^[0-9]+$/)) { print "ERROR (get_utt2dur.sh): " f ":" NR ": expected <utt> <num-frames>: " $0 > "/dev/stderr"; exit 1 }
      print $1, ($2 + 1.5) * fs }' > "$data/utt2dur.tmp" || { rm -f "$data/utt2dur.tmp"; return 1; }
}
if [ $# -ne 1 ]; then echo "$help_message" >&2; exit 1; fi
data=$1
[ -f "$data/utt2spk" ] || { echo "$0: no such file $data/utt2spk" >&2; exit 1; }
if [ -s "$data/utt2dur" ] && [ "$(wc -l < "$data/utt2dur")" -eq "$(wc -l < "$data/utt2spk")" ]; then
  echo "$0: $data/utt2dur already exists with the expected length.  We won't recompute it." >&2
  exit 0
fi
if [ -f "$data/segments" ]; then
  echo "$0: working out $data/utt2dur from $data/segments" >&2
  awk -v f="$data/segments" '{ if (NF != 4 || !($4 > $3) || $3 < 0) {
      print "ERROR (get_utt2dur.sh): " f ":" NR ": bad segment: " $0 > "/dev/stderr"; bad = 1; exit 1 }
      print $1, $4 - $3 }' < "$data/segments" > "$data/utt2dur.tmp" || { rm -f "$data/utt2dur.tmp"; exit 1; }
elif [ -s "$data/frame_shift" ] && [ -f "$data/utt2num_frames" ]; then
  echo "$0: computing $data/utt2dur from $data/{frame_shift,utt2num_frames}" >&2
  frames_to_dur "$(head -n 1 "$data/frame_shift")" "$data/frame_shift" "$data/utt2num_frames" \
    < "$data/utt2num_frames" || exit 1
elif [ -f "$data/wav.scp" ]; then
  n=$(wc -l < "$data/wav.scp")
  [ "$nj" -gt "$n" ] && nj=$n
  [ "$nj" -ge 1 ] || { echo "$0: $data/wav.scp is empty" >&2; exit 1; }
  tmp=$data/.get_utt2dur; rm -rf "$tmp"; mkdir -p "$tmp" || exit 1
  split_scp.pl "$data/wav.scp" $(for j in $(seq "$nj"); do echo "$tmp/wav.$j.scp"; done) || exit 1
  echo "$0: reading the durations of $n recordings in $nj jobs (logs in $data/log)" >&2
  $cmd JOB=1:"$nj" "$data/log/get_durations.JOB.log" \
    pynnet-wav-to-duration --read-entire-file="$read_entire_file" "scp:$tmp/wav.JOB.scp" "ark,t:$tmp/utt2dur.JOB" || exit 1
  for j in $(seq "$nj"); do cat "$tmp/utt2dur.$j"; done | sort -k1,1 > "$data/utt2dur.tmp" || exit 1
  rm -rf "$tmp"
elif [ -f "$data/feats.scp" ]; then
  echo "$0: no $data/wav.scp: durations from the feature lengths in $data/feats.scp" >&2
  where="--frame-shift"
  if [ -s "$data/frame_shift" ]; then
    frame_shift=$(head -n 1 "$data/frame_shift"); where=$data/frame_shift
    echo "$0: using frame_shift=$frame_shift from $where" >&2
  fi
  pynnet-feat-to-len "scp:$data/feats.scp" ark,t:- > "$data/utt2num_frames.dur.tmp" || { rm -f "$data/utt2num_frames.dur.tmp"; exit 1; }
  frames_to_dur "$frame_shift" "$where" "$data/feats.scp" < "$data/utt2num_frames.dur.tmp"; rc=$?
  rm -f "$data/utt2num_frames.dur.tmp"
  [ $rc -eq 0 ] || exit 1
else
  echo "$0: expected $data/segments, $data/wav.scp or $data/feats.scp to exist" >&2
  exit 1
fi
len1=$(wc -l < "$data/utt2spk")
len2=$(wc -l < "$data/utt2dur.tmp")
if [ "$len2" -ne "$len1" ]; then
  echo "$0: warning: $data/utt2dur has $len2 lines, utt2spk $len1 (run utils/fix_data_dir.sh)" >&2
  if [ "$len1" -gt $((len2 * 2)) ]; then   # (as Kaldi's)
    echo "$0: less than half of the utterances got a duration: failing" >&2
    rm -f "$data/utt2dur.tmp"
    exit 1
  fi
fi
mv "$data/utt2dur.tmp" "$data/utt2dur"
echo "$0: computed $data/utt2dur" >&2
