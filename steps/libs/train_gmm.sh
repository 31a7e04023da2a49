# Pieces shared by the GMM training scripts (train_mono.sh, train_deltas.sh, train_lda_mllt.sh,
# train_sat.sh), sourced after their options are parsed (". steps/libs/train_gmm.sh").  The
# functions read the training scripts' variables: data lang dir nj cmd cmvn_opts delta_opts
# boost_silence scale_opts careful realign_iters power numgauss (and for gmm_build_tree: alidir
# numleaves context_opts ciphonelist cluster_thresh stage).

# gmm_train_setup: the exp dir's bookkeeping (num_jobs, phones.txt, cmvn_opts, delta_opts, the
# data split) and the options every pass gives its jobs: feat_opts (an array), cache_opts,
# boost_opts.
gmm_train_setup() {
  mkdir -p $dir/log
  echo $nj > $dir/num_jobs
  sdata=$data/split$nj
  [[ -d $sdata && $data/feats.scp -ot $sdata ]] || utils/split_data.sh $data $nj >/dev/null
  cp $lang/phones.txt $dir
  echo "$cmvn_opts" > $dir/cmvn_opts
  echo "$delta_opts" > $dir/delta_opts   # add-deltas options as Kaldi's (empty: order 2)
  feat_opts=(--cmvn-opts "$cmvn_opts" $delta_opts)
  # Processed features (CMVN + deltas) are cached per job for the training passes.
  cache_opts="--feats-cache $dir/cache/feats.JOB.npz"
  mkdir -p $dir/cache
  boost_opts="--boost-silence $boost_silence --silence-phones $(cat $lang/phones/optional_silence.csl)"
}

# gmm_train_pass <pass> <beam> <retry-beam>: one EM pass, $dir/<pass>.mdl -> $dir/<pass+1>.mdl
# (and <pass+1>.occs): statistics along new alignments on the passes in $realign_iters, else
# along the current ones; then re-estimation with mixing up to $numgauss Gaussians.
gmm_train_pass() {
  local x=$1
  if gmm_is_realign_pass $x; then
    gmm_align_pass "$@" --acc-out $dir/$x.JOB.acc
  else
    gmm_acc_pass $x
  fi
  gmm_est_pass $x
}

gmm_is_realign_pass() { echo " $realign_iters " | grep -q " $1 "; }

# gmm_align_pass <pass> <beam> <retry-beam> [options for the aligner]: new ali.JOB.gz with
# $dir/<pass>.mdl (silence boosted); "--acc-out $dir/<pass>.JOB.acc" also accumulates the model's
# statistics along them in the same job (as Kaldi's gmm-align-compiled | gmm-acc-stats-ali).
gmm_align_pass() {
  local x=$1 beam=$2 retry_beam=$3
  shift 3
  echo "$0: aligning data"
  $cmd JOB=1:$nj $dir/log/align.$x.JOB.log \
    pynnet-gmm-align-compiled "${feat_opts[@]}" $cache_opts $scale_opts $boost_opts --beam $beam \
      --retry-beam $retry_beam --careful $careful "$@" \
      $dir/$x.mdl $dir/fsts.JOB.gz $sdata/JOB $dir/ali.JOB.gz
}

# gmm_acc_pass <pass>: $dir/<pass>.JOB.acc along the current alignments
gmm_acc_pass() {
  local x=$1
  $cmd JOB=1:$nj $dir/log/acc.$x.JOB.log \
    pynnet-gmm-acc-stats-ali "${feat_opts[@]}" $cache_opts $dir/$x.mdl $sdata/JOB $dir/ali.JOB.gz $dir/$x.JOB.acc
}

# gmm_est_pass <pass>: $dir/<pass>.mdl + accs -> $dir/<pass+1>.mdl, mixed up to $numgauss
gmm_est_pass() {
  local x=$1
  $cmd $dir/log/update.$x.log \
    pynnet-gmm-est --write-occs $dir/$((x + 1)).occs --mix-up $numgauss --power $power --seed $x \
      $dir/$x.mdl $(for n in $(seq $nj); do echo $dir/$x.$n.acc; done) $dir/$((x + 1)).mdl
  rm -f $dir/$x.*.acc $dir/$x.occs
}

