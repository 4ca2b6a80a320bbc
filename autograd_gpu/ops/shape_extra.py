"""More shape ops, as PyTorch names them: fliplr, flipud, rot90, narrow, movedim, meshgrid, cartesian_prod,
broadcast_tensors, atleast_1d/2d/3d, vander, hstack, vstack, dstack, column_stack, tensor_split, unflatten.

All are composed from the shape primitives (flip, permute, reshape, broadcast_to, getitem, concatenate,
stack): differentiable to any order and batched by vmap through those. Shapes are Python ints: no host
read, except ``tensor_split`` given its indices as a tensor (PyTorch requires that tensor on the CPU).
"""
import builtins
from typing import Callable

from ..tensor import Tensor
from ._util import as_tensor, normalize_dim
from .shape import (flip, permute, moveaxis, reshape, broadcast_to, broadcast_shapes, concatenate, stack,
                    _resolve_shape)
from .elementwise import mul
from ..creation import ones
from .registry import register, OpTest


def _tensors(tensors, op):
    """A varargs or single-sequence argument list as a list of Tensors."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    return [as_tensor(t, op) for t in tensors]


@register(method=True, tests=OpTest((((3, 4),), ((2, 3, 2),)), ref="np.fliplr"))
def fliplr(input):
    """input with dim 1 reversed (at least 2-D)."""
    x = as_tensor(input, "fliplr")
    if x.ndim < 2:
        raise RuntimeError(f"fliplr: expected a tensor of at least 2 dims, got {x.ndim}-D")
    return flip(x, (1,))


@register(method=True, tests=OpTest((((3, 4),), ((3,),)), ref="np.flipud"))
def flipud(input):
    """input with dim 0 reversed (at least 1-D)."""
    x = as_tensor(input, "flipud")
    if x.ndim < 1:
        raise RuntimeError("flipud: expected a tensor of at least 1 dim, got 0-D")
    return flip(x, (0,))


@register(method=True, tests=(
    OpTest((((3, 4),), ((2, 3, 4),)), ref="np.rot90"),
    OpTest((((3, 4),),), op=lambda x: rot90(x, -1), ref=lambda np, a: np.rot90(a, -1), name="rot90_k-1"),
    OpTest((((2, 3, 4),),), op=lambda x: x.rot90(2, [2, 0]), ref=lambda np, a: np.rot90(a, 2, (2, 0)),
           name="rot90_k2_dims")))
def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees k times in the plane of ``dims``, from the first dim toward the second."""
    x = as_tensor(input, "rot90")
    if len(dims) != 2:
        raise RuntimeError(f"rot90: expected 2 dims, got {len(dims)}")
    if x.ndim < 2:
        raise RuntimeError(f"rot90: expected a tensor of at least 2 dims, got {x.ndim}-D")
    d0, d1 = normalize_dim(dims[0], x.ndim, "rot90"), normalize_dim(dims[1], x.ndim, "rot90")
    if d0 == d1:
        raise RuntimeError(f"rot90: expected two different dims, got {tuple(dims)}")
    k %= 4
    swap = list(range(x.ndim))
    swap[d0], swap[d1] = d1, d0
    if k == 1:
        return permute(flip(x, (d1,)), *swap)
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return flip(permute(x, *swap), (d1,))
    return x


@register(method=True, tests=(
    OpTest((((5, 4),),), op=lambda x: narrow(x, 0, 1, 3), ref=lambda np, a: a[1:4]),
    OpTest((((3, 6),),), op=lambda x: x.narrow(-1, -4, 2), ref=lambda np, a: a[:, 2:4], name="narrow_negative")))
