"""ag.func.vmap: batching rules against a loop over the batch (and NumPy), in_dims/out_dims, nesting,
composition with grad/vjp/jacrev/jacfwd/hessian, per-example gradients, the loop fallback, errors."""
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu.func import vmap, grad, vjp, jacrev, jacfwd, hessian, value_and_grad

B = 4


def _randn(device, *shape, seed=0):
    return ag.tensor(np.random.default_rng(seed).standard_normal(shape), dtype=ag.float64, device=device)


def _loop(f, *args, in_dims=0):
    """vmap's meaning: f on each example, stacked."""
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    n = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    outs = [f(*(a if d is None else a.numpy().take(i, axis=d) for a, d in zip(args, dims))) for i in range(n)]
    return outs


def _check(f, *args, in_dims=0, atol=1e-10):
    """vmap(f)(*args) equals a Python loop of f over the examples."""
    got = vmap(f, in_dims=in_dims)(*args)
    dev = next(a.device for a in args if isinstance(a, ag.Tensor))
    dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
    n = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    want = []
    for i in range(n):
        ex = [a if d is None else ag.tensor(np.take(a.numpy(), i, axis=d), device=dev) for a, d in zip(args, dims)]
        want.append(f(*ex).numpy())
    np.testing.assert_allclose(got.numpy(), np.stack(want), atol=atol)
    return got


# --------------------------------------------------------------------------- ops
@pytest.mark.parametrize("fn", [
    lambda x: x.exp() * 2 + 1,
    lambda x: ag.where(x > 0, x.sin(), -x) / (x.abs() + 1),
    lambda x: ag.clamp(x, -0.5, 0.5) ** 2 - x.tanh().sigmoid(),
    lambda x: ag.maximum(x, 0.1) + F.relu(x) * F.gelu(x),
], ids=["arith", "where_compare", "clamp_pow", "maximum_relu"])
def test_elementwise(device, fn):
    _check(fn, _randn(device, B, 3, 2))


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(),
    lambda x: x.sum(1),
    lambda x: x.mean(0, keepdim=True),
    lambda x: x.max(-1),
    lambda x: x.var(1).sum() + x.std() + ag.logsumexp(x, 0).sum(),
    lambda x: x.norm() + x.prod(1).sum() + x.cumsum(1)[:, -1].sum(),
], ids=["sum_all", "sum_axis", "mean_keepdim", "max", "var_std_lse", "norm_prod_cumsum"])
def test_reductions(device, fn):
    _check(fn, _randn(device, B, 3, 5))


@pytest.mark.parametrize("fn", [
    lambda x: x.reshape(5, 3).T,
    lambda x: x.permute(1, 0)[1:, ::2],
    lambda x: x[None, 0, [2, 0, 1]],
    lambda x: x[..., 1],
    lambda x: ag.cat([x, x * 2], dim=1),
    lambda x: ag.stack([x, -x], dim=0).flip(0),
    lambda x: x.flatten().unsqueeze(0).expand(2, 15),
    lambda x: ag.pad(x, ((1, 0), (0, 2))),
], ids=["reshape_T", "permute_slice", "advanced_index", "ellipsis", "cat", "stack_flip", "expand", "pad"])
def test_shape_and_indexing(device, fn):
    _check(fn, _randn(device, B, 3, 5))


def test_matmul_batched_and_unbatched_operands(device):
    x, w, m = _randn(device, B, 2, 3), _randn(device, 3, 4, seed=1), _randn(device, B, 4, seed=2)
    _check(lambda a: a @ w, x)                                    # batched @ shared
    _check(lambda a, b: a @ b, x, _randn(device, B, 3, 4, seed=3))  # batched @ batched
    _check(lambda a, v: (a @ w) @ v, x, m)                         # matrix @ vector
    _check(lambda v: w @ v, m, in_dims=0)                         # shared @ batched vector
    _check(lambda a: ag.einsum("ij,jk->ik", a, w), x)


def test_nn_functional(device):
    x, w, b = _randn(device, B, 5), _randn(device, 3, 5, seed=1), _randn(device, 3, seed=2)
    y = ag.tensor([0, 2, 1, 2], device=device)
    _check(lambda a: F.linear(a, w, b), x)
    _check(lambda a: F.softmax(a, dim=0) + F.log_softmax(a, dim=-1), x)
    _check(lambda a, t: F.cross_entropy(F.linear(a, w, b)[None], t[None]), x, y)
    _check(lambda a, t: F.cross_entropy(F.linear(a, w, b), t), x, y)   # unbatched (C,) input, 0-d target
    _check(lambda a: F.mse_loss(a, ag.ones_like(a)) + F.layer_norm(a, (5,)).sum(), x)
    _check(lambda a: F.cross_entropy(a[None, :3], ag.tensor([1], device=device)), x)    # target not mapped


