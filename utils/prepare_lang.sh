#!/usr/bin/env bash
# Makes a Kaldi lang dir from a dict dir, as Kaldi's egs/wsj/s5/utils/prepare_lang.sh:
# phones.txt, words.txt, topo, oov.{txt,int}, L.fst, L_disambig.fst, phones/*.{txt,int,csl}.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C

position_dependent_phones=true
num_sil_states=5
num_nonsil_states=3
sil_prob=0.5
share_silence_phones=false
phone_symbol_table=   # keep the phone ids of this phones.txt (a model's lang dir)
help_message="Usage: $0 <dict-src-dir> <oov-dict-entry> <tmp-dir> <lang-dir>
e.g.: $0 data/local/dict <unk> data/local/lang data/lang
<dict-src-dir> should contain: extra_questions.txt (may be absent), lexicon.txt or lexiconp.txt,
nonsilence_phones.txt, optional_silence.txt, silence_phones.txt.
Options:
  --position-dependent-phones (true|false)  # default: true; if true, use _B, _E, _S & _I
                                            # markers on phones to indicate word-internal positions.
  --num-sil-states <number of states>       # default: 5, #states in silence models.
  --num-nonsil-states <number of states>    # default: 3, #states in non-silence models.
  --sil-prob <probability of silence>       # default: 0.5 [must have 0 <= silprob < 1]
  --phone-symbol-table <phones.txt>         # keep the phone ids of an existing lang dir"
. "$__top/utils/parse_options.sh" || exit 1

if [ $# -ne 4 ]; then printf "%s\n" "$help_message" >&2; exit 1; fi
srcdir=$1; oov_word=$2; tmpdir=$3; dir=$4
[ -d "$srcdir" ] || { echo "$0: no such directory $srcdir" >&2; exit 1; }
exec pynnet-prepare-lang --position-dependent-phones "$position_dependent_phones" \
  --share-silence-phones "$share_silence_phones" \
  ${phone_symbol_table:+--phone-symbol-table "$phone_symbol_table"} \
  --num-sil-states "$num_sil_states" --num-nonsil-states "$num_nonsil_states" \
  --sil-prob "$sil_prob" "$srcdir" "$oov_word" "$tmpdir" "$dir"
