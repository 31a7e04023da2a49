#!/usr/bin/env bash
# CER (character error rate) scoring of a decode dir over the LM-weight x word-insertion-penalty
# grid (Kaldi's steps/scoring/score_kaldi_cer.sh): the word hypotheses of every grid point and
# the reference are split into characters -- each word into its characters, the spaces between
# words dropped; words like [noise], <unk> or !SIL stay whole; local/character_tokenizer (if
# executable) splits instead -- and scored as words are.  Writes
#   <decode-dir>/scoring_kaldi/test_filt.chars.txt, penalty_<WIP>/<LMWT>.chars.txt   the characters
#   <decode-dir>/cer_<LMWT>_<WIP>                         compute-wer output (a %WER line) per point
#   <decode-dir>/scoring_kaldi/best_cer                   the best of them (utils/best_wer.sh)
#   <decode-dir>/scoring_kaldi/cer_details/{lmwt,wip,per_utt,per_spk,ops}   at the best point
# Stages: 0 finds the word hypotheses (scoring_kaldi/penalty_<WIP>/<LMWT>.txt) and their wer_*
# files as steps/score_kaldi.sh does; 1 and 2 score the hypotheses an earlier run left by
# characters; 3 only picks the best CER.  To get both WER and CER without a second pass over the
# lattices, a local/score.sh runs (as Kaldi's aishell recipe does):
#   steps/scoring/score_kaldi_wer.sh "$@"
#   steps/scoring/score_kaldi_cer.sh --stage 2 "$@"

# Begin configuration section.
cmd=run.pl
stage=0
decode_mbr=false
stats=true
beam=6             # (Kaldi's lattice-prune beam for MBR; unused without MBR)
word_ins_penalty=0.0,0.5,1.0
min_lmwt=7
max_lmwt=17
lmwt_extend=5      # the best LM weight on the grid's edge: extend the grid by this many weights
max_lmwt_cap=30    # (at most up to this weight; down to 1 at the bottom); 0: no extension
iter=final
# End configuration section.

help_message="Usage: $0 [options] <data-dir> <lang-dir|graph-dir> <decode-dir>
 e.g.: $0 --stage 2 data/test exp/tri1/graph exp/tri1/decode_test
Options:
  --cmd <cmd>                         # job runner (default $cmd)
  --stage <0|1|2|3>                   # 2: the word hypotheses of an earlier steps/scoring/score_kaldi_wer.sh
                                      # run are scored by characters; 3: only pick the best CER
  --min-lmwt <int>                    # minimum LM weight (default $min_lmwt)
  --max-lmwt <int>                    # maximum LM weight (default $max_lmwt)
  --word-ins-penalty <list>           # comma-separated penalties (default $word_ins_penalty)
  --lmwt-extend <int>                 # when the best LM weight is on the grid's edge (the top, or the
                                      # bottom above 1), score this many more weights past it, again
                                      # until it is inside (default $lmwt_extend; 0: never)
  --max-lmwt-cap <int>                # the highest weight an extension goes to (default $max_lmwt_cap)
  --stats <true|false>                # write scoring_kaldi/cer_details (default $stats)"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1
. steps/libs/score.sh

score_setup "$@"  # data lang_or_graph dir symtab wips; scoring_kaldi/test_filt.txt

if [ "$stage" -le 0 ]; then
  score_best_paths   # scoring_kaldi/penalty_<WIP>/<LMWT>.txt
  score_grid wer     # wer_<LMWT>_<WIP>
  score_extend_grid  # the best LM weight on the edge: more weights; scoring_kaldi/lmwt_grid
else
  score_read_grid    # the grid an earlier word scoring extended these options' to
fi

if [ "$stage" -le 2 ]; then
  score_check_hyps
  # (not those of an earlier run: they must not pass for these hypotheses')
  rm -rf "$dir"/cer_* "$dir"/scoring_kaldi/{best_cer,cer_details}
  tokenizer_opt=()
  [ -x local/character_tokenizer ] && tokenizer_opt=(--char-tokenizer local/character_tokenizer)
  score_grid cer --chars true "${tokenizer_opt[@]}"  # *.chars.txt, cer_<LMWT>_<WIP>
fi

if [ "$stage" -le 3 ]; then
  score_pick_best cer .chars.txt "$dir/scoring_kaldi/test_filt.chars.txt"  # best_cer, cer_details
fi

score_done
exit 0
