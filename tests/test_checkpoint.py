"""ag.utils.checkpoint: the same gradients as the plain call, random ops replayed, the memory it saves."""
import functools
import tracemalloc

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu.utils import checkpoint


def _randn(device, *shape, seed=0, requires_grad=True):
    a = np.random.default_rng(seed).standard_normal(shape)
    return ag.tensor(a, dtype=ag.float64, device=device, requires_grad=requires_grad)


def _block(x, scale, w):
    """Two outputs, a non-tensor argument."""
    return (x @ w).tanh() * scale, x.sin()


def test_same_gradients_as_the_plain_call_and_gradcheck(device):
    x, w = _randn(device, 4, 5), _randn(device, 5, 5, seed=1)

    def loss(use):
        a, b = checkpoint(_block, x, 2.0, w) if use else _block(x, 2.0, w)
        return (a * b).sum()
    got = ag.autograd.grad(loss(True), [x, w])
    want = ag.autograd.grad(loss(False), [x, w])
    for g, h in zip(got, want):
        np.testing.assert_allclose(g.numpy(), h.numpy(), rtol=1e-12)
    assert ag.autograd.gradcheck(lambda a, b: checkpoint(_block, a, 1.5, b)[0], (x, w))


def test_inputs_without_grad_closed_over_parameters_and_modules(device):
    x = _randn(device, 3, 4, requires_grad=False)
    lin = ag.nn.Linear(4, 2).to(device=device, dtype=ag.float64)
    checkpoint(lin, x).sum().backward()                      # a Module: its parameters get gradients
    want = x.numpy().sum(0)
    np.testing.assert_allclose(lin.weight.grad.numpy(), np.stack([want, want]))
    w = _randn(device, 4, 4, seed=2)
    y = checkpoint(lambda t: (t @ w).exp(), x)               # a closure over w
    g, = ag.autograd.grad(y.sum(), [w])
    np.testing.assert_allclose(g.numpy(), x.numpy().T @ np.exp(x.numpy() @ w.numpy()))
    part = functools.partial(lambda t, m: t @ m, m=w)         # a partial over w
    g, = ag.autograd.grad(checkpoint(part, x).sum(), [w])
    np.testing.assert_allclose(g.numpy(), x.numpy().T @ np.ones((3, 4)))
    with ag.no_grad():                                       # nothing recorded: a plain call
        assert not checkpoint(lambda t: t * 2, _randn(device, 2)).requires_grad


def test_dropout_inside_replays_the_same_mask(device):
    x = _randn(device, 64, 32)
    ag.manual_seed(3)
    y = checkpoint(lambda t: F.dropout(t, 0.5, training=True) * 3, x)
    g, = ag.autograd.grad(y.sum(), [x])
    kept = y.numpy() != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_array_equal(g.numpy() != 0, kept)      # the recomputation dropped the same elements
    np.testing.assert_allclose(g.numpy()[kept], 6.0)
    # ...and the stream goes on as if the recomputation had not drawn: same as a run without checkpoint
    ag.manual_seed(3)
    F.dropout(x, 0.5, training=True)
    a = ag.rand(5, device=device)
    ag.manual_seed(3)
    y = checkpoint(lambda t: F.dropout(t, 0.5, training=True), x)
    ag.autograd.grad(y.sum(), [x])
    if device == "cpu":
        np.testing.assert_array_equal(ag.rand(5, device=device).numpy(), a.numpy())


def test_nested_checkpoints_and_create_graph(device):
    x = _randn(device, 5)
    inner = lambda u: checkpoint(lambda v: v.exp(), u).sin()
    g, = ag.autograd.grad(checkpoint(inner, x).sum(), [x])
    a = x.numpy()
    np.testing.assert_allclose(g.numpy(), np.cos(np.exp(a)) * np.exp(a))
    g, = ag.autograd.grad(checkpoint(lambda t: (t ** 3).sum(), x), [x], create_graph=True)
    h, = ag.autograd.grad(g.sum(), [x])
    np.testing.assert_allclose(h.numpy(), 6 * a)
    assert ag.autograd.gradgradcheck(lambda t: checkpoint(lambda u: u.tanh() * u, t), (x,))


def test_errors(device):
    with pytest.raises(TypeError, match="expected a function"):
        checkpoint(3, _randn(device, 2))
    with pytest.raises(TypeError, match="must return a Tensor"):
        checkpoint(lambda t: "no", _randn(device, 2))


def test_checkpointing_each_layer_of_a_deep_mlp_cuts_peak_memory():
    """50 residual layers: the plain run keeps ~5 activations per layer, the checkpointed one 1."""
    rng = np.random.default_rng(0)
    ws = [ag.tensor(rng.standard_normal((32, 32)) * 0.1, dtype=ag.float32, requires_grad=True) for _ in range(50)]
    x = ag.tensor(rng.standard_normal((256, 32)), dtype=ag.float32, requires_grad=True)

    def layer(h, w):
        return F.linear(F.silu(F.linear(h, w)), w).tanh() + h

    def peak(ck):
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        h = x
        for w in ws:
            h = checkpoint(layer, h, w) if ck else layer(h, w)
        grads = ag.autograd.grad(h.square().mean(), [x] + ws)
        top = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        return top, grads

    plain, g_plain = peak(False)
    ck, g_ck = peak(True)
    for a, b in zip(g_plain, g_ck):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-7)
    assert ck <= plain / 3, f"checkpointed peak {ck / 1e6:.2f} MB vs plain {plain / 1e6:.2f} MB"
