#!/usr/bin/env bash
# Switchboard LMs (Kaldi's egs/swbd/s5c local/swbd1_train_lms.sh; run from egs/swbd):
#   <lm-dir>/sw1.o3g.kn.gz and sw1.o4g.kn.gz: interpolated modified Kneser-Ney on the transcripts
#   minus a held-out set, vocabulary = the lexicon's words, other words -> <unk>; the held-out
#   perplexity is printed (and kept in <lm-dir>/log/).
# Held-out set: Kaldi's first 10000 sentences (--heldout-sent). A text of fewer than 10 times that
# many sentences (any toy corpus) holds out its first tenth instead, so the LM keeps 90%.
# Fisher dirs (optional): $x/data/trans/*/*.txt, '#' and empty lines dropped, the first three
# fields (times, side) cut, words mapped to the Switchboard conventions. Kaldi trains a Fisher LM
# and mixes it with SRILM's compute-best-mix weights; we have no SRILM mixing, so sw1_fsh.o{3,4}g.kn.gz
# are trained on the Switchboard and Fisher training text concatenated.

heldout_sent=10000
help_message="Usage: $0 [options] <train-text> <lexicon> <lm-dir> [fisher-dirs...]
 e.g.: $0 data/local/train/text data/local/dict_nosp/lexicon.txt data/local/lm
Options:
  --heldout-sent <n>   held-out sentences (first n of the text) [$heldout_sent]"

. ./path.sh || exit 1
. utils/parse_options.sh || exit 1

if [ $# -lt 3 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
text=$1
lexicon=$2
dir=$3
shift 3
fisher_dirs=("$@")

for f in "$text" "$lexicon"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done
for x in "${fisher_dirs[@]}"; do
  [ -d "$x/data/trans" ] || {
    echo "$0: cannot find transcripts in Fisher directory $x (expected $x/data/trans/*/*.txt)" >&2; exit 1; }
done
export LC_ALL=C
mkdir -p $dir/log || exit 1

n=$(wc -l < "$text")
[ "$n" -gt 1 ] || { echo "$0: $text has $n lines: too few for an LM and a held-out set" >&2; exit 1; }
heldout=$heldout_sent
if [ "$n" -lt $((10 * heldout_sent)) ]; then
  heldout=$(( n / 10 )); [ $heldout -ge 1 ] || heldout=1
  echo "$0: $text has $n sentences (< 10 x $heldout_sent): holding out the first $heldout (10%)"
fi
cut -d' ' -f2- "$text" | gzip -c > $dir/train.all.gz || exit 1
cut -d' ' -f2- "$text" | tail -n +$((heldout + 1)) | gzip -c > $dir/train.gz || exit 1
cut -d' ' -f2- "$text" | head -n $heldout > $dir/heldout || exit 1
cut -d' ' -f1 "$lexicon" | sort -u > $dir/wordlist || exit 1

train_lm() {  # <order> <text.gz> <out.gz> <name>
  local log=$dir/log/$(basename "$3" .kn.gz).log
  gunzip -c "$2" > $dir/.text.$$ || exit 1
  pynnet-train-lm --order $1 --vocab $dir/wordlist --unk "<unk>" $dir/.text.$$ "$3" 2> $log || {
    rm -f $dir/.text.$$; cat $log >&2; echo "$0: training $3 failed" >&2; exit 1; }
  rm -f $dir/.text.$$
  echo "PPL for $4:"
  pynnet-lm-ppl "$3" $dir/heldout | tee -a $log || exit 1
}

train_lm 3 $dir/train.gz $dir/sw1.o3g.kn.gz "SWBD1 trigram LM"
train_lm 4 $dir/train.gz $dir/sw1.o4g.kn.gz "SWBD1 4gram LM"

if [ ${#fisher_dirs[@]} -gt 0 ]; then
  mkdir -p $dir/fisher
  rm -f $dir/fisher/text0
  for x in "${fisher_dirs[@]}"; do
    cat "$x"/data/trans/*/*.txt | grep -v '^#' | grep -v '^[[:space:]]*$' | cut -d' ' -f4- \
      >> $dir/fisher/text0 || exit 1
  done
  python -m pynnet.bin.swbd fisher-map-words < $dir/fisher/text0 | gzip -c > $dir/fisher/text1.gz || exit 1
  echo "$0: $(gunzip -c $dir/fisher/text1.gz | wc -l) Fisher sentences; training on SWBD1 + Fisher text"
  cat $dir/train.gz $dir/fisher/text1.gz > $dir/fisher/train_sw1_fsh.gz || exit 1
  train_lm 3 $dir/fisher/train_sw1_fsh.gz $dir/sw1_fsh.o3g.kn.gz "SWBD1 + Fisher trigram LM"
  train_lm 4 $dir/fisher/train_sw1_fsh.gz $dir/sw1_fsh.o4g.kn.gz "SWBD1 + Fisher 4gram LM"
fi
echo "$0: LMs in $dir"
