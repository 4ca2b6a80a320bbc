"""Shape ops: broadcast_to/sum_to (the one place un-broadcasting lives), reshape, permute, cat, ..."""
import builtins

from ..autograd.function import Function
from ..tensor import Tensor
from ..dtypes import result_type, bfloat16, float32
from ._util import as_tensor, normalize_dim, normalize_dims, shape_arg, pick
from ..backends import host_asarray as _host_asarray
from . import batching
from .batching import _wrap, _bsizes, _align, _expand, _union, _unary_axis
from .registry import register, OpTest, COMPLEX

__all__ = ["broadcast_shapes", "broadcast_to", "expand", "sum_to", "reshape", "view", "contiguous", "flatten",
           "permute", "transpose", "swapaxes", "squeeze", "unsqueeze", "expand_dims", "concatenate",
           "cat", "stack", "split", "chunk", "pad", "flip", "roll", "repeat", "tile", "repeat_interleave",
           "moveaxis", "unbind"]


@register(untested="a shape helper (shapes in, a shape out), tested through every broadcasting op's table "
                   "entries (add, where, take_along_axis, ...) and their error tests")
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


def _broadcast_to_rule(cls, args, kwargs):
    x, shape = args
    p = _align(x, x._blevels, len(shape))
    return _wrap(cls.apply(p, _bsizes(x._blevels) + tuple(shape)), x._blevels)


class BroadcastTo(Function):
    batch_rule = _broadcast_to_rule

    @staticmethod
    def forward(ctx, x, shape):
        ctx.shape = x.data.shape
        return ctx.wrap(ctx.xp.broadcast_to(x.data, shape), base=x)

    @staticmethod
    def backward(ctx, grad):
        return sum_to(grad, ctx.shape), None


def _sum_to_rule(cls, args, kwargs):
    x, shape = args
    b = _bsizes(x._blevels)
    padded = (1,) * (x.ndim - len(shape)) + tuple(shape)     # the batch dims must not count as leading
    out = cls.apply(x._bbase, b + padded)
    return _wrap(reshape(out, b + tuple(shape)), x._blevels)


class SumTo(Function):
    batch_rule = _sum_to_rule

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
        # bfloat16 adds in float32 and rounds once (NumPy would add in bfloat16)
        a = a.sum(axis=axes, keepdims=True) if a.dtype is not bfloat16 else \
            a.sum(axis=axes, keepdims=True, dtype=float32).astype(bfloat16)
        if lead:
            a = a.reshape(shape)
    return a


def _expand_as(self, other):
    """x.expand_as(other): x broadcast to other's shape."""
    return broadcast_to(self, other.shape)


@register(method=True, methods={"expand_as": _expand_as}, tests=OpTest(
    (((3, 1),), ((),)), op=lambda x: broadcast_to(x, (2, 3, 4)), ref=lambda np, a: np.broadcast_to(a, (2, 3, 4))))
def broadcast_to(x, shape):
    """x broadcast to ``shape`` (NumPy rules); the gradient is summed back to x's shape."""
    x = as_tensor(x, "broadcast_to")
    shape = shape_arg((shape,), "broadcast_to")
    if x.shape == shape:
        return x
    if broadcast_shapes(x.shape, shape, op="broadcast_to") != shape:
        raise ValueError(f"broadcast_to: cannot broadcast a tensor of shape {x.shape} to {shape}")
    return BroadcastTo.apply(x, shape)


@register(method=True, tests=OpTest(
    (((2, 1),),), op=lambda x: x.expand(4, -1, 3), ref=lambda np, a: np.broadcast_to(a, (4, 2, 3))))
def expand(x, *sizes):
    """PyTorch's expand: broadcast to ``sizes``, where -1 keeps that dimension's size."""
    sizes = shape_arg(sizes, "expand")
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: the number of sizes ({len(sizes)}) must be at least the tensor's dims ({x.ndim})")
    shape = tuple(x.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(sizes))
    return broadcast_to(x, shape)


