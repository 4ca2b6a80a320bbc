"""Device("cuda:0"): parsing, str(), the default device."""
import threading

__all__ = ["Device", "device", "set_default_device", "get_default_device"]

_VALID_TYPES = ("cpu", "cuda")


class Device:
    """A place where arrays live: ``type`` is "cpu" or "cuda", ``index`` the GPU number (None on CPU).

    Instances are interned: ``device("cuda:0") is device("cuda:0")``, so the engine compares devices
    with ``is``. ``backend`` is filled in lazily by ``autograd_gpu.backends``.
    """

    __slots__ = ("type", "index", "_str", "_backend")

    def __init__(self, type_, index):
        self.type = type_
        self.index = index
        self._str = type_ if index is None else f"{type_}:{index}"
        self._backend = None

    @property
    def backend(self):
        b = self._backend
        if b is None:
            from .backends import get_backend   # deferred: backends import this module
            b = self._backend = get_backend(self)
        return b

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


_interned = {}
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
            d = _interned[key] = Device(type_, idx)
        _interned[spec] = d
    return d


CPU = device("cpu")
_default = [CPU]


def set_default_device(d):
    """Set the device that factories and ``tensor()`` use when none is given."""
    d = device(d)
    d.backend   # fail now, with the install hint, rather than at the first tensor
    if d.type == "cuda" and d.index:     # CuPy works on the current GPU: make it this one
        from .cuda import set_device
        set_device(d.index)
    _default[0] = d


def get_default_device():
    return _default[0]
