#!/usr/bin/env bash
# Kaldi's utils/subset_scp.pl (same arguments; --help for usage), implemented by pynnet-subset-scp.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
exec pynnet-subset-scp "$@"
