#!/usr/bin/env bash
# pynnet's Switchboard recipe: Kaldi egs/swbd/s5c's GMM stages (docs/notes/swbd_s5c.md) up to tri4
# (SAT), then nnet1's DNN on tri4's fMLLR features: RBM pretraining and the MPI-averaged NG-SGD DNN
# (nnet1's Switchboard shape: 6 x 2048 sigmoid, splice +-5), scored on eval2000 with the stm/glm (hub5 conventions: whole set, SWBD, CallHome).
# Needs the LDC corpora (options below); the tests run every stage on a generated mini fixture in
# the same layout, at toy size through options (tests/test_recipe_swbd.py).
# Stages (--stage N resumes at stage N):
#   1  dictionary (local/swbd1_prepare_dict.sh: sw-ms98-dict.text -> data/local/dict_nosp)
#   2  data/train (local/swbd1_data_prep.sh), data/lang_nosp
#   3  LM from the transcripts (local/swbd1_train_lms.sh; --fisher-dirs adds Fisher text)
#   4  data/lang_nosp_sw1_tg (G.fst)
#   5  data/eval2000 (local/eval2000_data_prep.sh: pem segments, stm, glm)
#   6  (s5c: rt03; not in this recipe)
#   7  MFCC + CMVN for train and eval2000
#   8  subsets: train_dev (first --dev-utts), train_nodev, train_100kshort, train_30kshort,
#      train_100k_nodup, train_nodup
#   9  mono on train_30kshort;  10 tri1 on train_100k_nodup;  11 tri2 on train_100k_nodup
#  12  tri3 (LDA+MLLT) on train_nodup;  13 tri4 (SAT, fMLLR) on train_nodup
#      (each decoded on eval2000 and train_dev with sw1_tg; tri4 with two-pass fMLLR decoding)
#  14  tri4's fMLLR alignments of train_nodup; fMLLR features (data-fmllr: nnet1's Switchboard path,
#      local/nnet/run_dnn.sh)
#  15  DBN pretraining;  16 DNN fine-tuning on tri4's alignments (--num-workers MPI ranks, model
#      averaging);  17 decode
#  18  exp/RESULTS: eval2000 at train_dev's LM weight/penalty, SWBD and CallHome subsets
set -euo pipefail
stage=0
stop_stage=100
swbd_dir=/export/corpora3/LDC/LDC97S62          # swb1: swb1_d*/data/sw0*.sph
transcripts=      # default: <swbd-dir>/transcriptions/swb_ms98_transcriptions (openslr.org/resources/5)
eval2000_audio=/export/corpora2/LDC/LDC2002S09/hub5e_00
eval2000_text=/export/corpora2/LDC/LDC2002T43
fisher_dirs=      # optional: Fisher transcripts for the LM, e.g. "/export/corpora3/LDC/LDC2004T19/fe_03_p1_tran/"
nj=30             # as s5c (its decodes use 30 too); fewer jobs when a set has fewer speakers
decode_nj=30
# subset sizes (s5c's)
dev_utts=4000     # train_dev = the first 4000 utterances
short_utts=100000 # train_100kshort
mono_utts=30000   # train_30kshort (from train_100kshort)
tri_utts=100000   # train_100k_nodup (from train_nodev)
# Kaldi's leaf/Gaussian counts (s5c: tri1 3200/30000, tri2 4000/70000 on train_100k_nodup)
mono_gauss=1000; tri1_leaves=3200; tri1_gauss=30000; tri2_leaves=4000; tri2_gauss=70000
tri3_leaves=6000; tri3_gauss=140000   # LDA+MLLT, train_nodup (s5c)
tri4_leaves=11500; tri4_gauss=200000  # SAT, train_nodup (s5c)
# DNN: nnet1's Switchboard setup (egs/swbd/s5c/local/nnet/run_dnn.sh): 6 x 2048, 1 RBM epoch
dnn_depth=6; dnn_hid_dim=2048; rbm_iter=1
num_workers=2; average_every=10
nnet_threads=2
mono_opts=; tri_opts=; dbn_opts=; dnn_opts=; decode_opts=   # more options for each stage (toy runs)
help_message="Usage: $0 [--stage N] [--stop-stage N] [--swbd-dir DIR] [--transcripts DIR] [--eval2000-audio DIR]
  [--eval2000-text DIR] [--fisher-dirs \"DIR ...\"] [--nj N] [--decode-nj N] [--dev-utts N] [--short-utts N]
  [--mono-utts N] [--tri-utts N] [--mono-gauss N] [--tri{1,2,3,4}-leaves N] [--tri{1,2,3,4}-gauss N] [--dnn-depth N] [--dnn-hid-dim N] [--rbm-iter N] [--num-workers N] [--average-every N]
  [--nnet-threads N] [--mono-opts|--tri-opts|--dbn-opts|--dnn-opts|--decode-opts \"...\"]
 --swbd-dir: LDC97S62;  --eval2000-audio: LDC2002S09/hub5e_00;  --eval2000-text: LDC2002T43"

cd "$(dirname "$0")"
. ./cmd.sh
. ./path.sh
. utils/parse_options.sh
if [ $# -ne 0 ]; then
  echo "$0: unexpected argument(s): $*" >&2; printf '%s\n' "$help_message" >&2; exit 1
fi
for v in stage stop_stage nj decode_nj dev_utts short_utts mono_utts tri_utts mono_gauss tri1_leaves tri1_gauss \
    tri2_leaves tri2_gauss tri3_leaves tri3_gauss tri4_leaves tri4_gauss dnn_depth dnn_hid_dim rbm_iter num_workers average_every nnet_threads; do
  case "${!v}" in ''|*[!0-9]*) echo "$0: --${v//_/-} must be a non-negative integer, not '${!v}'" >&2; exit 1 ;; esac
done
tr_opt=(); [ -n "$transcripts" ] && tr_opt=(--transcripts "$transcripts")

"$PYNNET_ROOT/tools/install.sh"
. ./path.sh
run() { [ "$stage" -le "$1" ] && [ "$stop_stage" -ge "$1" ]; }
nj_of() {  # <data-dir> <max>: jobs for a set, at most its speakers
  local n; n=$(wc -l < "$1/spk2utt"); [ "$n" -lt "$2" ] && echo "$n" || echo "$2"
}

if run 1; then
  echo "$0: stage 1: dictionary"
  local/swbd1_prepare_dict.sh "${tr_opt[@]}" "$swbd_dir"
fi
if run 2; then
  echo "$0: stage 2: data/train, lang"
  local/swbd1_data_prep.sh "${tr_opt[@]}" "$swbd_dir"
  utils/prepare_lang.sh data/local/dict_nosp "<unk>" data/local/lang_nosp data/lang_nosp
fi
if run 3; then
  echo "$0: stage 3: LM"
  # shellcheck disable=SC2086
  local/swbd1_train_lms.sh data/local/train/text data/local/dict_nosp/lexicon.txt data/local/lm $fisher_dirs
fi
if run 4; then
  utils/format_lm.sh data/lang_nosp data/local/lm/sw1.o3g.kn.gz data/local/dict_nosp data/lang_nosp_sw1_tg
fi
if run 5; then
  echo "$0: stage 5: eval2000"
  local/eval2000_data_prep.sh "$eval2000_audio" "$eval2000_text"
fi

if run 7; then
  echo "$0: stage 7: features"
  for x in train eval2000; do
    steps/make_mfcc.sh --nj "$(nj_of data/$x "$nj")" --cmd "$train_cmd" data/$x exp/make_mfcc/$x mfcc
    steps/compute_cmvn_stats.sh data/$x exp/make_mfcc/$x mfcc
    utils/fix_data_dir.sh data/$x
  done
fi

at_most() { local n; n=$(wc -l < "$2/utt2spk"); [ "$1" -lt "$n" ] && echo "$1" || echo "$n"; }  # <num> <data-dir>
if run 8; then
  echo "$0: stage 8: subsets"
  for d in data; do
    rm -rf $d/train_dev $d/train_nodev $d/train_100kshort $d/train_30kshort $d/train_100k $d/train_100k_nodup $d/train_nodup
    utils/subset_data_dir.sh --first $d/train "$dev_utts" $d/train_dev
    n=$(( $(wc -l < $d/train/segments) - dev_utts ))
    [ "$n" -gt 0 ] || { echo "$0: data/train has no more than --dev-utts $dev_utts utterances" >&2; exit 1; }
    utils/subset_data_dir.sh --last $d/train "$n" $d/train_nodev
    # (a corpus smaller than s5c's sizes gives whole sets: the sizes are at most what there is)
    utils/subset_data_dir.sh --shortest $d/train_nodev "$(at_most "$short_utts" $d/train_nodev)" $d/train_100kshort
    utils/subset_data_dir.sh $d/train_100kshort "$(at_most "$mono_utts" $d/train_100kshort)" $d/train_30kshort
    utils/subset_data_dir.sh --first $d/train_nodev "$(at_most "$tri_utts" $d/train_nodev)" $d/train_100k
    utils/data/remove_dup_utts.sh 200 $d/train_100k $d/train_100k_nodup
    utils/data/remove_dup_utts.sh 300 $d/train_nodev $d/train_nodup
  done
fi

sets="eval2000 train_dev"
decode_gmm() {  # <exp-dir> [<decode script>]
  utils/mkgraph.sh data/lang_nosp_sw1_tg "$1" "$1/graph_nosp_sw1_tg"
  local x
  for x in $sets; do
    # shellcheck disable=SC2086
    ${2:-steps/decode.sh} --nj "$(nj_of data/$x "$decode_nj")" --cmd "$decode_cmd" $decode_opts \
      "$1/graph_nosp_sw1_tg" data/$x "$1/decode_${x}_nosp_sw1_tg"
  done
}
if run 9; then
  echo "$0: stage 9: monophone (train_30kshort)"
  # shellcheck disable=SC2086
  steps/train_mono.sh --nj "$(nj_of data/train_30kshort "$nj")" --cmd "$train_cmd" --totgauss "$mono_gauss" $mono_opts \
    data/train_30kshort data/lang_nosp exp/mono
  decode_gmm exp/mono   # (not in s5c: here it shows that tri1 improves on it)
fi
if run 10; then
  echo "$0: stage 10: tri1 (train_100k_nodup, $tri1_leaves leaves, $tri1_gauss Gaussians)"
  steps/align_si.sh --nj "$(nj_of data/train_100k_nodup "$nj")" --cmd "$train_cmd" \
    data/train_100k_nodup data/lang_nosp exp/mono exp/mono_ali
  # shellcheck disable=SC2086
  steps/train_deltas.sh --cmd "$train_cmd" $tri_opts "$tri1_leaves" "$tri1_gauss" \
    data/train_100k_nodup data/lang_nosp exp/mono_ali exp/tri1
  decode_gmm exp/tri1
fi
if run 11; then
  echo "$0: stage 11: tri2 (train_100k_nodup, $tri2_leaves leaves, $tri2_gauss Gaussians)"
  steps/align_si.sh --nj "$(nj_of data/train_100k_nodup "$nj")" --cmd "$train_cmd" \
    data/train_100k_nodup data/lang_nosp exp/tri1 exp/tri1_ali
  # shellcheck disable=SC2086
  steps/train_deltas.sh --cmd "$train_cmd" $tri_opts "$tri2_leaves" "$tri2_gauss" \
    data/train_100k_nodup data/lang_nosp exp/tri1_ali exp/tri2
  decode_gmm exp/tri2
fi
if run 12; then
  echo "$0: stage 12: tri3 (LDA+MLLT, train_nodup, $tri3_leaves leaves, $tri3_gauss Gaussians)"
  steps/align_si.sh --nj "$(nj_of data/train_nodup "$nj")" --cmd "$train_cmd" \
    data/train_nodup data/lang_nosp exp/tri2 exp/tri2_ali_nodup
  # shellcheck disable=SC2086
  steps/train_lda_mllt.sh --cmd "$train_cmd" $tri_opts "$tri3_leaves" "$tri3_gauss" \
    data/train_nodup data/lang_nosp exp/tri2_ali_nodup exp/tri3
  decode_gmm exp/tri3
fi
if run 13; then
  echo "$0: stage 13: tri4 (SAT, train_nodup, $tri4_leaves leaves, $tri4_gauss Gaussians)"
  steps/align_fmllr.sh --nj "$(nj_of data/train_nodup "$nj")" --cmd "$train_cmd" \
    data/train_nodup data/lang_nosp exp/tri3 exp/tri3_ali_nodup
  # shellcheck disable=SC2086
  steps/train_sat.sh --cmd "$train_cmd" $tri_opts "$tri4_leaves" "$tri4_gauss" \
    data/train_nodup data/lang_nosp exp/tri3_ali_nodup exp/tri4
  decode_gmm exp/tri4 steps/decode_fmllr.sh
fi
if run 14; then
  echo "$0: stage 14: tri4 alignments and fMLLR features"
  steps/align_fmllr.sh --nj "$(nj_of data/train_nodup "$nj")" --cmd "$train_cmd" \
    data/train_nodup data/lang_nosp exp/tri4 exp/tri4_ali_nodup
  for x in train_nodup $sets; do
    transforms=exp/tri4/decode_${x}_nosp_sw1_tg; [ $x = train_nodup ] && transforms=exp/tri4_ali_nodup
    steps/nnet/make_fmllr_feats.sh --nj "$(nj_of data/$x "$nj")" --cmd "$train_cmd" --transform-dir $transforms \
      data-fmllr/$x data/$x exp/tri4 exp/make_fmllr/$x fmllr
    for f in stm glm; do [ -f data/$x/$f ] && cp data/$x/$f data-fmllr/$x/; done   # (eval2000's scoring)
  done
fi
if run 15; then
  echo "$0: stage 15: DBN pretraining ($dnn_depth x $dnn_hid_dim)"
  # shellcheck disable=SC2086
  steps/nnet/pretrain_dbn.sh --nn-depth "$dnn_depth" --hid-dim "$dnn_hid_dim" --rbm-iter "$rbm_iter" \
    --splice 5 --num-threads "$nnet_threads" $dbn_opts data-fmllr/train_nodup exp/dbn
fi
dnn=exp/dnn_avg; [ "$num_workers" -gt 1 ] || dnn=exp/dnn
if run 16; then
  echo "$0: stage 16: DNN ($num_workers workers, NG-SGD, averaging every $average_every minibatches)"
  par_opts=(--num-threads "$nnet_threads")
  [ "$num_workers" -gt 1 ] && par_opts=(--num-workers "$num_workers" --sync average --average-every "$average_every")
  # shellcheck disable=SC2086
  steps/nnet/train.sh $dnn_opts --dbn exp/dbn/final.dbn --optimizer ngsgd "${par_opts[@]}" \
    data-fmllr/train_nodup data/lang_nosp exp/tri4_ali_nodup $dnn
fi
if run 17; then
  for x in $sets; do
    # shellcheck disable=SC2086
    steps/nnet/decode.sh --nj "$(nj_of data-fmllr/$x "$decode_nj")" --cmd "$decode_cmd" $decode_opts \
      exp/tri4/graph_nosp_sw1_tg data-fmllr/$x $dnn/decode_${x}_nosp_sw1_tg
  done
fi
if run 18; then
  echo "$0: stage 18: results"
  systems=(--system mono=exp/mono --system tri1=exp/tri1:mono --system tri2=exp/tri2:tri1 --system tri3=exp/tri3:tri2
           --system tri4=exp/tri4:tri3 --system "dnn=$dnn:tri4")
  pynnet-results --test eval2000_nosp_sw1_tg --dev train_dev_nosp_sw1_tg --data data/eval2000 "${systems[@]}" \
    > exp/RESULTS.tmp
  for d in exp/tri1 exp/tri2 exp/tri3 exp/tri4 $dnn; do   # hub5's subsets (the best of each over the grid)
    for s in swbd callhm; do
      f=$d/decode_eval2000_nosp_sw1_tg/scoring_sclite/best_wer_$s
      [ -f "$f" ] && echo "$(cat "$f")   # $(basename "$d"), eval2000 ${s^^} subset"
    done
  done >> exp/RESULTS.tmp
  mv exp/RESULTS.tmp exp/RESULTS
  cat exp/RESULTS
fi
