#!/usr/bin/env bash
# pynnet recipe for your own corpus: Kaldi data dirs + a plain lexicon, no code to write.
#   ./run.sh --train DIR --test DIR [--dev DIR] --lexicon FILE [--lm-text FILE | --arpa FILE]
# Each data dir needs wav.scp, text and utt2spk (utterance ids prefixed by their speaker id); the
# lexicon is 'word phone phone ...' per line. README.md ("Your own corpus") walks through it.
# Stages (--stage N resumes at stage N; outputs under --work-dir, default this directory):
#   0  check the lexicon and the data dirs (before any work), derive the dict dir, copy the data
#      dirs (dev held out of train by speaker when no --dev), the MFCC config for the sample
#      rate, model sizes for the amount of data (sizes.sh)
#   1  MFCC + CMVN features
#   2  lang dir, LM (--arpa; else trained on --lm-text, else on the training transcripts), G
#   3  monophone;  4 tri1;  5 tri2;  6 tri3 (LDA+MLLT);  7 tri4 (SAT; two-pass fMLLR decodes)
#      (each trained on the alignments of the one before, tri3's with fMLLR; decoded on dev and test)
#   8  tri4's fMLLR alignments of train; fMLLR features of train, dev and test (data-fmllr: the DNN's
#      input, as Kaldi nnet1's recipes)
#   9  DBN pretraining;  10 DNN on tri4's alignments (2 MPI workers, model averaging);  11 its decodes
#  12  exp/RESULTS: test at dev's LM weight/penalty, systems in training order
set -euo pipefail
stage=0
stop_stage=100
train=
dev=
test=
lexicon=
lm_text=
arpa=
oov_word=           # default: the lexicon's own (<unk>, <UNK>, ...), else <unk> is added
lm_order=3
work_dir=           # default: this directory (data/, exp/, conf/ under it)
nj=4                # at most; fewer when a set has fewer speakers
seed=1
dev_share=0.1       # share of the training speakers held out as dev when no --dev
num_workers=2       # MPI ranks of the DNN training
average_every=10
nnet_threads=2      # torch threads of the DBN pretraining
# sizes: empty = scaled to the training hours (pynnet-recipe-sizes; written to sizes.sh)
mono_gauss=; tri1_leaves=; tri1_gauss=; tri2_leaves=; tri2_gauss=; tri3_leaves=; tri3_gauss=
tri4_leaves=; tri4_gauss=; dnn_depth=; dnn_hid_dim=; rbm_iter=
mono_opts=          # more options for steps/train_mono.sh, e.g. "--num-iters 10" (toy runs)
tri_opts=           # ... steps/train_deltas.sh (tri1, tri2), train_lda_mllt.sh (tri3), train_sat.sh (tri4)
dbn_opts=           # ... steps/nnet/pretrain_dbn.sh
dnn_opts="--max-epochs 10"   # ... steps/nnet/train.sh
decode_opts=        # ... steps/decode.sh, decode_fmllr.sh and steps/nnet/decode.sh, e.g. "--beam 10"
help_message="Usage: $0 --train DIR --test DIR [--dev DIR] --lexicon FILE [--lm-text FILE | --arpa FILE] [options]
Options:
  --stage N --stop-stage N   run stages N..M (Kaldi style)     --work-dir DIR   outputs [this dir]
  --oov-word W               map words missing from the lexicon to W (default: they are an error)
  --lm-order N [3]  --nj N [4]  --seed N [1]  --dev-share X [0.1]  --num-workers N [2]
  --average-every N [10]  --nnet-threads N [2]
  sizes (default: scaled to the data): --mono-gauss --tri{1,2,3,4}-leaves --tri{1,2,3,4}-gauss
    --dnn-depth --dnn-hid-dim --rbm-iter
  --mono-opts --tri-opts --dbn-opts --dnn-opts --decode-opts \"...\"  more options for each stage
e.g.: $0 --train /corpora/mine/train --test /corpora/mine/test --lexicon /corpora/mine/lexicon.txt"

