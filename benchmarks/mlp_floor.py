"""The MLP step of `python -m benchmarks --only mlp_step` (784-512-512-10, ReLU, cross-entropy, batch 128,
SGD lr 0.01) under ag.compile, against the same step written by hand as the least work NumPy and MKL
can do (the floor for ag.compile's CPU replay, which runs the same kind of calls), PyTorch eager and,
when it is installed, JAX's jit, in one process:

    pip install -e ".[mkl]" torch && python -m benchmarks.mlp_floor [--repeats 600]    # [jax] too: its column

The floor: every product goes to MKL into a buffer made once; bias and ReLU are done in place;
cross-entropy is five passes over the (128, 10) logits; the ReLU backward is one multiply by a mask;
bias gradients are ``ones @ g``; SGD is MKL's axpy. Nothing is allocated in a step but the gradients
it hands out; its gradients are checked against PyTorch's from the same weights. Timed as the
benchmarks time (benchmarks/timing.py: interleaved rounds, medians): prints each median in ms with its
min-max and its ratio to PyTorch, then compiled / floor. (Formerly tools/mlp_floor.py and
tools/jax_mlp_step.py; JAX is not a dependency of the project.)"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograd_gpu.backends import mkl_blas  # noqa: E402
from benchmarks.timing import measure  # noqa: E402
from benchmarks.workloads import mlp_step, _mlp_sizes  # noqa: E402

LR = 0.01


def by_hand(x, y, weights, biases):
    """The floor: one SGD step of the MLP on NumPy + MKL, updating ``weights`` and ``biases`` in place;
    returns the six gradients (w1, b1, w2, b2, w3, b3)."""
    axpy = mkl_blas.axpy

    def mm(a, b, out=None):          # MKL takes every product of the full sizes; NumPy the tiny ones
        c = mkl_blas.matmul(a, b, out=out)
        return np.matmul(a, b, out=out) if c is None else c
    f32 = np.float32
    n, sizes = x.shape[0], [x.shape[1]] + [w.shape[0] for w in weights]
    h1, g1 = (np.empty((n, sizes[1]), f32) for _ in range(2))
    h2, g2 = (np.empty((n, sizes[2]), f32) for _ in range(2))
    z = np.empty((n, sizes[3]), f32)
    m1, m2 = np.empty((n, sizes[1]), bool), np.empty((n, sizes[2]), bool)
    ones, rows, neg_lr, inv_n = np.ones(n, f32), np.arange(n), f32(-LR), f32(1 / n)
    (w1, w2, w3), (b1, b2, b3) = weights, biases

    def step():
        mm(x, w1.T, out=h1); np.add(h1, b1, out=h1); np.maximum(h1, 0, out=h1)
        mm(h1, w2.T, out=h2); np.add(h2, b2, out=h2); np.maximum(h2, 0, out=h2)
        mm(h2, w3.T, out=z); np.add(z, b3, out=z)
        np.subtract(z, z.max(axis=1, keepdims=True), out=z)      # softmax - onehot, over n: d loss / d z
        np.exp(z, out=z)
        np.divide(z, z.sum(axis=1, keepdims=True), out=z)
        z[rows, y] -= 1
        np.multiply(z, inv_n, out=z)
        gw3, gb3 = mm(z.T, h2), ones @ z
        mm(z, w3, out=g2); np.greater(h2, 0, out=m2); np.multiply(g2, m2, out=g2)
        gw2, gb2 = mm(g2.T, h1), ones @ g2
        mm(g2, w2, out=g1); np.greater(h1, 0, out=m1); np.multiply(g1, m1, out=g1)
        gw1, gb1 = mm(g1.T, x), ones @ g1
        for p, g in ((w1, gw1), (w2, gw2), (w3, gw3)):
            axpy(p, neg_lr, g)
        for p, g in ((b1, gb1), (b2, gb2), (b3, gb3)):
            p += neg_lr * g
        return gw1, gb1, gw2, gb2, gw3, gb3
    return step


def _jax_step(x, y, sizes):
    """JAX's jit of the same step (its own weights), or None when JAX is not installed."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    rng = np.random.default_rng(1)
    params = [(jnp.asarray(rng.standard_normal((o, i)).astype(np.float32) * 0.05), jnp.zeros(o, jnp.float32))
              for i, o in zip(sizes[:-1], sizes[1:])]
    n = x.shape[0]

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w.T + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        return -jnp.mean(jax.nn.log_softmax(h)[jnp.arange(n), y])

    @jax.jit
    def update(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)

    jx, jy, state = jnp.asarray(x), jnp.asarray(y), {"params": params}

    def step():
        state["params"] = update(state["params"], jx, jy)
        jax.block_until_ready(state["params"])
    step.version = jax.__version__
    return step


