# The features of a GMM system, as its exp dir records them (Kaldi's feat_type logic in
# align_si.sh, decode.sh ...): sourced (". steps/libs/gmm_feats.sh").

# gmm_feat_opts <src-dir>: sets feat_opts (an array) to the pynnet-* feature options of
# <src-dir>'s system, and feat_type:
#   delta: --cmvn-opts <cmvn_opts> --delta-order 2 [<delta_opts>]  (CMVN + deltas)
#   lda:   --cmvn-opts <cmvn_opts> --delta-order 0 --splice-opts <splice_opts> --transform <src-dir>/final.mat
# (LDA+MLLT and SAT systems: final.mat; their fMLLR transforms are added by the caller with
# --fmllr <dir>/trans.JOB).
gmm_feat_opts() {
  local src=$1 cmvn delta splice
  cmvn=$(cat $src/cmvn_opts 2>/dev/null || true)
  if [ -f $src/final.mat ]; then
    feat_type=lda
    splice=$(cat $src/splice_opts 2>/dev/null || true)
    [ -n "$splice" ] || splice="--left-context=4 --right-context=4"   # splice-feats' defaults
    feat_opts=(--cmvn-opts "$cmvn" --delta-order 0 --splice-opts "$splice" --transform $src/final.mat)
  else
    feat_type=delta
    delta=$(cat $src/delta_opts 2>/dev/null || true)
    # an explicit order (empty delta_opts: add-deltas' 2; an order in them comes later and wins):
    # the fMLLR/LDA programs' own default is 0
    # shellcheck disable=SC2206
    feat_opts=(--cmvn-opts "$cmvn" --delta-order 2 $delta)
  fi
}

# gmm_copy_feat_files <src-dir> <dir>: the files that say how <src-dir>'s features are made
# (cmvn_opts, delta_opts or splice_opts + final.mat/full.mat), for a dir that uses its model
gmm_copy_feat_files() {
  local src=$1 dir=$2 f
  for f in cmvn_opts delta_opts splice_opts full.mat; do
    [ -f $src/$f ] && cp $src/$f $dir/$f
  done
  [ -f $src/final.mat ] && cp -L $src/final.mat $dir/final.mat
  [ -f $src/final.alimdl ] && cp -L $src/final.alimdl $dir/final.alimdl
  return 0
}

# gmm_check_transform_dir <src-dir> <transform-dir>: the fMLLR transforms of <transform-dir> (an
# align dir, or a decode dir under its exp dir) must be of <src-dir>'s features: where a final.mat is
# beside them (the align dir's copy, or the decode dir's exp dir's), it must be <src-dir>'s (as Kaldi's
# decode.sh checks); else one line naming both, exit 1.
gmm_check_transform_dir() {
  local src=$1 tdir=$2 mat=
  if [ -f "$tdir/final.mat" ]; then mat=$tdir/final.mat
  elif [ -f "$tdir/../final.mat" ] && [ ! -f "$tdir/final.mdl" ]; then mat=$tdir/../final.mat; fi
  if [ -n "$mat" ] || [ -f "$src/final.mat" ]; then
    if [ -z "$mat" ] || [ ! -f "$src/final.mat" ] || ! cmp -s "$mat" "$src/final.mat"; then
      echo "$0: the transforms of $tdir were made with other features than $src's (${mat:-no final.mat} vs $src/final.mat): transforms of another system?" >&2
      exit 1
    fi
  fi
}
