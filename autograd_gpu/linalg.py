"""ag.linalg: NumPy's linear-algebra names, batched over leading dims and differentiable to any order."""
from .ops.solvers import inv, solve, det, slogdet, cholesky, lstsq, pinv
from .ops.decompositions import qr, eigh, svd, svdvals
from .ops.norms import (vector_norm, matrix_norm, norm, trace, diagonal, cross, matrix_power,
                        multi_dot)

__all__ = ["inv", "solve", "det", "slogdet", "cholesky", "qr", "eigh", "svd", "svdvals", "norm",
           "vector_norm", "matrix_norm", "pinv", "lstsq", "matrix_power", "multi_dot", "cross",
           "diagonal", "trace"]
