"""Matrix decompositions: qr, eigh, svd primitives with the published backward formulas; svdvals.

Repeated eigenvalues / singular values (PyTorch's behaviour, which these formulas follow): the
eigenvectors (singular vectors) of a repeated eigenvalue are not unique, and the gradient of a loss
that depends on them has 1 / (lambda_i - lambda_j) terms, so it comes out inf or NaN rather than a
silently wrong number. A loss through the eigenvalues (singular values) alone has a finite,
well-defined gradient there: its backward never forms those terms.
"""
from ..autograd.function import Function
from ..autograd.grad_mode import is_grad_enabled
from ..creation import eye
from .shape import cat
from .elementwise import sign
from .linalg import einsum
from .solvers import _matrix, _tril, _lapack, _check_finite, Solve, SQUARE, _F32, _sym
from . import batching
from .registry import register, OpTest as _OpTest, NO_BF16_LAPACK


def OpTest(*args, **kw):
    """An op-table entry of a LAPACK-backed op: it refuses bfloat16."""
    return _OpTest(*args, no_bfloat16=NO_BF16_LAPACK, **kw)


_RANK = "the gradient of QR needs a of full rank (R's diagonal non-zero), and this a is rank-deficient"

__all__ = ["qr", "eigh", "svd", "svdvals"]


def _eye(x, n):
    return eye(n, dtype=x.dtype, device=x.device)


def _diag_embed(d):
    """(..., k) -> (..., k, k) with d on the diagonal."""
    return d.unsqueeze(-1) * _eye(d, d.shape[-1])


def _gap(e):
    """E_ij = e_j - e_i with 1 on the diagonal: the denominators of the eigenvector terms."""
    return e.unsqueeze(-2) - e.unsqueeze(-1) + _eye(e, e.shape[-1])


# --------------------------------------------------------------------------- qr
def _qr_grad(q, r, gq, gr):
    """A = QR with m >= n (Liao, Liu, Wang & Xiang 2019, eq. 4): gA = (gQ + Q copyltu(M)) R^-T with
    M = R gR^T - gQ^T Q and copyltu(M) the symmetric matrix with M's lower triangle."""
    mm = r @ gr.mT - gq.mT @ q
    sym = _tril(mm) + _tril(mm, -1).mT
    return Solve.apply(r, (gq + q @ sym).mT, "qr backward", _RANK).mT


class Qr(Function):
    batch_rule = batching.stacked_matrices

    @staticmethod
    def forward(ctx, a):
        q, r = ctx.xp.linalg.qr(a.data, mode="reduced")
        q, r = ctx.wrap(q), ctx.wrap(r)
        ctx.save_for_backward(a, q, r)
        return q, r

    @staticmethod
    def backward(ctx, gq, gr):
        a, q, r = ctx.saved_tensors
        m, n = a.shape[-2:]
        if m >= n:
            return _qr_grad(q, r, gq, gr)
        # wide A = [X | Y] = Q [U | V]: X = QU is a square QR and V = Q^T Y adds Y gV^T to gQ
        y, u, gu, gv = a[..., m:], r[..., :m], gr[..., :m], gr[..., m:]
        return cat([_qr_grad(q, u, gq + y @ gv.mT, gu), q @ gv], -1)


def _qr_pos(x):
    """QR with R's diagonal made positive: unique, so LAPACK's sign choices drop out (op-table entry)."""
    q, r = qr(x)
    d = sign(einsum("...ii->...i", r[..., :r.shape[-2]]))
    return q * d[..., None, :], r * d[..., :, None]


@register(namespace="linalg", tests=OpTest((((4, 3),), ((3, 3),), ((2, 4, 3),), ((3, 5),)), ref="refs.linalg_qr",
                                           op=_qr_pos, name="linalg_qr", tol=_F32))
def qr(a, mode="reduced"):
    """(Q, R) with a = Q @ R: Q with orthonormal columns, R upper triangular (batched).

    Q is (..., m, k) and R (..., k, n), k = min(m, n) (mode="reduced", the only mode). The gradient needs R's first k columns invertible
    (a of full rank). Signs follow LAPACK (R's diagonal may be negative)."""
    if mode != "reduced":
        raise ValueError(f"qr: only mode='reduced' is supported, got mode={mode!r}")
    return Qr.apply(_matrix(a, "qr", square=False))


# --------------------------------------------------------------------------- eigh
class Eigh(Function):
    batch_rule = batching.stacked_matrices
    materialize_grads = False     # no eigenvector gradient -> the formula without 1 / (w_j - w_i)

    @staticmethod
    def forward(ctx, a):
        w, v = _lapack(ctx, "eigh", "eigh", a, UPLO="L")
        _check_finite(ctx, w, "eigh")
        w, v = ctx.wrap(w), ctx.wrap(v)
        ctx.save_for_backward(w, v)
        return w, v

    @staticmethod
    def backward(ctx, gw, gv):
        # PyTorch's linalg_eig_backward, hermitian case (Giles 2008):
        # gA = V (diag(gw) + skew(V^T gV) / E) V^T with E_ij = w_j - w_i
        w, v = ctx.saved_tensors
        if gv is None:
            return (v * gw.unsqueeze(-2)) @ v.mT
        vgv = v.mT @ gv
        inner = 0.5 * (vgv - vgv.mT) / _gap(w)
        if gw is not None:
            inner = inner + _diag_embed(gw)
        return v @ inner @ v.mT


