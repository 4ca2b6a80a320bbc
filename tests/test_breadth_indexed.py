"""Issue 26's search and indexed writes against PyTorch: nonzero, argwhere, masked_fill, masked_select,
take, index_add/index_copy/index_fill, scatter, scatter_reduce (every reduction, include_self both ways,
ties and zeros), searchsorted, bucketize, bincount, unique, unique_consecutive and the in-place forms
(values, gradients, version counters). Each comparison runs where torch is installed; errors, the sync
debug mode and vmap run everywhere."""
import numpy as np
import pytest

import autograd_gpu as ag

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

RNG = np.random.default_rng(26)


def _pair(a, device, requires_grad=False):
    """The same values as an ag tensor on ``device`` and a torch tensor."""
    a = np.asarray(a)
    t = torch.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f")
    return ag.tensor(a, device=device, requires_grad=requires_grad and a.dtype.kind == "f"), t


def _np(t):
    return t.detach().numpy() if torch is not None and isinstance(t, torch.Tensor) else t.numpy()


def _same(got, want, rtol=1e-7, atol=1e-12):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, rtol, atol)
        return
    g, w = _np(got), _np(want)
    assert g.shape == w.shape, f"shape {g.shape} != torch's {w.shape}"
    assert g.dtype == w.dtype, f"dtype {g.dtype} != torch's {w.dtype}"
    np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _grads(ag_out, t_out, ag_in, t_in, seed=0):
    """Backward a random cotangent through both and compare the inputs' gradients."""
    g = np.random.default_rng(seed).normal(size=tuple(t_out.shape))
    ag_out.backward(ag.tensor(g, device=ag_out.device))
    t_out.backward(torch.tensor(g))
    for a, t in zip(ag_in, t_in):
        if t.grad is None:
            assert a.grad is None or not np.any(a.grad.numpy())
        else:
            _same(a.grad, t.grad)


# --------------------------------------------------------------------------- scatter_reduce
# repeated targets, ties with the target's own value (amax/amin), zeros (prod)
SELF = np.array([[1.0, 5.0, 2.0, 2.0], [0.0, -1.0, 3.0, 4.0], [7.0, 0.5, 0.0, -2.0]])
SRC = np.array([[5.0, 5.0, 0.0, 3.0, 3.0], [2.0, -1.0, -1.0, 4.0, 0.0], [7.0, 0.0, 1.5, 0.0, 9.0]])
INDEX = np.array([[1, 1, 2, 2, 0], [3, 1, 1, 3, 3], [0, 0, 2, 1, 1]])


@needs_torch
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_torch_values_and_gradients(device, reduce, include_self):
    x, tx = _pair(SELF, device, True)
    s, ts = _pair(SRC, device, True)
    i, ti = _pair(INDEX, device)
    y = ag.scatter_reduce(x, 1, i, s, reduce, include_self=include_self)
    ty = torch.scatter_reduce(tx, 1, ti, ts, reduce, include_self=include_self)
    _same(y, ty)
    _grads(y, ty, (x, s), (tx, ts))


@needs_torch
def test_scatter_reduce_amax_splits_the_gradient_among_equal_maxima(device):
    x, tx = _pair([1.0, 5.0, 2.0, 2.0], device, True)
    s, ts = _pair([5.0, 5.0, 0.0, 3.0, 3.0], device, True)
    i, ti = _pair([1, 1, 2, 2, 0], device)
    y, ty = x.scatter_reduce(0, i, s, "amax"), tx.scatter_reduce(0, ti, ts, "amax")
    y.backward(ag.ones(4, device=device, dtype=ag.float64))
    ty.backward(torch.ones(4, dtype=torch.float64))
    _same(x.grad, tx.grad)
    _same(s.grad, ts.grad)
    assert np.allclose(s.grad.numpy()[:2], 1 / 3)        # three equal maxima at target 1


