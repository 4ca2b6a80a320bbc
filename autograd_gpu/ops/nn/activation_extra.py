"""nn.functional's further activations (mish, hardswish, hardsigmoid, hardtanh, relu6, selu, celu, glu, prelu,
softsign, tanhshrink, softshrink, hardshrink, logsigmoid) and the vector helpers normalize, cosine_similarity,
pairwise_distance.

All are composed from ag ops (``where``, ``clamp``, the fused Softplus), so they need no backward of
their own, are differentiable to any order and batch under vmap through the ops they call. The piecewise ones
are written with ``where`` so that the gradient at each kink is the one PyTorch's kernels pick (hardtanh: 0 at
both bounds; hardswish: 0 at -3 and 1 at 3; the shrinks: 0 at +-lambd), NaN takes the branch PyTorch's
comparisons give it, and a branch not taken never sees an infinite input (no 0 * inf in the gradient)."""
from ...tensor import Tensor
from ..elementwise import (Softplus, where, clamp, expm1, tanh, abs as _abs, sigmoid,
                           logical_and, greater)
from ..reduction import norm as _norm, sum as _sum
from ..shape import split, broadcast_to, broadcast_shapes
from .._util import as_tensor, normalize_dim
from ..registry import register, OpTest, UNARY
from ._args import _inplace_result, _float_tensor

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _float(x, op):
    return _float_tensor(x, op)


@register(namespace="nn.functional", tests=OpTest(
    UNARY, ref=lambda np, a: a * np.tanh(np.logaddexp(0, a)), domain=(-4.0, 4.0)))
def mish(input, inplace=False):
    """x * tanh(softplus(x))."""
    x = _float(input, "mish")
    return _inplace_result(x, x * tanh(Softplus.apply(x)), inplace)


@register(namespace="nn.functional", tests=OpTest(
    UNARY, ref=lambda np, a: a * np.clip(a + 3, 0, 6) / 6, domain=(-5.0, 5.0), avoid=(-3.0, 3.0)))
def hardswish(input, inplace=False):
    """x * relu6(x + 3) / 6; the gradient is 0 up to -3, x/3 + 1/2 inside (-3, 3) and 1 from 3, as PyTorch's."""
    x = _float(input, "hardswish")
    # the quadratic on x kept inside (-3, 3) (0 elsewhere): its gradient there is 0, never 0 * inf; NaN takes
    # the last branch (gradient 1, as PyTorch's kernel, whose comparisons are all false for NaN)
    xs = where(logical_and(greater(x, -3.0), x < 3.0), x, 0.0)
    y = where(x <= -3.0, 0.0, where(x < 3.0, xs * (xs + 3.0) * (1.0 / 6.0), x))
    return _inplace_result(x, y, inplace)


@register(namespace="nn.functional", tests=OpTest(
    UNARY, ref=lambda np, a: np.clip(a / 6 + 0.5, 0, 1), domain=(-5.0, 5.0), avoid=(-3.0, 3.0)))
def hardsigmoid(input, inplace=False):
    """relu6(x + 3) / 6; the gradient is 1/6 strictly inside (-3, 3), else 0 (NaN included, as PyTorch's)."""
    x = _float(input, "hardsigmoid")
    y = where(logical_and(greater(x, -3.0), x < 3.0), x * (1.0 / 6.0) + 0.5,
              where(x <= -3.0, 0.0, where(x >= 3.0, 1.0, x * 0.0)))         # NaN: NaN * 0, gradient 0
    return _inplace_result(x, y, inplace)


@register(namespace="nn.functional", tests=(
    OpTest(UNARY, ref=lambda np, a: np.clip(a, -1, 1), avoid=(-1.0, 1.0)),
    OpTest(UNARY[:1], ref=lambda np, a: np.clip(a, -0.5, 1.5), op=lambda x: hardtanh(x, -0.5, 1.5),
           name="hardtanh_bounds", avoid=(-0.5, 1.5))))
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """x clamped to [min_val, max_val]; the gradient is 1 strictly inside, 0 at and beyond the bounds."""
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val, got min_val={min_val}, max_val={max_val}")
    x = as_tensor(input, "hardtanh")
    y = where(x <= min_val, float(min_val), where(x >= max_val, float(max_val), x))
    return _inplace_result(x, y, inplace)


@register(namespace="nn.functional", tests=OpTest(
    UNARY, ref=lambda np, a: np.clip(a, 0, 6), domain=(-2.0, 8.0), avoid=(0.0, 6.0)))
def relu6(input, inplace=False):
    """min(max(x, 0), 6): hardtanh(x, 0, 6)."""
    return hardtanh(input, 0.0, 6.0, inplace)


@register(namespace="nn.functional", tests=OpTest(
    UNARY, ref=lambda np, a: _SELU_SCALE * np.where(a > 0, a, _SELU_ALPHA * np.expm1(np.minimum(a, 0))),
    avoid=(0.0,)))
def selu(input, inplace=False):
    """scale * elu(x, alpha) with the self-normalising constants (alpha 1.6733, scale 1.0507)."""
    x = _float(input, "selu")
    return _inplace_result(x, _elu_like(x, _SELU_ALPHA, 1.0) * _SELU_SCALE, inplace)


