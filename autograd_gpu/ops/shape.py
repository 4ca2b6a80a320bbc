"""Shape ops: broadcast_to/sum_to (the one place un-broadcasting lives), reshape, permute, cat, ..."""
import builtins

from ..autograd.function import Function
from ..tensor import Tensor
from ..dtypes import result_type
from ._util import as_tensor, normalize_dim, normalize_dims, shape_arg, pick
from ..backends import host_asarray as _host_asarray

__all__ = ["broadcast_shapes", "broadcast_to", "expand", "sum_to", "reshape", "view", "contiguous", "flatten",
           "permute", "transpose", "swapaxes", "squeeze", "unsqueeze", "expand_dims", "concatenate",
           "cat", "stack", "split", "chunk", "pad", "flip", "roll", "repeat", "tile", "repeat_interleave",
           "moveaxis", "unbind"]


def broadcast_shapes(*shapes, op="broadcast"):
    """The NumPy broadcast of several shapes, or ValueError naming the op and the shapes."""
    ndim = builtins.max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise ValueError(f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} cannot be "
                                     "broadcast together")
                out[i] = d
    return tuple(out)


class BroadcastTo(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.data.shape
        return ctx.wrap(ctx.xp.broadcast_to(x.data, shape), base=x)

    @staticmethod
    def backward(ctx, grad):
        return sum_to(grad, ctx.shape), None


class SumTo(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.data.shape
        return ctx.wrap(_sum_to_array(x.data, shape))

    @staticmethod
    def backward(ctx, grad):
        return broadcast_to(grad, ctx.shape), None


def _sum_to_array(a, shape):
    lead = a.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape) if s == 1 and a.shape[i + lead] != 1)
    if axes:
        a = a.sum(axis=axes, keepdims=True)
        if lead:
            a = a.reshape(shape)
    return a


def broadcast_to(x, shape):
    """x broadcast to ``shape`` (NumPy rules); the gradient is summed back to x's shape."""
    x = as_tensor(x, "broadcast_to")
    shape = shape_arg((shape,), "broadcast_to")
    if x.shape == shape:
        return x
    if broadcast_shapes(x.shape, shape, op="broadcast_to") != shape:
        raise ValueError(f"broadcast_to: cannot broadcast a tensor of shape {x.shape} to {shape}")
    return BroadcastTo.apply(x, shape)


def expand(x, *sizes):
    """PyTorch's expand: broadcast to ``sizes``, where -1 keeps that dimension's size."""
    sizes = shape_arg(sizes, "expand")
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: the number of sizes ({len(sizes)}) must be at least the tensor's dims ({x.ndim})")
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    return broadcast_to(x, shape)


