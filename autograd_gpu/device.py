"""Device("cuda:0"): parsing, str(), the default device.

A leaf: it imports nothing of the package. The backends (autograd_gpu/backends, above it) register
how a device finds its backend (``register_backend_resolver``), so the two do not import each other.
"""
import threading

__all__ = ["Device", "device", "set_default_device", "get_default_device"]

_VALID_TYPES = ("cpu", "cuda")
_resolver = [None]         # device -> its backend: backends.get_backend, registered by autograd_gpu.backends


def register_backend_resolver(fn):
    """``fn(device)`` -> the device's backend (called once per device, on first use of ``.backend``)."""
    _resolver[0] = fn


class Device:
    """A place where arrays live: ``type`` is "cpu" or "cuda", ``index`` the GPU number (None on CPU).

    Instances are interned: ``device("cuda:0") is device("cuda:0")``, so the engine compares devices
    with ``is``. ``backend`` is the device's backend (backends.get_backend), found on first use: a
    device starts as an ``_Unresolved`` one, whose ``__getattr__`` finds the backend, stores it in the
    slot and turns the instance into a plain Device. From then on ``dev.backend`` is a slot read, the
    cheapest attribute access there is (the ops read it on every call), and no other attribute pays
    for the laziness.
    """

    __slots__ = ("type", "index", "_str", "backend")

    def __init__(self, type_, index):
        self.type = type_
        self.index = index
        self._str = type_ if index is None else f"{type_}:{index}"

    def _forget_backend(self):
        """Find the backend again on next use (the CUDA modules changed: cupy_backend.use_modules)."""
        if self.__class__ is Device:
            del self.backend
            self.__class__ = _Unresolved

    def __str__(self):
        return self._str

    def __repr__(self):
        return f"device('{self._str}')"

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, TypeError):
                return False
        return self is other

    def __hash__(self):
        return hash(self._str)

    def __reduce__(self):
        return (device, (self._str,))


_interned: dict[object, Device] = {}       # spec (a string) -> its interned Device
_lock = threading.Lock()


def device(spec):
    """Parse "cpu", "cuda", "cuda:N" (or a Device) into the interned Device; "cuda" means "cuda:0"."""
    if isinstance(spec, Device):
        return spec
    d = _interned.get(spec)
    if d is not None:
        return d
    if not isinstance(spec, str):
        raise TypeError(f"device: expected a string such as 'cpu' or 'cuda:0' or a Device, got {type(spec).__name__}")
    text = spec.strip().lower()
    type_, _, index = text.partition(":")
    if type_ not in _VALID_TYPES:
        raise ValueError(f"device: expected 'cpu', 'cuda' or 'cuda:N', got {spec!r}")
    if type_ == "cpu":
        if index not in ("", "0"):
            raise ValueError(f"device: the CPU has no index, got {spec!r}")
        idx = None
    elif index == "":
        idx = 0
    else:
        if not index.isdigit():
            raise ValueError(f"device: expected a non-negative GPU index after 'cuda:', got {spec!r}")
        idx = int(index)
    key = type_ if idx is None else f"{type_}:{idx}"
    with _lock:
        d = _interned.get(key)
        if d is None:
            d = _interned[key] = _Unresolved(type_, idx)
        _interned[spec] = d
    return d


class _Unresolved(Device):
    """A Device whose backend has not been looked up yet (same slots: instances change class)."""
    __slots__ = ()

    def __getattr__(self, name):         # only reached for an unset slot: ``backend`` before first use
        if name != "backend":
            raise AttributeError(f"'Device' object has no attribute '{name}'")
        if _resolver[0] is None:
            raise RuntimeError("no backend resolver is registered: import autograd_gpu (its backends register it)")
        b = _resolver[0](self)
        self.backend = b
        self.__class__ = Device
        return b


CPU = device("cpu")
_default = [CPU]


def set_default_device(d):
    """Set the device that factories and ``tensor()`` use when none is given."""
    d = device(d)
    b = d.backend   # fail now, with the install hint, rather than at the first tensor
    if d.index:     # CuPy works on the current GPU: make it this one (as ag.cuda.set_device)
        b.make_current()
    _default[0] = d


def get_default_device():
    """The device factories and ``ag.tensor`` use when none is given (``cpu`` unless changed)."""
    return _default[0]
