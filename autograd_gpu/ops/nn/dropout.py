"""nn.functional's dropout (a family of its own, as in PyTorch): elements (dropout, alpha_dropout) or whole
channels (dropout1d, dropout2d) zeroed with probability p and the rest scaled, the mask drawn from the
device's generator."""
from ...tensor import Tensor
from ...dtypes import is_floating
from ..elementwise import Mul
from .._util import as_tensor
from ..registry import register, OpTest
from ._args import _inplace_result


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4),),), ref=lambda np, a: a, op=lambda x: dropout(x, 0.5, training=False), name="dropout_eval"),
    OpTest((((3, 4),),), ref=lambda np, a: a, op=lambda x: dropout(x, 0.0), name="dropout_p0")),
    doc="Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when not training).")
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when not
    training or p == 0). The mask comes from the device's generator, so ag.manual_seed makes it
    reproducible."""
    x = as_tensor(input, "dropout")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: expected a probability p in [0, 1], got {p!r}")
    if not training or p == 0:
        return x
    if not is_floating(x.dtype):
        raise TypeError(f"dropout: expected a floating-point tensor, got dtype {x.dtype}")
    backend = x.device.backend
    if p == 1:
        mask = backend.xp.zeros(x.shape, dtype=x.dtype)
    else:
        keep = backend.rand(x.shape, x.dtype) >= p
        mask = keep.astype(x.dtype)
        mask *= 1.0 / (1.0 - p)
    return _inplace_result(x, Mul.apply(x, Tensor._make(mask, x.device)), inplace)


def _check_p(p, op):
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: expected a probability p in [0, 1], got {p!r}")


def _channel_dropout(x, p, training, inplace, nd, op):
    """Whole channels zeroed: one draw per (N, C) (or per C of an unbatched input), kept ones scaled."""
    x = as_tensor(x, op)
    _check_p(p, op)
    if x.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{op}: expected a {nd + 2}-D input (N, C, {'L' if nd == 1 else 'H, W'}) or a {nd + 1}-D "
                         f"unbatched one, got shape {x.shape}")
    if not training or p == 0:
        return x
    if not is_floating(x.dtype):
        raise TypeError(f"{op}: expected a floating-point tensor, got dtype {x.dtype}")
    backend = x.device.backend
    shape = x.shape[:x.ndim - nd] + (1,) * nd
    if p == 1:
        mask = backend.xp.zeros(shape, dtype=x.dtype)
    else:
        mask = (backend.rand(shape, x.dtype) >= p).astype(x.dtype)
        mask *= 1.0 / (1.0 - p)
    return _inplace_result(x, Mul.apply(x, Tensor._make(mask, x.device)), inplace)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4),),), ref=lambda np, a: a, op=lambda x: dropout1d(x, 0.5, training=False), name="dropout1d_eval"),
    OpTest((((3, 4),),), ref=lambda np, a: a, op=lambda x: dropout1d(x, 0.0), name="dropout1d_p0")),
    doc="Zero whole channels of (N, C, L) with probability p, scaling the rest by 1 / (1 - p).")
def dropout1d(input, p=0.5, training=True, inplace=False):
    """Channel dropout for (N, C, L) or (C, L): each channel zeroed with probability p (one draw per
    channel), the others scaled by 1 / (1 - p)."""
    return _channel_dropout(input, p, training, inplace, 1, "dropout1d")


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 2),),), ref=lambda np, a: a, op=lambda x: dropout2d(x, 0.3, training=False),
           name="dropout2d_eval"),
    OpTest((((3, 4, 2),),), ref=lambda np, a: a, op=lambda x: dropout2d(x, 0.0), name="dropout2d_p0")),
    doc="Zero whole channels of (N, C, H, W) with probability p, scaling the rest by 1 / (1 - p).")
def dropout2d(input, p=0.5, training=True, inplace=False):
    """Channel dropout for (N, C, H, W) or (C, H, W): each channel (a whole feature map) zeroed with
    probability p, the others scaled by 1 / (1 - p)."""
    return _channel_dropout(input, p, training, inplace, 2, "dropout2d")


_SELU_ALPHA_SCALE = 1.7580993408473766      # SELU's scale * alpha: the value a dropped unit takes is -this


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4),),), ref=lambda np, a: a, op=lambda x: alpha_dropout(x, 0.5), name="alpha_dropout_eval"),
    OpTest((((3, 4),),), ref=lambda np, a: a, op=lambda x: alpha_dropout(x, 0.0, training=True),
           name="alpha_dropout_p0")),
    doc="Dropout for SELU networks: dropped units set to SELU's negative saturation, then an affine map keeps "
        "mean and variance.")
def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """PyTorch's alpha_dropout: with keep mask m (probability 1 - p), y = a * (x * m + alpha' * (1 - m)) + b
    form that keeps zero mean and unit variance of SELU activations (alpha' = -1.7581, a = ((1 - p) *
    (1 + p * alpha'^2))^-1/2, b = -a * alpha' * p). Identity unless training (default False, as PyTorch)."""
    op = "alpha_dropout"
    x = as_tensor(input, op)
    _check_p(p, op)
    if not training or p == 0:
        return x
    if not is_floating(x.dtype):
        raise TypeError(f"{op}: expected a floating-point tensor, got dtype {x.dtype}")
    backend = x.device.backend
    if p == 1:
        return _inplace_result(x, Mul.apply(x, Tensor._make(backend.xp.zeros(x.shape, dtype=x.dtype), x.device)),
                               inplace)
    alpha = _SELU_ALPHA_SCALE
    a = 1.0 / ((alpha * alpha * p + 1) * (1 - p)) ** 0.5
    keep = (backend.rand(x.shape, x.dtype) >= p).astype(x.dtype)
    shift = (keep - 1) * (alpha * a) + alpha * a * p
    keep *= a
    y = Mul.apply(x, Tensor._make(keep, x.device)) + Tensor._make(shift.astype(x.dtype), x.device)
    return _inplace_result(x, y, inplace)
