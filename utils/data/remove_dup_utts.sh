#!/usr/bin/env bash
# Kaldi's utils/data/remove_dup_utts.sh: copies a data dir keeping at most <max-count> utterances
# with any one transcript (e.g. Switchboard's many "uh-huh"s: swbd s5c uses a max-count of 200-300).
__top=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
help_message="Usage: $0 <max-count> <src-data-dir> <dest-data-dir>
e.g.: $0 300 data/train_100k data/train_100k_nodup"
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 3 ]; then echo "$help_message" >&2; exit 1; fi
exec pynnet-remove-dup-utts "$1" "$2" "$3"
