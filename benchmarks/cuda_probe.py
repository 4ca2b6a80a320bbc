"""What a compiled step costs on a GPU, beyond `python -m benchmarks --device cuda`'s medians: run on a
machine with a GPU and CuPy (the test suite runs a tiny version on its CuPy stand-in, where the
figures mean nothing):

    python -m benchmarks.cuda_probe [--only capture timings kernels profile]

- capture: for each compiled function (the 4M-element step with and without CUDA graphs, the MLP step,
  a no_grad cross-entropy, a tiny elementwise function), its CUDA stats and, per program, the reason
  it replays without a graph (None: captured); then the 4M step's generated source;
- timings: per call, back to back on the host clock and on CUDA events, and synchronised after each
  call: the 4M step compiled, compiled without graphs and eager; the MLP step compiled and in PyTorch
  (when PyTorch sees a GPU); a 16 MiB copy; then the GPU's time (benchmarks.workloads.device_ms) of
  the compiled step, of its program replayed without the call around it, and of the copy;
- kernels: the 4M step's generated kernel against copies: cudaMemcpy, an ElementwiseKernel copy, a
  vectorised copy, and the step's kernel as an ElementwiseKernel and vectorised
  (backends/fuse_cuda_vec.py; on the stand-in both are the ElementwiseKernel);
- launch: the host's cost of one launch from Python, on 1024 float32 (so the GPU's own time is
  negligible): a CuPy ufunc (`cupy.add(a, b, out=c)`), a cached ElementwiseKernel, a RawKernel, and
  one eager op of ours (`x + y` under no_grad), back to back per call and synchronised after each;
- profile (only when asked for): where the host's time goes in a compiled 4M call, with and without
  graphs (cProfile, top functions by own time).

(Formerly tools/gpu_probe.py and tools/gpu_kernel_probe.py; docs/bench/gpu/ keeps what they printed on
an H100: probe.log, kernel_probe.txt.)"""
import argparse
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import autograd_gpu as ag  # noqa: E402
import autograd_gpu.nn as nn  # noqa: E402
import autograd_gpu.nn.functional as F  # noqa: E402
from autograd_gpu import optim  # noqa: E402
from benchmarks.timing import cupy_module  # noqa: E402
from benchmarks.workloads import device_ms  # noqa: E402

SECTIONS = ("capture", "timings", "kernels", "launch", "profile")
SIZES = {"full": dict(n=1 << 22, mlp=(784, 512, 512, 10), batch=128, calls=200, device_repeats=20),
         "tiny": dict(n=1 << 12, mlp=(32, 16, 16, 10), batch=8, calls=3, device_repeats=1)}


def why(fn):
    """Per program of a compiled function, why it replays without a CUDA graph (None: captured)."""
    return [getattr(getattr(p, "graph_runner", None), "no_graph", "no runner") for p in fn.programs()]


def report(name, fn, call):
    try:
        for _ in range(4):
            call()
        ag.cuda.synchronize("cuda")
        print(f"{name}: stats {fn.cuda_stats()} no_graph {why(fn)}")
    except Exception:                                   # noqa: BLE001 - a probe prints what broke
        print(f"{name}: raised")
        traceback.print_exc()


def timed(cp, name, call, n):
    """Per call: back to back on the host clock and on CUDA events, and synchronised after each call."""
    for _ in range(5):
        call()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(n):
        call()
    stop.record()
    stop.synchronize()
    wall = (time.perf_counter() - t0) / n * 1e6
    gpu = cp.cuda.get_elapsed_time(start, stop) / n * 1e3
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        cp.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t)
    print(f"  {name}: back-to-back {wall:.1f} us/call (events {gpu:.1f} us), synced each {np.median(ts) * 1e6:.1f} us")


def profiled(name, call, n):
    """Where the host's time goes in one call (cProfile, top functions by own time)."""
    import cProfile
    import pstats
    for _ in range(5):
        call()
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(n):
        call()
    pr.disable()
    print(f"  profile of {name} ({n} calls):")
    pstats.Stats(pr).sort_stats("tottime").print_stats(10)


