"""The gradient a backward hands a compiled function's outputs (CompiledBackward's seeds): a non-contiguous
gradient, one of another dtype, and several outputs give eager's gradients, call after call, and the
caller's gradient array is never written."""
import numpy as np

import autograd_gpu as ag
from autograd_gpu.testing.helpers import assert_close, to_numpy


def _params(device):
    rng = np.random.default_rng(3)
    w = ag.tensor(rng.standard_normal((5, 4)).astype(np.float32), device=device, requires_grad=True)
    b = ag.tensor(rng.standard_normal(4).astype(np.float32), device=device, requires_grad=True)
    return w, b


def _grads(f, w, b, x, seed):
    w.grad = b.grad = None
    f(x, w, b).backward(seed)
    return to_numpy(w.grad), to_numpy(b.grad)


def test_one_output_seed_layouts_and_dtypes(device):
    w, b = _params(device)

    def f(x, w, b):
        return (x @ w + b).relu() * 2.0

    cf = ag.compile(f)
    rng = np.random.default_rng(4)
    for call in range(3):
        x = ag.tensor(rng.standard_normal((6, 5)).astype(np.float32), device=device)
        base = rng.standard_normal((4, 6)).astype(np.float32)
        seeds = [ag.tensor(base, device=device).T,                       # a transposed view: not contiguous
                 ag.tensor(base.T.astype(np.float64), device=device),    # another dtype than the output
                 ag.tensor(np.ascontiguousarray(base.T), device=device)]
        for seed in seeds:
            before = to_numpy(seed).copy()
            got = _grads(cf, w, b, x, seed)
            # eager's reference gets the seed as float32 (eager CUDA does not cast a root gradient of
            # another dtype yet: its kernels then see mixed dtypes); the compiled backward casts it
            want = _grads(f, w, b, x, ag.tensor(before.astype(np.float32), device=device))
            for g, e in zip(got, want):
                assert g.dtype == np.float32
                assert_close(ag.tensor(g), e, rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(to_numpy(seed), before)
    assert cf.stats["replays"] >= 6 and cf.stats["eager"] == 0


def test_two_outputs_seeds(device):
    w, b = _params(device)

    def f(x, w, b):
        h = x @ w
        return h + b, (h * h).sum(1)

    cf = ag.compile(f)
    rng = np.random.default_rng(5)
    for call in range(3):
        x = ag.tensor(rng.standard_normal((6, 5)).astype(np.float32), device=device)
        g1 = ag.tensor(rng.standard_normal((4, 6)).astype(np.float32), device=device).T
        g2 = ag.tensor(rng.standard_normal(6), device=device)            # float64 for a float32 output
        res = []
        for fn, seeds in ((cf, [g1, g2]), (f, [g1, ag.tensor(to_numpy(g2).astype(np.float32), device=device)])):
            w.grad = b.grad = None
            a, c = fn(x, w, b)
            ag.autograd.backward([a, c], seeds)
            res.append((to_numpy(w.grad), to_numpy(b.grad)))
        for g, e in zip(*res):
            assert_close(ag.tensor(g), e, rtol=1e-4, atol=1e-4)
    assert cf.stats["eager"] == 0