here=$(cd "$(dirname "$0")" && pwd)
abspath() { [ -z "$1" ] && return 0; case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
cd "$here"
. ./cmd.sh
. ./path.sh
. utils/parse_options.sh
if [ $# -ne 0 ]; then
  echo "$0: unexpected argument(s): $*" >&2; printf '%s\n' "$help_message" >&2; exit 1
fi
cd "$OLDPWD" 2>/dev/null || true   # relative paths are the user's
train=$(abspath "$train"); dev=$(abspath "$dev"); test=$(abspath "$test")
lexicon=$(abspath "$lexicon"); lm_text=$(abspath "$lm_text"); arpa=$(abspath "$arpa")
w=$(abspath "${work_dir:-$here}")
cd "$here"

for v in stage stop_stage nj seed lm_order num_workers average_every nnet_threads; do
  case "${!v}" in ''|*[!0-9]*) echo "$0: --${v//_/-} must be a non-negative integer, not '${!v}'" >&2; exit 1 ;; esac
done
if [ "$stage" -le 0 ]; then
  [ -n "$train" ] && [ -n "$test" ] && [ -n "$lexicon" ] || {
    echo "$0: --train, --test and --lexicon are required" >&2; printf '%s\n' "$help_message" >&2; exit 1; }
  [ -z "$lm_text" ] || [ -z "$arpa" ] || { echo "$0: give --lm-text or --arpa, not both" >&2; exit 1; }
  for f in "$lexicon" $lm_text $arpa; do [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }; done
  for d in "$train" "$test" $dev; do [ -d "$d" ] || { echo "$0: no such data dir $d" >&2; exit 1; }; done
fi

"$PYNNET_ROOT/tools/install.sh"
. ./path.sh
mkdir -p "$w"
data=$w/data exp=$w/exp
run() { [ "$stage" -le "$1" ] && [ "$stop_stage" -ge "$1" ]; }
sets="dev test"

if run 0; then
  echo "$0: stage 0: checking the lexicon and the data dirs"
  oov_opt=(); [ -n "$oov_word" ] && oov_opt=(--oov-word "$oov_word")
  pynnet-prepare-dict "${oov_opt[@]}" "$lexicon" "$data/local/dict"
  oov=$(cat "$data/local/dict/oov.txt")
  rm -rf "$data/train" "$data/dev" "$data/test" "$data/train_all"
  copy() {  # <src> <dst>: the user's files only (a stale feats.scp or cmvn.scp must not come along)
    mkdir -p "$2"
    local f
    for f in wav.scp text utt2spk segments reco2file_and_channel spk2gender utt2dur; do
      [ -f "$1/$f" ] && sort "$1/$f" > "$2/$f"   # (users' files need not be sorted; Kaldi's must)
    done
    [ -f "$2/utt2spk" ] || { echo "$0: no $1/utt2spk" >&2; exit 1; }
    utils/utt2spk_to_spk2utt.pl < "$2/utt2spk" > "$2/spk2utt"
  }
  if [ -n "$dev" ]; then copy "$train" "$data/train"; copy "$dev" "$data/dev"
  else copy "$train" "$data/train_all"; fi
  copy "$test" "$data/test"
  check_dirs="$data/test"; [ -n "$dev" ] && check_dirs="$data/train $data/dev $data/test" || check_dirs="$data/train_all $data/test"
  # shellcheck disable=SC2086
  pynnet-check-corpus --lexicon "$data/local/dict/lexicon.txt" "${oov_opt[@]}" $check_dirs > "$w/corpus.json"
  if [ -z "$dev" ]; then
    # hold out whole speakers (a dev set of seen speakers flatters every system)
    nspk=$(wc -l < "$data/train_all/spk2utt")
    ndev=$(awk -v n="$nspk" -v s="$dev_share" 'BEGIN { k = int(n * s + 0.5); if (k < 1) k = 1; print k }')
    if [ "$nspk" -lt 3 ]; then
      echo "$0: --dev not given and train has $nspk speaker(s): cannot hold out a speaker; give --dev" >&2; exit 1
    fi
    cut -d' ' -f1 "$data/train_all/spk2utt" | utils/shuffle_list.pl --srand "$seed" > "$w/spk.shuffled"
    head -n "$ndev" "$w/spk.shuffled" | sort > "$w/dev.spk"
    tail -n +"$((ndev + 1))" "$w/spk.shuffled" | sort > "$w/train.spk"
    utils/subset_data_dir.sh --spk-list "$w/dev.spk" "$data/train_all" "$data/dev" > /dev/null
    utils/subset_data_dir.sh --spk-list "$w/train.spk" "$data/train_all" "$data/train" > /dev/null
    rm -rf "$data/train_all" "$w/spk.shuffled"
    echo "$0: no --dev: held out $ndev of $nspk training speakers as dev ($(tr '\n' ' ' < "$w/dev.spk"))"
  fi
  for x in train dev test; do utils/fix_data_dir.sh "$data/$x" > /dev/null; done
  rate=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["sample_rate"])' "$w/corpus.json")
  mkdir -p "$w/conf"
  printf -- '--use-energy=false\n--sample-frequency=%s\n' "$rate" > "$w/conf/mfcc.conf"
  # model sizes from the training hours (what is given on the command line wins)
  utils/data/get_utt2dur.sh "$data/train" > /dev/null 2>&1
  hours=$(awk '{ s += $2 } END { printf "%.4f", s / 3600 }' "$data/train/utt2dur")
  spk=$(wc -l < "$data/train/spk2utt")
  nphones=$(wc -w < "$data/local/dict/nonsilence_phones.txt")
  pynnet-recipe-sizes --hours "$hours" --speakers "$spk" --max-jobs "$nj" --num-phones "$nphones" > "$w/sizes.sh.tmp"
  mv "$w/sizes.sh.tmp" "$w/sizes.sh"
  echo "$0: train: $hours h from $spk speakers at $rate Hz; sizes ($w/sizes.sh): $(tr '\n' ' ' < "$w/sizes.sh")"
