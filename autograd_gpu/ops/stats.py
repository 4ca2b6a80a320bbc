"""More reductions and comparisons, as PyTorch names them: std_mean, var_mean, aminmax, nansum, nanmean,
count_nonzero, renorm, cov, corrcoef; isclose, allclose.

Composed from the reductions and elementwise ops (differentiable to any order, batched by vmap through
those); ``count_nonzero``, ``isclose`` and ``allclose`` are constants to the graph. Unlike ``ag.var`` and
``ag.std`` (NumPy's ddof=0), ``std_mean``/``var_mean``/``cov`` default to PyTorch's correction=1: they
have no NumPy counterpart whose default they could keep.
"""
import builtins
import math
from collections import namedtuple

from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from ..dtypes import is_floating, get_default_dtype
from ..creation import arange, tensor
from ._util import as_tensor, normalize_dims
from .elementwise import (where, isnan, isfinite, abs, sqrt, clamp, equal, not_equal, logical_and, logical_or,
                          less_equal, logical_not)
from .reduction import sum, mean, var, max as amax, min as amin, all as all_, sqrt_of_variance
from .registry import register, OpTest
from . import batching

aminmax_result = namedtuple("aminmax", ["min", "max"])  # type: ignore[name-match]  # PyTorch's name, torch.return_types.aminmax
aminmax_result.__doc__ = "What aminmax returns: the named tuple (min, max), as torch.return_types.aminmax."


def _dims(x, dim, op):
    return None if dim is None else normalize_dims(dim, x.ndim, op)


def _correction(unbiased, correction, op):
    if unbiased is not None and correction is not None:
        raise TypeError(f"{op}: pass unbiased or correction, not both")
    if unbiased is not None:
        return 1 if unbiased else 0
    return 1 if correction is None else correction


def _var(op, input, dim, unbiased, keepdim, correction):
    x = as_tensor(input, op)
    if isinstance(dim, bool):          # PyTorch's std_mean(x, unbiased) overload
        dim, unbiased = None, dim
    c = _correction(unbiased, correction, op)
    d = _dims(x, dim, op)
    return x, var(x, dim=d, keepdim=keepdim, correction=c), mean(x, dim=d, keepdim=keepdim)


