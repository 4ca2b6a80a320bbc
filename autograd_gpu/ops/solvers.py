"""Linear solvers: inv, solve, det, slogdet, cholesky primitives; lstsq and pinv on top of them.

Every function takes a matrix or a batch of matrices (..., M, N) and batches over the leading dims.
A singular (or, for cholesky, non-positive-definite) matrix is a ValueError naming the op and the
batch element, where NumPy raises LinAlgError: on the CPU at once, on a GPU at the next
synchronisation (a device-side check, so the op itself never waits for the GPU).
"""
from ..autograd.function import Function
from ..backends import get_backend
from ..tensor import Tensor
from .shape import broadcast_shapes, broadcast_to
from ._util import as_tensor
from ._autocast import cast_float32
from ..creation import eye
from ..dtypes import float32
from . import batching
from .registry import register, OpTest as _OpTest, NO_BF16_LAPACK


def OpTest(*args, **kw):
    """An op-table entry of a LAPACK-backed op: it refuses bfloat16."""
    return _OpTest(*args, no_bfloat16=NO_BF16_LAPACK, **kw)


__all__ = ["inv", "solve", "det", "slogdet", "cholesky", "lstsq", "pinv"]

# --------------------------------------------------------------------------- op-table inputs
# Random inputs are made well-conditioned inside the op-table entries (and the same way in their NumPy
# references, autograd_gpu/testing/refs.py): _wc adds 4 I (entries are in (-2, 2), so small matrices are
# diagonally dominant), _spd gives a @ a.T + n I, _sym (a + a.T) / 2.
_F32 = {float32: {"rtol": 1e-4, "atol": 1e-5}}
SQUARE = (((3, 3),), ((2, 3, 3),), ((1, 1),))


def _eye_like(x):
    return eye(x.shape[-1], dtype=x.dtype, device=x.device)


def _wc(x):
    return x + 4.0 * _eye_like(x)


def _spd(x):
    return x @ x.mT + float(x.shape[-1]) * _eye_like(x)


def _sym(x):
    return (x + x.mT) * 0.5


# --------------------------------------------------------------------------- argument checks
def _matrix(x, op, square=True, what="input"):
    """x as a float Tensor of at least 2 dims (square ones when ``square``), or a clear error; under
    autocast float16 goes up to float32 (LAPACK has no float16; PyTorch's autocast does the same)."""
    x, = cast_float32(as_tensor(x, op))
    if x.dtype.kind != "f" or x.dtype.itemsize < 4:       # float16 and bfloat16 too: LAPACK has neither
        raise TypeError(f"{op}: expected a float32 or float64 tensor, got {x.dtype}; convert it with .to(ag.float64)")
    if x.ndim < 2:
        raise ValueError(f"{op}: expected {what} to be a matrix or a batch of matrices (at least 2 dimensions), "
                         f"got shape {x.shape}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ValueError(f"{op}: expected square matrices, got {what} of shape {x.shape} "
                         f"({x.shape[-2]} x {x.shape[-1]} in the last two dimensions)")
    return x


def _backend(ctx):
    return ctx.device.backend


def _check_each(backend, ok, op, what, batch):
    """Device-side check that every batch element passed (``ok``: bool array of shape ``batch``)."""
    n = 1
    for s in batch:
        n *= s
    if n == 0:
        return
    if not batch:
        backend.assert_all(ok, ValueError, f"{op}: {what}")
        return
    xp = backend.xp
    flat = ok.reshape(-1)
    backend.assert_all(flat.all(), ValueError,
                       f"{op}: {what} (batch element {{value}}, counting in C order over the batch of shape {batch})",
                       xp.argmin(flat.astype(xp.int8)))     # the first failing element


def _all_finite(xp, y, nd=2):
    """Per batch element: are all entries of the trailing ``nd``-dim blocks finite?"""
    return xp.isfinite(y).all(axis=tuple(range(-nd, 0)))


_SINGULAR = "the matrix is singular (or has inf/NaN entries); NumPy raises LinAlgError here"
_SINGULAR_GRAD = ("the gradient needs A^-1 and this A is singular (for det PyTorch returns the adjugate "
                  "here; this library raises rather than return inf/NaN)")
_NAN = "did not converge: the input has inf/NaN entries (NumPy raises LinAlgError here)"


