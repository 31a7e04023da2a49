#!/usr/bin/env bash
# Kaldi's utils/copy_data_dir.sh: copy a data dir, optionally prefixing/suffixing utterance and
# speaker ids (recording ids are kept when there is a segments file).
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
utt_prefix=
utt_suffix=
spk_prefix=
spk_suffix=
validate_opts="--no-feats --no-text"
help_message="Usage: $0 [options] <srcdir> <destdir>
Options: --utt-prefix P --utt-suffix S --spk-prefix P --spk-suffix S (make utt-prefix = spk-prefix so that
speaker-ids stay prefixes of utterance-ids), --validate-opts '--no-feats --no-text' (for the check of destdir)
e.g.: $0 --spk-prefix sp1.1- --utt-prefix sp1.1- data/train data/train_sp1.1"
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 2 ]; then echo "$help_message" >&2; exit 1; fi
[ -d "$1" ] || { echo "$0: no such directory $1" >&2; exit 1; }
exec pynnet-copy-data-dir --utt-prefix="$utt_prefix" --utt-suffix="$utt_suffix" --spk-prefix="$spk_prefix" \
  --spk-suffix="$spk_suffix" --validate-opts="$validate_opts" "$1" "$2"
