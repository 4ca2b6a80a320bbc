"""Kernel launches per eager step on CUDA, counted on the CuPy stand-in (its ``count_launches``: one per
ufunc, reduction, user kernel, cuBLAS call, fill/memset, device copy, gather/scatter, random draw;
none for allocation, views or transfers). On a GPU a launch costs CuPy about 18-20 us of Python, so
at the benchmarks' sizes the count is the step's floor (issue 23).

    AG_CUDA=standin python -m benchmarks --device cuda --quick --launches-only   # the table, no timing
    AG_CUDA=standin python -m benchmarks.launches [--scale quick] [--by-name]    # the same, per CuPy call
    AG_CUDA=standin python -m benchmarks --device cuda --quick                   # timings + a launches column

The count needs the stand-in: with real CuPy the "launches/step" column stays empty (CuPy has no
launch counter of its own; Nsight Systems counts them from outside the process).
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# the issue's table: (launches measured before the fusing work, the issue's target); tests/test_launches.py
# pins the budgets that hold now
ISSUE = {"op_chain_forward_per_op": (1, 1), "op_chain_backward_per_op": (None, 1), "mlp_step": (85, 24),
         "mlp_adam_step": (157, 26), "cnn_step": (149, 60), "transformer_step": (714, 300), "lstm_step": (2044, 350)}
DEFAULT = ("op_chain", "mlp_step", "mlp_adam_step", "cnn_step", "transformer_step", "lstm_step")


def use_standin_if_asked():
    """``AG_CUDA=standin``: run CUDA on the CuPy stand-in in this process (as the test suite does)."""
    if os.environ.get("AG_CUDA") == "standin":
        from autograd_gpu.testing import cupy_standin
        if not cupy_standin.installed():
            cupy_standin.install()


def available():
    """Whether launches can be counted here: CUDA runs on the stand-in."""
    from autograd_gpu.backends import cupy_backend
    return cupy_backend.simulated()


def count(step, warmup=2):
    """The stand-in's LaunchLog of one call of ``step`` after ``warmup`` calls (caches, optimizer state
    and kernels are built in the warm-up, as in a training loop's steady state)."""
    from autograd_gpu.testing.cupy_standin import count_launches
    for _ in range(warmup):
        step()
    with count_launches() as log:
        step()
    return log


def op_chain(device="cuda", n_ops=200, size=16):
    """The per-op chain of ``benchmarks.workloads.op_overhead`` (x*w, +0.5, tanh, *1.1 cycled, then a sum):
    (forward log, backward log, n_ops) of one steady-state step."""
    import numpy as np
    import autograd_gpu as ag
    from benchmarks.workloads import chain
    from autograd_gpu.testing.cupy_standin import count_launches
    a = np.random.default_rng(0).standard_normal((2, size)).astype(np.float32)
    x = ag.tensor(a[0], device=device, requires_grad=True)
    w = ag.tensor(a[1], device=device, requires_grad=True)
    for _ in range(3):
        x.grad = w.grad = None
        with count_launches() as fwd:
            loss = chain(ag, x, w, n_ops)
        with count_launches() as bwd:
            loss.backward()
    return fwd, bwd, n_ops


def measure(scale="quick", names=DEFAULT, device="cuda"):
    """{name: LaunchLog} of one steady-state step of each workload (``op_chain`` gives two entries,
    its forward and its backward)."""
    from benchmarks.workloads import WORKLOADS
    out = {}
    for name in names:
        if name == "op_chain":
            fwd, bwd, n = op_chain(device)
            out["op_chain_forward"], out["op_chain_backward"] = fwd, bwd
            out["op_chain_ops"] = n
            continue
        steps, _ = WORKLOADS[name](device, scale)
        out[name] = count(steps["ours"])
    return out


def table(logs):
    """Markdown: launches per step by kind, beside the issue's figures."""
    n_ops = logs.get("op_chain_ops")
    kinds = sorted({k for v in logs.values() if hasattr(v, "by_kind") for k in v.by_kind})
    lines = ["| step | launches | issue: before | issue: target | " + " | ".join(kinds) + " |",
             "|---|---|---|---|" + "---|" * len(kinds)]
    for name, log in logs.items():
        if not hasattr(log, "by_kind"):
            continue
        key = name + ("_per_op" if name.startswith("op_chain") else "")
        before, target = ISSUE.get(key, (None, None))
        total = f"{log.launches}" + (f" ({log.launches / n_ops:.2f}/op)" if name.startswith("op_chain") else "")
        cells = [name, total, "-" if before is None else str(before), "-" if target is None else str(target)]
        cells += [str(log.by_kind.get(k, 0)) for k in kinds]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def by_name(log, top=25):
    """The CuPy calls that launched most in ``log``, as lines 'count  kind  name'."""
    counts = {}
    for kind, name in log.events:
        counts[(kind, name)] = counts.get((kind, name), 0) + 1
    return [f"{n:6d}  {k:<18} {name}" for (k, name), n in sorted(counts.items(), key=lambda kv: -kv[1])[:top]]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale", default="quick", choices=("quick", "full", "tiny"))
    p.add_argument("--only", nargs="*", default=list(DEFAULT))
    p.add_argument("--by-name", action="store_true", help="also list, per step, the CuPy calls that launch")
    a = p.parse_args(argv)
    use_standin_if_asked()
    if not available():
        sys.exit("launch counts need the CuPy stand-in: run with AG_CUDA=standin")
    logs = measure(a.scale, a.only)
    print(table(logs))
    if a.by_name:
        for name, log in logs.items():
            if hasattr(log, "events"):
                print(f"\n{name}: {log.launches} launches")
                print("\n".join(by_name(log)))
    return logs


if __name__ == "__main__":
    main()
