"""Search and indexed writes: nonzero, argwhere, masked_fill, masked_select, take, index_add, index_copy,
index_fill, scatter, scatter_reduce, searchsorted, bucketize, bincount, unique, unique_consecutive, and the
in-place forms masked_fill_, index_add_, index_copy_, index_fill_, scatter_, scatter_reduce_.

Semantics are PyTorch's. The ops that write along a dim reuse indexing.py's primitives where one fits
(index_add is getitem's backward, index_copy is setitem); scatter and scatter_reduce are Functions here.
Repeated targets of scatter_reduce's prod/amax/amin are combined by a segmented scan over the targets
sorted once (CuPy has no multiply.at, and its maximum.at refuses float16): log2(n) vectorised steps, no
loop over the data. Ops whose result size depends on the values (nonzero, argwhere, masked_select,
unique, unique_consecutive, bincount) declare their one device-to-host read to the sync debug mode."""
import builtins

from ..autograd.function import Function
from ..tensor import Tensor
from ..dtypes import float64, is_inexact, result_type
from ._util import as_tensor, normalize_dim
from .shape import broadcast_shapes, broadcast_to, flatten
from .elementwise import where
from .indexing import (GetItem, Gather, ScatterAddInto, IndexAddInto, IndexPut, getitem, _prepare, _int_tensor,
                       _check_along, _along, _ix)
from .inplace import apply_inplace
from .batching import _wrap, _bsizes, _union, _expand
from .registry import register, OpTest

__all__ = ["nonzero", "argwhere", "masked_fill", "masked_select", "take", "index_add", "index_copy", "index_fill",
           "scatter", "scatter_reduce", "searchsorted", "bucketize", "bincount", "unique", "unique_consecutive",
           "masked_fill_", "index_add_", "index_copy_", "index_fill_", "scatter_", "scatter_reduce_"]

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _const(x, a):
    """The array ``a`` as a Tensor on x's device that no gradient flows through (a mask, a count)."""
    return Tensor._make(a, x.device)


def _same_device(x, t, op, name):
    if t.device is not x.device:
        raise RuntimeError(f"{op}: expected {name} on the tensor's device, got the tensor on {x.device} and "
                           f"{name} on {t.device}; move it with .to('{x.device}')")


# --------------------------------------------------------------------------- value-dependent shapes
def _nonzero_arrays(xp, a):
    return xp.nonzero(a.reshape(1) if a.ndim == 0 else a)


# op table: grad/gradgrad off, as in PyTorch: integer indices, nothing to differentiate
@register(method=True, tests=(
    OpTest((((3, 4),), ((2, 3, 2),), ((0, 3),), ((5,),)), ref=lambda np, a: np.argwhere(a), kinds=("int",),
           grad=False, gradgrad=False),
    OpTest((((),),), ref=lambda np, a: np.zeros((int(a != 0), 0), dtype=np.int64), name="nonzero_0d",
           kinds=("int",), grad=False, gradgrad=False),
    OpTest((((3, 4),),), op=lambda x: nonzero(x, as_tuple=True), ref=lambda np, a: np.nonzero(a),
           name="nonzero_as_tuple", kinds=("int",), grad=False, gradgrad=False)))
def nonzero(input, *, as_tuple=False):
    """Indices of the non-zero elements: an (n, ndim) int64 tensor, or (as_tuple=True) one 1-d tensor per dim."""
    x = as_tensor(input, "nonzero")
    b = x.device.backend
    with b.sync_point("nonzero"):                  # the result's size is data
        idx = b.call(_nonzero_arrays, b.xp, x.data)
    if as_tuple:
        return tuple(Tensor._make(i.astype("int64", copy=False), x.device) for i in idx)
    if x.ndim == 0:
        return Tensor._make(b.call(b.xp.zeros, (idx[0].shape[0], 0), dtype="int64"), x.device)
    return Tensor._make(b.call(b.xp.stack, idx, axis=1).astype("int64", copy=False), x.device)


# op table: grad/gradgrad off, as in PyTorch: integer indices, nothing to differentiate
@register(method=True, tests=OpTest((((3, 4),), ((0, 2),), ((6,),)), ref=lambda np, a: np.argwhere(a),
                                    kinds=("int",), grad=False, gradgrad=False))
def argwhere(input):
    """Indices of the non-zero elements as an (n, ndim) int64 tensor (nonzero with as_tuple=False)."""
    return nonzero(input)


def _masked_select_ref(np, a, m):
    shape = np.broadcast_shapes(a.shape, m.shape)
    return np.broadcast_to(a, shape)[np.broadcast_to(m, shape)]


def _bool_mask(mask, x, op):
    """mask as a bool Tensor on x's device (PyTorch refuses other dtypes)."""
    mask = as_tensor(mask, op, like=x)
    _same_device(x, mask, op, "the mask")
    if mask.dtype.kind != "b":
        raise TypeError(f"{op}: expected a bool mask, got dtype {mask.dtype}; compare first (x > 0) or use .bool()")
    return mask


@register(method=True, tests=(
    OpTest((((3, 4), (3, 4)), ((3, 4), (4,)), ((1, 4), (3, 1)), ((), ()), ((0, 2), (0, 2))),
           ref=_masked_select_ref, kinds=(None, "bool")),))
def masked_select(input, mask):
    """The elements of input where the bool mask is true (the two broadcast together), as a 1-d tensor."""
    x = as_tensor(input, "masked_select")
    mask = _bool_mask(mask, x, "masked_select")
    shape = broadcast_shapes(x.shape, mask.shape, op="masked_select")
    if x.shape != shape:
        x = broadcast_to(x, shape)
    if mask.shape != shape:
        mask = Tensor._make(mask.xp.broadcast_to(mask.data, shape), mask.device)
    return GetItem.apply(x, *_prepare(x, mask, "masked_select"))    # _prepare declares the mask's read