fi

[ -f "$w/sizes.sh" ] || { echo "$0: no $w/sizes.sh: run stage 0 first" >&2; exit 1; }
size_vars="mono_gauss tri1_leaves tri1_gauss tri2_leaves tri2_gauss tri3_leaves tri3_gauss tri4_leaves tri4_gauss
  dnn_depth dnn_hid_dim rbm_iter"
given() { local v; for v in $size_vars; do [ -n "${!v}" ] && echo "$v=${!v}"; done; return 0; }
given_sizes=$(given)
. "$w/sizes.sh"
eval "$given_sizes"
for v in $size_vars; do   # (a sizes.sh of an older run.sh lacks the newer systems')
  [ -n "${!v}" ] || { echo "$0: no $v in $w/sizes.sh: rerun stage 0 or give --${v//_/-}" >&2; exit 1; }
done
train_nj=$nj
set_nj() { local n; n=$(wc -l < "$data/$1/spk2utt"); [ "$n" -lt "$train_nj" ] && echo "$n" || echo "$train_nj"; }
oov=$(cat "$data/local/dict/oov.txt")

if run 1; then
  echo "$0: stage 1: features"
  for x in train dev test; do
    n=$(set_nj $x)
    steps/make_mfcc.sh --nj "$n" --cmd "$train_cmd" --mfcc-config "$w/conf/mfcc.conf" "$data/$x" "$exp/make_mfcc/$x" "$w/mfcc"
    steps/compute_cmvn_stats.sh "$data/$x" "$exp/make_mfcc/$x" "$w/mfcc"
    utils/validate_data_dir.sh "$data/$x"
  done
fi

