"""Sorting and selection: sort, argsort, msort, topk, kthvalue, median.

Each op finds its indices on arrays with the backend's own sort or partition (NumPy's, or CuPy's on the
GPU: no host round trip), as an int64 graph constant, and takes its values with ``TakeAlong``, whose
backward puts the gradient back at those indices: the gradient reaches exactly the selected elements,
ties included, as PyTorch's. ``median()`` of the whole tensor shares it among the elements equal to the
median instead, as PyTorch's does. NaN sorts as the largest value (NumPy's, CuPy's and PyTorch's order).
The cumulative ops cummax/cummin (ops/cumulative.py) take their values the same way.
"""
from collections import namedtuple
from typing import Any, Callable

from ..autograd.function import Function
from ..tensor import Tensor
from .elementwise import where, equal, isnan, logical_and, logical_or, _no_complex
from .shape import flatten, reshape, broadcast_to
from ._util import as_tensor, normalize_dim
from . import batching
from .batching import _union, _expand, _bsizes, _wrap
from .registry import register, OpTest

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "median"]

# the (values, indices) results, named tuples as PyTorch's torch.return_types
sort_result = namedtuple("sort", ("values", "indices"))  # type: ignore[name-match]  # PyTorch's name, torch.return_types.sort
topk_result = namedtuple("topk", ("values", "indices"))  # type: ignore[name-match]  # PyTorch's name, torch.return_types.topk
kthvalue_result = namedtuple("kthvalue", ("values", "indices"))  # type: ignore[name-match]  # PyTorch's name, torch.return_types.kthvalue
median_result = namedtuple("median", ("values", "indices"))  # type: ignore[name-match]  # PyTorch's name, torch.return_types.median


# --------------------------------------------------------------------------- index kernels (arrays)
def _slice(a, axis, start, stop):
    return a[(slice(None),) * axis + (slice(start, stop),)]


def _argsort(xp, a, axis, descending):
    """The stable sorting permutation along axis; descending keeps tied elements in their order too
    (the ascending sort of the reversed row, reversed) and puts NaN first, as PyTorch's."""
    if not descending:
        return xp.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    return (n - 1) - xp.flip(xp.argsort(xp.flip(a, axis), axis=axis, kind="stable"), axis)


def _topk_index(xp, a, k, axis, largest, sorted_):
    n = a.shape[axis]
    if k == n:
        return _argsort(xp, a, axis, largest)
    if k == 0:
        return xp.zeros(a.shape[:axis] + (0,) + a.shape[axis + 1:], dtype="int64")
    # a partition finds the k in O(n); NaN partitions as the largest value (NumPy's and CuPy's order)
    if largest:
        part = _slice(xp.argpartition(a, n - k, axis=axis), axis, n - k, n)
    else:
        part = _slice(xp.argpartition(a, k - 1, axis=axis), axis, 0, k)
    if sorted_:
        part = xp.take_along_axis(part, _argsort(xp, xp.take_along_axis(a, part, axis), axis, largest), axis)
    return part


def _kth_index(xp, a, k, axis):
    """The index of the k-th smallest (1-based) along axis, keeping that axis (size 1)."""
    return _slice(xp.argpartition(a, k - 1, axis=axis), axis, k - 1, k)