def _bincount_ref(np, x, w=None, minlength=0):
    return np.bincount(x, w, minlength=minlength)


@register(method=True, tests=(
    OpTest((((7,),), ((0,),)), ref=_bincount_ref, kinds=("index:5",), grad=False, gradgrad=False),   # int counts
    OpTest((((7,), (7,)), ((0,), (0,))), ref=lambda np, x, w: np.bincount(x, w, minlength=6).astype(w.dtype),
           op=lambda x, w: bincount(x, w, minlength=6), name="bincount_weights", kinds=("index:5", None))))
def bincount(input, weights=None, minlength=0):
    """How often each value 0..max occurs in the 1-d non-negative integer input (summing ``weights``
    instead of 1 when given); length max(input) + 1, at least ``minlength``. Differentiable in weights."""
    x = as_tensor(input, "bincount")
    if x.ndim != 1 or x.dtype.kind not in "iu":
        raise ValueError(f"bincount: expected a 1-d tensor of non-negative integers, got shape {x.shape} and "
                         f"dtype {x.dtype}")
    if isinstance(minlength, bool) or not isinstance(minlength, int) or minlength < 0:
        raise ValueError(f"bincount: expected minlength a non-negative int, got {minlength!r}")
    b, xp = x.device.backend, x.xp
    if x.numel():
        b.check_range(x.data, 0, 2 ** 62, ValueError, "bincount: expected non-negative values, got {value}")
        # the result's length is data: one declared read of the largest value
        length = builtins.max(minlength, int(b.read_back(b.call(xp.max, x.data), "bincount")) + 1)
    else:
        length = minlength
    if weights is None:
        out = b.call(xp.zeros, (length,), dtype="int64")
        b.call(b.scatter_add, out, (x.data,), b.call(xp.ones, x.shape, dtype="int64"))
        return Tensor._make(out, x.device)
    w = as_tensor(weights, "bincount", like=x)
    _same_device(x, w, "bincount", "weights")
    if w.shape != x.shape:
        raise ValueError(f"bincount: expected weights of the input's shape {x.shape}, got {w.shape}")
    if not is_inexact(w.dtype):
        w = w.to(dtype=float64)                    # integer weights count in float64, as PyTorch's
    return IndexAddInto.apply(w, (length,), (x.data,), False)


def _unique_arrays(xp, a, inverse, counts, dim):
    if dim is None:
        r = xp.unique(a.reshape(-1), return_inverse=inverse, return_counts=counts, equal_nan=False)
    else:
        r = xp.unique(a, return_inverse=inverse, return_counts=counts, axis=dim)
    return r if isinstance(r, tuple) else (r,)


def _unique_ref(np, a, inverse=False, counts=False, dim=None):
    r = np.unique(a.reshape(-1) if dim is None else a, return_inverse=inverse, return_counts=counts, axis=dim)
    r = r if isinstance(r, tuple) else (r,)
    if inverse:
        r = (r[0], r[1].reshape(a.shape if dim is None else (a.shape[dim],))) + r[2:]
    return r[0] if len(r) == 1 else r


def _finish_unique(x, values, inverse, counts, want_inverse, want_counts, inv_shape):
    out = (Tensor._make(values, x.device),)
    if want_inverse:
        out += (Tensor._make(inverse.reshape(inv_shape).astype("int64", copy=False), x.device),)
    if want_counts:
        out += (Tensor._make(counts.astype("int64", copy=False), x.device),)
    return out[0] if len(out) == 1 else out


# op table: grad/gradgrad off, as in PyTorch: values picked from integer inputs, inverse and counts (no float input)
@register(method=True, tests=(
    OpTest((((9,),), ((3, 4),), ((0,),), ((),)), ref=_unique_ref, kinds=("index:4",), grad=False, gradgrad=False),
    OpTest((((3, 4),),), op=lambda x: unique(x, return_inverse=True, return_counts=True),
           ref=lambda np, a: _unique_ref(np, a, True, True), name="unique_inverse_counts", kinds=("index:3",),
           grad=False, gradgrad=False),
    OpTest((((5, 2),),), op=lambda x: x.unique(dim=0, return_inverse=True, return_counts=True),
           ref=lambda np, a: _unique_ref(np, a, True, True, 0), name="unique_dim", kinds=("index:2",),
           grad=False, gradgrad=False)))
