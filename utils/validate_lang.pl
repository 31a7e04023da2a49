#!/usr/bin/env bash
# Kaldi's utils/validate_lang.pl [--skip-determinization-check] [--skip-disambig-check]
#   [--skip-generate-words-check] <lang-dir> (same options; --help for what is and is not checked),
# implemented by pynnet-validate-lang.
__top=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
export PATH=$__top/tools/venv/bin:$PATH LC_ALL=C
exec pynnet-validate-lang "$@"
