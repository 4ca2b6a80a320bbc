"""Each optimizer's fused multi-tensor update against its step-by-step update (``_reference_update``, what
the fused one replaces and ag.compile still records), in one process, interleaved rounds, medians of the
process's CPU time (the shared machine's load counts less than in wall time):

    python -m benchmarks.optim_fused [--width 64] [--rounds 9]               # CPU: us a step, and the ratio
    AG_CUDA=standin python -m benchmarks.optim_fused --launches             # CUDA: kernel launches a step

The model is 10 Linear(width, width) layers: 20 float32 parameters, weights of width^2 elements and
biases of width. ``--launches`` counts one step of each update on the CuPy stand-in (count_launches)."""
import argparse
import statistics
import sys
import time
import timeit
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import autograd_gpu as ag  # noqa: E402
from autograd_gpu import nn, optim  # noqa: E402

CASES = [("SGD", dict(lr=0.01, momentum=0.9)), ("Adam", dict(lr=1e-3)), ("RMSprop", dict(lr=1e-3)),
         ("Adagrad", dict(lr=1e-2)), ("Adamax", dict(lr=1e-3)), ("NAdam", dict(lr=1e-3)),
         ("RAdam", dict(lr=1e-3)), ("Adadelta", dict()), ("ASGD", dict(lr=1e-2, t0=2)), ("Rprop", dict(lr=1e-2))]


def _model(width, device):
    ag.manual_seed(0)
    params = list(nn.Sequential(*[nn.Linear(width, width) for _ in range(10)]).to(device).parameters())
    rng = np.random.default_rng(0)
    for p in params:
        p.grad = ag.tensor(rng.standard_normal(p.shape).astype(np.float32), device=device)
    return params


def times(width, rounds, number=None):
    """{name: (step-by-step us, fused us)}: medians over ``rounds`` interleaved rounds of ``number`` steps."""
    params, out = _model(width, "cpu"), {}
    number = number or max(3, 200 * 64 * 64 // (width * width))
    for name, kw in CASES:
        opt = getattr(optim, name)(params, **kw)
        group = opt.param_groups[0]
        ref, fused = (lambda: opt._reference_update(group)), (lambda: opt._update_group(group))
        for _ in range(3):
            ref()
            fused()
        got = {ref: [], fused: []}
        for _ in range(rounds):
            for f in (ref, fused):
                got[f].append(min(timeit.repeat(f, number=number, repeat=3, timer=time.process_time)) / number * 1e6)
        out[name] = (statistics.median(got[ref]), statistics.median(got[fused]))
    return out


def launches():
    """{name: (step-by-step launches, fused launches)} of one step on the CuPy stand-in."""
    from benchmarks import launches as counter
    counter.use_standin_if_asked()
    if not counter.available():
        raise SystemExit("--launches counts on the CuPy stand-in: run with AG_CUDA=standin")
    from autograd_gpu.testing import cupy_standin
    params, out = _model(8, "cuda"), {}
    for name, kw in CASES:
        opt = getattr(optim, name)(params, **kw)
        group, got = opt.param_groups[0], []
        for f in (opt._reference_update, opt._update_group):
            f(group)                                  # state made: the steady-state step is counted
            with cupy_standin.count_launches() as log:
                f(group)
            got.append(log.launches)
        out[name] = tuple(got)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--launches", action="store_true", help="count CUDA launches on the CuPy stand-in instead")
    args = ap.parse_args(argv)
    if args.launches:
        for name, (ref, fused) in launches().items():
            print(f"{name:9s} launches a step (20 parameters): step by step {ref:4d}, fused {fused}")
        return
    for name, (ref, fused) in times(args.width, args.rounds).items():
        print(f"{name:9s} width {args.width}: step by step {ref:8.1f} us, fused {fused:8.1f} us, "
              f"ratio {ref / fused:.2f}x")


if __name__ == "__main__":
    main()
