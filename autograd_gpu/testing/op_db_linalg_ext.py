"""OP_DB entries for ag.linalg: solvers, decompositions, norms and matrix utilities.

Random inputs are made well-conditioned inside the op (and the same way in the NumPy reference):
``_wc`` adds 4 I (entries are in (-2, 2), so small matrices are diagonally dominant), ``_spd`` gives
a @ a.T + n I, ``_sym`` (a + a.T) / 2. Decompositions are compared through gauge-invariant outputs
(eigenvalues, |eigenvectors|^2, QR with R's diagonal made positive), so finite differences and
another device's LAPACK agree with them.
"""
import math

import numpy as np

import autograd_gpu as ag
from .op_db import OpInfo

L = ag.linalg
_F32 = {ag.float32: {"rtol": 1e-4, "atol": 1e-5}}


def _eye(x):
    n = x.shape[-1]
    return ag.eye(n, dtype=x.dtype, device=x.device) if isinstance(x, ag.Tensor) else np.eye(n, dtype=x.dtype)


def _t(x):
    return x.mT if isinstance(x, ag.Tensor) else np.swapaxes(x, -1, -2)


def _wc(x):
    return x + 4.0 * _eye(x)


def _spd(x):
    return x @ _t(x) + float(x.shape[-1]) * _eye(x)


def _sym(x):
    return (x + _t(x)) * 0.5


def _qr_pos(q, r, sign, diag):
    """QR with R's diagonal made positive: unique, so LAPACK's sign choices drop out."""
    d = sign(diag(r))
    return q * d[..., None, :], r * d[..., :, None]


def _qr_ag(x):
    return _qr_pos(*L.qr(x), ag.sign, L.diagonal)


def _qr_np(a):
    return _qr_pos(*np.linalg.qr(a), np.sign, np.linalg.diagonal)


def _eigh_ag(x):
    w, v = L.eigh(_sym(x))
    return w, v * v


def _eigh_np(a):
    w, v = np.linalg.eigh(_sym(a))
    return w, v * v


def _svd_ag(x):
    u, s, vh = L.svd(x)
    return u * u, s, vh * vh


def _svd_np(a):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u * u, s, vh * vh


def _lstsq_np(a, b):
    """NumPy's lstsq is 2-D only: loop over the batch."""
    if a.ndim == 2:
        return np.linalg.lstsq(a, b)[0]
    return np.stack([np.linalg.lstsq(ai, bi)[0] for ai, bi in zip(a, b)])


def _signed(sign, logabs):
    """slogdet's sign (a constant) checked through sign * logabsdet, which has a gradient."""
    return logabs, sign * logabs


SQUARE = (((3, 3),), ((2, 3, 3),), ((1, 1),))
INF = math.inf

