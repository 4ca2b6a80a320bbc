"""The casts autocast puts in front of ops (see amp.py): low precision for the products, float32
where range or precision matters. Read from the autocast state (_autocast_state.py, a leaf), so the
ops need not import amp.py, which sits above them."""
from .._autocast_state import state as _state, low_dtype as _low
from ..dtypes import float16, bfloat16, float32
from ..tensor import Tensor

__all__ = ["cast_low", "cast_float32"]


def cast_low(*xs):
    """For a low-precision op: its float32 Tensor inputs cast to the autocast dtype (unchanged when
    autocast is off for their device; float64 stays float64)."""
    if not _state.active:
        return xs
    ref = next((x for x in xs if isinstance(x, Tensor)), None)
    low = _low(ref.device) if ref is not None else None
    if low is None:
        return xs
    # float32 (and other low-range floats) go down; float64 is left alone, as in PyTorch
    return tuple(x.to(dtype=low) if isinstance(x, Tensor) and x.dtype.kind == "f" and x.dtype.itemsize == 4
                 else x for x in xs)


def cast_float32(*xs):
    """For a precision-sensitive op: float16 and bfloat16 Tensor inputs cast to float32 while autocast is on."""
    if not _state.active:
        return xs
    ref = next((x for x in xs if isinstance(x, Tensor)), None)
    if ref is None or _low(ref.device) is None:
        return xs
    return tuple(x.to(dtype=float32) if isinstance(x, Tensor) and (x.dtype == float16 or x.dtype is bfloat16) else x
                 for x in xs)
