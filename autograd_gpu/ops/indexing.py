"""Indexing: getitem (its backward scatter-adds, so repeated indices sum), setitem, gather,
take_along_axis, index_select, scatter_add.

Indices are normalised once in the wrappers (``_prepare``): Tensors and lists become arrays on x's
device, bool masks become the integer arrays of their nonzero entries (NumPy's own definition, and
the form every backend's scatter-add accepts), and out-of-range entries raise IndexError on every
device (CuPy would wrap them silently)."""
import builtins
from contextlib import nullcontext

from ..autograd.function import Function
from ..autograd.grad_mode import state
from ..tensor import Tensor
from ..backends import backend_of_array
from .inplace import apply_inplace, check_inplace
from .shape import sum_to, broadcast_to, broadcast_shapes, flatten
from ._util import as_tensor, normalize_dim
from ..dtypes import int64
from ..dtypes import is_inexact
from .batching import BatchedTensor, _wrap, _bsizes
from .registry import register, OpTest, COMPLEX

__all__ = ["getitem", "setitem", "gather", "take_along_axis", "index_select", "scatter_add"]


# --------------------------------------------------------------------------- index normalisation
def _index_array(i, x, op):
    """An index item that is a Tensor, list or array, as an integer or bool array on x's device."""
    if isinstance(i, Tensor):
        if i.device is not x.device:
            raise RuntimeError(f"{op}: expected the index on the tensor's device, got the tensor on {x.device} "
                               f"and the index on {i.device}; move the index with .to('{x.device}')")
        a = i.data
    else:
        b = backend_of_array(i)
        if b is None and not isinstance(i, (list, tuple)) and not hasattr(i, "dtype"):   # NumPy scalars have one
            raise TypeError(f"{op}: cannot use a {type(i).__name__} as an index; expected ints, slices, None, "
                            "Ellipsis, integer or bool arrays/Tensors")
        if b is not None and b.device is not x.device and i.ndim > 0:
            raise RuntimeError(f"{op}: expected the index on the tensor's device, got the tensor on {x.device} "
                               f"and a {b.name} array on {b.device}; convert it with ag.tensor(index, device='{x.device}')")
        try:
            a = x.device.backend.asarray(i)
        except (ValueError, TypeError):
            raise TypeError(f"{op}: cannot use {i!r} as an index; expected ints, slices, None, Ellipsis, "
                            "integer or bool arrays/Tensors") from None
        if a.size == 0 and a.dtype.kind == "f":     # [] is an empty integer index, as in NumPy
            a = a.astype("int64")
    if a.dtype.kind not in "biu":
        raise TypeError(f"{op}: indices must be integers or bools, got an index of dtype {a.dtype}")
    return a


def _dims(i):
    """How many of the indexed tensor's dims an (already converted) index item consumes."""
    if i is None or i is Ellipsis or isinstance(i, bool):
        return 0
    if isinstance(i, (int, slice)):
        return 1
    return i.ndim if i.dtype.kind == "b" else 1