OPS = [
    OpInfo("linalg_inv", lambda x: L.inv(_wc(x)), lambda a: np.linalg.inv(_wc(a)), SQUARE, tol=_F32),
    OpInfo("linalg_solve", lambda x, y: L.solve(_wc(x), y), lambda a, b: np.linalg.solve(_wc(a), b),
           (((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3, 1)), ((3, 3), (2, 3, 4))), tol=_F32),
    OpInfo("linalg_det", lambda x: L.det(_wc(x)), lambda a: np.linalg.det(_wc(a)), SQUARE, tol=_F32),
    OpInfo("linalg_det_raw", L.det, np.linalg.det, (((3, 3),), ((2, 2, 2),)), tol=_F32),
    OpInfo("linalg_slogdet", lambda x: _signed(*L.slogdet(x - 4.0 * _eye(x))),
           lambda a: _signed(*np.linalg.slogdet(a - 4.0 * _eye(a))), SQUARE, tol=_F32),
    OpInfo("linalg_cholesky", lambda x: L.cholesky(_spd(x)), lambda a: np.linalg.cholesky(_spd(a)),
           SQUARE, tol=_F32),
    OpInfo("linalg_qr", _qr_ag, _qr_np, (((4, 3),), ((3, 3),), ((2, 4, 3),), ((3, 5),)), tol=_F32),
    OpInfo("linalg_eigh", _eigh_ag, _eigh_np, SQUARE, tol=_F32),
    OpInfo("linalg_eigh_eigenvalues", lambda x: L.eigh(_sym(x))[0], lambda a: np.linalg.eigvalsh(_sym(a)),
           SQUARE, tol=_F32),
    OpInfo("linalg_svd", _svd_ag, _svd_np, (((4, 3),), ((3, 4),), ((2, 3, 3),)), tol=_F32),
    OpInfo("linalg_svdvals", L.svdvals, np.linalg.svdvals, (((4, 3),), ((2, 3, 5),)), tol=_F32),
    OpInfo("linalg_pinv", L.pinv, np.linalg.pinv, (((4, 3),), ((3, 4),), ((2, 4, 2),)), tol=_F32),
    OpInfo("linalg_lstsq", L.lstsq, _lstsq_np,
           (((5, 3), (5, 2)), ((5, 3), (5,)), ((3, 5), (3,)), ((2, 4, 3), (2, 4, 2))), tol=_F32),
    OpInfo("linalg_matrix_power", lambda x: L.matrix_power(x, 3), lambda a: np.linalg.matrix_power(a, 3),
           (((3, 3),), ((2, 2, 2),)), tol=_F32),
    OpInfo("linalg_matrix_power_neg", lambda x: L.matrix_power(_wc(x), -2),
           lambda a: np.linalg.matrix_power(_wc(a), -2), (((3, 3),),), tol=_F32),
    OpInfo("linalg_matrix_power_0", lambda x: L.matrix_power(x, 0), lambda a: np.linalg.matrix_power(a, 0),
           (((2, 3, 3),),), grad=False, gradgrad=False),     # the identity: no path to the input
    OpInfo("linalg_multi_dot", lambda *xs: L.multi_dot(xs), lambda *xs: np.linalg.multi_dot(xs),
           (((2, 5), (5, 3), (3, 4)), ((4,), (4, 2), (2, 3), (3,)), ((3,), (3, 2))), tol=_F32),
    OpInfo("linalg_cross", L.cross, np.linalg.cross, (((4, 3), (3,)), ((3,), (3,)), ((2, 1, 3), (5, 3))),
           tol=_F32),
    OpInfo("linalg_cross_axis0", lambda x, y: L.cross(x, y, axis=0), lambda a, b: np.linalg.cross(a, b, axis=0),
           (((3, 2), (3, 2)),), tol=_F32),
    OpInfo("linalg_diagonal", L.diagonal, np.linalg.diagonal, (((3, 4),), ((2, 3, 3),), ((4, 2),))),
    OpInfo("linalg_diagonal_offset", lambda x: L.diagonal(x, offset=1), lambda a: np.linalg.diagonal(a, offset=1),
           (((3, 4),), ((2, 3, 3),))),
    OpInfo("linalg_diagonal_neg_offset", lambda x: L.diagonal(x, offset=-1),
           lambda a: np.linalg.diagonal(a, offset=-1), (((3, 4),),)),
    OpInfo("linalg_trace", L.trace, np.linalg.trace, (((3, 4),), ((2, 3, 3),)), tol=_F32),
    OpInfo("linalg_trace_offset", lambda x: L.trace(x, offset=-1), lambda a: np.linalg.trace(a, offset=-1),
           (((3, 3),),)),
    OpInfo("linalg_vector_norm", L.vector_norm, np.linalg.vector_norm, (((3, 4),), ((5,),)), tol=_F32),
    OpInfo("linalg_vector_norm_axis", lambda x: L.vector_norm(x, axis=1, keepdims=True),
           lambda a: np.linalg.vector_norm(a, axis=1, keepdims=True), (((3, 4),),), tol=_F32),
    OpInfo("linalg_vector_norm_1", lambda x: L.vector_norm(x, ord=1, axis=-1),
           lambda a: np.linalg.vector_norm(a, ord=1, axis=-1), (((3, 4),),), avoid=(0.0,), tol=_F32),
    OpInfo("linalg_vector_norm_3", lambda x: L.vector_norm(x, ord=3, axis=(0, 1)),
           lambda a: np.linalg.vector_norm(a, ord=3, axis=(0, 1)), (((3, 4),),), avoid=(0.0,), tol=_F32),
    OpInfo("linalg_vector_norm_inf", lambda x: L.vector_norm(x, ord=INF),
           lambda a: np.linalg.vector_norm(a, ord=INF), (((3, 4),),), avoid=(0.0,)),
]

for _ord in ("fro", "nuc", 2, -2, 1, -1, INF, -INF):
    OPS.append(OpInfo(f"linalg_matrix_norm_{_ord}", lambda x, o=_ord: L.matrix_norm(x, ord=o),
                      lambda a, o=_ord: np.linalg.matrix_norm(a, ord=o), (((3, 4),), ((2, 3, 3),)),
                      avoid=(0.0,), tol=_F32))

OPS += [
    OpInfo("linalg_matrix_norm_axis_keepdims", lambda x: L.matrix_norm(x, ord=2, axis=(0, 2), keepdims=True),
           lambda a: np.linalg.norm(a, ord=2, axis=(0, 2), keepdims=True), (((3, 2, 4),),), tol=_F32),
    OpInfo("linalg_norm", L.norm, np.linalg.norm, (((3, 4),), ((5,),), ((2, 3, 4),)), tol=_F32),
    OpInfo("linalg_norm_ord_vector", lambda x: L.norm(x, ord=1), lambda a: np.linalg.norm(a, ord=1),
           (((5,),),), avoid=(0.0,), tol=_F32),
    OpInfo("linalg_norm_nuc", lambda x: L.norm(x, ord="nuc"), lambda a: np.linalg.norm(a, ord="nuc"),
           (((3, 4),),), tol=_F32),
    OpInfo("linalg_norm_axis", lambda x: L.norm(x, axis=1), lambda a: np.linalg.norm(a, axis=1),
           (((3, 4),),), tol=_F32),
    OpInfo("linalg_norm_axes_inf", lambda x: L.norm(x, ord=INF, axis=(2, 0)),
           lambda a: np.linalg.norm(a, ord=INF, axis=(2, 0)), (((3, 2, 4),),), avoid=(0.0,), tol=_F32),
]