def sum_to(x, shape):
    """Sum x down to ``shape`` (the reverse of broadcasting); the gradient broadcasts back."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return SumTo.apply(x, shape)


class Reshape(Function):
    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.data.shape
        return ctx.wrap(x.data.reshape(shape), base=x)

    @staticmethod
    def backward(ctx, grad):
        return grad.reshape(ctx.shape), None


def _resolve_shape(shape, size, op):
    if shape.count(-1) > 1:
        raise ValueError(f"{op}: only one dimension can be -1, got {shape}")
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise ValueError(f"{op}: invalid size {s} in shape {shape}")
            known *= s
    if -1 in shape:
        if known == 0 or size % known:
            raise ValueError(f"{op}: cannot reshape a tensor of {size} elements into shape {shape}")
        shape = tuple(size // known if s == -1 else s for s in shape)
    elif known != size:
        raise ValueError(f"{op}: cannot reshape a tensor of {size} elements into shape {shape}")
    return shape


def reshape(x, *shape):
    """x with a new shape of the same number of elements (one entry may be -1)."""
    if not isinstance(x, Tensor):
        x = as_tensor(x, "reshape")
    shape = shape_arg(shape, "reshape")
    if shape == x.data.shape:
        return x
    return Reshape.apply(x, _resolve_shape(shape, x.data.size, "reshape"))


def view(x, *shape):
    """reshape that never copies: a RuntimeError (as in PyTorch) when x's memory layout cannot be seen in
    the new shape, since writes through a silent copy would be lost."""
    y = reshape(x, *shape)
    if y is not x and y.data.size and not x.device.backend.xp.may_share_memory(y.data, x.data):
        strides = tuple(s // x.data.itemsize for s in x.data.strides)
        raise RuntimeError(f"view: a tensor of shape {x.shape} and strides {strides} cannot be viewed "
                           f"as shape {y.shape} without a copy (it is not contiguous); use .reshape(...), which "
                           "copies when needed, or .contiguous().view(...)")
    return y


class Contiguous(Function):
    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(x.data.copy(order="C"))     # (ascontiguousarray would make a 0-d array 1-d)

    @staticmethod
    def backward(ctx, grad):
        return grad


def contiguous(x):
    """x itself when its memory is C-contiguous, else a contiguous copy (differentiable)."""
    x = as_tensor(x, "contiguous")
    return x if x.data.flags.c_contiguous else Contiguous.apply(x)


def flatten(x, start_dim=0, end_dim=-1):
    """Merge dims start_dim..end_dim into one (all of them by default)."""
    x = as_tensor(x, "flatten")
    if x.ndim == 0:
        return reshape(x, 1)
    s = normalize_dim(start_dim, x.ndim, "flatten")
    e = normalize_dim(end_dim, x.ndim, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim ({start_dim}) comes after end_dim ({end_dim})")
    n = 1
    for d in x.shape[s:e + 1]:
        n *= d
    return reshape(x, x.shape[:s] + (n,) + x.shape[e + 1:])


class Permute(Function):
    @staticmethod
    def forward(ctx, x, axes):
        ctx.axes = axes
        return ctx.wrap(x.data.transpose(axes), base=x)

    @staticmethod
    def backward(ctx, grad):
        inv = [0] * len(ctx.axes)
        for i, a in enumerate(ctx.axes):
            inv[a] = i
        return grad.permute(*inv), None


def permute(x, *dims, op="permute"):
    """Reorder the dims: the result's dim i is x's dim ``dims[i]``."""
    x = as_tensor(x, op)
    dims = shape_arg(dims, op)
    if len(dims) != x.ndim:
        raise ValueError(f"{op}: expected {x.ndim} dims for a tensor of shape {x.shape}, got {dims}")
    axes = tuple(normalize_dim(d, x.ndim, op) for d in dims)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: dims {dims} repeat a dimension")
    if axes == tuple(range(x.ndim)):
        return x
    return Permute.apply(x, axes)


def transpose(x, *axes):
    """NumPy's transpose (no axes: reverse them; a full permutation), or, given two dims of a tensor
    with more than two, PyTorch's transpose(dim0, dim1) that swaps them."""
    x = as_tensor(x, "transpose")
    axes = shape_arg(axes, "transpose") if axes else ()
    if not axes:
        return permute(x, *range(x.ndim - 1, -1, -1), op="transpose")
    if len(axes) == 2 and x.ndim != 2:
        return swapaxes(x, *axes, op="transpose")
    return permute(x, *axes, op="transpose")


def swapaxes(x, axis1, axis2, op="swapaxes"):
    x = as_tensor(x, op)
    a = normalize_dim(axis1, x.ndim, op)
    b = normalize_dim(axis2, x.ndim, op)
    dims = list(range(x.ndim))
    dims[a], dims[b] = dims[b], dims[a]
    return permute(x, *dims)


def moveaxis(x, source, destination):
    s = normalize_dim(source, x.ndim, "moveaxis")
    d = normalize_dim(destination, x.ndim, "moveaxis")
    dims = [i for i in range(x.ndim) if i != s]
    dims.insert(d, s)
    return permute(x, *dims)


