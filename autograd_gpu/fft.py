"""ag.fft: NumPy's discrete Fourier transforms on Tensors, differentiable (autograd_gpu/ops/fft.py)."""
from .ops.fft import (fft, ifft, rfft, irfft, fft2, ifft2, rfft2, irfft2, fftn, ifftn, rfftn, irfftn,  # noqa: F401
                      fftshift, ifftshift, fftfreq, rfftfreq, __all__)
