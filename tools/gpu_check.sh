#!/usr/bin/env bash
# The checks of the --device cuda path, as one command for a machine with CUDA and a CUDA build
# of PyTorch (CI has no GPU; tests/test_cuda.py skips there):
#   tools/gpu_check.sh --fetch-wheels   # here, with PyPI: put the other dependencies in .whl/
#   tools/gpu_check.sh [out-dir]        # there: install .whl/ (no network needed), run the tests,
#                                       # then bench/train_throughput.py --device cuda
# The GPU machine's own python3 is used (it holds the CUDA PyTorch); pynnet runs from the checkout.
set -euo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
# what tests/test_cuda.py (and tests/conftest.py, which imports the Kaldi bindings in their safe
# order) needs beyond torch, numpy, matplotlib (the training curve; checked below, not shipped: its
# compiled dependencies must match the machine's numpy) and pytest; pins as in tools/requirements.txt
wheels=(kaldiio kaldi-hmm-gmm==1.1.4 kaldifst==1.7.17 kaldi-decoder==0.2.11 kaldilm tqdm mpi4py mpich)
pyver=${GPU_PYTHON_VERSION:-3.12}

if [ "${1:-}" = "--fetch-wheels" ]; then
  mkdir -p .whl
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any -d .whl "${wheels[@]}"
  ls -l .whl
  exit 0
fi

out=${1:-${OUT:-/tmp/gpu_check}}
mkdir -p "$out"
python3 -c "import torch, sys; ok = torch.cuda.is_available(); print('torch', torch.__version__, 'cuda', ok, torch.cuda.get_device_name(0) if ok else ''); sys.exit(0 if ok else 1)" \
  || { echo "$0: no CUDA here (torch.cuda.is_available() is False)" >&2; exit 1; }
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/gpu_site .whl/*.whl
  export PYTHONPATH=/tmp/gpu_site:$top
else
  export PYTHONPATH=$top
fi
python3 -c "import matplotlib, tqdm, kaldiio" \
  || { echo "$0: the training tests need matplotlib, tqdm and kaldiio importable (above)" >&2; exit 1; }
PYTHONUNBUFFERED=1 python3 -m pytest -v -rs -p no:cacheprovider tests/test_cuda.py \
  tests/test_parallel.py::test_two_workers_on_the_gpu_match_the_cpu 2>&1 | tee "$out/test_cuda.log"
# a skipped test checked nothing: the check fails
if grep -q "^SKIPPED" "$out/test_cuda.log"; then
  echo "$0: tests were skipped (listed above): the CUDA path was not fully checked" >&2
  exit 1
fi
# the GPU's throughput figures (docs/PERFORMANCE.md): one JSON line last
python3 bench/train_throughput.py --device cuda 2> "$out/bench_cuda.log" | tee "$out/bench_cuda.json"
