"""ag.fft: NumPy's discrete Fourier transforms on Tensors, differentiable (autograd_gpu/ops/fft.py).

Every name is an op registered with namespace="fft"; this module exports what the registry lists."""
import typing as _typing

from .ops import fft as _fft  # noqa: F401  (importing it registers its ops)
from .ops import registry as _registry

__all__ = _registry.export("fft", globals())

if _typing.TYPE_CHECKING:
    # The names are made at import by export() from the registry, which a type checker cannot run:
    # to it each is Any. Only the checker sees this; at run time a missing name is an AttributeError.
    from typing import Any

    def __getattr__(name: str) -> Any: ...
