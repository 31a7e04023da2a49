# Pieces shared by steps/train_mono.sh and steps/train_deltas.sh, sourced after their options
# are parsed (". steps/libs/train_gmm.sh").  The functions read the training scripts' variables:
# data lang dir nj cmd cmvn_opts delta_opts boost_silence scale_opts careful realign_iters
# power numgauss.

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
  local x=$1 beam=$2 retry_beam=$3
  if echo " $realign_iters " | grep -q " $x "; then
    echo "$0: aligning data"
    # aligns with the silence-boosted model, accumulates stats of the model itself (as Kaldi's
    # gmm-align-compiled | gmm-acc-stats-ali), in one job
    $cmd JOB=1:$nj $dir/log/align.$x.JOB.log \
      pynnet-gmm-align-compiled "${feat_opts[@]}" $cache_opts $scale_opts $boost_opts --beam $beam \
        --retry-beam $retry_beam --careful $careful --acc-out $dir/$x.JOB.acc \
        $dir/$x.mdl $dir/fsts.JOB.gz $sdata/JOB $dir/ali.JOB.gz
  else
    $cmd JOB=1:$nj $dir/log/acc.$x.JOB.log \
      pynnet-gmm-acc-stats-ali "${feat_opts[@]}" $cache_opts $dir/$x.mdl $sdata/JOB $dir/ali.JOB.gz $dir/$x.JOB.acc
  fi
  $cmd $dir/log/update.$x.log \
    pynnet-gmm-est --write-occs $dir/$((x + 1)).occs --mix-up $numgauss --power $power --seed $x \
      $dir/$x.mdl $(for n in $(seq $nj); do echo $dir/$x.$n.acc; done) $dir/$((x + 1)).mdl
  rm -f $dir/$x.*.acc $dir/$x.occs
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
