#!/usr/bin/env bash
# Kaldi's utils/subset_data_dir.sh: a subset of a data dir (all its files filtered to match).
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
usage="Usage: $0 [--first|--last|--shortest|--random|--speakers|--per-spk] [--seed S] <srcdir> <num> <destdir>
   or: $0 --utt-list <utterance-list> <srcdir> <destdir>
   or: $0 --spk-list <speaker-list> <srcdir> <destdir>
 default (no flag): <num> utterances evenly spaced through the data; --first/--last: the first/last <num>;
 --shortest: the <num> shortest (by utt2num_frames, utt2dur or segments); --random: <num> at random (--seed, default 0);
 --speakers: whole random speakers until <num> utterances; --per-spk: the first <num> utterances of each speaker.
e.g.: $0 --shortest data/train 1000 data/train_1kshort"
for a in "$@"; do case "$a" in -h|--help) echo "$usage" >&2; exit 0 ;; esac; done
if [ $# -lt 3 ] || [ $# -gt 6 ]; then echo "$usage" >&2; exit 1; fi
exec pynnet-subset-data-dir "$@"