def _eigh_squared(x):
    """Eigenvalues and squared eigenvectors (gauge-invariant) of the symmetric part (op-table entry)."""
    w, v = eigh(_sym(x))
    return w, v * v


@register(namespace="linalg", tests=(
    OpTest(SQUARE, ref="refs.linalg_eigh", op=_eigh_squared, name="linalg_eigh", tol=_F32),
    OpTest(SQUARE, ref="refs.linalg_eigvalsh", op=lambda x: eigh(_sym(x))[0], name="linalg_eigh_eigenvalues",
           tol=_F32),
))
def eigh(a, UPLO="L"):
    """(eigenvalues ascending, eigenvectors as columns) of a symmetric matrix (batched).

    It reads a's lower triangle. The gradient is symmetric. Repeated eigenvalues: a loss through the eigenvalues
    alone has a finite gradient; one through the eigenvectors gets inf/NaN, as in PyTorch (the
    eigenvectors are not unique there), never a silently wrong number."""
    if UPLO != "L":
        raise ValueError(f"eigh: only UPLO='L' is supported, got UPLO={UPLO!r}; pass a.mT for the upper triangle")
    return Eigh.apply(_matrix(a, "eigh"))


# --------------------------------------------------------------------------- svd
class Svd(Function):
    batch_rule = batching.stacked_matrices
    materialize_grads = False     # singular values alone -> U diag(gS) V^T, finite when they repeat

    @staticmethod
    def forward(ctx, a):
        u, s, vh = _lapack(ctx, "svd", "svd", a, full_matrices=False)
        _check_finite(ctx, s, "svd")
        u, s, vh = ctx.wrap(u), ctx.wrap(s), ctx.wrap(vh)
        ctx.save_for_backward(u, s, vh)
        return u, s, vh

    @staticmethod
    def backward(ctx, gu, gs, gvh):
        # PyTorch's svd_backward (real case): gA = U [(skew(U^T gU) S + S skew(V^T gV)) / E + diag(gS)] V^T
        # + (I - UU^T) gU S^-1 V^T + U S^-1 gV^T (I - VV^T), E_jk = s_k^2 - s_j^2
        u, s, vh = ctx.saved_tensors
        m, n, k = u.shape[-2], vh.shape[-1], s.shape[-1]
        if gu is None and gvh is None:
            return (u * gs.unsqueeze(-2)) @ vh
        e = _gap(s * s)
        inner = 0
        if gu is not None:
            ugu = u.mT @ gu
            inner = (ugu - ugu.mT) * s.unsqueeze(-2)
        if gvh is not None:
            vgv = vh @ gvh.mT
            inner = inner + s.unsqueeze(-1) * (vgv - vgv.mT)
        inner = inner / e
        if gs is not None:
            inner = inner + _diag_embed(gs)
        if m > k and gu is not None:
            gus = gu / s.unsqueeze(-2)
            return (u @ inner + gus - u @ (u.mT @ gus)) @ vh
        if n > k and gvh is not None:
            sgv = gvh / s.unsqueeze(-1)
            return u @ (inner @ vh + sgv - (sgv @ vh.mT) @ vh)
        return u @ inner @ vh


def _svd_squared(x):
    """U and Vh squared (gauge-invariant), S (op-table entry)."""
    u, s, vh = svd(x)
    return u * u, s, vh * vh


@register(namespace="linalg", tests=OpTest((((4, 3),), ((3, 4),), ((2, 3, 3),)), ref="refs.linalg_svd",
                                           op=_svd_squared, name="linalg_svd", tol=_F32))
def svd(a, full_matrices=False):
    """(U, S, Vh) with a = U @ diag(S) @ Vh, S descending (batched).

    U is (..., m, k), Vh (..., k, n), k = min(m, n) (full_matrices=False, the only form here). Repeated (or zero, for non-square a) singular values: a
    loss through S alone has a finite gradient; one through U or Vh gets inf/NaN, as in PyTorch."""
    if full_matrices:
        raise ValueError("svd: only full_matrices=False is supported (the extra columns of U or rows of Vh have "
                         "no unique gradient); got full_matrices=True")
    return Svd.apply(_matrix(a, "svd", square=False))


@register(namespace="linalg", tests=OpTest((((4, 3),), ((2, 3, 5),)), ref="np.linalg.svdvals",
                                           name="linalg_svdvals", tol=_F32))
def svdvals(a):
    """Singular values, descending (batched).

    The gradient U diag(gS) V^T is finite even where they repeat. Without a gradient to record, U and V are not computed."""
    a = _matrix(a, "svdvals", square=False)
    if a.requires_grad and is_grad_enabled():
        return Svd.apply(a)[1]
    return _Svdvals.apply(a)


class _Svdvals(Function):
    """S alone, for a call that records no gradient (svdvals routes gradients through Svd)."""
    batch_rule = batching.stacked_matrices

    @staticmethod
    def forward(ctx, a):
        s = _lapack(ctx, "svd", "svdvals", a, compute_uv=False)
        _check_finite(ctx, s, "svdvals")
        return ctx.wrap(s)
