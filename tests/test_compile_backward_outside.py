"""ag.compile written the ways PyTorch and JAX users write it: outputs that still require grad get a
compiled backward (loss.backward() and ag.autograd.grad outside the compiled function), a compiled
module (ag.compile(model), model.compile()), `return loss, grads`, and inference without no_grad. Each
pattern gives eager's values and gradients, replays, and warns about nothing."""
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
import autograd_gpu.nn.functional as F
from autograd_gpu.testing.helpers import make_arrays, assert_close, to_numpy
from autograd_gpu.testing.op_db import OP_DB


def close(got, want, **tol):
    assert_close(ag.tensor(to_numpy(got)), to_numpy(want), **tol)


def _tol(dtype):
    d = ag.backends.dtype(dtype)
    return dict(rtol=1e-4, atol=1e-5) if d in (np.float32, np.complex64) else dict(rtol=1e-9, atol=1e-10)


def _loss(outs):
    total = None
    for k, o in enumerate(outs):
        if isinstance(o, ag.Tensor) and o.requires_grad:
            part = ((o.real + o.imag) if o.dtype.kind == "c" else o) * (k + 1.5)
            part = part.sum()
            total = part if total is None else total + part
    return total


# ------------------------------------------------------------------------------ the op table
_DIFF = [i for i in OP_DB if i.grad]


@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in _DIFF])
def test_op_table_backward_outside_gives_eager_gradients(info):
    """For every differentiable entry of the op table (its first dtype, every sample): the compiled op
    returns outputs that require grad, and a loss made of them outside, backward outside, gives eager's
    gradients, over three calls with new inputs."""
    dtype = info.dtypes[0]
    tol = _tol(dtype)

    def f(*ts):
        out = info.op(*ts)
        return out if isinstance(out, tuple) else (out,)

    for shapes in info.samples:
        cf = ag.compile(f)
        for seed in range(3):
            arrays = make_arrays(shapes, dtype, info.domain, info.avoid, seed=seed, kinds=info.kinds)
            ts, us = ([ag.tensor(a, requires_grad=a.dtype.kind in "fc") for a in arrays] for _ in range(2))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)      # an op that runs eagerly says so once
                got = cf(*ts)
            want = f(*us)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                if isinstance(w, ag.Tensor):
                    close(g, w, **tol)
                    assert g.requires_grad == w.requires_grad
            lw = _loss(want)
            if lw is None:
                continue
            _loss(got).backward()
            lw.backward()
            for t, u in zip(ts, us):
                assert (t.grad is None) == (u.grad is None), info.name
                if u.grad is not None:
                    close(t.grad, u.grad, **tol)
        assert sum(cf.stats.values()) - cf.stats["guard_failures"] >= 3


def test_most_of_the_op_table_replays_with_backward_outside():
    """The op table's differentiable entries do not just run eagerly: count those whose compiled function
    replays with outputs that require grad."""
    replayed = eager = 0
    for info in _DIFF:
        shapes = info.samples[0]
        cf = ag.compile(lambda *ts, op=info.op: op(*ts))
        for seed in range(2):
            arrays = make_arrays(shapes, info.dtypes[0], info.domain, info.avoid, seed=seed, kinds=info.kinds)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                cf(*[ag.tensor(a, requires_grad=a.dtype.kind in "fc") for a in arrays])
        replayed += cf.stats["replays"] > 0
        eager += cf.stats["eager"] > 0
    assert replayed >= 0.9 * len(_DIFF), (replayed, eager, len(_DIFF))


# ------------------------------------------------------------------------------ functions
def test_loss_backward_outside_accumulates_as_eager(device):
    ag.manual_seed(0)
    w = ag.randn(3, 2, device=device, requires_grad=True)
    we = ag.tensor(w.numpy(), device=device, requires_grad=True)

    def f(x, w):
        return (x @ w).tanh().sum()

    cf = ag.compile(f)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for i in range(4):
            x = ag.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=device)
            cf(x, w).backward()                 # no zero_grad: .grad accumulates over the calls
            f(x, we).backward()
            close(w.grad, we.grad, rtol=1e-5, atol=1e-6)
            # two calls in one loss: each call keeps its own residuals
            x2 = ag.tensor(rng.standard_normal((4, 3)).astype(np.float32), device=device)
            (cf(x, w) * 2 + cf(x2, w)).backward()
            (f(x, we) * 2 + f(x2, we)).backward()
            close(w.grad, we.grad, rtol=1e-5, atol=1e-6)
    assert cf.stats["replays"] >= 10 and cf.stats["eager"] == 0