def _elu_like(x, alpha, inv_alpha):
    """x where x > 0, else alpha * expm1(x * inv_alpha); NaN takes the x branch (gradient 1, as PyTorch's
    elu kernel: ``x <= 0`` is false for NaN), and the exponential only sees x <= 0 (0 elsewhere)."""
    neg = x <= 0.0
    return where(neg, expm1(where(neg, x, 0.0) * inv_alpha) * alpha, x)


@register(namespace="nn.functional", tests=(
    OpTest(UNARY, ref=lambda np, a: np.where(a > 0, a, np.expm1(np.minimum(a, 0)))),
    OpTest(UNARY[:1], ref=lambda np, a: np.where(a > 0, a, 0.5 * np.expm1(np.minimum(a, 0) / 0.5)),
           op=lambda x: celu(x, alpha=0.5), name="celu_alpha", avoid=(0.0,))))
def celu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""
    if alpha == 0:
        raise ValueError("celu: alpha must be non-zero (it divides x), got 0")
    x = _float(input, "celu")
    return _inplace_result(x, _elu_like(x, float(alpha), 1.0 / alpha), inplace)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4),), ((2, 6, 2),)), ref=lambda np, a: a[..., :a.shape[-1] // 2] / (1 + np.exp(-a[..., a.shape[-1] // 2:])),
           name="glu"),
    OpTest((((4, 3),),), ref=lambda np, a: a[:2] / (1 + np.exp(-a[2:])), op=lambda x: glu(x, 0), name="glu_dim0")))
