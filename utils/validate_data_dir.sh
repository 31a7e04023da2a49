#!/usr/bin/env bash
# Checks a Kaldi data dir as Kaldi's utils/validate_data_dir.sh does (sorted unique keys,
# utt2spk/spk2utt agree, text/feats/wav/segments cover the same utterances, ...).
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
usage="Usage: $0 [--no-feats] [--no-text] [--non-print] [--no-wav] [--no-spk-sort] <data-dir>
The --no-xxx options mean that the script does not require xxx to be present,
but it will check it if it is present.  --no-spk-sort: utt2spk need not also be
sorted by speaker-id (it is when speaker-ids are prefixes of utterance-ids).
--non-print: allow non-printable characters in text.
e.g.: $0 data/train"
opts=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-feats|--no-text|--non-print|--no-wav|--no-spk-sort) opts+=("$1"); shift ;;
    -h|--help) echo "$usage" >&2; exit 0 ;;
    -*) echo "$0: unknown option $1" >&2; echo "$usage" >&2; exit 1 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ]; then echo "$usage" >&2; exit 1; fi
[ -d "$1" ] || { echo "$0: no such directory $1" >&2; exit 1; }
exec pynnet-validate-data-dir "${opts[@]}" "$1"
