#!/usr/bin/env bash
# WER scoring of a decode dir over the LM-weight x word-insertion-penalty grid (Kaldi's
# steps/score_kaldi.sh, also steps/scoring/score_kaldi_wer.sh).  Reads <decode-dir>/lat.*.gz, writes
#   <decode-dir>/scoring_kaldi/test_filt.txt              the filtered reference
#   <decode-dir>/scoring_kaldi/penalty_<WIP>/<LMWT>.txt   hypotheses per grid point
#   <decode-dir>/wer_<LMWT>_<WIP>                         compute-wer output per grid point
#   <decode-dir>/scoring_kaldi/best_wer                   the best %WER line (utils/best_wer.sh)
#   <decode-dir>/scoring_kaldi/wer_details/{lmwt,wip,per_utt,per_spk,ops}   at the best point
#   <decode-dir>/scoring_kaldi/lmwt_grid                  "<min> <max> <MIN> <MAX>": the grid options and
#                                                         the grid scored (extended when the best LM
#                                                         weight was on its edge: --lmwt-extend)
# As in Kaldi, local/wer_output_filter, local/wer_ref_filter and local/wer_hyp_filter (if
# executable) filter references and hypotheses.  steps/scoring/score_kaldi_cer.sh --stage 2 then
# scores the same hypotheses by characters.

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
 e.g.: $0 data/test exp/tri1/graph exp/tri1/decode_test
Options:
  --cmd <cmd>                         # job runner (default $cmd)
  --stage <0|1>                       # 1: only pick the best WER and write the details
  --min-lmwt <int>                    # minimum LM weight (default $min_lmwt)
  --max-lmwt <int>                    # maximum LM weight (default $max_lmwt)
  --word-ins-penalty <list>           # comma-separated penalties (default $word_ins_penalty)
  --lmwt-extend <int>                 # when the best LM weight is on the grid's edge (the top, or the
                                      # bottom above 1), score this many more weights past it, again
                                      # until it is inside (default $lmwt_extend; 0: never)
  --max-lmwt-cap <int>                # the highest weight an extension goes to (default $max_lmwt_cap)
  --stats <true|false>                # write scoring_kaldi/wer_details (default $stats)"

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

if [ "$stage" -le 1 ]; then
  score_pick_best wer .txt "$dir/scoring_kaldi/test_filt.txt"  # best_wer, wer_details
fi

score_done
exit 0