def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted; NaNs kept apart, as PyTorch's), with the inverse indices and counts
    when asked; with ``dim``, the distinct slices along dim. Not differentiable."""
    x = as_tensor(input, "unique")
    d = None if dim is None else normalize_dim(dim, x.ndim, "unique")
    if d is not None and x.ndim == 0:
        raise ValueError("unique: dim is not allowed for a 0-d tensor")
    b = x.device.backend
    with b.sync_point("unique"):                   # the result's size is data
        r = b.call(_unique_arrays, b.xp, x.data, return_inverse, return_counts, d)
    inv = r[1] if return_inverse else None
    cnt = r[-1] if return_counts else None
    return _finish_unique(x, r[0], inv, cnt, return_inverse, return_counts,
                          x.shape if d is None else (x.shape[d],))


def _consecutive_arrays(xp, a, dim):
    """(values, inverse, counts) of unique_consecutive on arrays (dim None: the flattened array)."""
    if dim is None:
        a = a.reshape(-1)
        keys, d = a, 0
    else:
        keys, d = xp.moveaxis(a, dim, 0).reshape(a.shape[dim], -1), dim
    n = keys.shape[0]
    change = xp.ones((n,), dtype=bool)
    if n > 1:
        diff = keys[1:] != keys[:-1]
        change[1:] = diff if diff.ndim == 1 else xp.any(diff, axis=1)
    starts = xp.nonzero(change)[0]
    values = xp.take(a, starts, axis=d)
    inverse = xp.cumsum(change.astype("int64")) - 1
    counts = xp.diff(xp.concatenate([starts, xp.full((1,), n, dtype=starts.dtype)]))
    return values, inverse, counts


def _consecutive_ref(np, a, inverse=False, counts=False, dim=None):
    if dim is None:
        flat = a.reshape(-1)
        change = np.ones(flat.shape, bool)
        change[1:] = flat[1:] != flat[:-1]
        values = flat[change]
        starts = np.nonzero(change)[0]
        inv = (np.cumsum(change) - 1).reshape(a.shape)
    else:
        m = np.moveaxis(a, dim, 0).reshape(a.shape[dim], -1)
        change = np.ones(m.shape[0], bool)
        change[1:] = (m[1:] != m[:-1]).any(axis=1)
        starts = np.nonzero(change)[0]
        values = np.take(a, starts, axis=dim)
        inv = np.cumsum(change) - 1
    cnt = np.diff(np.append(starts, change.shape[0]))
    out = (values,) + ((inv,) if inverse else ()) + ((cnt,) if counts else ())
    return out[0] if len(out) == 1 else out


# op table: grad/gradgrad off, as in PyTorch: values picked from integer inputs, inverse and counts (no float input)
@register(method=True, tests=(
    OpTest((((9,),), ((3, 4),), ((0,),), ((),)), ref=_consecutive_ref, kinds=("index:2",), grad=False,
           gradgrad=False),
    OpTest((((3, 4),),), op=lambda x: unique_consecutive(x, return_inverse=True, return_counts=True),
           ref=lambda np, a: _consecutive_ref(np, a, True, True), name="unique_consecutive_inverse_counts",
           kinds=("index:2",), grad=False, gradgrad=False),
    OpTest((((6, 2),),), op=lambda x: x.unique_consecutive(return_counts=True, dim=0),
           ref=lambda np, a: _consecutive_ref(np, a, False, True, 0), name="unique_consecutive_dim",
           kinds=("index:2",), grad=False, gradgrad=False)))
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Each run of equal consecutive values (slices along ``dim`` when given) collapsed to one, with the
    inverse indices and run lengths when asked. Not differentiable."""
    x = as_tensor(input, "unique_consecutive")
    d = None if dim is None else normalize_dim(dim, x.ndim, "unique_consecutive")
    if d is not None and x.ndim == 0:
        raise ValueError("unique_consecutive: dim is not allowed for a 0-d tensor")
    b = x.device.backend
    with b.sync_point("unique_consecutive"):       # the number of runs is data
        values, inv, cnt = b.call(_consecutive_arrays, b.xp, x.data, d)
    return _finish_unique(x, values, inv, cnt, return_inverse, return_counts,
                          x.shape if d is None else (x.shape[d],))


# --------------------------------------------------------------------------- searchsorted, bucketize
def _search_nd(xp, seq, v, right):
    """searchsorted along the last dim of ``seq`` for each row of ``v`` (same leading dims): a binary
    search of n.bit_length() vectorised halvings, in NumPy's order (NaN after every number)."""
    n = seq.shape[-1]
    lo = xp.zeros(v.shape, dtype="int64")
    hi = xp.full(v.shape, n, dtype="int64")
    floats = v.dtype.kind == "f" or seq.dtype.kind == "f"
    vnan = xp.isnan(v) if floats else None
    for _ in range(n.bit_length()):
        mid = (lo + hi) // 2
        e = xp.take_along_axis(seq, xp.minimum(mid, n - 1), axis=-1)
        if right:                                  # go right while e <= v
            go = (e <= v) | vnan if floats else e <= v
        else:                                      # go right while e < v
            go = (e < v) | (vnan & ~xp.isnan(e)) if floats else e < v
        go &= lo < hi
        lo = xp.where(go, mid + 1, lo)
        hi = xp.where(go, hi, mid)
    return lo


def _search_arrays(xp, seq, v, right, sorter):
    if seq.ndim == 1:
        if v.ndim == 0:
            return xp.searchsorted(seq, v.reshape(1), side="right" if right else "left", sorter=sorter).reshape(())
        return xp.searchsorted(seq, v, side="right" if right else "left", sorter=sorter)
    if sorter is not None:
        seq = xp.take_along_axis(seq, sorter, axis=-1)
    return _search_nd(xp, seq, v, right)