def _prepare(x, idx, op="getitem"):
    """(index for the backend arrays, whether it is basic) after checking it against x's shape."""
    items = idx if isinstance(idx, tuple) else (idx,)
    out, basic = [], True
    for i in items:
        if i is None or i is Ellipsis or isinstance(i, (slice, bool)):
            out.append(i)
            basic = basic and not isinstance(i, bool)   # NumPy: True/False is a 0-d mask
        elif isinstance(i, float):
            raise TypeError(f"{op}: indices must be integers or bools, got the float {i!r}")
        elif not isinstance(i, (Tensor, list, tuple)) and backend_of_array(i) is None and hasattr(i, "__index__"):
            out.append(i.__index__())               # Python and NumPy integer scalars
        else:
            out.append(_index_array(i, x, op))
            basic = False
    ellipses = builtins.sum(1 for i in out if i is Ellipsis)
    if ellipses > 1:
        raise IndexError(f"{op}: an index can only have a single Ellipsis (...), got {idx!r}")
    used = builtins.sum(_dims(i) for i in out)
    if used > x.ndim:
        raise IndexError(f"{op}: too many indices for a tensor of shape {x.shape}: {used} dims indexed, "
                         f"the tensor has {x.ndim}")
    final, d = [], 0
    for i in out:
        if isinstance(i, int) and not isinstance(i, bool):
            n = x.shape[d]
            if not -n <= i < n:
                raise IndexError(f"{op}: index {i} is out of bounds for dim {d} of size {n} (shape {x.shape})")
            final.append(i)
        elif getattr(i, "dtype", None) is not None and i.dtype.kind == "b" and i.ndim:
            if i.shape != x.shape[d:d + i.ndim]:
                raise IndexError(f"{op}: the bool mask of shape {i.shape} does not match the tensor's shape "
                                 f"{x.shape} at dims {d}..{d + i.ndim - 1} (expected {x.shape[d:d + i.ndim]})")
            with x.device.backend.sync_point(f"{op} with a boolean mask"):   # the result's size is data
                final.extend(i.nonzero())
        elif getattr(i, "dtype", None) is not None and i.dtype.kind in "iu":
            if x.device.type != "cpu":              # NumPy raises by itself; CuPy would wrap silently
                x.device.backend.check_indices(i, x.shape[d], f"{op} (dim {d})")
            final.append(i)
        else:
            final.append(i)
        d += x.ndim - used if i is Ellipsis else _dims(i)
    if not ellipses:
        final.append(Ellipsis)                      # so a full integer index gives a 0-d array, not a scalar
    return tuple(final), basic


def _bool_scalar_sync(backend, idx, basic, op):
    """A declared sync around indexing with a bool scalar (x[True]): CuPy turns it into a mask and reads
    its count back. Bool masks of higher rank are turned into integer arrays in _prepare already."""
    if not basic and backend.device.type != "cpu" and builtins.any(
            i.__class__ is bool or (getattr(i, "dtype", None) is not None and i.dtype.kind == "b" and i.ndim == 0)
            for i in idx):
        return backend.sync_point(f"{op} with a boolean scalar index")
    return nullcontext()


def _take(a, idx, op):
    """a[idx], with NumPy's out-of-range IndexError naming the op."""
    try:
        return a[idx]
    except IndexError as e:
        raise IndexError(f"{op}: {e}") from None


def _int_tensor(index, x, op, name="index"):
    """``index`` as an integer Tensor on x's device, or a TypeError/RuntimeError saying what was wrong."""
    if not isinstance(index, Tensor):
        index = as_tensor(index, op, like=x)
    if index.device is not x.device:
        raise RuntimeError(f"{op}: expected {name} on the tensor's device, got the tensor on {x.device} and "
                           f"{name} on {index.device}; move it with .to('{x.device}')")
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected {name} to be an integer tensor, got dtype {index.dtype}")
    return index


def _along(xp, index, dim):
    """The advanced index that picks ``index[...]`` along dim and the matching position elsewhere."""
    nd = index.ndim
    return tuple(index if d == dim else xp.arange(s).reshape((1,) * d + (s,) + (1,) * (nd - d - 1))
                 for d, s in enumerate(index.shape))


# --------------------------------------------------------------------------- op-table helpers
def _ix(values, x):
    """An integer index tensor on x's device (for the op-table entries below)."""
    return Tensor(values, dtype=int64, device=x.device)


def _copy(a):
    return a.clone() if isinstance(a, Tensor) else a.copy()


# setitem's entries work on a copy (a leaf that requires grad cannot be written in place); the same
# function runs on Tensors (op) and on NumPy arrays (ref)
def _set_slice(x, v):
    y = _copy(x)
    y[1:, 0] = v
    return y


def _set_scalar(x):
    y = _copy(x)
    y[..., 1] = 0.5
    return y


def _set_int_array(x, v):
    y = _copy(x)
    y[[0, 2], 1:3] = v
    return y


def _set_mask(x, m, v):
    y = _copy(x)
    y[m] = v
    return y


