#!/usr/bin/env bash
# The test command: installs on first use, then runs pytest (default: not the slow marker) in
# PYNNET_TEST_PROCS processes (default 2; pytest-xdist, whole files per process: a file's fixtures
# are built once), since many tests spend their time waiting on subprocesses and collectives.
#   tools/run_tests.sh [pytest args]     e.g. tools/run_tests.sh -m slow   or  tests/test_datadir.py
#   PYNNET_TEST_PROCS=1 tools/run_tests.sh    one process (the order of a plain pytest run)
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$top/tools/install.sh" >&2
cd "$top"
. ./path.sh
procs=${PYNNET_TEST_PROCS:-2}
if [ "$procs" = 1 ]; then exec python -m pytest "$@"; fi
exec python -m pytest -n "$procs" --dist loadfile "$@"