# op table: grad/gradgrad off, as in PyTorch: integer positions, piecewise constant in both inputs
@register(tests=(
    OpTest((((5,), (3, 4)), ((5,), ()), ((0,), (3,))), op=lambda s, v: searchsorted(_sorted_rows(s), v),
           ref=lambda np, s, v: np.searchsorted(np.sort(s), v), grad=False, gradgrad=False),
    OpTest((((2, 5), (2, 3)),), op=lambda s, v: searchsorted(_sorted_rows(s), v, right=True),
           ref=lambda np, s, v: np.stack([np.searchsorted(np.sort(r), q, side="right") for r, q in zip(s, v)]),
           name="searchsorted_nd_right", grad=False, gradgrad=False),
    OpTest((((6,), (4,)),), op=lambda s, v: searchsorted(s, v, side="right", sorter=_argsort(s)),
           ref=lambda np, s, v: np.searchsorted(s, v, side="right", sorter=np.argsort(s)),
           name="searchsorted_sorter", grad=False, gradgrad=False)))
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None, sorter=None):
    """Where each value of ``input`` would be inserted into ``sorted_sequence`` (along its last dim) to keep
    it sorted: the first such index, or the last with right=True / side="right". int64 (int32 with
    out_int32); a sequence of more than one dim searches row by row (its leading dims are input's)."""
    seq = as_tensor(sorted_sequence, "searchsorted")
    v = as_tensor(input, "searchsorted", like=seq)
    _same_device(seq, v, "searchsorted", "input")
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted: expected side 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted: side='left' and right=True contradict each other; pass one")
        right = side == "right"
    if seq.ndim == 0:
        raise ValueError("searchsorted: expected a sorted_sequence with at least one dim, got a 0-d tensor")
    if seq.ndim > 1 and seq.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"searchsorted: a sorted_sequence of shape {seq.shape} needs input with the leading dims "
                         f"{seq.shape[:-1]}, got input of shape {v.shape}")
    s = None
    if sorter is not None:
        sorter = _int_tensor(sorter, seq, "searchsorted", "sorter")
        if sorter.shape != seq.shape:
            raise ValueError(f"searchsorted: expected sorter of the sequence's shape {seq.shape}, got {sorter.shape}")
        s = sorter.data
    b, xp = seq.device.backend, seq.xp
    sa, va = seq.data, v.data
    if sa.dtype != va.dtype:
        dt = result_type(seq.dtype, v.dtype)
        sa, va = sa.astype(dt), va.astype(dt)
    out = b.call(_search_arrays, xp, sa, va, bool(right), s)
    return Tensor._make(out.astype("int32" if out_int32 else "int64", copy=False), seq.device)


def _sorted_rows(s):
    return Tensor._make(s.xp.sort(s.data, axis=-1), s.device)


def _argsort(s):
    return Tensor._make(s.xp.argsort(s.data, axis=-1), s.device)


# op table: grad/gradgrad off, as in PyTorch: integer positions, piecewise constant in both inputs
@register(tests=(
    OpTest((((3, 4), (5,)), ((), (3,))), op=lambda v, bd: bucketize(v, _sorted_rows(bd)),
           ref=lambda np, v, bd: np.searchsorted(np.sort(bd), v), grad=False, gradgrad=False),
    OpTest((((3, 4), (5,)),), op=lambda v, bd: bucketize(v, _sorted_rows(bd), right=True, out_int32=True),
           ref=lambda np, v, bd: np.searchsorted(np.sort(bd), v, side="right").astype(np.int32),
           name="bucketize_right", grad=False, gradgrad=False)))
def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value of ``input`` among the sorted 1-d ``boundaries``: i with
    boundaries[i-1] < x <= boundaries[i] (boundaries[i-1] <= x < boundaries[i] with right=True)."""
    bd = as_tensor(boundaries, "bucketize")
    if bd.ndim != 1:
        raise ValueError(f"bucketize: expected 1-d boundaries, got shape {bd.shape}")
    return searchsorted(bd, input, out_int32=out_int32, right=right)


# --------------------------------------------------------------------------- masked_fill, take
def _fill_value(value, x, op):
    """A fill value as a 0-d Tensor of x's dtype (a Tensor value keeps its graph)."""
    if isinstance(value, Tensor):
        _same_device(x, value, op, "the value")
        if value.ndim != 0:
            raise ValueError(f"{op}: expected a number or a 0-d tensor as the value, got a tensor of shape "
                             f"{value.shape}")
        return value if value.dtype == x.dtype else value.to(dtype=x.dtype)
    if not isinstance(value, (bool, int, float, complex)) and getattr(value, "ndim", None) != 0:
        raise TypeError(f"{op}: expected a number or a 0-d tensor as the value, got {type(value).__name__}")
    return Tensor._make(x.device.backend.call(x.xp.full, (), value, dtype=x.dtype), x.device)


@register(method=True, tests=(
    OpTest((((3, 4), (3, 4)), ((3, 4), (4,)), ((), ()), ((0, 3), (3,))), op=lambda x, m: masked_fill(x, m, 0.5),
           ref=lambda np, a, m: np.where(m, a.dtype.type(0.5), a), kinds=(None, "bool")),
    OpTest((((3, 4), (3, 1), ()),), op=lambda x, m, v: x.masked_fill(m, v),
           ref=lambda np, a, m, v: np.where(m, v, a), name="masked_fill_tensor_value", kinds=(None, "bool", None)),
    OpTest((((4, 3), (3, 4)),), op=lambda x, m: masked_fill(x.T, m, -1.0),
           ref=lambda np, a, m: np.where(m, -1.0, a.T).astype(a.dtype),
           name="masked_fill_noncontiguous", kinds=(None, "bool"))))
def masked_fill(input, mask, value):
    """input with ``value`` (a number or a 0-d tensor) where the bool mask (broadcast to input's shape) is true."""
    x = as_tensor(input, "masked_fill")
    mask = _bool_mask(mask, x, "masked_fill")
    if broadcast_shapes(x.shape, mask.shape, op="masked_fill") != x.shape:
        raise ValueError(f"masked_fill: the mask of shape {mask.shape} does not broadcast to the input's shape "
                         f"{x.shape}")
    return where(mask, _fill_value(value, x, "masked_fill"), x)


@register(method=True, tests=(
    OpTest((((3, 4),), ((5,),)), op=lambda x: take(x, _ix([[0, 4], [-1, 2], [0, 0]], x)),
           ref=lambda np, a: np.take(a, [[0, 4], [-1, 2], [0, 0]])),
    OpTest((((3, 4), (2, 5)), ((), (3,))), op=lambda x, i: x.take(i), ref=lambda np, a, i: np.take(a, i),
           name="take_index_kind", kinds=(None, "index:1")),
    OpTest((((3, 4),),), op=lambda x: take(x.T, _ix([1, 4, 11], x)), ref=lambda np, a: np.take(a.T, [1, 4, 11]),
           name="take_noncontiguous")))
