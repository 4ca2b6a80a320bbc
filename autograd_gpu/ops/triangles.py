"""Triangles and diagonals: tril, triu, tril_indices, triu_indices, diagonal, diag, diag_embed, trace,
block_diag (PyTorch's; ``ag.linalg.diagonal``/``ag.linalg.trace`` are NumPy's, on the last two dims).

``Diagonal`` and ``PutDiagonal`` are each other's backward (taking a diagonal and embedding one are
adjoint linear maps), so both are differentiable to any order; tril/triu mask a copy, their own backward.
"""
from ..autograd.function import Function
from ..tensor import Tensor
from ..dtypes import int64
from .shape import pad, concatenate, reshape, _tensor_list
from ._util import as_tensor, normalize_dim
from . import batching
from .batching import _wrap, _bsizes
from .registry import register, OpTest

__all__ = ["tril", "triu", "tril_indices", "triu_indices", "diagonal", "diag", "diag_embed", "trace",
           "block_diag"]


# --------------------------------------------------------------------------- tril / triu
class _Triangle(Function):
    batch_rule = batching.stacked_matrices      # on the last two dims: batch dims are more leading dims
    fn: str | None = None                       # the subclass's xp function: "tril" or "triu"

    @classmethod
    def forward(cls, ctx, x, k):
        ctx.k = k
        return ctx.wrap(getattr(ctx.xp, cls.fn)(x.data, k))

    @classmethod
    def backward(cls, ctx, grad):
        return cls.apply(grad, ctx.k), None


class Tril(_Triangle):
    fn = "tril"


class Triu(_Triangle):
    fn = "triu"


def _triangle(cls, x, diagonal, op):
    x = as_tensor(x, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected a tensor with at least 2 dims (a matrix or a stack of them), got "
                         f"shape {x.shape}")
    if isinstance(diagonal, bool) or not hasattr(diagonal, "__index__"):
        raise TypeError(f"{op}: expected diagonal to be an int, got {type(diagonal).__name__}")
    return cls.apply(x, diagonal.__index__())


@register(method=True, tests=OpTest((((3, 4),), ((2, 3, 3),), ((0, 2),)), op=lambda x: tril(x, -1 if x.ndim == 2 else 1),
                                    ref=lambda np, a: np.tril(a, -1 if a.ndim == 2 else 1)))
def tril(x, diagonal=0):
    """The lower triangle of the last two dims (on and below ``diagonal``; above it zeros)."""
    return _triangle(Tril, x, diagonal, "tril")


@register(method=True, tests=OpTest((((3, 4),), ((2, 3, 3),)), op=lambda x: x.T.triu(1) if x.ndim == 2 else triu(x),
                                    ref=lambda np, a: np.triu(a.T, 1) if a.ndim == 2 else np.triu(a)))
def triu(x, diagonal=0):
    """The upper triangle of the last two dims (on and above ``diagonal``; below it zeros)."""
    return _triangle(Triu, x, diagonal, "triu")


def _indices(fn, row, col, offset, dtype, device, op):
    from ..creation import tensor
    for name, v in (("row", row), ("col", col), ("offset", offset)):
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise TypeError(f"{op}: expected {name} to be an int, got {type(v).__name__}")
    row, col, offset = row.__index__(), col.__index__(), offset.__index__()
    if row < 0 or col < 0:
        raise ValueError(f"{op}: expected row and col to be non-negative, got row={row}, col={col}")
    out = tensor([[0]], dtype=int64, device=device)      # only for its device's backend
    xp = out.device.backend.xp
    r, c = getattr(xp, fn)(row, offset, col)
    return Tensor._make(xp.stack([r, c]).astype(dtype or int64), out.device)


