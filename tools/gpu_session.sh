#!/usr/bin/env bash
# Everything a session with a lent GPU machine runs, split in stages that each fit one device call
# (10 minutes) and write their logs and results under $OUT, which the device tool brings back:
#
#   tools/gpu_session.sh tests    # every `gpu` test on the real GPU      -> $OUT/gpu_tests.{log,xml}
#   tools/gpu_session.sh bench    # python -m benchmarks --device cpu cuda -> $OUT/bench/, $OUT/bench.log
#   tools/gpu_session.sh nccl     # CUDA over MPI and NCCL (a world of one) -> $OUT/nccl.log
#   tools/gpu_session.sh all      # tests, then the benchmarks (cuda first, no distributed), then the
#                                 # probe's launch costs: one device call of under 10 minutes, at most
#                                 # 8 files back (the device tool's limit): no plots
#   tools/gpu_session.sh eager    # tests, the eager steps on cuda against PyTorch, the width sweep on cpu
#                                 # and cuda, benchmarks.eager_profile: about 5 minutes
#
# Each stage first records the machine (GPU name, driver, CuPy, CUDA, NCCL) in $OUT/machine.txt. Run
# from the repository root; the project runs from the tree (PYTHONPATH), nothing is installed. Copy
# what comes back into docs/bench/gpu/ and commit it with the GPU's name.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu_session}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# the device machine runs commands as root, which its OpenMPI mpiexec refuses unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
PY=${PYTHON:-python3}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  "$PY" - <<'PY'
import platform
print("python", platform.python_version())
try:
    import cupy
    props = cupy.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print("cupy", cupy.__version__, "| CUDA runtime", cupy.cuda.runtime.runtimeGetVersion(), "|", name)
except Exception as e:                       # noqa: BLE001 - this file records what is missing
    print("cupy: unusable:", repr(e))
try:
    from cupy.cuda import nccl
    print("nccl", nccl.get_version())
except Exception as e:                       # noqa: BLE001
    print("nccl: unusable:", repr(e))
try:
    import torch
    print("torch", torch.__version__, "| cuda", torch.cuda.is_available())
except Exception as e:                       # noqa: BLE001
    print("torch: unusable:", repr(e))
PY
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

case "${1:-}" in
  tests)
    # no -x: one run should show every failure; --maxfail bounds a broken device
    # pytest-xdist (in the device image) spreads the run, and CuPy's first-use kernel compiles, over
    # the machine's cores; every worker shares the one GPU
    XDIST=$("$PY" -c "import xdist" 2>/dev/null && echo "-n ${GPU_TEST_WORKERS:-8}")
    timeout ${GPU_TEST_TIMEOUT:-560} "$PY" -m pytest -m gpu -q -p no:cacheprovider --maxfail=200 -rf $XDIST \
      --junitxml="$OUT/gpu_tests.xml" 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
    ;;
  bench)
    timeout 560 "$PY" -m benchmarks --device cpu cuda --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" | tail -60
    ;;
  all)
    XDIST=$("$PY" -c "import xdist" 2>/dev/null && echo "-n ${GPU_TEST_WORKERS:-12}")
    timeout ${GPU_TEST_TIMEOUT:-170} "$PY" -m pytest -m gpu -q -p no:cacheprovider --maxfail=300 -rf $XDIST \
      > "$OUT/gpu_tests.log" 2>&1; tail -25 "$OUT/gpu_tests.log"
    timeout ${GPU_BENCH_TIMEOUT:-290} "$PY" -m benchmarks --device cuda cpu --out /tmp/bench --only op_overhead \
      mlp_step mlp_adam_step mlp_sub_step cnn_step transformer_step lstm_step sweep elementwise_4m moons_step \
      matmul_1024 deep_chain per_example_grads 2>&1 | tee "$OUT/bench.log" | grep -v "^ *$" | tail -45
    cp /tmp/bench/benchmarks.json /tmp/bench/benchmarks.md "$OUT/" 2>/dev/null
    timeout ${GPU_PROBE_TIMEOUT:-75} "$PY" -m benchmarks.cuda_probe --only launch kernels timings \
      2>&1 | tee "$OUT/probe.log" | tail -30
    ;;
  eager)
    XDIST=$("$PY" -c "import xdist" 2>/dev/null && echo "-n ${GPU_TEST_WORKERS:-12}")
    timeout ${GPU_TEST_TIMEOUT:-120} "$PY" -m pytest -m gpu -q -p no:cacheprovider --maxfail=300 -rf $XDIST \
      > "$OUT/gpu_tests.log" 2>&1; tail -15 "$OUT/gpu_tests.log"
    timeout ${GPU_BENCH_TIMEOUT:-130} "$PY" -m benchmarks --device cuda --out /tmp/bench --only op_overhead \
      mlp_step mlp_adam_step cnn_step transformer_step lstm_step sweep 2>&1 | tee "$OUT/bench.log" | grep -v "^ *$"
    cp /tmp/bench/benchmarks.json /tmp/bench/benchmarks.md "$OUT/" 2>/dev/null
    timeout 30 "$PY" -m benchmarks --device cpu --out /tmp/bench_cpu --only sweep 2>&1 | tee "$OUT/sweep_cpu.log" |
      grep sweep
    timeout ${GPU_PROBE_TIMEOUT:-50} "$PY" -m benchmarks.eager_profile --top 15 2>&1 | tee "$OUT/eager_profile.log" |
      grep -E "^==|us/call"
    ;;
  nccl)
    # The device machine has no network and no mpi4py; carry the wheels (about 15 MB, git-ignored):
    #   pip download --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
    #       --platform manylinux_2_28_x86_64 mpi4py mpich -d .gpu_wheels
    # and pass carry=[".gpu_wheels"]. NCCL itself comes with the image's PyTorch (nvidia-nccl-cu*).
    if ! "$PY" -c "from mpi4py import MPI" 2>/dev/null; then
      if ls .gpu_wheels/*.whl >/dev/null 2>&1; then
        if "$PY" -m venv --system-site-packages "$OUT/venv" &&
           "$OUT/venv/bin/python" -m pip install --quiet --no-index --find-links .gpu_wheels mpi4py mpich; then
          PY="$OUT/venv/bin/python"
        else
          echo "installing mpi4py/mpich from .gpu_wheels failed (wheels for this Python?)" | tee "$OUT/nccl.log"
          rm -rf "$OUT/venv"
          exit 1
        fi
      else
        echo "mpi4py is missing and .gpu_wheels/ was not carried: see the comment above" | tee "$OUT/nccl.log"
        exit 1
      fi
    fi
    timeout 500 "$PY" -m pytest -m gpu -q -p no:cacheprovider -rs tests/test_distributed.py 2>&1 |
      tee "$OUT/nccl.log" | tail -20
    rm -rf "$OUT/venv"
    ;;
  *)
    echo "usage: tools/gpu_session.sh tests|bench|nccl|all|eager" >&2
    exit 2
    ;;
esac
