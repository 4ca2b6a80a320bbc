"""The MLP step of `python -m benchmarks --only mlp_step` (784-512-512-10, ReLU, cross-entropy, batch 128,
SGD lr 0.01) written by hand as the least work NumPy and MKL can do, against PyTorch eager in the same
process: a floor for ag.compile's CPU replay, which runs the same kind of calls.

    pip install -e ".[mkl]" torch && python tools/mlp_floor.py [--repeats 600]

Every product goes to MKL into a buffer made once; bias and ReLU are done in place; cross-entropy is
five passes over the (128, 10) logits; the ReLU backward is one multiply by a mask; bias gradients are
``ones @ g``; SGD is MKL's axpy. Nothing is allocated in a step but the gradients it hands out. Timed
as the benchmarks time (benchmarks/timing.py: interleaved rounds, medians): prints both medians in ms,
their min-max, and the ratio."""
import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # the checkout: the package, benchmarks/
from autograd_gpu.backends import mkl_blas  # noqa: E402
from benchmarks.timing import measure  # noqa: E402

N, SIZES, LR = 128, (784, 512, 512, 10), 0.01


def by_hand(x, y, weights, biases):
    mm, axpy = mkl_blas.matmul, mkl_blas.axpy
    f32 = np.float32
    h1, h2, g1, g2 = (np.empty((N, SIZES[1]), f32) for _ in range(4))
    z = np.empty((N, SIZES[3]), f32)
    m1, m2 = np.empty((N, SIZES[1]), bool), np.empty((N, SIZES[2]), bool)
    ones, rows, neg_lr, inv_n = np.ones(N, f32), np.arange(N), f32(-LR), f32(1 / N)
    (w1, w2, w3), (b1, b2, b3) = weights, biases

    def step():
        mm(x, w1.T, out=h1); np.add(h1, b1, out=h1); np.maximum(h1, 0, out=h1)
        mm(h1, w2.T, out=h2); np.add(h2, b2, out=h2); np.maximum(h2, 0, out=h2)
        mm(h2, w3.T, out=z); np.add(z, b3, out=z)
        np.subtract(z, z.max(axis=1, keepdims=True), out=z)      # softmax - onehot, over N: d loss / d z
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=600, help="timed steps of each, over 6 rounds")
    args = ap.parse_args()
    if not mkl_blas.available():
        raise SystemExit("no MKL runtime: pip install mkl (the floor is measured with PyTorch's BLAS)")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], N)
    tm = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                             torch.nn.ReLU(), torch.nn.Linear(512, 10))
    lins = [m for m in tm if isinstance(m, torch.nn.Linear)]
    weights = [m.weight.detach().numpy().copy() for m in lins]
    biases = [m.bias.detach().numpy().copy() for m in lins]
    ours = by_hand(x, y, weights, biases)
    opt = torch.optim.SGD(tm.parameters(), lr=LR)
    tx, ty = torch.tensor(x), torch.tensor(y)

    def theirs():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(tm(tx), ty).backward()
        opt.step()
    grads = ours()                  # one step of each from the same weights: the same gradients
    theirs()
    for g, t in zip(grads, [p.grad for m in lins for p in (m.weight, m.bias)]):
        np.testing.assert_allclose(g, t.numpy(), rtol=1e-4, atol=1e-6)
    print(f"PyTorch {torch.__version__}, {mkl_blas.describe()}")
    none = lambda: None        # noqa: E731  (the CPU: nothing to wait for)
    got = measure({"by hand": (ours, none), "torch": (theirs, none)}, args.repeats, rounds=6)
    (a, a_lo, a_hi), (b, b_lo, b_hi) = got["by hand"], got["torch"]
    print(f"by hand (NumPy + MKL) {a * 1e3:.3f} ms [{a_lo * 1e3:.2f}-{a_hi * 1e3:.2f}], "
          f"torch eager {b * 1e3:.3f} ms [{b_lo * 1e3:.2f}-{b_hi * 1e3:.2f}], by hand / torch {a / b:.2f}")

if __name__ == "__main__":
    main()
