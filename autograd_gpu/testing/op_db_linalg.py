"""OP_DB entries for linear algebra: matmul (vectors, batches, broadcasting), dot, outer, tensordot, einsum."""
import operator

import numpy as np

import autograd_gpu as ag
from .op_db import OpInfo

# einsum may sum in another order than NumPy's reference (optimize, letter renaming)
_F32 = {ag.float32: {"rtol": 1e-4, "atol": 1e-5}}


def _einsum(subscripts, *shapes):
    return OpInfo(f"einsum_{subscripts.replace(',', '_').replace('->', '_to_').replace('...', 'E')}",
                  lambda *xs: ag.einsum(subscripts, *xs), lambda *xs: np.einsum(subscripts, *xs),
                  (shapes,), tol=_F32)


OPS = [
    OpInfo("matmul", ag.matmul, np.matmul, (((2, 3), (3, 4)),)),
    OpInfo("matmul_operator", operator.matmul, np.matmul, (((3, 3), (3, 2)),)),
    OpInfo("matmul_1d_1d", ag.matmul, np.matmul, (((3,), (3,)),)),
    OpInfo("matmul_1d_2d", ag.matmul, np.matmul, (((3,), (3, 4)),)),
    OpInfo("matmul_2d_1d", ag.matmul, np.matmul, (((2, 3), (3,)),)),
    OpInfo("matmul_batched", ag.matmul, np.matmul, (((2, 3, 4), (2, 4, 2)), ((2, 3, 4), (4,)))),
    OpInfo("matmul_broadcast", ag.matmul, np.matmul, (((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 2)))),
    OpInfo("matmul_empty_inner", ag.matmul, np.matmul, (((2, 0), (0, 3)),)),
    OpInfo("dot", ag.dot, np.dot, (((4,), (4,)), ((2, 3), (3, 2)), ((2, 3, 4), (4,)))),
    OpInfo("outer", ag.outer, np.outer, (((3,), (4,)), ((0,), (2,)))),
    OpInfo("tensordot", ag.tensordot, np.tensordot, (((2, 3, 4), (3, 4, 2)),)),
    OpInfo("tensordot_int", lambda a, b: ag.tensordot(a, b, 1), lambda a, b: np.tensordot(a, b, 1),
           (((2, 3), (3, 4)),)),
    OpInfo("tensordot_pair", lambda a, b: ag.tensordot(a, b, ([0, 2], [2, 0])),
           lambda a, b: np.tensordot(a, b, ([0, 2], [2, 0])), (((2, 3, 4), (4, 5, 2)),)),
    _einsum("ij,jk->ik", (2, 3), (3, 4)),
    _einsum("bij,bjk->bik", (2, 2, 3), (2, 3, 4)),
    _einsum("ii->i", (3, 3)),
    _einsum("ii", (3, 3)),
    _einsum("ij->", (2, 3)),
    _einsum("i,i", (4,), (4,)),
    _einsum("ij,j->i", (2, 3), (3,)),
    _einsum("...ij,...jk->...ik", (2, 1, 2, 3), (4, 3, 2)),
    _einsum("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
    _einsum("ij,jk", (2, 3), (3, 4)),
    _einsum("ij,ij->ij", (1, 3), (2, 3)),
    _einsum("iij,i->j", (2, 2, 3), (2,)),
]
