#!/usr/bin/env bash
# Kaldi's utils/data/get_utt2dur.sh: writes <data>/utt2dur (utterance duration in seconds), from
# segments (end - start) or else by reading every recording of wav.scp in $nj parallel jobs.
__top=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
export PATH=$__top/tools/venv/bin:$__top/utils:$PATH LC_ALL=C
cmd=run.pl
nj=4
read_entire_file=false
help_message="Usage: $0 [options] <data-dir>
Options: --cmd <run.pl|slurm.pl ...>  how to run the jobs (default run.pl)
         --nj <n>                    number of parallel jobs reading wav.scp (default 4)
         --read-entire-file <bool>   accepted for Kaldi compatibility (audio is always read entirely)
e.g.: $0 data/train"
. "$__top/utils/parse_options.sh" || exit 1
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
else
  [ -f "$data/wav.scp" ] || { echo "$0: neither $data/segments nor $data/wav.scp exists" >&2; exit 1; }
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
fi
if [ "$(wc -l < "$data/utt2dur.tmp")" -ne "$(wc -l < "$data/utt2spk")" ]; then
  echo "$0: warning: $data/utt2dur has $(wc -l < "$data/utt2dur.tmp") lines, utt2spk $(wc -l < "$data/utt2spk") (run utils/fix_data_dir.sh)" >&2
fi
mv "$data/utt2dur.tmp" "$data/utt2dur"
echo "$0: computed $data/utt2dur" >&2
