"""Each backward written once (issue 23): the ops whose backward is a backward op called through Function.of
(Mul, Sum, linear and its relu form, the losses, layer and RMS norm, attention, the recurrent layers'
RecurrenceBackward) give the same gradients whether nothing records (the fused kernels on arrays) or
create_graph records them (one node each, differentiable again), equal to the composed ops they replace in
first and second derivatives, on both devices; a gradient not wanted stays None; vmap of a batched gradient
goes through the backward ops' rules."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu.autograd import gradgradcheck
from autograd_gpu.ops.nn.linear import _linear_relu

RNG = np.random.default_rng(0)


def _arrays(*shapes):
    return [RNG.standard_normal(s) for s in shapes]


def _derivatives(fn, arrays, device):
    """(gradients with nothing recorded, the same under create_graph, second derivatives) of
    sum(fn(*inputs) ** 3) and of the sum of the first gradients' cubes."""
    ts = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    y = fn(*ts)
    plain = ag.autograd.grad((y * y * y).sum(), ts)
    ts = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    y = fn(*ts)
    first = ag.autograd.grad((y * y * y).sum(), ts, create_graph=True)
    s = first[0] * first[0] * first[0]
    total = s.sum()
    for g in first[1:]:
        total = total + (g * g * g).sum()
    second = ag.autograd.grad(total, ts)
    return [[g.numpy() for g in gs] for gs in (plain, first, second)]


def _check(fused, composed, arrays, device):
    got, want = _derivatives(fused, arrays, device), _derivatives(composed, arrays, device)
    for u, v in zip(got[0], got[1]):        # the two paths of Function.of agree
        np.testing.assert_allclose(u, v, rtol=1e-10, atol=1e-10)
    for gs, ws in zip(got, want):
        for u, v in zip(gs, ws):
            assert u.shape == v.shape
            np.testing.assert_allclose(u, v, rtol=1e-8, atol=1e-8)


def _composed_linear(x, w, b=None):
    y = ag.matmul(x, w.mT)
    return y if b is None else y + b


def _composed_layer_norm(x, w, b, axes):
    xc = x - x.mean(axes, keepdims=True)
    y = xc * ag.rsqrt((xc * xc).mean(axes, keepdims=True) + 1e-5)
    return y * w + b


def _composed_rms_norm(x, w, axes):
    return x * ag.rsqrt((x * x).mean(axes, keepdims=True) + 1e-5) * w


@pytest.mark.gpu
@pytest.mark.parametrize("xshape", [(4, 3), (2, 4, 3), (1, 3)])
def test_linear_and_linear_relu(device, xshape):
    arrays = _arrays(xshape, (5, 3), (5,))
    _check(F.linear, _composed_linear, arrays, device)
    _check(_linear_relu, lambda x, w, b: ag.relu(_composed_linear(x, w, b)), arrays, device)
    _check(lambda x, w: F.linear(x, w), _composed_linear, arrays[:2], device)


@pytest.mark.gpu
@pytest.mark.parametrize("shape, ns", [((4, 6), (6,)), ((2, 3, 4), (3, 4)), ((1, 5), (5,))])
def test_layer_norm_and_rms_norm(device, shape, ns):
    axes = tuple(range(len(shape) - len(ns), len(shape)))
    arrays = _arrays(shape, ns, ns)
    _check(lambda x, w, b: F.layer_norm(x, ns, w, b), lambda x, w, b: _composed_layer_norm(x, w, b, axes),
           arrays, device)
    _check(lambda x: F.layer_norm(x, ns), lambda x: _composed_layer_norm(x, 1.0, 0.0, axes), arrays[:1], device)
    _check(lambda x, w: F.rms_norm(x, ns, w, eps=1e-5), lambda x, w: _composed_rms_norm(x, w, axes), arrays[:2],
           device)
    _check(lambda x: F.rms_norm(x, ns, eps=1e-5), lambda x: _composed_rms_norm(x, 1.0, axes), arrays[:1], device)