def _lapack(ctx, name, op, a, **kwargs):
    """xp.linalg.<name>(a.data, **kwargs) with NumPy's LinAlgError (no convergence: inf/NaN input) as
    a ValueError naming the op; CuPy returns NaN there instead, which the caller's check on the
    (small) eigenvalue / singular value array reports at the next synchronization."""
    xp = ctx.xp
    try:
        return getattr(xp.linalg, name)(a.data, **kwargs)
    except xp.linalg.LinAlgError:
        raise ValueError(f"{op}: {_NAN}") from None


def _check_finite(ctx, values, op):
    backend = ctx.device.backend
    _check_each(backend, ctx.xp.isfinite(values).all(axis=-1), op, _NAN, values.shape[:-1])


# --------------------------------------------------------------------------- inv
class Inv(Function):
    batch_rule = batching.stacked_matrices

    @staticmethod
    def forward(ctx, a, op, what=_SINGULAR):
        backend = _backend(ctx)
        y = backend.linalg_or_nan("inv", a.data)
        _check_each(backend, _all_finite(ctx.xp, y), op, what, a.shape[:-2])
        y = ctx.wrap(y)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors          # d(A^-1) = -A^-1 dA A^-1
        yt = y.mT
        return -(yt @ grad @ yt), None, None


@register(namespace="linalg", tests=OpTest(SQUARE, ref="refs.linalg_inv", op=lambda x: inv(_wc(x)),
                                           name="linalg_inv", tol=_F32))
def inv(a):
    """Inverse of a square matrix (batched); ValueError naming the batch element when one is singular."""
    return Inv.apply(_matrix(a, "inv"), "inv")


# --------------------------------------------------------------------------- solve
def _solve_rule(cls, args, kwargs):
    """a and b have one batch shape (the wrapper broadcasts them): both expanded to every level."""
    a, b = args[:2]
    levels = batching._union((a, b))
    return batching._wrap(cls.apply(batching._expand(a, levels, a.shape), batching._expand(b, levels, b.shape),
                                    *args[2:], **kwargs), levels)


class Solve(Function):
    """X with A X = B, for A (..., n, n) and B (..., n, k) of one batch shape."""
    batch_rule = _solve_rule

    @staticmethod
    def forward(ctx, a, b, op, what=_SINGULAR):
        backend = _backend(ctx)
        x = backend.linalg_or_nan("solve", a.data, b.data)
        _check_each(backend, _all_finite(ctx.xp, x), op, what, a.shape[:-2])
        x = ctx.wrap(x)
        ctx.op, ctx.what = op, what
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    def backward(ctx, grad):
        a, x = ctx.saved_tensors          # dX = A^-1 (dB - dA X)
        gb = Solve.apply(a.mT, grad, ctx.op, ctx.what)
        ga = -(gb @ x.mT) if ctx.needs_input_grad[0] else None
        return ga, (gb if ctx.needs_input_grad[1] else None), None, None


def _solve(a, b, op, what=_SINGULAR):
    """solve on a checked square a (..., n, n) and b (..., n, k): batch dims broadcast."""
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], op=op)
    a = a if a.shape[:-2] == batch else broadcast_to(a, batch + a.shape[-2:])
    b = b if b.shape[:-2] == batch else broadcast_to(b, batch + b.shape[-2:])
    return Solve.apply(a, b, op, what)


@register(namespace="linalg", tests=OpTest(
    (((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3, 1)), ((3, 3), (2, 3, 4))), ref="refs.linalg_solve",
    op=lambda x, y: solve(_wc(x), y), name="linalg_solve", tol=_F32))
def solve(a, b):
    """X with a @ X = b, batch dims broadcast.

    b has shape (..., n, k), or (n,) for one right-hand side vector (NumPy 2's rule: b is a vector only
    when 1-D)."""
    a = _matrix(a, "solve", what="a")
    b, = cast_float32(as_tensor(b, "solve", like=a))
    if b.dtype != a.dtype:
        raise TypeError(f"solve: expected a and b of one dtype, got {a.dtype} and {b.dtype}")
    n = a.shape[-1]
    if b.ndim == 0 or b.shape[-1 if b.ndim == 1 else -2] != n:
        raise ValueError(f"solve: b of shape {b.shape} does not match a of shape {a.shape}: expected b of shape "
                         f"({n},) or (..., {n}, k)")
    if b.ndim == 1:
        return _solve(a, b.reshape(n, 1), "solve").reshape(a.shape[:-2] + (n,))
    try:
        return _solve(a, b, "solve")
    except ValueError as e:
        if "broadcast" not in str(e):
            raise
        raise ValueError(f"solve: the batch dimensions of a {a.shape} and b {b.shape} cannot be broadcast "
                         "together") from None


