#!/usr/bin/env bash
# Kaldi's steps/make_fbank.sh: log-mel filterbank features of a data dir, in parallel
# (--fbank-config, default conf/fbank.conf). Shares steps/make_mfcc.sh's code.
__pynnet_feat_kind=fbank __pynnet_feat_script=$0 exec bash "$(dirname "$0")/make_mfcc.sh" "$@"