def _scatter_add_ref(np, a, dim, index, src):
    """scatter_add the plain way on NumPy arrays (NumPy passed in: the ops layer does not import it)."""
    out = a.copy()
    pos = tuple(index if d == dim else np.arange(s).reshape([-1 if k == d else 1 for k in range(index.ndim)])
                for d, s in enumerate(index.shape))
    np.add.at(out, pos, src[tuple(slice(0, s) for s in index.shape)])
    return out


_GATHER_1 = [[0, 0], [3, 1], [1, 1]]          # for dim 1 of a (4, 4) input, using its first 3 rows
_GATHER_0 = [[2, 0, 2], [2, 1, 0]]            # for dim 0 of a (3, 4) input, using its first 3 columns
_SCATTER = [[0, 0, 2, 1], [0, 2, 2, 2]]       # for dim 0 of a (3, 4) input: repeated targets


# --------------------------------------------------------------------------- batching rules
def _adjacent_advanced(idx, basic):
    """Whether the advanced indices of idx (if any) are next to each other: NumPy moves advanced indices
    that are not to the front of the result, which the batch dims in front would not survive."""
    if basic:
        return True
    adv = [k for k, i in enumerate(idx) if not (i is None or i is Ellipsis or isinstance(i, (slice, int)))]
    return not adv or adv == list(range(adv[0], adv[0] + len(adv)))


def _getitem_rule(cls, args, kwargs):
    x, idx, basic = args
    if not _adjacent_advanced(idx, basic):       # keep it simple: the per-example loop
        return NotImplemented
    nb = len(x._blevels)
    return _wrap(cls.apply(x._bbase, (slice(None),) * nb + tuple(idx), basic), x._blevels)


def _index_add_into_rule(cls, args, kwargs):
    """getitem's backward, reached when a batched cotangent runs the backward (vmap of a vjp)."""
    grad, shape, idx, basic = args
    if not _adjacent_advanced(idx, basic):
        return NotImplemented
    b = _bsizes(grad._blevels)
    return _wrap(cls.apply(grad._bbase, b + tuple(shape), (slice(None),) * len(b) + tuple(idx), basic),
                 grad._blevels)


def _index_put_rule(cls, args, kwargs):
    """x batched, the value shared (a number or an unbatched tensor, which broadcasts over the batch dims
    in front as it does over x[idx]); a batched value would need aligning to x[idx]: the loop."""
    x, v, idx, basic = args
    if x.__class__ is not BatchedTensor or v.__class__ is BatchedTensor or not _adjacent_advanced(idx, basic):
        return NotImplemented
    nb = len(x._blevels)
    return _wrap(cls.apply(x._bbase, v, (slice(None),) * nb + tuple(idx), basic), x._blevels)


def _gather_rule(cls, args, kwargs):
    x, index, dim = args
    if isinstance(index, Tensor):
        return NotImplemented
    b = _bsizes(x._blevels)
    xp = x.device.backend.xp
    return _wrap(cls.apply(x._bbase, xp.broadcast_to(index, b + index.shape), dim + len(b)), x._blevels)


def _scatter_add_into_rule(cls, args, kwargs):
    src, index, dim, shape = args
    if isinstance(index, Tensor):
        return NotImplemented
    b = _bsizes(src._blevels)
    xp = src.device.backend.xp
    return _wrap(cls.apply(src._bbase, xp.broadcast_to(index, b + index.shape), dim + len(b), b + tuple(shape)),
                 src._blevels)


# --------------------------------------------------------------------------- getitem
class GetItem(Function):
    batch_rule = _getitem_rule

    @staticmethod
    def forward(ctx, x, idx, basic):
        ctx.shape, ctx.idx, ctx.basic = x.data.shape, idx, basic
        if basic:                                   # a view: in-place edits of either are seen by both
            return ctx.wrap(x.data[idx], base=x)
        with _bool_scalar_sync(ctx.device.backend, idx, basic, "getitem"):
            return ctx.wrap(_take(x.data, idx, "getitem"))

    @staticmethod
    def backward(ctx, grad):
        return IndexAddInto.apply(grad, ctx.shape, ctx.idx, ctx.basic), None, None


