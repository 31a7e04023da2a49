#!/usr/bin/env bash
# pynnet recipe for the built-in synthesized corpus (espeak-ng voices, telephone channel, noise).
# Stages (Kaldi style; --stage N resumes at stage N):
#   0  synthesize the corpus: data/{train,dev,test}, data/local/dict, data/local/lm/train.txt
#   1  MFCC + CMVN features (GMM); fbank + CMVN features (the fbank DNN of --dnn-feats fbank|both)
#   2  lang dir, trigram LM, G.fst
#   3  monophone GMM;      4  its graph + decode (dev and test: dev chooses the LM weight and penalty)
#   5  align; tri1;        6  its graph + decode
#   7  align; tri2;        8  its graph + decode
#   9  align; tri3 (LDA+MLLT);   10  its graph + decode
#  11  fMLLR alignments; tri4 (SAT);   12  its graph + fMLLR decode (two-pass, Kaldi's decode_fmllr.sh)
#  13  tri4's fMLLR alignments of train; fMLLR features of train/dev/test for the DNN (data-fmllr)
#  14  DBN pretraining (RBM);  15 DNN fine-tuning on tri4's alignments: NG-SGD on 2 MPI workers with
#      model averaging (exp/dnn_avg; --compare-parallel true: also 1 worker, exp/dnn, 1-bit averaging
#      and 1-bit SGD);  16  DNN decode
#  17  ablations: random init + plain SGD, DBN + plain SGD (1 worker); 1-bit SGD without error feedback
#  18  (--smbr true) sequence training (nnet1): DNN alignments, denominator lattices, sMBR; decode
#  19  exp/RESULTS: systems in training order, test at dev's LM weight/penalty (pynnet-results)
# The DNNs' input (--dnn-feats): fmllr (tri4's speaker-adapted LDA+MLLT features, nnet1's Switchboard
# path; the default), fbank (40 log mel filterbanks with per-speaker CMVN: exp/*_fbank), or both.
set -euo pipefail
stage=0
stop_stage=100
nj=2
train_hours=1.0       # size of the synthesized training set
seed=1
ablations=false       # stage 17: two more DNNs (random init + SGD, DBN + SGD), trained side by side
smbr=false            # stage 18: sMBR sequence training of the DNN (Kaldi nnet1's run_dnn.sh does it; here
                      # it took ~20 min for no gain: egs/synth/RESULTS)
smbr_iters=4
# Tree sizes: 1 h of training audio supports small trees (docs/notes/gmm.md).
tri1_leaves=300; tri1_gauss=2000
tri2_leaves=500; tri2_gauss=3000
tri3_leaves=500; tri3_gauss=3000   # LDA+MLLT
tri4_leaves=500; tri4_gauss=3000   # SAT
dnn_feats=fmllr       # fmllr | fbank | both (egs/synth/RESULTS has both rows)
# RBM epochs: nnet1's default of 1 (2 for the Gaussian layer) is sized for hundreds of hours; on
# 1 h it leaves the DBN undertrained and a worse start than random init (docs/notes/nnet.md).
rbm_iter=3
nnet_threads=2        # torch threads for stage 14 and the 1-worker DNN (this machine's 2 cores; exact
                      # resume of a training needs the same number)
num_workers=2         # stage 15: MPI ranks of the DNN training (threads each: cores / workers)
average_every=10      # minibatches between model averages (Su & Chen: 10 beat 20)
dnn_minibatch=256     # stage 15, 17: frames per update of the NG-SGD/SGD DNNs, their ranks together (set it
                      # here, not in --dnn-opts): one worker's minibatch; with averaging, dnn_minibatch / K
                      # per rank (rounded up), so that an epoch has the 1-worker's number of updates (256 per
                      # rank lost 0.66 on dev over four seeds: RESULTS)
compare_parallel=false  # stage 15-16: also exp/dnn (1 worker), exp/dnn_avg1bit (1-bit averaging) and
                        # exp/dnn_1bit (1-bit SGD, Seide et al.)
