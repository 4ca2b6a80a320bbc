"""Products, elementwise maths, shape ops and reductions of the breadth issue, compared with PyTorch (where
torch is installed): values and gradients, at the awkward points the op table's random inputs do not
reach (zeros, ties, NaN, infinities, the jumps of % and fmod, poles of the special functions); the
NumPy ports of the special functions against PyTorch; errors; vmap against a loop."""
import math

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.backends import _special
from autograd_gpu.func import vmap

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")
RNG = np.random.default_rng(0)


def _t(a, device, requires_grad=False):
    return ag.tensor(np.asarray(a, dtype=np.float64), device=device, requires_grad=requires_grad)


def _pt(a, requires_grad=False):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def _np(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.numpy())


def _same(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(_np(got), _np(want), rtol=rtol, atol=atol, equal_nan=True)


def _compare(f_ag, f_pt, arrays, device, grad=True, rtol=1e-10, atol=1e-12):
    """Forward, and the gradients of sum(w * f(xs)) for a fixed random w, in both libraries."""
    xs = [_t(a, device, grad) for a in arrays]
    ys = [_pt(a, grad) for a in arrays]
    out_ag, out_pt = f_ag(*xs), f_pt(*ys)
    _same(out_ag, out_pt, rtol, atol)
    if not grad:
        return
    w = RNG.uniform(0.5, 1.5, tuple(out_pt.shape))
    (out_ag * _t(w, device)).sum().backward()
    (out_pt * torch.tensor(w)).sum().backward()
    for x, y in zip(xs, ys):
        want = y.grad if y.grad is not None else torch.zeros_like(y)
        got = x.grad if x.grad is not None else ag.zeros(*x.shape, dtype=ag.float64)
        _same(got, want, rtol, atol)


# --------------------------------------------------------------------------- elementwise
U = np.array([[-0.9, -0.3, 0.0, 0.4], [0.7, 0.95, -0.55, 0.2]])
POS = np.array([[0.1, 0.5, 1.0, 2.0], [3.5, 7.25, 12.0, 0.03]])
UNARY = [
    ("asin", U), ("acos", U), ("atan", U * 5), ("cosh", U * 3), ("asinh", U * 4), ("acosh", POS + 1.01),
    ("atanh", U), ("log2", POS), ("log10", POS), ("exp2", U * 4), ("erfc", U * 6), ("erfinv", U),
    ("lgamma", POS), ("lgamma", -POS[:, :2] - 0.45), ("digamma", POS), ("digamma", -POS[:, :2] - 0.45),
    ("sinc", U * 3), ("deg2rad", U * 200), ("rad2deg", U), ("frac", U * 7.3), ("logit", U * 0.5 + 0.5),
    ("trunc", U * 7.3), ("nan_to_num", [[NAN, INF, -INF, 1.5]]),
]


@pytest.mark.parametrize("name,a", UNARY, ids=[f"{n}{i}" for i, (n, _) in enumerate(UNARY)])
def test_unary_values_and_gradients_match_pytorch(name, a, device):
    _compare(getattr(ag, name), getattr(torch, name), [a], device, rtol=1e-9, atol=1e-10)   # trunc: gradient 0
    x = _t(a, device)
    _same(getattr(x, name)(), getattr(torch, name)(_pt(a)), rtol=1e-9, atol=1e-10)      # the Tensor method


def test_polygamma_orders_match_pytorch(device):
    for n in range(4):
        _compare(lambda x: ag.polygamma(n, x), lambda y: torch.polygamma(n, y), [POS], device, rtol=1e-8)
        _same(_t(POS, device).polygamma(n), torch.polygamma(n, _pt(POS)), rtol=1e-8)
    _same(ag.polygamma(1, _t([-1.5, -0.25], device)), torch.polygamma(1, _pt([-1.5, -0.25])), rtol=1e-8)
    with pytest.raises(ValueError, match="non-negative int"):
        ag.polygamma(-1, _t(POS, device))


def test_special_functions_at_their_edges_match_pytorch(device):
    edges = {"erfinv": [-1.0, 1.0, 0.0, 1.5, -0.999999], "lgamma": [0.0, -1.0, -2.0, 1.0, 2.0, 1e-8, 171.5],
             "digamma": [0.0, 1.0, 1e-6, 100.0], "erfc": [-10.0, 0.0, 6.0, 10.0, 26.0]}
    for name, v in edges.items():
        _same(getattr(ag, name)(_t(v, device)), getattr(torch, name)(_pt(v)), rtol=1e-9, atol=1e-300)


@pytest.mark.parametrize("name", ["erfc", "erfinv", "lgamma", "digamma", "polygamma"])
def test_numpy_ports_of_the_special_functions_match_pytorch(name):
    """The ports the CPU backend uses without SciPy, over a wide range (SciPy, where installed, is used
    instead: the same checks then cover it through the ops above)."""
    if name == "erfinv":
        x = np.concatenate([np.linspace(-0.999999, 0.999999, 4001), [-1.0, 1.0, 1.2]])
    elif name == "erfc":
        x = np.linspace(-6, 26, 4001)
    else:
        x = np.concatenate([np.linspace(0.01, 60, 3001), np.linspace(-7.9, -0.1, 400) + 1e-3])
    if name == "polygamma":
        for n in (1, 2, 3):
            want = torch.polygamma(n, torch.tensor(x)).numpy()
            np.testing.assert_allclose(_special._polygamma_port(n, x), want, rtol=1e-9)
        return
    port = {"erfc": _special._erfc_port, "erfinv": _special._erfinv_port, "lgamma": _special._lgamma_port,
            "digamma": _special._digamma_port}[name]
    with np.errstate(all="ignore"):
        got = port(x)
    np.testing.assert_allclose(got, getattr(torch, name)(torch.tensor(x)).numpy(), rtol=1e-9, atol=1e-13)


A2 = np.array([[5.5, -3.2, 7.0, -7.5], [0.3, -0.3, 4.0, -4.1]])
B2 = np.array([[2.0, 2.0, -3.0, -2.0], [0.7, 0.7, -1.5, 1.5]])
BINARY = ["atan2", "hypot", "fmod", "remainder", "logaddexp", "logaddexp2", "xlogy", "copysign"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_values_and_gradients_match_pytorch(name, device):
    a, b = (A2, np.abs(B2)) if name == "xlogy" else (A2, B2)
    _compare(getattr(ag, name), getattr(torch, name), [a, b], device, rtol=1e-9)
    _same(getattr(_t(a, device), name)(_t(b, device)), getattr(torch, name)(_pt(a), _pt(b)), rtol=1e-9)


def test_mod_operator_is_remainder_and_differentiable_as_pytorch(device):
    _compare(lambda x, y: x % y, lambda x, y: x % y, [A2, B2], device)
    # PyTorch has no gradient for a number % tensor; the same formula written out
    _compare(lambda x, y: 7.5 % y, lambda x, y: 7.5 - torch.floor(7.5 / y) * y + 0 * x, [A2, B2], device)
    _compare(lambda x, y: x % 2.5, lambda x, y: x % 2.5 + 0 * y, [A2, B2], device)
    ints = ag.tensor([7, -7, 5], device=device)
    assert (ints % 3).tolist() == [1, 2, 2] and (ints % 3).dtype == ag.int64
    assert ag.fmod(ints, 3).tolist() == [1, -1, 2]
    assert (7 % ag.tensor([3, -4], device=device)).tolist() == [1, -1]


def test_awkward_points_match_pytorch(device):
    # logaddexp of two -inf is -inf; xlogy(0, 0) and xlogy(0, inf) are 0, xlogy(x, nan) is nan
    _same(ag.logaddexp(_t([-INF, INF, -INF], device), _t([-INF, 1.0, 3.0], device)),
          torch.logaddexp(_pt([-INF, INF, -INF]), _pt([-INF, 1.0, 3.0])))
    _compare(ag.xlogy, torch.xlogy, [[0.0, 0.0, 2.0, 0.0], [0.0, 3.0, 0.5, 2.0]], device)
    _same(ag.xlogy(_t([0.0, 1.0], device), _t([NAN, NAN], device)), torch.xlogy(_pt([0.0, 1.0]), _pt([NAN, NAN])))
    _same(ag.xlogy(2.0, _t([0.5, 3.0], device)), torch.xlogy(2.0, _pt([0.5, 3.0])))
    # copysign reads the sign bit of -0.0; sinc at 0 is 1 with gradient 0
    _same(ag.copysign(_t([1.0, 2.0, -3.0], device), _t([-0.0, 0.0, 5.0], device)),
          torch.copysign(_pt([1.0, 2.0, -3.0]), _pt([-0.0, 0.0, 5.0])))
    _compare(ag.sinc, torch.sinc, [[0.0, 0.5, -1.0]], device)
    _compare(lambda x: ag.logit(x, eps=0.1), lambda y: torch.logit(y, eps=0.1), [[0.05, 0.1, 0.5, 0.95]], device)
    _compare(lambda x: ag.nan_to_num(x, nan=1.0, posinf=9.0, neginf=-9.0),
             lambda y: torch.nan_to_num(y, nan=1.0, posinf=9.0, neginf=-9.0), [[NAN, INF, -INF, 2.0]], device)
    _compare(lambda x, e, w: ag.lerp(x, e, w), torch.lerp, [A2, B2, np.full((2, 4), 0.3)], device)
    _compare(lambda x, e: ag.lerp(x, e, 0.75), lambda x, e: torch.lerp(x, e, 0.75), [A2, B2], device)
    _same(ag.heaviside(_t([-1.0, 0.0, 2.0], device), _t([0.5], device)),
          torch.heaviside(_pt([-1.0, 0.0, 2.0]), _pt([0.5])))
    ints = ag.tensor([1, 2, 4], device=device)
    assert ag.log2(ints).dtype == ag.float32 and ag.log2(ints).tolist() == [0.0, 1.0, 2.0]


# --------------------------------------------------------------------------- products
M = RNG.standard_normal((3, 4))
N = RNG.standard_normal((4, 2))


def test_products_match_pytorch(device):
    _compare(ag.mm, torch.mm, [M, N], device)
    _compare(ag.bmm, torch.bmm, [RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))], device)
    _compare(ag.mv, torch.mv, [M, RNG.standard_normal(4)], device)
    _compare(lambda i, a, b: ag.addmm(i, a, b, beta=0.5, alpha=2.0),
             lambda i, a, b: torch.addmm(i, a, b, beta=0.5, alpha=2.0), [RNG.standard_normal(2), M, N], device)
    _compare(lambda i, a, v: ag.addmv(i, a, v, alpha=-1.0), lambda i, a, v: torch.addmv(i, a, v, alpha=-1.0),
             [RNG.standard_normal(3), M, RNG.standard_normal(4)], device)
    _compare(lambda i, a, b: ag.baddbmm(i, a, b, beta=2.0, alpha=0.5),
             lambda i, a, b: torch.baddbmm(i, a, b, beta=2.0, alpha=0.5),
             [RNG.standard_normal((2, 3, 5)), RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 4, 5))], device)
    _compare(ag.kron, torch.kron, [M[:2, :3], N], device)
    _compare(ag.kron, torch.kron, [RNG.standard_normal(3), N], device)
    _compare(lambda a, b: ag.cross(a, b, dim=1), lambda a, b: torch.cross(a, b, dim=1),
             [RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))], device)
    _compare(ag.inner, torch.inner, [M, RNG.standard_normal((5, 4))], device)
    _compare(ag.vdot, torch.vdot, [M[0], N[:, 0]], device)
    _compare(ag.outer, torch.outer, [M[0], N[:, 0]], device)
    for method in ("mm", "kron", "inner"):
        _same(getattr(_t(M, device), method)(_t(N, device) if method == "mm" else _t(M, device)),
              getattr(torch, method)(_pt(M), _pt(N) if method == "mm" else _pt(M)))


