"""Initialisers as in torch.nn.init: each fills a tensor in place (outside the graph) from the
backend's seeded generator, so ag.manual_seed(n) reproduces them, or from ``generator=`` (an ag.Generator
on the tensor's device), and returns the tensor."""
import math
import warnings

from ..tensor import Tensor
from ..dtypes import is_floating
from ..generator import rng_for

__all__ = ["default_init_", "calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_", "eye_", "xavier_uniform_",
           "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "trunc_normal_", "orthogonal_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid", "identity")


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for an activation (PyTorch's table: relu sqrt(2), tanh 5/3, leaky_relu
    sqrt(2 / (1 + slope**2)) with slope 0.01 by default, selu 3/4, linear/conv/sigmoid 1)."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; expected one of "
                     f"{', '.join(_LINEAR + ('tanh', 'relu', 'leaky_relu', 'selu'))}")


def _check(t, op):
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}")
    if not is_floating(t.dtype):
        raise TypeError(f"{op}: expected a floating-point tensor, got {t.dtype}")


def _write(t, values):
    """Copy an array of t's shape into t's memory and bump its version."""
    t.data[...] = values
    t._bump_version()
    return t


def _fans(t):
    if t.ndim < 2:
        raise ValueError(f"fan in and fan out can not be computed for a tensor with fewer than 2 dimensions, "
                         f"got shape {tuple(t.shape)}")
    receptive = 1
    for s in t.shape[2:]:
        receptive *= s
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(t, mode):
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = _fans(t)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill with samples from U(a, b)."""
    _check(tensor, "uniform_")
    r = tensor.device.backend.rand(tensor.shape, tensor.dtype, rng_for(generator, tensor.device, "uniform_"))
    return _write(tensor, r * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill with samples from N(mean, std**2)."""
    _check(tensor, "normal_")
    r = tensor.device.backend.randn(tensor.shape, tensor.dtype, rng_for(generator, tensor.device, "normal_"))
    return _write(tensor, r * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill with N(mean, std**2) samples conditioned on lying in [a, b] (redrawing those outside)."""
    _check(tensor, "trunc_normal_")
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("trunc_normal_: mean is more than 2 std from [a, b]; the values may be inaccurate",
                      stacklevel=2)
    backend, xp = tensor.device.backend, tensor.device.backend.xp
    rng = rng_for(generator, tensor.device, "trunc_normal_")
    out = backend.randn(tensor.shape, tensor.dtype, rng) * std + mean
    for _ in range(1000):
        bad = (out < a) | (out > b)
        n = int(backend.read_back(bad.sum(), "trunc_normal_"))
        if n == 0:
            break
        out[bad] = backend.randn((n,), tensor.dtype, rng) * std + mean
    return _write(tensor, xp.clip(out, a, b))


def constant_(tensor, val):
    """Fill with ``val``."""
    _check(tensor, "constant_")
    tensor.data.fill(val)
    tensor._bump_version()
    return tensor


def ones_(tensor):
    """Fill ``tensor`` with ones in place (no gradient recorded); returns it."""
    return constant_(tensor, 1.0)


def zeros_(tensor):
    """Fill ``tensor`` with zeros in place (no gradient recorded); returns it."""
    return constant_(tensor, 0.0)


def eye_(tensor):
    """Fill a 2-D tensor with the identity matrix."""
    _check(tensor, "eye_")
    if tensor.ndim != 2:
        raise ValueError(f"eye_: expected a 2-D tensor, got shape {tuple(tensor.shape)}")
    xp = tensor.device.backend.xp
    return _write(tensor, xp.eye(*tensor.shape, dtype=tensor.dtype))


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    _check(tensor, "xavier_uniform_")
    fan_in, fan_out = _fans(tensor)
    a = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    _check(tensor, "xavier_normal_")
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-bound, bound) with bound = gain * sqrt(3 / fan) (gain from ``nonlinearity`` and ``a``)."""
    _check(tensor, "kaiming_uniform_")
    if 0 in tensor.shape:
        warnings.warn("kaiming_uniform_: initializing a zero-element tensor is a no-op", stacklevel=2)
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0.0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std**2) with std = gain / sqrt(fan)."""
    _check(tensor, "kaiming_normal_")
    if 0 in tensor.shape:
        warnings.warn("kaiming_normal_: initializing a zero-element tensor is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode)), generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """Fill with a (semi-)orthogonal matrix (rows flattened past dim 0), scaled by ``gain``."""
    _check(tensor, "orthogonal_")
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: expected at least 2 dimensions, got shape {tuple(tensor.shape)}")
    backend, xp = tensor.device.backend, tensor.device.backend.xp
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    flat = backend.randn((rows, cols), tensor.dtype, rng_for(generator, tensor.device, "orthogonal_"))
    if rows < cols:
        flat = flat.T
    q, r = xp.linalg.qr(flat)
    q = q * xp.sign(xp.diagonal(r))          # makes the decomposition unique (uniform over O(n))
    if rows < cols:
        q = q.T
    return _write(tensor, (q * gain).reshape(tensor.shape))


def default_init_(weight, bias=None):
    """PyTorch's default for Linear and Conv layers: weight kaiming_uniform_(a=sqrt(5)), i.e.
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias uniform on the same bound."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _fans(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)