# --------------------------------------------------------------------------- det, slogdet
class Det(Function):
    batch_rule = batching.stacked_matrices

    @staticmethod
    def forward(ctx, a):
        d = ctx.wrap(ctx.xp.asarray(ctx.xp.linalg.det(a.data)))
        ctx.save_for_backward(a, d)
        return d

    @staticmethod
    def backward(ctx, grad):
        a, d = ctx.saved_tensors          # d det(A) = det(A) tr(A^-1 dA): Jacobi's formula
        g = (grad * d).reshape(d.shape + (1, 1))
        return g * Inv.apply(a, "det backward", _SINGULAR_GRAD).mT


@register(namespace="linalg", tests=(
    OpTest(SQUARE, ref="refs.linalg_det", op=lambda x: det(_wc(x)), name="linalg_det", tol=_F32),
    OpTest((((3, 3),), ((2, 2, 2),)), ref="np.linalg.det", name="linalg_det_raw", tol=_F32),
))
def det(a):
    """Determinant (batched).

    Its gradient det(A) A^-T needs A invertible: at an exactly singular A it raises (PyTorch returns the
    adjugate there)."""
    return Det.apply(_matrix(a, "det"))


class LogAbsDet(Function):
    batch_rule = batching.stacked_matrices

    @staticmethod
    def forward(ctx, a):
        sign, logabs = ctx.xp.linalg.slogdet(a.data)
        ctx.save_for_backward(a)
        return ctx.wrap(ctx.xp.asarray(sign)), ctx.wrap(ctx.xp.asarray(logabs))

    @staticmethod
    def backward(ctx, gsign, glog):
        a, = ctx.saved_tensors            # d log|det A| = tr(A^-1 dA); the sign is piecewise constant
        return glog.reshape(glog.shape + (1, 1)) * Inv.apply(a, "slogdet backward", _SINGULAR_GRAD).mT


def _signed(sign, logabs):
    """slogdet's sign (a constant) checked through sign * logabsdet, which has a gradient."""
    return logabs, sign * logabs


@register(namespace="linalg", tests=OpTest(
    SQUARE, ref="refs.linalg_slogdet", op=lambda x: _signed(*slogdet(x - 4.0 * _eye_like(x))),
    name="linalg_slogdet", tol=_F32))
def slogdet(a):
    """(sign, logabsdet) with det(a) = sign * exp(logabsdet), batched; sign is a constant to the graph.

    A singular matrix gives sign 0 and logabsdet -inf, as in NumPy."""
    sign, logabs = LogAbsDet.apply(_matrix(a, "slogdet"))
    return sign.detach(), logabs


# --------------------------------------------------------------------------- cholesky
def _tril(x, k=0):
    """Lower triangle (entries on and below diagonal k) as a product with a constant mask."""
    xp = get_backend(x.device).xp
    m, n = x.shape[-2:]
    mask = get_backend(x.device).call(xp.tri, m, n, k, dtype=x.dtype)
    return x * Tensor._make(mask, x.device)


class Cholesky(Function):
    batch_rule = batching.stacked_matrices

    @staticmethod
    def forward(ctx, a):
        backend, xp = _backend(ctx), ctx.xp
        low = backend.linalg_or_nan("cholesky", a.data)
        # LAPACK's potrf stops at the first non-positive pivot and leaves it on the diagonal; CuPy (which
        # does not raise) and linalg_or_nan's NaN both fail this test
        diag = xp.diagonal(low, axis1=-2, axis2=-1)
        ok = _all_finite(xp, low) & (diag > 0).all(axis=-1)
        _check_each(backend, ok, "cholesky", "the matrix is not positive definite (NumPy raises LinAlgError "
                    "here); pass a symmetric positive-definite matrix", a.shape[:-2])
        low = ctx.wrap(low)
        ctx.save_for_backward(low)
        return low

    @staticmethod
    def backward(ctx, grad):
        # PyTorch's cholesky_backward (Murray 2016): gA = L^-T Phi L^-1 with Phi the symmetric matrix
        # whose lower triangle is tril(L^T gL) with its diagonal halved; symmetric, like dA
        low, = ctx.saved_tensors
        p = _tril(low.mT @ grad)
        phi = 0.5 * (p + _tril(p, -1).mT)
        g = Solve.apply(low.mT, phi, "cholesky backward")
        return Solve.apply(low.mT, g.mT, "cholesky backward").mT


