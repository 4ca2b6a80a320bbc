"""Where an eager training step's host time goes on a GPU (issue 23): the benchmarks' steps, timed and
profiled, and what single CuPy calls cost the host:

    python -m benchmarks.eager_profile [--only mlp_step cnn_step ...] [--steps 40] [--top 25]

For each workload: ms per step back to back (synchronised once at the end) and on CUDA events, then
cProfile over ``--steps`` steps, the top functions by own time with their calls per step. Then the host
cost of the CuPy calls an eager step is made of (a small matmul, a reduction, a ufunc, an allocation, a
fill). On the CuPy stand-in (AG_CUDA=standin, as the test suite runs it) the figures mean nothing.
"""
import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.launches import use_standin_if_asked  # noqa: E402
from benchmarks.timing import cupy_module  # noqa: E402

DEFAULT = ("mlp_step", "cnn_step", "transformer_step", "lstm_step")


def _per_step(cp, step, n):
    """(host ms per step back to back, GPU ms per step on events)."""
    cp.cuda.Device().synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    t0 = time.perf_counter()
    start.record()
    for _ in range(n):
        step()
    stop.record()
    stop.synchronize()
    return (time.perf_counter() - t0) / n * 1e3, cp.cuda.get_elapsed_time(start, stop) / n


def profile_workload(cp, name, scale, steps, top):
    from benchmarks.workloads import WORKLOADS
    step = WORKLOADS[name]("cuda", scale)[0]["ours"]
    for _ in range(5):
        step()
    host, gpu = _per_step(cp, step, steps)
    print(f"== {name}: {host:.3f} ms/step on the host clock, {gpu:.3f} ms on CUDA events ({steps} steps)")
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(steps):
        step()
    pr.disable()
    cp.cuda.Device().synchronize()
    out = io.StringIO()
    st = pstats.Stats(pr, stream=out)
    rows = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:top]         # by own time
    print(f"  {'own ms/step':>11} {'cum ms/step':>11} {'calls/step':>10}  function")
    for (file, line, fn), (cc, nc, tt, ct, _) in rows:
        where = f"{Path(file).name}:{line}" if line else file
        print(f"  {tt / steps * 1e3:11.3f} {ct / steps * 1e3:11.3f} {nc / steps:10.1f}  {fn} ({where})")


def primitives(cp, calls=2000):
    """The host's cost of single CuPy calls of an eager step's kinds, back to back."""
    a = cp.ones((128, 784), cp.float32)
    w = cp.ones((512, 784), cp.float32)
    h = cp.ones((128, 512), cp.float32)
    out = cp.empty((128, 512), cp.float32)
    from autograd_gpu.backends import cublas_graph, cupy_backend
    kinds = {"matmul (128x784 @ 784x512, w.T view)": lambda: cp.matmul(a, w.T),
             "matmul with out=": lambda: cp.matmul(a, w.T, out=out),
             "the same through ctypes (cublas_graph)": lambda: cublas_graph.matmul(cp, a, w.T),
             "sum over axis 0 (128x512)": lambda: h.sum(axis=0),
             "ufunc maximum(h, 0)": lambda: cp.maximum(h, 0),
             "empty (128, 512)": lambda: cp.empty((128, 512), cp.float32),
             "zeros (128, 512)": lambda: cp.zeros((128, 512), cp.float32),
             "asarray(python float)": lambda: cp.asarray(1.5),
             "h * 0.5 (python scalar)": lambda: h * 0.5}
    if not cupy_backend.simulated():                   # cuBLAS's own host cost, without CuPy around it
        kinds["the same as a bare cublas.sgemm"] = _bare_sgemm(cp, a, w)
    print(f"host cost of single CuPy calls ({calls} back to back)")
    for name, call in kinds.items():
        for _ in range(10):
            call()
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        t = time.perf_counter() - t0
        cp.cuda.Device().synchronize()
        print(f"  {name:>40}: {t / calls * 1e6:7.1f} us/call")


def _bare_sgemm(cp, a, w):
    """a @ w.T as one call of CuPy's Cython cuBLAS binding on CuPy's handle (checked against cupy.matmul):
    the floor under any wrapper's cost. On an H200 it cost the host 29 us against matmul's 32
    (docs/bench/gpu/h200-2026-11-28/run4_gemm_probe.log): cuBLAS itself, not CuPy, is most of a product's
    host cost, so the backend keeps cupy.matmul."""
    from cupy_backends.cuda.libs import cublas
    handle = cp.cuda.device.get_cublas_handle()
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    (m, k), n = a.shape, w.shape[0]

    def call():
        c = cp.empty((m, n), cp.float32)
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.sgemm(handle, 1, 0, n, m, k, one.ctypes.data, w.data.ptr, k, a.data.ptr, k, zero.ctypes.data,
                     c.data.ptr, n)
        return c
    if not cp.allclose(call(), cp.matmul(a, w.T)):
        raise AssertionError("the bare sgemm differs from cupy.matmul")
    return call


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", default=list(DEFAULT), help="workloads (benchmarks.workloads names)")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--scale", default="full", choices=("tiny", "quick", "full"))
    args = p.parse_args(argv)
    use_standin_if_asked()
    import autograd_gpu as ag
    if not ag.cuda.is_available():
        raise SystemExit("needs CuPy and a GPU (or AG_CUDA=standin)")
    cp = cupy_module()
    for name in args.only:
        profile_workload(cp, name, args.scale, args.steps, args.top)
    primitives(cp, 20 if args.scale == "tiny" else 2000)


if __name__ == "__main__":
    main()