dnn_opts="--max-epochs 10"
onebit_opts="--optimizer adagrad --learn-rate 0.016 --minibatch-size 256"   # exp/dnn_1bit (global minibatch)
help_message="Usage: $0 [--stage N] [--stop-stage N] [--nj N] [--train-hours H] [--seed S] [--ablations true|false]
  [--smbr true|false] [--smbr-iters N] [--tri{1,2,3,4}-leaves N --tri{1,2,3,4}-gauss N] [--dnn-feats fmllr|fbank|both]
  [--rbm-iter N] [--nnet-threads N]
  [--num-workers N] [--average-every N] [--dnn-minibatch N] [--compare-parallel true|false] [--dnn-opts \"...\"] [--onebit-opts \"...\"]"

cd "$(dirname "$0")"
. ./cmd.sh
. ./path.sh
. utils/parse_options.sh
# parse_options.sh stops at the first word that is not an option: anything left is a mistake
# ("./run.sh x --stage 14" would otherwise run everything from stage 0)
if [ $# -ne 0 ]; then
  echo "$0: unexpected argument(s): $*" >&2; printf '%s\n' "$help_message" >&2; exit 1
fi
for v in stage stop_stage seed nj tri1_leaves tri1_gauss tri2_leaves tri2_gauss tri3_leaves tri3_gauss tri4_leaves tri4_gauss rbm_iter nnet_threads smbr_iters \
    num_workers average_every dnn_minibatch; do
  case "$v:${!v}" in
    *:|*:*[!0-9]*) echo "$0: --${v//_/-} must be an integer, not '${!v}'" >&2; exit 1 ;;
    stage:*|stop_stage:*|seed:*) ;;
    *:0) echo "$0: --${v//_/-} must be positive" >&2; exit 1 ;;
  esac
done
if [ "$compare_parallel" = true ] && [ "$num_workers" -eq 1 ]; then
  echo "$0: --compare-parallel true compares with --num-workers > 1, not 1" >&2; exit 1
fi
case "$dnn_feats" in fmllr|fbank|both) ;; *) echo "$0: --dnn-feats must be fmllr, fbank or both, not '$dnn_feats'" >&2; exit 1;; esac
[[ "$train_hours" =~ ^[0-9]*\.?[0-9]+$ ]] || { echo "$0: --train-hours must be a number of hours, not '$train_hours'" >&2; exit 1; }

# First use: install the environment (idempotent; a no-op once installed).
"$PYNNET_ROOT/tools/install.sh"
. ./path.sh

run() { [ "$stage" -le "$1" ] && [ "$stop_stage" -ge "$1" ]; }

if run 0; then
  echo "$0: stage 0: synthesizing the corpus ($train_hours h train)"
  local/prepare_data.sh --train-hours "$train_hours" --seed "$seed" --nj "$nj" db data
  for x in train dev test; do utils/validate_data_dir.sh --no-feats data/$x; done
fi

if run 1; then
  echo "$0: stage 1: features"
  for x in train dev test; do
    steps/make_mfcc.sh --nj "$nj" --cmd "$train_cmd" data/$x exp/make_mfcc/$x mfcc
    steps/compute_cmvn_stats.sh data/$x exp/make_mfcc/$x mfcc
    utils/validate_data_dir.sh data/$x
    [ "$dnn_feats" != fmllr ] || continue
    utils/copy_data_dir.sh data/$x data-fbank/$x
    steps/make_fbank.sh --nj "$nj" --cmd "$train_cmd" data-fbank/$x exp/make_fbank/$x fbank
    steps/compute_cmvn_stats.sh data-fbank/$x exp/make_fbank/$x fbank
  done
fi

if run 2; then
  echo "$0: stage 2: lang, LM, G"
  utils/prepare_lang.sh data/local/dict "<unk>" data/local/lang_tmp data/lang
  steps/train_lm.sh --order 3 data/lang/words.txt data/local/lm/train.txt data/local/lm/lm_tg.arpa.gz
  utils/format_lm.sh data/lang data/local/lm/lm_tg.arpa.gz data/local/dict data/lang_test
fi

decode_gmm() {  # <exp-dir> [<decode script>]: dev (chooses the LM weight and penalty), then test, scored
  # on dev's LM-weight grid (which scoring extends when dev's best is on its edge), so that dev's
  # choice is among test's scores
  utils/mkgraph.sh data/lang_test "$1" "$1/graph"
  local decode=${2:-steps/decode.sh} grid
  $decode --nj "$nj" --cmd "$decode_cmd" "$1/graph" data/dev "$1/decode_dev"
  grid=$(awk '{print "--min-lmwt", $3, "--max-lmwt", $4}' "$1/decode_dev/scoring_kaldi/lmwt_grid" 2>/dev/null || true)
  $decode --nj "$nj" --cmd "$decode_cmd" --scoring-opts "$grid" "$1/graph" data/test "$1/decode_test"
}

if run 3; then
  echo "$0: stage 3: monophone"
  steps/train_mono.sh --nj "$nj" --cmd "$train_cmd" --boost-silence 1.25 data/train data/lang exp/mono
fi
if run 4; then decode_gmm exp/mono; fi

if run 5; then
  echo "$0: stage 5: tri1"
  steps/align_si.sh --nj "$nj" --cmd "$train_cmd" --boost-silence 1.25 data/train data/lang exp/mono exp/mono_ali
  steps/train_deltas.sh --nj "$nj" --cmd "$train_cmd" --boost-silence 1.25 \
    $tri1_leaves $tri1_gauss data/train data/lang exp/mono_ali exp/tri1
