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


# --------------------------------------------------------------------------- getitem
class GetItem(Function):
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


def getitem(x, idx):
    """x[idx] with NumPy semantics: ints, slices, None, Ellipsis, integer arrays/Tensors, bool masks."""
    return GetItem.apply(x, *_prepare(x, idx))


# --------------------------------------------------------------------------- setitem
class IndexPut(Function):
    """A copy of x with v (broadcast) written at idx."""

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


def setitem(x, idx, v):
    """x[idx] = v in place, v (a Tensor or a number) broadcast to x[idx]'s shape; differentiable."""
    idx, basic = _prepare(x, idx, "setitem")
    if isinstance(v, Tensor):
        if v.device is not x.device:
            raise RuntimeError(f"setitem: expected the value on the tensor's device, got the tensor on {x.device} "
                               f"and the value on {v.device}; move one with .to()")
    elif not isinstance(v, (int, float)):
        v = as_tensor(v, "setitem", like=x)
    recording = state.enabled and x.dtype.kind in "fc" and (
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
    @staticmethod
    def forward(ctx, x, index, dim):
        ctx.shape, ctx.index, ctx.dim = x.data.shape, index, dim
        return ctx.wrap(_take(x.data, _along(ctx.xp, index, dim), "gather"))

    @staticmethod
    def backward(ctx, grad):
        return ScatterAddInto.apply(grad, ctx.index, ctx.dim, ctx.shape), None, None


class ScatterAddInto(Function):
    """zeros(shape) with src[i, j, ...] added at index[i, j, ...] along dim: gather's backward."""

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


def gather(x, dim, index):
    """PyTorch's gather: out[i][j] = x[index[i][j]][j] for dim 0 (out has index's shape)."""
    x = as_tensor(x, "gather")
    index = _int_tensor(index, x, "gather")
    d = _check_along(x, dim, index, "gather")
    return Gather.apply(x, index.data, d)


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
