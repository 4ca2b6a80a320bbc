"""pin_memory: a batch's CPU tensors copied into page-locked (pinned) host memory, from which a copy to
the GPU can run asynchronously, when CUDA is in use (CuPy's pinned memory allocator, the buffer
``cupyx.empty_pinned`` makes). Without CUDA, and on the CuPy stand-in (which does not simulate
page-locked memory), there is nothing to pin for and batches pass unchanged."""
from collections.abc import Mapping

from ..tensor import Tensor
from ..backends import get_backend
from ..backends import cupy_backend as _cupy_backend

__all__ = ["make_pinner"]


def make_pinner():
    """A function batch -> batch with its CPU tensors in pinned memory, or None when nothing pins."""
    if not _cupy_backend.is_available() or _cupy_backend.simulated():
        return None
    pin_array = get_backend("cuda").pinned_copy
    return lambda batch: _pin(batch, pin_array)


def _pin(obj, pin_array):
    if isinstance(obj, Tensor):
        if obj.device.type != "cpu" or obj.grad_fn is not None:    # a graph stays as it is
            return obj
        t = Tensor._make(pin_array(obj.data), obj.device)
        return t.requires_grad_(True) if obj.requires_grad else t
    if isinstance(obj, (str, bytes)):
        return obj
    if isinstance(obj, Mapping):
        items = {k: _pin(v, pin_array) for k, v in obj.items()}
        try:
            return type(obj)(items)
        except TypeError:
            return items
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):        # namedtuple
        return type(obj)(*(_pin(v, pin_array) for v in obj))
    if isinstance(obj, (tuple, list)):
        return type(obj)(_pin(v, pin_array) for v in obj)
    if hasattr(obj, "pin_memory") and callable(obj.pin_memory):  # a custom batch type pins itself
        return obj.pin_memory()
    return obj
