#!/usr/bin/env bash
# Kaldi nnet1's steps/nnet/train_mmi.sh: MMI sequence training of a DNN (per-utterance SGD over
# denominator lattices, frames whose reference pdf left the lattice dropped: --drop-frames).
# Same arguments and options as steps/nnet/train_mpe.sh, which it runs (logs log/mmi.N.log).
__pynnet_seq_criterion=mmi __pynnet_seq_script=$0 exec bash "$(dirname "$0")/train_mpe.sh" "$@"
