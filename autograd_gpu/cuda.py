"""ag.cuda: is_available, device_count, synchronize, the current GPU, the sync debug mode."""
from .backends import cupy_backend as _cb, get_backend as _get_backend
from .backends.sync import set_sync_debug_mode, get_sync_debug_mode

__all__ = ["is_available", "device_count", "synchronize", "get_device_name", "set_device", "current_device",
           "device", "set_sync_debug_mode", "get_sync_debug_mode"]


def is_available():
    """True when CuPy is installed and sees at least one GPU (or the test suite's CuPy stand-in is on)."""
    return _cb.is_available()


def device_count():
    """The number of GPUs CuPy sees (0 without CuPy or a GPU)."""
    return _cb.device_count()


def get_device_name(device=None):
    """The GPU's name, as the driver reports it ("... (simulated)" on the test suite's CuPy stand-in)."""
    b = _get_backend("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")
    name = b.xp.cuda.runtime.getDeviceProperties(b.device.index)["name"]
    return name.decode() if isinstance(name, bytes) else name


def synchronize(device=None):
    """Wait until every kernel queued on the GPU (the current one by default) has finished (a no-op for
    "cpu"). A device-side check that failed since the last synchronization (an out-of-range class
    index, say) raises here."""
    _get_backend(f"cuda:{current_device()}" if device is None else device).synchronize()


def _gpu_index(d):
    if isinstance(d, int) and not isinstance(d, bool):
        return d
    from .device import device as _parse
    dev = _parse(d)
    if dev.type != "cuda":
        raise ValueError(f"expected a CUDA device such as 'cuda:1' or a GPU number, got {d!r}")
    return dev.index


def set_device(d):
    """Make GPU ``d`` (a number, "cuda:N" or a Device) current in this thread.

    Every op on tensors runs on its tensors' GPU, but CuPy, underneath, works on the *current* GPU; a
    program on "cuda:N" with N > 0 makes that GPU current first (one process per GPU, as data-parallel
    training does): ``ag.cuda.set_device(1)`` or ``with ag.cuda.device(1): ...``. On GPU 0 (the
    default) nothing is needed."""
    i = _gpu_index(d)
    _cb.require_cuda(i).cuda.Device(i).use()


def current_device():
    """The index of the current GPU of this thread."""
    cp = _cb.require_cuda(0)
    return cp.cuda.runtime.getDevice()


class device:
    """``with ag.cuda.device(1): ...`` makes GPU 1 current inside (see ``set_device``)."""

    def __init__(self, d):
        self.index = _gpu_index(d)

    def __enter__(self):
        self._prev = current_device()
        set_device(self.index)
        return self

    def __exit__(self, *exc):
        set_device(self._prev)