@register(untested="a constructor from ints (no tensor input): compared with PyTorch in tests/test_breadth_sorting.py")
def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, N) row and column indices of the lower triangle (on and below ``offset``) of a row x col
    matrix, row by row; int64 unless ``dtype``."""
    return _indices("tril_indices", row, col, offset, dtype, device, "tril_indices")


@register(untested="a constructor from ints (no tensor input): compared with PyTorch in tests/test_breadth_sorting.py")
def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    """The (2, N) row and column indices of the upper triangle (on and above ``offset``) of a row x col
    matrix, row by row; int64 unless ``dtype``."""
    return _indices("triu_indices", row, col, offset, dtype, device, "triu_indices")


# --------------------------------------------------------------------------- diagonals
def _diagonal_rule(cls, args, kwargs):
    x, offset, dim1, dim2 = args
    nb = len(x._blevels)
    return _wrap(cls.apply(x._bbase, offset, dim1 + nb, dim2 + nb), x._blevels)


def _put_diagonal_rule(cls, args, kwargs):
    g, shape, offset, dim1, dim2 = args
    nb = len(g._blevels)
    return _wrap(cls.apply(g._bbase, _bsizes(g._blevels) + tuple(shape), offset, dim1 + nb, dim2 + nb),
                 g._blevels)


class Diagonal(Function):
    """The diagonal ``offset`` of the plane (dim1, dim2), appended as the last dim (a copy)."""
    batch_rule = _diagonal_rule

    @staticmethod
    def forward(ctx, x, offset, dim1, dim2):
        ctx.shape, ctx.args = x.data.shape, (offset, dim1, dim2)
        return ctx.wrap(ctx.xp.diagonal(x.data, offset, dim1, dim2).copy())

    @staticmethod
    def backward(ctx, grad):
        return PutDiagonal.apply(grad, ctx.shape, *ctx.args), None, None, None


class PutDiagonal(Function):
    """zeros(shape) with g's last dim written on the diagonal ``offset`` of the plane (dim1, dim2)."""
    batch_rule = _put_diagonal_rule

    @staticmethod
    def forward(ctx, g, shape, offset, dim1, dim2):
        ctx.args = (offset, dim1, dim2)
        xp = ctx.xp
        out = xp.zeros(shape, dtype=g.data.dtype)
        k = g.data.shape[-1]
        if k:
            plane = xp.moveaxis(out, (dim1, dim2), (-2, -1))        # a view: writing it writes out
            i = xp.arange(k)
            plane[..., i + max(-offset, 0), i + max(offset, 0)] = g.data
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        return Diagonal.apply(grad, *ctx.args), None, None, None, None


def _int(v, name, op):
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}: expected {name} to be an int, got {type(v).__name__}")
    return v.__index__()


def _plane(ndim, dim1, dim2, op):
    d1, d2 = normalize_dim(_int(dim1, "dim1", op), ndim, op), normalize_dim(_int(dim2, "dim2", op), ndim, op)
    if d1 == d2:
        raise ValueError(f"{op}: expected two different dims, got dim1={dim1} and dim2={dim2} (both dim {d1})")
    return d1, d2


def _diag_len(m, n, offset):
    return max(min(m - max(-offset, 0), n - max(offset, 0)), 0)


