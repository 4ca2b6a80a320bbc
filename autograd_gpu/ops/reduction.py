"""Reductions: sum, max, min, prod, logsumexp primitives; mean, var, std, norm composed.
argmax/argmin/any/all are constants of the graph."""
import builtins
import math

from ..autograd.function import Function
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor
from ..dtypes import get_default_dtype
from ..dtypes import is_inexact, bfloat16, float32
from .shape import broadcast_to, reshape
from .elementwise import where, equal, isnan, logical_and, logical_or, sqrt, abs as _abs, exp, maximum, conj, real, imag, _no_complex
from ._util import as_tensor, normalize_dims, normalize_dim, pick
from . import batching
from .registry import register, OpTest, UNARY, COMPLEX

__all__ = ["sum", "mean", "var", "std", "max", "min", "amax", "amin", "prod", "logsumexp", "norm",
           "argmax", "argmin", "any", "all", "cumsum"]


def _axes(x, axis, dim, op):
    return normalize_dims(pick(axis, dim, op), x.ndim, op)


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _regrow(grad, in_shape, axes, keepdims):
    """grad of a reduced output, broadcast back over the reduced axes of the input."""
    if not keepdims and axes:
        grad = reshape(grad, _kept_shape(in_shape, axes))
    return broadcast_to(grad, in_shape)


class Sum(Function):
    batch_rule = batching.reduction

    @staticmethod
    def forward(ctx, x, axes, keepdims):
        ctx.shape, ctx.axes, ctx.keepdims = x.data.shape, axes, keepdims
        if x.data.dtype is bfloat16:       # NumPy would add in bfloat16: add in float32, round once
            return ctx.wrap(ctx.xp.sum(x.data, axis=axes, keepdims=keepdims, dtype=float32).astype(bfloat16))
        return ctx.wrap(ctx.xp.sum(x.data, axis=axes, keepdims=keepdims))

    @staticmethod
    def backward(ctx, grad):
        return SumBackward.of(ctx, grad, ctx.shape, ctx.axes, ctx.keepdims), None, None


def _regrow_rule(cls, args, kwargs):
    return _regrow(*args)


class SumBackward(Function):
    """Sum's gradient: grad broadcast back over the reduced axes (a reshape and a broadcast view of grad's
    array, sharing its version counter), differentiable again: its own backward is Sum of the gradient's
    gradient over those axes. Under vmap: the reshape and broadcast ops, whose rules batch them."""
    batch_rule = _regrow_rule
    _views_grad = True

    @staticmethod
    def arrays(ctx, g, shape, axes, keepdims):
        if not keepdims and axes:
            g = g.reshape(_kept_shape(shape, axes))
        return g if g.shape == shape else ctx.xp.broadcast_to(g, shape)

    @staticmethod
    def forward(ctx, grad, shape, axes, keepdims):
        ctx.axes, ctx.keepdims = axes, keepdims
        g = SumBackward.arrays(ctx, grad.data, shape, axes, keepdims)
        if g is grad.data:                 # a view, not grad's array itself: the engine then copies it for a .grad
            g = g.view()
        return ctx.wrap(g, base=grad)

    @staticmethod
    def backward(ctx, gg):
        return Sum.apply(gg, ctx.axes, ctx.keepdims), None, None, None


@register(method=True, tests=(
    OpTest(UNARY, ref="np.sum"),
    OpTest((((2, 3, 4),), ((2, 0),)), op=lambda x: x.sum(dim=1), ref=lambda np, a: a.sum(axis=1), name="sum_dim"),
    OpTest((((2, 3, 4),),), op=lambda x: x.sum(dim=1, keepdim=True), ref=lambda np, a: a.sum(axis=1, keepdims=True),
           name="sum_keepdim"),
    OpTest((((2, 3, 4),),), op=lambda x: sum(x, axis=(0, -1)), ref=lambda np, a: a.sum(axis=(0, -1)),
           name="sum_axes"),
    OpTest((((3, 4),),), op=lambda x: x.sum(1), ref=lambda np, a: a.sum(1), name="complex_sum", **COMPLEX)))
