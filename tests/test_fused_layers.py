"""The fused layer kernels (backends/kernels/norms.py and activations.py: layer norm, linear's bias + ReLU and
bias gradient, the activation backwards, attention's scale + mask + softmax) equal the unfused ops they
replace: values and gradients, float32 and float64, both devices, odd shapes (empty, one row,
non-contiguous). The op table (tests/test_ops.py) checks gradcheck and gradgradcheck of the same ops;
here the fused path is compared with the composed ops, and create_graph=True with the recorded backward."""
import math

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu.ops.nn.linear import _linear_relu
from autograd_gpu.testing.helpers import assert_close

TOL = {"float32": dict(rtol=2e-5, atol=2e-5), "float64": dict(rtol=1e-10, atol=1e-12)}
DTYPES = ["float32", "float64"]


def _leaf(a, device, layout="contiguous"):
    """A leaf holding ``a`` and the tensor a test computes with: ``a`` itself, or the same values as a
    non-contiguous view (transposed storage, or every other column of a wider array)."""
    if layout == "transposed":
        leaf = ag.tensor(np.ascontiguousarray(np.swapaxes(a, -1, -2)), device=device, requires_grad=True)
        return leaf, leaf.swapaxes(-1, -2)
    if layout == "strided":
        wide = np.repeat(a, 2, axis=-1)
        leaf = ag.tensor(wide, device=device, requires_grad=True)
        return leaf, leaf[..., ::2]
    leaf = ag.tensor(a, device=device, requires_grad=True)
    return leaf, leaf


def _run(fn, arrays, device, layouts=None, seed=1):
    """fn's output and the gradients of its leaves for a seeded upstream gradient (a leaf of None: None)."""
    leaves, inputs = [], []
    for i, a in enumerate(arrays):
        if a is None:
            leaves.append(None)
            inputs.append(None)
            continue
        leaf, t = _leaf(a, device, (layouts or {}).get(i, "contiguous"))
        leaves.append(leaf)
        inputs.append(t)
    y = fn(*inputs)
    g = np.random.default_rng(seed).standard_normal(y.shape).astype(y.numpy().dtype)
    y.backward(ag.tensor(g, device=device))
    return y, [None if leaf is None else leaf.grad for leaf in leaves]


def _same(got, want, dtype):
    (y, gs), (y0, gs0) = got, want
    assert_close(y, y0.numpy(), **TOL[dtype])
    for g, g0 in zip(gs, gs0):
        assert (g is None) == (g0 is None)
        if g is not None:
            assert_close(g, g0.numpy(), **TOL[dtype])


