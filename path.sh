# Sourced by every recipe (egs/*/path.sh sources this). Sets PATH for utils/, steps/ and the venv.
PYNNET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYNNET_ROOT
export PATH=$PYNNET_ROOT/utils:$PYNNET_ROOT/tools/venv/bin:$PATH
export LC_ALL=C
export PYTHONUNBUFFERED=1
# Each job is one process on one core; parallelism comes from the job runner.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