def narrow(input, dim, start, length):
    """The ``length`` elements of ``dim`` from ``start`` (negative counts from the end): a view."""
    x = as_tensor(input, "narrow")
    if x.ndim == 0:
        raise RuntimeError("narrow: cannot narrow a 0-d tensor")
    d = normalize_dim(dim, x.ndim, "narrow")
    if isinstance(start, Tensor):
        if start.ndim != 0 or start.dtype.kind not in "iu":
            raise TypeError(f"narrow: expected start as an int or a 0-d integer tensor, got {start.dtype} "
                            f"of shape {start.shape}")
        start = int(start.device.backend.read_back(start.data, "narrow with a tensor start"))
    n = x.shape[d]
    if not -n <= start <= n:
        raise IndexError(f"narrow: start {start} out of range for dim {dim} of size {n}")
    start = start + n if start < 0 else start
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dim {dim} of size {n}")
    return x[(slice(None),) * d + (slice(start, start + length),)]


@register(method=True, tests=(
    OpTest((((2, 3, 4),),), op=lambda x: movedim(x, 0, -1), ref=lambda np, a: np.moveaxis(a, 0, -1)),
    OpTest((((2, 3, 4, 5),),), op=lambda x: x.movedim((0, 1), (3, 1)), ref=lambda np, a: np.moveaxis(a, (0, 1), (3, 1)),
           name="movedim_tuple")))
def movedim(input, source, destination):
    """Move dims ``source`` (an int or a sequence) to ``destination``, the others keeping their order."""
    return moveaxis(input, source, destination)


@register(tests=(
    OpTest((((3,), (4,)), ((2,), (0,))), op=lambda a, b: meshgrid(a, b, indexing="ij"),
           ref=lambda np, a, b: tuple(np.meshgrid(a, b, indexing="ij"))),
    OpTest((((3,), (4,), (2,)),), op=lambda a, b, c: meshgrid([a, b, c], indexing="xy"),
           ref=lambda np, a, b, c: tuple(np.meshgrid(a, b, c, indexing="xy")), name="meshgrid_xy")))
