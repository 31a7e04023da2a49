#!/usr/bin/env bash
# pynnet recipe for the built-in synthesized corpus (espeak-ng voices, telephone channel, noise).
# Stages (Kaldi style; --stage N resumes at stage N):
#   0  synthesize the corpus: data/{train,dev,test}, data/local/dict, data/local/lm/train.txt
#   1  MFCC + CMVN features (GMM) and fbank + CMVN features (DNN)
#   2  lang dir, trigram LM, G.fst
#   3  monophone GMM;      4  its graph + decode (dev and test: dev chooses the LM weight and penalty)
#   5  align; tri1;        6  its graph + decode
#   7  align; tri2;        8  its graph + decode
#   9  tri2 alignments of train (for the DNN)
#  10  DBN pretraining (RBM);  11 DNN fine-tuning: NG-SGD on 2 MPI workers with model averaging
#      (exp/dnn_avg; --compare-parallel true: also 1 worker, exp/dnn, 1-bit averaging and 1-bit SGD);
#  12  DNN decode
#  13  ablations: random init + plain SGD, DBN + plain SGD (1 worker); 1-bit SGD without error feedback
#  14  (--smbr true) sequence training (nnet1): DNN alignments, denominator lattices, sMBR; decode
#  15  exp/RESULTS: systems in training order, test at dev's LM weight/penalty (pynnet-results)
set -euo pipefail
stage=0
stop_stage=100
nj=2
train_hours=1.0       # size of the synthesized training set
seed=1
ablations=false       # stage 13: two more DNNs (random init + SGD, DBN + SGD), trained side by side
smbr=false            # stage 14: sMBR sequence training of the DNN (Kaldi nnet1's run_dnn.sh does it; here
                      # it took ~20 min for no gain: egs/synth/RESULTS)
smbr_iters=4
# Tree sizes: 1 h of training audio supports small trees (docs/notes/gmm.md).
tri1_leaves=300; tri1_gauss=2000
tri2_leaves=500; tri2_gauss=3000
# RBM epochs: nnet1's default of 1 (2 for the Gaussian layer) is sized for hundreds of hours; on
# 1 h it leaves the DBN undertrained and a worse start than random init (docs/notes/nnet.md).
rbm_iter=3
nnet_threads=2        # torch threads for stage 10 and the 1-worker DNN (this machine's 2 cores; exact
                      # resume of a training needs the same number)
num_workers=2         # stage 11: MPI ranks of the DNN training (threads each: cores / workers)
average_every=10      # minibatches between model averages (Su & Chen: 10 beat 20)
dnn_minibatch=256     # stage 11, 13: frames per update of the NG-SGD/SGD DNNs, their ranks together (set it
                      # here, not in --dnn-opts): one worker's minibatch; with averaging, dnn_minibatch / K
                      # per rank (rounded up), so that an epoch has the 1-worker's number of updates (256 per
                      # rank lost 0.66 on dev over four seeds: RESULTS)
compare_parallel=false  # stage 11-12: also exp/dnn (1 worker), exp/dnn_avg1bit (1-bit averaging) and
                        # exp/dnn_1bit (1-bit SGD, Seide et al.)
dnn_opts="--max-epochs 10"
onebit_opts="--optimizer adagrad --learn-rate 0.016 --minibatch-size 256"   # exp/dnn_1bit (global minibatch)
help_message="Usage: $0 [--stage N] [--stop-stage N] [--nj N] [--train-hours H] [--seed S] [--ablations true|false]
  [--smbr true|false] [--smbr-iters N] [--tri1-leaves N --tri1-gauss N --tri2-leaves N --tri2-gauss N] [--rbm-iter N] [--nnet-threads N]
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
for v in stage stop_stage seed nj tri1_leaves tri1_gauss tri2_leaves tri2_gauss rbm_iter nnet_threads smbr_iters \
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

