"""ag.cuda: is_available, device_count, synchronize, the sync debug mode."""
from .backends import cupy_backend as _cb, get_backend as _get_backend
from .backends.sync import set_sync_debug_mode, get_sync_debug_mode

__all__ = ["is_available", "device_count", "synchronize", "get_device_name", "set_sync_debug_mode",
           "get_sync_debug_mode"]


def is_available():
    """True when CuPy is installed and sees at least one GPU (or the test suite's CuPy stand-in is on)."""
    return _cb.is_available()


def device_count():
    return _cb.device_count()


def get_device_name(device=None):
    """The GPU's name, as the driver reports it ("... (simulated)" on the test suite's CuPy stand-in)."""
    b = _get_backend("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")
    name = b.xp.cuda.runtime.getDeviceProperties(b.device.index)["name"]
    return name.decode() if isinstance(name, bytes) else name


def synchronize(device="cuda"):
    """Wait until every kernel queued on the GPU has finished (a no-op on the CPU). A device-side check
    that failed since the last synchronization (an out-of-range class index, say) raises here."""
    _get_backend(device).synchronize()
