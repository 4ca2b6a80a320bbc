"""Dtype aliases (the NumPy dtype objects), the default float dtype, and how Python scalars promote."""
from .backends import dtype as _dtype, host_asarray, result_type as _np_result_type, BFLOAT16  # noqa: F401

__all__ = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int32", "int64", "bool_", "uint8",
           "int8", "int16", "set_default_dtype", "get_default_dtype"]

float16 = _dtype("float16")
# bfloat16 (8 exponent bits as float32, 8 significand bits) is NumPy's through ml_dtypes. That dtype's
# kind is "V", not "f": code that asks whether a dtype is floating calls is_floating(d) (or tests
# ``d is bfloat16`` after a cheap kind test), so hot paths for the other dtypes pay nothing.
bfloat16 = BFLOAT16
float32 = _dtype("float32")
float64 = _dtype("float64")
int8 = _dtype("int8")
int16 = _dtype("int16")
int32 = _dtype("int32")
int64 = _dtype("int64")
uint8 = _dtype("uint8")
bool_ = _dtype("bool")
complex64 = _dtype("complex64")
complex128 = _dtype("complex128")

_default_float = [float32]


def set_default_dtype(d):
    """Set the dtype that Python floats and float lists become (float16, float32 or float64)."""
    d = _dtype(d)
    if d.kind != "f" and d is not bfloat16:
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {d}")
    _default_float[0] = d


def get_default_dtype():
    """The float dtype factories and Python floats get (float32 unless changed with ``set_default_dtype``).

    >>> print(ag.get_default_dtype())
    float32
    """
    return _default_float[0]


def is_floating(d):
    """Whether d is a real floating dtype (float16, bfloat16, float32, float64)."""
    return d.kind == "f" or d is bfloat16


def is_inexact(d):
    """Whether d is floating or complex: the dtypes that can require gradients."""
    return d.kind in "fc" or d is bfloat16


def result_type(*dtypes):
    """The dtype of an operation on these dtypes: NumPy's promotion, with PyTorch's rules for
    bfloat16 (which NumPy cannot promote with float16 or wide integers): bfloat16 with bools and
    integers stays bfloat16, with float16 gives float32, with wider floats or complex the wider one."""
    try:
        return _np_result_type(*dtypes)
    except TypeError:                  # DTypePromotionError is a TypeError
        if not any(_dtype(d) is bfloat16 for d in dtypes):
            raise
    ds = [_dtype(d) for d in dtypes]
    others = [d for d in ds if d is not bfloat16 and d.kind not in "biu"]
    if not others:
        return bfloat16
    if all(d == float16 for d in others):
        return float32
    return _np_result_type(float32, *others)


def get_default_complex_dtype():
    """The complex dtype that Python complex numbers become: complex128 when the default float dtype
    is float64, else complex64 (PyTorch's rule)."""
    return complex128 if _default_float[0] == float64 else complex64


def complex_dtype(d):
    """The complex dtype of a real dtype's precision (float64 -> complex128, float32/float16 and
    integers -> complex64 or the default); complex dtypes are returned as they are."""
    if d.kind == "c":
        return d
    if d.kind == "f" or d is bfloat16:
        return complex128 if d == float64 else complex64
    return get_default_complex_dtype()


def real_dtype(d):
    """The real dtype of a complex dtype's precision (complex64 -> float32); others unchanged."""
    return (float64 if d == complex128 else float32) if d.kind == "c" else d


def scalar_result_dtype(dtype, value, op):
    """The dtype of ``tensor <op> value`` for a Python scalar ``value``, following NumPy 2's rule that
    Python scalars are weak (a float32 tensor stays float32), and PyTorch's that a Python float with an
    integer or bool tensor gives the default float dtype."""
    kind = dtype.kind
    if isinstance(value, bool):
        return dtype
    if isinstance(value, int):
        return int64 if kind == "b" else dtype
    if isinstance(value, float):
        return dtype if kind in "fc" or dtype is bfloat16 else _default_float[0]
    if isinstance(value, complex):          # weak too: float32 tensor * 1j is complex64, as in NumPy 2
        return complex_dtype(dtype) if kind in "fc" or dtype is bfloat16 else get_default_complex_dtype()
    raise TypeError(f"{op}: expected a Tensor or a Python number, got {type(value).__name__}")