_MATRIX_OPS = {
    "inv": lambda a: ag.linalg.inv(a),
    "det": lambda a: ag.linalg.det(a),
    "slogdet": lambda a: ag.linalg.slogdet(a)[1],
    "cholesky": lambda a: ag.linalg.cholesky(a @ a.mT + ag.eye(3, dtype=a.dtype, device=a.device) * 3),
    "pinv": lambda a: ag.linalg.pinv(a),
    "qr": lambda a: ag.linalg.qr(a)[1].abs(),
    "eigh": lambda a: ag.linalg.eigh(a + a.mT)[0],
    "svd": lambda a: ag.linalg.svd(a)[1],
    "fft": lambda a: ag.fft.fft(a).abs(),
    "rfft_irfft": lambda a: ag.fft.irfft(ag.fft.rfft(a) * 2, n=3),
}


@pytest.mark.parametrize("name", list(_MATRIX_OPS))
def test_linalg_and_fft_and_their_per_example_gradients(device, name):
    f = _MATRIX_OPS[name]
    a = _randn(device, B, 3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # batched by rule, not by the loop
        _check(f, a, atol=1e-8)
        g = vmap(grad(lambda t: (f(t) ** 2).sum()))(a)
    for i in range(B):
        np.testing.assert_allclose(g[i].numpy(), grad(lambda t: (f(t) ** 2).sum())(a[i]).numpy(), atol=1e-8)


# --------------------------------------------------------------------------- in_dims, out_dims, nesting
def test_in_dims_and_out_dims(device):
    x, y = _randn(device, 3, B), _randn(device, B, seed=1)
    got = vmap(lambda a, b: a * b, in_dims=(1, 0))(x, y)
    np.testing.assert_allclose(got.numpy(), (x.numpy() * y.numpy()).T)
    got = vmap(lambda a, b: a + b, in_dims=(1, None))(x, _randn(device, 3, seed=2))
    assert got.shape == (B, 3)
    got = vmap(lambda a: (a, a.sum()), in_dims=1, out_dims=(1, 0))(x)
    np.testing.assert_allclose(got[0].numpy(), x.numpy())
    np.testing.assert_allclose(got[1].numpy(), x.numpy().sum(0))
    got = vmap(lambda a: a * 2, in_dims=-1, out_dims=-1)(x)
    np.testing.assert_allclose(got.numpy(), 2 * x.numpy())
    # nested arguments: a (weights, bias) pair shared, a list of inputs mapped
    got = vmap(lambda wb, xs: xs[0] @ wb[0] + wb[1] + xs[1], in_dims=((None, None), 0))(
        (_randn(device, 3, 2), _randn(device, 2)), [_randn(device, B, 3), _randn(device, B, 2)])
    assert got.shape == (B, 2)
    # an output that does not depend on the batch is broadcast along it
    got = vmap(lambda a: ag.ones(2, device=device, dtype=ag.float64))(x.T)
    assert got.shape == (B, 2)


def test_nested_vmap(device):
    m = _randn(device, 2, 3, 4)
    got = vmap(vmap(lambda r: (r.exp() / r.exp().sum()) @ r))(m)
    e = np.exp(m.numpy())
    np.testing.assert_allclose(got.numpy(), ((e / e.sum(-1, keepdims=True)) * m.numpy()).sum(-1))
    # outer over rows of a, inner over columns of b: an outer product table
    a, b = _randn(device, 3), _randn(device, 5, seed=1)
    got = vmap(lambda s: vmap(lambda t: s * t + 1)(b))(a)
    np.testing.assert_allclose(got.numpy(), np.outer(a.numpy(), b.numpy()) + 1)
    got = vmap(vmap(lambda s, t: s - t, in_dims=(None, 0)), in_dims=(0, None))(a, b)
    np.testing.assert_allclose(got.numpy(), a.numpy()[:, None] - b.numpy()[None])


# --------------------------------------------------------------------------- composition with autodiff
def _mlp_loss(w1, b1, w2, x, y):
    return F.cross_entropy(F.linear(F.tanh(F.linear(x, w1, b1)), w2)[None], y[None])


def test_per_example_gradients_of_an_mlp_match_a_loop(device):
    w1, b1, w2 = _randn(device, 6, 5), _randn(device, 6, seed=1), _randn(device, 3, 6, seed=2)
    xs = _randn(device, 8, 5, seed=3)
    ys = ag.tensor(np.random.default_rng(4).integers(0, 3, 8), device=device)
    g = grad(_mlp_loss, argnums=(0, 1, 2))
    batched = vmap(g, in_dims=(None, None, None, 0, 0))(w1, b1, w2, xs, ys)
    assert [t.shape for t in batched] == [(8, 6, 5), (8, 6), (8, 3, 6)]
    for i in range(8):
        for got, want in zip(batched, g(w1, b1, w2, xs[i], ys[i])):
            np.testing.assert_allclose(got[i].numpy(), want.numpy(), atol=1e-12)
    assert not any(t.requires_grad for t in batched)


def test_per_example_gradients_through_layer_norm_and_softmax(device):
    x, w, b = _randn(device, 5, 3, 4), _randn(device, 4, seed=1), _randn(device, 4, seed=2)
    f = lambda t, w, b: (F.softmax(F.layer_norm(t, (4,), w, b), dim=-1) * t).sum()
    g = grad(f, argnums=(0, 1, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # every op here has a batching rule
        batched = vmap(g, in_dims=(0, None, None))(x, w, b)
    for i in range(5):
        for got, want in zip(batched, g(x[i], w, b)):
            np.testing.assert_allclose(got[i].numpy(), want.numpy(), atol=1e-12)


def test_grad_of_vmap(device):
    w, xs = _randn(device, 3), _randn(device, B, 3, seed=1)
    g = grad(lambda v: vmap(lambda x: (x * v).sin().sum())(xs).sum())(w)
    want = sum(np.cos(xs.numpy()[i] * w.numpy()) * xs.numpy()[i] for i in range(B))
    np.testing.assert_allclose(g.numpy(), want)
    # value_and_grad of a vmapped loss with a shared parameter
    v, g = value_and_grad(lambda v: vmap(lambda x: (x @ v) ** 2)(xs).mean())(w)
    np.testing.assert_allclose(g.numpy(), 2 * ((xs.numpy() @ w.numpy())[:, None] * xs.numpy()).mean(0))


def test_vmap_of_jacobians_and_hessian(device):
    xs = _randn(device, B, 3)
    f = lambda x: x.sin() * x.sum()
    for transform in (jacrev, jacfwd):
        got = vmap(transform(f))(xs)
        for i in range(B):
            np.testing.assert_allclose(got[i].numpy(), jacrev(f)(xs[i]).numpy(), atol=1e-12)
    got = vmap(hessian(lambda x: (x ** 3).sum() * x[0]))(xs)
    for i in range(B):
        np.testing.assert_allclose(got[i].numpy(), hessian(lambda x: (x ** 3).sum() * x[0])(xs[i]).numpy())


def test_vmap_of_vjp_gives_the_jacobian(device):
    x = _randn(device, 3)
    out, fn = vjp(lambda t: t.sin() * t[0], x)
    jac, = vmap(fn)(ag.eye(3, dtype=ag.float64, device=device))
    np.testing.assert_allclose(jac.numpy(), jacrev(lambda t: t.sin() * t[0])(x).numpy())


# --------------------------------------------------------------------------- fallback, randomness, errors
def test_fallback_loops_and_warns_once_naming_the_op(device):
    class Cube(ag.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return ctx.wrap(x.data ** 3)

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x * x

    xs = _randn(device, B, 2)
    with pytest.warns(UserWarning, match="no batching rule for Cube") as rec:
        got = vmap(lambda x: Cube.apply(x) + 1)(xs)
    assert len([w for w in rec if "Cube" in str(w.message)]) == 1
    np.testing.assert_allclose(got.numpy(), xs.numpy() ** 3 + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # the second time: no warning
        g = vmap(grad(lambda x: Cube.apply(x).sum()))(xs)
    np.testing.assert_allclose(g.numpy(), 3 * xs.numpy() ** 2)


def test_randomness(device):
    xs = _randn(device, B, 3)
    with pytest.raises(RuntimeError, match="randomness='error'"):
        vmap(lambda x: x + ag.randn(3, device=device))(xs)
    got = vmap(lambda x: x * 0 + ag.rand(3, device=device, dtype=ag.float64), randomness="same")(xs)
    assert np.allclose(got.numpy(), got.numpy()[:1])          # one draw shared by the batch
    ag.randn(2, device=device)                                 # the generators are back after vmap


def test_errors(device):
    x, y = _randn(device, B, 3), _randn(device, B + 1, 3)
    with pytest.raises(ValueError, match="different batch sizes"):
        vmap(lambda a, b: a + b)(x, y)
    with pytest.raises(ValueError, match="in_dim 2 is out of range"):
        vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="in_dims has 1 entries"):
        vmap(lambda a, b: a, in_dims=(0,))(x, x)
    with pytest.raises(ValueError, match="no argument is mapped"):
        vmap(lambda a: a, in_dims=None)(x)
    with pytest.raises(ValueError, match="randomness"):
        vmap(lambda a: a, randomness="different")
    with pytest.raises(RuntimeError, match="cannot read the values of a batched tensor"):
        vmap(lambda a: a.sum().item())(x)
    with pytest.raises(RuntimeError, match="in-place"):
        vmap(lambda a: a.add_(1))(x)
    with pytest.raises(TypeError, match="must return Tensors"):
        vmap(lambda a: 3)(x)
    # the op path is back to normal after an error inside vmap
    assert (x + 1).shape == (B, 3)
