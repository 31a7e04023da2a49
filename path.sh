# Sourced by every recipe (egs/*/path.sh sources this). Sets PATH for utils/, steps/ and the venv.
PYNNET_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYNNET_ROOT
export PATH=$PYNNET_ROOT/utils:$PYNNET_ROOT/tools/venv/bin:$PATH
export LC_ALL=C
export PYTHONUNBUFFERED=1
# Each job is one process on one core; parallelism comes from the job runner.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Reproducible arithmetic across x86-64 CPUs (docs/notes/reproducibility.md). numpy, its OpenBLAS
# and torch (MKL, ATen) choose their SIMD kernels at run time from the CPU: with AVX-512 (Intel
# Xeon, AMD EPYC Zen 4) they round differently from AVX2-only CPUs, in the last bits of float64
# GMM likelihoods and statistics and float32 DNN arithmetic, and the recipe's EM passes, tree
# building and training amplify that to other WERs (egs/synth/RESULTS). Unless
# PYNNET_CPU_KERNELS=native, every CPU with AVX2 runs the same AVX2 kernels, so the results are
# the same on all of them (the figures in RESULTS were measured so).
if [ "${PYNNET_CPU_KERNELS:-avx2}" = avx2 ] && [ "$(uname -m)" = x86_64 ] && \
    grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}     # numpy's OpenBLAS: dgemm kernels
  if [ -z "${NPY_ENABLE_CPU_FEATURES:-}" ]; then   # (numpy refuses both variables at once)
    # numpy's own AVX-512 loops (float64 exp, log, ...): X86_V4 is numpy 2's name, the rest 1.x's
    export NPY_DISABLE_CPU_FEATURES=${NPY_DISABLE_CPU_FEATURES:-"X86_V4 AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"}
  fi
  export ATEN_CPU_CAPABILITY=${ATEN_CPU_CAPABILITY:-avx2}    # torch's own kernels (sigmoid, reductions)
  export MKL_CBWR=${MKL_CBWR:-AVX2}                          # torch's MKL GEMMs: same code path on Intel and AMD
  export ONEDNN_MAX_CPU_ISA=${ONEDNN_MAX_CPU_ISA:-AVX2}      # torch's oneDNN
fi