@pytest.mark.gpu
@pytest.mark.parametrize("masked", [False, True])
def test_attention(device, masked):
    arrays = _arrays((2, 3, 5, 4), (2, 1, 6, 4), (2, 3, 6, 3), (5, 6))     # k broadcast over the heads

    def fused(q, k, v, m=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    def composed(q, k, v, m=None):
        s = ag.matmul(q, k.mT) * 0.5
        return ag.matmul(F.softmax(s if m is None else s + m, -1), v)
    _check(fused, composed, arrays if masked else arrays[:3], device)


@pytest.mark.gpu
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(device, reduction):
    x, = _arrays((5, 4))
    t = ag.tensor(np.array([0, 3, 1, 2, 2]), device=device)
    t_ignored = ag.tensor(np.array([0, 3, -100, 2, 2]), device=device)
    weight = ag.tensor([0.5, 1.0, 2.0, 1.5], device=device, dtype="float64")

    def composed(x, t, w=None, ignore=None):
        keep = np.arange(4) == t.numpy()[:, None]
        if ignore is not None:
            keep &= (t.numpy() != ignore)[:, None]
        coef = ag.tensor(keep.astype(np.float64), device=device)
        if w is not None:
            coef = coef * w
        losses = -(F.log_softmax(x, 1) * coef).sum(1)
        if reduction == "none":
            return losses
        return losses.sum() if reduction == "sum" else losses.sum() / coef.sum()
    _check(lambda x: F.cross_entropy(x, t, reduction=reduction), lambda x: composed(x, t), [x], device)   # CrossEntropy
    _check(lambda x: F.cross_entropy(x, t_ignored, reduction=reduction),
           lambda x: composed(x, t_ignored, ignore=-100), [x], device)
    _check(lambda x: F.nll_loss(F.log_softmax(x, 1), t, reduction=reduction), lambda x: composed(x, t), [x],
           device)                                                                                       # FusedNllLoss
    _check(lambda x: F.nll_loss(F.log_softmax(x, 1), t, weight=weight, reduction=reduction),
           lambda x: composed(x, t, weight), [x], device)                                               # NllLoss


@pytest.mark.gpu
def test_mul_and_sum(device):
    a, b = (ag.tensor(v, device=device, requires_grad=True) for v in _arrays((3, 4), (3, 4)))
    assert gradgradcheck(lambda a, b: a * b, (a, b))
    assert gradgradcheck(lambda a: a.sum(1), (a,))
    assert gradgradcheck(lambda a: a.sum((0, 1), keepdims=True), (a,))
    pos = [np.abs(v) + 0.5 for v in _arrays((3, 4), (3, 4))]
    _check(lambda a, b: a * b, lambda a, b: ag.exp(ag.log(a) + ag.log(b)), pos, device)
    ones = ag.ones(4, 1, device=device, dtype="float64")
    _check(lambda a: a.sum(1), lambda a: ag.matmul(a, ones).reshape(3), pos[:1], device)


@pytest.mark.gpu
def test_sum_gradient_is_a_writable_leaf_grad(device):
    # SumBackward's gradient is a broadcast view of the incoming one: the leaf's .grad must be its own array
    x = ag.tensor(np.ones((3, 4)), device=device, requires_grad=True)
    x.sum(1).sum().backward()
    x.grad += 1.0
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 2.0))
    x.sum(0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((3, 4), 3.0))


@pytest.mark.gpu
def test_a_gradient_not_wanted_stays_none(device):
    x = ag.tensor(RNG.standard_normal((4, 3)), device=device)                   # no gradient wanted for x
    w = ag.tensor(RNG.standard_normal((5, 3)), device=device, requires_grad=True)
    y = F.linear(x, w)
    gw, = ag.autograd.grad((y * y).sum(), (w,), create_graph=True)
    node = gw.grad_fn
    assert type(node).__name__ == "LinearBackward" and node._n_out == 3
    (hw,) = ag.autograd.grad((gw * gw).sum(), (w,))
    xtx = x.numpy().T @ x.numpy()
    want = 8 * w.numpy() @ xtx @ xtx             # gw = 2 (x w^T)^T x = 2 w x^T x: d/dw sum(gw^2) = 8 w (x^T x)^2
    np.testing.assert_allclose(hw.numpy(), want, rtol=1e-10)


