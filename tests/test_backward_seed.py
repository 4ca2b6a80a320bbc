"""backward()'s cached seed (autograd/engine.py ``_seeds``): a real scalar loss on a GPU starts its backward
from one cached array of ones instead of a fill kernel per step. The cache must never change an answer:
nothing may keep it or write into it."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.autograd import engine

pytestmark = pytest.mark.gpu


def _cuda(device):
    if not device.startswith("cuda"):
        pytest.skip("the seed is cached on GPUs only (the CPU makes ones for free)")


def _grads(device, loss_of, steps=4):
    w = ag.tensor(np.arange(1.0, 4.0), device=device, requires_grad=True)
    out = []
    for _ in range(steps):
        w.grad = None
        loss_of(w).backward()
        out.append(w.grad.numpy().copy())
    return out


def test_one_seed_array_serves_every_step(device):
    _cuda(device)
    w = ag.tensor(np.arange(1.0, 4.0), device=device, requires_grad=True)
    (w * w).sum().backward()
    seeds = dict(engine._seeds)
    for _ in range(3):
        w.grad = None
        (w * w).sum().backward()
        np.testing.assert_allclose(w.grad.numpy(), 2 * np.arange(1.0, 4.0))
    assert engine._seeds == seeds and len(seeds) >= 1


def test_a_leaf_never_keeps_the_seed_as_its_grad(device):
    """A backward that hands the seed straight to a leaf (a cast to the same dtype returns its gradient's
    array): the leaf's .grad is a copy, so zeroing it in place leaves the next step's seed at one."""
    _cuda(device)
    x = ag.tensor(2.0, device=device, requires_grad=True)
    for _ in range(3):
        x.grad = None
        (x * 1.0).to(ag.float64).backward()          # the gradient reaching x: the seed's own array, or a copy
        assert float(x.grad) == 1.0
        x.grad.zero_()                                # in place: must not reach the cached seed
    y = ag.tensor(3.0, device=device, requires_grad=True)
    (y * 2.0).backward()
    assert float(y.grad) == 2.0


def test_a_hook_that_writes_its_gradient_in_place_cannot_poison_later_steps(device):
    _cuda(device)
    got = []
    for step in range(4):
        w = ag.tensor(np.arange(1.0, 4.0), device=device, requires_grad=True)
        loss = (w * w).sum()
        if step == 1:
            loss.register_hook(lambda g: g.mul_(3.0))       # against the advice, in place
        loss.backward()
        got.append(w.grad.numpy().copy())
    want = 2 * np.arange(1.0, 4.0)
    np.testing.assert_allclose(got[0], want)
    np.testing.assert_allclose(got[1], 3 * want)
    np.testing.assert_allclose(got[2], want)                   # the hooked step's seed was dropped
    np.testing.assert_allclose(got[3], want)


def test_retain_grad_on_the_loss_gets_a_copy(device):
    _cuda(device)
    for _ in range(3):
        w = ag.tensor(np.arange(1.0, 4.0), device=device, requires_grad=True)
        loss = (w * w).sum()
        loss.retain_grad()
        loss.backward()
        assert float(loss.grad) == 1.0
        loss.grad.add_(5.0)
        np.testing.assert_allclose(w.grad.numpy(), 2 * np.arange(1.0, 4.0))


def test_a_users_function_at_the_root_is_never_given_the_cached_seed(device):
    """A user's Function whose backward writes its gradient in place (bad practice, but its own array):
    later steps are unaffected."""
    _cuda(device)

    class Doubling(ag.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.sum()

        @staticmethod
        def backward(ctx, g):
            g.mul_(2.0)
            return g.expand(3)

    for want in _grads(device, lambda w: Doubling.apply(w)):
        np.testing.assert_allclose(want, [2.0, 2.0, 2.0])
    for want in _grads(device, lambda w: (w * 1.0).sum()):
        np.testing.assert_allclose(want, [1.0, 1.0, 1.0])


def test_seeds_by_dtype_and_shape(device):
    _cuda(device)
    for dt, shape in ((ag.float32, ()), (ag.float64, (1,)), (ag.float32, (1, 1))):
        w = ag.tensor(np.ones(shape), dtype=dt, device=device, requires_grad=True)
        for _ in range(2):
            w.grad = None
            (w * 4.0).backward()
            assert w.grad.dtype == dt and w.grad.shape == shape and float(w.grad.sum()) == 4.0


def test_a_compiled_step_never_takes_the_cached_seed(device):
    """ag.compile's trace takes the seed for an array of its program, which may update it in place: while a
    trace runs, backward() makes its seed as before (compiled and eager agree over several calls)."""
    _cuda(device)
    w = ag.tensor(np.linspace(-1.0, 1.0, 8), device=device, requires_grad=True)

    def step(x):
        w.grad = None
        (ag.tanh(x * w) * 3.0).sum().backward()
        return w.grad

    cstep = ag.compile(step)
    for k in range(4):
        x = ag.tensor(np.full(8, 0.5 + k), device=device)
        np.testing.assert_allclose(cstep(x).numpy(), step(x).numpy(), rtol=1e-6)
