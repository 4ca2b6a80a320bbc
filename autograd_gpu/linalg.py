"""ag.linalg: NumPy's linear-algebra names, batched over leading dims and differentiable to any order.

Every name is an op registered with namespace="linalg" (autograd_gpu/ops/solvers.py, decompositions.py,
norms.py); this module exports what the registry lists."""
from .ops import solvers, decompositions, norms  # noqa: F401  (importing them registers their ops)
from .ops import registry as _registry

globals().update(_registry.names("linalg"))
__all__ = sorted(_registry.names("linalg"))
