#!/usr/bin/env bash
# Kaldi's utils/utt2spk_to_spk2utt.pl (same arguments; --help for usage), implemented by pynnet-utt2spk-to-spk2utt.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
exec pynnet-utt2spk-to-spk2utt "$@"
