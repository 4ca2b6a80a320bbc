"""Cumulative ops along a dim: cumprod, cummax, cummin, logcumsumexp (cumsum is in ops/reduction.py).

``dim`` is required, as in PyTorch. cummax/cummin return ``(values, indices)``: the index is the running
arg (the latest position holding the running extreme, NaN once one is seen, as PyTorch's), found on
arrays by a log-depth scan, and the values are taken at it (ops/sorting.py's TakeAlong) so the gradient
reaches the running arg. logcumsumexp's scan combines with logaddexp, so no shift can underflow.
"""
from collections import namedtuple

from ..autograd.function import Function
from ..autograd.grad_mode import is_grad_enabled
from ..tensor import Tensor
from ..dtypes import bfloat16, float32, is_inexact, get_default_dtype
from .elementwise import (where, equal, exp, log, abs as _abs, greater, less, logical_and, logical_not,
                          _no_complex)
from .shape import flip, moveaxis, reshape
from .reduction import cumsum, prod, sum
from .sorting import take_along
from ._util import as_tensor, normalize_dim, pick
from . import batching
from .registry import register, OpTest

__all__ = ["cumprod", "cummax", "cummin", "logcumsumexp"]

cummax_result = namedtuple("cummax", ("values", "indices"))  # type: ignore[name-match]  # PyTorch's name, torch.return_types.cummax
cummin_result = namedtuple("cummin", ("values", "indices"))  # type: ignore[name-match]  # PyTorch's name, torch.return_types.cummin


def _dim(x, dim, axis, op):
    d = pick(axis, dim, op)
    if d is None:
        raise TypeError(f"{op}: missing the required argument dim (the dim to accumulate along), as in PyTorch; "
                        f"for the flattened tensor use x.flatten() and dim=0")
    return normalize_dim(d, x.ndim, op)


def _scan(xp, a, axis, combine):
    """Inclusive scan of ``combine`` along axis in ceil(log2 n) vectorised steps (Hillis-Steele): CuPy
    has no maximum.accumulate or logaddexp.accumulate, and this needs no loop over the elements."""
    n = a.shape[axis]
    s = 1
    while s < n:
        head = a[(slice(None),) * axis + (slice(0, s),)]
        tail = combine(a[(slice(None),) * axis + (slice(s, None),)], a[(slice(None),) * axis + (slice(0, n - s),)])
        a = xp.concatenate([head, tail], axis=axis)
        s *= 2
    return a


def _rev_cumsum(g, d):
    return flip(cumsum(flip(g, d), d), d)


# --------------------------------------------------------------------------- cumprod
class CumProd(Function):
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, axis):
        ctx.axis = axis
        if x.data.dtype is bfloat16:       # running products in float32, each rounded once (as CumSum)
            y = ctx.wrap(ctx.xp.cumprod(x.data, axis=axis, dtype=float32).astype(bfloat16))
        else:
            y = ctx.wrap(ctx.xp.cumprod(x.data, axis=axis))
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        # dy_j/dx_i = prod_{m <= j, m != i} x_m for j >= i. Before a row's first zero that is y_j / x_i;
        # at the first zero it is the product before it times the product from it to j; after it, 0.
        x, y = ctx.saved_tensors
        d = ctx.axis
        if is_grad_enabled() and x.device.backend.read_back((x.data == 0).any(), "cumprod's backward with create_graph"):
            # differentiating the gradient again: the masks below would hide how it depends on the zeros,
            # so use the exact form (O(n^2) in the size of the dim)
            return _cumprod_grad_exact(x, grad, d), None
        zeros = cumsum(equal(x, 0).to(dtype=x.dtype), d)        # zeros up to and including each position
        before, first = equal(zeros, 0), _first_zero(x, zeros)
        x_safe = where(before, x, 1.0)
        g_before = _rev_cumsum(grad * y, d) / x_safe
        after_first = where(logical_and(greater(zeros, 0), logical_not(first)), x, 1.0)     # x past the first zero, 1 up to it
        p_before = prod(x_safe, d, True)
        g_first = p_before * _rev_cumsum(grad * cumprod(after_first, d), d)
        return where(before, g_before, where(first, g_first, 0.0)), None


