#!/usr/bin/env bash
# Lattice decoding with a GMM model (Kaldi's steps/decode.sh), then scoring.
# The model is <decode-dir>/../<iter>.mdl (default final.mdl); features are made as in training,
# from <decode-dir>/../cmvn_opts and delta_opts (or splice_opts and final.mat: LDA+MLLT); a SAT
# system is decoded with steps/decode_fmllr.sh.  Writes <decode-dir>/{lat.JOB.gz,num_jobs,rtf,log/decode.JOB.log}
# (rtf: the real-time factor line it prints)
# and, unless --skip-scoring true or <data-dir> has no text (unlabelled data), the scoring outputs (wer_LMWT_WIP, scoring_kaldi/...).

# Begin configuration section.
nj=4
cmd=run.pl
iter=final
model=            # default: <decode-dir>/../$iter.mdl
acwt=0.083333     # acoustic scale used while decoding (lattices are written unscaled)
beam=13.0
lattice_beam=6.0
max_active=7000   # max-active of the first best-path search (see docs/notes/decode.md)
min_active=200
stage=0
skip_scoring=false
scoring_opts=
num_threads=1     # utterances decoded at once in each job (Kaldi: gmm-latgen-faster-parallel)
decode_extra_opts=  # more options for pynnet-gmm-latgen-faster
parallel_opts=    # (ignored, as in Kaldi)
transform_dir=    # a decode (or align) dir whose fMLLR transforms trans.JOB to apply (same --nj)
# End configuration section.

help_message="Usage: $0 [options] <graph-dir> <data-dir> <decode-dir>
 e.g.: $0 --nj 4 exp/tri1/graph data/test exp/tri1/decode_test
 The model is <decode-dir>/../final.mdl; <decode-dir> must be a subdirectory of the exp dir.
Options:
  --nj <nj>                      # number of parallel jobs (default $nj)
  --cmd <cmd>                    # job runner, e.g. run.pl (default $cmd)
  --iter <iter>                  # decode <iter>.mdl (default $iter)
  --model <model>                # a model file instead of <decode-dir>/../<iter>.mdl
  --acwt <float>                 # acoustic scale (default $acwt)
  --beam <float>                 # decoding beam (default $beam)
  --lattice-beam <float>         # lattice beam (default $lattice_beam)
  --max-active <int>             # max active states (default $max_active)
  --num-threads <n>              # utterances decoded at once in each job (default $num_threads)
  --decode-extra-opts <opts>     # more options for pynnet-gmm-latgen-faster
  --skip-scoring <true|false>    # do not score (default $skip_scoring)
  --scoring-opts <opts>          # options for the scoring script, e.g. \"--min-lmwt 7 --max-lmwt 17\"
  --stage <stage>                # 1: skip decoding, only score"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1
. steps/libs/decode.sh

decode_args "$@"  # graphdir data dir srcdir

[ -z "$model" ] && model=$srcdir/$iter.mdl

for f in "$graphdir/HCLG.fst" "$graphdir/words.txt" "$data/feats.scp" "$model"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done

# as Kaldi's: the exp dir's cmvn_opts and delta_opts (add-deltas options; absent or empty: order 2),
# or splice_opts + final.mat (LDA+MLLT)
. steps/libs/gmm_feats.sh
gmm_feat_opts "$srcdir"
cmvn_opts=$(cat "$srcdir/cmvn_opts" 2>/dev/null || true)
if ! echo " $cmvn_opts " | grep -q -- "--norm-means=false"; then
  [ -f "$data/cmvn.scp" ] || { echo "$0: no such file $data/cmvn.scp (run steps/compute_cmvn_stats.sh)" >&2; exit 1; }
fi

# (before decode_setup: a refused --transform-dir leaves the decode dir as it was)
if [ -n "$transform_dir" ]; then
  jobs_check_nj "$nj"
  [ -f "$transform_dir/trans.1" ] || { echo "$0: no such file $transform_dir/trans.1 (--transform-dir)" >&2; exit 1; }
  gmm_check_transform_dir "$srcdir" "$transform_dir"
  tnj=$(cat "$transform_dir/num_jobs" 2>/dev/null || echo "?")
  [ "$tnj" = "$nj" ] || { echo "$0: --transform-dir $transform_dir has $tnj jobs, this decode $nj: use --nj $tnj" >&2; exit 1; }
  feat_opts+=(--fmllr "$transform_dir/trans.JOB")
fi
decode_setup  # checks --nj, makes the decode dir, sets sdata

if [ "$stage" -le 0 ]; then
  echo "$0: decoding $data with $model ($nj jobs)"
  decode_start_clock
  # shellcheck disable=SC2086
  decode_run_jobs \
    pynnet-gmm-latgen-faster --max-active $max_active --min-active $min_active --beam $beam \
      --lattice-beam $lattice_beam --acoustic-scale $acwt --allow-partial true \
      --num-threads $num_threads $decode_extra_opts \
      --word-symbol-table "$graphdir/words.txt" "${feat_opts[@]}" \
      "$model" "$graphdir/HCLG.fst" "$sdata/JOB" "$(decode_lat_wspec)"
  decode_report_rtf  # real-time factor line, <decode-dir>/rtf
fi

decode_score
echo "$0: done decoding $dir"
exit 0