def take(input, index):
    """The elements of input (as if flattened) at ``index``; the result has index's shape."""
    x = as_tensor(input, "take")
    index = _int_tensor(index, x, "take")
    x.device.backend.check_indices(index.data, x.numel(), "take")
    return getitem(flatten(x) if x.ndim != 1 else x, index)


# --------------------------------------------------------------------------- index_add / copy / fill
def _index_along(x, dim, index, op):
    """(x viewed with at least one dim, the normalised dim, the advanced index picking ``index`` along
    dim) for the index_* ops; a 0-d x is handled as shape (1,)."""
    index = _int_tensor(index, x, op)
    if index.ndim > 1:
        raise ValueError(f"{op}: expected a 0-d or 1-d index, got shape {index.shape}")
    d = normalize_dim(dim, x.ndim, op)
    xx = x.reshape(1) if x.ndim == 0 else x
    x.device.backend.check_indices(index.data, xx.shape[d], op)
    idx, _ = _prepare(xx, (slice(None),) * d + (index.reshape(-1),), op)
    return xx, d, idx, index.numel()


def _check_source(x, d, n, source, op):
    expect = x.shape[:d] + (n,) + x.shape[d + 1:]
    got = source.shape if source.ndim else (1,)
    if got != expect:
        raise ValueError(f"{op}: expected source of shape {expect} (the input's shape with dim {d} of the "
                         f"index's length {n}), got {source.shape}")
    if source.dtype != x.dtype:
        raise TypeError(f"{op}: expected source of the input's dtype {x.dtype}, got {source.dtype}")


@register(method=True, tests=(
    OpTest((((4, 3), (5, 3)), ((4, 3), (5, 3))), op=lambda x, s: index_add(x, 0, _ix([0, 2, 0, 3, 0], x), s),
           ref=lambda np, a, s: _index_add_ref(np, a, 0, [0, 2, 0, 3, 0], s)),
    OpTest((((2, 4, 3), (2, 2, 3)),), op=lambda x, s: x.index_add(-2, _ix([3, 3], x), s, alpha=-2.0),
           ref=lambda np, a, s: _index_add_ref(np, a, 1, [3, 3], -2.0 * s), name="index_add_alpha"),
    OpTest((((), ()),), op=lambda x, s: index_add(x, 0, _ix([0], x), s),
           ref=lambda np, a, s: a + s, name="index_add_0d")))
def index_add(input, dim, index, source, *, alpha=1):
    """input plus alpha * source added at ``index`` along dim (repeated indices accumulate)."""
    x = as_tensor(input, "index_add")
    source = as_tensor(source, "index_add", like=x)
    _same_device(x, source, "index_add", "source")
    xx, d, idx, n = _index_along(x, dim, index, "index_add")
    _check_source(xx, d, n, source, "index_add")
    s = source.reshape(xx.shape[:d] + (n,) + xx.shape[d + 1:])
    if alpha != 1:
        s = s * alpha
    out = xx + IndexAddInto.apply(s, xx.shape, idx, False)
    return out.reshape(()) if x.ndim == 0 else out


def _index_add_ref(np, a, dim, index, s):
    out = a.copy()
    np.add.at(out, (slice(None),) * dim + (np.array(index),), s)
    return out


def _index_copy_ref(np, a, dim, index, s):
    out = a.copy()
    out[(slice(None),) * dim + (np.array(index),)] = s
    return out


def _index_copy_rule(cls, args, kwargs):
    """x and source batched (either or both): source has x[idx]'s shape and idx one advanced index,
    which stays in place behind the batch dims."""
    x, v, idx, basic = args
    levels = _union([x, v])
    xb, vb = _expand(x, levels, x.shape), _expand(v, levels, v.shape)
    return _wrap(cls.apply(xb, vb, (slice(None),) * len(levels) + tuple(idx), basic), levels)


class IndexCopy(IndexPut):
    """setitem's Function for index_copy, whose source is batchable (it has x[idx]'s shape)."""
    batch_rule = _index_copy_rule


@register(method=True, tests=(
    OpTest((((4, 3), (2, 3)), ((4, 3), (2, 1))), op=lambda x, s: index_copy(x, 0, _ix([3, 1], x), s.expand(2, 3)),
           ref=lambda np, a, s: _index_copy_ref(np, a, 0, [3, 1], np.broadcast_to(s, (2, 3)))),
    OpTest((((2, 4), (2, 3)),), op=lambda x, s: x.index_copy(1, _ix([0, 3, 2], x), s),
           ref=lambda np, a, s: _index_copy_ref(np, a, 1, [0, 3, 2], s), name="index_copy_dim1")))
def index_copy(input, dim, index, source):
    """input with the slices at ``index`` along dim replaced by source's (with repeated indices, which one
    wins is unspecified, as in PyTorch)."""
    x = as_tensor(input, "index_copy")
    source = as_tensor(source, "index_copy", like=x)
    _same_device(x, source, "index_copy", "source")
    xx, d, idx, n = _index_along(x, dim, index, "index_copy")
    _check_source(xx, d, n, source, "index_copy")
    out = IndexCopy.apply(xx, source.reshape(xx.shape[:d] + (n,) + xx.shape[d + 1:]), idx, False)
    return out.reshape(()) if x.ndim == 0 else out


@register(method=True, tests=(
    OpTest((((3, 4),), ((3, 0),)), op=lambda x: index_fill(x, 0, _ix([2, 0, 2], x), -1.5),
           ref=lambda np, a: _index_copy_ref(np, a, 0, [2, 0, 2], -1.5)),
    OpTest((((3, 4), ()),), op=lambda x, v: x.index_fill(1, _ix([3, 3, 1], x), v),
           ref=lambda np, a, v: _index_copy_ref(np, a, 1, [3, 3, 1], v), name="index_fill_tensor_value")))
