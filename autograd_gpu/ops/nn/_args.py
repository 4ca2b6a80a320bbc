"""Argument helpers shared by the nn.functional kernels: float and index operands, dtypes made common,
pairs of ints, PyTorch's reduction names, inplace=, index range checks."""
from ...autograd.grad_mode import state
from ...backends import get_backend as _get_backend
from ...dtypes import result_type
from ...dtypes import is_floating
from .._util import as_tensor

_HOST = _get_backend("cpu").xp.ndarray    # a host array: some reductions take a faster route


def _float_tensor(x, op, name="input", like=None):
    x = as_tensor(x, op, like=like)
    if not is_floating(x.dtype):
        raise TypeError(f"{op}: expected {name} to be a floating-point tensor, got dtype {x.dtype}")
    return x


def _same_dtype(op, *ts):
    """The tensors (None passes) cast to their common float dtype, differentiably."""
    dts = {t.dtype for t in ts if t is not None}
    if len(dts) <= 1:
        return ts
    dt = result_type(*dts)
    return tuple(t if t is None or t.dtype == dt else t.to(dtype=dt) for t in ts)


def _pair(v, name, op, minimum=1):
    """An int or a pair of ints as a pair, each at least ``minimum``."""
    if isinstance(v, (tuple, list)) and len(v) == 1:
        v = v[0]
    p = (v, v) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else None
    if p is None or len(p) != 2 or any(isinstance(a, bool) or not isinstance(a, int) for a in p):
        raise TypeError(f"{op}: expected {name} as an int or a pair of ints, got {v!r}")
    if p[0] < minimum or p[1] < minimum:
        raise ValueError(f"{op}: expected {name} of at least {minimum}, got {v!r}")
    return p


def _reduction(reduction, size_average, reduce, op):
    """The reduction name, mapping PyTorch's deprecated size_average/reduce flags when given."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduction = "none" if reduce is False else "mean" if size_average else "sum"
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return reduction


def _reduce(loss, reduction):
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def _inplace_result(x, y, inplace):
    """PyTorch's inplace=True: write y into x when no graph is recorded through x, else return y."""
    if inplace and not (state.enabled and (x.requires_grad or y.requires_grad)):
        x.data[...] = y.data
        x._bump_version()
        return x
    return y


def _index_tensor(indices, like, op, name="indices"):
    t = as_tensor(indices, op, like=like)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected {name} of an integer dtype, got {t.dtype}")
    if t.device is not like.device:
        raise RuntimeError(f"{op}: expected {name} on {like.device}, got {t.device}; move them with .to()")
    return t


def _check_range(backend, a, n, op, what="index", extra="", exc=IndexError):
    """``exc`` unless every entry of integer array ``a`` is in [0, n): at once on the CPU, at the next
    synchronization on a GPU (a device-side check: no host sync in the op)."""
    backend.check_range(a, 0, n, exc, f"{op}: {what} {{value}} is out of range [0, {n}){extra}")