def squeeze(x, dim=None, axis=None):
    """Remove size-1 dims (all of them, or the ones named; naming a dim of another size is an error)."""
    x = as_tensor(x, "squeeze")
    dim = pick(axis, dim, "squeeze")
    if dim is None:
        shape = tuple(s for s in x.shape if s != 1)
    else:
        dims = normalize_dims(dim, x.ndim, "squeeze")
        for d in dims:
            if x.shape[d] != 1:
                raise ValueError(f"squeeze: dim {d} has size {x.shape[d]}, not 1 (shape {x.shape})")
        shape = tuple(s for i, s in enumerate(x.shape) if i not in dims)
    return reshape(x, shape)


def unsqueeze(x, dim):
    """Insert a size-1 dim at ``dim`` (-1 appends one)."""
    x = as_tensor(x, "unsqueeze")
    d = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


def expand_dims(x, axis):
    return unsqueeze(x, axis)


class Concatenate(Function):
    @staticmethod
    def forward(ctx, axis, *xs):
        ctx.axis = axis
        ctx.sizes = [x.data.shape[axis] for x in xs]
        return ctx.wrap(ctx.xp.concatenate([x.data for x in xs], axis=axis))

    @staticmethod
    def backward(ctx, grad):
        return (None,) + split(grad, ctx.sizes, ctx.axis)


def _tensor_list(tensors, op):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{op}: expected a list or tuple of Tensors, got {type(tensors).__name__}")
    if not tensors:
        raise ValueError(f"{op}: expected at least one tensor, got an empty sequence")
    xs = [as_tensor(t, op) for t in tensors]
    dts = {x.dtype for x in xs}
    if len(dts) > 1:
        dt = result_type(*dts)
        xs = [x if x.dtype == dt else x.to(dtype=dt) for x in xs]
    return xs


def concatenate(tensors, axis=0, dim=None):
    """Join tensors along an existing dim; all other dims must match."""
    axis = dim if dim is not None else axis
    xs = _tensor_list(tensors, "concatenate")
    nd = xs[0].ndim
    if nd == 0:
        raise ValueError("concatenate: zero-dimensional tensors cannot be concatenated; use stack")
    ax = normalize_dim(axis, nd, "concatenate")
    for x in xs[1:]:
        if x.ndim != nd or x.shape[:ax] + x.shape[ax + 1:] != xs[0].shape[:ax] + xs[0].shape[ax + 1:]:
            raise ValueError(f"concatenate: shapes {', '.join(str(t.shape) for t in xs)} differ outside dim {ax}")
    return Concatenate.apply(ax, *xs)


cat = concatenate


def stack(tensors, axis=0, dim=None):
    """Join same-shaped tensors along a new dim."""
    axis = dim if dim is not None else axis
    xs = _tensor_list(tensors, "stack")
    for x in xs[1:]:
        if x.shape != xs[0].shape:
            raise ValueError(f"stack: expected tensors of one shape, got {', '.join(str(t.shape) for t in xs)}")
    ax = normalize_dim(axis, xs[0].ndim + 1, "stack")
    return concatenate([unsqueeze(x, ax) for x in xs], ax)


class Split(Function):
    @staticmethod
    def forward(ctx, x, sizes, axis):
        ctx.axis = axis
        bounds, at = [], 0
        for s in sizes[:-1]:
            at += s
            bounds.append(at)
        return tuple(ctx.wrap(p, base=x) for p in ctx.xp.split(x.data, bounds, axis=axis))

    @staticmethod
    def backward(ctx, *grads):
        return concatenate(list(grads), ctx.axis), None, None


