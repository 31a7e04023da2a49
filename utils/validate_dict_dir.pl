#!/usr/bin/env bash
# Kaldi's utils/validate_dict_dir.pl <dict-dir> (same argument; --help for what is checked),
# implemented by pynnet-validate-dict-dir.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
exec pynnet-validate-dict-dir "$@"
