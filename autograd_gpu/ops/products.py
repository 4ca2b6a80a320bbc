"""Products as PyTorch names them: mm, bmm, mv, addmm, addmv, baddbmm (beta, alpha), kron, cross, cdist,
inner, vdot. All are composed from matmul, tensordot and elementwise ops (but cdist's p = 0 count, a
Function with PyTorch's zero gradient): differentiable to any order, batched by vmap through those ops,
with PyTorch's shape checks and errors up front.
"""
import builtins
import math

from ..autograd.function import Function
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from .linalg import matmul, tensordot, _operands
from .elementwise import _cj, where, abs, sqrt, equal, logical_and, isfinite
from . import batching
from .reduction import sum, max as amax
from .shape import roll, broadcast_shapes, broadcast_to
from ._util import normalize_dim
from .registry import register, OpTest, COMPLEX


def _need(x, nd, op, what):
    if x.ndim != nd:
        raise RuntimeError(f"{op}: expected {what} as a {nd}-D tensor, got {x.ndim}-D (shape {x.shape})")


def _inner_match(a, b, op):
    if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
        bs = b.shape[-2] if b.ndim > 1 else b.shape[0]
        raise RuntimeError(f"{op}: shapes cannot be multiplied ({'x'.join(map(str, a.shape))} and "
                           f"{'x'.join(map(str, b.shape))}): {a.shape[-1]} != {bs}")


@register(method=True, tests=OpTest((((3, 4), (4, 2)), ((0, 3), (3, 2)), ((2, 0), (0, 3))), ref="np.matmul"))
def mm(input, mat2):
    """Matrix product of two 2-D tensors (no broadcasting; ``matmul`` for the general case)."""
    a, b = _operands((input, mat2), "mm")
    _need(a, 2, "mm", "input")
    _need(b, 2, "mm", "mat2")
    _inner_match(a, b, "mm")
    return matmul(a, b)


@register(method=True, tests=OpTest((((2, 3, 4), (2, 4, 5)), ((0, 2, 3), (0, 3, 1))), ref="np.matmul"))
def bmm(input, mat2):
    """Batched matrix product of (b, n, m) and (b, m, p) tensors: (b, n, p), no broadcasting."""
    a, b = _operands((input, mat2), "bmm")
    _need(a, 3, "bmm", "input")
    _need(b, 3, "bmm", "mat2")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"bmm: expected equal batch sizes, got {a.shape[0]} and {b.shape[0]}")
    _inner_match(a, b, "bmm")
    return matmul(a, b)


@register(method=True, tests=OpTest((((3, 4), (4,)), ((0, 2), (2,))), ref="np.matmul"))
def mv(input, vec):
    """Matrix-vector product of a 2-D and a 1-D tensor."""
    a, v = _operands((input, vec), "mv")
    _need(a, 2, "mv", "input")
    _need(v, 1, "mv", "vec")
    _inner_match(a, v, "mv")
    return matmul(a, v)


def _scaled_sum(op, input, product, beta, alpha):
    """beta * input + alpha * product; beta == 0 ignores input (NaN and inf in it do not propagate)."""
    out = product if alpha == 1 else product * alpha
    try:
        shape = broadcast_shapes(input.shape, out.shape, op=op)
    except ValueError:
        shape = None
    if shape != out.shape:
        raise RuntimeError(f"{op}: input of shape {input.shape} does not broadcast to the product's shape "
                           f"{out.shape}")
    if beta == 0:
        return out
    return out + (input if beta == 1 else input * beta)


def _addmm_ref(np, i, a, b, beta=1.0, alpha=1.0):
    t = i.dtype.type
    return (t(beta) * i + t(alpha) * (a @ b)).astype(i.dtype)


