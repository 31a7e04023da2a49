#!/usr/bin/env bash
# The test command: installs on first use, then runs pytest (default: not the slow marker).
#   tools/run_tests.sh [pytest args]     e.g. tools/run_tests.sh -m slow   or  tests/test_datadir.py
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$top/tools/install.sh" >&2
cd "$top"
. ./path.sh
exec python -m pytest "$@"