def _first_zero(x, zeros):
    """Where x holds its row's first zero."""
    return logical_and(equal(x, 0), equal(zeros, 1))


def _cumprod_grad_exact(x, grad, d):
    """sum_{j >= i} grad_j prod_{m <= j, m != i} x_m through an (n, n) matrix per row: row i is x with
    x_i replaced by 1; differentiable to any order."""
    xt, gt = moveaxis(x, d, -1), moveaxis(grad, d, -1)
    n = xt.shape[-1]
    backend = x.device.backend
    diag = Tensor._make(backend.xp.eye(n, dtype=bool), x.device)
    upper = Tensor._make(backend.xp.triu(backend.xp.ones((n, n), dtype=bool)), x.device)   # j >= i
    rows = where(diag, 1.0, reshape(xt, xt.shape[:-1] + (1, n)))           # (..., i, m)
    c = cumprod(rows, -1)                                                   # (..., i, j)
    g = sum(where(upper, c * reshape(gt, gt.shape[:-1] + (1, n)), 0.0), -1)
    return moveaxis(g, -1, d)


def _cum_dtype(x, dtype):
    if dtype is not None:
        return x.to(dtype=dtype)
    if x.dtype.kind == "b" or x.dtype.kind in "iu" and x.dtype.itemsize < 8:
        return x.to(dtype="int64")        # PyTorch's: integer and bool running sums/products are int64
    return x


@register(method=True, tests=(
    OpTest((((3, 4),), ((5,),), ((),)), op=lambda x: cumprod(x, -1), ref=lambda np, a: a if a.ndim == 0 else
           np.cumprod(a, -1), domain=(0.5, 1.5)),
    OpTest((((4, 3),),), op=lambda x: x.T.cumprod(0), ref=lambda np, a: np.cumprod(a.T, 0), name="cumprod_noncontiguous",
           domain=(-1.5, 1.5))))
def cumprod(x, dim=None, *, dtype=None, axis=None):
    """Running product along dim (required); exact gradients where x has zeros; bool and integer inputs
    give int64 unless ``dtype``."""
    x = as_tensor(x, "cumprod")
    d = _dim(x, dim, axis, "cumprod")
    x = _cum_dtype(x, dtype)
    if x.ndim == 0:
        return reshape(CumProd.apply(reshape(x, (1,)), 0), ())
    return CumProd.apply(x, d)


# --------------------------------------------------------------------------- cummax / cummin
class CumArgIndex(Function):
    """The running arg of cummax (``largest``) or cummin along axis: an int64 graph constant."""
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, axis, largest):
        xp = ctx.xp
        a = x.data
        v = _scan(xp, a, axis, xp.maximum if largest else xp.minimum)       # NaN propagates, as PyTorch's
        mark = a == v                         # where a new running extreme is set (ties: the later one)
        if is_inexact(a.dtype):
            mark = mark | (xp.isnan(a) & xp.isnan(v))
        n = a.shape[axis]
        pos = xp.arange(n, dtype="int64").reshape((n,) + (1,) * (a.ndim - axis - 1))
        return ctx.wrap(_scan(xp, xp.where(mark, pos, -1), axis, xp.maximum))


def _cum_extreme(x, dim, axis, largest, result, op):
    x = as_tensor(x, op)
    if x.data.dtype.kind == "c":
        _no_complex(x, op)
    d = _dim(x, dim, axis, op)
    if x.ndim == 0:
        return result(x.clone(), Tensor._make(x.device.backend.xp.zeros((), dtype="int64"), x.device))
    index = CumArgIndex.apply(x.detach(), d, largest)
    return result(take_along(x, index, d, distinct=False), index)


def _cum_extreme_ref(np, a, largest, axis=-1):
    acc = np.maximum.accumulate if largest else np.minimum.accumulate
    v = acc(a, axis)
    n = a.shape[axis]
    pos = np.arange(n).reshape((n,) + (1,) * (a.ndim - axis % a.ndim - 1))
    return v, np.maximum.accumulate(np.where(a == v, pos, -1), axis).astype(np.int64)