@needs_torch
def test_scatter_reduce_src_larger_than_index_and_int_mean(device):
    x, tx = _pair(RNG.normal(size=(3, 4)), device, True)
    s, ts = _pair(RNG.normal(size=(4, 6)), device, True)
    i, ti = _pair([[0, 2, 2], [1, 1, 0]], device)
    y, ty = ag.scatter_reduce(x, 0, i, s, "mean"), torch.scatter_reduce(tx, 0, ti, ts, "mean")
    _same(y, ty)                       # (torch's backward refuses a src larger than the index; here it is 0)
    y.sum().backward()
    assert np.allclose(s.grad.numpy()[2:], 0) and np.allclose(s.grad.numpy()[:, 3:], 0)
    xi, txi = _pair(np.array([[7, 8, 9]]), device)
    si, tsi = _pair(np.array([[2, 3, 4, 5]]), device)
    ii, tii = _pair([[0, 0, 2, 2]], device)
    _same(ag.scatter_reduce(xi, 1, ii, si, "mean"), torch.scatter_reduce(txi, 1, tii, tsi, "mean"))


@needs_torch
def test_scatter_reduce_of_float32_and_many_repeats(device):
    """Long runs of one target (the scan takes log2(n) steps) in float32, against torch."""
    x, tx = _pair(RNG.normal(size=(3, 5)).astype(np.float32), device)
    s, ts = _pair(RNG.uniform(0.9, 1.1, size=(3, 300)).astype(np.float32), device)
    i, ti = _pair(RNG.integers(0, 5, size=(3, 300)), device)
    for reduce in ("prod", "amax", "amin", "sum", "mean"):
        _same(ag.scatter_reduce(x, 1, i, s, reduce), torch.scatter_reduce(tx, 1, ti, ts, reduce), rtol=1e-5,
              atol=1e-5)


@needs_torch
def test_scatter_reduce_twice_differentiable(device):
    x = ag.tensor(RNG.normal(size=(3, 4)), device=device, requires_grad=True)
    s = ag.tensor(RNG.normal(size=(3, 4)), device=device, requires_grad=True)
    i = ag.tensor(INDEX[:, :4] % 3, device=device)
    for reduce in ("sum", "prod", "mean", "amax"):
        assert ag.autograd.gradgradcheck(lambda a, b: ag.scatter_reduce(a, 0, i, b, reduce), (x, s))


@needs_torch
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter")     # torch's deprecation, not ours
def test_scatter_with_src_value_and_reduce(device):
    x, tx = _pair(RNG.normal(size=(3, 4)), device, True)
    s, ts = _pair(RNG.normal(size=(2, 4)), device, True)
    i, ti = _pair([[0, 1, 2, 0], [2, 0, 1, 1]], device)
    y, ty = x.scatter(0, i, s), tx.scatter(0, ti, ts)
    _same(y, ty)
    _grads(y, ty, (x, s), (tx, ts))
    _same(ag.scatter(x, 1, i, value=2.5), torch.scatter(tx, 1, ti, value=2.5))
    _same(ag.scatter(x, 1, i, 2.5), torch.scatter(tx, 1, ti, 2.5))
    for reduce in ("add", "multiply"):
        _same(x.scatter(0, i, s, reduce=reduce), tx.scatter(0, ti, ts, reduce=reduce))
        _same(x.scatter(0, i, 1.5, reduce=reduce), tx.scatter(0, ti, 1.5, reduce=reduce))


# --------------------------------------------------------------------------- index_add / copy / fill
@needs_torch
def test_index_add_copy_fill_match_torch(device):
    x, tx = _pair(RNG.normal(size=(4, 3)), device, True)
    s, ts = _pair(RNG.normal(size=(5, 3)), device, True)
    i, ti = _pair([0, 2, 0, 3, 0], device)
    y, ty = ag.index_add(x, 0, i, s, alpha=-0.5), torch.index_add(tx, 0, ti, ts, alpha=-0.5)
    _same(y, ty)
    _grads(y, ty, (x, s), (tx, ts))

    x, tx = _pair(RNG.normal(size=(2, 4)), device, True)
    s, ts = _pair(RNG.normal(size=(2, 2)), device, True)
    i, ti = _pair([3, 0], device)
    y, ty = x.index_copy(1, i, s), tx.index_copy(1, ti, ts)
    _same(y, ty)
    _grads(y, ty, (x, s), (tx, ts))

    x, tx = _pair(RNG.normal(size=(3, 4)), device, True)
    v, tv = _pair(np.array(1.25), device, True)
    i, ti = _pair([2, 2, 0], device)
    y, ty = x.index_fill(0, i, v), tx.index_fill(0, ti, tv)
    _same(y, ty)
    _grads(y, ty, (x, v), (tx, tv))
    _same(ag.index_fill(x, -1, i, -3.0), torch.index_fill(tx, -1, ti, -3.0))