def test_autograd_grad_outside_several_outputs_and_retain_graph():
    m = nn.Linear(3, 2)

    def two(x):
        h = m(x)
        return h.sum(), (h * h).mean(), h

    cf = ag.compile(two)
    for i in range(3):
        x = ag.randn(4, 3, requires_grad=True)
        a, b, h = cf(x)
        a2, b2, h2 = two(x)
        for t, u in ((a, a2), (b, b2), (h, h2)):
            close(t, u)
        got = ag.autograd.grad(a + 3 * b, [m.weight, x], retain_graph=True)
        want = ag.autograd.grad(a2 + 3 * b2, [m.weight, x], retain_graph=True)
        for g, w in zip(got, want):
            close(g, w, rtol=1e-5, atol=1e-6)
        got = ag.autograd.grad((h * h).sum(), [m.bias])       # again through the retained node, unused outputs
        want = ag.autograd.grad((h2 * h2).sum(), [m.bias])
        close(got[0], want[0], rtol=1e-5, atol=1e-6)
        assert m.weight.grad is None and x.grad is None       # grad() leaves .grad alone
        with pytest.raises(RuntimeError, match="already freed"):
            ag.autograd.grad(a, [x])                              # freed by the grad() without retain_graph
    assert cf.stats["replays"] == 2


def test_return_loss_and_grads_replays_without_warning():
    """JAX's value-and-grad habit: the gradients are computed inside, the loss is returned."""
    ag.manual_seed(0)
    m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 1))
    params = list(m.parameters())

    def value_and_grad(x, y):
        loss = ((m(x) - y) ** 2).mean()
        return loss, ag.autograd.grad(loss, params)

    cf = ag.compile(value_and_grad)
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for i in range(5):
            x = ag.tensor(rng.standard_normal((6, 5)).astype(np.float32))
            y = ag.tensor(rng.standard_normal((6, 1)).astype(np.float32))
            (l1, g1), (l2, g2) = value_and_grad(x, y), cf(x, y)
            assert float(l1) == pytest.approx(float(l2), rel=1e-6)
            for a, b in zip(g1, g2):
                close(b, a, rtol=1e-5, atol=1e-6)
    assert cf.stats == {"traces": 1, "replays": 4, "eager": 0, "guard_failures": 0}


def test_create_graph_outside_raises_then_runs_eagerly():
    w = ag.tensor([1.0, 2.0], requires_grad=True)
    cf = ag.compile(lambda x: (x * w).pow(3).sum())
    x = ag.tensor([0.5, 1.5])
    cf(x)
    loss = cf(x)
    with pytest.warns(RuntimeWarning, match="create_graph"), pytest.raises(RuntimeError, match="create_graph"):
        ag.autograd.grad(loss, [w], create_graph=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        loss = cf(x)                                   # eagerly now: second derivatives work
    (g,) = ag.autograd.grad(loss, [w], create_graph=True)
    g.sum().backward()
    want = 6 * (x.numpy() ** 3) * w.detach().numpy()       # d/dw sum(3 x^3 w^2) = 6 x^3 w
    close(w.grad, want, rtol=1e-5)


def test_parameter_hooks_run_outside_once_per_backward_and_module_backward_hooks_run_eagerly():
    m = nn.Linear(3, 2)
    seen, post = [], []
    m.weight.register_hook(lambda g: seen.append(to_numpy(g).copy()))
    m.bias.register_post_accumulate_grad_hook(lambda p: post.append(to_numpy(p.grad).copy()))
    cm = ag.compile(m)
    xs = [ag.randn(4, 3) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for x in xs:
            cm(x).sum().backward()
    assert len(seen) == 3 and len(post) == 3
    for x, g in zip(xs, seen):
        close(g, np.ones((4, 2), np.float32).T @ to_numpy(x))
    calls = []
    m.register_full_backward_hook(lambda mod, gi, go: calls.append(1))
    with pytest.warns(RuntimeWarning, match="backward hook"):
        cm(xs[0]).sum().backward()
    cm(xs[1]).sum().backward()
    assert len(calls) == 2                          # run eagerly: the hook runs on every backward


def test_inference_without_no_grad_compiles_and_reading_the_loss_costs_no_backward():
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    cm = ag.compile(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for i in range(4):
            x = ag.randn(5, 8)
            out = cm(x)
            close(out, model(x), rtol=1e-6, atol=1e-6)
            assert out.requires_grad
            float(out.sum())                          # read only: nothing runs the backward program
    assert cm.stats["replays"] == 3 and cm.stats["eager"] == 0
    assert all(p.grad is None for p in model.parameters())


# ------------------------------------------------------------------------------ modules trained outside
def _mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 3))


def _cnn():
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3), nn.ReLU(),
                         nn.Flatten(), nn.Linear(6 * 2 * 2, 3))