if run 2; then
  echo "$0: stage 2: lang, LM, G"
  utils/prepare_lang.sh "$data/local/dict" "$oov" "$data/local/lang_tmp" "$data/lang"
  if [ -n "$arpa" ]; then
    lm=$arpa
  else
    mkdir -p "$data/local/lm"
    if [ -n "$lm_text" ]; then lm_src=$lm_text; else
      cut -d' ' -f2- "$data/train/text" > "$data/local/lm/train_text.txt"; lm_src=$data/local/lm/train_text.txt
    fi
    lm=$data/local/lm/lm.arpa.gz
    steps/train_lm.sh --order "$lm_order" "$data/lang/words.txt" "$lm_src" "$lm"
  fi
  utils/format_lm.sh "$data/lang" "$lm" "$data/local/dict" "$data/lang_test"
fi

decode_gmm() {  # <exp-dir> [<decode script>: steps/decode.sh]
  utils/mkgraph.sh "$data/lang_test" "$1" "$1/graph"
  local x
  # shellcheck disable=SC2086
  for x in $sets; do
    ${2:-steps/decode.sh} --nj "$(set_nj $x)" --cmd "$decode_cmd" $decode_opts "$1/graph" "$data/$x" "$1/decode_$x"
  done
}
if run 3; then
  echo "$0: stage 3: monophone ($mono_gauss Gaussians)"
  # shellcheck disable=SC2086
  steps/train_mono.sh --nj "$train_nj" --cmd "$train_cmd" --boost-silence 1.25 --totgauss "$mono_gauss" $mono_opts \
    "$data/train" "$data/lang" "$exp/mono"
  decode_gmm "$exp/mono"
fi
if run 4; then
  echo "$0: stage 4: tri1 ($tri1_leaves leaves, $tri1_gauss Gaussians)"
  steps/align_si.sh --nj "$train_nj" --cmd "$train_cmd" --boost-silence 1.25 "$data/train" "$data/lang" "$exp/mono" "$exp/mono_ali"
  # shellcheck disable=SC2086
  steps/train_deltas.sh --cmd "$train_cmd" --boost-silence 1.25 $tri_opts \
    "$tri1_leaves" "$tri1_gauss" "$data/train" "$data/lang" "$exp/mono_ali" "$exp/tri1"
  decode_gmm "$exp/tri1"
fi
if run 5; then
  echo "$0: stage 5: tri2 ($tri2_leaves leaves, $tri2_gauss Gaussians)"
  steps/align_si.sh --nj "$train_nj" --cmd "$train_cmd" "$data/train" "$data/lang" "$exp/tri1" "$exp/tri1_ali"
  # shellcheck disable=SC2086
  steps/train_deltas.sh --cmd "$train_cmd" $tri_opts "$tri2_leaves" "$tri2_gauss" "$data/train" "$data/lang" "$exp/tri1_ali" "$exp/tri2"
  decode_gmm "$exp/tri2"
fi
if run 6; then
  echo "$0: stage 6: tri3 (LDA+MLLT, $tri3_leaves leaves, $tri3_gauss Gaussians)"
  steps/align_si.sh --nj "$train_nj" --cmd "$train_cmd" "$data/train" "$data/lang" "$exp/tri2" "$exp/tri2_ali"
  # shellcheck disable=SC2086
  steps/train_lda_mllt.sh --cmd "$train_cmd" $tri_opts "$tri3_leaves" "$tri3_gauss" \
    "$data/train" "$data/lang" "$exp/tri2_ali" "$exp/tri3"
  decode_gmm "$exp/tri3"
fi
if run 7; then
  echo "$0: stage 7: tri4 (SAT, $tri4_leaves leaves, $tri4_gauss Gaussians)"
  steps/align_fmllr.sh --nj "$train_nj" --cmd "$train_cmd" "$data/train" "$data/lang" "$exp/tri3" "$exp/tri3_ali"
  # shellcheck disable=SC2086
  steps/train_sat.sh --cmd "$train_cmd" $tri_opts "$tri4_leaves" "$tri4_gauss" \
    "$data/train" "$data/lang" "$exp/tri3_ali" "$exp/tri4"
  decode_gmm "$exp/tri4" steps/decode_fmllr.sh
