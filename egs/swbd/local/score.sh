#!/usr/bin/env bash
# The recipe's scoring (called by the decoding scripts as
# "local/score.sh $scoring_opts --cmd $cmd <data-dir> <lang-dir|graph-dir> <decode-dir>"):
# local/score_sclite.sh (NIST STM/GLM scoring) when <data-dir>/stm exists (eval2000, rt03),
# else steps/score_kaldi.sh (train_dev has only a text), with the same options.

if [ $# -lt 3 ]; then
  echo "Usage: $0 [options] <data-dir> <lang-dir|graph-dir> <decode-dir>" >&2
  echo "  runs local/score_sclite.sh if <data-dir>/stm exists, else steps/score_kaldi.sh (same options)" >&2
  exit 1
fi

data=${*: -3:1}   # the data dir: third argument from the end, after the options
if [ -f "$data/stm" ]; then
  exec "$(dirname "$0")/score_sclite.sh" "$@"
else
  exec steps/score_kaldi.sh "$@"
fi
