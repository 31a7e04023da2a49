#!/usr/bin/env bash
# Kaldi's utils/split_data.sh: <data>/split<N>/<1..N>, each a data dir; no speaker is in two
# parts (with --per-utt: <data>/split<N>utt/, split by utterance).
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
usage="Usage: $0 [--per-utt] <data-dir> <num-to-split>
e.g.: $0 data/train 4     (creates data/train/split4/{1,2,3,4})"
opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --per-utt) opts+=("$1"); shift ;;
    -h|--help) echo "$usage" >&2; exit 0 ;;
    -*) echo "$0: unknown option $1" >&2; echo "$usage" >&2; exit 1 ;;
    *) break ;;
  esac
done
if [ $# -ne 2 ]; then echo "$usage" >&2; exit 1; fi
exec pynnet-split-data "${opts[@]}" "$1" "$2"