def sum(x, axis=None, keepdims=False, *, dim=None, keepdim=None, dtype=None):
    """Sum over ``axis`` (alias ``dim``; int, tuple or None for all); bool/int sums are int64."""
    x = as_tensor(x, "sum")
    axes = _axes(x, axis, dim, "sum")
    keep = keepdims if keepdim is None else keepdim
    if dtype is not None:
        x = x.to(dtype=dtype)
    elif x.dtype.kind in "bi" and x.dtype.itemsize < 8 or x.dtype.kind == "b":
        x = x.to(dtype="int64")
    return Sum.apply(x, axes, bool(keep))


@register(method=True, tests=(
    OpTest(UNARY[:2] + UNARY[3:], ref="np.mean"),
    OpTest((((2, 3, 4),),), op=lambda x: x.mean(-1, keepdims=True), ref=lambda np, a: a.mean(-1, keepdims=True),
           name="mean_dim"),
    OpTest(UNARY[:3], ref="np.mean", name="complex_mean", **COMPLEX)))
def mean(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Mean over ``axis`` (all elements when None); integer inputs give the default float dtype."""
    x = as_tensor(x, "mean")
    axes = _axes(x, axis, dim, "mean")
    if not is_inexact(x.dtype):
        x = x.to(dtype=get_default_dtype())
    n = 1
    for a in axes:
        n *= x.shape[a]
    s = sum(x, axes, keepdims if keepdim is None else keepdim)
    return s / n if n else s * math.nan


@register(method=True, tests=(
    OpTest((((3, 4),), ((2, 1, 3),)), ref="np.var"),
    OpTest((((4, 3),),), op=lambda x: x.var(dim=0, correction=1), ref=lambda np, a: a.var(axis=0, ddof=1),
           name="var_ddof"),
    OpTest((((3, 4),),), op=lambda x: x.var(1), ref=lambda np, a: a.var(1), name="complex_var", **COMPLEX)))
def var(x, axis=None, keepdims=False, *, dim=None, keepdim=None, ddof=None, correction=None, unbiased=None,
        _op="var"):
    """Variance over ``axis``, dividing by n - ddof. ``correction`` (PyTorch's name) and ``unbiased``
    are accepted for ddof; the default is NumPy's ddof=0 (PyTorch's is 1: pass correction=1)."""
    x = as_tensor(x, _op)
    axes = _axes(x, axis, dim, _op)
    keep = keepdims if keepdim is None else keepdim
    d = _ddof(ddof, correction, unbiased, _op)
    n = 1
    for a in axes:
        n *= x.shape[a]
    diff = x - mean(x, axes, True)
    if diff.data.dtype.kind == "c":         # |diff|^2: the variance of a complex tensor is real
        re, im = real(diff), imag(diff)
        sq = sum(re * re + im * im, axes, keep)
    else:
        sq = sum(diff * diff, axes, keep)
    return sq / builtins.max(n - d, 0) if n - d > 0 else sq * math.nan


def _ddof(ddof, correction, unbiased, op):
    given = [v for v in (ddof, correction, unbiased) if v is not None]
    if len(given) > 1:
        raise TypeError(f"{op}: pass only one of ddof=, correction= and unbiased=")
    if unbiased is not None:
        return 1 if unbiased else 0
    d = given[0] if given else 0
    if isinstance(d, bool) or not isinstance(d, (int, float)):
        raise TypeError(f"{op}: expected a number as ddof/correction, got {type(d).__name__}")
    return d


@register(method=True, tests=OpTest(
    (((3, 4),),), op=lambda x: std(x, axis=1, keepdims=True), ref=lambda np, a: a.std(axis=1, keepdims=True)))
def std(x, axis=None, keepdims=False, *, dim=None, keepdim=None, ddof=None, correction=None, unbiased=None):
    """Standard deviation: sqrt(var(...)) with the same arguments (gradient 0 over a constant slice)."""
    return sqrt_of_variance(var(x, axis, keepdims, dim=dim, keepdim=keepdim, ddof=ddof, correction=correction,
                                unbiased=unbiased, _op="std"))


def sqrt_of_variance(v):
    """sqrt(v) for a variance ``v``: where v is 0 (a constant slice) the result 0 gets gradient 0, as PyTorch's
    std and std_mean give (not sqrt's 1 / 0 times var's 0, a NaN)."""
    zero = equal(v, 0)
    return where(zero, 0.0, sqrt(where(zero, 1.0, v)))


def _check_nonempty_dims(op, shape, axes):
    """IndexError for a reduction over a dim of size 0, as PyTorch's: the result would have no value."""
    for a in axes:
        if shape[a] == 0:
            raise IndexError(f"{op}: cannot reduce over an empty dimension (dim {a} of shape {tuple(shape)}): "
                             f"the result has no value")


def _check_nonempty(op, x):
    """RuntimeError for a reduction over all elements of an empty tensor, as PyTorch's."""
    if x.data.size == 0:
        raise RuntimeError(f"{op}: cannot reduce an empty tensor (shape {x.shape}) over all its elements: the "
                           f"result has no value; pass dim= to reduce over a non-empty dim instead")


class _MaxMin(Function):
    batch_rule = batching.reduction
    pick_fn: str | None = None      # the subclass's xp function: "max" or "min"

    @classmethod
    def forward(cls, ctx, x, axes, keepdims):
        xp = ctx.xp
        _check_nonempty_dims(cls.__name__.lower(), x.data.shape, axes)   # fine if the reduced dims are not empty
        y = ctx.wrap(getattr(xp, cls.pick_fn)(x.data, axis=axes, keepdims=keepdims))
        ctx.save_for_backward(x, y)
        ctx.axes, ctx.keepdims = axes, keepdims
        return y

    @staticmethod
    def backward(ctx, grad):
        # the gradient is split evenly between tied extremes (as PyTorch's amax/amin do); a NaN result
        # came from the NaNs, so they share it (as PyTorch's max/min do)
        x, y = ctx.saved_tensors
        shape = x.shape
        y = _regrow(y, shape, ctx.axes, ctx.keepdims)
        mask = logical_or(equal(x, y), logical_and(isnan(x), isnan(y)))
        count = sum(mask, ctx.axes, True).to(dtype=x.dtype)
        return where(mask, _regrow(grad, shape, ctx.axes, ctx.keepdims) / count, 0.0), None, None


class Max(_MaxMin):
    pick_fn = "max"


class Min(_MaxMin):
    pick_fn = "min"


def _max_min(cls, x, axis, keepdims, dim, keepdim, op):
    x = as_tensor(x, op)
    if x.data.dtype.kind == "c":
        _no_complex(x, op)
    if pick(axis, dim, op) is None:
        _check_nonempty(op, x)
    axes = _axes(x, axis, dim, op)
    if not axes and x.ndim:
        return x
    return cls.apply(x, axes, bool(keepdims if keepdim is None else keepdim))


@register(method=("max", "amax"), aliases=("amax",), tests=(
    OpTest((((3, 4),), ((),)), ref="np.max"),
    OpTest((((3, 4),), ((2, 3, 4),)), op=lambda x: x.max(dim=1), ref=lambda np, a: a.max(axis=1), name="max_dim")))
def max(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Largest value over ``axis`` (all elements when None); ties share the gradient.
    For the values of two tensors elementwise use ``maximum``."""
    if isinstance(axis, Tensor):
        return maximum(x, axis)
    return _max_min(Max, x, axis, keepdims, dim, keepdim, "max")


@register(method=("min", "amin"), aliases=("amin",), tests=OpTest(
    (((3, 4),),), op=lambda x: x.min(axis=0, keepdims=True), ref=lambda np, a: a.min(axis=0, keepdims=True),
    name="min_keepdim"))
def min(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Smallest value over ``axis`` (all elements when None); ties share the gradient."""
    if isinstance(axis, Tensor):
        from .elementwise import minimum
        return minimum(x, axis)
    return _max_min(Min, x, axis, keepdims, dim, keepdim, "min")


amax, amin = max, min      # registered as aliases of max and min


class LogSumExp(Function):
    batch_rule = batching.reduction
    # fused: shifting by the max keeps exp from overflowing (float32 overflows at x > 88)
    @staticmethod
    def forward(ctx, x, axes, keepdims):
        xp = ctx.xp
        a = x.data
        r = a.real if a.dtype.kind == "c" else a              # complex: shift by the largest real part
        m = xp.max(r, axis=axes, keepdims=True) if a.size else xp.zeros(_kept_shape(a.shape, axes), r.dtype)
        m = xp.where(xp.isfinite(m), m, 0)
        out = xp.log(xp.sum(xp.exp(a - m), axis=axes, keepdims=True)) + m
        y = ctx.wrap(out if keepdims else out.reshape(tuple(s for i, s in enumerate(a.shape) if i not in axes)))
        ctx.save_for_backward(x, y)
        ctx.axes, ctx.keepdims = axes, keepdims
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        shape = x.shape
        softmax = exp(x - _regrow(y, shape, ctx.axes, ctx.keepdims))
        return _regrow(grad, shape, ctx.axes, ctx.keepdims) * conj(softmax), None, None


@register(method=True, tests=(
    OpTest((((3, 4),), ((),)), ref="refs.logsumexp"),
    OpTest((((3, 4),), ((2, 3, 4),)), op=lambda x: x.logsumexp(dim=1), ref=lambda np, a: np.log(np.sum(
        np.exp(a - a.max(axis=1, keepdims=True)), axis=1)) + a.max(axis=1), name="logsumexp_dim")))
def logsumexp(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """log(sum(exp(x))) over ``axis``, without overflow."""
    x = as_tensor(x, "logsumexp")
    return LogSumExp.apply(x, _axes(x, axis, dim, "logsumexp"), bool(keepdims if keepdim is None else keepdim))


class Prod(Function):
    batch_rule = batching.reduction

    @staticmethod
    def forward(ctx, x, axes, keepdims):
        ctx.save_for_backward(x)
        ctx.axes, ctx.keepdims = axes, keepdims
        if x.data.dtype is bfloat16:       # in float32, rounded once (as Sum)
            return ctx.wrap(ctx.xp.prod(x.data, axis=axes, keepdims=keepdims, dtype=float32).astype(bfloat16))
        return ctx.wrap(ctx.xp.prod(x.data, axis=axes, keepdims=keepdims))

    @staticmethod
    def backward(ctx, grad):
        # d prod / d x_i is the product of the others; written so that zeros in x are exact:
        # no zero -> prod / x_i; one zero -> the product of the non-zeros at that zero, 0 elsewhere
        x, = ctx.saved_tensors
        axes, shape = ctx.axes, x.shape
        if is_grad_enabled() and x.device.backend.read_back((x.data == 0).any(), "prod's backward with create_graph"):
            # building a graph of this gradient: the where() branches below would hide how the product
            # of the others depends on the zeros, so use the exact (O(n^2) in the reduced size) form
            return _regrow(grad, shape, axes, ctx.keepdims) * conj(_product_of_others(x, axes)), None, None
        zero = equal(x, 0)
        n_zero = _regrow(sum(zero, axes, True), shape, axes, True)
        x_nz = where(zero, 1.0, x)
        p_nz = _regrow(prod(x_nz, axes, True), shape, axes, True)
        others = where(zero, where(equal(n_zero, 1), p_nz, 0.0), where(equal(n_zero, 0), p_nz / x_nz, 0.0))
        return _regrow(grad, shape, axes, ctx.keepdims) * conj(others), None, None


def _product_of_others(x, axes):
    """prod over the reduced axes of x with element i left out, for every i: row i of an n x n matrix
    holds x with x_i replaced by 1 (n = the reduced size); differentiable to any order."""
    keep = [d for d in range(x.ndim) if d not in axes]
    xt = x.permute(*keep, *axes)
    lead = xt.shape[:len(keep)]
    n = 1
    for d in axes:
        n *= x.shape[d]
    flat = xt.reshape(lead + (1, n))
    eye = Tensor._make(x.device.backend.xp.eye(n, dtype=bool), x.device)
    others = prod(where(eye, 1.0, flat), -1).reshape(xt.shape)
    inverse = [0] * x.ndim
    for i, d in enumerate(keep + list(axes)):
        inverse[d] = i
    return others.permute(*inverse)


@register(method=True, tests=(
    OpTest((((3, 4),), ((),), ((0,),)), ref="np.prod", domain=(0.5, 1.5)),
    OpTest((((3, 4),),), op=lambda x: x.prod(dim=1), ref=lambda np, a: a.prod(axis=1), name="prod_dim",
           domain=(-1.5, 1.5)),
    OpTest((((3, 4),),), op=lambda x: x.prod(1), ref=lambda np, a: a.prod(1), name="complex_prod", **COMPLEX)))
def prod(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Product over ``axis``; the gradient is exact where x has zeros."""
    x = as_tensor(x, "prod")
    return Prod.apply(x, _axes(x, axis, dim, "prod"), bool(keepdims if keepdim is None else keepdim))


@register(method=True, tests=(
    OpTest((((3, 4),), ((5,),)), ref=lambda np, a: np.linalg.norm(a.reshape(-1))),
    OpTest((((3, 4),),), op=lambda x: x.norm(dim=1, keepdim=True), ref=lambda np, a: np.linalg.norm(a, axis=1, keepdims=True),
           name="norm_dim"),
    OpTest((((3, 4),),), op=lambda x: norm(x, 1), ref=lambda np, a: np.abs(a).sum(), name="norm_p1", avoid=(0.0,)),
    OpTest((((3, 4),),), op=lambda x: norm(x, p=3, dim=0), ref=lambda np, a: (np.abs(a) ** 3).sum(0) ** (1 / 3),
           name="norm_p3", avoid=(0.0,)),
    OpTest((((3, 4),),), op=lambda x: norm(x, math.inf), ref=lambda np, a: np.abs(a).max(), name="norm_inf",
           avoid=(0.0,)),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.norm(a.ravel()).astype(a.real.dtype), name="complex_norm",
           avoid=(0.0,), **COMPLEX)))
def norm(x, ord=None, axis=None, keepdims=False, *, p=None, dim=None, keepdim=None):
    """Vector p-norm over ``axis`` (all elements when None): ord 2 (default, also 'fro'), 1, inf,
    -inf, 0 (count of non-zeros), or any other real p as (sum |x|**p) ** (1/p)."""
    x = as_tensor(x, "norm")
    if x.data.dtype.kind == "c":
        x = _abs(x)                 # the norms of a complex vector are those of its moduli
    o = pick(ord, p, "norm", "ord", "p")
    o = 2 if o is None or o == "fro" else o
    axes = _axes(x, axis, dim, "norm")
    keep = keepdims if keepdim is None else keepdim
    if isinstance(o, str):
        raise ValueError(f"norm: expected ord to be a number or 'fro', got {o!r}")
    if o == 2:
        return _Norm2.apply(x, axes, bool(keep))
    if o == math.inf:
        return max(_abs(x), axes, keep)
    if o == -math.inf:
        return min(_abs(x), axes, keep)
    if o == 1:
        return sum(_abs(x), axes, keep)
    if o == 0:
        return sum(Tensor._make((x.data != 0).astype(x.dtype), x.device), axes, keep)
    return sum(_abs(x) ** o, axes, keep) ** (1.0 / o)


class _Norm2(Function):
    batch_rule = batching.reduction
    # fused so that the gradient at the zero vector is 0 (the subgradient PyTorch picks), not nan
    @staticmethod
    def forward(ctx, x, axes, keepdims):
        xp = ctx.xp
        y = ctx.wrap(xp.sqrt(xp.sum(x.data * x.data, axis=axes, keepdims=keepdims)))
        ctx.save_for_backward(x, y)
        ctx.axes, ctx.keepdims = axes, keepdims
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        shape = x.shape
        y = _regrow(y, shape, ctx.axes, ctx.keepdims)
        safe = where(equal(y, 0), 1.0, y)
        return _regrow(grad, shape, ctx.axes, ctx.keepdims) * where(equal(y, 0), 0.0, x / safe), None, None


def _arg(name, x, axis, dim, keepdims, keepdim, op):
    x = as_tensor(x, op)
    if x.data.dtype.kind == "c":
        _no_complex(x, op)
    a = pick(axis, dim, op)
    xp = x.device.backend.xp
    keep = bool(keepdims if keepdim is None else keepdim)
    if a is None:
        _check_nonempty(op, x)
        out = getattr(xp, name)(x.data.reshape(-1))
        if keep:
            out = out.reshape((1,) * x.ndim)
    else:
        a = normalize_dim(a, x.ndim, op)
        if x.ndim:
            _check_nonempty_dims(op, x.shape, (a,))
        if x.data.size == 0:     # the other dims are empty: an empty result, as NumPy's and PyTorch's
            out = xp.zeros(tuple(1 if i == a else s for i, s in enumerate(x.shape) if keep or i != a), dtype="int64")
        else:
            out = getattr(xp, name)(x.data, axis=a, keepdims=keep)
    return Tensor._make(xp.asarray(out, dtype="int64"), x.device)


@register(method=True, tests=OpTest(
    (((3, 4),),), op=lambda x: x.argmax(dim=1), ref=lambda np, a: a.argmax(axis=1), grad=False, gradgrad=False))
def argmax(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Index of the largest value (in the flattened tensor when axis is None); int64, no gradient."""
    return _arg("argmax", x, axis, dim, keepdims, keepdim, "argmax")


@register(method=True, tests=OpTest((((3, 4),),), ref="np.argmin", grad=False, gradgrad=False))
def argmin(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Index of the smallest value (in the flattened tensor when axis is None); int64, no gradient."""
    return _arg("argmin", x, axis, dim, keepdims, keepdim, "argmin")


def _bool_reduce(name, x, axis, dim, keepdims, keepdim):
    x = as_tensor(x, name)
    axes = _axes(x, axis, dim, name)
    xp = x.device.backend.xp
    return Tensor._make(xp.asarray(getattr(xp, name)(x.data, axis=axes, keepdims=bool(keepdims if keepdim is None else keepdim))), x.device)


@register(method=True, tests=(   # bool results: no gradient
    OpTest((((3, 4),), ((0, 3),)), ref="np.any", kinds=("bool",), grad=False, gradgrad=False),
    OpTest((((3, 4),),), op=lambda x: x.any(dim=1, keepdim=True), ref=lambda np, a: a.any(axis=1, keepdims=True),
           name="any_dim", kinds=("bool",), grad=False, gradgrad=False)))
def any(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Whether any element over ``axis`` is true (non-zero); a bool tensor, no gradient."""
    return _bool_reduce("any", x, axis, dim, keepdims, keepdim)


@register(method=True, tests=(   # bool results: no gradient
    OpTest((((3, 4),), ((0, 3),)), ref="np.all", kinds=("bool",), grad=False, gradgrad=False),
    OpTest((((3, 4),),), op=lambda x: x.all(axis=0), ref=lambda np, a: a.all(axis=0), name="all_dim",
           kinds=("bool",), grad=False, gradgrad=False)))
def all(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
    """Whether every element over ``axis`` is true (non-zero); a bool tensor, no gradient."""
    return _bool_reduce("all", x, axis, dim, keepdims, keepdim)


class CumSum(Function):
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        if x.data.dtype is bfloat16:       # running sums in float32, each rounded once (as Sum)
            return ctx.wrap(ctx.xp.cumsum(x.data, axis=axis, dtype=float32).astype(bfloat16))
        return ctx.wrap(ctx.xp.cumsum(x.data, axis=axis))

    @staticmethod
    def backward(ctx, grad):
        from .shape import flip
        return flip(cumsum(flip(grad, ctx.axis), ctx.axis), ctx.axis), None


@register(method=True, tests=OpTest(
    (((3, 4),), ((),), ((2, 0),)), op=lambda x: x.cumsum(dim=-1), ref=lambda np, a: a if a.ndim == 0 else a.cumsum(axis=-1)))
def cumsum(x, dim=None, *, dtype=None, axis=None):
    """Running sum along dim (required, as in PyTorch; NumPy's name ``axis`` too); a 0-d tensor gives a
    0-d tensor; bool and integer inputs give int64 unless ``dtype``."""
    x = as_tensor(x, "cumsum")
    a = pick(axis, dim, "cumsum")
    if a is None:
        raise TypeError("cumsum: missing the required argument dim (the dim to accumulate along), as in PyTorch; "
                        "for the flattened tensor use x.flatten() and dim=0")
    a = normalize_dim(a, x.ndim, "cumsum")
    if dtype is not None:
        x = x.to(dtype=dtype)
    elif x.dtype.kind == "b" or x.dtype.kind in "iu" and x.dtype.itemsize < 8:
        x = x.to(dtype="int64")
    if x.ndim == 0:
        return reshape(CumSum.apply(reshape(x, (1,)), 0), ())
    return CumSum.apply(x, a)
