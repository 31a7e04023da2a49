#!/usr/bin/env bash
# Decoding with a SAT system (Kaldi's steps/decode_fmllr.sh), then scoring.
#  1. speaker-independent decode with the alignment model final.alimdl (into <decode-dir>.si,
#     scored there; or the lattices of --si-dir);
#  2. first fMLLR transforms per speaker from its lattice posteriors (silence weighted
#     --silence-weight; Gaussian posteriors from final.alimdl, statistics with final.mdl): pre_trans.JOB;
#  3. decode with final.mdl on the features adapted by them;
#  4. a second fMLLR estimate from those lattices, composed with the first: trans.JOB;
#  5. the lattices' acoustic scores recomputed on the final features: lat.JOB.gz (the pass-3
#     lattices wait as lat.tmp.JOB.gz: a decode killed before this pass ends leaves no lat.JOB.gz).
# The model is <decode-dir>/../final.mdl; features as in training (cmvn_opts, splice_opts +
# final.mat or delta_opts). Writes <decode-dir>/{lat.JOB.gz,trans.JOB,pre_trans.JOB,num_jobs,log/}
# and the scoring outputs, as steps/decode.sh.

# Begin configuration section.
nj=4
cmd=run.pl
acwt=0.083333
beam=13.0
lattice_beam=6.0
max_active=7000
min_active=200
first_beam=10.0       # the speaker-independent pass's beam and max-active (Kaldi's defaults)
first_max_active=2000
alignment_model=      # default: <exp-dir>/final.alimdl
adapt_model=          # default: <exp-dir>/final.mdl
final_model=          # default: <exp-dir>/final.mdl
si_dir=               # use this speaker-independent decode's lattices instead of pass 1
fmllr_update_type=full
fmllr_min_count=500
silence_weight=0.01   # weight of silence frames in fMLLR estimation
skip_scoring=false
scoring_opts=
num_threads=1
stage=0
# End configuration section.

help_message="Usage: $0 [options] <graph-dir> <data-dir> <decode-dir>
 e.g.: $0 --nj 4 exp/tri4/graph data/test exp/tri4/decode_test
 The model is <decode-dir>/../final.mdl (and final.alimdl for the first pass).
Options:
  --nj <nj>                    # number of parallel jobs (default $nj)
  --cmd <cmd>                  # job runner (default $cmd)
  --acwt <float>               # acoustic scale (default $acwt)
  --beam <float>               # decoding beam (default $beam)
  --lattice-beam <float>       # lattice beam (default $lattice_beam)
  --max-active <int>           # max active states (default $max_active)
  --first-beam <float>         # beam of the speaker-independent pass (default $first_beam)
  --si-dir <dir>               # take the speaker-independent lattices from this decode dir
  --fmllr-update-type <type>   # full|diag|offset|none (default $fmllr_update_type)
  --silence-weight <f>         # silence weight in fMLLR estimation (default $silence_weight)
  --num-threads <n>            # utterances decoded at once in each job (default $num_threads)
  --skip-scoring <true|false>  # do not score (default $skip_scoring)
  --scoring-opts <opts>        # options for the scoring script
  --stage <stage>              # 1: skip decoding, only score"

. ./path.sh 2>/dev/null || true
. utils/parse_options.sh || exit 1
. steps/libs/decode.sh

decode_args "$@"  # graphdir data dir srcdir
[ -z "$alignment_model" ] && alignment_model=$srcdir/final.alimdl
[ -z "$adapt_model" ] && adapt_model=$srcdir/final.mdl
[ -z "$final_model" ] && final_model=$srcdir/final.mdl
for f in "$graphdir/HCLG.fst" "$graphdir/words.txt" "$data/feats.scp" "$data/utt2spk" "$alignment_model" \
    "$adapt_model" "$final_model" "$graphdir/phones/silence.csl"; do
  [ -f "$f" ] || { echo "$0: no such file $f" >&2; exit 1; }
done
case "$fmllr_update_type" in full|diag|offset|none) ;; *) echo "$0: --fmllr-update-type must be full, diag, offset or none" >&2; exit 1;; esac
. steps/libs/gmm_feats.sh
gmm_feat_opts "$srcdir"   # speaker-independent features
si_opts=("${feat_opts[@]}")
silphones=$(cat "$graphdir/phones/silence.csl")
fmllr_opts="--fmllr-update-type $fmllr_update_type --fmllr-min-count $fmllr_min_count --silence-weight $silence_weight --silence-phones $silphones --lattices true --acoustic-scale $acwt"

