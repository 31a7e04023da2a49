#!/usr/bin/env bash
# Switchboard dictionary (Kaldi's egs/swbd/s5c local/swbd1_prepare_dict.sh; run from egs/swbd):
# the Mississippi State sw-ms98-dict.text -> data/local/dict_nosp/{lexicon.txt, silence_phones.txt
# (sil spn nsn lau), nonsilence_phones.txt, optional_silence.txt (sil), extra_questions.txt (empty),
# acronyms.map (IBM -> i._b._m., for the data prep and the scoring), MSU_single_letter.txt}.
# Kaldi's steps in order: comments dropped, !sil/[vocalized-noise]/[noise]/[laughter]/<unk>
# prepended and the single letters appended, words mapped (partial words, [laughter-x], {x}, x_1),
# acronyms, 'i ay' put back, lowercased. Kaldi's local/dict.patch (about 150 fixed pronunciations
# of the real dictionary) is not applied: we do not ship it (only its removal of the ' file:' line).
# The transcriptions come from <LDC97S62-dir>/transcriptions/swb_ms98_transcriptions or
# --transcripts (openslr.org resource 5: switchboard_word_alignments.tar.gz; no download here).

transcripts=    # the swb_ms98_transcriptions dir [<LDC97S62-dir>/transcriptions/swb_ms98_transcriptions]
help_message="Usage: $0 [--transcripts DIR] <LDC97S62-dir>
 e.g.: $0 /export/corpora3/LDC/LDC97S62
Options:
  --transcripts <dir>   the swb_ms98_transcriptions dir (with sw-ms98-dict.text)"

. ./path.sh || exit 1
. utils/parse_options.sh || exit 1

if [ $# -ne 1 ]; then
  printf "%s\n" "$help_message" >&2
  exit 1
fi
swbd_dir=$1
dir=data/local/dict_nosp

mkdir -p $dir/log || exit 1
pynnet-swbd-prepare-dict --transcripts "$transcripts" "$swbd_dir" $dir 2> $dir/log/prepare_dict.log
rc=$?; cat $dir/log/prepare_dict.log >&2; [ $rc -eq 0 ] || exit 1
utils/validate_dict_dir.pl $dir > $dir/log/validate_dict_dir.log || {
  cat $dir/log/validate_dict_dir.log >&2; echo "$0: $dir does not validate" >&2; exit 1; }
echo "$0: prepared the dictionary in $dir ($(wc -l < $dir/lexicon.txt) entries)"