@needs_torch
def test_index_ops_on_0d_and_int_tensors(device):
    x, tx = _pair(np.array(2.0), device)
    s, ts = _pair(np.array(3.0), device)
    i, ti = _pair([0], device)
    _same(ag.index_add(x, 0, i, s), torch.index_add(tx, 0, ti, ts))
    _same(ag.index_copy(x, 0, i, s), torch.index_copy(tx, 0, ti, ts))
    _same(ag.index_fill(x, 0, i, 7.0), torch.index_fill(tx, 0, ti, 7.0))
    xi, txi = _pair(np.arange(6).reshape(2, 3), device)
    si, tsi = _pair(np.ones((2, 2), dtype=np.int64), device)
    j, tj = _pair([2, 2], device)
    _same(ag.index_add(xi, 1, j, si), torch.index_add(txi, 1, tj, tsi))


# --------------------------------------------------------------------------- masked_fill, masked_select, take
@needs_torch
def test_masked_fill_masked_select_take_match_torch(device):
    x, tx = _pair(RNG.normal(size=(3, 4)), device, True)
    m, tm = _pair(RNG.random((4,)) > 0.5, device)
    v, tv = _pair(np.array(-2.0), device, True)
    y, ty = x.masked_fill(m, v), tx.masked_fill(tm, tv)
    _same(y, ty)
    _grads(y, ty, (x, v), (tx, tv))
    _same(ag.masked_fill(x, m, 0.5), torch.masked_fill(tx, tm, 0.5))

    x, tx = _pair(RNG.normal(size=(3, 1)), device, True)
    m, tm = _pair(RNG.random((3, 4)) > 0.3, device)
    y, ty = ag.masked_select(x, m), torch.masked_select(tx, tm)
    _same(y, ty)
    _grads(y, ty, (x,), (tx,))

    x, tx = _pair(RNG.normal(size=(3, 4)), device, True)
    i, ti = _pair([[0, 11, -1], [5, 5, 5]], device)
    y, ty = x.take(i), tx.take(ti)
    _same(y, ty)
    _grads(y, ty, (x,), (tx,))


@needs_torch
def test_masked_fill_keeps_an_int_tensors_dtype(device):
    x, tx = _pair(np.arange(6).reshape(2, 3), device)
    m, tm = _pair(np.array([True, False, True]), device)
    _same(x.masked_fill(m, 9), tx.masked_fill(tm, 9))


# --------------------------------------------------------------------------- value-dependent shapes
@needs_torch
def test_nonzero_and_argwhere_match_torch(device):
    a = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    x, tx = _pair(a, device)
    _same(ag.nonzero(x), torch.nonzero(tx))
    _same(x.argwhere(), tx.argwhere())
    _same(x.nonzero(as_tuple=True), torch.nonzero(tx, as_tuple=True))
    for v in (0.0, 3.0):
        z, tz = _pair(np.array(v), device)
        _same(ag.nonzero(z), torch.nonzero(tz))
        _same(ag.nonzero(z, as_tuple=True), torch.nonzero(tz, as_tuple=True))
    e, te = _pair(np.zeros((0, 2)), device)
    _same(ag.argwhere(e), torch.argwhere(te))


@needs_torch
def test_unique_and_unique_consecutive_match_torch(device):
    a = np.array([[3, 1, 3, 2], [2, 2, 0, 3]])
    x, tx = _pair(a, device)
    for inv in (False, True):
        for cnt in (False, True):
            _same(ag.unique(x, return_inverse=inv, return_counts=cnt),
                  torch.unique(tx, return_inverse=inv, return_counts=cnt))
            _same(x.unique_consecutive(return_inverse=inv, return_counts=cnt),
                  tx.unique_consecutive(return_inverse=inv, return_counts=cnt))
    r = np.array([[1, 2], [1, 2], [0, 1], [1, 2], [1, 2]])
    y, ty = _pair(r, device)
    _same(ag.unique(y, dim=0, return_inverse=True, return_counts=True),
          torch.unique(ty, dim=0, return_inverse=True, return_counts=True))
    _same(ag.unique_consecutive(y, dim=0, return_inverse=True, return_counts=True),
          torch.unique_consecutive(ty, dim=0, return_inverse=True, return_counts=True))
    f, tf = _pair(np.array([1.0, np.nan, 1.0, np.nan, -0.5]), device)
    _same(ag.unique(f), torch.unique(tf))          # NaNs are not merged