fi
if run 6; then decode_gmm exp/tri1; fi

if run 7; then
  echo "$0: stage 7: tri2"
  steps/align_si.sh --nj "$nj" --cmd "$train_cmd" data/train data/lang exp/tri1 exp/tri1_ali
  steps/train_deltas.sh --nj "$nj" --cmd "$train_cmd" $tri2_leaves $tri2_gauss data/train data/lang exp/tri1_ali exp/tri2
fi
if run 8; then decode_gmm exp/tri2; fi

if run 9; then
  echo "$0: stage 9: tri3 (LDA+MLLT)"
  steps/align_si.sh --nj "$nj" --cmd "$train_cmd" data/train data/lang exp/tri2 exp/tri2_ali
  steps/train_lda_mllt.sh --cmd "$train_cmd" --splice-opts "--left-context=3 --right-context=3" \
    $tri3_leaves $tri3_gauss data/train data/lang exp/tri2_ali exp/tri3
fi
if run 10; then decode_gmm exp/tri3; fi

if run 11; then
  echo "$0: stage 11: tri4 (SAT)"
  steps/align_fmllr.sh --nj "$nj" --cmd "$train_cmd" data/train data/lang exp/tri3 exp/tri3_ali
  steps/train_sat.sh --cmd "$train_cmd" $tri4_leaves $tri4_gauss data/train data/lang exp/tri3_ali exp/tri4
fi
if run 12; then decode_gmm exp/tri4 steps/decode_fmllr.sh; fi

if run 13; then
  echo "$0: stage 13: tri4 alignments and fMLLR features"
  steps/align_fmllr.sh --nj "$nj" --cmd "$train_cmd" data/train data/lang exp/tri4 exp/tri4_ali
  if [ "$dnn_feats" != fbank ]; then
    for x in train dev test; do
      transforms=exp/tri4/decode_$x; [ $x = train ] && transforms=exp/tri4_ali
      steps/nnet/make_fmllr_feats.sh --nj "$nj" --cmd "$train_cmd" --transform-dir $transforms \
        data-fmllr/$x data/$x exp/tri4 exp/make_fmllr/$x fmllr
    done
  fi
fi

# the recipe's DNN: RBM pretraining -> NG-SGD local updates -> periodic MPI averaging, on tri4's
# alignments; <dnn_feats>: fmllr (exp/dbn, exp/dnn_avg ...) and/or fbank (exp/dbn_fbank, exp/dnn_avg_fbank ...)
feat_sets=$dnn_feats; [ "$dnn_feats" = both ] && feat_sets="fmllr fbank"
suffix_of() { [ "$1" = fmllr ] && echo "" || echo "_$1"; }
avg_minibatch=$(( (dnn_minibatch + num_workers - 1) / num_workers ))   # per averaging rank
dnn=exp/dnn_avg; [ "$num_workers" -gt 1 ] || dnn=exp/dnn
main_feats=${feat_sets%% *}    # the DNN the ablations and sMBR start from
main_dnn=$dnn$(suffix_of $main_feats)
if run 14; then
  for f in $feat_sets; do
    echo "$0: stage 14: DBN pretraining ($f)"
    steps/nnet/pretrain_dbn.sh --nn-depth 4 --hid-dim 512 --rbm-iter $rbm_iter --num-threads $nnet_threads \
      data-$f/train exp/dbn$(suffix_of $f)
  done
fi

if run 15; then
  for f in $feat_sets; do
    x=$(suffix_of $f)
    echo "$0: stage 15: DNN training on $f (DBN init, NG-SGD, $num_workers workers, minibatches of $avg_minibatch per rank, averaged every $average_every)"
    if [ "$num_workers" -gt 1 ]; then
      steps/nnet/train.sh $dnn_opts --dbn exp/dbn$x/final.dbn --optimizer ngsgd \
        --num-workers $num_workers --sync average --average-every $average_every --minibatch-size $avg_minibatch \
        data-$f/train data/lang exp/tri4_ali exp/dnn_avg$x
    fi
    if [ "$num_workers" -eq 1 ] || [ "$compare_parallel" = true ]; then
      steps/nnet/train.sh $dnn_opts --dbn exp/dbn$x/final.dbn --optimizer ngsgd --num-threads $nnet_threads \
        --minibatch-size $dnn_minibatch data-$f/train data/lang exp/tri4_ali exp/dnn$x
    fi
    if [ "$compare_parallel" = true ]; then
      steps/nnet/train.sh $dnn_opts --dbn exp/dbn$x/final.dbn --optimizer ngsgd \
        --num-workers $num_workers --sync average-1bit --average-every $average_every --minibatch-size $avg_minibatch \
        data-$f/train data/lang exp/tri4_ali exp/dnn_avg1bit$x
      steps/nnet/train.sh $dnn_opts $onebit_opts --dbn exp/dbn$x/final.dbn --num-workers 2 --sync 1bit \
        data-$f/train data/lang exp/tri4_ali exp/dnn_1bit$x
    fi
  done