class IndexAddInto(Function):
    """zeros(shape) with grad added at idx (repeated indices accumulate): getitem's backward."""
    batch_rule = _index_add_into_rule

    @staticmethod
    def forward(ctx, grad, shape, idx, basic):
        ctx.idx, ctx.basic = idx, basic
        out = ctx.xp.zeros(shape, dtype=grad.data.dtype)
        if basic:                                   # basic indices never repeat an element
            out[idx] = grad.data
        else:
            with _bool_scalar_sync(ctx.device.backend, idx, basic, "getitem's backward"):
                ctx.device.backend.scatter_add(out, idx, grad.data)
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        return GetItem.apply(grad, ctx.idx, ctx.basic), None, None, None


@register(method="__getitem__", tests=(
    # basic indices: the result is a view, the backward assigns
    OpTest((((3, 4),), ((2, 3, 4),)), op=lambda x: x[1], ref=lambda np, a: a[1], name="getitem_int"),
    OpTest((((3, 4),),), op=lambda x: x[-1, 2], ref=lambda np, a: a[-1, 2], name="getitem_neg_int"),   # 0-d result
    OpTest((((3, 4),), ((2, 5, 1),)), op=lambda x: x[1:, ::2], ref=lambda np, a: a[1:, ::2], name="getitem_slice"),
    OpTest((((3, 4),),), op=lambda x: x[::-1, -2::-2], ref=lambda np, a: a[::-1, -2::-2], name="getitem_neg_step"),
    OpTest((((3, 4),), ((2, 3, 4),)), op=lambda x: x[None, ..., 1], ref=lambda np, a: a[None, ..., 1],
           name="getitem_none_ellipsis"),
    OpTest((((2, 3, 4),),), op=lambda x: x[..., 1:3, None], ref=lambda np, a: a[..., 1:3, None],
           name="getitem_ellipsis_slice"),
    OpTest((((),), ((3,),)), op=lambda x: x[()], ref=lambda np, a: a[()], name="getitem_0d"),
    OpTest((((),),), op=lambda x: x[None], ref=lambda np, a: a[None], name="getitem_0d_none"),
    OpTest((((3, 4),), ((0, 2),)), op=lambda x: x[2:2], ref=lambda np, a: a[2:2], name="getitem_size0"),
    # integer arrays: repeated indices must accumulate in backward
    OpTest((((3, 4),), ((3,),)), op=lambda x: x[_ix([0, 2, 0], x)], ref=lambda np, a: a[np.array([0, 2, 0])],
           name="getitem_int_tensor"),
    OpTest((((3, 4),),), op=lambda x: x[[1, 1, -1]], ref=lambda np, a: a[[1, 1, -1]], name="getitem_int_list"),
    OpTest((((3, 4),),), op=lambda x: x[_ix([[0, 1], [1, 1]], x)], ref=lambda np, a: a[np.array([[0, 1], [1, 1]])],
           name="getitem_int_2d"),
    OpTest((((3, 4),),), op=lambda x: x[[0, 1, 0], [2, 2, 2]], ref=lambda np, a: a[[0, 1, 0], [2, 2, 2]],
           name="getitem_int_pairs"),
    OpTest((((3, 4),),), op=lambda x: x[:, [3, 0, 3]], ref=lambda np, a: a[:, [3, 0, 3]],
           name="getitem_int_after_slice"),
    OpTest((((2, 3, 4),),), op=lambda x: x[[0, 1, 1], :, [1, 1, 3]], ref=lambda np, a: a[[0, 1, 1], :, [1, 1, 3]],
           name="getitem_int_separated"),
    OpTest((((3, 4),),), op=lambda x: x[None, [2, 2], ..., 1], ref=lambda np, a: a[None, [2, 2], ..., 1],
           name="getitem_int_with_none"),
    OpTest((((3, 4),),), op=lambda x: x[[]], ref=lambda np, a: a[np.array([], dtype=np.int64)],
           name="getitem_int_empty"),
    OpTest((((3, 4),),), op=lambda x: x[_ix(2, x), 1:], ref=lambda np, a: a[np.array(2), 1:], name="getitem_int_0d"),
    OpTest((((3, 4), (6,)), ((3,), (2, 2))), op=lambda x, i: x[i], ref=lambda np, a, i: a[i],
           name="getitem_index_kind", kinds=(None, "index:3")),
    # bool masks
    OpTest((((3, 4), (3, 4)), ((3, 4), (3,)), ((0,), (0,))), op=lambda x, m: x[m], ref=lambda np, a, m: a[m],
           name="getitem_mask", kinds=(None, "bool")),
    OpTest((((3, 4), (4,)),), op=lambda x, m: x[1:, m], ref=lambda np, a, m: a[1:, m], name="getitem_mask_mixed",
           kinds=(None, "bool")),
    OpTest((((3, 4),),), op=lambda x: x[[True, False, True]], ref=lambda np, a: a[[True, False, True]],
           name="getitem_mask_list"),
    OpTest((((3, 4),),), op=lambda x: x[1:, ::2], ref=lambda np, a: a[1:, ::2], name="complex_getitem", **COMPLEX)))