@needs_torch
def test_bincount_matches_torch(device):
    a = np.array([0, 3, 3, 1, 7, 3])
    x, tx = _pair(a, device)
    _same(ag.bincount(x), torch.bincount(tx))
    _same(x.bincount(minlength=10), tx.bincount(minlength=10))
    w, tw = _pair(RNG.normal(size=6), device, True)
    y, ty = ag.bincount(x, w, minlength=3), torch.bincount(tx, tw, minlength=3)
    _same(y, ty)
    wi, twi = _pair(np.arange(6), device)
    _same(ag.bincount(x, wi), torch.bincount(tx, twi))             # integer weights count in float64
    e, te = _pair(np.zeros(0, dtype=np.int64), device)
    _same(ag.bincount(e, minlength=2), torch.bincount(te, minlength=2))
    y.sum().backward()                                             # differentiable in the weights
    assert np.allclose(w.grad.numpy(), 1.0)


@needs_torch
def test_searchsorted_and_bucketize_match_torch(device):
    seq = np.array([-1.0, 0.0, 0.0, 2.5, 4.0])
    vals = np.array([[-3.0, 0.0, 1.0], [2.5, 4.0, 9.0]])
    s, ts = _pair(seq, device)
    v, tv = _pair(vals, device)
    for kw in ({}, {"right": True}, {"side": "right"}, {"side": "left"}, {"out_int32": True}):
        _same(ag.searchsorted(s, v, **kw), torch.searchsorted(ts, tv, **kw))
        _same(ag.bucketize(v, s, **{k: w for k, w in kw.items() if k != "side"}),
              torch.bucketize(tv, ts, **{k: w for k, w in kw.items() if k != "side"}))
    _same(ag.searchsorted(s, 0.0), torch.searchsorted(ts, 0.0))
    rows = np.sort(RNG.normal(size=(2, 3, 6)), axis=-1)
    q = RNG.normal(size=(2, 3, 4))
    q[0, 0, 0] = rows[0, 0, 2]                                         # a tie
    r, tr = _pair(rows, device)
    qq, tq = _pair(q, device)
    for right in (False, True):
        _same(ag.searchsorted(r, qq, right=right), torch.searchsorted(tr, tq, right=right))
    unsorted = np.array([3.0, -1.0, 2.0, 0.5])
    u, tu = _pair(unsorted, device)
    order, torder = _pair(np.argsort(unsorted), device)
    _same(ag.searchsorted(u, v, sorter=order), torch.searchsorted(tu, tv, sorter=torder))
    urows = RNG.normal(size=(2, 5))
    ur, tur = _pair(urows, device)
    uo, tuo = _pair(np.argsort(urows, axis=-1), device)
    uq, tuq = _pair(RNG.normal(size=(2, 3)), device)
    _same(ag.searchsorted(ur, uq, sorter=uo, side="right"), torch.searchsorted(tur, tuq, sorter=tuo, side="right"))


def test_searchsorted_puts_nan_last_row_by_row(device):
    rows = ag.tensor([[0.0, 1.0, float("nan")], [0.5, 2.0, 3.0]], device=device)
    q = ag.tensor([[float("nan"), 1.0], [float("nan"), 2.0]], device=device)
    assert ag.searchsorted(rows, q).tolist() == [[2, 1], [3, 1]]
    assert ag.searchsorted(rows, q, right=True).tolist() == [[3, 2], [3, 2]]
    flat = np.searchsorted(np.array([0.0, 1.0, np.nan]), np.array([np.nan, 1.0]))
    assert ag.searchsorted(rows[0], q[0]).tolist() == flat.tolist()


# --------------------------------------------------------------------------- in place
@needs_torch
@pytest.mark.parametrize("name", ["masked_fill_", "index_add_", "index_copy_", "index_fill_", "scatter_",
                                  "scatter_reduce_"])
