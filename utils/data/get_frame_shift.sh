#!/usr/bin/env bash
# Kaldi's utils/data/get_frame_shift.sh: prints the frame shift of a data dir's features in seconds
# (e.g. 0.01), to be captured as frame_shift=$(utils/data/get_frame_shift.sh data/train).  It is
# <data>/frame_shift when that exists; else, as Kaldi's, total duration / total frames of the first
# 10 utterances of feats.scp (utt2dur, made by get_utt2dur.sh when missing; feature lengths from
# pynnet-feat-to-len), printed as awk prints numbers ("%.6g"), 0.01 when just above it (below
# 0.0102), and written to <data>/frame_shift.  With no utt2dur, wav.scp or segments: 0.01.
__top=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
export PATH=$__top/tools/venv/bin:$__top/utils:$PATH LC_ALL=C
help_message="Usage: frame_shift=\$($0 <data-dir>)
e.g.:  frame_shift=\$($0 data/train)
Prints the frame shift in seconds (e.g. 0.01) on standard output.  Without <data-dir>/frame_shift
it is worked out from utt2dur and feats.scp (and written to <data-dir>/frame_shift); without
utt2dur, utils/data/get_utt2dur.sh makes it (which needs write permission to <data-dir>)."
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 1 ]; then printf "%s\n" "$help_message" >&2; exit 1; fi
dir=$1
[ -d "$dir" ] || { echo "$0: no such directory $dir" >&2; exit 1; }
if [ -s "$dir/frame_shift" ]; then
  cat "$dir/frame_shift"
  exit
fi
if [ ! -f "$dir/feats.scp" ]; then
  echo "$0: $dir/feats.scp does not exist" >&2
  exit 1
fi
if [ ! -s "$dir/utt2dur" ]; then
  if [ ! -e "$dir/wav.scp" ] && [ ! -s "$dir/segments" ]; then
    echo "$0: neither $dir/wav.scp nor $dir/segments exist; assuming a frame shift of 0.01." >&2
    echo 0.01
    exit 0
  fi
  echo "$0: $dir/utt2dur does not exist: creating it" >&2
  "$__top/utils/data/get_utt2dur.sh" "$dir" >&2 || exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/get_frame_shift.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
head -n 10 "$dir/feats.scp" > "$tmp/feats.scp"
pynnet-feat-to-len "scp:$tmp/feats.scp" "ark,t:$tmp/lens" || { echo "$0: error running pynnet-feat-to-len on $dir/feats.scp" >&2; exit 1; }
# Kaldi pairs the first 10 lines of utt2dur and of feats.scp; here each utterance of the 10 is looked
# up in utt2dur (the same pairs when the two files list the same sorted utterances).
frame_shift=$(awk -v u2d="$dir/utt2dur" -v me="$0" '
    NR == FNR { dur[$1] = $2; next }
    ($1 in dur) { d += dur[$1]; frames += $2; n++ }
    END { if (n == 0) { print me ": none of the first 10 utterances of feats.scp is in " u2d > "/dev/stderr"; exit 1 }
          if (frames <= 0 || d <= 0) { print me ": cannot work out a frame shift from " d " seconds and " frames " frames" > "/dev/stderr"; exit 1 }
          shift = d / frames
          if (shift > 0.01 && shift < 0.0102) shift = 0.01
          print shift }' "$dir/utt2dur" "$tmp/lens") || exit 1
if echo "$frame_shift" > "$tmp/frame_shift" && cp "$tmp/frame_shift" "$dir/.frame_shift.tmp.$$" 2>/dev/null; then
  mv "$dir/.frame_shift.tmp.$$" "$dir/frame_shift"
else
  rm -f "$dir/.frame_shift.tmp.$$"
  echo "$0: warning: cannot write $dir/frame_shift" >&2
fi
echo "$frame_shift"