def index_fill(input, dim, index, value):
    """input with ``value`` (a number or a 0-d tensor) written at ``index`` along dim."""
    x = as_tensor(input, "index_fill")
    xx, d, idx, _ = _index_along(x, dim, index, "index_fill")
    mask = x.device.backend.call(_mask_at, x.xp, xx.shape, idx)
    out = where(_const(x, mask), _fill_value(value, x, "index_fill"), xx)
    return out.reshape(()) if x.ndim == 0 else out


def _mask_at(xp, shape, idx):
    mask = xp.zeros(shape, dtype=bool)
    mask[idx] = True
    return mask


# --------------------------------------------------------------------------- scatter, scatter_reduce
def _flat_targets(xp, index, dim, shape):
    """The flat positions in an array of ``shape`` that scattering ``index`` along dim writes to."""
    lin, stride = 0, 1
    pos = _along(xp, index, dim)
    strides = []
    for s in reversed(shape):
        strides.append(stride)
        stride *= s
    for p, st in zip(pos, reversed(strides)):
        lin = lin + p.astype("int64") * st
    return lin.reshape(-1)


def _identity(xp, reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if is_inexact(dtype):
        return float("-inf") if reduce == "amax" else float("inf")
    if dtype.kind == "b":
        return reduce == "amin"
    info = xp.iinfo(dtype)
    return info.min if reduce == "amax" else info.max


def _scatter_reduce_arrays(backend, x, src, index, dim, reduce, include_self):
    xp = backend.xp
    out = x.copy()
    flat = out.reshape(-1)
    pos = _flat_targets(xp, index, dim, out.shape)
    v = src.reshape(-1)
    if not include_self:                           # the targets start from the reduction's identity
        flat[pos] = _identity(xp, reduce, out.dtype)
    if reduce in ("sum", "mean"):
        backend.scatter_add(flat, (pos,), v)
        if reduce == "mean":
            count = xp.full(flat.shape, 1 if include_self else 0, dtype="int64")
            backend.scatter_add(count, (pos,), xp.ones(pos.shape, dtype="int64"))
            count = xp.maximum(count, 1).reshape(out.shape)
            if out.dtype.kind in "iu":
                return xp.floor_divide(out, count.astype(out.dtype))
            return (out / count).astype(out.dtype)
    else:                                          # prod, amax, amin: repeated targets combined by the op
        backend.scatter_combine(flat, pos, v, reduce)
    return out


def _scatter_rule(cls, args, kwargs):
    """x and src batched (either or both), the index shared: the index broadcast over the batch dims."""
    x, src, index, dim = args[:4]
    if isinstance(index, Tensor):
        return NotImplemented
    levels = _union([a for a in (x, src) if isinstance(a, Tensor)])
    b = _bsizes(levels)
    xb = _expand(x, levels, x.shape)
    sb = _expand(src, levels, src.shape) if isinstance(src, Tensor) else src
    xp = xb.device.backend.xp
    return _wrap(cls.apply(xb, sb, xp.broadcast_to(index, b + index.shape), dim + len(b), *args[4:]), levels)


class ScatterReduce(Function):
    """x with src reduced into it at index along dim (PyTorch's scatter_reduce; src has index's shape)."""
    batch_rule = _scatter_rule

    @staticmethod
    def forward(ctx, x, src, index, dim, reduce, include_self):
        ctx.index, ctx.dim, ctx.reduce, ctx.include_self = index, dim, reduce, include_self
        y = ctx.wrap(_scatter_reduce_arrays(ctx.device.backend, x.data, src.data, index, dim, reduce,
                                            include_self))
        ctx.save_for_backward(x, src, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, src, y = ctx.saved_tensors
        index, dim, reduce, inc = ctx.index, ctx.dim, ctx.reduce, ctx.include_self
        xp, backend = ctx.xp, ctx.device.backend

        def gather(t):
            return Gather.apply(t, index, dim)

        def count(a, start):                       # start + the number of src entries reduced into each target
            n = xp.full(x.shape, start, dtype=a.dtype)
            backend.scatter_add(n, _along(xp, index, dim), a)
            return n

        if reduce == "sum":
            gx, gs = grad, gather(grad)
        elif reduce == "mean":
            n = count(xp.ones(index.shape, dtype=x.data.dtype), 1 if inc else 0)
            n = _const(x, xp.where(n == 0, 1, n).astype(x.data.dtype))
            gx = grad / n
            gs = gather(grad) / gather(n)
        elif reduce == "prod":
            # PyTorch's rule: the product of the others, computed without dividing by a zero
            xz = _const(x, x.data == 0)
            masked_x = where(xz, 1.0, x)
            gx = grad * ScatterReduce.apply(masked_x, src, index, dim, "prod", inc) / masked_x
            sz = src.data == 0
            zeros_at = count(sz.astype(x.data.dtype), 0)[_along(xp, index, dim)]
            single = _const(x, sz & (zeros_at == 1))             # the only zero of its target
            masked_src = where(single, 1.0, src)
            others = ScatterReduce.apply(x, masked_src, index, dim, "prod", inc)
            gs = where(single, gather(grad * others), gather(grad * y) / where(_const(x, sz), 1.0, src))
        else:
            # amax/amin: the gradient split evenly among the entries equal to the result (self counted too)
            value = gather(y)
            x_is = _const(x, (x.data == y.data).astype(x.data.dtype))
            s_is = _const(x, (src.data == value.data).astype(x.data.dtype))
            n = x_is + ScatterAddInto.apply(s_is, index, dim, x.shape)
            share = grad / n
            gx = x_is * share
            gs = s_is * gather(share)
        if not inc and ctx.needs_input_grad[0]:    # the targets' old values took no part
            keep = xp.ones(x.shape, dtype=bool)
            keep[_along(xp, index, dim)] = False
            gx = where(_const(x, keep), gx, 0.0)
        return (gx if ctx.needs_input_grad[0] else None, gs if ctx.needs_input_grad[1] else None,
                None, None, None, None)


class Scatter(Function):
    """x with src (a tensor of index's shape, or a number) written at index along dim."""
    batch_rule = _scatter_rule

    @staticmethod
    def forward(ctx, x, src, index, dim):
        ctx.index, ctx.dim, ctx.tensor_src = index, dim, isinstance(src, Tensor)
        out = x.data.copy()
        out[_along(ctx.xp, index, dim)] = src.data if isinstance(src, Tensor) else src
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        gx = Scatter.apply(grad, 0.0, ctx.index, ctx.dim) if ctx.needs_input_grad[0] else None
        gs = Gather.apply(grad, ctx.index, ctx.dim) if ctx.tensor_src and ctx.needs_input_grad[1] else None
        return gx, gs, None, None


def _along_args(x, dim, index, src, op):
    """x, the integer index array, the normalised dim and src cut to index's shape (None for a number)."""
    index = _int_tensor(index, x, op)
    if isinstance(src, Tensor):
        _same_device(x, src, op, "src")
        if src.dtype != x.dtype:
            raise TypeError(f"{op}: expected src of the input's dtype {x.dtype}, got {src.dtype}")
    d = _check_along(x, dim, index, op, src if isinstance(src, Tensor) else None)
    if index.numel():                              # PyTorch takes no negative index here
        x.device.backend.check_range(index.data, 0, x.shape[d], IndexError,
                                     f"{op}: index {{value}} is out of bounds for dim {d} of size {x.shape[d]}")
    if isinstance(src, Tensor) and src.shape != index.shape:
        src = getitem(src, tuple(slice(0, s) for s in index.shape))
    return index.data, d, src


def _scatter_ref(np, a, dim, index, src, how=None, include_self=True):
    """scatter / scatter_reduce the plain way on NumPy arrays."""
    index = np.asarray(index)
    out = a.copy()
    pos = tuple(index if d == dim else np.arange(s).reshape([-1 if k == d else 1 for k in range(index.ndim)])
                for d, s in enumerate(index.shape))
    src = np.broadcast_to(src, index.shape) if np.ndim(src) == 0 else src[tuple(slice(0, s) for s in index.shape)]
    if how is None:
        out[pos] = src
        return out
    if not include_self:
        out[pos] = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[how]
    if how == "mean":
        np.add.at(out, pos, src)
        n = np.full(a.shape, 1 if include_self else 0)
        np.add.at(n, pos, 1)
        return (out / np.maximum(n, 1)).astype(a.dtype)
    ufunc = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}[how]
    ufunc.at(out, pos, src)
    return out


_SC = [[1, 0, 2, 0], [2, 1, 0, 2]]                # for dim 0 of a (3, 4) input: distinct targets per column
_SR = [[0, 0, 2, 1], [0, 2, 2, 2], [1, 2, 2, 0]]  # for dim 0 of a (3, 4) input: repeated targets


def _scatter_value_op(x):
    return scatter(x, 1, _ix([[0, 2], [3, 3], [1, 0]], x), value=-1.25)


@register(method=True, tests=(
    OpTest((((3, 4), (2, 4)), ((3, 4), (3, 5))), op=lambda x, s: scatter(x, 0, _ix(_SC, x), s),
           ref=lambda np, a, s: _scatter_ref(np, a, 0, _SC, s)),
    OpTest((((3, 4),),), op=_scatter_value_op,
           ref=lambda np, a: _scatter_ref(np, a, 1, [[0, 2], [3, 3], [1, 0]], -1.25), name="scatter_value"),
    OpTest((((3, 4), (3, 4)),), op=lambda x, s: x.scatter(0, _ix(_SR, x), s, reduce="add"),
           ref=lambda np, a, s: _scatter_ref(np, a, 0, _SR, s, "sum"), name="scatter_reduce_add"),
    OpTest((((3, 4), (3, 4)),), op=lambda x, s: x.scatter(0, _ix(_SR, x), s, reduce="multiply"),
           ref=lambda np, a, s: _scatter_ref(np, a, 0, _SR, s, "prod"), name="scatter_reduce_multiply")))
def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """input with src (a tensor, or a number: ``value``) written at index along dim: out[index[i][j]][j] =
    src[i][j] for dim 0. reduce="add" or "multiply" combines instead of writing (all entries count)."""
    x = as_tensor(input, "scatter")
    if (src is None) == (value is None):
        raise TypeError("scatter: expected exactly one of src (a tensor or a number) and value")
    if src is None:
        src = value
    if not isinstance(src, Tensor):
        if not isinstance(src, (bool, int, float, complex)):
            raise TypeError(f"scatter: expected src to be a Tensor or a number, got {type(src).__name__}")
    if reduce is not None:
        how = {"add": "sum", "multiply": "prod"}.get(reduce)
        if how is None:
            raise ValueError(f"scatter: expected reduce 'add' or 'multiply', got {reduce!r} (scatter_reduce takes "
                             "'sum', 'prod', 'mean', 'amax', 'amin')")
        if not isinstance(src, Tensor):
            index = _int_tensor(index, x, "scatter")
            src = Tensor._make(x.device.backend.call(x.xp.full, index.shape, src, dtype=x.dtype), x.device)
        return scatter_reduce(x, dim, index, src, how)
    index, d, src = _along_args(x, dim, index, src, "scatter")
    return Scatter.apply(x, src, index, d)


def _sr_test(how, include_self=True, name=None):
    return OpTest((((3, 4), (3, 4)), ((3, 4), (3, 5))),
                  op=lambda x, s: x.scatter_reduce(0, _ix(_SR, x), s, how, include_self=include_self),
                  ref=lambda np, a, s: _scatter_ref(np, a, 0, _SR, s, how, include_self),
                  name=name or f"scatter_reduce_{how}" + ("" if include_self else "_exclude_self"))


@register(method=True, tests=(
    _sr_test("sum", name="scatter_reduce"), _sr_test("prod"), _sr_test("mean"), _sr_test("amax"), _sr_test("amin"),
    _sr_test("sum", False), _sr_test("prod", False), _sr_test("mean", False), _sr_test("amax", False),
    # non-contiguous input and src (transposed views), and an empty index (nothing reduced)
    OpTest((((4, 3), (5, 3)),), op=lambda x, s: scatter_reduce(x.T, 0, _ix(_SR, x), s.T, "prod"),
           ref=lambda np, a, s: _scatter_ref(np, a.T, 0, _SR, s.T, "prod"), name="scatter_reduce_noncontiguous"),
    OpTest((((3, 4), (3, 4)),), op=lambda x, s: scatter_reduce(x, 1, _ix([[], [], []], x), s, "amax"),
           ref=lambda np, a, s: a, name="scatter_reduce_empty_index"),
    OpTest((((2, 3), (2, 2)),), op=lambda x, s: scatter_reduce(x, -1, _ix([[2, 2], [0, 0]], x), s, "amin",
                                                            include_self=False),
           ref=lambda np, a, s: _scatter_ref(np, a, 1, [[2, 2], [0, 0]], s, "amin", False),
           name="scatter_reduce_amin_exclude_self")))
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """input with src reduced into it at index along dim by ``reduce`` ("sum", "prod", "mean", "amax",
    "amin"); include_self=False leaves the targets' own values out. amax/amin split the gradient evenly
    among the entries equal to the result, as PyTorch does."""
    x = as_tensor(input, "scatter_reduce")
    if reduce not in _REDUCTIONS:
        raise ValueError(f"scatter_reduce: expected reduce one of {', '.join(map(repr, _REDUCTIONS))}, got {reduce!r}")
    src = as_tensor(src, "scatter_reduce", like=x)
    index, d, src = _along_args(x, dim, index, src, "scatter_reduce")
    return ScatterReduce.apply(x, src, index, d, reduce, bool(include_self))


# --------------------------------------------------------------------------- in place
def _tensor_args(*args):
    return tuple(a for a in args if isinstance(a, Tensor))


@register(method=True, tests=OpTest((((3, 4), (3, 4)), ((3, 4), (4,))), op=lambda x, m: x.clone().masked_fill_(m, 0.5),
                                    ref=lambda np, a, m: np.where(m, a.dtype.type(0.5), a), kinds=(None, "bool")))
def masked_fill_(input, mask, value):
    """masked_fill in place."""
    return apply_inplace(input, lambda a, *_: masked_fill(a, mask, value), "masked_fill_", *_tensor_args(value))


@register(method=True, tests=OpTest((((4, 3), (5, 3)),),
                                    op=lambda x, s: x.clone().index_add_(0, _ix([0, 2, 0, 3, 0], x), s, alpha=2),
                                    ref=lambda np, a, s: _index_add_ref(np, a, 0, [0, 2, 0, 3, 0], 2 * s)))
def index_add_(input, dim, index, source, *, alpha=1):
    """index_add in place."""
    return apply_inplace(input, lambda a, s: index_add(a, dim, index, s, alpha=alpha), "index_add_", source)


@register(method=True, tests=OpTest((((4, 3), (2, 3)),), op=lambda x, s: x.clone().index_copy_(0, _ix([3, 1], x), s),
                                    ref=lambda np, a, s: _index_copy_ref(np, a, 0, [3, 1], s)))
def index_copy_(input, dim, index, source):
    """index_copy in place."""
    return apply_inplace(input, lambda a, s: index_copy(a, dim, index, s), "index_copy_", source)


@register(method=True, tests=OpTest((((3, 4),),), op=lambda x: x.clone().index_fill_(1, _ix([0, 2], x), 2.5),
                                    ref=lambda np, a: _index_copy_ref(np, a, 1, [0, 2], 2.5)))
def index_fill_(input, dim, index, value):
    """index_fill in place."""
    return apply_inplace(input, lambda a, *_: index_fill(a, dim, index, value), "index_fill_", *_tensor_args(value))


@register(method=True, tests=OpTest((((3, 4), (2, 4)),), op=lambda x, s: x.clone().scatter_(0, _ix(_SC, x), s),
                                    ref=lambda np, a, s: _scatter_ref(np, a, 0, _SC, s)))
def scatter_(input, dim, index, src=None, *, value=None, reduce=None):
    """scatter in place."""
    return apply_inplace(input, lambda a, *_: scatter(a, dim, index, src, value=value, reduce=reduce), "scatter_",
                         *_tensor_args(src))


@register(method=True, tests=OpTest((((3, 4), (3, 4)),),
                                    op=lambda x, s: x.clone().scatter_reduce_(0, _ix(_SR, x), s, "amax"),
                                    ref=lambda np, a, s: _scatter_ref(np, a, 0, _SR, s, "amax")))
def scatter_reduce_(input, dim, index, src, reduce, *, include_self=True):
    """scatter_reduce in place."""
    return apply_inplace(input, lambda a, s: scatter_reduce(a, dim, index, s, reduce, include_self=include_self),
                         "scatter_reduce_", src)