def steps(scale="full"):
    """{name: step}: "floor", "compiled", "torch" and, where JAX is installed, "jax"."""
    import torch
    import autograd_gpu as ag
    n, sizes = _mlp_sizes(scale)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, sizes[0])).astype(np.float32)
    y = rng.integers(0, sizes[-1], n)
    tn = torch.nn
    tm = tn.Sequential(tn.Linear(sizes[0], sizes[1]), tn.ReLU(), tn.Linear(sizes[1], sizes[2]), tn.ReLU(),
                       tn.Linear(sizes[2], sizes[3]))
    lins = [m for m in tm if isinstance(m, tn.Linear)]
    floor = by_hand(x, y, [m.weight.detach().numpy().copy() for m in lins],
                    [m.bias.detach().numpy().copy() for m in lins])
    opt = torch.optim.SGD(tm.parameters(), lr=LR)
    tx, ty = torch.tensor(x), torch.tensor(y)

    def theirs():
        opt.zero_grad()
        tn.functional.cross_entropy(tm(tx), ty).backward()
        opt.step()
    grads = floor()                  # one step of each from the same weights: the same gradients
    theirs()
    for g, t in zip(grads, [p.grad for m in lins for p in (m.weight, m.bias)]):
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-4, atol=1e-6)
    eager, _ = mlp_step("cpu", scale)          # the benchmark's own step, compiled as its column is
    out = {"floor": floor, "compiled": ag.compile(eager["ours"]), "torch": theirs}
    jax_step = _jax_step(x, y, sizes)
    if jax_step is not None:
        out["jax"] = jax_step
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=600, help="timed steps of each, over 6 rounds")
    ap.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)      # for the test suite
    args = ap.parse_args(argv)
    if not mkl_blas.available():
        raise SystemExit("no MKL runtime: pip install mkl (the floor is measured with PyTorch's BLAS)")
    try:
        import torch
    except ImportError:
        raise SystemExit("needs PyTorch, the baseline: pip install torch") from None
    variants = steps("tiny" if args.tiny else "full")
    jax_note = f", JAX {variants['jax'].version}" if "jax" in variants else " (JAX not installed: no jax column)"
    print(f"PyTorch {torch.__version__}{jax_note}, {mkl_blas.describe()}")
    none = lambda: None        # noqa: E731  (the CPU: nothing to wait for)
    got = measure({k: (f, none) for k, f in variants.items()}, args.repeats, rounds=1 if args.tiny else 6,
                  block_warmup=0 if args.tiny else 0.25)
    t = got["torch"][0]
    labels = {"floor": "by hand (NumPy + MKL)", "compiled": "ag.compile", "torch": "PyTorch eager", "jax": "JAX jit"}
    for k, (med, lo, hi) in got.items():
        print(f"{labels[k]:>22}: {med * 1e3:.3f} ms [{lo * 1e3:.2f}-{hi * 1e3:.2f}], / PyTorch {med / t:.2f}")
    print(f"compiled / floor {got['compiled'][0] / got['floor'][0]:.2f}")
    return got


if __name__ == "__main__":
    main()