# gmm_build_tree: the triphone system's stages -3..0 (train_deltas.sh, train_lda_mllt.sh,
# train_sat.sh): tree statistics of $alidir's alignments on this system's features (feat_opts),
# questions by phone clustering, a tree of $numleaves leaves, 1.mdl from the tree stats, the
# alignments converted to the new tree, training graphs.
gmm_build_tree() {
  if [ $stage -le -3 ]; then
    echo "$0: accumulating tree stats"
    $cmd JOB=1:$nj $dir/log/acc_tree.JOB.log \
      pynnet-acc-tree-stats $context_opts --ci-phones $ciphonelist "${feat_opts[@]}" \
        $alidir/final.mdl $sdata/JOB $alidir/ali.JOB.gz $dir/JOB.treeacc
    $cmd $dir/log/sum_tree_acc.log \
      pynnet-sum-tree-stats $dir/treeacc $(for n in $(seq $nj); do echo $dir/$n.treeacc; done)
    rm -f $dir/[0-9]*.treeacc
  fi

  if [ $stage -le -2 ]; then
    echo "$0: getting questions for tree-building, via clustering"
    $cmd $dir/log/questions.log \
      pynnet-cluster-phones $context_opts $dir/treeacc $lang/phones/sets.int $dir/questions.int
    [ -f $lang/phones/extra_questions.int ] && cat $lang/phones/extra_questions.int >> $dir/questions.int
    $cmd $dir/log/compile_questions.log \
      pynnet-compile-questions $context_opts $lang/topo $dir/questions.int $dir/questions.qst

    echo "$0: building the tree"
    $cmd $dir/log/build_tree.log \
      pynnet-build-tree $context_opts --max-leaves $numleaves --cluster-thresh $cluster_thresh \
        $dir/treeacc $lang/phones/roots.int $dir/questions.qst $lang/topo $dir/tree

    $cmd $dir/log/init_model.log \
      pynnet-gmm-init-model --write-occs $dir/1.occs $dir/tree $dir/treeacc $lang/topo $dir/1.mdl
    if grep -q "no stats" $dir/log/init_model.log; then
      grep "no stats" $dir/log/init_model.log | head -5
      echo "$0: ** the warnings about 'no stats' mean phones (or groups of phones) had no data **"
    fi
    rm -f $dir/treeacc
  fi

  if [ $stage -le -1 ]; then
    echo "$0: converting alignments from $alidir to use current tree"
    $cmd JOB=1:$nj $dir/log/convert.JOB.log \
      pynnet-convert-ali $alidir/final.mdl $dir/1.mdl $dir/tree $alidir/ali.JOB.gz $dir/ali.JOB.gz
  fi

  if [ $stage -le 0 ]; then
    echo "$0: compiling graphs of transcripts"
    $cmd JOB=1:$nj $dir/log/compile_graphs.JOB.log \
      pynnet-compile-train-graphs $dir/tree $dir/1.mdl $lang $sdata/JOB $dir/fsts.JOB.gz
  fi
}

# gmm_train_finish <passes>: final.mdl/final.occs point at the last model, the feature cache
# goes, and the diagnostics Kaldi prints: likelihood of the last pass, alignment failures.
gmm_train_finish() {
  local x=$1
  ( cd $dir; rm -f final.mdl final.occs; ln -s $x.mdl final.mdl; ln -s $x.occs final.occs )
  rm -rf $dir/cache
  cat $dir/log/acc.$((x - 1)).1.log $dir/log/align.$((x - 1)).1.log 2>/dev/null | grep -h "Overall avg like per frame" | sed "s|^|$0: last pass (job 1): |" || true
  local nfail
  nfail=$(cat $dir/log/align.*.*.log 2>/dev/null | grep -c "^WARNING: alignment failed" || true)
  if [ "$nfail" -gt 0 ]; then
    echo "$0: $nfail utterance alignments failed over all passes (see $dir/log/align.*.log)"
  fi
}