def test_in_place_forms_bump_the_version_and_differentiate_like_torch(device, name):
    x0 = RNG.normal(size=(3, 4))
    m = np.array([True, False, False, True])
    args = {"masked_fill_": lambda src, idx, mk: (mk, -1.0),
            "index_add_": lambda src, idx, mk: (0, idx, src[:2]),
            "index_copy_": lambda src, idx, mk: (0, idx, src[:2]),
            "index_fill_": lambda src, idx, mk: (1, idx, 0.25),
            "scatter_": lambda src, idx, mk: (0, idx.reshape(1, 2).expand(2, 2), src[:2, :2]),
            "scatter_reduce_": lambda src, idx, mk: (0, idx.reshape(1, 2).expand(3, 2), src[:, :2], "amax")}[name]
    x, tx = _pair(x0, device, True)
    s, ts = _pair(RNG.normal(size=(3, 4)), device, True)
    i, ti = _pair([2, 0], device)
    mk, tmk = _pair(m, device)
    y, ty = x * 1.0, tx * 1.0                         # not leaves: editable in place while recording
    version, tversion = y.version_counter()[0], ty._version
    out = getattr(y, name)(*args(s, i, mk))
    getattr(ty, name)(*args(ts, ti, tmk))
    assert out is y and y.version_counter()[0] == version + 1 and ty._version == tversion + 1
    _same(y, ty)
    _grads(y, ty, (x, s), (tx, ts))


def test_in_place_forms_refuse_a_leaf_that_requires_grad(device):
    x = ag.zeros(3, 4, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        x.index_fill_(0, ag.tensor([1], device=device), 2.0)
    with ag.no_grad():
        x.masked_fill_(ag.tensor([True, False, False, True], device=device), 3.0)
    assert x.numpy()[:, 0].tolist() == [3.0, 3.0, 3.0]


def test_a_saved_tensor_edited_in_place_raises_at_backward(device):
    x = ag.ones(3, device=device, requires_grad=True)
    y = x * 2.0
    z = (y * y).sum()
    y.scatter_(0, ag.tensor([1], device=device), ag.tensor([5.0], device=device))
    with pytest.raises(RuntimeError, match="modified|version|in place|in-place"):
        z.backward()


# --------------------------------------------------------------------------- errors
def test_errors_name_what_was_expected(device):
    x = ag.zeros(3, 4, device=device)
    i = ag.tensor([[0, 1]], device=device)
    with pytest.raises(ValueError, match="reduce"):
        ag.scatter_reduce(x, 0, i, ag.ones(1, 2, device=device), "max")
    with pytest.raises(ValueError, match="reduce 'add' or 'multiply'"):
        ag.scatter(x, 0, i, ag.ones(1, 2, device=device), reduce="sum")
    with pytest.raises(TypeError, match="exactly one of src"):
        ag.scatter(x, 0, i)
    with pytest.raises(TypeError, match="dtype"):
        ag.scatter(x, 0, i, ag.ones(1, 2, device=device, dtype=ag.float64))
    with pytest.raises(TypeError, match="bool mask"):
        x.masked_fill(ag.ones(3, 4, device=device), 1.0)
    with pytest.raises(ValueError, match="does not broadcast"):
        x.masked_fill(ag.ones(2, 3, 4, device=device) > 0, 1.0)
    with pytest.raises(ValueError, match="0-d tensor"):
        x.masked_fill(x > 0, ag.ones(2, device=device))
    with pytest.raises(ValueError, match="source of shape"):
        ag.index_add(x, 0, ag.tensor([0, 1], device=device), ag.ones(3, 4, device=device))
    with pytest.raises(ValueError, match="1-d tensor of non-negative"):
        ag.bincount(ag.tensor([[1, 2]], device=device))
    with pytest.raises(ValueError, match="contradict"):
        ag.searchsorted(ag.tensor([1.0, 2.0], device=device), 1.5, right=True, side="left")
    with pytest.raises(ValueError, match="leading dims"):
        ag.searchsorted(ag.zeros(2, 3, device=device), ag.zeros(3, 1, device=device))
    with pytest.raises(ValueError, match="1-d boundaries"):
        ag.bucketize(ag.zeros(3, device=device), ag.zeros(2, 2, device=device))


def test_out_of_range_indices_raise_index_error(device):
    x = ag.zeros(3, 4, device=device)
    cases = [lambda: ag.scatter_reduce(x, 0, ag.tensor([[3, 0]], device=device), ag.ones(1, 2, device=device), "sum"),
             lambda: ag.scatter(x, 1, ag.tensor([[-1]], device=device), 1.0),
             lambda: ag.index_add(x, 0, ag.tensor([5], device=device), ag.ones(1, 4, device=device)),
             lambda: ag.take(x, ag.tensor([12], device=device)),
             lambda: ag.bincount(ag.tensor([1, -2], device=device))]
    for case in cases:
        with pytest.raises((IndexError, ValueError), match="out of bounds|non-negative"):
            case()
            ag.cuda.synchronize() if str(device).startswith("cuda") else None   # device-side checks report here


# --------------------------------------------------------------------------- sync debug mode, vmap
@pytest.mark.gpu
def test_value_dependent_ops_declare_their_read_and_the_others_make_none():
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs these on the CuPy stand-in)")
    x = ag.tensor([[0.0, 1.0], [2.0, 0.0]], device="cuda")
    i = ag.tensor([[1, 0]], device="cuda")
    ag.cuda.set_sync_debug_mode("error")
    try:
        for name, call in [("nonzero", lambda: ag.nonzero(x)), ("nonzero", lambda: ag.argwhere(x)),
                           ("mask", lambda: ag.masked_select(x, x > 0)), ("unique", lambda: ag.unique(x)),
                           ("unique_consecutive", lambda: ag.unique_consecutive(x)),
                           ("bincount", lambda: ag.bincount(i.reshape(-1), minlength=4))]:
            with pytest.raises(RuntimeError, match=name):
                call()
        ag.scatter_reduce(x, 0, i, x[:1], "amax")            # none of these reads back
        ag.scatter(x, 0, i, 1.0)
        ag.index_add(x, 1, ag.tensor([1, 1], device="cuda"), x)
        ag.searchsorted(ag.tensor([0.0, 1.0, 2.0], device="cuda"), x)
        ag.searchsorted(ag.tensor([[0.0, 1.0], [1.0, 2.0]], device="cuda"), x)
        x.masked_fill(x > 0, 1.0)
        x.take(ag.tensor([3, 0], device="cuda"))
    finally:
        ag.cuda.set_sync_debug_mode("default")