decode_gmm() {  # <exp-dir>: dev (chooses the LM weight and penalty) and test
  utils/mkgraph.sh data/lang_test "$1" "$1/graph"
  local x
  for x in dev test; do steps/decode.sh --nj "$nj" --cmd "$decode_cmd" "$1/graph" data/$x "$1/decode_$x"; done
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
  echo "$0: stage 9: tri2 alignments"
  steps/align_si.sh --nj "$nj" --cmd "$train_cmd" data/train data/lang exp/tri2 exp/tri2_ali
fi

if run 10; then
  echo "$0: stage 10: DBN pretraining"
  steps/nnet/pretrain_dbn.sh --nn-depth 4 --hid-dim 512 --rbm-iter $rbm_iter --num-threads $nnet_threads \
    data-fbank/train exp/dbn
fi

# the recipe's DNN: RBM pretraining -> NG-SGD local updates -> periodic MPI averaging
avg_minibatch=$(( (dnn_minibatch + num_workers - 1) / num_workers ))   # per averaging rank
dnn=exp/dnn_avg; [ "$num_workers" -gt 1 ] || dnn=exp/dnn
if run 11; then
  echo "$0: stage 11: DNN training (DBN init, NG-SGD, $num_workers workers, minibatches of $avg_minibatch per rank, averaged every $average_every)"
  if [ "$num_workers" -gt 1 ]; then
    steps/nnet/train.sh $dnn_opts --dbn exp/dbn/final.dbn --optimizer ngsgd \
      --num-workers $num_workers --sync average --average-every $average_every --minibatch-size $avg_minibatch \
      data-fbank/train data/lang exp/tri2_ali exp/dnn_avg
  fi
  if [ "$num_workers" -eq 1 ] || [ "$compare_parallel" = true ]; then
    steps/nnet/train.sh $dnn_opts --dbn exp/dbn/final.dbn --optimizer ngsgd --num-threads $nnet_threads --minibatch-size $dnn_minibatch \
      data-fbank/train data/lang exp/tri2_ali exp/dnn
  fi
  if [ "$compare_parallel" = true ]; then
    steps/nnet/train.sh $dnn_opts --dbn exp/dbn/final.dbn --optimizer ngsgd \
      --num-workers $num_workers --sync average-1bit --average-every $average_every --minibatch-size $avg_minibatch \
      data-fbank/train data/lang exp/tri2_ali exp/dnn_avg1bit
    steps/nnet/train.sh $dnn_opts $onebit_opts --dbn exp/dbn/final.dbn --num-workers 2 --sync 1bit \
      data-fbank/train data/lang exp/tri2_ali exp/dnn_1bit
  fi
fi
if run 12; then
  dnns=$dnn; [ "$compare_parallel" = true ] && dnns="exp/dnn_avg exp/dnn exp/dnn_avg1bit exp/dnn_1bit"
  for d in $dnns; do
    for x in dev test; do
      steps/nnet/decode.sh --nj "$nj" --cmd "$decode_cmd" exp/tri2/graph data-fbank/$x $d/decode_$x
    done
  done
fi

if run 13 && [ "$ablations" = true ]; then
  echo "$0: stage 13: ablations (two trainings side by side, one core each)"
  steps/nnet/train.sh $dnn_opts --nn-depth 4 --hid-dim 512 --optimizer sgd --minibatch-size $dnn_minibatch \
    data-fbank/train data/lang exp/tri2_ali exp/dnn_randinit_sgd > exp/dnn_randinit_sgd.out 2>&1 &
  pid1=$!
  steps/nnet/train.sh $dnn_opts --dbn exp/dbn/final.dbn --optimizer sgd --minibatch-size $dnn_minibatch \
    data-fbank/train data/lang exp/tri2_ali exp/dnn_dbn_sgd > exp/dnn_dbn_sgd.out 2>&1 &
  pid2=$!
  wait $pid1 || { cat exp/dnn_randinit_sgd.out; exit 1; }
  wait $pid2 || { cat exp/dnn_dbn_sgd.out; exit 1; }
  # 1-bit SGD without error feedback (Seide et al.: it then fails to train)
  steps/nnet/train.sh $dnn_opts $onebit_opts --dbn exp/dbn/final.dbn --num-workers 2 --sync 1bit \
    --error-feedback false data-fbank/train data/lang exp/tri2_ali exp/dnn_1bit_noef
  for x in dnn_randinit_sgd dnn_dbn_sgd dnn_1bit_noef; do
    for y in dev test; do
      steps/nnet/decode.sh --nj "$nj" --cmd "$decode_cmd" exp/tri2/graph data-fbank/$y exp/$x/decode_$y
    done
  done
fi

if run 14 && [ "$smbr" = true ]; then
  echo "$0: stage 14: sequence training (sMBR)"
  steps/nnet/align.sh --nj "$nj" --cmd "$train_cmd" data-fbank/train data/lang $dnn ${dnn}_ali
  steps/nnet/make_denlats.sh --nj "$nj" --cmd "$decode_cmd" --acwt 0.1 data-fbank/train data/lang $dnn ${dnn}_denlats
  steps/nnet/train_mpe.sh --cmd "$train_cmd" --num-iters $smbr_iters --acwt 0.1 --do-smbr true \
    data-fbank/train data/lang $dnn ${dnn}_ali ${dnn}_denlats exp/dnn_smbr
  for x in dev test; do
    steps/nnet/decode.sh --nj "$nj" --cmd "$decode_cmd" exp/tri2/graph data-fbank/$x exp/dnn_smbr/decode_$x
  done
fi

if run 15; then
  echo "$0: stage 15: results"
  # training order; each DNN's parent is tri2 (its alignments), the DNN variants' the recipe's DNN
  systems=(--system mono=exp/mono --system tri1=exp/tri1:mono --system tri2=exp/tri2:tri1
           --system "$(basename $dnn)=$dnn:tri2")
  for d in exp/dnn exp/dnn_avg exp/dnn_avg1bit exp/dnn_1bit exp/dnn_randinit_sgd exp/dnn_dbn_sgd exp/dnn_1bit_noef exp/dnn_smbr; do
    [ "$d" = "$dnn" ] || [ ! -d "$d/decode_test" ] || systems+=(--system "$(basename $d)=$d")
  done
  pynnet-results --test test --dev dev --data data/test "${systems[@]}" > exp/RESULTS.tmp
  mv exp/RESULTS.tmp exp/RESULTS
  cat exp/RESULTS
fi
