#!/usr/bin/env bash
# Trains an n-gram LM on the transcripts of a data dir (or a plain text file) and writes ARPA,
# gzipped: interpolated modified Kneser-Ney (SRILM -kndiscount -interpolate / kenlm lmplz) by
# default. The vocabulary is the lang dir's words.txt; other words become the lang's OOV word.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C

order=3
discount=kn
prune=0
help_message="Usage: $0 [options] <text|data-dir> <lang-dir> <lm-dir>
e.g.: $0 --order 3 data/train data/lang data/local/lm
Writes <lm-dir>/lm.arpa.gz (and <lm-dir>/lm.ppl: perplexity on the training text).
If the first argument is a data dir its 'text' file (with utterance ids) is used.
Options:
  --order <n>            # default 3
  --discount (kn|wb)     # default kn: modified Kneser-Ney; wb: Witten-Bell
  --prune <threshold>    # relative-entropy pruning threshold (e.g. 1e-7); default 0: none"
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 3 ]; then printf "%s\n" "$help_message" >&2; exit 1; fi
src=$1; lang=$2; dir=$3
if [ -d "$src" ]; then text=$src/text; uttid=true; else text=$src; uttid=false; fi
for f in "$text" "$lang/words.txt" "$lang/oov.txt"; do
  [ -f "$f" ] || { echo "$0: expected $f to exist" >&2; exit 1; }
done
mkdir -p "$dir/log"
oov=$(cat "$lang/oov.txt")
pynnet-train-lm --order "$order" --discount "$discount" --prune "$prune" --vocab "$lang/words.txt" \
  --unk "$oov" --text-has-uttid $uttid "$text" "$dir/lm.arpa.gz" 2> "$dir/log/train_lm.log"
rc=$?; cat "$dir/log/train_lm.log" >&2; [ $rc -eq 0 ] || exit 1
pynnet-lm-ppl --text-has-uttid $uttid "$dir/lm.arpa.gz" "$text" > "$dir/lm.ppl" || exit 1
cat "$dir/lm.ppl"