@register(namespace="linalg", tests=OpTest(SQUARE, ref="refs.linalg_cholesky", op=lambda x: cholesky(_spd(x)),
                                           name="linalg_cholesky", tol=_F32))
def cholesky(a):
    """Lower-triangular L with a = L @ L.mT (batched), for symmetric positive-definite a.

    Only a's lower triangle is read (NumPy's and PyTorch's convention), and the gradient is symmetric."""
    return Cholesky.apply(_matrix(a, "cholesky"))


# --------------------------------------------------------------------------- lstsq, pinv
@register(namespace="linalg", tests=OpTest(
    (((5, 3), (5, 2)), ((5, 3), (5,)), ((3, 5), (3,)), ((2, 4, 3), (2, 4, 2))), ref="refs.linalg_lstsq",
    name="linalg_lstsq", tol=_F32))
def lstsq(a, b, rcond=None):
    """Least-squares solution x of a @ x ~= b (batched), of least norm for any rank; the solution only.

    a is (..., m, n), b (..., m, k) or (m,); as NumPy's SVD-based lstsq: the minimiser of |a x - b| of
    least norm (singular values at or below rcond * the largest count as zero; None: eps * max(m, n),
    NumPy's default). It is pinv(a, rcond) @ b, so its gradient is pinv's: exact where the rank does not
    change nearby."""
    a = _matrix(a, "lstsq", square=False, what="a")
    b, = cast_float32(as_tensor(b, "lstsq", like=a))
    m, n = a.shape[-2:]
    if b.ndim == 0 or b.shape[-1 if b.ndim == 1 else -2] != m:
        raise ValueError(f"lstsq: b of shape {b.shape} does not match a of shape {a.shape}: expected b of shape "
                         f"({m},) or (..., {m}, k)")
    if rcond is None:
        rcond = float(get_backend(a.device).xp.finfo(a.dtype).eps) * max(m, n)
    return pinv(a, rcond) @ b


class Pinv(Function):
    batch_rule = batching.stacked_matrices

    @staticmethod
    def forward(ctx, a, rcond):
        xp = ctx.xp
        u, s, vh = _lapack(ctx, "svd", "pinv", a, full_matrices=False)
        _check_finite(ctx, s, "pinv")
        cutoff = rcond * s.max(axis=-1, keepdims=True) if s.shape[-1] else s
        big = s > cutoff
        sinv = xp.where(big, 1 / xp.where(big, s, 1), 0).astype(a.dtype)
        y = ctx.wrap(xp.matmul(vh.swapaxes(-1, -2) * sinv[..., None, :], u.swapaxes(-1, -2)))
        ctx.save_for_backward(a, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        # Golub & Pereyra (1973), as PyTorch's pinv_backward: exact where the rank does not change
        a, p = ctx.saved_tensors
        m, n = a.shape[-2:]
        ph, gh = p.mT, grad.mT
        if m <= n:
            k = gh @ p
            kph = k @ ph
            return -(p @ k).mT + kph - (a @ p) @ kph + (ph @ p) @ (gh - k @ a), None
        k = p @ gh
        phk = ph @ k
        return -(k @ p).mT + (gh - a @ k) @ p @ ph + phk - phk @ p @ a, None


@register(namespace="linalg", tests=OpTest((((4, 3),), ((3, 4),), ((2, 4, 2),)), ref="np.linalg.pinv",
                                           name="linalg_pinv", tol=_F32))
def pinv(a, rcond=1e-15):
    """Moore-Penrose pseudo-inverse (batched) via SVD.

    Singular values at or below rcond * the largest count as zero (NumPy's default rcond). Its gradient
    assumes the rank does not change nearby."""
    a = _matrix(a, "pinv", square=False)
    if not isinstance(rcond, (int, float)) or isinstance(rcond, bool) or not rcond >= 0:
        raise ValueError(f"pinv: expected rcond to be a non-negative number, got {rcond!r}")
    return Pinv.apply(a, float(rcond))