fi
if run 8; then
  echo "$0: stage 8: tri4 alignments and fMLLR features"
  steps/align_fmllr.sh --nj "$train_nj" --cmd "$train_cmd" "$data/train" "$data/lang" "$exp/tri4" "$exp/tri4_ali"
  for x in train $sets; do   # the transforms: train's from its alignment, dev's and test's from their decodes
    transforms=$exp/tri4/decode_$x; [ $x = train ] && transforms=$exp/tri4_ali
    rm -rf "$w/data-fmllr/$x"
    steps/nnet/make_fmllr_feats.sh --nj "$(set_nj $x)" --cmd "$train_cmd" --transform-dir "$transforms" \
      "$w/data-fmllr/$x" "$data/$x" "$exp/tri4" "$exp/make_fmllr/$x" "$w/fmllr"
  done
fi
if run 9; then
  echo "$0: stage 9: DBN pretraining ($dnn_depth x $dnn_hid_dim, $rbm_iter epochs per RBM)"
  # shellcheck disable=SC2086
  steps/nnet/pretrain_dbn.sh --nn-depth "$dnn_depth" --hid-dim "$dnn_hid_dim" --rbm-iter "$rbm_iter" \
    --num-threads "$nnet_threads" $dbn_opts "$w/data-fmllr/train" "$exp/dbn"
fi
dnn=$exp/dnn_avg; [ "$num_workers" -gt 1 ] || dnn=$exp/dnn
if run 10; then
  echo "$0: stage 10: DNN ($num_workers workers, NG-SGD, averaging every $average_every minibatches)"
  par_opts=(--num-threads "$nnet_threads")
  [ "$num_workers" -gt 1 ] && par_opts=(--num-workers "$num_workers" --sync average --average-every "$average_every")
  # shellcheck disable=SC2086
  steps/nnet/train.sh $dnn_opts --dbn "$exp/dbn/final.dbn" --optimizer ngsgd "${par_opts[@]}" \
    "$w/data-fmllr/train" "$data/lang" "$exp/tri4_ali" "$dnn"
fi
if run 11; then
  for x in $sets; do
    # shellcheck disable=SC2086
    steps/nnet/decode.sh --nj "$(set_nj $x)" --cmd "$decode_cmd" $decode_opts "$exp/tri4/graph" "$w/data-fmllr/$x" "$dnn/decode_$x"
  done
fi
if run 12; then
  echo "$0: stage 12: results"
  {
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'): egs/custom on $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["sample_rate"], "Hz")' "$w/corpus.json") audio"
    echo "# train $(wc -l < "$data/train/utt2spk") utterances / $(wc -l < "$data/train/spk2utt") speakers; dev $(wc -l < "$data/dev/utt2spk") / $(wc -l < "$data/dev/spk2utt"); test $(wc -l < "$data/test/utt2spk") / $(wc -l < "$data/test/spk2utt")"
    echo "# sizes: mono $mono_gauss Gaussians; tri1 $tri1_leaves leaves / $tri1_gauss; tri2 $tri2_leaves / $tri2_gauss; tri3 $tri3_leaves / $tri3_gauss; tri4 $tri4_leaves / $tri4_gauss; DNN $dnn_depth x $dnn_hid_dim, $rbm_iter RBM epochs"
  } > "$exp/RESULTS.head"
  pynnet-results --test test --dev dev --data "$data/test" --header "$exp/RESULTS.head" \
    --system "mono=$exp/mono" --system "tri1=$exp/tri1:mono" --system "tri2=$exp/tri2:tri1" \
    --system "tri3=$exp/tri3:tri2" --system "tri4=$exp/tri4:tri3" --system "dnn=$dnn:tri4" > "$exp/RESULTS.tmp"
  mv "$exp/RESULTS.tmp" "$exp/RESULTS"; rm -f "$exp/RESULTS.head"
  cat "$exp/RESULTS"
fi
