"""OP_DB entries for complex tensors (elementwise maths, reductions, the complex parts); complex matmul
and every ag.fft function have theirs with their registrations (autograd_gpu/ops/linalg.py, fft.py).
Entries with complex64/complex128 dtypes get complex inputs (kind "real" marks a real input of the
same precision); gradients are checked in complex128 with PyTorch's convention (autograd.gradcheck
perturbs real and imaginary parts separately)."""
import numpy as np

import autograd_gpu as ag
from .op_db import OpInfo

C = (ag.complex64, ag.complex128)
UNARY = (((3, 4),), ((),), ((0, 3),))
BINARY = (((2, 3), (2, 3)), ((2, 3), (3,)), ((), (4,)))
_TOL = {ag.complex64: {"rtol": 1e-4, "atol": 1e-5}}     # complex64 transcendental functions and sums


def _c(name, op, ref, samples=UNARY, **kw):
    kw.setdefault("tol", _TOL)
    return OpInfo(name, op, ref, samples, dtypes=C, **kw)


def _rdt(a):
    return np.float64 if a.dtype == np.complex128 else np.float32


COMPLEX = [
    _c("complex_sum", lambda x: x.sum(1), lambda a: a.sum(1), (((3, 4),),)),
    _c("complex_mean", ag.mean, np.mean),
    _c("complex_prod", lambda x: x.prod(1), lambda a: a.prod(1), (((3, 4),),)),
    _c("complex_var", lambda x: x.var(1), lambda a: a.var(1), (((3, 4),),)),
    _c("complex_norm", ag.norm, lambda a: np.linalg.norm(a.ravel()).astype(_rdt(a)), (((3, 4),),), avoid=(0.0,)),
    _c("complex_getitem", lambda x: x[1:, ::2], lambda a: a[1:, ::2], (((3, 4),),)),
    _c("complex_reshape_T", lambda x: x.reshape(4, 3).T, lambda a: a.reshape(4, 3).T, (((3, 4),),)),
]


OPS = COMPLEX