def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D (or 0-d) tensors: a tuple of tensors of the grid's shape. indexing="ij"
    (PyTorch's default) gives shape (len(t0), len(t1), ...); "xy" swaps the first two dims (Cartesian)."""
    xs = _tensors(tensors, "meshgrid")
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if not xs:
        raise RuntimeError("meshgrid: expected at least one tensor")
    for x in xs:
        if x.ndim > 1:
            raise RuntimeError(f"meshgrid: expected 0-d or 1-d tensors, got shape {x.shape}")
    sizes = [x.numel() for x in xs]
    swap = indexing == "xy" and len(xs) >= 2
    if swap:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, x in enumerate(xs):
        pos = (1 - i if i < 2 else i) if swap else i
        shape = [1] * len(xs)
        shape[pos] = sizes[pos]
        out.append(broadcast_to(reshape(x, tuple(shape)), tuple(sizes)))
    return tuple(out)


@register(tests=OpTest((((3,), (2,)), ((2,), (2,), (3,))), op=lambda *xs: cartesian_prod(*xs),
                       ref=lambda np, *a: np.stack([g.reshape(-1) for g in np.meshgrid(*a, indexing="ij")], 1)))
def cartesian_prod(*tensors):
    """Every combination of elements of the 1-D tensors, as rows: (n0 * n1 * ..., k); one tensor gives itself."""
    xs = _tensors(tensors, "cartesian_prod")
    for x in xs:
        if x.ndim != 1:
            raise RuntimeError(f"cartesian_prod: expected 1-D tensors, got shape {x.shape}")
    if len(xs) == 1:
        return xs[0]
    return stack([reshape(g, (-1,)) for g in meshgrid(*xs, indexing="ij")], 1)


@register(tests=OpTest((((2, 1), (3,)), ((), (2, 2))), op=lambda a, b: broadcast_tensors(a, b),
                       ref=lambda np, a, b: tuple(np.broadcast_arrays(a, b))))
def broadcast_tensors(*tensors):
    """The tensors broadcast to their common shape (a tuple)."""
    xs = _tensors(tensors, "broadcast_tensors")
    shape = broadcast_shapes(*(x.shape for x in xs), op="broadcast_tensors")
    return tuple(x if x.shape == shape else broadcast_to(x, shape) for x in xs)


def _atleast(xs, nd, op):
    """NumPy's atleast_nd shapes: () -> (1,)*nd; (n,) -> (1, n) or (1, n, 1); (m, n) -> (m, n, 1)."""
    out = []
    for x in xs:
        s = x.shape
        if x.ndim < nd:
            if x.ndim == 0:
                s = (1,) * nd
            elif x.ndim == 1:
                s = (1,) + s + (1,) * (nd - 2)
            else:
                s = s + (1,)
            x = reshape(x, s)
        out.append(x)
    return out


def _atleast_fn(nd):
    def f(*tensors):
        single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
        out = _atleast(_tensors(tensors, f"atleast_{nd}d"), nd, f"atleast_{nd}d")
        return out[0] if single else tuple(out)
    f.__name__ = f.__qualname__ = f"atleast_{nd}d"
    f.__doc__ = (f"The tensor viewed with at least {nd} dims (a tuple for several tensors or a sequence), as "
                 f"NumPy's atleast_{nd}d.")
    return f


atleast_1d = register(tests=OpTest((((),), ((3,),), ((2, 3),)), ref="np.atleast_1d"))(_atleast_fn(1))
atleast_2d = register(tests=OpTest((((),), ((3,),), ((2, 3),)), ref="np.atleast_2d"))(_atleast_fn(2))
# declared: its own op-table entry names it (mypy cannot infer a name used in its own definition)
atleast_3d: Callable[..., Tensor | tuple[Tensor, ...]] = register(tests=(
    OpTest((((),), ((3,),), ((2, 3),), ((2, 3, 4),)), ref="np.atleast_3d"),
    OpTest((((3,), (2, 3)),), op=lambda a, b: atleast_3d(a, b), ref=lambda np, a, b: tuple(np.atleast_3d(a, b)),
           name="atleast_3d_many")))(_atleast_fn(3))


@register(tests=(
    OpTest((((4,),), ((0,),)), ref=lambda np, a: np.vander(a).astype(a.dtype)),   # NumPy's is float64
    OpTest((((3,),),), op=lambda x: vander(x, N=5, increasing=True), name="vander_increasing",
           ref=lambda np, a: np.vander(a, 5, increasing=True).astype(a.dtype))))
def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of a 1-D tensor: column j is x ** (N - 1 - j) (x ** j when increasing);
    N defaults to len(x). Built by repeated products: exact gradients at 0."""
    x = as_tensor(x, "vander")
    if x.ndim != 1:
        raise RuntimeError(f"vander: expected a 1-D tensor, got {x.ndim}-D")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError(f"vander: N must be non-negative, got {n}")
    if n == 0:
        return reshape(x, (x.shape[0], 1))[:, :0]           # (len(x), 0), still in the graph
    cols = [ones(x.shape[0], dtype=x.dtype, device=x.device), x][:n]
    for _ in range(n - 2):
        cols.append(mul(cols[-1], x))
    out = stack(cols, 1)
    return out if increasing else flip(out, (1,))


@register(tests=OpTest((((3,), (2,)), ((2, 3), (2, 1))), op=lambda a, b: hstack([a, b]),
                       ref=lambda np, a, b: np.hstack([a, b])))
def hstack(tensors):
    """Concatenate along dim 1 (dim 0 for 1-D tensors), after atleast_1d."""
    xs = _atleast(_tensors((tensors,), "hstack"), 1, "hstack")
    return concatenate(xs, 0 if xs[0].ndim == 1 else 1)


@register(aliases=("row_stack",), tests=OpTest((((3,), (3,)), ((2, 3), (1, 3))), op=lambda a, b: vstack([a, b]),
                       ref=lambda np, a, b: np.vstack([a, b])))
def vstack(tensors):
    """Concatenate along dim 0, after atleast_2d (1-D tensors become rows); alias row_stack."""
    return concatenate(_atleast(_tensors((tensors,), "vstack"), 2, "vstack"), 0)


@register(tests=OpTest((((3,), (3,)), ((2, 3), (2, 3))), op=lambda a, b: dstack([a, b]),
                       ref=lambda np, a, b: np.dstack([a, b])))
def dstack(tensors):
    """Concatenate along dim 2, after atleast_3d."""
    return concatenate(_atleast(_tensors((tensors,), "dstack"), 3, "dstack"), 2)


@register(tests=OpTest((((3,), (3, 2)), ((), ())), op=lambda a, b: column_stack([a, b]),
                       ref=lambda np, a, b: np.column_stack([a, b])))
def column_stack(tensors):
    """Concatenate along dim 1, 0-d and 1-D tensors becoming columns."""
    xs = [reshape(x, (x.numel(), 1)) if x.ndim < 2 else x for x in _tensors((tensors,), "column_stack")]
    return concatenate(xs, 1)


def _split_ref(np, a, spec, axis=0):
    return tuple(np.array_split(a, spec, axis=axis))


@register(method=True, tests=(
    OpTest((((7, 2),),), op=lambda x: tensor_split(x, 3), ref=lambda np, a: _split_ref(np, a, 3)),
    OpTest((((2, 6),),), op=lambda x: x.tensor_split([1, 4, 9], dim=1), name="tensor_split_indices",
           ref=lambda np, a: _split_ref(np, a, [1, 4, 9], 1)),
    OpTest((((5,),),), op=lambda x: tensor_split(x, (3, 1)), ref=lambda np, a: _split_ref(np, a, [3, 1]),
           name="tensor_split_decreasing")))
def tensor_split(input, indices_or_sections, dim=0):
    """Split into ``sections`` pieces (an int: sizes differ by at most one, the larger first) or at the
    ``indices`` (a sequence, as NumPy's array_split: x[:i0], x[i0:i1], ..., x[ik:]). Views, as a tuple.
    A tensor argument (0-d: sections; 1-D: indices) is read on the host."""
    x = as_tensor(input, "tensor_split")
    if x.ndim == 0:
        raise RuntimeError("tensor_split: expected a tensor of at least 1 dim, got 0-D")
    d = normalize_dim(dim, x.ndim, "tensor_split")
    spec = indices_or_sections
    if isinstance(spec, Tensor):
        if spec.dtype.kind not in "iu" or spec.ndim > 1:
            raise TypeError(f"tensor_split: expected a 0-d or 1-D integer tensor, got {spec.dtype} of shape "
                            f"{spec.shape}")
        host = spec.device.backend.read_back(spec.data, "tensor_split with tensor indices")
        spec = int(host) if spec.ndim == 0 else [int(i) for i in host.tolist()]
    n = x.shape[d]
    if isinstance(spec, int) and not isinstance(spec, bool):
        if spec <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be positive, got {spec}")
        q, r = divmod(n, spec)
        bounds, at = [], 0
        for i in range(spec - 1):
            at += q + (1 if i < r else 0)
            bounds.append(at)
    elif isinstance(spec, (list, tuple)) and builtins.all(isinstance(i, int) for i in spec):
        bounds = list(spec)
    else:
        raise TypeError(f"tensor_split: expected an int or a sequence of ints, got {type(spec).__name__}")
    pre = (slice(None),) * d
    edges = [0] + bounds + [n]
    return tuple(x[pre + (slice(a, b),)] for a, b in zip(edges[:-1], edges[1:]))


@register(method=True, tests=(
    OpTest((((2, 12),),), op=lambda x: unflatten(x, 1, (3, -1)), ref=lambda np, a: a.reshape(2, 3, 4)),
    OpTest((((6, 2),),), op=lambda x: x.unflatten(0, [2, 3]), ref=lambda np, a: a.reshape(2, 3, 2),
           name="unflatten_method")))
def unflatten(input, dim, sizes):
    """Dim ``dim`` expanded into ``sizes`` (their product its size; one entry may be -1)."""
    x = as_tensor(input, "unflatten")
    d = normalize_dim(dim, x.ndim, "unflatten")
    sizes = tuple(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    sizes = _resolve_shape(sizes, x.shape[d], "unflatten")
    return reshape(x, x.shape[:d] + tuple(sizes) + x.shape[d + 1:])