def test_addmm_with_beta_zero_ignores_nan_in_input(device):
    got = ag.addmm(_t([[NAN, NAN]], device), _t(M, device), _t(N, device), beta=0)
    _same(got, torch.addmm(_pt([[NAN, NAN]]), _pt(M), _pt(N), beta=0))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, INF])
def test_cdist_matches_pytorch_with_gradient_zero_at_zero_distance(p, device):
    x1 = RNG.standard_normal((2, 3, 4))
    x2 = RNG.standard_normal((2, 5, 4))
    x2[0, 1] = x1[0, 2]                                 # one zero distance
    x2[1, 0, :2] = x1[1, 1, :2]                         # and coordinates that agree (|d| = 0 in the p-norm)
    _compare(lambda a, b: ag.cdist(a, b, p=p), lambda a, b: torch.cdist(a, b, p=p), [x1, x2], device,
             rtol=1e-8, atol=1e-10)                      # p = 0: PyTorch's gradient is 0


def test_product_errors_name_what_was_expected(device):
    a3 = _t(np.ones((2, 3, 4)), device)
    with pytest.raises(RuntimeError, match="mm: expected input as a 2-D tensor, got 3-D"):
        ag.mm(a3, _t(N, device))
    with pytest.raises(RuntimeError, match=r"mm: shapes cannot be multiplied \(3x4 and 3x4\)"):
        ag.mm(_t(M, device), _t(M, device))
    with pytest.raises(RuntimeError, match="bmm: expected equal batch sizes, got 2 and 3"):
        ag.bmm(a3, _t(np.ones((3, 4, 2)), device))
    with pytest.raises(RuntimeError, match="cross: no dimension of size 3"):
        ag.cross(_t(N, device), _t(N, device))
    with pytest.raises(RuntimeError, match="vdot: expected two 1-D tensors"):
        ag.vdot(_t(M, device), _t(M, device))
    with pytest.raises(RuntimeError, match="cdist: expected p >= 0"):
        ag.cdist(_t(M, device), _t(M, device), p=-1.0)
    with pytest.raises(RuntimeError, match="addmm: input of shape"):
        ag.addmm(_t(np.ones(3), device), _t(M, device), _t(N, device))


