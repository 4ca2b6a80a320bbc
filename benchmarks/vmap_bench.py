"""Per-example gradients of a 2-layer MLP with ag.func.vmap(grad(loss)) against a Python loop of grad
calls (the issue asks for >= 10x on the CPU, equal results), hand-written batched NumPy/CuPy, and
torch.func.vmap(grad). Registered into WORKLOADS as "per_example_grads"; the vmap-vs-loop ratio is
measured in one run by

    python -m benchmarks.vmap_bench [--device cpu] [--batch 256] [--quick]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import autograd_gpu as ag  # noqa: E402

SIZES = {"full": (256, 64, 128, 10), "quick": (256, 64, 128, 10), "tiny": (8, 6, 5, 3)}


def _problem(device, scale, batch=None):
    from benchmarks.workloads import _rng       # here, not at the top: workloads imports this module
    n, d_in, hidden, classes = SIZES[scale]
    n = batch or n
    rng = _rng(7)
    arrays = {"w1": rng.standard_normal((hidden, d_in)) * 0.1, "b1": np.zeros(hidden),
              "w2": rng.standard_normal((classes, hidden)) * 0.1, "b2": np.zeros(classes),
              "x": rng.standard_normal((n, d_in)), "y": rng.integers(0, classes, n)}
    arrays = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in arrays.items()}
    return arrays, (n, d_in, hidden, classes)


def _ours(device, a):
    import autograd_gpu.nn.functional as F
    from autograd_gpu.func import grad, vmap
    t = {k: ag.tensor(v, device=device) for k, v in a.items()}

    def loss(w1, b1, w2, b2, x, y):
        return F.cross_entropy(F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)[None], y[None])
    g = grad(loss, argnums=(0, 1, 2, 3))
    per_example = vmap(g, in_dims=(None, None, None, None, 0, 0))
    params = (t["w1"], t["b1"], t["w2"], t["b2"])

    def batched():
        return per_example(*params, t["x"], t["y"])

    def loop():
        return [g(*params, t["x"][i], t["y"][i]) for i in range(t["x"].shape[0])]
    return batched, loop


def _by_hand(device, a):
    """The same per-example gradients on arrays: one batched pass, outer products per example."""
    from benchmarks.workloads import _xp
    xp = _xp(device)
    w1, b1, w2, b2, x, y = (xp.asarray(a[k]) for k in ("w1", "b1", "w2", "b2", "x", "y"))
    n = x.shape[0]

    def step():
        z = x @ w1.T + b1
        h = xp.maximum(z, 0)
        logits = h @ w2.T + b2
        p = xp.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[xp.arange(n), y] -= 1                                  # d loss_i / d logits_i
        gw2 = p[:, :, None] * h[:, None, :]
        gz = (p @ w2) * (z > 0)
        gw1 = gz[:, :, None] * x[:, None, :]
        return gw1, gz, gw2, p
    return step


def per_example_grads(device, scale):
    """Per-example gradients (w1, b1, w2, b2) of a 2-layer MLP 64-128-10 with cross-entropy, batch 256."""
    from benchmarks.workloads import _torch
    a, (n, d_in, hidden, classes) = _problem(device, scale)
    batched, _ = _ours(device, a)
    steps = {"ours": batched, "numpy": _by_hand(device, a)}
    torch, tdev = _torch(device)
    if torch is not None:
        from torch.func import grad as tgrad, vmap as tvmap
        tt = {k: torch.tensor(v, device=tdev) for k, v in a.items()}

        def tloss(w1, b1, w2, b2, x, y):
            h = torch.relu(x @ w1.T + b1)
            return torch.nn.functional.cross_entropy((h @ w2.T + b2)[None], y[None])
        tf = tvmap(tgrad(tloss, argnums=(0, 1, 2, 3)), in_dims=(None, None, None, None, 0, 0))
        steps["torch"] = lambda: tf(tt["w1"], tt["b1"], tt["w2"], tt["b2"], tt["x"], tt["y"])
    return steps, {"per": 1, "unit": "ms/step",
                   "what": f"per-example grads, MLP {d_in}-{hidden}-{classes}, batch {n}, vmap(grad)"}


def main(argv=None):
    from benchmarks.timing import measure, sync_fn
    p = argparse.ArgumentParser(description="vmap(grad) vs a Python loop of grad calls")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    a, sizes = _problem(args.device, "full", args.batch)
    batched, loop = _ours(args.device, a)
    got, want = batched(), loop()
    worst = max(float(np.abs(g.numpy()[i] - w.numpy()).max()) for i, ws in enumerate(want) for g, w in zip(got, ws))
    sync = sync_fn(args.device, "ours")
    res = measure({"vmap": (batched, sync), "loop": (loop, sync)}, 3 if args.quick else 9, warmup=1,
                  rounds=3, block_warmup=0)
    print(f"per-example gradients, MLP {sizes[1]}-{sizes[2]}-{sizes[3]}, batch {sizes[0]}, device {args.device}")
    for k, (med, lo, hi) in res.items():
        print(f"  {k:5s} {med * 1e3:9.2f} ms (min {lo * 1e3:.2f}, max {hi * 1e3:.2f})")
    print(f"  loop / vmap: {res['loop'][0] / res['vmap'][0]:.1f}x; largest difference {worst:.2e}")


if __name__ == "__main__":
    main()
