#!/usr/bin/env bash
# Kaldi's utils/nnet/subset_data_tr_cv.sh (also utils/subset_data_dir_tr_cv.sh): a data dir split by
# speaker into a training and a held-out (CV) set for nnet1-style training, e.g. for
# steps/nnet/train.sh <data-tr> <data-cv> <lang> <ali-tr> <ali-cv> <exp-dir>.
__top=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
usage="Usage: $0 [opts] <src-data> <train-data> <cv-data>
  --cv-spk-percent N (default 10)   speakers held out, chosen as Kaldi's shuffle_list.pl --srand 777 orders them
  --cv-spk-list <file>              a pre-defined list with the CV speakers
  --seed S (default 777)            the shuffle's --srand
e.g.: $0 data-fbank/train data-fbank/train_tr90 data-fbank/train_cv10"
for a in "$@"; do case "$a" in -h|--help) echo "$usage" >&2; exit 0 ;; esac; done
if [ $# -lt 3 ]; then echo "$usage" >&2; exit 1; fi
exec pynnet-subset-data-tr-cv "$@"