def _median_index(xp, a, axis):
    """The lower median's index along axis (size 1); where a row has NaN, its first NaN (PyTorch's)."""
    idx = _kth_index(xp, a, (a.shape[axis] - 1) // 2 + 1, axis)
    if a.dtype.kind != "f" and str(a.dtype) != "bfloat16":
        return idx
    nan = xp.isnan(a)
    return xp.where(nan.any(axis=axis, keepdims=True), xp.argmax(nan, axis=axis, keepdims=True), idx)


class _Index(Function):
    """An int64 index computed from x's values (a graph constant: applied to x detached)."""
    batch_rule = batching.unary_axis(1)
    kernel: Callable[..., Any] | None = None     # the subclass's kernel(xp, a, *args, axis)

    @classmethod
    def forward(cls, ctx, x, axis, *args):
        a = cls.kernel(ctx.xp, x.data, *args, axis=axis)
        return ctx.wrap(a if a.dtype == "int64" else a.astype("int64"))     # intp is int32 on some platforms


class SortIndex(_Index):
    kernel = staticmethod(lambda xp, a, descending, axis: _argsort(xp, a, axis, descending))


class TopKIndex(_Index):
    kernel = staticmethod(lambda xp, a, k, largest, sorted_, axis: _topk_index(xp, a, k, axis, largest, sorted_))


class KthIndex(_Index):
    kernel = staticmethod(lambda xp, a, k, axis: _kth_index(xp, a, k, axis))


class MedianIndex(_Index):
    kernel = staticmethod(lambda xp, a, axis: _median_index(xp, a, axis))


# --------------------------------------------------------------------------- values at indices
def _along(xp, index, axis):
    """The advanced index that picks ``index`` along axis and the matching position elsewhere."""
    nd = index.ndim
    return tuple(index if d == axis else xp.arange(s).reshape((1,) * d + (s,) + (1,) * (nd - d - 1))
                 for d, s in enumerate(index.shape))


def _along_rule(cls, args, kwargs):
    """x (or grad) and index, both possibly batched: each expanded to the batch dims, the axis shifted;
    PutAlong's shape gains the batch sizes."""
    x, index, axis = args[:3]
    levels = _union([x, index])
    rest = list(args[3:])
    if cls is PutAlong:
        rest[0] = _bsizes(levels) + tuple(rest[0])
    out = cls.apply(_expand(x, levels, x.shape), _expand(index, levels, index.shape), axis + len(levels), *rest)
    return _wrap(out, levels)


class TakeAlong(Function):
    """x's entries at ``index`` (an int64 Tensor, a graph constant) along axis; the gradient is put back
    at those entries (added up where ``distinct`` is False: cummax's repeated indices)."""
    batch_rule = _along_rule

    @staticmethod
    def forward(ctx, x, index, axis, distinct):
        ctx.save_for_backward(index)
        ctx.shape, ctx.axis, ctx.distinct = x.data.shape, axis, distinct
        return ctx.wrap(ctx.xp.take_along_axis(x.data, index.data, axis))

    @staticmethod
    def backward(ctx, grad):
        index, = ctx.saved_tensors
        return PutAlong.apply(grad, index, ctx.axis, ctx.shape, ctx.distinct), None, None, None


class PutAlong(Function):
    """zeros(shape) with g placed at ``index`` along axis (summed where indices repeat): TakeAlong's
    backward, and TakeAlong is its own."""
    batch_rule = _along_rule

    @staticmethod
    def forward(ctx, g, index, axis, shape, distinct):
        ctx.save_for_backward(index)
        ctx.axis, ctx.distinct = axis, distinct
        out = ctx.xp.zeros(shape, dtype=g.data.dtype)
        if distinct:      # an indexed write (not put_along_axis, which ag.compile's tracer cannot see writing)
            out[_along(ctx.xp, index.data, axis)] = g.data
        else:
            ctx.device.backend.scatter_add(out, _along(ctx.xp, index.data, axis), g.data)
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        index, = ctx.saved_tensors
        return TakeAlong.apply(grad, index, ctx.axis, ctx.distinct), None, None, None, None


class TakeShared(Function):
    """x's entry at ``index`` (size 1 along axis); the gradient is shared evenly by every entry of the
    row equal to it (NaN by every NaN): PyTorch's median() of the whole tensor."""
    batch_rule = _along_rule

    @staticmethod
    def forward(ctx, x, index, axis):
        y = ctx.wrap(ctx.xp.take_along_axis(x.data, index.data, axis))
        ctx.save_for_backward(x, y)
        ctx.axis = axis
        return y

    @staticmethod
    def backward(ctx, grad):
        from .reduction import sum
        x, y = ctx.saved_tensors
        y = broadcast_to(y, x.shape)
        mask = logical_or(equal(x, y), logical_and(isnan(x), isnan(y)))
        count = sum(mask, ctx.axis, True).to(dtype=x.dtype)
        return where(mask, broadcast_to(grad, x.shape) / count, 0.0), None, None


def take_along(x, index, axis, distinct=True):
    """x's entries at the int64 Tensor ``index`` along axis (differentiable in x); for ops/cumulative.py."""
    return TakeAlong.apply(x, index, axis, distinct)


# --------------------------------------------------------------------------- the ops
def _prepare(x, dim, op):
    x = as_tensor(x, op)
    if x.data.dtype.kind == "c":
        _no_complex(x, op)
    return x, normalize_dim(dim, x.ndim, op)


def _values_indices(result, x, index, axis, keepdim=True):
    """(values, indices) as a named tuple; a 0-d x was viewed as (1,) and is given its shape back."""
    values = TakeAlong.apply(x, index, axis, True)
    if not keepdim:
        values, index = values.squeeze(axis), index.squeeze(axis)
    return result(values, index)


def _scalar(x):
    return x.ndim == 0


@register(method=True, tests=(
    OpTest((((3, 5),), ((4,),), ((),), ((2, 0),)), op=lambda x: sort(x).values,
           ref=lambda np, a: a if a.ndim == 0 else np.sort(a, -1)),
    OpTest((((4, 3),),), op=lambda x: sort(x.T, dim=0, descending=True).values,        # a non-contiguous input
           ref=lambda np, a: -np.sort(-a.T, 0), name="sort_descending_noncontiguous"),
    OpTest((((4, 3),),), op=lambda x: tuple(sort(x, 0, descending=True, stable=True)),
           ref=lambda np, a: (-np.sort(-a, 0), np.argsort(-a, 0, kind="stable")), name="sort_indices",
           grad=False, gradgrad=False)))   # (values, indices): the values' gradient is checked in the entries above
def sort(x, dim=-1, descending=False, stable=False):
    """Sorted values along dim and the permutation that sorts them: ``(values, indices)``. The sort is
    always stable (ties keep their order, also descending); NaN sorts as the largest value."""
    x, d = _prepare(x, dim, "sort")
    if _scalar(x):
        return sort_result(x.clone(), Tensor._make(x.device.backend.xp.zeros((), dtype="int64"), x.device))
    index = SortIndex.apply(x.detach(), d, bool(descending))
    return _values_indices(sort_result, x, index, d)


@register(method=True, tests=OpTest(
    (((3, 5),), ((2, 0),)), op=lambda x: argsort(x, dim=0, descending=True),
    ref=lambda np, a: np.argsort(-a, 0, kind="stable"), grad=False, gradgrad=False))   # int64 indices, as PyTorch's
def argsort(x, dim=-1, descending=False, stable=False):
    """The indices that sort x along dim (int64; stable, as ``sort``)."""
    x, d = _prepare(x, dim, "argsort")
    if _scalar(x):
        return Tensor._make(x.device.backend.xp.zeros((), dtype="int64"), x.device)
    return SortIndex.apply(x.detach(), d, bool(descending))


@register(method=True, tests=OpTest((((3, 4),), ((5,),)), ref=lambda np, a: np.sort(a, 0)))
def msort(x):
    """x sorted along its first dim (``sort(x, dim=0).values``)."""
    return sort(x, 0).values


def _check_k(k, n, op, low=0):
    if isinstance(k, bool) or not hasattr(k, "__index__"):
        raise TypeError(f"{op}: expected k to be an int, got {type(k).__name__}")
    k = k.__index__()
    if not low <= k <= n:
        raise IndexError(f"{op}: k={k} is out of range for a dim of size {n} (expected {low} <= k <= {n})")
    return k


@register(method=True, tests=(
    OpTest((((3, 5),), ((6,),), ((),)), op=lambda x: topk(x, 1 if x.ndim == 0 else 3).values,
           ref=lambda np, a: a if a.ndim == 0 else -np.sort(-a, -1)[..., :3]),
    OpTest((((4, 3),),), op=lambda x: tuple(topk(x, 2, dim=0, largest=False)),
           ref=lambda np, a: (np.sort(a, 0)[:2], np.argsort(a, 0)[:2]), name="topk_smallest_dim0", grad=False,
           gradgrad=False),      # (values, indices): the values' gradient is checked in the other entries
    OpTest((((2, 5),),), op=lambda x: topk(x, 5).values, ref=lambda np, a: -np.sort(-a, -1), name="topk_all")))
def topk(x, k, dim=-1, largest=True, sorted=True):
    """The k largest (``largest=False``: smallest) entries along dim and their indices, in order when
    ``sorted``: ``(values, indices)``."""
    x, d = _prepare(x, dim, "topk")
    if _scalar(x):
        _check_k(k, 1, "topk")
        return topk_result(x.clone(), Tensor._make(x.device.backend.xp.zeros((), dtype="int64"), x.device))
    k = _check_k(k, x.shape[d], "topk")
    index = TopKIndex.apply(x.detach(), d, k, bool(largest), bool(sorted))
    return _values_indices(topk_result, x, index, d)


@register(method=True, tests=(
    OpTest((((3, 5),), ((),)), op=lambda x: kthvalue(x, 1 if x.ndim == 0 else 2).values,
           ref=lambda np, a: a if a.ndim == 0 else np.sort(a, -1)[..., 1]),
    OpTest((((4, 3),),), op=lambda x: tuple(kthvalue(x, 3, 0, keepdim=True)),
           ref=lambda np, a: (np.sort(a, 0)[2:3], np.argsort(a, 0)[2:3]), name="kthvalue_keepdim", grad=False,
           gradgrad=False)))     # (values, indices): the values' gradient is checked in the first entry
def kthvalue(x, k, dim=-1, keepdim=False):
    """The k-th smallest entry (1-based) along dim and its index: ``(values, indices)``."""
    x, d = _prepare(x, dim, "kthvalue")
    if _scalar(x):
        _check_k(k, 1, "kthvalue", low=1)
        return kthvalue_result(x.clone(), Tensor._make(x.device.backend.xp.zeros((), dtype="int64"), x.device))
    k = _check_k(k, x.shape[d], "kthvalue", low=1)
    index = KthIndex.apply(x.detach(), d, k)
    return _values_indices(kthvalue_result, x, index, d, bool(keepdim))


def _median_ref(np, a):
    s = np.sort(a.reshape(-1))
    return s[(s.size - 1) // 2]


@register(method=True, tests=(
    OpTest((((3, 4),), ((5,),), ((),)), ref=_median_ref),
    OpTest((((3, 5),), ((4, 2),)), op=lambda x: tuple(median(x, 1)),
           ref=lambda np, a: (np.sort(a, 1)[:, (a.shape[1] - 1) // 2],
                              np.argsort(a, 1)[:, (a.shape[1] - 1) // 2]), name="median_dim", grad=False,
           gradgrad=False),      # (values, indices): the values' gradient is checked in median_dim_values
    OpTest((((4, 3),),), op=lambda x: x.median(0, keepdim=True).values,
           ref=lambda np, a: np.sort(a, 0)[1:2], name="median_dim_values")))
def median(x, dim=None, keepdim=False):
    """The median: of all elements (a 0-d tensor; the gradient is shared by the entries equal to it)
    when dim is None, else along dim as ``(values, indices)``. With an even count it is the lower of the
    two middle values; a row with NaN has median NaN (at its first NaN), as PyTorch's."""
    x = as_tensor(x, "median")
    if dim is None:
        x, _ = _prepare(x, 0, "median")
        flat = flatten(x)
        if flat.shape[0] == 0:      # PyTorch's: the median of nothing is NaN
            return Tensor._make(x.device.backend.xp.full((), float("nan"), dtype=x.dtype), x.device)
        index = MedianIndex.apply(flat.detach(), 0)
        return reshape(TakeShared.apply(flat, index, 0), ())
    x, d = _prepare(x, dim, "median")
    if _scalar(x):
        return median_result(x.clone(), Tensor._make(x.device.backend.xp.zeros((), dtype="int64"), x.device))
    if x.shape[d] == 0:
        raise IndexError(f"median: cannot take the median over an empty dimension (dim {d} of shape {x.shape})")
    index = MedianIndex.apply(x.detach(), d)
    return _values_indices(median_result, x, index, d, bool(keepdim))
