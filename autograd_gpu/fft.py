"""ag.fft: NumPy's discrete Fourier transforms on Tensors, differentiable (autograd_gpu/ops/fft.py).

Every name is an op registered with namespace="fft"; this module exports what the registry lists."""
from .ops import fft as _fft  # noqa: F401  (importing it registers its ops)
from .ops import registry as _registry

__all__ = _registry.export("fft", globals())