def getitem(x, idx):
    """x[idx] with NumPy semantics: ints, slices, None, Ellipsis, integer arrays/Tensors, bool masks."""
    return GetItem.apply(x, *_prepare(x, idx))


# --------------------------------------------------------------------------- setitem
class IndexPut(Function):
    """A copy of x with v (broadcast) written at idx."""
    batch_rule = _index_put_rule

    @staticmethod
    def forward(ctx, x, v, idx, basic):
        ctx.idx, ctx.basic = idx, basic
        ctx.v_shape = v.data.shape if isinstance(v, Tensor) else None
        out = x.data.copy()
        with _bool_scalar_sync(ctx.device.backend, idx, basic, "setitem"):
            out[idx] = v.data if isinstance(v, Tensor) else v
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        gx = IndexPut.apply(grad, 0.0, ctx.idx, ctx.basic) if ctx.needs_input_grad[0] else None
        gv = None
        if ctx.needs_input_grad[1]:
            gv = GetItem.apply(grad, ctx.idx, ctx.basic)
            if gv.ndim < len(ctx.v_shape):          # v may carry extra leading dims of size 1
                gv = gv.reshape((1,) * (len(ctx.v_shape) - gv.ndim) + gv.shape)
            gv = sum_to(gv, ctx.v_shape)
        return gx, gv, None, None


@register(method="__setitem__", tests=(
    # on a clone (a leaf that requires grad cannot be written in place)
    OpTest((((3, 4), (2,)), ((3, 4), ()), ((3, 4), (1, 2))), op=_set_slice, ref=lambda np, a, v: _set_slice(a, v),
           name="setitem_slice"),
    OpTest((((3, 4),), ((2, 3, 4),)), op=_set_scalar, ref=lambda np, a: _set_scalar(a), name="setitem_scalar"),
    OpTest((((3, 4), (2, 2)), ((3, 4), (1, 2))), op=_set_int_array, ref=lambda np, a, v: _set_int_array(a, v),
           name="setitem_int_array"),
    OpTest((((3, 4), (3, 4), ()), ((3, 4), (3,), (4,))), op=_set_mask, ref=lambda np, a, m, v: _set_mask(a, m, v),
           name="setitem_mask", kinds=(None, "bool", None))))
def setitem(x, idx, v):
    """x[idx] = v in place, v (a Tensor or a number) broadcast to x[idx]'s shape; differentiable."""
    idx, basic = _prepare(x, idx, "setitem")
    if isinstance(v, Tensor):
        if v.device is not x.device:
            raise RuntimeError(f"setitem: expected the value on the tensor's device, got the tensor on {x.device} "
                               f"and the value on {v.device}; move one with .to()")
    elif not isinstance(v, (int, float)):
        v = as_tensor(v, "setitem", like=x)
    recording = state.enabled and is_inexact(x.dtype) and (
        x.requires_grad or (isinstance(v, Tensor) and v.requires_grad))
    if not recording:
        check_inplace(x, False, "setitem")
        try:
            with _bool_scalar_sync(x.device.backend, idx, basic, "setitem"):
                x.data[idx] = v.data if isinstance(v, Tensor) else v
        except ValueError as e:
            raise ValueError(f"setitem: {e}") from None
        x._bump_version()
        return x
    if isinstance(v, Tensor) and v.dtype != x.dtype:
        v = v.to(dtype=x.dtype)
    return apply_inplace(x, lambda a, b: IndexPut.apply(a, b, idx, basic), "setitem", v)


