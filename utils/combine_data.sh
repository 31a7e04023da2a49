#!/usr/bin/env bash
# Kaldi's utils/combine_data.sh: the union of several data dirs (then fix_data_dir).
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
skip_fix=false
extra_files=
help_message="Usage: $0 [--skip-fix (true|false)] [--extra-files 'f1 f2'] <dest-data-dir> <src-data-dir1> <src-data-dir2> ...
 A file is combined only if every source has it, except segments (made from utt2dur where
 missing) and utt2uniq (where only some sources have one, the others get the identity map).
 --skip-fix true: do not run fix_data_dir on the result.
 --extra-files: more files keyed by utterance to combine; standard ones are always combined, and
   optional standard names (utt2uniq, utt2dur, utt2num_frames, utt2lang, vad.scp, ...) are accepted
   here and combined as standard files, as in Kaldi.
e.g.: $0 data/train_all data/train_a data/train_b"
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -lt 2 ]; then echo "$help_message" >&2; exit 1; fi
exec pynnet-combine-data --skip-fix "$skip_fix" --extra-files="$extra_files" "$@"
