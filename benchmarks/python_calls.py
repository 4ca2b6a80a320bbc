"""Python calls per op inside the package: how much of our own Python one elementwise op costs, forward +
backward, on the CPU against CUDA (issue 23: CUDA must not take a longer path than the CPU).

``sys.setprofile`` counts the "call" events of Python functions whose code lives in autograd_gpu/ (the
CuPy stand-in under autograd_gpu/testing/ excluded: it stands for CuPy's own code) over one
steady-state step of the per-op chain of benchmarks' op_overhead (x*w, +0.5, tanh, *1.1 cycled, then a
sum, forward and backward), divided by the number of ops. ``--by-function`` lists where the calls go on
each device and which functions make the difference.

    python -m benchmarks.python_calls                        # the CPU only
    AG_CUDA=standin python -m benchmarks.python_calls        # the CPU and CUDA on the CuPy stand-in
    AG_CUDA=standin python -m benchmarks.python_calls --by-function
"""
import argparse
import collections
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import autograd_gpu as ag  # noqa: E402

_ROOT = os.path.dirname(os.path.abspath(ag.__file__)) + os.sep
_EXCLUDED = os.path.join(_ROOT, "testing") + os.sep          # the stand-in (and test helpers): not the engine


def count_calls(fn):
    """(result of fn(), Counter {(file, function): calls}) of the package's Python calls during ``fn()``."""
    counts = collections.Counter()
    root, excluded = _ROOT, _EXCLUDED

    def profile(frame, event, arg):
        if event == "call":
            f = frame.f_code.co_filename
            if f.startswith(root) and not f.startswith(excluded):
                code = frame.f_code           # co_qualname is Python 3.11+; co_name before
                counts[(f[len(root):], getattr(code, "co_qualname", code.co_name))] += 1
    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        res = fn()
    finally:
        sys.setprofile(old)
    return res, counts


def chain_calls(device, n_ops=200, size=16, warmup=3):
    """(forward Counter, backward Counter, n_ops) for the per-op chain on ``device``, steady state."""
    import numpy as np
    from benchmarks.workloads import chain
    a = np.random.default_rng(0).standard_normal((2, size)).astype(np.float32)
    x = ag.tensor(a[0], device=device, requires_grad=True)
    w = ag.tensor(a[1], device=device, requires_grad=True)
    for _ in range(warmup + 1):
        x.grad = w.grad = None
        loss, fwd = count_calls(lambda: chain(ag, x, w, n_ops))
        _, bwd = count_calls(loss.backward)
    return fwd, bwd, n_ops


def per_op(devices=("cpu", "cuda"), n_ops=200):
    """{device: {"forward": calls/op, "backward": calls/op, "total": calls/op, "fwd": Counter, "bwd": Counter}}."""
    out = {}
    for d in devices:
        fwd, bwd, n = chain_calls(d, n_ops)
        f, b = sum(fwd.values()) / n, sum(bwd.values()) / n
        out[d] = {"forward": f, "backward": b, "total": f + b, "fwd": fwd, "bwd": bwd}
    return out


def difference(a, b, top=15):
    """Lines 'calls/op  file:function' where Counter ``b`` makes more calls than ``a`` (per call site)."""
    keys = set(a) | set(b)
    diff = sorted(((b[k] - a[k], k) for k in keys if b[k] != a[k]), key=lambda t: -abs(t[0]))
    return diff[:top]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=200)
    p.add_argument("--by-function", action="store_true")
    a = p.parse_args(argv)
    from benchmarks.launches import use_standin_if_asked
    use_standin_if_asked()
    devices = ["cpu"] + (["cuda"] if ag.cuda.is_available() else [])
    res = per_op(devices, a.ops)
    print(f"Python calls inside autograd_gpu per op (chain of {a.ops} elementwise ops, forward + backward):")
    for d, r in res.items():
        print(f"  {d:>5}: {r['total']:.2f} per op (forward {r['forward']:.2f}, backward {r['backward']:.2f})")
    if a.by_function:
        for d, r in res.items():
            print(f"\n{d}: calls per op by function")
            for phase in ("fwd", "bwd"):
                for (f, fn), n in r[phase].most_common(12):
                    print(f"  {phase} {n / a.ops:6.2f}  {f}:{fn}")
        if "cuda" in res:
            for phase in ("fwd", "bwd"):
                print(f"\n{phase}: cuda minus cpu, calls per op")
                for n, (f, fn) in difference(res["cpu"][phase], res["cuda"][phase]):
                    print(f"  {n / a.ops:+6.2f}  {f}:{fn}")
    return res


if __name__ == "__main__":
    main()
