#!/usr/bin/env bash
# Kaldi's own GMM ladder (egs/wsj/s5 steps: mono, tri1, tri2 deltas, tri3 LDA+MLLT, tri4 SAT) on
# egs/synth's data dirs, lang dirs and LM, beside pynnet's systems of the same run, with the
# recipe's sizes: the side-by-side of docs/notes/gmm.md.  Needs a Kaldi build (KALDI_ROOT, e.g.
# from the project's build_kaldi.sh: CPU, GMM/lattice tools) and an egs/synth run through stage 12
# (its data/, exp/mono..tri4 decodes).  Skipped (exit 0, one line) without KALDI_ROOT.
#   KALDI_ROOT=/path/to/kaldi bench/kaldi_gmm_ladder.sh [--synth-dir egs/synth] [--work /tmp/kaldi_ladder] [--nj 2]
# Prints a table (test at dev's LM weight/penalty, test's best, dev's best; each side's stage times)
# and, last, one JSON line of the figures.
set -euo pipefail
synth_dir=egs/synth
work=/tmp/kaldi_ladder
nj=2
. "$(dirname "$0")/../utils/parse_options.sh"
top=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${KALDI_ROOT:-}" ] || [ ! -x "${KALDI_ROOT}/src/gmmbin/gmm-est" ]; then
  echo "bench/kaldi_gmm_ladder.sh: skipped: set KALDI_ROOT to a Kaldi build (src/gmmbin/gmm-est)"; exit 0
fi
synth=$(cd "$synth_dir" && pwd)
for f in data/train/feats.scp data/dev/feats.scp data/test/feats.scp data/lang/L.fst data/lang_test/G.fst \
    exp/tri4/decode_test/scoring_kaldi/best_wer; do
  [ -e "$synth/$f" ] || { echo "bench/kaldi_gmm_ladder.sh: no $synth/$f: run egs/synth/run.sh --stop-stage 12 first" >&2; exit 1; }
done

# a Kaldi working dir: Kaldi's steps/utils, our data (feats/cmvn arks are Kaldi's format) and lang
rm -rf "$work"; mkdir -p "$work/local"
cd "$work"
ln -s "$KALDI_ROOT/egs/wsj/s5/steps" steps
ln -s "$KALDI_ROOT/egs/wsj/s5/utils" utils
ln -s ../steps/score_kaldi.sh local/score.sh
cat > path.sh <<EOF
export KALDI_ROOT=$KALDI_ROOT
export PATH=\$KALDI_ROOT/egs/wsj/s5/utils:\$KALDI_ROOT/tools/openfst/bin:\$PATH
. \$KALDI_ROOT/tools/config/common_path.sh
export LC_ALL=C
EOF
. ./path.sh
mkdir -p data
for x in train dev test; do utils/copy_data_dir.sh "$synth/data/$x" data/$x >/dev/null; cp "$synth/data/$x/cmvn.scp" data/$x/; done
cp -r "$synth/data/lang" "$synth/data/lang_test" data/
cmd=run.pl
times=()
timed() {  # <name> <command...>: run, note the seconds
  local name=$1 t0; shift; t0=$(date +%s.%N)
  "$@" > "log.$name" 2>&1 || { echo "bench/kaldi_gmm_ladder.sh: $name failed, see $work/log.$name" >&2; exit 1; }
  times+=("$name=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.0f", b-a}')")
}
decode() {  # <exp> <decode script>
  utils/mkgraph.sh data/lang_test exp/$1 exp/$1/graph >/dev/null
  local x
  for x in dev test; do timed "decode_${1}_$x" $2 --nj $nj --cmd $cmd exp/$1/graph data/$x exp/$1/decode_$x; done
}
timed mono steps/train_mono.sh --nj $nj --cmd $cmd --boost-silence 1.25 data/train data/lang exp/mono
decode mono steps/decode.sh
steps/align_si.sh --nj $nj --cmd $cmd --boost-silence 1.25 data/train data/lang exp/mono exp/mono_ali >/dev/null
timed tri1 steps/train_deltas.sh --cmd $cmd --boost-silence 1.25 300 2000 data/train data/lang exp/mono_ali exp/tri1
decode tri1 steps/decode.sh
steps/align_si.sh --nj $nj --cmd $cmd data/train data/lang exp/tri1 exp/tri1_ali >/dev/null
timed tri2 steps/train_deltas.sh --cmd $cmd 500 3000 data/train data/lang exp/tri1_ali exp/tri2
decode tri2 steps/decode.sh
steps/align_si.sh --nj $nj --cmd $cmd data/train data/lang exp/tri2 exp/tri2_ali >/dev/null
timed tri3 steps/train_lda_mllt.sh --cmd $cmd --splice-opts "--left-context=3 --right-context=3" 500 3000 \
  data/train data/lang exp/tri2_ali exp/tri3
decode tri3 steps/decode.sh
steps/align_fmllr.sh --nj $nj --cmd $cmd data/train data/lang exp/tri3 exp/tri3_ali >/dev/null
timed tri4 steps/train_sat.sh --cmd $cmd 500 3000 data/train data/lang exp/tri3_ali exp/tri4
decode tri4 steps/decode_fmllr.sh

# both sides through pynnet-results (test at dev's LM weight and penalty)
. "$top/path.sh"
row() {  # <exp-root> <system>: "test@dev test-best dev-best"
  pynnet-results --test test --dev dev --data "$synth/data/test" --system "$2=$1/exp/$2" 2>/dev/null \
    | awk -v s="$2" '$1 == "#" && $2 == s {print $3, $4, $5}'
}
echo "# system      Kaldi test@dev / test best / dev      pynnet test@dev / test best / dev"
json="{\"kaldi_root\": \"$KALDI_ROOT\""
for s in mono tri1 tri2 tri3 tri4; do
  k=$(row "$work" $s); p=$(row "$synth" $s)
  printf "# %-6s %30s %35s\n" "$s" "$k" "$p"
  read -r kt kb kd <<< "$k"; read -r pt pb pd <<< "${p:-- - -}"
  json+=", \"kaldi_${s}_test\": $kt, \"kaldi_${s}_dev\": $kd, \"pynnet_${s}_test\": ${pt/-/null}, \"pynnet_${s}_dev\": ${pd/-/null}"
done
echo "# Kaldi's seconds: ${times[*]}"
for t in "${times[@]}"; do json+=", \"kaldi_seconds_${t%%=*}\": ${t#*=}"; done
echo "$json}"