class _LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


class _TransformerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.enc(x).mean(axis=1))


_MODELS = {"mlp": (_mlp, (8, 6)), "cnn": (_cnn, (4, 1, 10, 10)), "lstm": (_LSTMNet, (4, 5, 4)),
           "transformer": (_TransformerNet, (4, 5, 8))}


def _train_outside(name, device, how, steps=20):
    make, shape = _MODELS[name]
    ag.manual_seed(3)
    m1 = make().to(device)
    ag.manual_seed(3)
    m2 = make().to(device)
    o1 = optim.SGD(m1.parameters(), lr=0.05, momentum=0.9)
    o2 = optim.SGD(m2.parameters(), lr=0.05, momentum=0.9)
    if how == "ag.compile":
        c2 = ag.compile(m2)
    else:
        c2 = m2
        m2.compile()
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for i in range(steps):
            x = ag.tensor(rng.standard_normal(shape).astype(np.float32), device=device)
            y = ag.tensor(rng.integers(0, 3, shape[0]), device=device)
            losses = []
            for m, o in ((m1, o1), (c2, o2)):
                o.zero_grad()
                loss = F.cross_entropy(m(x), y)
                loss.backward()
                o.step()
                losses.append(loss.item())
            assert losses[1] == pytest.approx(losses[0], rel=1e-4, abs=1e-5), i
    for (k, p1), (k2, p2) in zip(m1.named_parameters(), m2.named_parameters()):
        assert k == k2
        close(p2, p1, rtol=1e-4, atol=1e-5)
        close(p2.grad, p1.grad, rtol=1e-4, atol=1e-4)
    return c2


@pytest.mark.parametrize("name", list(_MODELS))
def test_compiled_module_trained_with_backward_outside_equals_eager(name):
    c2 = _train_outside(name, "cpu", "ag.compile")
    assert c2.stats["replays"] >= 18 and c2.stats["eager"] == 0, c2.stats


def test_compiled_mlp_trains_as_eager_on_every_device(device):
    c2 = _train_outside("mlp", device, "ag.compile")
    assert c2.stats["replays"] >= 18 and c2.stats["eager"] == 0, c2.stats


def test_model_compile_method_trains_as_eager(device):
    m = _train_outside("mlp", device, "method")
    assert isinstance(m, nn.Module) and m.forward.stats["replays"] >= 18


def test_compiled_module_wrapper_sees_through_to_the_module():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    cm = ag.compile(model)
    assert type(cm).__name__ == "CompiledModule" and cm._orig_mod is model
    assert [id(p) for p in cm.parameters()] == [id(p) for p in model.parameters()]
    assert list(cm.state_dict()) == list(model.state_dict())
    assert cm.eval() is cm and not model.training and not cm.training
    assert len(cm) == 3 and cm[0] is model[0]
    x = ag.randn(3, 4)
    h = cm.register_forward_hook(lambda mod, args, out: out * 2)     # on the module, seen by the wrapper
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(3):
            close(cm(x), model(x))
    assert cm.stats["replays"] == 2
    h.remove()
    close(cm(x), model(x))                      # the hook's removal retraces
    cm.train()
    assert model.training
    cm.new_attr = 3
    assert model.new_attr == 3