# si_check: the speaker-independent lattices are there, as many jobs as this decode's
si_check() {
  [ -f "$si_dir/lat.1.gz" ] || { echo "$0: no such file $si_dir/lat.1.gz (--si-dir)" >&2; exit 1; }
  [ "$(cat "$si_dir/num_jobs" 2>/dev/null)" = "$nj" ] || { echo "$0: $si_dir has $(cat "$si_dir/num_jobs" 2>/dev/null || echo "?") jobs, this decode $nj: use --nj $(cat "$si_dir/num_jobs" 2>/dev/null || echo "?")" >&2; exit 1; }
}
# (a --si-dir is checked before decode_setup: a refused one leaves the decode dir as it was)
if [ -n "$si_dir" ] && [ "$stage" -le 0 ]; then
  jobs_check_nj "$nj"
  si_check
fi

decode_setup  # checks --nj, makes the decode dir, sets sdata

# (no set -e here, as steps/decode.sh: every pass ends the script when its jobs fail)
if [ "$stage" -le 0 ]; then
  if [ -z "$si_dir" ]; then
    si_dir=${dir%/}.si
    echo "$0: pass 1: speaker-independent decode with $(basename "$alignment_model") into $si_dir"
    steps/decode.sh --nj "$nj" --cmd "$cmd" --acwt "$acwt" --beam "$first_beam" \
      --max-active "$first_max_active" --lattice-beam "$lattice_beam" --num-threads "$num_threads" \
      --skip-scoring "$skip_scoring" --scoring-opts "$scoring_opts" \
      --model "$alignment_model" "$graphdir" "$data" "$si_dir" || exit 1
  fi
  si_check

  echo "$0: pass 2: fMLLR transforms from the speaker-independent lattices"
  jobs_report $cmd JOB=1:$nj "$dir/log/fmllr_pass1.JOB.log" \
    pynnet-gmm-est-fmllr "${si_opts[@]}" $fmllr_opts --gpost-model "$alignment_model" \
      "$adapt_model" "$sdata/JOB" "$si_dir/lat.JOB.gz" "ark:$dir/pre_trans.JOB" || exit 1

  echo "$0: pass 3: decoding with $(basename "$adapt_model") on the adapted features"
  decode_start_clock
  # shellcheck disable=SC2086
  decode_run_jobs \
    pynnet-gmm-latgen-faster --max-active $max_active --min-active $min_active --beam $beam \
      --lattice-beam $lattice_beam --acoustic-scale $acwt --allow-partial true --num-threads $num_threads \
      --word-symbol-table "$graphdir/words.txt" "${si_opts[@]}" --fmllr "$dir/pre_trans.JOB" \
      "$adapt_model" "$graphdir/HCLG.fst" "$sdata/JOB" "$(decode_lat_wspec)"
  decode_report_rtf
  # these lattices are not the decode's yet: aside as lat.tmp.JOB.gz (Kaldi's name) until pass 5
  # has rescored them, so that a decode killed in passes 4-5 leaves no lat.JOB.gz to be scored
  for n in $(seq "$nj"); do
    if [ -e "$dir/lat.$n.gz" ]; then mv -f "$dir/lat.$n.gz" "$dir/lat.tmp.$n.gz"; fi
  done

  echo "$0: pass 4: second fMLLR estimate, composed with the first"
  jobs_report $cmd JOB=1:$nj "$dir/log/fmllr_pass2.JOB.log" \
    pynnet-gmm-est-fmllr "${si_opts[@]}" --fmllr "$dir/pre_trans.JOB" $fmllr_opts \
      "$adapt_model" "$sdata/JOB" "$dir/lat.tmp.JOB.gz" "ark:$dir/trans_tmp.JOB" || exit 1
  jobs_report $cmd JOB=1:$nj "$dir/log/compose_transforms.JOB.log" \
    pynnet-compose-transforms --b-is-affine true "ark:$dir/trans_tmp.JOB" "ark:$dir/pre_trans.JOB" "ark:$dir/trans.JOB" || exit 1
  rm -f "$dir"/trans_tmp.*

  echo "$0: pass 5: rescoring the lattices with $(basename "$final_model") on the final features"
  jobs_report $cmd JOB=1:$nj "$dir/log/rescore.JOB.log" \
    pynnet-gmm-rescore-lattice "${si_opts[@]}" --fmllr "$dir/trans.JOB" \
      "$final_model" "$sdata/JOB" "$dir/lat.tmp.JOB.gz" "ark:$dir/lat.JOB.rescored.gz" || exit 1
  for n in $(seq "$nj"); do mv -f "$dir/lat.$n.rescored.gz" "$dir/lat.$n.gz" || exit 1; done
  rm -f "$dir"/lat.tmp.*.gz
fi

decode_score
echo "$0: done decoding $dir"
exit 0