# --------------------------------------------------------------------------- gather / scatter along a dim
class Gather(Function):
    batch_rule = _gather_rule

    @staticmethod
    def forward(ctx, x, index, dim):
        ctx.shape, ctx.index, ctx.dim = x.data.shape, index, dim
        return ctx.wrap(_take(x.data, _along(ctx.xp, index, dim), "gather"))

    @staticmethod
    def backward(ctx, grad):
        return ScatterAddInto.apply(grad, ctx.index, ctx.dim, ctx.shape), None, None


class ScatterAddInto(Function):
    """zeros(shape) with src[i, j, ...] added at index[i, j, ...] along dim: gather's backward."""
    batch_rule = _scatter_add_into_rule

    @staticmethod
    def forward(ctx, src, index, dim, shape):
        ctx.index, ctx.dim = index, dim
        out = ctx.xp.zeros(shape, dtype=src.data.dtype)
        try:
            ctx.device.backend.scatter_add(out, _along(ctx.xp, index, dim), src.data)
        except IndexError as e:
            raise IndexError(f"scatter_add: {e}") from None
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        return Gather.apply(grad, ctx.index, ctx.dim), None, None, None


def _check_along(x, dim, index, op, src=None):
    """Validate PyTorch's gather/scatter shape rules; returns the normalised dim."""
    if x.ndim == 0:
        raise ValueError(f"{op}: expected a tensor with at least one dim, got a 0-d tensor")
    d = normalize_dim(dim, x.ndim, op)
    if index.ndim != x.ndim:
        raise ValueError(f"{op}: expected index with as many dims as the tensor ({x.ndim}), got index of "
                         f"shape {index.shape} for a tensor of shape {x.shape}")
    for k, (i, n) in enumerate(zip(index.shape, x.shape)):
        if k != d and i > n:
            raise ValueError(f"{op}: index of shape {index.shape} is larger than the tensor of shape {x.shape} "
                             f"at dim {k} (only dim {d} may differ)")
    if src is not None and (src.ndim != index.ndim or any(i > s for i, s in zip(index.shape, src.shape))):
        raise ValueError(f"{op}: expected src with at least index's shape {index.shape} in every dim, "
                         f"got src of shape {src.shape}")
    if x.device.type != "cpu" and index.numel():    # NumPy raises by itself; CuPy would wrap silently
        x.device.backend.check_indices(index.data, x.shape[d], f"{op} (dim {d})")
    return d


@register(method=True, tests=(
    OpTest((((4, 4),),), op=lambda x: gather(x, 1, _ix(_GATHER_1, x)),
           ref=lambda np, a: np.take_along_axis(a[:3], np.array(_GATHER_1), 1), name="gather_dim1"),
    OpTest((((3, 4),),), op=lambda x: x.gather(0, _ix(_GATHER_0, x)),
           ref=lambda np, a: np.take_along_axis(a[:, :3], np.array(_GATHER_0), 0), name="gather_dim0_smaller"),
    OpTest((((3, 4), (3, 6)), ((2, 3, 2), (2, 3, 5))), op=lambda x, i: x.gather(-1, i),
           ref=lambda np, a, i: np.take_along_axis(a, i, -1), name="gather_index_kind", kinds=(None, "index:2"))))
def gather(x, dim, index):
    """PyTorch's gather: out[i][j] = x[index[i][j]][j] for dim 0 (out has index's shape)."""
    x = as_tensor(x, "gather")
    index = _int_tensor(index, x, "gather")
    d = _check_along(x, dim, index, "gather")
    return Gather.apply(x, index.data, d)