@register(tests=OpTest(
    (((2, 3, 4),),), op=lambda x: sum_to(x, (3, 1)), ref=lambda np, a: a.sum(0).sum(-1, keepdims=True)))
def sum_to(x, shape):
    """Sum x down to ``shape`` (the reverse of broadcasting); the gradient broadcasts back."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    return SumTo.apply(x, shape)


def _reshape_rule(cls, args, kwargs):
    x, shape = args
    return _wrap(cls.apply(x._bbase, _bsizes(x._blevels) + tuple(shape)), x._blevels)


class Reshape(Function):
    batch_rule = _reshape_rule

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


@register(method=True, tests=(
    OpTest((((2, 6),), ((4, 0),)), op=lambda x: x.reshape(4, -1), ref=lambda np, a: a.reshape(4, -1)),
    OpTest((((3, 4),),), op=lambda x: x.reshape(4, 3).T, ref=lambda np, a: a.reshape(4, 3).T, name="complex_reshape_T",
           **COMPLEX)))
def reshape(x, *shape):
    """x with a new shape of the same number of elements (one entry may be -1)."""
    if not isinstance(x, Tensor):
        x = as_tensor(x, "reshape")
    shape = shape_arg(shape, "reshape")
    if shape == x.data.shape:
        return x
    return Reshape.apply(x, _resolve_shape(shape, x.data.size, "reshape"))


def _view_as(self, other):
    """x.view_as(other): x viewed in other's shape (no copy)."""
    return view(self, other.shape)


@register(method=True, methods={"view_as": _view_as}, tests=OpTest(
    (((12,),),), op=lambda x: x.view((3, 4)), ref=lambda np, a: a.reshape(3, 4), name="view_tuple"))
