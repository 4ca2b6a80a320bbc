"""What a compiled loss costs when the caller only reads it: ``float(loss_fn(x, y))`` where the loss still
requires grad (a node is made for a backward that never comes), against the same call under ``no_grad``
(no node, no residuals), for a moons-sized MLP (2-16-16-2, batch 64, cross-entropy) and a wider one:

    AUTOGRAD_GPU_NUM_THREADS=2 python -m benchmarks.compile_read [--calls 2000] [--rounds 5]

Each round times ``calls`` calls of each in turn (CPU time, so other processes on a shared box count
less); prints the median and min per call of each, and read / no_grad. After two calls whose nodes no
backward reached, a replay runs the forward without residuals (compile/aot.py, Aot.use_lazy), so the
read should cost what the no_grad call costs."""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import autograd_gpu as ag  # noqa: E402
from autograd_gpu import nn  # noqa: E402
import autograd_gpu.nn.functional as F  # noqa: E402


def case(widths, batch):
    ag.manual_seed(0)
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    x = ag.randn(batch, widths[0])
    y = ag.tensor(np.arange(batch) % widths[-1])

    @ag.compile
    def loss_fn(x, y):
        return F.cross_entropy(model(x), y)

    def read():
        return float(loss_fn(x, y))

    def read_no_grad():
        with ag.no_grad():
            return float(loss_fn(x, y))
    return loss_fn, read, read_no_grad


def run(calls, rounds, widths, batch):
    loss_fn, read, read_no_grad = case(widths, batch)
    fs = {"read": read, "no_grad": read_no_grad}
    for f in fs.values():
        for _ in range(20):
            f()
    got = {k: [] for k in fs}
    for _ in range(rounds):
        for k, f in fs.items():
            t0 = time.process_time()
            for _ in range(calls):
                f()
            got[k].append((time.process_time() - t0) / calls * 1e6)
    med = {k: float(np.median(v)) for k, v in got.items()}
    out = {"widths": widths, "batch": batch, "stats": dict(loss_fn.stats),
           **{f"{k}_us": med[k] for k in fs}, **{f"{k}_min_us": min(v) for k, v in got.items()},
           "ratio": med["read"] / med["no_grad"]}
    print(f"MLP {'-'.join(map(str, widths))} batch {batch}: read {med['read']:.1f} us (min {min(got['read']):.1f}), "
          f"no_grad {med['no_grad']:.1f} us (min {min(got['no_grad']):.1f}), read / no_grad {out['ratio']:.3f}; "
          f"{loss_fn.stats}")
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    return [run(args.calls, args.rounds, (2, 16, 16, 2), 64), run(args.calls // 4, args.rounds, (64, 256, 256, 4), 128)]


if __name__ == "__main__":
    main()
