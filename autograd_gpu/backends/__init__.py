"""The only place that picks NumPy or CuPy.

``get_backend(device)`` returns the backend object for a device; its ``.xp`` is the array namespace
(``numpy`` or ``cupy``). Everything above this package talks to arrays through ``xp`` and the few
named kernels the backends define where the namespaces differ (scatter-add, random numbers, host
transfer, synchronize, erf).
"""
import numpy as _np
import ml_dtypes as _ml_dtypes      # registers bfloat16 with NumPy (np.dtype("bfloat16"), its scalar type)

from ..device import device as _parse_device, Device, register_backend_resolver as _register_resolver
from .numpy_backend import NumpyBackend
from . import cupy_backend as _cupy_backend

__all__ = ["get_backend", "available", "backend_of_array", "dtype", "is_array", "Backend"]

from .base import Backend
_cpu_backend = NumpyBackend(_parse_device("cpu"))
_backends = {}


def get_backend(device):
    """The backend for a device ("cpu", "cuda:1", a Device). Raises RuntimeError with an install hint
    when CUDA is asked for and CuPy or a GPU is missing."""
    d = _parse_device(device)
    if d.type == "cpu":
        return _cpu_backend
    b = _backends.get(d)
    if b is None:
        b = _backends[d] = _cupy_backend.CupyBackend(d)
    return b


def _forget_cuda_backends():
    """Drop the CUDA backends made so far (the CUDA module changed: see cupy_backend.use_modules)."""
    for d in list(_backends):
        d._forget_backend()
    _backends.clear()


_register_resolver(get_backend)      # Device.backend finds its backend through this (device.py imports nothing)


def available():
    """Device types usable on this machine: always "cpu", plus "cuda" when CuPy sees a GPU."""
    return ["cpu", "cuda"] if _cupy_backend.is_available() else ["cpu"]


def backend_of_array(a):
    """The backend that owns array ``a``, or None when it is neither a NumPy nor a CuPy array."""
    if isinstance(a, _np.ndarray):
        return _cpu_backend
    if _cupy_backend.is_cupy_array(a):
        return get_backend(f"cuda:{a.device.id}")
    return getattr(a, "_ag_backend", None)      # an array handle of ag.compile's tracer (trace_ir.py), else None


def is_array(a):
    """True for a NumPy or CuPy array."""
    return backend_of_array(a) is not None


def dtype(spec):
    """Normalise a dtype spec (``ag.float32``, "float32", numpy.float32) to a NumPy dtype object."""
    try:
        return _np.dtype(spec)
    except TypeError:
        raise TypeError(f"expected a dtype such as ag.float32 or 'float64', got {spec!r}") from None


# bfloat16 is NumPy's through ml_dtypes: a user-defined dtype whose kind is "V", not "f"
BFLOAT16 = _np.dtype(_ml_dtypes.bfloat16)


def host_asarray(data):
    """Python data (numbers, nested lists, NumPy scalars) as a host NumPy array."""
    return _np.asarray(data)


def bytes_array(raw):
    """bytes as a new host uint8 array (an ag.Generator's state)."""
    return _np.frombuffer(raw, dtype=_np.uint8).copy()


def array_bytes(a):
    """The bytes of any backend array, in C order, on the host."""
    return _np.ascontiguousarray(to_numpy(a)).tobytes()


def address(a):
    """Where the first element of a backend array lies (a device pointer for a CuPy array)."""
    i = getattr(a, "__cuda_array_interface__", None)
    return (i if i is not None else a.__array_interface__)["data"][0]


def is_rng(obj):
    """Whether ``obj`` is a random generator object of a backend's library (NumPy's Generator, BitGenerator or
    RandomState, CuPy's RandomState or Generator): ag.compile refuses to replay draws it cannot see."""
    if isinstance(obj, (_np.random.Generator, _np.random.BitGenerator, _np.random.RandomState)):
        return True
    return type(obj).__name__ in ("RandomState", "Generator") and "cupy" in type(obj).__module__


# NumPy returns scalars (numpy.float64, ...), not 0-d arrays, from ops on 0-d arrays; a Tensor's
# data must always be an array (mutable, with the array API), so wrapping checks for these types.
SCALAR_TYPES = frozenset(t for t in _np.sctypeDict.values() if issubclass(t, _np.generic))


def as_ndarray(a):
    """A NumPy scalar as a 0-d array (anything else unchanged)."""
    return _np.asarray(a) if a.__class__ in SCALAR_TYPES else a


def result_type(*dtypes):
    """NumPy's promotion of dtypes (host-side dtype arithmetic; CuPy follows the same table)."""
    return _np.result_type(*dtypes)


def to_numpy(a):
    """A host NumPy array for any backend array (no copy when it is already on the host)."""
    b = backend_of_array(a)
    return _np.asarray(a) if b is None else b.to_host(a)


def manual_seed(seed):
    _cpu_backend.seed(seed)
    _cupy_backend.set_global_seed(seed)
    for b in _backends.values():
        b.seed(seed)
