#!/usr/bin/env bash
# Kaldi's utils/spk2utt_to_utt2spk.pl (same arguments; --help for usage), implemented by pynnet-spk2utt-to-utt2spk.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
exec pynnet-spk2utt-to-utt2spk "$@"