@register(method=True, tests=(
    OpTest((((3, 4), (3, 5)), ((3, 4), (1, 2)), ((1, 4), (3, 2))), op=lambda x, i: take_along_axis(x, i, 1),
           ref=lambda np, a, i: np.take_along_axis(a, i, 1), kinds=(None, "index:4")),
    OpTest((((3, 4), (7,)),), op=lambda x, i: x.take_along_axis(i, None), ref=lambda np, a, i: np.take_along_axis(a, i, None),
           name="take_along_axis_none", kinds=(None, "index:12"))))
def take_along_axis(x, indices, axis):
    """NumPy's take_along_axis: gather along ``axis`` with indices broadcast against x's other dims
    (axis=None: along the flattened tensor)."""
    x = as_tensor(x, "take_along_axis")
    indices = _int_tensor(indices, x, "take_along_axis", "indices")
    if axis is None:
        if indices.ndim != 1:
            raise ValueError(f"take_along_axis: with axis=None expected 1-d indices, got shape {indices.shape}")
        x, axis = flatten(x), 0
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: expected indices with as many dims as the tensor ({x.ndim}), "
                         f"got shape {indices.shape} for a tensor of shape {x.shape}")
    d = normalize_dim(axis, x.ndim, "take_along_axis")
    rest = broadcast_shapes(x.shape[:d] + x.shape[d + 1:], indices.shape[:d] + indices.shape[d + 1:],
                            op="take_along_axis")
    xs = rest[:d] + (x.shape[d],) + rest[d:]
    ix = rest[:d] + (indices.shape[d],) + rest[d:]
    if indices.shape != ix:
        indices = Tensor._make(indices.xp.broadcast_to(indices.data, ix), x.device)
    return gather(broadcast_to(x, xs), d, indices)


@register(method=True, tests=(
    OpTest((((3, 4),), ((3,),)), op=lambda x: x.index_select(0, _ix([2, 0, 2], x)), ref=lambda np, a: a[[2, 0, 2]]),
    OpTest((((2, 3, 4), (5,)), ((2, 4), (0,))), op=lambda x, i: index_select(x, -1, i),
           ref=lambda np, a, i: np.take(a, i, -1), name="index_select_last", kinds=(None, "index:4"))))
def index_select(x, dim, index):
    """PyTorch's index_select: the entries index[k] along dim (a 1-d index; repeats allowed)."""
    x = as_tensor(x, "index_select")
    index = _int_tensor(index, x, "index_select")
    if index.ndim > 1:
        raise ValueError(f"index_select: expected a 1-d index, got shape {index.shape}")
    d = normalize_dim(dim, x.ndim, "index_select")
    x.device.backend.check_indices(index.data, x.shape[d] if x.ndim else 1, "index_select")
    if x.ndim == 0:
        x = x.reshape(1)
    return getitem(x, (slice(None),) * d + (index.reshape(-1),))


@register(method=True, tests=(
    OpTest((((3, 4), (2, 4)), ((3, 4), (3, 5))), op=lambda x, s: scatter_add(x, 0, _ix(_SCATTER, x), s),
           ref=lambda np, a, s: _scatter_add_ref(np, a, 0, np.array(_SCATTER), s)),
    OpTest((((3, 4), (3, 6), (3, 6)), ((3, 4), (2, 2), (3, 3))), op=lambda x, i, s: x.scatter_add(1, i, s),
           ref=lambda np, a, i, s: _scatter_add_ref(np, a, 1, i, s), name="scatter_add_dim1",
           kinds=(None, "index:4", None))))
def scatter_add(x, dim, index, src):
    """PyTorch's scatter_add, out of place: x plus src[i][j] added at [index[i][j]][j] for dim 0."""
    x = as_tensor(x, "scatter_add")
    index = _int_tensor(index, x, "scatter_add")
    src = as_tensor(src, "scatter_add", like=x)
    if src.device is not x.device:
        raise RuntimeError(f"scatter_add: expected src on the tensor's device, got the tensor on {x.device} "
                           f"and src on {src.device}; move one with .to()")
    d = _check_along(x, dim, index, "scatter_add", src)
    if src.shape != index.shape:
        src = getitem(src, tuple(slice(0, s) for s in index.shape))
    return x + ScatterAddInto.apply(src, index.data, d, x.shape)