@register(method=True, tests=(
    OpTest((((3, 5),), ((4,),)), op=lambda x: tuple(cummax(x, -1)), ref=lambda np, a: _cum_extreme_ref(np, a, True),
           grad=False, gradgrad=False),      # (values, indices): the gradient of the values is checked below
    OpTest((((4, 3),),), op=lambda x: cummax(x.T, 0).values, ref=lambda np, a: np.maximum.accumulate(a.T, 0),
           name="cummax_noncontiguous")))
def cummax(x, dim=None, *, axis=None):
    """Running maximum along dim (required) and its running arg: ``(values, indices)``; at ties the later
    index, once NaN is seen NaN (at the latest NaN), as PyTorch's. The gradient goes to the running arg."""
    return _cum_extreme(x, dim, axis, True, cummax_result, "cummax")


@register(method=True, tests=(
    OpTest((((3, 5),),), op=lambda x: tuple(cummin(x, 0)), ref=lambda np, a: _cum_extreme_ref(np, a, False, 0),
           grad=False, gradgrad=False),      # (values, indices): the gradient of the values is checked below
    OpTest((((3, 5),), ((0, 2),)), op=lambda x: cummin(x, 1).values, ref=lambda np, a: np.minimum.accumulate(a, 1),
           name="cummin_values")))
def cummin(x, dim=None, *, axis=None):
    """Running minimum along dim (required) and its running arg: ``(values, indices)``, as ``cummax``."""
    return _cum_extreme(x, dim, axis, False, cummin_result, "cummin")


# --------------------------------------------------------------------------- logcumsumexp
class LogCumSumExp(Function):
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, axis):
        xp = ctx.xp
        a = x.data
        if a.dtype is bfloat16:
            out = _scan(xp, a.astype(float32), axis, xp.logaddexp).astype(bfloat16)
        else:
            out = _scan(xp, a, axis, xp.logaddexp)
        y = ctx.wrap(out)
        ctx.save_for_backward(x, y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        # grad_i = sum_{j >= i} grad_j exp(x_i - y_j), summed in log space for the positive and the negative
        # grads apart (PyTorch's and TensorFlow's formula): written with logcumsumexp, so it is twice
        # differentiable, and no exp can overflow
        x, y = ctx.saved_tensors
        d = ctx.axis
        # a log of "nothing": far below any log-gradient, yet lowest - y cannot overflow
        lowest = float(x.device.backend.xp.finfo(x.data.dtype).min) / 4 if x.data.dtype is not bfloat16 else -8.0e37
        log_abs = log(_abs(where(equal(grad, 0), 1.0, grad)))     # log(0) is masked out below anyway
        log_pos = where(greater(grad, 0), log_abs, lowest)
        log_neg = where(less(grad, 0), log_abs, lowest)

        def rev(t):
            return flip(LogCumSumExp.apply(flip(t, d), d), d)
        return exp(rev(log_pos - y) + x) - exp(rev(log_neg - y) + x), None


@register(method=True, tests=(
    OpTest((((3, 5),), ((4,),), ((),)), op=lambda x: logcumsumexp(x, -1),
           ref=lambda np, a: a if a.ndim == 0 else np.logaddexp.accumulate(a, -1)),
    OpTest((((4, 3),),), op=lambda x: logcumsumexp(x * 40.0, 0), ref=lambda np, a: np.logaddexp.accumulate(a * 40.0, 0),
           name="logcumsumexp_wide")))
def logcumsumexp(x, dim=None, *, axis=None):
    """log(cumsum(exp(x))) along dim (required), without overflow or underflow; integer inputs give the
    default float dtype."""
    x = as_tensor(x, "logcumsumexp")
    if x.data.dtype.kind == "c":
        _no_complex(x, "logcumsumexp")
    d = _dim(x, dim, axis, "logcumsumexp")
    if not is_inexact(x.dtype):
        x = x.to(dtype=get_default_dtype())
    if x.ndim == 0:
        return reshape(LogCumSumExp.apply(reshape(x, (1,)), 0), ())
    return LogCumSumExp.apply(x, d)