def test_cross_without_dim_takes_the_first_dim_of_size_3_as_pytorch(device):
    a, b = RNG.standard_normal((3, 3, 2)), RNG.standard_normal((3, 3, 2))
    _same(ag.cross(_t(a, device), _t(b, device)), torch.linalg.cross(_pt(a), _pt(b), dim=0))


# --------------------------------------------------------------------------- shape
def test_shape_ops_match_pytorch(device):
    x = RNG.standard_normal((2, 3, 4))
    _compare(ag.fliplr, torch.fliplr, [x], device)
    _compare(ag.flipud, torch.flipud, [x], device)
    for k in (-3, -1, 0, 1, 2, 3, 5):
        _compare(lambda a: ag.rot90(a, k, (2, 0)), lambda a: torch.rot90(a, k, (2, 0)).clone(), [x], device)
    _compare(lambda a: ag.narrow(a, -1, -3, 2), lambda a: torch.narrow(a, -1, -3, 2), [x], device)
    _compare(lambda a: ag.narrow(a, 1, ag.tensor(1), 2), lambda a: torch.narrow(a, 1, torch.tensor(1), 2), [x],
             device)
    _compare(lambda a: ag.movedim(a, (0, 2), (1, 0)), lambda a: torch.movedim(a, (0, 2), (1, 0)), [x], device)
    _compare(lambda a: ag.unflatten(a, 2, (2, -1)), lambda a: torch.unflatten(a, 2, (2, -1)), [x], device)
    v = [0.0, 1.5, -2.0]
    _same(ag.vander(_t(v, device), 4), torch.vander(_pt(v), 4))
    # torch.vander's own backward fails (an in-place write), so the gradient is compared with its columns
    _compare(lambda a: ag.vander(a, 4), lambda a: torch.stack([a ** 3, a ** 2, a, torch.ones_like(a)], 1), [v], device)
    for spec in (3, 5, [1, 3], (2, 1), [0, 9], ag.tensor([1, 2])):
        got = ag.tensor_split(_t(np.arange(7.0), device), spec)
        want = torch.tensor_split(torch.arange(7.0), spec if not isinstance(spec, ag.Tensor) else torch.tensor([1, 2]))
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
    for indexing in ("ij", "xy"):
        vs = [RNG.standard_normal(2), RNG.standard_normal(3), RNG.standard_normal(4)]
        got = ag.meshgrid(*[_t(v, device) for v in vs], indexing=indexing)
        want = torch.meshgrid(*[_pt(v) for v in vs], indexing=indexing)
        for g, w in zip(got, want):
            _same(g, w)
    _same(ag.cartesian_prod(_t([1.0, 2.0], device), _t([3.0, 4.0, 5.0], device)),
          torch.cartesian_prod(_pt([1.0, 2.0]), _pt([3.0, 4.0, 5.0])))
    for f in ("atleast_1d", "atleast_2d", "atleast_3d"):
        for a in (2.0, [1.0, 2.0], [[1.0, 2.0]], np.ones((2, 1, 3))):
            assert getattr(ag, f)(_t(a, device)).shape == tuple(getattr(torch, f)(_pt(a)).shape)
        assert isinstance(getattr(ag, f)(_t(1.0, device), _t(2.0, device)), tuple)
    pieces = [[1.0, 2.0], [3.0, 4.0]]
    for f in ("hstack", "vstack", "dstack", "column_stack"):
        _same(getattr(ag, f)([_t(p, device) for p in pieces]), getattr(torch, f)([_pt(p) for p in pieces]))
    a, b = ag.broadcast_tensors(_t([[1.0], [2.0]], device), _t([3.0, 4.0, 5.0], device))
    assert a.shape == b.shape == (2, 3)