def split(x, split_size_or_sections, dim=0, axis=None):
    """PyTorch's split: an int is the size of each piece (the last may be smaller), a list gives the
    sizes. Returns a tuple of tensors."""
    x = as_tensor(x, "split")
    dim = normalize_dim(axis if axis is not None else dim, x.ndim, "split")
    n = x.shape[dim]
    if isinstance(split_size_or_sections, int) and not isinstance(split_size_or_sections, bool):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: split size must be positive, got {step}")
        sizes = [builtins.min(step, n - i) for i in range(0, n, step)] or [0]
    else:
        if not isinstance(split_size_or_sections, (list, tuple)) or not all(
                isinstance(s, int) and not isinstance(s, bool) for s in split_size_or_sections):
            raise TypeError(f"split: expected an int or a list of ints as split_size_or_sections, got "
                            f"{type(split_size_or_sections).__name__}")
        sizes = list(split_size_or_sections)
        if builtins.sum(sizes) != n or builtins.min(sizes, default=0) < 0:
            raise ValueError(f"split: sizes {sizes} must be non-negative and add up to {n} (dim {dim} of {x.shape})")
    if len(sizes) == 1:
        return (x,)
    return Split.apply(x, sizes, dim)


def chunk(x, chunks, dim=0):
    """Split into ``chunks`` pieces of ceil(n / chunks) (the last may be smaller), as in PyTorch."""
    if not isinstance(chunks, int) or chunks <= 0:
        raise ValueError(f"chunk: expected a positive number of chunks, got {chunks!r}")
    d = normalize_dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    return split(x, builtins.max(1, -(-n // chunks)), d)


def unbind(x, dim=0):
    """The slices along ``dim`` as a tuple, that dim removed."""
    d = normalize_dim(dim, x.ndim, "unbind")
    return tuple(squeeze(p, d) for p in split(x, 1, d)) if x.shape[d] > 1 else (squeeze(x, d),) * x.shape[d]


class Pad(Function):
    @staticmethod
    def forward(ctx, x, widths, value):
        ctx.slices = tuple(slice(lo, lo + n) for (lo, _), n in zip(widths, x.data.shape))
        return ctx.wrap(ctx.xp.pad(x.data, widths, mode="constant", constant_values=value))

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.slices], None, None


def pad(x, pad_width, mode="constant", value=0.0, constant_values=None):
    """NumPy's pad, constant mode: ``pad_width`` is an int, a (before, after) pair, or one pair per dim."""
    x = as_tensor(x, "pad")
    if mode != "constant":
        raise ValueError(f"pad: only mode='constant' is supported, got {mode!r}")
    if constant_values is not None:
        value = constant_values
    nd = x.ndim
    if isinstance(pad_width, int):
        widths = ((pad_width, pad_width),) * nd
    else:
        pw = [tuple(p) if isinstance(p, (list, tuple)) else p for p in pad_width]
        if len(pw) == 2 and all(isinstance(p, int) for p in pw):
            widths = (tuple(pw),) * nd
        elif len(pw) == nd and all(isinstance(p, tuple) and len(p) == 2 for p in pw):
            widths = tuple(pw)
        else:
            raise ValueError(f"pad: expected an int, a (before, after) pair, or {nd} pairs, got {pad_width!r}")
    if any(a < 0 or b < 0 for a, b in widths):
        raise ValueError(f"pad: widths must be non-negative, got {widths}")
    return Pad.apply(x, widths, value)


class Flip(Function):
    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return ctx.wrap(ctx.xp.flip(x.data, dims))

    @staticmethod
    def backward(ctx, grad):
        return flip(grad, ctx.dims), None


def flip(x, dims=None, axis=None):
    """Reverse the order of elements along ``dims`` (all dims when None)."""
    x = as_tensor(x, "flip")
    dims = normalize_dims(pick(axis, dims, "flip", "axis", "dims"), x.ndim, "flip")
    return Flip.apply(x, dims) if dims else x


class Roll(Function):
    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        return ctx.wrap(ctx.xp.roll(x.data, shifts, dims))

    @staticmethod
    def backward(ctx, grad):
        neg = -ctx.shifts if isinstance(ctx.shifts, int) else tuple(-s for s in ctx.shifts)
        return Roll.apply(grad, neg, ctx.dims), None, None


def roll(x, shifts, dims=None, axis=None):
    """Shift elements cyclically along ``dims`` (of the flattened tensor when None)."""
    x = as_tensor(x, "roll")
    dims = pick(axis, dims, "roll", "axis", "dims")
    if dims is None:
        return reshape(Roll.apply(flatten(x), shifts, None), x.shape)
    if isinstance(dims, int):
        dims = normalize_dim(dims, x.ndim, "roll")
    else:
        dims = tuple(normalize_dim(d, x.ndim, "roll") for d in dims)
        if isinstance(shifts, int) or len(shifts) != len(dims):
            raise ValueError(f"roll: expected one shift per dim, got shifts={shifts!r} and dims={dims!r}")
        shifts = tuple(shifts)
    return Roll.apply(x, shifts, dims)


class Tile(Function):
    @staticmethod
    def forward(ctx, x, reps):
        ctx.shape = x.data.shape
        ctx.reps = reps
        return ctx.wrap(ctx.xp.tile(x.data, reps))

    @staticmethod
    def backward(ctx, grad):
        # view the output as (r0, s0, r1, s1, ...) and sum the repeat axes
        shape = (1,) * (len(ctx.reps) - len(ctx.shape)) + ctx.shape
        split_shape = builtins.sum(((r, s) for r, s in zip(ctx.reps, shape)), ())
        g = grad.reshape(split_shape).sum(axis=tuple(range(0, len(split_shape), 2)))
        return g.reshape(ctx.shape), None


def tile(x, reps, op="tile"):
    """NumPy's tile: repeat the whole tensor ``reps`` times along each dim."""
    x = as_tensor(x, op)
    reps = (reps,) if isinstance(reps, int) else shape_arg((reps,), op)
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"{op}: repetitions must be non-negative, got {reps}")
    reps = (1,) * (x.ndim - len(reps)) + reps
    return Tile.apply(x, reps)


def repeat(x, *sizes):
    """PyTorch's repeat: tile by ``sizes`` (at least x.ndim of them). For NumPy's element-wise
    repeat use repeat_interleave."""
    x = as_tensor(x, "repeat")
    sizes = shape_arg(sizes, "repeat")
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: expected at least {x.ndim} sizes for a tensor of shape {x.shape}, got {sizes}")
    return tile(x, sizes, op="repeat")


def repeat_interleave(x, repeats, dim=None, axis=None):
    """NumPy's repeat: each element ``repeats`` times along ``dim`` (of the flattened tensor when None)."""
    dim = pick(axis, dim, "repeat_interleave")
    if dim is None:
        x, dim = flatten(x), 0
    d = normalize_dim(dim, x.ndim, "repeat_interleave")
    if isinstance(repeats, int):
        if repeats < 0:
            raise ValueError(f"repeat_interleave: repeats must be non-negative, got {repeats}")
        y = unsqueeze(x, d + 1)
        y = broadcast_to(y, x.shape[:d + 1] + (repeats,) + x.shape[d + 1:])
        return reshape(y, x.shape[:d] + (x.shape[d] * repeats,) + x.shape[d + 1:])
    from .indexing import index_select
    backend = x.device.backend
    # the repeats size the result, so they are needed on the host (a sync when they are on a GPU)
    reps = (backend.read_back(repeats.data, "repeat_interleave with tensor repeats") if isinstance(repeats, Tensor)
            else _host_asarray(repeats))
    if reps.shape != (x.shape[d],):
        raise ValueError(f"repeat_interleave: expected {x.shape[d]} repeats, got shape {tuple(reps.shape)}")
    idx = backend.xp.repeat(backend.xp.arange(x.shape[d]), reps.tolist())
    return index_select(x, d, Tensor._make(idx, x.device))
