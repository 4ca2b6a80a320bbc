"""ag.linalg: NumPy's linear-algebra names, batched over leading dims and differentiable to any order.

Every name is an op registered with namespace="linalg" (autograd_gpu/ops/solvers.py, decompositions.py,
norms.py); this module exports what the registry lists."""
import typing as _typing

from .ops import solvers as _solvers, decompositions as _decompositions, norms as _norms  # noqa: F401  (they register)
from .ops import registry as _registry

__all__ = _registry.export("linalg", globals())

if _typing.TYPE_CHECKING:
    # The names are made at import by export() from the registry, which a type checker cannot run:
    # to it each is Any. Only the checker sees this; at run time a missing name is an AttributeError.
    from typing import Any

    def __getattr__(name: str) -> Any: ...