fi
if run 16; then
  for f in $feat_sets; do
    x=$(suffix_of $f)
    dnns=$dnn$x; [ "$compare_parallel" = true ] && dnns="exp/dnn_avg$x exp/dnn$x exp/dnn_avg1bit$x exp/dnn_1bit$x"
    for d in $dnns; do
      for y in dev test; do
        steps/nnet/decode.sh --nj "$nj" --cmd "$decode_cmd" exp/tri4/graph data-$f/$y $d/decode_$y
      done
    done
  done
fi

x=$(suffix_of $main_feats)
if run 17 && [ "$ablations" = true ]; then
  echo "$0: stage 17: ablations on $main_feats features (two trainings side by side, one core each)"
  steps/nnet/train.sh $dnn_opts --nn-depth 4 --hid-dim 512 --optimizer sgd --minibatch-size $dnn_minibatch \
    data-$main_feats/train data/lang exp/tri4_ali exp/dnn_randinit_sgd$x > exp/dnn_randinit_sgd$x.out 2>&1 &
  pid1=$!
  steps/nnet/train.sh $dnn_opts --dbn exp/dbn$x/final.dbn --optimizer sgd --minibatch-size $dnn_minibatch \
    data-$main_feats/train data/lang exp/tri4_ali exp/dnn_dbn_sgd$x > exp/dnn_dbn_sgd$x.out 2>&1 &
  pid2=$!
  wait $pid1 || { cat exp/dnn_randinit_sgd$x.out; exit 1; }
  wait $pid2 || { cat exp/dnn_dbn_sgd$x.out; exit 1; }
  # 1-bit SGD without error feedback (Seide et al.: it then fails to train)
  steps/nnet/train.sh $dnn_opts $onebit_opts --dbn exp/dbn$x/final.dbn --num-workers 2 --sync 1bit \
    --error-feedback false data-$main_feats/train data/lang exp/tri4_ali exp/dnn_1bit_noef$x
  for d in dnn_randinit_sgd$x dnn_dbn_sgd$x dnn_1bit_noef$x; do
    for y in dev test; do
      steps/nnet/decode.sh --nj "$nj" --cmd "$decode_cmd" exp/tri4/graph data-$main_feats/$y exp/$d/decode_$y
    done
  done
fi

if run 18 && [ "$smbr" = true ]; then
  echo "$0: stage 18: sequence training (sMBR) of $main_dnn"
  steps/nnet/align.sh --nj "$nj" --cmd "$train_cmd" data-$main_feats/train data/lang $main_dnn ${main_dnn}_ali
  steps/nnet/make_denlats.sh --nj "$nj" --cmd "$decode_cmd" --acwt 0.1 data-$main_feats/train data/lang $main_dnn ${main_dnn}_denlats
  steps/nnet/train_mpe.sh --cmd "$train_cmd" --num-iters $smbr_iters --acwt 0.1 --do-smbr true \
    data-$main_feats/train data/lang $main_dnn ${main_dnn}_ali ${main_dnn}_denlats exp/dnn_smbr$x
  for y in dev test; do
    steps/nnet/decode.sh --nj "$nj" --cmd "$decode_cmd" exp/tri4/graph data-$main_feats/$y exp/dnn_smbr$x/decode_$y
  done
fi

if run 19; then
  echo "$0: stage 19: results"
  # training order; each DNN's parent is tri4 (its alignments and the fMLLR features), the DNN
  # variants' the recipe's DNN of the same features
  systems=(--system mono=exp/mono --system tri1=exp/tri1:mono --system tri2=exp/tri2:tri1
           --system tri3=exp/tri3:tri2 --system tri4=exp/tri4:tri3)
  for f in $feat_sets; do
    x=$(suffix_of $f)
    systems+=(--system "$(basename $dnn)$x=$dnn$x:tri4")
    for d in exp/dnn exp/dnn_avg exp/dnn_avg1bit exp/dnn_1bit exp/dnn_randinit_sgd exp/dnn_dbn_sgd exp/dnn_1bit_noef exp/dnn_smbr; do
      [ "$d" = "$dnn" ] || [ ! -d "$d$x/decode_test" ] || systems+=(--system "$(basename $d)$x=$d$x")
    done
  done
  pynnet-results --test test --dev dev --data data/test "${systems[@]}" > exp/RESULTS.tmp
  mv exp/RESULTS.tmp exp/RESULTS
  cat exp/RESULTS
fi
