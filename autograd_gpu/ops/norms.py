"""Norms and matrix utilities composed from other ops: vector_norm, matrix_norm, norm, trace,
diagonal, cross, matrix_power, multi_dot. No backward code: each is differentiable to any order
through the ops it is made of."""
import math
import numbers

from ..creation import eye
from ..dtypes import is_floating
from . import reduction
from .elementwise import abs as _abs
from .linalg import einsum, matmul
from .shape import broadcast_shapes, broadcast_to, moveaxis, stack
from .solvers import _matrix, inv, _wc, _F32
from .decompositions import svdvals
from ._util import as_tensor
from .registry import register, OpTest, NO_BF16_LAPACK

__all__ = ["vector_norm", "matrix_norm", "norm", "trace", "diagonal", "cross", "matrix_power", "multi_dot"]


INF = math.inf


def _float(x, op):
    x = as_tensor(x, op)
    if not is_floating(x.dtype):
        raise TypeError(f"{op}: expected a floating-point tensor, got {x.dtype}")
    return x


@register(namespace="linalg", tests=(
    OpTest((((3, 4),), ((5,),)), ref="np.linalg.vector_norm", name="linalg_vector_norm", tol=_F32),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.vector_norm(a, axis=1, keepdims=True),
           op=lambda x: vector_norm(x, axis=1, keepdims=True), name="linalg_vector_norm_axis", tol=_F32),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.vector_norm(a, ord=1, axis=-1),
           op=lambda x: vector_norm(x, ord=1, axis=-1), name="linalg_vector_norm_1", avoid=(0.0,), tol=_F32),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.vector_norm(a, ord=3, axis=(0, 1)),
           op=lambda x: vector_norm(x, ord=3, axis=(0, 1)), name="linalg_vector_norm_3", avoid=(0.0,), tol=_F32),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.vector_norm(a, ord=INF),
           op=lambda x: vector_norm(x, ord=INF), name="linalg_vector_norm_inf", avoid=(0.0,)),
))
def vector_norm(x, ord=2, axis=None, keepdims=False):
    """NumPy's linalg.vector_norm: the p-norm over ``axis`` (all elements when None).

    ord 2, 1, inf, -inf, 0 (count of non-zeros, no gradient) or any real p. The 2-norm's gradient at 0
    is 0."""
    x = _float(x, "vector_norm")
    if isinstance(ord, str) or not isinstance(ord, numbers.Real):
        raise ValueError(f"vector_norm: expected ord to be a real number, got {ord!r}")
    return reduction.norm(x, ord, axis, keepdims)


def _matrix_axes(x, axis, op):
    try:
        r, c = axis
        r, c = r.__index__(), c.__index__()
    except (TypeError, ValueError, AttributeError):
        raise ValueError(f"{op}: expected axis to be a pair of ints, got {axis!r}") from None
    if not (-x.ndim <= r < x.ndim and -x.ndim <= c < x.ndim) or r % x.ndim == c % x.ndim:
        raise ValueError(f"{op}: axis {axis!r} must name two different dimensions of a tensor of shape {x.shape}")
    return r % x.ndim, c % x.ndim


@register(namespace="linalg", tests=tuple(
    OpTest((((3, 4),), ((2, 3, 3),)), ref=lambda np, a, o=o: np.linalg.matrix_norm(a, ord=o),
           op=lambda x, o=o: matrix_norm(x, ord=o), name=f"linalg_matrix_norm_{o}", avoid=(0.0,), tol=_F32,
           no_bfloat16=NO_BF16_LAPACK if o in ("nuc", 2, -2) else None)       # singular values
    for o in ("fro", "nuc", 2, -2, 1, -1, INF, -INF)) + (
    OpTest((((3, 2, 4),),), ref=lambda np, a: np.linalg.norm(a, ord=2, axis=(0, 2), keepdims=True),
           op=lambda x: matrix_norm(x, ord=2, axis=(0, 2), keepdims=True), name="linalg_matrix_norm_axis_keepdims",
           tol=_F32, no_bfloat16=NO_BF16_LAPACK),
))
def matrix_norm(x, ord="fro", axis=(-2, -1), keepdims=False):
    """NumPy's matrix norms over the two dims ``axis``: 'fro', 'nuc', 2, -2, 1, -1, inf, -inf.

    'nuc' is the sum of singular values, 2 / -2 the largest / smallest singular value, 1 / -1 the max /
    min column sum of |x|, inf / -inf the same over rows. Through svdvals, ord 2, -2 and 'nuc' have gradients that are finite where singular values repeat."""
    x = _float(x, "matrix_norm")
    if x.ndim < 2:
        raise ValueError(f"matrix_norm: expected at least 2 dimensions, got shape {x.shape}")
    r, c = _matrix_axes(x, axis, "matrix_norm")
    if ord == "fro":
        out = reduction.norm(x, 2, (r, c), True)
    elif ord in ("nuc", 2, -2):
        s = svdvals(x.permute(*[d for d in range(x.ndim) if d not in (r, c)], r, c))
        out = reduction.sum(s, -1) if ord == "nuc" else reduction.amax(s, -1) if ord == 2 else reduction.amin(s, -1)
        out = out.reshape(tuple(1 if d in (r, c) else n for d, n in enumerate(x.shape)))
    elif ord in (1, -1, math.inf, -math.inf):
        summed, other = (r, c) if ord in (1, -1) else (c, r)
        sums = reduction.sum(_abs(x), summed, True)
        out = reduction.amax(sums, other, True) if ord > 0 else reduction.amin(sums, other, True)
    else:
        raise ValueError(f"matrix_norm: invalid ord {ord!r}; expected 'fro', 'nuc', 2, -2, 1, -1, inf or -inf")
    if keepdims:
        return out
    return out.reshape(tuple(n for d, n in enumerate(out.shape) if d not in (r, c)))