def test_vmap_of_scatter_reduce_and_index_add_matches_a_loop(device):
    xs = ag.tensor(RNG.normal(size=(4, 3, 5)), device=device)
    ss = ag.tensor(RNG.normal(size=(4, 3, 6)), device=device)
    idx = ag.tensor(RNG.integers(0, 5, size=(3, 6)), device=device)
    for reduce in ("sum", "prod", "amax", "mean"):
        got = ag.func.vmap(lambda a, b: ag.scatter_reduce(a, 1, idx, b, reduce))(xs, ss)
        want = ag.stack([ag.scatter_reduce(xs[k], 1, idx, ss[k], reduce) for k in range(4)])
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    shared = ag.tensor(RNG.normal(size=(3, 6)), device=device)
    got = ag.func.vmap(lambda a: ag.scatter(a, 1, idx[:, :2], shared[:, :2]))(xs)
    want = ag.stack([ag.scatter(xs[k], 1, idx[:, :2], shared[:, :2]) for k in range(4)])
    np.testing.assert_allclose(got.numpy(), want.numpy())
    j = ag.tensor([4, 0, 4], device=device)
    got = ag.func.vmap(lambda a, b: ag.index_add(a, 1, j, b[:, :3]))(xs, ss)
    want = ag.stack([ag.index_add(xs[k], 1, j, ss[k][:, :3]) for k in range(4)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)


def test_vmap_of_index_copy_masked_fill_take_runs_without_the_loop(device):
    import warnings
    xs = ag.tensor(RNG.normal(size=(4, 3, 5)), device=device)
    m = ag.tensor([True, False, True, False, False], device=device)
    i = ag.tensor([4, 0], device=device)
    fns = [lambda a: a.index_copy(1, i, a[:, :2] * 2.0),                  # source batched too
           lambda a: a.index_copy(1, i, ag.ones(3, 2, device=device, dtype=ag.float64)),
           lambda a: a.index_fill(1, i, -1.0),
           lambda a: a.masked_fill(m, a.sum()),
           lambda a: a.take(ag.tensor([0, 7, 14], device=device)),
           lambda a: a.scatter(1, ag.tensor([[1], [2], [0]], device=device), a[:, :1] * 3.0)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # the per-example loop would warn
        for f in fns:
            got = ag.func.vmap(f)(xs)
            want = ag.stack([f(xs[k]) for k in range(4)])
            np.testing.assert_allclose(got.numpy(), want.numpy())