def view(x, *shape):
    """reshape that never copies: a RuntimeError (as in PyTorch) when x's memory layout cannot be seen in
    the new shape, since writes through a silent copy would be lost."""
    y = reshape(x, shape_arg(shape, "view"))
    if y is not x and y.data.size and not x.device.backend.xp.may_share_memory(y.data, x.data):
        strides = tuple(s // x.data.itemsize for s in x.data.strides)
        raise RuntimeError(f"view: a tensor of shape {x.shape} and strides {strides} cannot be viewed "
                           f"as shape {y.shape} without a copy (it is not contiguous); use .reshape(...), which "
                           "copies when needed, or .contiguous().view(...)")
    return y


class Contiguous(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(x.data.copy(order="C"))     # (ascontiguousarray would make a 0-d array 1-d)

    @staticmethod
    def backward(ctx, grad):
        return grad


@register(method=True, tests=OpTest(
    (((2, 3),), ((4,),), ((),), ((0, 3),)), op=lambda x: x.T.contiguous(), ref=lambda np, a: a.T.copy(order="C"),
    name="contiguous_of_transpose"))
def contiguous(x):
    """x itself when its memory is C-contiguous, else a contiguous copy (differentiable)."""
    x = as_tensor(x, "contiguous")
    return x if x.data.flags.c_contiguous else Contiguous.apply(x)


@register(method=True, tests=(
    OpTest((((2, 3, 4),), ((),)), ref=lambda np, a: a.reshape(-1)),
    OpTest((((2, 3, 4, 5),),), op=lambda x: x.flatten(1, 2), ref=lambda np, a: a.reshape(2, 12, 5), name="flatten_mid")))
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


def _permute_rule(cls, args, kwargs):
    x, axes = args
    nb = len(x._blevels)
    return _wrap(cls.apply(x._bbase, tuple(range(nb)) + batching._shift(axes, nb)), x._blevels)


class Permute(Function):
    batch_rule = _permute_rule

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


@register(method=True, tests=OpTest(
    (((2, 3, 4),),), op=lambda x: x.permute(2, 0, 1), ref=lambda np, a: a.transpose(2, 0, 1)))
def permute(x, *dims, _op="permute"):
    """Reorder the dims: the result's dim i is x's dim ``dims[i]``."""
    x = as_tensor(x, _op)
    dims = shape_arg(dims, _op)
    if len(dims) != x.ndim:
        raise ValueError(f"{_op}: expected {x.ndim} dims for a tensor of shape {x.shape}, got {dims}")
    axes = tuple(normalize_dim(d, x.ndim, _op) for d in dims)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{_op}: dims {dims} repeat a dimension")
    if axes == tuple(range(x.ndim)):
        return x
    return Permute.apply(x, axes)


@register(method=True, tests=(   # x.T is Tensor's own property (a transpose)
    OpTest((((2, 3),), ((2, 3, 4),)), op=lambda x: x.T, ref=lambda np, a: a.T),
    OpTest((((2, 3, 4),),), op=lambda x: x.transpose(0, 2), ref=lambda np, a: a.swapaxes(0, 2), name="transpose_swap")))
def transpose(x, *axes):
    """NumPy's transpose (no axes: reverse them; a full permutation), or, given two dims of a tensor
    with more than two, PyTorch's transpose(dim0, dim1) that swaps them."""
    x = as_tensor(x, "transpose")
    axes = shape_arg(axes, "transpose") if axes else ()
    if not axes:
        return permute(x, *range(x.ndim - 1, -1, -1), _op="transpose")
    if len(axes) == 2 and x.ndim != 2:
        return swapaxes(x, *axes, op="transpose")
    return permute(x, *axes, _op="transpose")


@register(method=("swapaxes", "swapdims"), tests=OpTest(
    (((2, 3, 4),),), op=lambda x: swapaxes(x, -1, -2), ref=lambda np, a: a.swapaxes(-1, -2)))
def swapaxes(x, axis1, axis2, op="swapaxes"):
    """Swap two dims (PyTorch's swapdims, transpose(dim0, dim1))."""
    x = as_tensor(x, op)
    a = normalize_dim(axis1, x.ndim, op)
    b = normalize_dim(axis2, x.ndim, op)
    dims = list(range(x.ndim))
    dims[a], dims[b] = dims[b], dims[a]
    return permute(x, *dims)


@register(method=True, tests=OpTest(
    (((2, 3, 4),),), op=lambda x: moveaxis(x, 0, -1), ref=lambda np, a: np.moveaxis(a, 0, -1)))
def moveaxis(x, source, destination):
    """Move dim ``source`` to position ``destination`` (ints, or sequences of one length), the others
    keeping their order."""
    x = as_tensor(x, "moveaxis")
    src = [source] if hasattr(source, "__index__") else list(source)
    dst = [destination] if hasattr(destination, "__index__") else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"moveaxis: expected as many sources as destinations, got {len(src)} and {len(dst)}")
    src = [normalize_dim(s, x.ndim, "moveaxis") for s in src]
    dst = [normalize_dim(d, x.ndim, "moveaxis") for d in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"moveaxis: repeated dim in source {source} or destination {destination}")
    rest = iter(i for i in range(x.ndim) if i not in src)
    placed = dict(zip(dst, src))
    return permute(x, *(placed[i] if i in placed else next(rest) for i in range(x.ndim)))


@register(method=True, tests=(
    OpTest((((2, 1, 3, 1),),), ref="np.squeeze"),
    OpTest((((2, 1, 3),),), op=lambda x: x.squeeze(1), ref=lambda np, a: a.squeeze(1), name="squeeze_dim")))
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


@register(method=True, tests=OpTest(
    (((2, 3),), ((),)), op=lambda x: x.unsqueeze(-1), ref=lambda np, a: a[..., None]))
def unsqueeze(x, dim):
    """Insert a size-1 dim at ``dim`` (-1 appends one)."""
    x = as_tensor(x, "unsqueeze")
    d = normalize_dim(dim, x.ndim + 1, "unsqueeze")
    return reshape(x, x.shape[:d] + (1,) + x.shape[d:])


@register(method=True, tests=OpTest((((2, 3),),), op=lambda x: expand_dims(x, 0), ref=lambda np, a: a[None]))
def expand_dims(x, axis):
    """NumPy's name for unsqueeze: insert a size-1 dim at ``axis``."""
    return unsqueeze(x, axis)


def _concatenate_rule(cls, args, kwargs):
    axis, xs = args[0], args[1:]
    levels = _union(xs)
    return _wrap(cls.apply(axis + len(levels), *(_expand(x, levels, x.shape) for x in xs)), levels)


class Concatenate(Function):
    batch_rule = _concatenate_rule

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


@register(aliases=("cat",), tests=(
    OpTest((((2, 3), (2, 2)), ((2, 0), (2, 4))), op=lambda a, b: concatenate([a, b], dim=1),
           ref=lambda np, a, b: np.concatenate([a, b], axis=1), name="cat"),
    OpTest((((1, 3), (2, 3), (3, 3)),), op=lambda a, b, c: concatenate((a, b, c)),
           ref=lambda np, a, b, c: np.concatenate((a, b, c)), name="concatenate3")))
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


cat = concatenate      # registered as an alias of concatenate


@register(tests=OpTest(
    (((2, 3), (2, 3)), ((), ())), op=lambda a, b: stack([a, b], axis=-1), ref=lambda np, a, b: np.stack([a, b], axis=-1)))
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
    batch_rule = batching.unary_axis(2)

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


@register(method=True, tests=(
    OpTest((((3, 5),),), op=lambda x: split(x, 2, dim=1), ref=lambda np, a: tuple(np.split(a, [2, 4], axis=1))),
    OpTest((((4, 2),),), op=lambda x: x.split([1, 3]), ref=lambda np, a: tuple(np.split(a, [1])), name="split_sizes")))
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


@register(method=True, tests=OpTest(
    (((6, 2),),), op=lambda x: chunk(x, 3, dim=0), ref=lambda np, a: tuple(np.split(a, [2, 4]))))
def chunk(x, chunks, dim=0):
    """Split into ``chunks`` pieces of ceil(n / chunks) (the last may be smaller), as in PyTorch."""
    if not isinstance(chunks, int) or chunks <= 0:
        raise ValueError(f"chunk: expected a positive number of chunks, got {chunks!r}")
    d = normalize_dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    return split(x, builtins.max(1, -(-n // chunks)), d)


@register(method=True, tests=OpTest(
    (((2, 3),),), op=lambda x: unbind(x, 1), ref=lambda np, a: tuple(a[:, i] for i in range(3))))
def unbind(x, dim=0):
    """The slices along ``dim`` as a tuple, that dim removed."""
    d = normalize_dim(dim, x.ndim, "unbind")
    return tuple(squeeze(p, d) for p in split(x, 1, d)) if x.shape[d] > 1 else (squeeze(x, d),) * x.shape[d]


def _pad_rule(cls, args, kwargs):
    x, widths, value = args
    return _wrap(cls.apply(x._bbase, ((0, 0),) * len(x._blevels) + tuple(widths), value), x._blevels)


class Pad(Function):
    batch_rule = _pad_rule

    @staticmethod
    def forward(ctx, x, widths, value):
        ctx.slices = tuple(slice(lo, lo + n) for (lo, _), n in zip(widths, x.data.shape))
        return ctx.wrap(ctx.xp.pad(x.data, widths, mode="constant", constant_values=value))

    @staticmethod
    def backward(ctx, grad):
        return grad[ctx.slices], None, None


@register(method=True, tests=(
    OpTest((((2, 3),),), op=lambda x: pad(x, ((1, 0), (2, 1))), ref=lambda np, a: np.pad(a, ((1, 0), (2, 1)))),
    OpTest((((2, 3),), ((3,),)), op=lambda x: pad(x, 1, value=0.5), ref=lambda np, a: np.pad(a, 1, constant_values=0.5),
           name="pad_value")))
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
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, dims):
        ctx.dims = dims
        return ctx.wrap(ctx.xp.flip(x.data, dims))

    @staticmethod
    def backward(ctx, grad):
        return flip(grad, ctx.dims), None


@register(method=True, tests=(
    OpTest((((3, 4),),), op=lambda x: x.flip(0), ref=lambda np, a: np.flip(a, 0)),
    OpTest((((3, 4),),), ref="np.flip", name="flip_all")))
def flip(x, dims=None, axis=None):
    """Reverse the order of elements along ``dims`` (all dims when None)."""
    x = as_tensor(x, "flip")
    dims = normalize_dims(pick(axis, dims, "flip", "axis", "dims"), x.ndim, "flip")
    return Flip.apply(x, dims) if dims else x


def _roll_rule(cls, args, kwargs):
    x, shifts, dims = args
    if dims is None:
        if x.ndim != 1:
            return NotImplemented
        dims = 0
    return _unary_axis(cls, (x, shifts, dims), kwargs, 2)


class Roll(Function):
    batch_rule = _roll_rule

    @staticmethod
    def forward(ctx, x, shifts, dims):
        ctx.shifts, ctx.dims = shifts, dims
        return ctx.wrap(ctx.xp.roll(x.data, shifts, dims))

    @staticmethod
    def backward(ctx, grad):
        neg = -ctx.shifts if isinstance(ctx.shifts, int) else tuple(-s for s in ctx.shifts)
        return Roll.apply(grad, neg, ctx.dims), None, None


@register(method=True, tests=(
    OpTest((((3, 4),),), op=lambda x: x.roll(1, dims=1), ref=lambda np, a: np.roll(a, 1, axis=1)),
    OpTest((((3, 4),),), op=lambda x: roll(x, -2), ref=lambda np, a: np.roll(a, -2), name="roll_flat"),
    OpTest((((3, 4),),), op=lambda x: roll(x, (1, 2), (0, 1)), ref=lambda np, a: np.roll(a, (1, 2), (0, 1)),
           name="roll_multi")))
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


def _tile_rule(cls, args, kwargs):
    x, reps = args
    nd = builtins.max(x.ndim, len(reps))
    reps = (1,) * (len(x._blevels) + nd - len(reps)) + tuple(reps)
    return _wrap(cls.apply(_align(x, x._blevels, nd), reps), x._blevels)


class Tile(Function):
    batch_rule = _tile_rule

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


@register(method=True, tests=OpTest(
    (((2, 3),), ((3,),)), op=lambda x: tile(x, (2, 2)), ref=lambda np, a: np.tile(a, (2, 2))))
def tile(x, reps, op="tile"):
    """NumPy's tile: repeat the whole tensor ``reps`` times along each dim."""
    x = as_tensor(x, op)
    reps = (reps,) if isinstance(reps, int) else shape_arg((reps,), op)
    if builtins.any(r < 0 for r in reps):
        raise ValueError(f"{op}: repetitions must be non-negative, got {reps}")
    reps = (1,) * (x.ndim - len(reps)) + reps
    return Tile.apply(x, reps)


@register(method=True, tests=OpTest(
    (((2, 3),),), op=lambda x: x.repeat(2, 1, 3), ref=lambda np, a: np.tile(a, (2, 1, 3))))
def repeat(x, *sizes):
    """PyTorch's repeat: tile by ``sizes`` (at least x.ndim of them). For NumPy's element-wise
    repeat use repeat_interleave."""
    x = as_tensor(x, "repeat")
    sizes = shape_arg(sizes, "repeat")
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: expected at least {x.ndim} sizes for a tensor of shape {x.shape}, got {sizes}")
    return tile(x, sizes, op="repeat")


@register(method=True, tests=OpTest(
    (((2, 3),),), op=lambda x: repeat_interleave(x, 2, dim=1), ref=lambda np, a: np.repeat(a, 2, axis=1)))
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
