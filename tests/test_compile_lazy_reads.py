"""ag.compile's outputs that require grad but are only read (``loss.item()``, inference without no_grad):
after two such calls (and as long as no backward ever ran through them) the replay runs the forward
program without residuals, so a read costs what the no_grad call costs. A backward that then reaches
such an output recomputes the residuals from that call's input arrays: the gradients, the errors and the
warnings are eager's."""
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn
import autograd_gpu.nn.functional as F
from autograd_gpu.testing.helpers import to_numpy


def _model():
    ag.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def _aot(cf):
    (entry,) = [e for e in cf._cache.values() if getattr(e, "aot", None) is not None]
    return entry.aot


def _grads(model):
    return [to_numpy(p.grad) for p in model.parameters()]


def _eager_grads(model, x, y):
    for p in model.parameters():
        p.grad = None
    F.cross_entropy(model(x), y).backward()
    g = _grads(model)
    for p in model.parameters():
        p.grad = None
    return g


def test_reads_then_a_backward_give_eager_gradients_without_warnings(device):
    model = _model().to(device)
    cm = ag.compile(model)
    rng = np.random.default_rng(0)
    xs = [ag.tensor(rng.standard_normal((5, 6)).astype(np.float32), device=device) for _ in range(6)]
    y = ag.tensor(np.array([0, 1, 2, 1, 0]), device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for x in xs[:4]:                              # read only
            loss = F.cross_entropy(cm(x), y)
            assert abs(loss.item() - F.cross_entropy(model(x), y).item()) < 1e-5
            assert loss.requires_grad
        aot = _aot(cm._compiled)
        lazy = aot.lazy is not None
        assert lazy == (ag.device(device).type == "cpu")     # CUDA programs keep their residuals
        assert aot.backwards == 0
        want = _eager_grads(model, xs[4], y)
        F.cross_entropy(cm(xs[4]), y).backward()      # through a node made without residuals
        for g, w in zip(_grads(model), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        assert aot.backwards == 1 and not aot.use_lazy()      # a backward was seen: residuals from now on
        for p in model.parameters():
            p.grad = None
        want = _eager_grads(model, xs[5], y)
        F.cross_entropy(cm(xs[5]), y).backward()
        for g, w in zip(_grads(model), want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    assert cm.stats["eager"] == 0 and cm.stats["traces"] == 1


def test_a_lazy_node_keeps_its_own_inputs_and_retain_graph_works():
    model = _model()
    cm = ag.compile(model)
    rng = np.random.default_rng(1)
    x1, x2, x3, x4 = (ag.tensor(rng.standard_normal((4, 6)).astype(np.float32)) for _ in range(4))
    for x in (x1, x2):
        cm(x).sum().item()
    a = cm(x3)                                        # two lazy nodes alive at once
    b = cm(x4)
    assert _aot(cm._compiled).backwards == 0
    loss = (a * 2).sum() + b.sum()
    loss.backward(retain_graph=True)
    g1 = _grads(model)
    for p in model.parameters():
        p.grad = None
    want = ((model(x3) * 2).sum() + model(x4).sum())
    want.backward()
    for g, w in zip(g1, _grads(model)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    for p in model.parameters():
        p.grad = None
    loss.backward()                                   # retained: the same gradients again
    for g, w in zip(_grads(model), g1):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    with pytest.raises(RuntimeError, match="already freed"):
        loss.backward()


def test_autograd_grad_through_a_lazy_node():
    model = _model()
    cm = ag.compile(model)
    x = ag.randn(3, 6)
    for _ in range(3):
        cm(x).sum().item()
    params = list(model.parameters())
    got = ag.autograd.grad(cm(x).pow(2).sum(), params)
    want = ag.autograd.grad(model(x).pow(2).sum(), params)
    for g, w in zip(got, want):
        np.testing.assert_allclose(to_numpy(g), to_numpy(w), rtol=1e-5, atol=1e-6)
    assert all(p.grad is None for p in params)


def test_in_place_write_after_a_lazy_call_raises_as_eager():
    model = _model()
    cm = ag.compile(model)
    x = ag.randn(3, 6)
    for _ in range(3):
        cm(x).sum().item()
    w = model[0].weight
    out = cm(x)
    eager = model(x)
    with ag.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        eager.sum().backward()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        out.sum().backward()


def test_random_forward_keeps_its_residuals():
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.5), nn.Linear(16, 3))
    cm = ag.compile(model)
    x = ag.randn(4, 6)
    for _ in range(4):
        cm(x).sum().item()
    aot = _aot(cm._compiled)
    assert aot.lazy is None and not aot.use_lazy()        # recomputing would draw other numbers
    ag.manual_seed(5)
    cm(x).sum().backward()
    got = _grads(model)
    for p in model.parameters():
        p.grad = None
    ag.manual_seed(5)
    model(x).sum().backward()
    for g, w in zip(got, _grads(model)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_state_writing_forward_keeps_its_residuals():
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.Linear(8, 3))    # running stats written
    cm = ag.compile(model)
    x = ag.randn(5, 6)
    for _ in range(4):
        cm(x).sum().item()
    assert _aot(cm._compiled).lazy is None


def test_grad_mode_keys_its_own_signature():
    """A no_grad call never reaches a compiled backward: it is traced on its own, without residuals."""
    model = _model()
    cm = ag.compile(model)
    x = ag.randn(3, 6)
    cm(x).sum().backward()
    with ag.no_grad():
        out = cm(x)
    assert not out.requires_grad and out.grad_fn is None
    entries = list(cm._compiled._cache.values())
    assert len(entries) == 2 and sum(e.aot is not None for e in entries) == 1


def test_a_read_allocates_what_a_no_grad_call_allocates():
    """The read-only habit's replay runs the residual-free program: it allocates no more than the no_grad
    replay (the measured cost: benchmarks/compile_read.py)."""
    import tracemalloc
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4))
    cm = ag.compile(model)
    x = ag.randn(128, 64)

    def read():
        return cm(x).sum().item()

    def read_no_grad():
        with ag.no_grad():
            return cm(x).sum().item()

    def peak(f):
        for _ in range(4):
            f()
        tracemalloc.start()
        f()
        _, p = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return p

    assert peak(read) <= peak(read_no_grad) + 16 * 1024      # no 128x256 residual (128 KiB each)


def test_two_outputs_of_a_lazy_node_one_used():
    ag.manual_seed(0)
    w = ag.randn(6, 4, requires_grad=True)

    @ag.compile
    def f(x):
        h = x @ w
        return h.tanh(), (h * h).sum(dim=1)

    x = ag.randn(3, 6)
    for _ in range(3):
        a, b = f(x)
        float(b.sum())
    a, b = f(x)                                       # made by the residual-free program
    assert _aot(f).lazy is not None and _aot(f).backwards == 0
    (b * 3).sum().backward()                           # a's gradient is zeros
    got = to_numpy(w.grad)
    w.grad = None
    h = x @ w
    ((h * h).sum(dim=1) * 3).sum().backward()
    np.testing.assert_allclose(got, to_numpy(w.grad), rtol=1e-5, atol=1e-6)
