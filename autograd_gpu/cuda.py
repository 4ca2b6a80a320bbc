"""ag.cuda: is_available, device_count, synchronize."""
from .backends import cupy_backend as _cb, get_backend as _get_backend

__all__ = ["is_available", "device_count", "synchronize"]


def is_available():
    """True when CuPy is installed and sees at least one GPU."""
    return _cb.is_available()


def device_count():
    return _cb.device_count()


def synchronize(device="cuda"):
    """Wait until every kernel queued on the GPU has finished (a no-op on the CPU)."""
    _get_backend(device).synchronize()
