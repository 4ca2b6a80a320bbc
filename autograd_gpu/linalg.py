"""ag.linalg: NumPy's linear-algebra names, batched over leading dims and differentiable to any order.

Every name is an op registered with namespace="linalg" (autograd_gpu/ops/solvers.py, decompositions.py,
norms.py); this module exports what the registry lists."""
from .ops import solvers as _solvers, decompositions as _decompositions, norms as _norms  # noqa: F401  (they register)
from .ops import registry as _registry

__all__ = _registry.export("linalg", globals())