@register(namespace="linalg", tests=(
    OpTest((((3, 4),), ((5,),), ((2, 3, 4),)), ref="np.linalg.norm", name="linalg_norm", tol=_F32),
    OpTest((((5,),),), ref=lambda np, a: np.linalg.norm(a, ord=1), op=lambda x: norm(x, ord=1),
           name="linalg_norm_ord_vector", avoid=(0.0,), tol=_F32),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.norm(a, ord="nuc"), op=lambda x: norm(x, ord="nuc"),
           name="linalg_norm_nuc", tol=_F32, no_bfloat16=NO_BF16_LAPACK),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.norm(a, axis=1), op=lambda x: norm(x, axis=1),
           name="linalg_norm_axis", tol=_F32),
    OpTest((((3, 2, 4),),), ref=lambda np, a: np.linalg.norm(a, ord=INF, axis=(2, 0)),
           op=lambda x: norm(x, ord=INF, axis=(2, 0)), name="linalg_norm_axes_inf", avoid=(0.0,), tol=_F32),
))
def norm(x, ord=None, axis=None, keepdims=False):
    """numpy.linalg.norm: a vector norm, or a matrix norm for a 2-D x or a pair of axes.

    With axis None: the 2-norm of all elements when ord is None, else the vector norm of a 1-D or the
    matrix norm of a 2-D x; an int axis gives vector norms, a pair matrix norms."""
    x = _float(x, "norm")
    if axis is None:
        if ord is None:
            return reduction.norm(x, 2, None, keepdims)
        if x.ndim == 1:
            return vector_norm(x, ord, None, keepdims)
        if x.ndim == 2:
            return matrix_norm(x, ord, (0, 1), keepdims)
        raise ValueError(f"norm: ord={ord!r} needs a 1-D or 2-D tensor (or axis), got shape {x.shape}")
    if isinstance(axis, tuple) and len(axis) == 2:
        return matrix_norm(x, "fro" if ord is None else ord, axis, keepdims)
    if isinstance(axis, tuple) and len(axis) == 1:
        axis = axis[0]
    if isinstance(axis, bool) or not hasattr(axis, "__index__"):
        raise ValueError(f"norm: expected axis to be None, an int or a pair of ints, got {axis!r}")
    if isinstance(ord, str):
        raise ValueError(f"norm: ord={ord!r} is a matrix norm; it needs a pair of axes")
    return vector_norm(x, 2 if ord is None else ord, axis, keepdims)


@register(namespace="linalg", tests=(
    OpTest((((3, 4),), ((2, 3, 3),), ((4, 2),)), ref="np.linalg.diagonal", name="linalg_diagonal"),
    OpTest((((3, 4),), ((2, 3, 3),)), ref=lambda np, a: np.linalg.diagonal(a, offset=1),
           op=lambda x: diagonal(x, offset=1), name="linalg_diagonal_offset"),
    OpTest((((3, 4),),), ref=lambda np, a: np.linalg.diagonal(a, offset=-1), op=lambda x: diagonal(x, offset=-1),
           name="linalg_diagonal_neg_offset"),
))
def diagonal(x, offset=0):
    """numpy.linalg.diagonal: the diagonal ``offset`` of the last two dims, shape (..., k)."""
    x = as_tensor(x, "diagonal")
    if x.ndim < 2:
        raise ValueError(f"diagonal: expected at least 2 dimensions, got shape {x.shape}")
    if isinstance(offset, bool) or not hasattr(offset, "__index__"):
        raise TypeError(f"diagonal: expected offset to be an int, got {type(offset).__name__}")
    m, n = x.shape[-2:]
    offset = offset.__index__()
    start_r, start_c = max(-offset, 0), max(offset, 0)
    k = max(min(m - start_r, n - start_c), 0)
    square = x[..., start_r:start_r + k, start_c:start_c + k]
    return einsum("...ii->...i", square)


@register(namespace="linalg", tests=(
    OpTest((((3, 4),), ((2, 3, 3),)), ref="np.linalg.trace", name="linalg_trace", tol=_F32),
    OpTest((((3, 3),),), ref=lambda np, a: np.linalg.trace(a, offset=-1), op=lambda x: trace(x, offset=-1),
           name="linalg_trace_offset"),
))
def trace(x, offset=0):
    """numpy.linalg.trace: the sum of diagonal ``offset`` of the last two dims."""
    return reduction.sum(diagonal(x, offset), -1)