@pytest.mark.gpu
def test_vmap_of_a_batched_gradient(device):
    x = ag.tensor(RNG.standard_normal((3, 4)), device=device, requires_grad=True)
    w = ag.tensor(RNG.standard_normal((2, 4)), device=device)
    t = ag.tensor(np.array([0, 3, 1]), device=device)
    cases = [(lambda x: F.linear(x, w), lambda x: _composed_linear(x, w)),
             (lambda x: F.layer_norm(x, (4,)), lambda x: _composed_layer_norm(x, 1.0, 0.0, (1,))),
             (lambda x: F.cross_entropy(x, t, reduction="none"),
              lambda x: -(F.log_softmax(x, 1) * ag.tensor((np.arange(4) == t.numpy()[:, None]).astype(np.float64),
                                                          device=device)).sum(1)),
             (lambda x: F.rms_norm(x, (4,), eps=1e-5), lambda x: _composed_rms_norm(x, 1.0, (1,))),
             (lambda x: F.scaled_dot_product_attention(x, x, x),
              lambda x: ag.matmul(F.softmax(ag.matmul(x, x.mT) * 0.5, -1), x)),
             (lambda x: x * x, lambda x: x ** 2),
             (lambda x: x.sum(1), lambda x: ag.matmul(x, ag.ones(4, 1, device=device, dtype="float64")).reshape(3))]
    for fused, composed in cases:
        np.testing.assert_allclose(ag.func.jacrev(fused)(x).numpy(), ag.func.jacrev(composed)(x).numpy(),
                                   rtol=1e-10, atol=1e-12)


# --- the recurrent layers: _Recurrence's backward is RecurrenceBackward through Function.of ---------------------
def _recurrence(mode, reverse=False, use=("out", "h", "c")):
    """fn(x, h0, [c0,] w_ih, w_hh, b_ih, b_hh) -> one tensor of the used results, through the fused node."""
    from autograd_gpu.nn.layers.rnn import _Recurrence
    lstm, gru = mode == "LSTM", mode == "GRU"

    def fn(x, h0, *rest):
        c0, (w_ih, w_hh, b_ih, b_hh) = (rest[0], rest[1:]) if lstm else (None, rest)
        gx = ag.matmul(x, w_ih.mT) + (b_ih if gru else b_ih + b_hh)
        res = _Recurrence.apply(mode, gx, h0, c0, w_hh, b_hh if gru else None, reverse)
        got = {"out": res[0], "h": res[1], "c": res[2] if lstm else None}
        return ag.cat([got[k].reshape(-1) for k in use if got[k] is not None])
    return fn


def _composed_recurrence(mode, reverse=False, use=("out", "h", "c")):
    """The same in plain Tensor ops, one step at a time (PyTorch's equations)."""
    lstm = mode == "LSTM"

    def fn(x, h0, *rest):
        c, (w_ih, w_hh, b_ih, b_hh) = (rest[0], rest[1:]) if lstm else (None, rest)
        h, H, seq = h0, h0.shape[-1], [None] * x.shape[0]
        for t in (range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])):
            gi, gh = ag.matmul(x[t], w_ih.mT) + b_ih, ag.matmul(h, w_hh.mT) + b_hh
            if lstm:
                a = gi + gh
                c = a[:, H:2 * H].sigmoid() * c + a[:, :H].sigmoid() * a[:, 2 * H:3 * H].tanh()
                h = a[:, 3 * H:].sigmoid() * c.tanh()
            elif mode == "GRU":
                r, z = (gi[:, :H] + gh[:, :H]).sigmoid(), (gi[:, H:2 * H] + gh[:, H:2 * H]).sigmoid()
                n = (gi[:, 2 * H:] + r * gh[:, 2 * H:]).tanh()
                h = (1 - z) * n + z * h
            else:
                h = (gi + gh).tanh() if mode == "RNN_TANH" else (gi + gh).relu()
            seq[t] = h
        got = {"out": ag.stack(seq), "h": h, "c": c}
        return ag.cat([got[k].reshape(-1) for k in use if got[k] is not None])
    return fn


def _recurrence_arrays(mode, T=3, B=2, F_in=3, H=2):
    g = {"LSTM": 4, "GRU": 3}.get(mode, 1) * H
    shapes = [(T, B, F_in), (B, H)] + ([(B, H)] if mode == "LSTM" else []) + [(g, F_in), (g, H), (g,), (g,)]
    arrays = [0.5 * a for a in _arrays(*shapes)]
    if mode == "RNN_RELU":
        arrays[0] = np.abs(arrays[0]) + 0.1         # keep the pre-activations off relu's kink at 0
    return arrays


MODES = ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("reverse, use", [(False, ("out", "h", "c")), (True, ("out",)), (False, ("h",)),
                                          (True, ("h", "c"))])