def _arrays(shapes, dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [None if s is None else np.asarray(rng.standard_normal(s) * scale).astype(dtype) for s in shapes]


# -- layer norm -------------------------------------------------------------------------------------------
def _layer_norm_composed(x, ns, w, b, eps=1e-5):
    axes = tuple(range(x.ndim - len(ns), x.ndim))
    xc = x - x.mean(axes, keepdims=True)
    y = xc / ag.sqrt((xc * xc).mean(axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    return y if b is None else y + b


LN_CASES = [  # (x shape, normalized_shape, weight, bias, layout of x)
    ((4, 6), (6,), True, True, "contiguous"),
    ((2, 3, 5), (5,), True, True, "contiguous"),
    ((2, 3, 4), (3, 4), True, False, "contiguous"),
    ((3, 5), (5,), False, True, "contiguous"),
    ((3, 5), (5,), False, False, "contiguous"),
    ((1, 7), (7,), True, True, "contiguous"),            # one row
    ((0, 4), (4,), True, True, "contiguous"),            # no rows
    ((5, 4), (4,), True, True, "transposed"),            # non-contiguous input
    ((3, 6), (6,), True, True, "strided"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", LN_CASES, ids=[f"{c[0]}-{c[1]}-w{int(c[2])}b{int(c[3])}-{c[4]}" for c in LN_CASES])
def test_layer_norm_equals_composed_ops(case, dtype, device):
    shape, ns, has_w, has_b, layout = case
    x, w, b = _arrays([shape, ns if has_w else None, ns if has_b else None], dtype)
    if w is not None:
        w += 1.0
    fused = _run(lambda x, w, b: F.layer_norm(x, ns, w, b), [x, w, b], device, {0: layout})
    composed = _run(lambda x, w, b: _layer_norm_composed(x, ns, w, b), [x, w, b], device, {0: layout})
    _same(fused, composed, dtype)


def test_layer_norm_of_constant_rows_is_the_bias(device):
    x = ag.full((3, 4), 2.5, device=device, requires_grad=True)
    b = ag.tensor([1.0, -1.0, 0.5, 0.0], device=device, requires_grad=True)
    y = F.layer_norm(x, (4,), None, b)
    assert_close(y, np.broadcast_to(np.array([1.0, -1.0, 0.5, 0.0], np.float32), (3, 4)))
    y.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    assert_close(b.grad, np.full(4, 3.0, np.float32))


# -- linear, linear + relu -------------------------------------------------------------------------------------
LIN_CASES = [  # (x shape, out features, bias, layout of x)
    ((5, 4), 3, True, "contiguous"),
    ((2, 3, 4), 6, True, "contiguous"),
    ((1, 4), 2, True, "contiguous"),
    ((0, 4), 3, True, "contiguous"),
    ((5, 4), 3, False, "contiguous"),
    ((4, 6), 3, True, "transposed"),
    ((3, 4), 5, True, "strided"),
]
LIN_IDS = [f"{c[0]}-{c[1]}-b{int(c[2])}-{c[3]}" for c in LIN_CASES]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", LIN_CASES, ids=LIN_IDS)
@pytest.mark.parametrize("relu", [False, True], ids=["linear", "linear_relu"])
def test_linear_equals_composed_ops(case, relu, dtype, device):
    shape, out, has_b, layout = case
    x, w, b = _arrays([shape, (out, shape[-1]), (out,) if has_b else None], dtype)

    def fused(x, w, b):
        return _linear_relu(x, w, b) if relu else F.linear(x, w, b)

    def composed(x, w, b):
        y = ag.matmul(x, w.swapaxes(0, 1))
        y = y if b is None else y + b
        return ag.maximum(y, ag.zeros((), dtype=y.dtype, device=y.device)) if relu else y
    _same(_run(fused, [x, w, b], device, {0: layout}), _run(composed, [x, w, b], device, {0: layout}), dtype)


def test_linear_relu_of_minus_infinity_is_zero(device):
    x = ag.tensor([[1.0, 2.0]], device=device)
    w = ag.tensor([[1.0, 0.0], [0.0, 1.0]], device=device)
    b = ag.tensor([-math.inf, math.nan], device=device)
    y = _linear_relu(x, w, b).numpy()
    assert y[0, 0] == 0 and np.isnan(y[0, 1])         # as relu(linear(...)): max(-inf, 0) = 0, nan stays


# -- activations --------------------------------------------------------------------------------------------------
def _phi(x):
    return np.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


_C, _K = 0.044715, math.sqrt(2 / math.pi)
# name: (op, forward reference, derivative reference), references in float64 NumPy
ACTIVATIONS = {
    "gelu": (ag.gelu, lambda x: x * (1 + _erf(x / math.sqrt(2))) / 2,
             lambda x: (1 + _erf(x / math.sqrt(2))) / 2 + x * _phi(x)),
    "gelu_tanh": (lambda x: ag.gelu(x, approximate="tanh"),
                  lambda x: x * (1 + np.tanh(_K * (x + _C * x ** 3))) / 2,
                  lambda x: (1 + np.tanh(_K * (x + _C * x ** 3))) / 2
                  + x * (1 - np.tanh(_K * (x + _C * x ** 3)) ** 2) * _K * (1 + 3 * _C * x * x) / 2),
    "silu": (ag.silu, lambda x: x / (1 + np.exp(-x)),
             lambda x: 1 / (1 + np.exp(-x)) * (1 + x * (1 - 1 / (1 + np.exp(-x))))),
    "F.silu": (F.silu, lambda x: x / (1 + np.exp(-x)),
               lambda x: 1 / (1 + np.exp(-x)) * (1 + x * (1 - 1 / (1 + np.exp(-x))))),
    "sigmoid": (ag.sigmoid, lambda x: 1 / (1 + np.exp(-x)), lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2),
    "tanh": (ag.tanh, np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "relu": (ag.relu, lambda x: np.maximum(x, 0), lambda x: (x > 0).astype(np.float64)),
}
ACT_SHAPES = [((3, 5), "contiguous"), ((), "contiguous"), ((0, 3), "contiguous"), ((1, 4), "contiguous"),
              ((4, 3), "transposed"), ((2, 5), "strided")]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,layout", ACT_SHAPES, ids=[f"{s}-{lay}" for s, lay in ACT_SHAPES])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_activation_and_its_backward_equal_the_reference(name, shape, layout, dtype, device):
    op, ref, dref = ACTIVATIONS[name]
    a, = _arrays([shape], dtype, scale=3.0)
    if layout != "contiguous" and a.ndim < 2:
        pytest.skip("a 0-d array has one layout")
    a[np.abs(a) < 1e-3] = 0.5                          # away from relu's kink
    y, (g,) = _run(op, [a], device, {0: layout})
    up = np.random.default_rng(1).standard_normal(a.shape)
    a64 = a.astype(np.float64)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == "float32" else dict(rtol=1e-9, atol=1e-12)
    assert_close(y, ref(a64).astype(dtype), **tol)
    assert_close(g, _as_leaf((up.astype(dtype).astype(np.float64) * dref(a64)).astype(dtype), layout), **tol)


def _as_leaf(grad, layout):
    """The gradient of a _leaf(a, layout) leaf whose view got ``grad``."""
    if layout == "transposed":
        return np.swapaxes(grad, -1, -2)
    if layout == "strided":
        wide = np.zeros(grad.shape[:-1] + (2 * grad.shape[-1],), grad.dtype)
        wide[..., ::2] = grad
        return wide
    return grad


@pytest.mark.parametrize("name", ["gelu", "gelu_tanh", "silu", "sigmoid", "tanh"])
def test_activation_backward_stays_finite_at_large_inputs(name, device):
    op = ACTIVATIONS[name][0]
    x = ag.tensor([-100.0, -30.0, 30.0, 100.0], device=device, requires_grad=True)
    op(x).sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


# -- attention ---------------------------------------------------------------------------------------------------
def _sdpa_composed(q, k, v, mask=None, scale=None):
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = ag.matmul(q, k.swapaxes(-1, -2)) * scale
    if mask is not None:
        s = s + mask
    return ag.matmul(F.softmax(s, -1), v)


SDPA_CASES = [  # (q, k, v, float mask shape or None, scale, layout of q)
    ((2, 3, 4), (2, 5, 4), (2, 5, 3), None, None, "contiguous"),
    ((2, 2, 3, 4), (1, 5, 4), (2, 1, 5, 2), None, None, "contiguous"),
    ((2, 3, 4), (2, 5, 4), (2, 5, 3), (3, 5), None, "contiguous"),
    ((2, 3, 4), (2, 5, 4), (2, 5, 3), (2, 1, 5), 0.7, "contiguous"),
    ((2, 3, 4), (2, 5, 4), (2, 5, 3), None, -0.5, "contiguous"),     # a negative scale
    ((1, 4), (3, 4), (3, 2), None, None, "contiguous"),                # one query
    ((2, 0, 4), (2, 5, 4), (2, 5, 3), None, None, "contiguous"),       # no queries
    ((2, 4, 3), (2, 4, 3), (2, 4, 2), None, None, "transposed"),
    ((2, 3, 4), (2, 5, 4), (2, 5, 3), (3, 5), 0.3, "strided"),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", SDPA_CASES, ids=[f"{c[0]}-{c[3]}-{c[4]}-{c[5]}" for c in SDPA_CASES])
def test_attention_equals_composed_ops(case, dtype, device):
    qs, ks, vs, ms, scale, layout = case
    arrays = _arrays([qs, ks, vs, ms], dtype)

    def fused(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=scale)

    def composed(q, k, v, m):
        return _sdpa_composed(q, k, v, m, scale)
    _same(_run(fused, arrays, device, {0: layout}), _run(composed, arrays, device, {0: layout}), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_attention_equals_composed_ops(dtype, device):
    L = 64                                              # the CPU's blocked causal path starts at 64
    arrays = _arrays([(2, L, 4), (2, L, 4), (2, L, 3)], dtype)
    causal = np.triu(np.full((L, L), -np.inf), 1).astype(dtype)

    def composed(q, k, v):
        return _sdpa_composed(q, k, v, ag.tensor(causal, device=device))
    fused = _run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), arrays, device)
    _same(fused, _run(composed, arrays, device), dtype)


def test_attention_row_with_every_key_masked_gives_zeros(device):
    q, k, v = (ag.tensor(a, device=device, requires_grad=True) for a in _arrays([(3, 4), (5, 4), (5, 2)], "float64"))
    mask = ag.tensor(np.array([[True] * 5, [False] * 5, [True, False, True, False, True]]), device=device)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert_close(out[1], np.zeros(2))
    out.sum().backward()
    for t in (q, k, v):
        assert np.isfinite(t.grad.numpy()).all()
    assert_close(q.grad[1], np.zeros(4))


# -- create_graph keeps the recorded backward -------------------------------------------------------------------------
SECOND_ORDER = {
    "layer_norm": (lambda x, w: F.layer_norm(x, (4,), w, None), lambda x, w: _layer_norm_composed(x, (4,), w, None),
                   [(3, 4), (4,)]),
    "linear_relu": (lambda x, w: _linear_relu(x, w), lambda x, w: ag.relu(ag.matmul(x, w.swapaxes(0, 1))),
                    [(3, 4), (2, 4)]),
    "gelu": (lambda x, w: ag.gelu(x) * w, lambda x, w: x * (ag.erf(x * (1 / math.sqrt(2))) + 1) * 0.5 * w,
             [(3, 4), (4,)]),
    "silu": (lambda x, w: ag.silu(x) * w, lambda x, w: x * ag.sigmoid(x) * w, [(3, 4), (4,)]),
    "attention": (lambda q, k: F.scaled_dot_product_attention(q, k, k), lambda q, k: _sdpa_composed(q, k, k),
                  [(3, 4), (5, 4)]),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_gradient_of_the_gradient_equals_composed_ops(name, device):
    fused, composed, shapes = SECOND_ORDER[name]
    arrays = _arrays(shapes, "float64", seed=3)
    results = []
    for fn in (fused, composed):
        xs = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
        y = fn(*xs)
        gs = ag.autograd.grad((y * y).sum(), xs, create_graph=True)
        sum(g.sum() for g in gs).backward()
        results.append([y] + list(gs) + [x.grad for x in xs])
    for got, want in zip(*results):
        assert_close(got, want.numpy(), rtol=1e-9, atol=1e-12)


def test_kernels_are_built_once(device):
    from autograd_gpu.backends.kernels import activations
    x = ag.randn(4, 6, device=device, requires_grad=True)
    w, b = ag.ones(6, device=device, requires_grad=True), ag.zeros(6, device=device, requires_grad=True)

    def step():
        y = F.layer_norm(ag.gelu(x), (6,), w, b)
        F.scaled_dot_product_attention(y, y, y).sum().backward()
    step()
    n = len(activations._built)
    step()
    assert len(activations._built) == n