@register(method=True, tests=(
    OpTest((((3, 4),), ((4, 2),)), ref="np.diagonal"),
    OpTest((((2, 3, 4),),), op=lambda x: x.diagonal(1, 2, 0), ref=lambda np, a: np.diagonal(a, 1, 2, 0),
           name="diagonal_offset_dims"),
    OpTest((((3, 4),),), op=lambda x: diagonal(x, -5), ref=lambda np, a: np.diagonal(a, -5), name="diagonal_empty")))
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` (> 0 above the main one) of the plane (dim1, dim2), as the last dim of a
    tensor without those two dims."""
    x = as_tensor(x, "diagonal")
    if x.ndim < 2:
        raise ValueError(f"diagonal: expected a tensor with at least 2 dims, got shape {x.shape}")
    d1, d2 = _plane(x.ndim, dim1, dim2, "diagonal")
    return Diagonal.apply(x, _int(offset, "offset", "diagonal"), d1, d2)


def _diag_embed_ref(np, a, offset=0, dim1=-2, dim2=-1):
    n = a.shape[-1] + abs(offset)
    out = np.zeros(a.shape[:-1] + (n, n), a.dtype)
    i = np.arange(a.shape[-1])
    out[..., i + max(-offset, 0), i + max(offset, 0)] = a
    nd = out.ndim
    return np.moveaxis(out, (-2, -1), (dim1 % nd, dim2 % nd))


@register(method=True, tests=(
    OpTest((((3,),), ((2, 3),), ((0,),)), ref=_diag_embed_ref),
    OpTest((((2, 3),),), op=lambda x: diag_embed(x, 1, 0, 2), ref=lambda np, a: _diag_embed_ref(np, a, 1, 0, 2),
           name="diag_embed_offset_dims"),
    OpTest((((2, 3),),), op=lambda x: x.diag_embed(-2, -1, 0), ref=lambda np, a: _diag_embed_ref(np, a, -2, -1, 0),
           name="diag_embed_negative")))
def diag_embed(x, offset=0, dim1=-2, dim2=-1):
    """Matrices with x's last dim on their diagonal ``offset``, in the plane (dim1, dim2) of the result
    (dims of the result, which has one more dim than x; x's other dims fill the rest in order)."""
    x = as_tensor(x, "diag_embed")
    if x.ndim < 1:
        raise ValueError("diag_embed: expected a tensor with at least 1 dim, got a 0-d tensor")
    offset = _int(offset, "offset", "diag_embed")
    d1, d2 = _plane(x.ndim + 1, dim1, dim2, "diag_embed")
    n = x.shape[-1] + abs(offset)
    shape = list(x.shape[:-1])
    for d in sorted((d1, d2)):
        shape.insert(d, n)
    return PutDiagonal.apply(x, tuple(shape), offset, d1, d2)


@register(method=True, tests=(
    OpTest((((4,),), ((2, 3),), ((3, 3),)), op=lambda x: diag(x, 1), ref=lambda np, a: np.diag(a, 1)),
    OpTest((((3,),), ((3, 4),)), op=lambda x: x.diag(-1), ref=lambda np, a: np.diag(a, -1), name="diag_below")))
def diag(x, diagonal=0):
    """A 1-D x: the square matrix with x on its diagonal ``diagonal``; a 2-D x: that diagonal of it."""
    x = as_tensor(x, "diag")
    if x.ndim == 1:
        return diag_embed(x, diagonal, 0, 1)
    if x.ndim == 2:
        return globals()["diagonal"](x, diagonal, 0, 1)
    raise ValueError(f"diag: expected a 1-D or 2-D tensor, got shape {x.shape}")


@register(method=True, tests=OpTest((((3, 4),), ((3, 3),), ((0, 2),)), ref="np.trace"))
def trace(x):
    """The sum of the main diagonal of a matrix (bool and integer matrices give int64)."""
    from .reduction import sum
    x = as_tensor(x, "trace")
    if x.ndim != 2:
        raise ValueError(f"trace: expected a matrix (2-D tensor), got shape {x.shape}")
    return sum(diagonal(x), -1)


def _block_diag_ref(np, *arrays):
    arrays = [a.reshape(1, -1) if a.ndim < 2 else a for a in arrays]
    out = np.zeros((sum(a.shape[0] for a in arrays), sum(a.shape[1] for a in arrays)),
                   np.result_type(*arrays))
    r = c = 0
    for a in arrays:
        out[r:r + a.shape[0], c:c + a.shape[1]] = a
        r, c = r + a.shape[0], c + a.shape[1]
    return out


@register(tests=OpTest((((2, 3), (3,), ()), ((2, 2), (0, 3), (1, 1))), ref=_block_diag_ref,
                       op=lambda *xs: block_diag(*xs)))
def block_diag(*tensors):
    """The block-diagonal matrix of the given tensors (0-d counts as 1 x 1, 1-D of size n as 1 x n), in
    their common dtype."""
    if not tensors:
        from ..creation import zeros
        return zeros((1, 0))
    for t in tensors:
        if isinstance(t, (list, tuple)):
            raise TypeError("block_diag: expected tensors as separate arguments (block_diag(a, b)), got a "
                            f"{type(t).__name__}; unpack it with block_diag(*tensors)")
    xs = _tensor_list(list(tensors), "block_diag")
    blocks = []
    for x in xs:
        if x.ndim > 2:
            raise ValueError(f"block_diag: expected tensors with at most 2 dims, got shape {x.shape}")
        blocks.append(x if x.ndim == 2 else reshape(x, (1, -1)))
    width = 0
    for b in blocks:
        width += b.shape[1]
    rows, left = [], 0
    for b in blocks:
        right = width - left - b.shape[1]
        rows.append(pad(b, ((0, 0), (left, right))))
        left += b.shape[1]
    return concatenate(rows, 0)