def test_recurrence(device, mode, reverse, use):
    # the first derivative with nothing recorded (fused steps on arrays) equals the recorded one, and both and
    # the second derivative equal the composed step ops'; ("h",): no output gradient (dout made zero)
    _check(_recurrence(mode, reverse, use), _composed_recurrence(mode, reverse, use), _recurrence_arrays(mode),
           device)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_recurrence_gradgradcheck_and_its_one_backward_node(device, mode):
    arrays = _recurrence_arrays(mode, T=2, B=2, F_in=2, H=2)
    ts = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    assert gradgradcheck(_recurrence(mode, reverse=True), ts)
    assert gradgradcheck(_recurrence(mode, use=("h",)), ts)
    # create_graph: w_hh's gradient is one RecurrenceBackward node's output; only w_hh needs one here, so
    # the node's other gradients are None, and the second derivative still equals the composed ops'
    ts = [ag.tensor(a, device=device, requires_grad=(i == len(arrays) - 3)) for i, a in enumerate(arrays)]
    w_hh = ts[-3]
    wants = []
    for fn in (_recurrence(mode), _composed_recurrence(mode)):
        y = fn(*ts)
        gw, = ag.autograd.grad((y * y).sum(), (w_hh,), create_graph=True)
        if fn.__qualname__.startswith("_recurrence"):
            node = gw.grad_fn
            assert type(node).__name__ == "RecurrenceBackward" and node._n_out == 5
            assert [m is None for m in node._out_meta] == [True, True, True, False, True]
        wants.append(ag.autograd.grad((gw * gw).sum(), (w_hh,))[0].numpy())
    np.testing.assert_allclose(wants[0], wants[1], rtol=1e-10, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_recurrence_third_derivative(device, mode):
    # the second derivative is itself recorded (RecurrenceBackward's backward under create_graph): a third
    # derivative equals the composed ops'
    arrays = _recurrence_arrays(mode, T=2, B=1, F_in=2, H=2)

    def third(fn):
        ts = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
        y = fn(*ts)
        g1 = ag.autograd.grad((y * y * y).sum(), ts, create_graph=True)
        s1 = g1[0] * g1[0] * g1[0]
        total = s1.sum() + sum((g * g * g).sum() for g in g1[1:])
        g2 = ag.autograd.grad(total, ts, create_graph=True)
        total2 = (g2[0] * g2[0]).sum() + sum((g * g).sum() for g in g2[1:])
        return [g.numpy() for g in ag.autograd.grad(total2, ts)]
    for u, v in zip(third(_recurrence(mode)), third(_composed_recurrence(mode))):
        np.testing.assert_allclose(u, v, rtol=1e-8, atol=1e-9)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
def test_vmap_of_a_recurrence_gradient(device, mode):
    # jacrev: one batched backward, RecurrenceBackward's rule (a loop over the vmapped cotangents)
    arrays = _recurrence_arrays(mode, T=2, B=2, F_in=2, H=2)
    ts = [ag.tensor(a, device=device) for a in arrays]

    def of_x(fn):
        return lambda x: fn(x, *ts[1:])
    x = ag.tensor(arrays[0], device=device, requires_grad=True)
    np.testing.assert_allclose(ag.func.jacrev(of_x(_recurrence(mode)))(x).numpy(),
                               ag.func.jacrev(of_x(_composed_recurrence(mode)))(x).numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_compiled_step_of_a_recurrence_read_at_h_n_only_equals_eager(device, kind):
    # the output's gradient is then made (one zero fill) inside backward: ag.compile records and replays it
    from autograd_gpu import nn, optim

    def make():
        ag.manual_seed(0)
        return getattr(nn, kind)(3, 4, num_layers=2).to(device), nn.Linear(4, 2).to(device)
    models = [make(), make()]
    params = [list(r.parameters()) + list(lin.parameters()) for r, lin in models]
    opts = [optim.SGD(ps, lr=0.1) for ps in params]

    def step(k, x, y):
        (rnn, lin), o = models[k], opts[k]
        o.zero_grad()
        h = rnn(x)[1]
        loss = F.cross_entropy(lin((h[0] if isinstance(h, tuple) else h)[-1]), y)
        loss.backward()
        o.step()
        return loss
    compiled = ag.compile(lambda x, y: step(1, x, y))
    rng = np.random.default_rng(0)
    for _ in range(5):
        x = ag.tensor(rng.standard_normal((5, 3, 3)).astype(np.float32), device=device)
        y = ag.tensor(rng.integers(0, 2, 3), device=device)
        np.testing.assert_allclose(compiled(x, y).cpu().numpy(), step(0, x, y).cpu().numpy(), rtol=1e-4, atol=1e-5)
    assert compiled.stats["replays"] >= 3
    for p, q in zip(*params):
        np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().cpu().numpy(), rtol=1e-4, atol=1e-5)
