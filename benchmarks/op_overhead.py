"""Per-op overhead: microseconds per elementwise op (forward + backward) on a 16-element tensor,
over a chain of 200 ops, for autograd_gpu and, when importable, PyTorch on the same device and in
the same run. Reports medians over repeats and the ratio ours / PyTorch.

    python benchmarks/op_overhead.py [--device cpu] [--ops 200] [--size 16] [--repeats 30]
"""
import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import autograd_gpu as ag  # noqa: E402


def chain(lib, x, w, n_ops):
    """The workload: a cycle of four cheap elementwise ops (tensor*tensor, +scalar, tanh, *scalar)."""
    h = x
    for i in range(n_ops):
        k = i % 4
        if k == 0:
            h = h * w
        elif k == 1:
            h = h + 0.5
        elif k == 2:
            h = lib.tanh(h)
        else:
            h = h * 1.1
    return h.sum()


def ours_step(device, n_ops, size):
    x = ag.randn(size, device=device, requires_grad=True)
    w = ag.randn(size, device=device, requires_grad=True)

    def step():
        x.grad = w.grad = None
        chain(ag, x, w, n_ops).backward()
        if device != "cpu":
            ag.cuda.synchronize()
    return step


def torch_step(device, n_ops, size):
    import torch
    dev = "cuda" if device.startswith("cuda") else "cpu"
    x = torch.randn(size, device=dev, requires_grad=True)
    w = torch.randn(size, device=dev, requires_grad=True)

    def step():
        x.grad = w.grad = None
        chain(torch, x, w, n_ops).backward()
        if dev == "cuda":
            torch.cuda.synchronize()
    return step


def measure(steps, repeats, rounds=5):
    """Median microseconds per call of each step. The steps take turns in short rounds, so a burst
    of load from elsewhere on the machine hits all of them alike rather than one."""
    for step in steps.values():
        for _ in range(5):
            step()                      # warm-up
    times = {name: [] for name in steps}
    per_round = max(1, repeats // rounds)
    for _ in range(rounds):
        for name, step in steps.items():
            for _ in range(per_round):
                t0 = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(ts) * 1e6, min(ts) * 1e6, max(ts) * 1e6) for name, ts in times.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--repeats", type=int, default=30)
    a = p.parse_args(argv)
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"device {a.device}; chain of {a.ops} ops on {a.size} elements, median of {a.repeats}")
    steps = {"autograd_gpu": ours_step(a.device, a.ops, a.size)}
    try:
        import torch
        steps[f"PyTorch {torch.__version__}"] = torch_step(a.device, a.ops, a.size)
    except ImportError:
        print("PyTorch not installed: no baseline")
    n = a.ops + 1
    results = measure(steps, a.repeats)
    for name, (med, lo, hi) in results.items():
        print(f"{name:>22}: {med / n:6.2f} us/op (forward + backward; min {lo / n:.2f}, max {hi / n:.2f})")
    if len(results) == 2:
        (ours, _, _), (theirs, _, _) = results.values()
        print(f"ratio ours / PyTorch: {ours / theirs:.2f}")


if __name__ == "__main__":
    main()
