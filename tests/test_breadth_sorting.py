"""Sorting and selection, triangles and diagonals, cumulative ops: compared with PyTorch (where torch is
installed) at the awkward points the op table's random inputs do not reach: ties, NaN, zeros in
cumprod, -inf in logcumsumexp; plus errors, 0-d inputs and vmap against a loop."""
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.func import vmap

torch = pytest.importorskip("torch")

NAN = float("nan")


def _t(a, device, requires_grad=False, dtype=ag.float64):
    return ag.tensor(np.asarray(a, dtype=np.float64), dtype=dtype, device=device, requires_grad=requires_grad)


def _pt(a, requires_grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy()


def _same(got, want, **kw):
    np.testing.assert_allclose(_np(got), _np(want), equal_nan=True, **{"rtol": 1e-12, "atol": 1e-12, **kw})


def _grad_pair(f_ag, f_pt, a, device, weights=None):
    """The gradients of sum(w * f(x)) in both libraries (w fixed, so every output counts differently)."""
    x, y = _t(a, device, True), _pt(a, True)
    out_ag, out_pt = f_ag(x), f_pt(y)
    w = np.random.default_rng(1).uniform(0.5, 1.5, out_pt.shape) if weights is None else weights
    (out_ag * _t(w, device)).sum().backward()
    (out_pt * torch.tensor(w)).sum().backward()
    return x.grad, y.grad


TIES = [[1.0, 2.0, 2.0, 1.0, 2.0, 1.0], [3.0, 3.0, 0.5, 3.0, 0.5, 0.5]]
WITH_NAN = [[3.0, NAN, 1.0, NAN, 2.0], [0.5, 1.5, -1.0, 2.0, 0.0]]


# --------------------------------------------------------------------------- sort / argsort / msort
@pytest.mark.parametrize("descending", [False, True])
def test_stable_sort_matches_pytorch_at_ties_and_nan(descending, device):
    for a in (TIES, WITH_NAN):
        got = ag.sort(_t(a, device), dim=1, descending=descending, stable=True)
        want = torch.sort(_pt(a), dim=1, descending=descending, stable=True)
        _same(got.values, want.values)
        assert got.indices.dtype == ag.int64
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        np.testing.assert_array_equal(ag.argsort(_t(a, device), 1, descending, stable=True).numpy(),
                                      torch.argsort(_pt(a), dim=1, descending=descending, stable=True).numpy())


def test_sort_gradient_goes_to_the_sorted_positions_as_pytorch(device):
    for descending in (False, True):
        g, w = _grad_pair(lambda x: x.sort(0, descending=descending).values,
                          lambda y: y.sort(dim=0, descending=descending, stable=True).values, np.array(TIES).T, device)
        _same(g, w)


def test_sort_returns_a_named_tuple_and_unpacks(device):
    x = _t([[3.0, 1.0, 2.0]], device)
    values, indices = ag.sort(x)
    r = x.sort()
    assert r.values is not None and type(r).__name__ == "sort" and r._fields == ("values", "indices")
    np.testing.assert_array_equal(values.numpy(), [[1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(indices.numpy(), [[1, 2, 0]])


def test_msort_and_0d_sort(device):
    a = np.random.default_rng(0).standard_normal((4, 3))
    _same(ag.msort(_t(a, device)), torch.msort(_pt(a)))
    s = ag.sort(_t(2.5, device))
    assert s.values.shape == () and s.indices.shape == () and s.indices.item() == 0
    assert ag.argsort(_t(2.5, device)).shape == ()


def test_sort_of_integers_and_errors(device):
    x = ag.tensor([3, 1, 2], device=device)
    np.testing.assert_array_equal(ag.sort(x, descending=True).values.numpy(), [3, 2, 1])
    with pytest.raises(IndexError, match="sort: dim 2 is out of range"):
        ag.sort(_t([[1.0]], device), dim=2)
    with pytest.raises(TypeError, match="sort.*complex"):
        ag.sort(ag.tensor([1 + 2j, 3j], device=device))


# --------------------------------------------------------------------------- topk / kthvalue / median
def test_topk_matches_pytorch(device):
    a = np.random.default_rng(2).standard_normal((3, 7))
    for largest in (True, False):
        for k in (0, 1, 3, 7):
            got = ag.topk(_t(a, device), k, largest=largest)
            want = torch.topk(_pt(a), k, largest=largest)
            _same(got.values, want.values)
            np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        g, w = _grad_pair(lambda x: x.topk(3, dim=0, largest=largest).values,
                          lambda y: y.topk(3, dim=0, largest=largest).values, a.T, device)
        _same(g, w)


def test_topk_unsorted_selects_the_same_set(device):
    a = np.random.default_rng(3).standard_normal((2, 9))
    got = ag.topk(_t(a, device), 4, sorted=False)
    want = torch.topk(_pt(a), 4)
    np.testing.assert_array_equal(np.sort(got.indices.numpy(), 1), np.sort(want.indices.numpy(), 1))


def _one_hot_at(index, shape, dim):
    out = np.zeros(shape)
    np.put_along_axis(out, np.expand_dims(index, dim) if index.ndim < len(shape) else index, 1.0, dim)
    return out


def test_topk_kthvalue_median_route_the_gradient_to_the_returned_index_at_ties(device):
    """At ties PyTorch picks one of the equal elements and gives it the whole gradient: the same here,
    to the element whose index is returned (each row's gradient sums to one element's)."""
    a = np.array(TIES)
    for f in (lambda x: x.topk(2), lambda x: x.kthvalue(2), lambda x: x.median(1),
              lambda x: x.kthvalue(3, keepdim=True)):
        x = _t(a, device, True)
        r = f(x)
        r.values.sum().backward()
        want = _one_hot_at(r.indices.numpy(), a.shape, 1)
        np.testing.assert_array_equal(x.grad.numpy(), want)
        # the values are PyTorch's
        _same(r.values, f(_pt(a)).values)


def test_kthvalue_and_median_dim_match_pytorch_without_ties(device):
    a = np.random.default_rng(4).standard_normal((5, 4))
    for k in (1, 3, 5):
        got, want = ag.kthvalue(_t(a, device), k, 0), torch.kthvalue(_pt(a), k, 0)
        _same(got.values, want.values)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    for dim, keepdim in ((0, False), (1, True), (-1, False)):
        got, want = ag.median(_t(a, device), dim, keepdim), torch.median(_pt(a), dim, keepdim)
        _same(got.values, want.values)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    g, w = _grad_pair(lambda x: x.kthvalue(2, 1).values, lambda y: y.kthvalue(2, 1).values, a, device)
    _same(g, w)


def test_median_with_nan_is_nan_at_the_first_nan_as_pytorch(device):
    got, want = ag.median(_t(WITH_NAN, device), 1), torch.median(_pt(WITH_NAN), 1)
    _same(got.values, want.values)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    assert np.isnan(ag.median(_t(WITH_NAN, device)).item())
    # NaN sorts as the largest value: the 4th smallest of [3, nan, 1, nan, 2] is a NaN, the 2nd is 2
    assert np.isnan(ag.kthvalue(_t(WITH_NAN[0], device), 4).values.item())
    assert ag.kthvalue(_t(WITH_NAN[0], device), 2).indices.item() == 4


def test_whole_median_shares_the_gradient_among_equal_elements_as_pytorch(device):
    for a in ([[1.0, 2.0, 2.0], [2.0, 5.0, 0.0]], [4.0, 1.0, 3.0, 2.0], [[1.0, NAN], [NAN, 0.0]]):
        g, w = _grad_pair(lambda x: x.median(), lambda y: y.median(), a, device, weights=np.array(1.0))
        _same(g, w)
    assert ag.median(_t([[2.0, 1.0], [4.0, 3.0]], device)).shape == ()
    assert np.isnan(ag.median(ag.zeros(0, device=device)).item())


def test_selection_errors_say_what_was_expected(device):
    x = _t([[1.0, 2.0, 3.0]], device)
    with pytest.raises(IndexError, match=r"topk: k=4 is out of range for a dim of size 3"):
        ag.topk(x, 4)
    with pytest.raises(IndexError, match=r"kthvalue: k=0 is out of range .*1 <= k <= 3"):
        ag.kthvalue(x, 0)
    with pytest.raises(TypeError, match="topk: expected k to be an int, got float"):
        ag.topk(x, 1.5)
    with pytest.raises(IndexError, match="median: cannot take the median over an empty dimension"):
        ag.median(ag.zeros(2, 0, device=device), 1)


def test_0d_selection_as_pytorch(device):
    z = _t(2.5, device)
    for r in (ag.topk(z, 1), ag.kthvalue(z, 1), ag.median(z, 0)):
        assert r.values.shape == () and r.values.item() == 2.5 and r.indices.item() == 0


# --------------------------------------------------------------------------- cumulative
def test_cumsum_of_a_0d_tensor_is_0d_and_dim_is_required(device):
    z = _t(2.0, device)
    assert ag.cumsum(z, 0).shape == () and ag.cumsum(z, 0).item() == 2.0
    assert z.cumsum(-1).shape == ()
    with pytest.raises(TypeError, match="cumsum: missing the required argument dim"):
        ag.cumsum(_t([1.0, 2.0], device))
    for f in (ag.cumprod, ag.cummax, ag.cummin, ag.logcumsumexp):
        with pytest.raises(TypeError, match="missing the required argument dim"):
            f(_t([1.0, 2.0], device))
    assert ag.cumsum(_t([1.0, 2.0], device), axis=0).numpy().tolist() == [1.0, 3.0]


def test_cumsum_and_cumprod_dtypes_as_pytorch(device):
    b = ag.tensor([True, False, True], device=device)
    assert ag.cumsum(b, 0).dtype == ag.int64 and ag.cumsum(b, 0).numpy().tolist() == [1, 1, 2]
    i = ag.tensor([1, 2, 3], dtype=ag.int32, device=device)
    assert ag.cumprod(i, 0).dtype == ag.int64 and ag.cumprod(i, 0).numpy().tolist() == [1, 2, 6]
    assert ag.cumsum(i, 0, dtype=ag.float32).dtype == ag.float32


@pytest.mark.parametrize("a", [[2.0, 0.0, 3.0, 0.0, 1.5], [0.0, 2.0, -1.0, 0.5], [1.5, -2.0, 0.0], [0.5, 2.0, -1.0]])
def test_cumprod_gradient_at_zeros_matches_pytorch_first_and_second_order(a, device):
    g, w = _grad_pair(lambda x: x.cumprod(0), lambda y: y.cumprod(0), a, device)
    _same(g, w)
    # second order: the gradient of sum(v * grad) with create_graph, as PyTorch's
    v = np.random.default_rng(5).uniform(0.5, 1.5, len(a))
    x, y = _t(a, device, True), _pt(a, True)
    wts = np.random.default_rng(1).uniform(0.5, 1.5, len(a))
    gx, = ag.autograd.grad((ag.cumprod(x, 0) * _t(wts, device)).sum(), [x], create_graph=True)
    gy, = torch.autograd.grad((torch.cumprod(y, 0) * torch.tensor(wts)).sum(), [y], create_graph=True)
    hx, = ag.autograd.grad((gx * _t(v, device)).sum(), [x])
    hy, = torch.autograd.grad((gy * torch.tensor(v)).sum(), [y])
    _same(hx, hy, atol=1e-10)


def test_cumprod_of_rows_with_zeros_along_dim1(device):
    a = np.array([[1.0, 0.0, 2.0, 3.0], [0.5, 2.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]])
    _same(ag.cumprod(_t(a, device), 1), torch.cumprod(_pt(a), 1))
    g, w = _grad_pair(lambda x: x.cumprod(1), lambda y: y.cumprod(1), a, device)
    _same(g, w)


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin_match_pytorch_at_ties_and_nan(op, device):
    for a in ([1.0, 3.0, 3.0, NAN, 2.0, NAN, 5.0], [2.0, 2.0, 1.0, 1.0, 3.0, 0.0, 0.0],
              np.random.default_rng(6).standard_normal(8)):
        got, want = getattr(ag, op)(_t(a, device), 0), getattr(torch, op)(_pt(a), 0)
        _same(got.values, want.values)
        np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
        # the gradient goes to the running arg (repeated indices add up), as PyTorch's
        g, w = _grad_pair(lambda x: getattr(x, op)(0).values, lambda y: getattr(y, op)(0).values, a, device)
        _same(g, w)


def test_cummax_along_dim1_and_0d(device):
    a = np.array([[1.0, 0.0, 2.0, 2.0], [0.5, 2.0, 2.0, 0.0]])
    got, want = ag.cummax(_t(a, device), 1), torch.cummax(_pt(a), 1)
    np.testing.assert_array_equal(got.indices.numpy(), want.indices.numpy())
    r = ag.cummin(_t(1.5, device), 0)
    assert r.values.shape == () and r.indices.item() == 0


def test_logcumsumexp_matches_pytorch_at_extremes(device):
    for a in ([-np.inf, 1.0, -1000.0, 1000.0], [[-800.0, -790.0, 700.0], [0.5, -np.inf, -np.inf]],
              np.random.default_rng(7).standard_normal((3, 4)) * 30):
        a = np.asarray(a)
        _same(ag.logcumsumexp(_t(a, device), -1), torch.logcumsumexp(_pt(a), -1), rtol=1e-10)
    a = np.random.default_rng(8).standard_normal((3, 5)) * 20
    g, w = _grad_pair(lambda x: x.logcumsumexp(1), lambda y: y.logcumsumexp(1), a, device)
    _same(g, w, rtol=1e-9, atol=1e-12)
    assert ag.logcumsumexp(_t(0.5, device), 0).shape == ()
    assert ag.logcumsumexp(ag.tensor([1, 2], device=device), 0).dtype == ag.get_default_dtype()


# --------------------------------------------------------------------------- triangles and diagonals
def test_tril_triu_match_pytorch(device):
    a = np.arange(24.0).reshape(2, 3, 4)
    for k in (-4, -1, 0, 2, 5):
        _same(ag.tril(_t(a, device), k), torch.tril(_pt(a), k))
        _same(_t(a, device).triu(k), _pt(a).triu(k))
    g, w = _grad_pair(lambda x: x.tril(1), lambda y: y.tril(1), a, device)
    _same(g, w)
    with pytest.raises(ValueError, match=r"tril: expected a tensor with at least 2 dims .* got shape \(3,\)"):
        ag.tril(_t([1.0, 2.0, 3.0], device))


@pytest.mark.parametrize("args", [(3, 4), (3, 4, 1), (4, 3, -1), (3, 2, -5), (0, 3), (2, 2, 7)])
def test_tril_triu_indices_match_pytorch(args, device):
    for name in ("tril_indices", "triu_indices"):
        got = getattr(ag, name)(*args, device=device)
        want = getattr(torch, name)(*args)
        assert got.dtype == ag.int64 and got.shape == tuple(want.shape) and got.device == ag.device(device)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    assert ag.tril_indices(3, 3, dtype=ag.int32).dtype == ag.int32
    with pytest.raises(ValueError, match="non-negative"):
        ag.triu_indices(-1, 3)


def test_diagonal_diag_embed_diag_trace_match_pytorch(device):
    a = np.random.default_rng(9).standard_normal((3, 4, 5))
    for offset, d1, d2 in ((0, 0, 1), (1, 2, 0), (-2, -1, 1), (9, 0, 2)):
        _same(ag.diagonal(_t(a, device), offset, d1, d2), torch.diagonal(_pt(a), offset, d1, d2))
        g, w = _grad_pair(lambda x: x.diagonal(offset, d1, d2), lambda y: y.diagonal(offset, d1, d2), a, device)
        _same(g, w)
    v = np.random.default_rng(10).standard_normal((2, 3))
    for offset, d1, d2 in ((0, -2, -1), (1, 0, 2), (-2, 2, 0)):
        _same(ag.diag_embed(_t(v, device), offset, d1, d2), torch.diag_embed(_pt(v), offset, d1, d2))
        g, w = _grad_pair(lambda x: x.diag_embed(offset, d1, d2), lambda y: y.diag_embed(offset, d1, d2), v, device)
        _same(g, w)
    for m, k in ((v[0], 0), (v[0], -1), (a[0], 2), (a[0], -3)):
        _same(ag.diag(_t(m, device), k), torch.diag(_pt(m), k))
    _same(ag.trace(_t(a[0], device)), torch.trace(_pt(a[0])))
    assert ag.trace(ag.tensor([[1, 2], [3, 4]], dtype=ag.int32, device=device)).dtype == ag.int64
    g, w = _grad_pair(lambda x: x.trace(), lambda y: y.trace(), a[1], device, weights=np.array(1.0))
    _same(g, w)


def test_diagonal_errors(device):
    m = _t(np.ones((3, 3)), device)
    with pytest.raises(ValueError, match=r"diagonal: expected two different dims, got dim1=1 and dim2=-1"):
        ag.diagonal(m, 0, 1, -1)
    with pytest.raises(ValueError, match=r"diag: expected a 1-D or 2-D tensor, got shape \(1, 3, 3\)"):
        ag.diag(m.reshape(1, 3, 3))
    with pytest.raises(ValueError, match=r"trace: expected a matrix \(2-D tensor\), got shape \(3,\)"):
        ag.trace(_t([1.0, 2.0, 3.0], device))


def test_block_diag_matches_pytorch(device):
    blocks = [np.array(1.5), np.array([1.0, 2.0]), np.arange(6.0).reshape(2, 3), np.zeros((0, 2))]
    got = ag.block_diag(*[_t(b, device) for b in blocks])
    _same(got, torch.block_diag(*[_pt(b) for b in blocks]))
    xs = [_t(b, device, True) for b in blocks]
    ys = [_pt(b, True) for b in blocks]
    w = np.random.default_rng(11).standard_normal(got.shape)
    (ag.block_diag(*xs) * _t(w, device)).sum().backward()
    (torch.block_diag(*ys) * torch.tensor(w)).sum().backward()
    for x, y in zip(xs, ys):
        _same(x.grad, y.grad)
    assert ag.block_diag().shape == (1, 0)
    with pytest.raises(ValueError, match=r"block_diag: expected tensors with at most 2 dims, got shape \(1, 1, 1\)"):
        ag.block_diag(ag.ones(1, 1, 1, device=device))
    with pytest.raises(TypeError, match=r"block_diag\(\*tensors\)"):
        ag.block_diag([ag.ones(1, device=device)])


# --------------------------------------------------------------------------- vmap: rules, not loops
@pytest.mark.parametrize("name,f", [
    ("sort", lambda r: ag.sort(r, descending=True).values * 2),
    ("argsort", lambda r: ag.argsort(r, dim=0)),
    ("topk", lambda r: r.topk(2).values + r.topk(2).indices),
    ("kthvalue", lambda r: r.kthvalue(2, 0).values),
    ("median", lambda r: r.median() + r.median(1).values.sum()),
    ("cummax", lambda r: r.cummax(1).values * r.cummin(0).indices),
    ("cumprod", lambda r: r.cumprod(1) + r.cumsum(0) + r.logcumsumexp(1)),
    ("diagonals", lambda r: r.tril(1) + r.diagonal(0, 1, 0).sum() + r.diag_embed(1, 0, 2).sum(2)[:3, :3]),
])
def test_vmap_runs_the_batching_rules_and_matches_a_loop(name, f, device):
    xs = ag.tensor(np.random.default_rng(12).standard_normal((4, 3, 3)), device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a loop fallback would warn
        got = vmap(f)(xs)
    want = np.stack([f(ag.tensor(xs.numpy()[i], device=device)).numpy() for i in range(4)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_grad_of_sort_under_vmap(device):
    xs = ag.tensor(np.random.default_rng(13).standard_normal((3, 5)), device=device)
    w = ag.tensor(np.arange(5.0), device=device)
    g = vmap(ag.func.grad(lambda r: (ag.sort(r).values * w).sum()))(xs)
    want = np.zeros((3, 5))
    np.put_along_axis(want, np.argsort(xs.numpy(), 1), np.arange(5.0)[None], 1)
    np.testing.assert_allclose(g.numpy(), want)


# --------------------------------------------------------------------------- CUDA: no host round trip
@pytest.mark.gpu
def test_cuda_forward_and_backward_make_no_device_to_host_transfer():
    """Sorting, selection, cumulative and diagonal ops stay on the device: the stand-in counts every
    device-to-host transfer (none here), and the sync debug mode raises on any declared sync."""
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the CuPy stand-in)")
    from autograd_gpu.backends import cupy_backend
    x = ag.tensor(np.random.default_rng(14).standard_normal((4, 6)), device="cuda", requires_grad=True)
    a = np.random.default_rng(14).standard_normal((4, 6))
    counter = None
    if cupy_backend.simulated():
        from autograd_gpu.testing.cupy_standin import count_transfers
        counter = count_transfers()
        log = counter.__enter__()
    ag.cuda.set_sync_debug_mode("error")
    try:
        loss = (ag.sort(x, 1, descending=True).values.sum() + x.topk(3).values.sum() + x.kthvalue(2, 0).values.sum()
                + x.median() + x.median(1).values.sum() + x.cummax(1).values.sum() + x.cumprod(0).sum()
                + x.logcumsumexp(1).sum() + x.tril(-1).sum() + x.diagonal(1).sum() + x.diag_embed().sum()
                + ag.argsort(x, 0).sum() + ag.block_diag(x, x[:2]).sum() + ag.tril_indices(4, 6, device="cuda").sum())
        loss.backward()
    finally:
        ag.cuda.set_sync_debug_mode("default")
        if counter is not None:
            counter.__exit__(None, None, None)
    if counter is not None:
        assert log.d2h == 0, log.events
    # the same on the host, for the values
    y = ag.tensor(a, requires_grad=True)
    want = (ag.sort(y, 1, descending=True).values.sum() + y.topk(3).values.sum() + y.kthvalue(2, 0).values.sum()
            + y.median() + y.median(1).values.sum() + y.cummax(1).values.sum() + y.cumprod(0).sum()
            + y.logcumsumexp(1).sum() + y.tril(-1).sum() + y.diagonal(1).sum() + y.diag_embed().sum()
            + ag.argsort(y, 0).sum() + ag.block_diag(y, y[:2]).sum() + ag.tril_indices(4, 6).sum())
    want.backward()
    np.testing.assert_allclose(loss.item(), want.item(), rtol=1e-10)
    np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-10)


# --------------------------------------------------------------------------- ag.compile replays them
def test_compiled_training_step_matches_eager_on_new_values(device):
    """The indices depend on the values: a compiled step recomputes them on every call, and the
    backward's writes at those indices start from zeros each time (no value of an earlier call leaks)."""
    w = ag.tensor(np.random.default_rng(15).standard_normal((4, 4)), device=device, requires_grad=True)
    r = ag.arange(4.0, device=device, dtype=ag.float64)

    def step(x):
        w.grad = None
        h = x * w
        loss = ((ag.sort(h, 1).values * r).sum() + (h.topk(2).values * r[:2]).sum() + (h.kthvalue(2, 0).values * r).sum()
                + (h.median(1).values * r).sum() + h.median() + (h.cummax(1).values * r).sum()
                + (h.logcumsumexp(1) * r).sum() + (h.cumprod(0) * r).sum() + (h.tril(-1) * r).sum()
                + (h.diagonal(1) * r[:3]).sum())
        loss.backward()
        return loss.detach()

    compiled = ag.compile(step)
    for seed in range(4):
        x = ag.tensor(np.random.default_rng(seed).standard_normal((4, 4)), device=device)
        got = compiled(x)
        g = w.grad.numpy().copy()
        want = step(x)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose(g, w.grad.numpy(), rtol=1e-10, atol=1e-12)
