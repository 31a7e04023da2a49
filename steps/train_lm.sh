#!/usr/bin/env bash
# Trains an n-gram LM and writes it as ARPA (gzipped if <out> ends in .gz): interpolated modified
# Kneser-Ney (SRILM -kndiscount -interpolate / kenlm lmplz) by default. The vocabulary is a lang
# dir's words.txt (or a word list); other words become the OOV word (--unk, by default the lang's
# oov.txt next to words.txt, else <unk>). Prints the perplexity on the training text.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C

order=3
discount=kn
prune=0
unk=
text_has_uttid=false
help_message="Usage: $0 [options] <vocab> <text> <out-arpa>
e.g.: $0 --order 3 data/lang/words.txt data/local/lm/train.txt data/local/lm/lm_tg.arpa.gz
  <vocab>: a words.txt symbol table or a word list; <text>: one sentence per line
  (a Kaldi 'text' file with --text-has-uttid true, e.g. data/train/text).
Options:
  --order <n>                   # default 3
  --discount (kn|wb)            # default kn: modified Kneser-Ney; wb: Witten-Bell
  --prune <threshold>           # relative-entropy pruning (SRILM -prune), e.g. 1e-7; default 0: none
  --unk <word>                  # OOV word; default: \$(dirname <vocab>)/oov.txt if present, else <unk>
  --text-has-uttid (true|false) # default false"
. "$__top/utils/parse_options.sh" || exit 1
if [ $# -ne 3 ]; then printf "%s\n" "$help_message" >&2; exit 1; fi
vocab=$1; text=$2; out=$3
for f in "$vocab" "$text"; do
  [ -f "$f" ] || { echo "$0: expected $f to exist" >&2; exit 1; }
done
if [ -z "$unk" ]; then
  if [ -f "$(dirname "$vocab")/oov.txt" ]; then unk=$(cat "$(dirname "$vocab")/oov.txt"); else unk="<unk>"; fi
fi
dir=$(dirname "$out")
mkdir -p "$dir/log"
log=$dir/log/train_lm.$(basename "$out" | sed 's/\.gz$//; s/\.arpa$//').log
pynnet-train-lm --order "$order" --discount "$discount" --prune "$prune" --vocab "$vocab" \
  --unk "$unk" --text-has-uttid "$text_has_uttid" "$text" "$out" 2> "$log"
rc=$?; cat "$log" >&2; [ $rc -eq 0 ] || exit 1
pynnet-lm-ppl --text-has-uttid "$text_has_uttid" "$out" "$text" | tee -a "$log" || exit 1