def _steps(size):
    """The compiled functions the sections look at, on "cuda"."""
    dev, rng = "cuda", np.random.default_rng(0)
    x4 = ag.tensor(rng.standard_normal(size["n"]).astype(np.float32), device=dev, requires_grad=True)

    def eager():
        x4.grad = None
        s = ag.sigmoid(x4)
        ((s * x4) ** 2).sum().backward()

    sizes = size["mlp"]
    m = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.ReLU(), nn.Linear(sizes[1], sizes[2]), nn.ReLU(),
                      nn.Linear(sizes[2], sizes[3])).to(dev)
    opt = optim.SGD(m.parameters(), lr=0.01)
    xb = ag.tensor(np.random.default_rng(1).standard_normal((size["batch"], sizes[0])).astype(np.float32), device=dev)
    yb = ag.tensor(np.random.default_rng(2).integers(0, sizes[-1], size["batch"]), device=dev)

    @ag.compile
    def mlp(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss

    lin = nn.Linear(4, 3).to(dev)

    @ag.compile
    def ce(x, y):
        with ag.no_grad():
            return F.cross_entropy(lin(x), y)

    @ag.compile
    def tiny(x):
        with ag.no_grad():
            return ag.exp(x) * x + 1
    xs = ag.tensor(np.ones((5, 4), np.float32), device=dev)
    ys = ag.tensor(np.array([0, 1, 2, 0, 1]), device=dev)
    return {"x4": x4, "eager": eager, "ew": ag.compile(eager), "ew_plain": ag.compile(eager, cuda_graphs=False),
            "mlp": mlp, "mlp_call": lambda: mlp(xb, yb), "ce": ce, "ce_call": lambda: ce(xs, ys),
            "tiny": tiny, "tiny_call": lambda: tiny(xs)}


def capture(s):
    report("elementwise_4m", s["ew"], s["ew"])
    report("elementwise_4m without graphs", s["ew_plain"], s["ew_plain"])
    report("mlp_step", s["mlp"], s["mlp_call"])
    report("cross_entropy no_grad", s["ce"], s["ce_call"])
    report("tiny elementwise", s["tiny"], s["tiny_call"])
    print(s["ew"].programs()[-1].source)


def timings(cp, s, size):
    print("timings")
    n = size["calls"]
    timed(cp, "elementwise_4m compiled", s["ew"], n)
    timed(cp, "elementwise_4m compiled, no graphs", s["ew_plain"], n)
    timed(cp, "elementwise_4m eager", s["eager"], n)
    timed(cp, "mlp_step compiled", s["mlp_call"], n)
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    if has_torch:
        sizes, tn = size["mlp"], torch.nn
        tm = tn.Sequential(tn.Linear(sizes[0], sizes[1]), tn.ReLU(), tn.Linear(sizes[1], sizes[2]), tn.ReLU(),
                           tn.Linear(sizes[2], sizes[3])).cuda()
        topt = torch.optim.SGD(tm.parameters(), lr=0.01)
        tx = torch.randn(size["batch"], sizes[0], device="cuda")
        ty = torch.randint(0, sizes[-1], (size["batch"],), device="cuda")

        def tstep():
            topt.zero_grad()
            tn.functional.cross_entropy(tm(tx), ty).backward()
            topt.step()
        timed(cp, "mlp_step torch eager", tstep, n)
    else:
        print("  mlp_step torch eager: PyTorch sees no GPU")
    a = cp.ones(size["n"], cp.float32)
    b = cp.empty_like(a)
    timed(cp, f"copy {size['n'] * 4 >> 20} MiB" if size["n"] >= 1 << 18 else f"copy {size['n'] * 4} B",
          lambda: cp.copyto(b, a), n)
    ew = s["ew"]
    ew()
    runner = ew.programs()[-1].graph_runner
    arrays = (s["x4"].data, s["x4"].grad.data)
    reps = size["device_repeats"]
    print("  device ms: compiled step", device_ms(cp, ew, reps), "| its program replayed plainly",
          device_ms(cp, lambda: runner.run(arrays), reps), "| copy", device_ms(cp, lambda: cp.copyto(b, a), reps))
    print("  generated kernel:", [k for k in ew.programs()[-1].source.splitlines() if "#" in k])


def kernels(cp, size):
    """The compiled 4M-element step's kernel (its expression as generated) against copies."""
    from autograd_gpu.backends import cupy_backend
    from autograd_gpu.backends.fuse_cuda_vec import VecKernel
    n, reps = size["n"], size["device_repeats"]
    x = cp.random.standard_normal(n, dtype=cp.float32)
    y = cp.empty_like(x)
    one = cp.ones((), cp.float32)
    e = ("((((k0 * ((1 / (1 + exp(-a1))) * a1)) * k2) * (1 / (1 + exp(-a1)))) + (((1 - (1 / (1 + exp(-a1)))) * "
         "(1 / (1 + exp(-a1)))) * (((k0 * ((1 / (1 + exp(-a1))) * a1)) * k2) * a1)))")
    params = ["float32 k0", "float32 a1", "float32 k2"]
    simulated = cupy_backend.simulated()
    gen = cp.ElementwiseKernel(", ".join(params), "float32 y", f"y = {e}", "gen")
    vec = VecKernel(cp, gen, params, "float32", e, simulated=simulated)
    cpk = cp.ElementwiseKernel("float32 a1", "float32 y", "y = a1", "cpk")
    vcp = VecKernel(cp, cpk, ["float32 a1"], "float32", "a1", simulated=simulated)
    r = {"cudaMemcpy (copyto)": device_ms(cp, lambda: cp.copyto(y, x), reps),
         "ElementwiseKernel copy": device_ms(cp, lambda: cpk(x, y), reps),
         "vectorised copy": device_ms(cp, lambda: vcp(x, y), reps),
         "the 4M step's ElementwiseKernel": device_ms(cp, lambda: gen(one, x, np.float32(2), y), reps),
         "the 4M step's kernel, vectorised": device_ms(cp, lambda: vec(one, x, np.float32(2), y), reps)}
    print(f"kernels on {n} float32")
    for k, v in r.items():
        print(f"{k:>34}: {v * 1e3:7.1f} us  {n * 8 / (v * 1e-3) / 1e9:6.0f} GB/s" if v else f"{k:>34}: no timing")
    return r


_RAW_ADD = r"""extern "C" __global__ void ag_probe_add(const float* a, const float* b, float* c, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}"""


def launch(cp, size):
    """What one launch costs the host: ufunc, cached ElementwiseKernel, RawKernel, and one op of ours."""
    n, calls = 1024, size["calls"] * 10
    a, b = cp.ones(n, cp.float32), cp.ones(n, cp.float32)
    c = cp.empty_like(a)
    ek = cp.ElementwiseKernel("float32 a, float32 b", "float32 c", "c = a + b", "ag_probe_add_ew")
    kinds = {"CuPy ufunc cupy.add(a, b, out=c)": lambda: cp.add(a, b, out=c),
             "cached ElementwiseKernel": lambda: ek(a, b, c)}
    from autograd_gpu.backends import cupy_backend
    if not cupy_backend.simulated():                   # the stand-in has no RawKernel
        rk = cp.RawKernel(_RAW_ADD, "ag_probe_add")
        kinds["RawKernel"] = lambda: rk((4,), (256,), (a, b, c, np.int64(n)))
    else:
        print("  RawKernel: not in this CuPy (the stand-in has none)")
    x, y = ag.ones(n, device="cuda"), ag.ones(n, device="cuda")

    def ours():
        with ag.no_grad():
            x + y
    kinds["ours: x + y (no_grad)"] = ours
    print(f"launch cost on {n} float32, {calls} calls")
    for name, call in kinds.items():
        try:
            timed(cp, name, call, calls)
        except Exception:                               # noqa: BLE001 - a probe prints what broke
            print(f"  {name}: raised")
            traceback.print_exc()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", choices=SECTIONS, default=["capture", "timings", "kernels", "launch"],
                   help="sections to run (default: all but profile)")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)      # for the test suite
    args = p.parse_args(argv)
    if not ag.cuda.is_available():
        raise SystemExit("needs CuPy and a GPU")
    size = SIZES["tiny" if args.tiny else "full"]
    cp = cupy_module()
    s = _steps(size)
    if "capture" in args.only:
        capture(s)
    if "timings" in args.only:
        timings(cp, s, size)
    if "kernels" in args.only:
        kernels(cp, size)
    if "launch" in args.only:
        launch(cp, size)
    if "profile" in args.only:
        profiled("elementwise_4m compiled", s["ew"], 300 if not args.tiny else 3)
        profiled("elementwise_4m compiled, no graphs", s["ew_plain"], 300 if not args.tiny else 3)


if __name__ == "__main__":
    main()
