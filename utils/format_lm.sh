#!/usr/bin/env bash
# Copies a lang dir and adds G.fst made from an ARPA LM (Kaldi's utils/format_lm.sh):
# arpa2fst (kaldilm) with #0 on back-off arcs, words.txt as symbol table; checks that G has no
# cycles of empty words and prints fstisstochastic's figures.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
help_message="Usage: $0 [options] <lang_dir> <arpa-LM> <lexicon|dict-dir> <out_dir>
E.g.: $0 data/lang data/local/lm/lm.arpa.gz data/local/dict/lexicon.txt data/lang_test
Convert ARPA-format language models to FSTs (the LM may be gzipped). The lexicon (or the dict
dir holding it) is used to check that G has no cycles of words with empty pronunciations."
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 4 ]; then printf "%s\n" "$help_message" >&2; exit 1; fi
lang_dir=$1; lm=$2; lexicon=$3; out_dir=$4
[ -f "$lang_dir/words.txt" ] || { echo "$0: no such file $lang_dir/words.txt" >&2; exit 1; }
[ -f "$lm" ] || { echo "$0: no such file $lm" >&2; exit 1; }
[ -e "$lexicon" ] || { echo "$0: no such file $lexicon" >&2; exit 1; }
echo "Converting '$lm' to FST"
pynnet-format-lm "$lang_dir" "$lm" "$lexicon" "$out_dir" || exit 1
echo "Succeeded in formatting LM: '$lm'"