def glu(input, dim=-1):
    """a * sigmoid(b), where a and b are the two halves of input along dim."""
    x = _float(input, "glu")
    if x.ndim == 0:
        raise ValueError("glu: expected a tensor of at least 1 dimension, got a 0-d tensor")
    d = normalize_dim(dim, x.ndim, "glu")
    n = x.shape[d]
    if n % 2:
        raise ValueError(f"glu: halving dimension must be even, but dimension {d} is size {n}")
    a, b = split(x, n // 2, d)
    return a * sigmoid(b)


def _prelu_ref(np, a, w):
    shape = (1, -1) + (1,) * (a.ndim - 2) if w.size > 1 else ()
    ww = w.reshape(shape) if w.size > 1 else w.reshape(())
    return np.where(a > 0, a, ww * a)


@register(namespace="nn.functional", tests=OpTest(
    (((2, 3, 4), (3,)), ((3, 4), (1,)), ((5,), (1,)), ((2, 3), (3,))), ref=_prelu_ref, avoid=(0.0,)))
def prelu(input, weight):
    """x where x > 0, else weight * x; weight has one element or one per channel (dim 1)."""
    x = _float(input, "prelu")
    w = _float_tensor(weight, "prelu", "weight", like=x)
    if w.ndim > 1:
        raise ValueError(f"prelu: expected weight to be a scalar or a 1-D tensor, got {w.ndim} dimensions")
    if w.numel() != 1:
        if x.ndim == 0:
            raise ValueError(f"prelu: expected a weight of one element for a 0-d input, got {w.numel()}")
        c = x.shape[1] if x.ndim >= 2 else 1
        if w.numel() != c:
            raise ValueError(f"prelu: mismatch of parameter numbers and input channel size: found {w.numel()} "
                             f"parameters and channel size {c}")
        w = w.reshape((c,) + (1,) * (x.ndim - 2))
    elif w.ndim:
        w = w.reshape(())
    return where(greater(x, 0), x, w * x)


@register(namespace="nn.functional", tests=OpTest(UNARY, ref=lambda np, a: a / (1 + np.abs(a))))
def softsign(input):
    """x / (1 + |x|)."""
    x = _float(input, "softsign")
    return x / (_abs(x) + 1.0)


@register(namespace="nn.functional", tests=OpTest(UNARY, ref=lambda np, a: a - np.tanh(a)))
def tanhshrink(input):
    """x - tanh(x)."""
    x = _float(input, "tanhshrink")
    return x - tanh(x)


def _lambd(lambd, op):
    if lambd < 0:
        raise ValueError(f"{op}: lambd must be greater or equal to 0, got {lambd}")
    return float(lambd)


@register(namespace="nn.functional", tests=(
    OpTest(UNARY, ref=lambda np, a: np.where(a > 0.5, a - 0.5, np.where(a < -0.5, a + 0.5, 0 * a)),
           avoid=(-0.5, 0.5)),
    OpTest(UNARY[:1], ref=lambda np, a: np.where(a > 1, a - 1, np.where(a < -1, a + 1, 0 * a)),
           op=lambda x: softshrink(x, 1.0), name="softshrink_lambd", avoid=(-1.0, 1.0))))
def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, else 0 (NaN stays NaN, with gradient 1 as PyTorch's)."""
    x = _float(input, "softshrink")
    lam = _lambd(lambd, "softshrink")
    return where(logical_and(x >= -lam, x <= lam), 0.0, where(x > lam, x - lam, x + lam))


@register(namespace="nn.functional", tests=OpTest(
    UNARY, ref=lambda np, a: np.where(np.abs(a) > 0.5, a, 0 * a), avoid=(-0.5, 0.5)))
def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0 (NaN stays NaN); the gradient is 0 on [-lambd, lambd]."""
    x = _float(input, "hardshrink")
    lam = float(lambd)
    return where(logical_and(x >= -lam, x <= lam), 0.0, x)


@register(namespace="nn.functional", tests=OpTest(
    UNARY, ref=lambda np, a: -np.logaddexp(0, -a), domain=(-30.0, 30.0)))
def logsigmoid(input):
    """log(sigmoid(x)) = -softplus(-x), computed without overflow."""
    x = _float(input, "logsigmoid")
    return -Softplus.apply(-x)


# --------------------------------------------------------------------------- vectors
def _norm_ref(np, a, p, axis):
    return (np.abs(a) ** p).sum(axis=axis, keepdims=True) ** (1.0 / p)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4),), ((2, 3, 2),)), ref=lambda np, a: a / np.maximum(_norm_ref(np, a, 2, 1), 1e-12), name="normalize"),
    OpTest((((3, 4),),), ref=lambda np, a: a / np.maximum(np.abs(a).sum(-1, keepdims=True), 1e-12),
           op=lambda x: normalize(x, p=1, dim=-1), name="normalize_p1", avoid=(0.0,))))
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p, eps) along dim."""
    x = _float(input, "normalize")
    y = x / clamp(_norm(x, p=p, dim=dim, keepdim=True), min=eps)
    if out is None:
        return y
    if not isinstance(out, Tensor):
        raise TypeError(f"normalize: expected out to be a Tensor, got {type(out).__name__}")
    if y.requires_grad:
        raise RuntimeError("normalize: out= does not support automatic differentiation (an input requires grad)")
    if out.shape != y.shape or out.dtype != y.dtype or out.device is not y.device:
        raise ValueError(f"normalize: expected out of shape {y.shape}, dtype {y.dtype} on {y.device}, got "
                         f"{out.shape}, {out.dtype} on {out.device}")
    out.data[...] = y.data
    out._bump_version()
    return out


def _clamped_norm(x, dim, eps):
    """||x|| along dim (kept), its value clamped at eps while its gradient stays the norm's: PyTorch clamps
    the norm in place under no_grad."""
    n = _norm(x, p=2, dim=dim, keepdim=True)
    c = n.detach()
    return n + (clamp(c, min=eps) - c)


def _cos_ref(np, a, b, dim=1, eps=1e-8):
    na = np.maximum(np.sqrt((a * a).sum(dim, keepdims=True)), eps)
    nb = np.maximum(np.sqrt((b * b).sum(dim, keepdims=True)), eps)
    return ((a / na) * (b / nb)).sum(dim)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((2, 3, 2), (1, 3, 2))), ref=_cos_ref, name="cosine_similarity"),
    OpTest((((4,), (4,)),), ref=lambda np, a, b: _cos_ref(np, a, b, 0), op=lambda a, b: cosine_similarity(a, b, 0),
           name="cosine_similarity_1d")))
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between x1 and x2 along dim (inputs broadcast), each norm clamped at eps.

    Each input is divided by its norm first, as PyTorch does, so the result stays in [-1, 1]; the clamp changes
    the value only (the gradient is the norm's, as PyTorch's in-place clamp under no_grad)."""
    a = _float(x1, "cosine_similarity")
    b = _float_tensor(x2, "cosine_similarity", "x2", like=a)
    if a.shape != b.shape:
        a, b = _broadcast_pair(a, b, "cosine_similarity")
    d = normalize_dim(dim, a.ndim, "cosine_similarity")
    return _sum((a / _clamped_norm(a, d, eps)) * (b / _clamped_norm(b, d, eps)), d)


def _broadcast_pair(a, b, op):
    shape = broadcast_shapes(a.shape, b.shape, op=op)
    return broadcast_to(a, shape), broadcast_to(b, shape)


def _pdist_ref(np, a, b, p=2.0, eps=1e-6, keepdim=False):
    return (np.abs(a - b + eps) ** p).sum(-1, keepdims=keepdim) ** (1.0 / p)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((3, 4), (4,)), ((5,), (5,))), ref=_pdist_ref, name="pairwise_distance"),
    OpTest((((3, 4), (3, 4)),), ref=lambda np, a, b: _pdist_ref(np, a, b, 1.0, 1e-6, True),
           op=lambda a, b: pairwise_distance(a, b, p=1, keepdim=True), name="pairwise_distance_p1_keepdim",
           avoid=(0.0,))))
def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """||x1 - x2 + eps||_p over the last dim of the broadcast inputs."""
    a = _float(x1, "pairwise_distance")
    b = _float_tensor(x2, "pairwise_distance", "x2", like=a)
    d = a - b + float(eps)
    if d.ndim == 0:
        return _norm(d, p=p, keepdim=keepdim)
    return _norm(d, p=p, dim=d.ndim - 1, keepdim=keepdim)

