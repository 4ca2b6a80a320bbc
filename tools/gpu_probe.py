"""Why a compiled CUDA program is (not) captured as a CUDA graph, and what a compiled step costs on the
GPU: run on a lent GPU (`PYTHONPATH=$PWD python3 tools/gpu_probe.py`). Prints, per compiled function,
the reason its programs replay without a graph (None: captured), then event-timed GPU time against
wall time for the 4M-element step and the MLP step."""
import time
import traceback

import numpy as np

import autograd_gpu as ag
import autograd_gpu.nn as nn
import autograd_gpu.nn.functional as F
from autograd_gpu import optim


def why(fn):
    return [getattr(getattr(p, "graph_runner", None), "no_graph", "no runner") for p in fn.programs()]


def report(name, fn, calls):
    try:
        for _ in range(4):
            calls()
        ag.cuda.synchronize("cuda")
        print(f"{name}: stats {fn.cuda_stats()} no_graph {why(fn)}")
    except Exception:                                   # noqa: BLE001 - a probe prints what broke
        print(f"{name}: raised"), traceback.print_exc()


def timed(name, call, n=200):
    import cupy
    for _ in range(5):
        call()
    cupy.cuda.Device().synchronize()
    t0 = time.perf_counter()
    start, stop = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(n):
        call()
    stop.record()
    stop.synchronize()
    wall = (time.perf_counter() - t0) / n * 1e6
    gpu = cupy.cuda.get_elapsed_time(start, stop) / n * 1e3
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        cupy.cuda.Device().synchronize()
        ts.append(time.perf_counter() - t)
    print(f"  {name}: back-to-back {wall:.1f} us/call (events {gpu:.1f} us), synced each {np.median(ts)*1e6:.1f} us")


def profiled(name, call, n=300):
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
    st = pstats.Stats(pr)
    st.sort_stats("tottime").print_stats(10)


def main():
    dev = "cuda"
    x4 = ag.tensor(np.random.default_rng(0).standard_normal(1 << 22).astype(np.float32), device=dev,
                   requires_grad=True)

    @ag.compile
    def ew():
        x4.grad = None
        s = ag.sigmoid(x4)
        ((s * x4) ** 2).sum().backward()
    report("elementwise_4m", ew, ew)

    @ag.compile(cuda_graphs=False)
    def ew_plain():
        x4.grad = None
        s = ag.sigmoid(x4)
        ((s * x4) ** 2).sum().backward()
    report("elementwise_4m without graphs", ew_plain, ew_plain)
    print(ew.programs()[-1].source)

    m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)).to(dev)
    opt = optim.SGD(m.parameters(), lr=0.01)
    xb = ag.tensor(np.random.default_rng(1).standard_normal((128, 784)).astype(np.float32), device=dev)
    yb = ag.tensor(np.random.default_rng(2).integers(0, 10, 128), device=dev)

    @ag.compile
    def mlp(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss
    report("mlp_step", mlp, lambda: mlp(xb, yb))

    lin = nn.Linear(4, 3).to(dev)

    @ag.compile
    def ce(x, y):
        with ag.no_grad():
            return F.cross_entropy(lin(x), y)
    xs = ag.tensor(np.ones((5, 4), np.float32), device=dev)
    ys = ag.tensor(np.array([0, 1, 2, 0, 1]), device=dev)
    report("cross_entropy no_grad", ce, lambda: ce(xs, ys))

    @ag.compile
    def tiny(x):
        with ag.no_grad():
            return ag.exp(x) * x + 1
    report("tiny elementwise", tiny, lambda: tiny(xs))
    print("timings")
    timed("elementwise_4m compiled", ew)
    timed("elementwise_4m compiled, no graphs", ew_plain)

    def eager():
        x4.grad = None
        s = ag.sigmoid(x4)
        ((s * x4) ** 2).sum().backward()
    timed("elementwise_4m eager", eager)
    import torch
    tm = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                             torch.nn.Linear(512, 10)).cuda()
    topt = torch.optim.SGD(tm.parameters(), lr=0.01)
    tx, ty = torch.randn(128, 784, device="cuda"), torch.randint(0, 10, (128,), device="cuda")

    def tstep():
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tm(tx), ty)
        loss.backward()
        topt.step()
    timed("mlp_step torch eager", tstep)
    profiled("elementwise_4m compiled", ew)
    profiled("elementwise_4m compiled, no graphs", ew_plain)
    timed("mlp_step compiled", lambda: mlp(xb, yb))
    import cupy
    a = cupy.ones(1 << 22, cupy.float32)
    b = cupy.empty_like(a)
    timed("copy 16 MiB", lambda: cupy.copyto(b, a))
    from benchmarks.workloads import device_ms
    ew()
    runner = ew.programs()[-1].graph_runner
    arrays = (x4.data, x4.grad.data)
    print("  device ms: compiled step", device_ms(cupy, ew), "| its program replayed plainly",
          device_ms(cupy, lambda: runner.run(arrays)), "| copy", device_ms(cupy, lambda: cupy.copyto(b, a)))
    print("  generated kernel:", [k for k in ew.programs()[-1].source.splitlines() if "#" in k])


if __name__ == "__main__":
    main()
