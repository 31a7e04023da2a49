#!/usr/bin/env bash
# Kaldi's utils/subset_data_dir.sh: a subset of a data dir (all its files filtered to match).
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
usage="Usage: $0 [--first|--last|--shortest|--random|--speakers|--per-spk] [--seed S] <srcdir> <num> <destdir>
   or: $0 --utt-list <utterance-list> <srcdir> <destdir>
   or: $0 --spk-list <speaker-list> <srcdir> <destdir>
 default (no flag): <num> utterances spread through the data (the ones Kaldi's subset_scp.pl picks);
 --first/--last: the first/last <num>; --random: <num> at random (--seed, default 0; not in Kaldi);
 --shortest: the <num> shortest (by utt2num_frames, else feats.scp's frame counts, else utt2dur or segments);
 --speakers: whole speakers in Kaldi's shuffle_list.pl order (--seed = its --srand, default 0) until <num> utterances;
 --per-spk: <num> utterances of each speaker, at an even stride through its list (as Kaldi).
e.g.: $0 --shortest data/train 1000 data/train_1kshort"
for a in "$@"; do case "$a" in -h|--help) echo "$usage" >&2; exit 0 ;; esac; done
if [ $# -lt 3 ] || [ $# -gt 6 ]; then echo "$usage" >&2; exit 1; fi
exec pynnet-subset-data-dir "$@"
