#!/usr/bin/env bash
# Kaldi's utils/filter_scps.pl (same arguments; --help for usage), implemented by pynnet-filter-scps.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
exec pynnet-filter-scps "$@"
