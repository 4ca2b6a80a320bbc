"""nn.functional's activations: softmax and log_softmax (fused, max-shifted Functions) and F's forms of
the elementwise activations (relu, leaky_relu, elu, silu with PyTorch's ``inplace=``; gelu, softplus,
sigmoid, tanh as calls of the ag ops, which hold their math, tests and vmap rules)."""
import warnings

from ...autograd.function import Function
from ...dtypes import is_floating, bfloat16
from .._autocast import cast_float32
from ..elementwise import (exp, relu as _relu, leaky_relu as _leaky_relu, elu as _elu, gelu as _gelu, silu as _silu,
                           sigmoid as _sigmoid, tanh as _tanh, softplus as _softplus)
from .._util import as_tensor, normalize_dim
from .. import batching
from ..batching import _wrap, _union, _expand
from ..registry import register, OpTest
from ._args import _inplace_result

_AG_ACTIVATION = "F's form of the ag op (its op-table entries test the math); inplace= and the re-export in " \
                 "tests/test_functional.py::test_activation_reexports_and_inplace"


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def relu(input, inplace=False):
    """max(x, 0)."""
    x = as_tensor(input, "relu")
    return _inplace_result(x, _relu(x), inplace)


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x."""
    x = as_tensor(input, "leaky_relu")
    return _inplace_result(x, _leaky_relu(x, negative_slope), inplace)


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    x = as_tensor(input, "elu")
    return _inplace_result(x, _elu(x, alpha), inplace)


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def silu(input, inplace=False):
    """x * sigmoid(x)."""
    x = as_tensor(input, "silu")
    return _inplace_result(x, _silu(x), inplace)


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def gelu(input, approximate="none"):
    """x * Phi(x), exact erf form, or the tanh approximation with approximate='tanh'."""
    return _gelu(input, approximate)


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, linear where beta * x > threshold."""
    return _softplus(input, beta, threshold)


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def sigmoid(input):
    """1 / (1 + exp(-x))."""
    return _sigmoid(input)


@register(namespace="nn.functional", untested=_AG_ACTIVATION)
def tanh(input):
    """Hyperbolic tangent."""
    return _tanh(input)


class LogSoftmax(Function):
    # fused: shift by the max so exp cannot overflow; logsumexp of the shifted row is log(sum) >= 0
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, dim):
        y = ctx.wrap(ctx.device.backend.log_softmax(x.data, dim))     # (one fused pass per row on a GPU)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        return LogSoftmaxBackward.of(ctx, grad, ctx.dim), None


def _log_softmax_backward_rule(cls, args, kwargs):
    """vmap: grad and y expanded to the batch dims, the dim shifted past them."""
    grad, y, dim = args
    levels = _union((grad, y))
    return _wrap(cls.apply(_expand(grad, levels, grad.shape), _expand(y, levels, y.shape), dim + len(levels)),
                 levels)


class _SoftmaxFamilyBackward(Function):
    """The backward of a softmax along dim as one node, (grad, y, dim) -> the backend's kernel named ``kernel``
    (log_softmax_backward, softmax_backward); each subclass gives its own backward (composed Tensor ops)."""
    batch_rule = _log_softmax_backward_rule
    kernel = ""

    @classmethod
    def arrays(cls, ctx, g, y, dim):
        return getattr(ctx.device.backend, cls.kernel)(g, y, dim)

    @staticmethod
    def forward(ctx, grad, y, dim):
        ctx.dim = dim
        ctx.save_for_backward(grad, y)
        return ctx.wrap(type(ctx).arrays(ctx, grad.data, y.data, dim))


class LogSoftmaxBackward(_SoftmaxFamilyBackward):
    """grad - exp(y) * sum(grad) along dim, for y = log_softmax(x)."""
    kernel = "log_softmax_backward"

    @staticmethod
    def backward(ctx, gg):
        grad, y = ctx.saved_tensors
        d = ctx.dim
        p = exp(y)
        d_grad = gg - (gg * p).sum(d, keepdims=True) if ctx.needs_input_grad[0] else None
        d_y = -(gg * p * grad.sum(d, keepdims=True)) if ctx.needs_input_grad[1] else None
        return d_grad, d_y, None


class Softmax(Function):
    # fused: the max shift keeps exp finite; backward from the saved output
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, dim):
        y = ctx.wrap(ctx.device.backend.softmax(x.data, dim))
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        return SoftmaxBackward.of(ctx, grad, ctx.dim), None


class SoftmaxBackward(_SoftmaxFamilyBackward):
    """y * (grad - sum(grad * y)) along dim, for y = softmax(x) (two launches on a GPU)."""
    kernel = "softmax_backward"

    @staticmethod
    def backward(ctx, gg):
        # out = y * grad - y * s, s = sum(grad * y): d/dgrad = y * (gg - sum(gg * y)) (this op of gg);
        # d/dy = gg * (grad - s) - grad * sum(gg * y)
        grad, y = ctx.saved_tensors
        d = ctx.dim
        d_grad = SoftmaxBackward.apply(gg, y, d) if ctx.needs_input_grad[0] else None
        d_y = gg * (grad - (grad * y).sum(d, keepdims=True)) - grad * (gg * y).sum(d, keepdims=True) \
            if ctx.needs_input_grad[1] else None
        return d_grad, d_y, None


def _softmax_dim(x, dim, dtype, op):
    x = as_tensor(x, op)
    if dtype is not None:
        x = x.to(dtype=dtype)
    if not is_floating(x.dtype):
        raise TypeError(f"{op}: expected a floating-point tensor, got dtype {x.dtype}; pass dtype=")
    if dim is None:
        warnings.warn(f"{op}: implicit dimension choice is deprecated; pass dim=", stacklevel=3)
        dim = 0 if x.ndim in (0, 1, 3) else 1
    if x.ndim == 0:
        normalize_dim(dim, 0, op)
        return x.reshape(1), 0, True
    return x, normalize_dim(dim, x.ndim, op), False


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4),), ((2, 3, 2),), ((0, 3),)), ref="refs.softmax_dim1", op=lambda x: softmax(x, dim=1),
           name="softmax"),
    OpTest((((2, 3, 4),), ((5,),)), ref="refs.softmax_last", op=lambda x: softmax(x, -1), name="softmax_last")))
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim, shifted by the max so it never overflows."""
    input, = cast_float32(input)   # autocast: run in float32
    x, d, scalar = _softmax_dim(input, dim, dtype, "softmax")
    # bfloat16 in float32, rounded once, as PyTorch computes it (the fused kernels have no bfloat16)
    y = Softmax.apply(x, d) if x.dtype is not bfloat16 else Softmax.apply(x.float(), d).to(dtype=bfloat16)
    return y.reshape(()) if scalar else y


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4),), ((2, 3, 2),)), ref="refs.log_softmax_dim1", op=lambda x: log_softmax(x, dim=1),
           name="log_softmax"),
    OpTest((((4, 2),), ((3,),)), ref="refs.log_softmax_dim0", op=lambda x: log_softmax(x, 0),
           name="log_softmax_first")))
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along dim, computed in one fused, max-shifted pass."""
    input, = cast_float32(input)   # autocast: run in float32
    x, d, scalar = _softmax_dim(input, dim, dtype, "log_softmax")
    y = LogSoftmax.apply(x, d) if x.dtype is not bfloat16 else LogSoftmax.apply(x.float(), d).to(dtype=bfloat16)
    return y.reshape(()) if scalar else y