@register(tests=(
    OpTest((((3, 4),), ((5,),)), op=lambda x: var_mean(x), ref=lambda np, a: (a.var(ddof=1), a.mean())),
    OpTest((((3, 4),),), op=lambda x: var_mean(x, 1, correction=0, keepdim=True), name="var_mean_dim",
           ref=lambda np, a: (a.var(1, keepdims=True), a.mean(1, keepdims=True)))))
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(variance, mean) over ``dim`` (all elements when None), the variance dividing by n - correction
    (PyTorch's default correction=1; ``unbiased`` the older spelling)."""
    _, v, m = _var("var_mean", input, dim, unbiased, keepdim, correction)
    return v, m


@register(tests=(
    OpTest((((3, 4),),), op=lambda x: std_mean(x), ref=lambda np, a: (a.std(ddof=1), a.mean())),
    OpTest((((3, 4),),), op=lambda x: std_mean(x, (0,), unbiased=False), name="std_mean_dim",
           ref=lambda np, a: (a.std(0), a.mean(0)))))
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """(standard deviation, mean) over ``dim``; correction as ``var_mean``'s (default 1)."""
    _, v, m = _var("std_mean", input, dim, unbiased, keepdim, correction)
    return sqrt_of_variance(v), m


@register(method=True, tests=(
    OpTest((((3, 4),), ((),)), op=lambda x: aminmax(x), ref=lambda np, a: (a.min(), a.max())),
    OpTest((((3, 4),),), op=lambda x: x.aminmax(dim=1, keepdim=True), name="aminmax_dim",
           ref=lambda np, a: (a.min(1, keepdims=True), a.max(1, keepdims=True)))))
def aminmax(input, *, dim=None, keepdim=False):
    """(min, max) over ``dim`` (all elements when None) as a named tuple with .min and .max; ties share
    the gradient, as amin's and amax's (a NaN result sends it to the NaNs; PyTorch's gives NaN there)."""
    x = as_tensor(input, "aminmax")
    if dim is not None and not hasattr(dim, "__index__"):
        raise TypeError(f"aminmax: expected dim as an int or None, got {type(dim).__name__}")
    if dim is None and keepdim:
        axes = tuple(range(x.ndim))
        return aminmax_result(amin(x, axes, True), amax(x, axes, True))
    return aminmax_result(amin(x, dim=dim, keepdim=keepdim), amax(x, dim=dim, keepdim=keepdim))


def _nan_arrays(np, a):
    return np.where(np.arange(a.size).reshape(a.shape) % 3 == 1, np.nan, a).astype(a.dtype)


def _with_nans(x):
    """x with every third element NaN (the op-table samples of nansum and nanmean)."""
    idx = arange(x.numel(), device=x.device).reshape(x.shape)
    return where(equal(idx % 3, 1), math.nan, x)


class NanToZero(Function):
    """NaNs replaced by 0, with PyTorch's nansum derivative: the gradient times the not-NaN mask (a product,
    not a selection, so an infinite gradient, such as nanmean's over an all-NaN slice, gives NaN there)."""
    _array_forward = True
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        keep = ~ctx.xp.isnan(x.data)
        ctx.keep = keep
        return ctx.wrap(ctx.xp.where(keep, x.data, ctx.xp.zeros((), x.data.dtype)))

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.wrap(ctx.keep.astype(grad.data.dtype))


@register(method=True, tests=(
    OpTest((((3, 4),), ((0, 3),), ((),)), op=lambda x: nansum(_with_nans(x)),
           ref=lambda np, a: np.nansum(_nan_arrays(np, a))),
    OpTest((((3, 4),),), op=lambda x: x.nansum(1, keepdim=True), name="nansum_dim",
           ref=lambda np, a: np.nansum(a, 1, keepdims=True))))
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """Sum over ``dim`` with NaNs counted as 0 (their gradient is 0)."""
    x = as_tensor(input, "nansum")
    if x.dtype.kind == "c":
        raise TypeError(f"nansum: expected a real tensor, got {x.dtype}")
    if is_floating(x.dtype):
        x = NanToZero.apply(x)
    return sum(x, dim=_dims(x, dim, "nansum"), keepdim=keepdim, dtype=dtype)


@register(method=True, tests=(
    OpTest((((3, 4),), ((2, 3),)), op=lambda x: nanmean(_with_nans(x)),
           ref=lambda np, a: np.nanmean(_nan_arrays(np, a))),
    OpTest((((3, 4),),), op=lambda x: x.nanmean(0), name="nanmean_dim", ref=lambda np, a: np.nanmean(a, 0))))
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over ``dim`` of the elements that are not NaN (NaN where all are, and its gradient there too).
    The all-NaN slice's NaN gradient is PyTorch's (nansum's gradient is the mask times 1 / 0)."""
    x = as_tensor(input, "nanmean")
    if not is_floating(x.dtype):
        raise TypeError(f"nanmean: expected a floating point tensor, got {x.dtype}")
    if dtype is not None:
        x = x.to(dtype=dtype)
    d = _dims(x, dim, "nanmean")
    keep = logical_not(isnan(x))
    return nansum(x, d, keepdim) / sum(keep, dim=d, keepdim=keepdim).to(dtype=x.dtype)


# op table: grad/gradgrad off, as in PyTorch: an int64 count
@register(method=True, tests=(
    OpTest((((3, 4),), ((0,),)), op=lambda x: count_nonzero(x.round()), ref=lambda np, a: np.count_nonzero(np.round(a)),
           grad=False, gradgrad=False),
    OpTest((((3, 4),),), op=lambda x: x.round().count_nonzero((0, 1)), name="count_nonzero_dims",
           ref=lambda np, a: np.count_nonzero(np.round(a), axis=(0, 1)), grad=False, gradgrad=False)))
def count_nonzero(input, dim=None):
    """How many elements are not zero, over ``dim`` (an int or a tuple; all when None): int64."""
    x = as_tensor(input, "count_nonzero")
    return sum(not_equal(x, 0), dim=_dims(x, dim, "count_nonzero"))


def _renorm_ref(np, a, p, dim, maxnorm):
    axes = tuple(i for i in range(a.ndim) if i != dim)
    n = (np.abs(a) ** p).sum(axis=axes, keepdims=True) ** (1.0 / p)
    return (a * np.where(n > maxnorm, maxnorm / (n + 1e-7), 1.0)).astype(a.dtype)


@register(method=True, tests=(
    OpTest((((3, 4),), ((2, 3, 2),)), op=lambda x: renorm(x, 2, 0, 1.0),
           ref=lambda np, a: _renorm_ref(np, a, 2, 0, 1.0)),
    OpTest((((4, 3),),), op=lambda x: x.renorm(1, 1, 2.5), ref=lambda np, a: _renorm_ref(np, a, 1, 1, 2.5),
           name="renorm_p1")))
def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose p-norm exceeds ``maxnorm`` scaled down to norm ``maxnorm``
    (divided by norm + 1e-7, as PyTorch); the others unchanged. Differentiable through the norm."""
    x = as_tensor(input, "renorm")
    if x.ndim < 2:
        raise RuntimeError(f"renorm: expected a tensor of at least 2 dims, got {x.ndim}")
    if not p > 0:
        raise RuntimeError(f"renorm: expected p > 0, got {p}")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm >= 0, got {maxnorm}")
    (d,) = normalize_dims(dim, x.ndim, "renorm")
    axes = tuple(i for i in range(x.ndim) if i != d)
    if p == math.inf:
        norm = amax(abs(x), axes, True)
        big = norm > maxnorm
    else:
        s = sum(x * x if p == 2 else abs(x) ** p, axes, True)
        big = s > maxnorm ** p
        norm = where(big, s, 1.0) ** (1.0 / p)          # only the scaled slices' norms take part (no 0 ** -x)
    return x * where(big, maxnorm / (norm + 1e-7), 1.0)


def _cov_ref(np, a, correction=1):
    return np.asarray(np.cov(a, ddof=correction)).astype(a.dtype)


@register(method=True, tests=(
    OpTest((((3, 5),), ((6,),)), ref=_cov_ref),
    OpTest((((2, 6),),), op=lambda x: cov(x, correction=0), ref=lambda np, a: _cov_ref(np, a, 0),
           name="cov_correction0"),
    OpTest((((2, 4), (4,)),), op=lambda x, w: cov(x, aweights=w, fweights=_fweights_sample(w)), name="cov_weights",
           domain=(0.5, 2.0),
           ref=lambda np, a, w: np.cov(a, aweights=w, fweights=np.array([1, 2, 3, 1])).astype(a.dtype))))
def cov(input, *, correction=1, fweights=None, aweights=None):
    """Covariance matrix of the variables in the rows of ``input`` (observations in columns; a 1-D input
    is one variable: a 0-d result), dividing by N - correction; ``fweights`` (integer repeat counts) and
    ``aweights`` (observation weights) as NumPy's cov."""
    x = as_tensor(input, "cov")
    if x.ndim > 2:
        raise RuntimeError(f"cov: expected a tensor of at most 2 dims, got {x.ndim}")
    if not is_floating(x.dtype) and x.dtype.kind != "c":
        x = x.to(dtype=get_default_dtype())
    x = x.reshape(1, -1) if x.ndim < 2 else x
    n = x.shape[1]
    w = None
    for name, wt in (("fweights", fweights), ("aweights", aweights)):
        if wt is None:
            continue
        wt = as_tensor(wt, "cov", like=x)
        if wt.ndim != 1 or wt.shape[0] != n:
            raise RuntimeError(f"cov: expected {name} as a 1-D tensor of {n} elements, got shape {wt.shape}")
        if name == "fweights" and wt.dtype.kind not in "iu":
            raise RuntimeError(f"cov: expected fweights of an integer dtype, got {wt.dtype}")
        wt = wt.to(dtype=x.dtype)
        w = wt if w is None else w * wt
    if w is None:
        avg = mean(x, 1, True)
        norm = builtins.max(n - correction, 0)
    else:
        w_sum = sum(w)
        avg = sum(x * w, 1, True) / w_sum
        if correction == 0:
            norm = w_sum
        elif aweights is None:
            norm = clamp(w_sum - correction, 0.0)
        else:
            norm = clamp(w_sum - correction * sum(w * as_tensor(aweights, "cov", like=x).to(dtype=x.dtype)) / w_sum,
                         0.0)
    xm = x - avg
    xw = xm if w is None else xm * w
    c = (xw @ xm.conj().T if xm.dtype.kind == "c" else xw @ xm.T) / norm
    return c.reshape(()) if c.shape == (1, 1) else c


def _fweights_sample(w):
    """The op table's integer frequency weights for the cov_weights sample (4 observations)."""
    return tensor([1, 2, 3, 1], device=w.device)


@register(method=True, tests=OpTest((((3, 5),), ((2, 7),)), ref=lambda np, a: np.corrcoef(a).astype(a.dtype)))
def corrcoef(input):
    """Pearson correlation coefficients of the rows' variables (cov normalised by the standard
    deviations, clipped to [-1, 1] as PyTorch)."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    n = c.shape[0]
    i = arange(n, device=c.device)
    sd = sqrt(c[i, i])
    r = c / sd.reshape(n, 1) / sd.reshape(1, n)
    return r if r.dtype.kind == "c" else clamp(r, -1.0, 1.0)


def _isclose(a, b, rtol, atol, equal_nan, op):
    if rtol < 0 or atol < 0:
        raise ValueError(f"{op}: expected rtol and atol >= 0, got {rtol} and {atol}")
    ta = a if isinstance(a, Tensor) else None
    a = as_tensor(a, op, like=b if ta is None and isinstance(b, Tensor) else None)
    b = as_tensor(b, op, like=a)
    if a.dtype != b.dtype and a.dtype.kind not in "biu" and b.dtype.kind not in "biu":
        raise TypeError(f"{op}: expected tensors of one dtype, got {a.dtype} and {b.dtype}")
    with no_grad():
        a, b = a.detach(), b.detach()
        same = equal(a, b)                       # infinities of one sign, and exact matches
        finite = logical_and(isfinite(a), isfinite(b))
        near = logical_and(finite, less_equal(abs(a - b), atol + rtol * abs(b)))
        out = logical_or(same, near)
        if equal_nan:
            out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


def _isclose_ref(np, a, b):
    return np.isclose(a, np.where(b > 0, a * a.dtype.type(1 + 1e-6), b))


# op table: grad/gradgrad off, as in PyTorch: a bool result
@register(method=True, tests=OpTest((((2, 3), (2, 3)), ((2, 3), (3,))), ref=_isclose_ref, grad=False, gradgrad=False,
                                    op=lambda a, b: isclose(a, where(b > 0, a * (1 + 1e-6), b))))
def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|input - other| <= atol + rtol * |other|, elementwise (a bool tensor; equal infinities are close,
    NaNs only with equal_nan)."""
    return _isclose(input, other, rtol, atol, equal_nan, "isclose")


@register(method=True, untested="returns a Python bool (no tensor for the op table); tests/test_breadth_math.py "
                                "compares it with PyTorch's")
def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether isclose holds for every element (a Python bool: reads the result on the host)."""
    ok = all_(_isclose(input, other, rtol, atol, equal_nan, "allclose"))
    return bool(ok.device.backend.read_back(ok.data, "allclose"))