@register(namespace="linalg", tests=(
    OpTest((((4, 3), (3,)), ((3,), (3,)), ((2, 1, 3), (5, 3))), ref="np.linalg.cross", name="linalg_cross",
           tol=_F32),
    OpTest((((3, 2), (3, 2)),), ref=lambda np, a, b: np.linalg.cross(a, b, axis=0),
           op=lambda x, y: cross(x, y, axis=0), name="linalg_cross_axis0", tol=_F32),
))
def cross(a, b, axis=-1):
    """Cross product of 3-vectors along ``axis`` (NumPy 2's linalg.cross), batch dims broadcast."""
    a, b = _float(a, "cross"), _float(b, "cross")
    if a.ndim == 0 or b.ndim == 0 or a.shape[axis] != 3 or b.shape[axis] != 3:
        raise ValueError(f"cross: expected 3-vectors along axis {axis}, got shapes {a.shape} and {b.shape}")
    a, b = moveaxis(a, axis, -1), moveaxis(b, axis, -1)
    shape = broadcast_shapes(a.shape, b.shape, op="cross")
    a, b = broadcast_to(a, shape), broadcast_to(b, shape)
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    c = stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], -1)
    return moveaxis(c, -1, axis if axis >= 0 else c.ndim + axis)


_MATRIX_POWER_BF16 = "it takes the LAPACK ops' float32/float64 inputs (negative powers invert)"


@register(namespace="linalg", tests=(
    OpTest((((3, 3),), ((2, 2, 2),)), ref=lambda np, a: np.linalg.matrix_power(a, 3),
           op=lambda x: matrix_power(x, 3), name="linalg_matrix_power", tol=_F32, no_bfloat16=_MATRIX_POWER_BF16),
    OpTest((((3, 3),),), ref="refs.linalg_matrix_power_neg", op=lambda x: matrix_power(_wc(x), -2),
           name="linalg_matrix_power_neg", tol=_F32, no_bfloat16=_MATRIX_POWER_BF16),
    OpTest((((2, 3, 3),),), ref=lambda np, a: np.linalg.matrix_power(a, 0), op=lambda x: matrix_power(x, 0),
           name="linalg_matrix_power_0", grad=False, gradgrad=False, no_bfloat16=_MATRIX_POWER_BF16),     # the identity: no path to the input
))
def matrix_power(a, n):
    """a @ a @ ... (n times) by repeated squaring, batched; n = 0 gives identities, n < 0 powers of inv(a)."""
    a = _matrix(a, "matrix_power")
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"matrix_power: expected an integer exponent, got {type(n).__name__}")
    n = n.__index__()
    if n == 0:
        return broadcast_to(eye(a.shape[-1], dtype=a.dtype, device=a.device), a.shape).contiguous()
    if n < 0:
        a, n = inv(a), -n
    result = None
    while n:
        if n & 1:
            result = a if result is None else result @ a
        n >>= 1
        if n:
            a = a @ a
    return result


def _chain_order(dims):
    """Matrix-chain dynamic programme (CLRS 15.2): split[i][j] = best k for the product i..j."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = math.inf
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


@register(namespace="linalg", tests=OpTest(
    (((2, 5), (5, 3), (3, 4)), ((4,), (4, 2), (2, 3), (3,)), ((3,), (3, 2))),
    ref=lambda np, *xs: np.linalg.multi_dot(xs), op=lambda *xs: multi_dot(xs), name="linalg_multi_dot", tol=_F32))
def multi_dot(arrays):
    """numpy.linalg.multi_dot: the product of matrices in the order with the fewest multiplications.

    The arrays are 2-D matrices (the first and last may be 1-D vectors)."""
    xs = [as_tensor(x, "multi_dot") for x in arrays]
    if len(xs) < 2:
        raise ValueError(f"multi_dot: expected at least two arrays, got {len(xs)}")
    first_vec, last_vec = xs[0].ndim == 1, xs[-1].ndim == 1
    if first_vec:
        xs[0] = xs[0].reshape(1, -1)
    if last_vec:
        xs[-1] = xs[-1].reshape(-1, 1)
    for i, x in enumerate(xs):
        if x.ndim != 2:
            raise ValueError(f"multi_dot: expected 2-D matrices (1-D allowed first and last), got shape "
                             f"{tuple(arrays[i].shape)} at position {i}")
    for i in range(len(xs) - 1):
        if xs[i].shape[1] != xs[i + 1].shape[0]:
            raise ValueError(f"multi_dot: cannot multiply {xs[i].shape} (position {i}) by {xs[i + 1].shape} "
                             f"(position {i + 1})")
    split = _chain_order([xs[0].shape[0]] + [x.shape[1] for x in xs])

    def product(i, j):
        if i == j:
            return xs[i]
        k = split[i][j]
        return matmul(product(i, k), product(k + 1, j))

    out = product(0, len(xs) - 1)
    if first_vec and last_vec:
        return out.reshape(())
    return out.reshape(-1) if first_vec or last_vec else out