def test_shape_errors_name_what_was_expected(device):
    with pytest.raises(RuntimeError, match="fliplr: expected a tensor of at least 2 dims, got 1-D"):
        ag.fliplr(_t([1.0], device))
    with pytest.raises(RuntimeError, match="exceeds dim 0 of size 3"):
        ag.narrow(_t([1.0, 2.0, 3.0], device), 0, 2, 2)
    with pytest.raises(ValueError, match="meshgrid: indexing must be 'ij' or 'xy'"):
        ag.meshgrid(_t([1.0], device), indexing="ji")
    with pytest.raises(ValueError, match="cannot reshape a tensor of 4 elements"):
        ag.unflatten(_t([1.0, 2.0, 3.0, 4.0], device), 0, (3, -1))


# --------------------------------------------------------------------------- reductions
def test_reductions_match_pytorch(device):
    x = RNG.standard_normal((3, 5))
    for kw in ({}, {"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"dim": 0, "correction": 0}):
        for f in ("var_mean", "std_mean"):
            got, want = getattr(ag, f)(_t(x, device), **kw), getattr(torch, f)(_pt(x), **kw)
            _same(got[0], want[0])
            _same(got[1], want[1])
    _same(ag.std_mean(_t(x, device), False)[0], torch.std_mean(_pt(x), False)[0])     # the unbiased overload
    ties = [[1.0, 3.0, 3.0, -1.0], [-1.0, 2.0, 0.0, -1.0]]
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        _compare(lambda a: sum(ag.aminmax(a, **kw)), lambda a: sum(torch.aminmax(a, **kw)), [ties], device)
    r = ag.aminmax(_t(ties, device), dim=1)
    assert r.min.tolist() == [-1.0, -1.0] and r.max.tolist() == [3.0, 2.0]
    _same(ag.amax(_t(ties, device), dim=(0, 1)), torch.amax(_pt(ties), dim=(0, 1)))
    nans = [[1.0, NAN, 2.0], [NAN, 3.0, NAN]]
    assert math.isnan(ag.nanmean(_t([NAN, NAN], device)).item())       # an all-NaN slice: NaN, as PyTorch
    for kw in ({}, {"dim": 1}, {"dim": 0, "keepdim": True}):
        _compare(lambda a: ag.nansum(a, **kw), lambda a: torch.nansum(a, **kw), [nans], device)
        _compare(lambda a: ag.nanmean(a, **kw), lambda a: torch.nanmean(a, **kw), [nans], device)
    z = [[0.0, 1.0, 0.0], [2.0, 0.0, -1.0]]
    for dim in (None, 0, (0, 1)):
        got, want = ag.count_nonzero(_t(z, device), dim), torch.count_nonzero(_pt(z), dim)
        assert got.dtype == ag.int64 and np.array_equal(_np(got), want.numpy())
    for p, dim, maxnorm in ((2, 0, 1.0), (1, 1, 0.5), (3, 0, 2.0), (INF, 1, 0.8)):
        _compare(lambda a: ag.renorm(a, p, dim, maxnorm), lambda a: torch.renorm(a, p, dim, maxnorm), [x], device)


def test_cov_and_corrcoef_match_pytorch(device):
    x = RNG.standard_normal((3, 6))
    fw, aw = [1, 2, 1, 3, 1, 1], RNG.uniform(0.2, 2.0, 6)
    for kw in ({}, {"correction": 0}, {"correction": 2}):
        _compare(lambda a: ag.cov(a, **kw), lambda a: torch.cov(a, **kw), [x], device)
        _compare(lambda a: ag.cov(a[0], **kw), lambda a: torch.cov(a[0], **kw), [x], device)
    _compare(lambda a, w: ag.cov(a, fweights=ag.tensor(fw, device=device), aweights=w),
             lambda a, w: torch.cov(a, fweights=torch.tensor(fw), aweights=w), [x, aw], device)
    _compare(ag.corrcoef, torch.corrcoef, [x], device)
    _same(_t(x, device).corrcoef(), torch.corrcoef(_pt(x)))


def test_isclose_and_allclose_match_pytorch(device):
    a = [1.0, NAN, INF, -INF, 1e-9, 1.0, INF]
    b = [1.0 + 1e-6, NAN, INF, INF, 0.0, 1.1, NAN]
    for kw in ({}, {"equal_nan": True}, {"rtol": 0.2}, {"atol": 0.0}):
        got = ag.isclose(_t(a, device), _t(b, device), **kw)
        assert got.dtype == ag.bool_ and got.tolist() == torch.isclose(_pt(a), _pt(b), **kw).tolist()
        for i in range(len(a)):
            assert ag.allclose(_t(a[i:i + 1], device), _t(b[i:i + 1], device), **kw) == torch.allclose(
                _pt(a[i:i + 1]), _pt(b[i:i + 1]), **kw)
    assert _t([1.0, 2.0], device).allclose(_t([1.0, 2.0 + 1e-9], device)) is True
    # ag.equal stays NumPy's elementwise comparison (torch.equal answers one bool)
    assert ag.equal(_t([1.0, 2.0], device), _t([1.0, 3.0], device)).tolist() == [True, False]


# --------------------------------------------------------------------------- vmap
@pytest.mark.parametrize("name", ["atan2", "remainder", "hypot", "lgamma", "cdist", "kron", "rot90", "nansum",
                                  "cov", "renorm"])
def test_vmap_matches_a_loop(name, device):
    xs = _t(RNG.uniform(0.5, 2.0, (3, 4, 3)), device)
    ys = _t(RNG.uniform(0.5, 2.0, (3, 4, 3)), device)
    f = {"atan2": ag.atan2, "remainder": ag.remainder, "hypot": ag.hypot, "lgamma": lambda a, b: ag.lgamma(a),
         "cdist": ag.cdist, "kron": ag.kron, "rot90": lambda a, b: ag.rot90(a), "nansum": lambda a, b: ag.nansum(a, 1),
         "cov": lambda a, b: ag.cov(a), "renorm": lambda a, b: ag.renorm(a, 2, 0, 1.0)}[name]
    got = vmap(f)(xs, ys)
    want = ag.stack([f(xs[i], ys[i]) for i in range(3)])
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_gradgrad_of_remainder_and_special_functions(device):
    x = _t([0.7, 1.9, 3.3], device, True)
    y = _t([0.4, 0.9, 1.3], device, True)
    assert ag.autograd.gradgradcheck(lambda a, b: ag.remainder(a, b) * a, [x, y])
    assert ag.autograd.gradgradcheck(lambda a: ag.lgamma(a) + ag.erfinv(a / 4), [x])
    assert math.isfinite(float(ag.autograd.grad(ag.digamma(x).sum(), x, create_graph=True)[0].sum()))