@register(method=True, tests=(
    OpTest((((3, 2), (3, 4), (4, 2)), ((2,), (3, 4), (4, 2))), ref=_addmm_ref),
    OpTest((((3, 2), (3, 4), (4, 2)),), op=lambda i, a, b: addmm(i, a, b, beta=0.5, alpha=-2.0), name="addmm_scaled",
           ref=lambda np, i, a, b: _addmm_ref(np, i, a, b, 0.5, -2.0))))
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2), mat1 and mat2 2-D, input broadcast to the result;
    with beta=0 input is ignored (NaN in it does not propagate), as in PyTorch."""
    i, a, b = _operands((input, mat1, mat2), "addmm")
    _need(a, 2, "addmm", "mat1")
    _need(b, 2, "addmm", "mat2")
    _inner_match(a, b, "addmm")
    return _scaled_sum("addmm", i, matmul(a, b), beta, alpha)


@register(method=True, tests=(
    OpTest((((3,), (3, 4), (4,)), ((), (3, 4), (4,))), ref=_addmm_ref),
    OpTest((((3,), (3, 4), (4,)),), op=lambda i, a, v: addmv(i, a, v, beta=2.0, alpha=0.5), name="addmv_scaled",
           ref=lambda np, i, a, v: _addmm_ref(np, i, a, v, 2.0, 0.5))))
def addmv(input, mat, vec, *, beta=1, alpha=1):
    """beta * input + alpha * (mat @ vec), mat 2-D and vec 1-D; beta=0 ignores input."""
    i, a, v = _operands((input, mat, vec), "addmv")
    _need(a, 2, "addmv", "mat")
    _need(v, 1, "addmv", "vec")
    _inner_match(a, v, "addmv")
    return _scaled_sum("addmv", i, matmul(a, v), beta, alpha)


@register(method=True, tests=(
    OpTest((((2, 3, 2), (2, 3, 4), (2, 4, 2)), ((1, 2), (2, 3, 4), (2, 4, 2))), ref=_addmm_ref),
    OpTest((((2, 3, 2), (2, 3, 4), (2, 4, 2)),), op=lambda i, a, b: baddbmm(i, a, b, beta=0.0, alpha=3.0),
           name="baddbmm_beta0", ref=lambda np, i, a, b: _addmm_ref(np, i, a, b, 0.0, 3.0))))
def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """beta * input + alpha * bmm(batch1, batch2); beta=0 ignores input."""
    i, a, b = _operands((input, batch1, batch2), "baddbmm")
    return _scaled_sum("baddbmm", i, bmm(a, b), beta, alpha)


@register(method=True, tests=OpTest((((2, 3), (3, 2)), ((2,), (2, 3)), ((), (3,))), ref="np.kron"))
def kron(input, other):
    """Kronecker product: block (i, j, ...) is input[i, j, ...] * other (the operands' dims aligned on the right)."""
    a, b = _operands((input, other), "kron")
    nd = builtins.max(a.ndim, b.ndim)
    sa = (1,) * (nd - a.ndim) + a.shape
    sb = (1,) * (nd - b.ndim) + b.shape
    a = a.reshape(builtins.sum(((s, 1) for s in sa), ()))       # a's dims interleaved with b's
    b = b.reshape(builtins.sum(((1, s) for s in sb), ()))
    return (a * b).reshape(tuple(x * y for x, y in zip(sa, sb)))


@register(method=True, tests=(
    OpTest((((4, 3), (4, 3)), ((2, 3, 2), (3, 1))), ref=lambda np, a, b: np.cross(a, b, axis=-2 if a.ndim == 3 else -1),
           op=lambda a, b: cross(a, b, dim=-2 if a.ndim == 3 else -1)),
    OpTest((((3, 2), (3, 2)),), ref=lambda np, a, b: np.cross(a, b, axis=0), name="cross_first_dim_of_3")))
def cross(input, other, dim=None):
    """Cross product of 3-vectors along ``dim`` (operands broadcast); dim=None takes the first dim of size 3,
    as PyTorch's ``torch.cross`` (``torch.linalg.cross`` defaults to -1)."""
    a, b = _operands((input, other), "cross")
    shape = broadcast_shapes(a.shape, b.shape, op="cross")
    if dim is None:
        dim = next((d for d, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise RuntimeError(f"cross: no dimension of size 3 in input of shape {shape}; pass dim=")
    d = normalize_dim(dim, len(shape), "cross")
    if shape[d] != 3:
        raise RuntimeError(f"cross: expected dim {dim} of size 3, got {shape[d]} (shape {shape})")
    a, b = broadcast_to(a, shape), broadcast_to(b, shape)
    # (a x b)_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1}: rolls by -1 and -2 bring those components to i
    return roll(a, -1, d) * roll(b, -2, d) - roll(a, -2, d) * roll(b, -1, d)


class CountNonzero(Function):
    """cdist's p = 0 distances: the count of nonzero coordinates along the last dim, with PyTorch's zero
    gradient (the result stays in the graph). vmap: the reduction is over the last dim, which the batch
    dims in front leave in place, so the elementwise rule applies it once."""
    _array_forward = True
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, d):
        ctx.shape = d.data.shape
        return ctx.wrap((d.data != 0).sum(-1).astype(d.data.dtype))

    @staticmethod
    def backward(ctx, grad):
        return Tensor._make(grad.device.backend.xp.zeros(ctx.shape, dtype=grad.data.dtype), grad.device)


def _cdist_ref(np, a, b, p=2.0):
    d = a[..., :, None, :] - b[..., None, :, :]
    if p == 0:
        return (d != 0).sum(-1).astype(a.dtype)
    return np.linalg.norm(d, ord=p, axis=-1).astype(a.dtype)


@register(tests=(
    OpTest((((3, 4), (5, 4)), ((2, 3, 4), (2, 2, 4)), ((0, 3), (2, 3))), ref=_cdist_ref),
    OpTest((((3, 4), (5, 4)),), op=lambda a, b: cdist(a, b, p=1.0), ref=lambda np, a, b: _cdist_ref(np, a, b, 1),
           name="cdist_p1"),
    OpTest((((3, 4), (5, 4)),), op=lambda a, b: cdist(a, b, p=3.0), ref=lambda np, a, b: _cdist_ref(np, a, b, 3),
           name="cdist_p3"),
    OpTest((((3, 4), (5, 4)),), op=lambda a, b: cdist(a, b, p=math.inf), name="cdist_pinf",
           ref=lambda np, a, b: _cdist_ref(np, a, b, np.inf)),
    OpTest((((3, 4), (5, 4)),), op=lambda a, b: cdist(a, b, p=0.0), ref=lambda np, a, b: _cdist_ref(np, a, b, 0),
           name="cdist_p0")))
def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """p-norm distances between the rows of x1 (*, P, M) and of x2 (*, R, M): (*, P, R), batch dims
    broadcast. p >= 0 (0 counts differing coordinates, inf is the largest); the gradient at a zero distance
    is 0, as PyTorch's. ``compute_mode`` is accepted for PyTorch's signature; distances are always computed
    directly (never through the matmul expansion, which loses precision)."""
    a, b = _operands((x1, x2), "cdist")
    if a.ndim < 2 or b.ndim < 2:
        raise RuntimeError(f"cdist: expected x1 and x2 with at least 2 dims, got shapes {a.shape} and {b.shape}")
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"cdist: expected x1 and x2 with the same number of columns, got {a.shape[-1]} and "
                           f"{b.shape[-1]}")
    if not isinstance(p, (int, float)) or p < 0 or p != p:
        raise RuntimeError(f"cdist: expected p >= 0, got {p!r}")
    if compute_mode not in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
                            "donot_use_mm_for_euclid_dist"):
        raise ValueError(f"cdist: unknown compute_mode {compute_mode!r}")
    d = a.unsqueeze(-2) - b.unsqueeze(-3)                    # (*, P, R, M)
    if p == 0:
        return CountNonzero.apply(d)
    if p == math.inf:
        # PyTorch's gradient: every coordinate at the maximum gets the whole gradient (times its sign), ties
        # are not split: the maximum as a constant plus each tied |d| minus itself (0, but differentiable)
        ad = abs(d)
        with no_grad():
            m = amax(ad, -1, keepdim=True)
            tie = logical_and(equal(ad, m), isfinite(m))
            m_finite = where(isfinite(m), m, 0.0)
        return m.squeeze(-1) + sum(where(tie, ad - m_finite, 0.0), -1)
    if p == 1:
        return sum(abs(d), -1)
    if p == 2:
        s = sum(d * d, -1)
    else:                                                    # |d| ** p with gradient 0 where d is 0 (p < 1 too)
        ad = abs(d)
        nz = ad > 0
        s = sum(where(nz, where(nz, ad, 1.0) ** p, 0.0), -1)
    pos = s > 0
    safe = where(pos, s, 1.0)                                # no inf * 0 in the gradient at zero distances
    return where(pos, sqrt(safe) if p == 2 else safe ** (1.0 / p), 0.0)


@register(method=True, tests=OpTest((((2, 3), (4, 3)), ((), (3,)), ((3,), (3,)), ((2, 0), (3, 0))), ref="np.inner"))
def inner(input, other):
    """Sum over the last dims of both (a scalar times a tensor when either is 0-d): (*a, *b) without those dims."""
    a, b = _operands((input, other), "inner")
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner: expected equal last dims, got shapes {a.shape} and {b.shape}")
    return tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


@register(method=True, tests=(
    OpTest((((4,), (4,)), ((0,), (0,))), ref="np.vdot"),
    OpTest((((4,), (4,)),), ref="np.vdot", name="complex_vdot", **COMPLEX)))
def vdot(input, other):
    """sum(conj(input) * other) of two 1-D tensors of one length (the first operand conjugated)."""
    a, b = _operands((input, other), "vdot")
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"vdot: expected two 1-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"vdot: expected tensors of one length, got {a.shape[0]} and {b.shape[0]}")
    return sum(_cj(a) * b)
