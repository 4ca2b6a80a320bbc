"""nn.functional (alias F): layers as functions (linear, convolution, pooling, normalisation,
dropout, embedding), softmax/log_softmax, losses and one_hot, with PyTorch's names, argument orders
and defaults. Everything runs on either device through the ops and the backend's ``xp``.

Fused Functions where PyTorch has one fused kernel and per-op overhead or numerics call for it:
``Linear`` (one BLAS call with the bias), ``LogSoftmax``/``Softmax`` (max shift), ``NllLoss`` (picks
the target column, no one-hot), ``BinaryCrossEntropy`` (log clamped at -100, finite backward). Each
backward is written with Tensor ops or further Functions, so gradients of gradients work.
"""
import builtins
import math
import warnings

from ..autograd import function as _function
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ..tensor import Tensor
from ..dtypes import result_type
from ..ops import conv as _conv
from ..ops._util import as_tensor, normalize_dim
from ..ops.elementwise import (Mul, ReluBackward, Softplus, mul, where, clamp, log, exp, rsqrt, abs as _abs, square,
                               greater, equal, relu as _relu, leaky_relu as _leaky_relu, elu as _elu, gelu as _gelu,
                               silu as _silu, sigmoid as _sigmoid, tanh as _tanh, softplus as _softplus)
from ..ops.reduction import Sum
from ..ops.shape import broadcast_shapes, broadcast_to, sum_to as _sum_to
from ..ops.linalg import MatMul, matmul
from ..ops.indexing import ScatterAddInto, IndexAddInto, _along
from ..amp import cast_low, cast_float32, _state as _amp_state
from ..backends import get_backend as _get_backend

_HOST = _get_backend("cpu").xp.ndarray    # a host array: some reductions take a faster route

__all__ = ["linear", "conv1d", "conv2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
           "adaptive_avg_pool2d", "batch_norm", "layer_norm", "dropout", "embedding", "softmax", "log_softmax",
           "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "one_hot", "relu", "leaky_relu", "elu", "gelu", "silu",
           "sigmoid", "tanh", "softplus", "scaled_dot_product_attention"]


# --------------------------------------------------------------------------- argument helpers
def _float_tensor(x, op, name="input", like=None):
    x = as_tensor(x, op, like=like)
    if x.dtype.kind != "f":
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


# --------------------------------------------------------------------------- activations
def relu(input, inplace=False):
    """max(x, 0)."""
    x = as_tensor(input, "relu")
    return _inplace_result(x, _relu(x), inplace)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x where x > 0, else negative_slope * x."""
    x = as_tensor(input, "leaky_relu")
    return _inplace_result(x, _leaky_relu(x, negative_slope), inplace)


def elu(input, alpha=1.0, inplace=False):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    x = as_tensor(input, "elu")
    return _inplace_result(x, _elu(x, alpha), inplace)


def silu(input, inplace=False):
    """x * sigmoid(x)."""
    x = as_tensor(input, "silu")
    return _inplace_result(x, _silu(x), inplace)


def gelu(input, approximate="none"):
    """x * Phi(x), exact erf form, or the tanh approximation with approximate='tanh'."""
    return _gelu(input, approximate)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, linear where beta * x > threshold."""
    return _softplus(input, beta, threshold)


def sigmoid(input):
    """1 / (1 + exp(-x))."""
    return _sigmoid(input)


def tanh(input):
    """Hyperbolic tangent."""
    return _tanh(input)


# --------------------------------------------------------------------------- linear
class Linear(Function):
    # fused x @ w.T + b (PyTorch's addmm): one node and one BLAS call, leading dims folded into rows
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return ctx.wrap(_addmm(ctx, x.data, w.data, b))

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        if ctx._direct():
            return _linear_grads_direct(ctx, grad.data, x.data, w.data)
        return _linear_grads(ctx.needs_input_grad, grad, x, w)


def _addmm(ctx, a, w, b):
    """The array a @ w.T + b, with a's leading dims folded into the rows of one BLAS call."""
    y = (ctx.device._backend or ctx.device.backend).matmul(a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a, w.T)
    if b is not None:
        y += b.data
    return y if a.ndim == 2 else y.reshape(a.shape[:-1] + (y.shape[-1],))


def _linear_grads_direct(ctx, g, x, w):
    """_linear_grads on arrays, when nothing is recorded (Function._direct): the same products, without
    the Function.apply machinery of the transpose, the two products and the sum."""
    need_x, need_w, need_b = ctx.needs_input_grad
    matmul = (ctx.device._backend or ctx.device.backend).matmul
    g = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
    gx = ctx.wrap(matmul(g, w) if x.ndim == 2 else matmul(g, w).reshape(x.shape)) if need_x else None
    gw = ctx.wrap(matmul(g.T, x if x.ndim == 2 else x.reshape(-1, x.shape[-1]))) if need_w else None
    if need_b:                                     # BLAS: 2x a column sum
        ones = ctx.xp.empty(g.shape[0], dtype=g.dtype)
        ones.fill(1)                               # (xp.ones is a Python function around these two calls)
        gb = ctx.wrap(matmul(ones, g))
    else:
        gb = None
    return gx, gw, gb


def _linear_grads(needs, grad, x, w):
    """The gradients of x @ w.T + b: two matrix products and a column sum."""
    need_x, need_w, need_b = needs
    g = grad if grad.ndim == 2 else grad.reshape(-1, grad.shape[-1])
    gx = gw = gb = None
    if need_x:
        gx = MatMul.apply(g, w)
        gx = gx if x.ndim == 2 else gx.reshape(x.shape)
    if need_w:
        gw = MatMul.apply(g.T, x if x.ndim == 2 else x.reshape(-1, x.shape[-1]))
    if need_b:
        gb = Sum.apply(g, (0,), False)
    return gx, gw, gb


class LinearReLU(Function):
    # relu(x @ w.T + b) with the relu done in place on the fresh product: one large array and one pass
    # fewer than Linear then Relu (a transformer's feed-forward block); the backward masks the
    # gradient by the saved output, which is > 0 exactly where the product was
    @staticmethod
    def forward(ctx, x, w, b):
        y = _addmm(ctx, x.data, w.data, b)
        ctx.xp.maximum(y, 0, out=y)
        y = ctx.wrap(y)
        ctx.save_for_backward(x, w, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if ctx._direct():
            x, w, y = ctx._saved_arrays()
            return _linear_grads_direct(ctx, grad.data * (y > 0), x, w)
        x, w, y = ctx.saved_tensors
        return _linear_grads(ctx.needs_input_grad, ReluBackward.apply(grad, y), x, w)


def _linear_relu(input, weight, bias=None):
    """relu(linear(input, weight, bias)) as one node (not public: Sequential and the transformer layers use it)."""
    if _plain_linear(input, weight, bias):
        return LinearReLU.apply(input, weight, bias)
    return _relu(linear(input, weight, bias))        # anything unusual: the general path checks and casts


def _plain_linear(input, weight, bias):
    """True in linear's common case, which needs none of its checks: float tensors of one dtype whose shapes
    fit, autocast off (the checks cost a small layer as much as its product)."""
    if _amp_state.active or not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        return False
    xd, wd = input.data, weight.data
    dt = wd.dtype
    return wd.ndim == 2 and xd.ndim > 0 and xd.shape[-1] == wd.shape[1] and xd.dtype is dt and dt.kind == "f" and (
        bias is None or isinstance(bias, Tensor) and bias.data.dtype is dt and bias.data.shape == wd.shape[:1])


def linear(input, weight, bias=None):
    """x @ weight.T + bias for x of shape (*, in_features), weight (out_features, in_features)."""
    if _plain_linear(input, weight, bias):
        return Linear.apply(input, weight, bias)
    x = _float_tensor(input, "linear")
    w = _float_tensor(weight, "linear", "weight", like=x)
    b = None if bias is None else _float_tensor(bias, "linear", "bias", like=x)
    if w.ndim != 2:
        raise ValueError(f"linear: expected a 2-D weight (out_features, in_features), got shape {w.shape}")
    if x.ndim == 0 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear: input of shape {x.shape} has {x.shape[-1] if x.ndim else 0} features but "
                         f"the weight of shape {w.shape} expects {w.shape[1]}")
    if b is not None and b.shape != (w.shape[0],):
        raise ValueError(f"linear: expected a bias of shape ({w.shape[0]},), got {b.shape}")
    x, w, b = cast_low(x, w, b)
    if x.dtype != w.dtype or (b is not None and b.dtype != w.dtype):
        x, w, b = _same_dtype("linear", x, w, b)
    return Linear.apply(x, w, b)


# --------------------------------------------------------------------------- convolution
def _conv_geom(op, x_shape, w_shape, stride, padding, dilation, groups):
    """(geom, (oh, ow)) for ops.conv after checking shapes and arguments (all pairs already)."""
    n, c, h, wd = x_shape
    o, cg, kh, kw = w_shape
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: expected groups to be a positive int, got {groups!r}")
    if c != cg * groups:
        raise ValueError(f"{op}: expected input with {cg * groups} channels (weight of shape {tuple(w_shape)} "
                         f"with groups={groups}), got {c} channels (input shape {tuple(x_shape)})")
    if o % groups:
        raise ValueError(f"{op}: out_channels ({o}) must be divisible by groups ({groups})")
    sh, sw = stride
    dh, dw = dilation
    if isinstance(padding, str):
        if padding == "valid":
            pads = (0, 0, 0, 0)
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride {stride})")
            th, tw = dh * (kh - 1), dw * (kw - 1)
            pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)   # the odd one extra at the end, as PyTorch
        else:
            raise ValueError(f"{op}: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    else:
        pads = (padding[0], padding[0], padding[1], padding[1])
    pt, pb, pl, pr = pads
    oh, ow = _conv.out_size(h, kh, sh, dh, pt, pb), _conv.out_size(wd, kw, sw, dw, pl, pr)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: the padded input ({h + pt + pb}x{wd + pl + pr}) is smaller than the dilated "
                         f"kernel ({dh * (kh - 1) + 1}x{dw * (kw - 1) + 1})")
    return (sh, sw, pt, pb, pl, pr, dh, dw, groups), (oh, ow)


def _conv_operands(op, input, weight, bias, nd):
    x = _float_tensor(input, op)
    w = _float_tensor(weight, op, "weight", like=x)
    b = None if bias is None else _float_tensor(bias, op, "bias", like=x)
    names = "(N, C, L)" if nd == 1 else "(N, C, H, W)"
    if x.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{op}: expected a {nd + 2}-D input {names} or a {nd + 1}-D unbatched one, "
                         f"got shape {x.shape}")
    if w.ndim != nd + 2:
        raise ValueError(f"{op}: expected a {nd + 2}-D weight (out_channels, in_channels / groups, "
                         f"{'k' if nd == 1 else 'kh, kw'}), got shape {w.shape}")
    if b is not None and b.shape != (w.shape[0],):
        raise ValueError(f"{op}: expected a bias of shape ({w.shape[0]},), got {b.shape}")
    if x.dtype != w.dtype or (b is not None and b.dtype != w.dtype):
        x, w, b = _same_dtype(op, x, w, b)
    return cast_low(x, w, b)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation, PyTorch's conv2d: input (N, C, H, W) or (C, H, W), weight
    (out_channels, C / groups, kh, kw); padding an int, a pair, 'valid' or 'same'."""
    x, w, b = _conv_operands("conv2d", input, weight, bias, 2)
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape((1,) + x.shape)
    pad = padding if isinstance(padding, str) else _pair(padding, "padding", "conv2d", 0)
    geom, _ = _conv_geom("conv2d", x.shape, w.shape, _pair(stride, "stride", "conv2d"), pad,
                         _pair(dilation, "dilation", "conv2d"), groups)
    y = _conv.conv2d(x, w, b, geom)
    return y.reshape(y.shape[1:]) if unbatched else y


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation: input (N, C, L) or (C, L), weight (out_channels, C / groups, k); a 2-D
    convolution over a unit height."""
    x, w, b = _conv_operands("conv1d", input, weight, bias, 1)
    unbatched = x.ndim == 2
    x = x.reshape((1,) + x.shape[:1] + (1,) + x.shape[1:]) if unbatched else x.reshape(x.shape[:2] + (1,) + x.shape[2:])
    w = w.reshape(w.shape[:2] + (1,) + w.shape[2:])
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", 0))
    geom, _ = _conv_geom("conv1d", x.shape, w.shape, (1, _single(stride, "stride")), pad,
                         (1, _single(dilation, "dilation")), groups)
    y = _conv.conv2d(x, w, b, geom)
    return y.reshape(y.shape[1:2] + y.shape[3:]) if unbatched else y.reshape(y.shape[:2] + y.shape[3:])


def _single(v, name, minimum=1, op="conv1d"):
    if isinstance(v, (tuple, list)) and len(v) == 1:
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{op}: expected {name} as an int, got {v!r}")
    if v < minimum:
        raise ValueError(f"{op}: expected {name} of at least {minimum}, got {v!r}")
    return v


# --------------------------------------------------------------------------- pooling
def _pool_input(input, op):
    x = _float_tensor(input, op)
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), "
                         f"got shape {x.shape}")
    return (x.reshape((1,) + x.shape), True) if x.ndim == 3 else (x, False)


def _pool_len(n, k, s, p, d, ceil_mode):
    """(output length, padding after) for pooling, with PyTorch's ceil_mode rule that the last window
    must start inside the input or the leading padding."""
    span = d * (k - 1) + 1
    out = (n + 2 * p - span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out, builtins.max(p, (out - 1) * s + span - n - p)


def _pool_geom(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw = _pair(kernel_size, "kernel_size", op)
    sh, sw = (kh, kw) if stride is None or stride == () or stride == [] else _pair(stride, "stride", op)
    ph, pw = _pair(padding, "padding", op, 0)
    dh, dw = _pair(dilation, "dilation", op)
    if ph > kh // 2 or pw > kw // 2:
        raise ValueError(f"{op}: padding should be at most half the kernel size, got padding {(ph, pw)} for kernel "
                         f"{(kh, kw)}")
    h, w = x.shape[2:]
    oh, pb = _pool_len(h, kh, sh, ph, dh, ceil_mode)
    ow, pr = _pool_len(w, kw, sw, pw, dw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: the input of shape {x.shape} is too small for kernel {(kh, kw)} (dilation "
                         f"{(dh, dw)}, padding {(ph, pw)}): the output would be {oh}x{ow}")
    return (kh, kw), (sh, sw, ph, pb, pw, pr, dh, dw, 1), (oh, ow)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over kernel_size windows (stride defaults to kernel_size, padding counts as -inf); the gradient
    goes to the first maximum of each window. return_indices also gives each maximum's flat index in H*W."""
    x, unbatched = _pool_input(input, "max_pool2d")
    (kh, kw), geom, (oh, ow) = _pool_geom("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    y = _conv.max_pool2d(x, kh, kw, geom, oh, ow)
    if unbatched:
        y = y.reshape(y.shape[1:])
    if not return_indices:
        return y
    idx = _conv.max_pool_indices(x.device.backend.xp, x.data, kh, kw, geom, oh, ow)
    return y, Tensor._make(idx[0] if unbatched else idx, x.device)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of the last dim of (N, C, L) or (C, L)."""
    x = _float_tensor(input, "max_pool1d")
    if x.ndim not in (2, 3):
        raise ValueError(f"max_pool1d: expected a 3-D input (N, C, L) or a 2-D unbatched one, got shape {x.shape}")
    op = "max_pool1d"
    y = max_pool2d(x.unsqueeze(-2), (1, _single(kernel_size, "kernel_size", op=op)),
                   None if stride is None else (1, _single(stride, "stride", op=op)),
                   (0, _single(padding, "padding", 0, op)), (1, _single(dilation, "dilation", op=op)),
                   ceil_mode, return_indices)
    return (y[0].squeeze(-2), y[1].squeeze(-2)) if return_indices else y.squeeze(-2)


def _avg_divisors(n, k, s, p, out, count_include_pad):
    """PyTorch's divisor per output position along one dim: the window clipped to the padded input
    (count_include_pad) or to the input itself."""
    sizes = []
    for i in range(out):
        lo = i * s - p
        hi = builtins.min(lo + k, n + p)
        sizes.append(hi - lo if count_include_pad else builtins.min(hi, n) - builtins.max(lo, 0))
    return sizes


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over kernel_size windows (stride defaults to kernel_size); by default zero padding counts
    in the mean (count_include_pad=True), as in PyTorch."""
    x, unbatched = _pool_input(input, "avg_pool2d")
    (kh, kw), geom, (oh, ow) = _pool_geom("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    sh, sw, ph, _, pw, _, _, _, _ = geom
    h, w = x.shape[2:]
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or not isinstance(divisor_override, int) or divisor_override <= 0:
            raise ValueError(f"avg_pool2d: divisor_override must be a positive int, got {divisor_override!r}")
        scale = 1.0 / divisor_override
    else:
        rows = _avg_divisors(h, kh, sh, ph, oh, count_include_pad)
        cols = _avg_divisors(w, kw, sw, pw, ow, count_include_pad)
        if len(set(rows)) == 1 and len(set(cols)) == 1:
            scale = 1.0 / (rows[0] * cols[0])
        else:
            xp = x.device.backend.xp
            div = xp.asarray(rows, dtype=x.dtype).reshape(-1, 1) * xp.asarray(cols, dtype=x.dtype).reshape(1, -1)
            scale = Tensor._make(1 / div, x.device)
    y = _conv.avg_pool2d(x, kh, kw, geom, oh, ow, scale)
    return y.reshape(y.shape[1:]) if unbatched else y


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over windows of the last dim of (N, C, L) or (C, L)."""
    x = _float_tensor(input, "avg_pool1d")
    if x.ndim not in (2, 3):
        raise ValueError(f"avg_pool1d: expected a 3-D input (N, C, L) or a 2-D unbatched one, got shape {x.shape}")
    return avg_pool2d(x.unsqueeze(-2), (1, _single(kernel_size, "kernel_size", op="avg_pool1d")),
                      None if stride is None else (1, _single(stride, "stride", op="avg_pool1d")),
                      (0, _single(padding, "padding", 0, "avg_pool1d")), ceil_mode, count_include_pad).squeeze(-2)


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed (oh, ow) (None keeps that size) with PyTorch's windows
    [floor(i*H/oh), ceil((i+1)*H/oh)); separable, so it is A_h @ x @ A_w.T."""
    x, unbatched = _pool_input(input, "adaptive_avg_pool2d")
    h, w = x.shape[2:]
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh, ow = h if oh is None else oh, w if ow is None else ow
    if oh <= 0 or ow <= 0:
        raise ValueError(f"adaptive_avg_pool2d: expected a positive output size, got {output_size!r}")
    if h % oh == 0 and w % ow == 0:
        y = avg_pool2d(x, (h // oh, w // ow))
    else:
        y = matmul(matmul(_avg_matrix(h, oh, x), x), _avg_matrix(w, ow, x).T)
    return y.reshape(y.shape[1:]) if unbatched else y


def _avg_matrix(n, out, like):
    """(out, n) matrix whose row i averages PyTorch's adaptive window i."""
    xp = like.device.backend.xp
    m = xp.zeros((out, n), dtype=like.dtype)
    for i in range(out):
        lo, hi = (i * n) // out, -(-((i + 1) * n) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return Tensor._make(m, like.device)


# --------------------------------------------------------------------------- normalisation
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1) by the batch statistics (training) or the running ones. In training
    the running statistics are updated in place: r = (1 - momentum) * r + momentum * batch statistic,
    the variance unbiased, as in PyTorch."""
    input, = cast_float32(input)   # autocast: run in float32
    x = _float_tensor(input, "batch_norm")
    if x.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (N, C, ...), got shape {x.shape}")
    c = x.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        if t is not None and (not isinstance(t, Tensor) or t.shape != (c,)):
            got = t.shape if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"batch_norm: expected {name} of shape ({c},) for an input with {c} channels, got {got}")
    shape = (1, c) + (1,) * (x.ndim - 2)
    if not training:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are required when training=False")
        # y = x * scale + shift, the per-channel factors folded first (cheap), all differentiable
        scale = rsqrt(running_var + eps)
        if weight is not None:
            scale = scale * weight
        shift = -running_mean * scale if bias is None else bias - running_mean * scale
        return x * scale.reshape(shape) + shift.reshape(shape)
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.numel() // c if c else 0
    if n <= 1:
        raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input of "
                         f"shape {x.shape}")
    mean = x.mean(axes, keepdims=True)
    xc = x - mean
    var = (xc * xc).mean(axes, keepdims=True)
    if running_mean is not None or running_var is not None:
        _update_running(running_mean, mean.data.reshape(c), momentum)
        _update_running(running_var, var.data.reshape(c) * (n / (n - 1)), momentum)
    y = xc * rsqrt(var + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def _update_running(r, stat, momentum):
    """r = (1 - momentum) * r + momentum * stat in place, outside the graph (a new version of r)."""
    if r is None:
        return
    r.data *= 1.0 - momentum
    r.data += stat * momentum
    r._bump_version()


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing dims ``normalized_shape`` (biased variance), then weight and bias
    (of that shape) elementwise."""
    input, = cast_float32(input)   # autocast: run in float32
    x = _float_tensor(input, "layer_norm")
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or x.shape[x.ndim - k:] != ns or k > x.ndim:
        raise ValueError(f"layer_norm: expected an input whose trailing dims are normalized_shape {ns}, "
                         f"got shape {x.shape}")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.shape != ns:
            raise ValueError(f"layer_norm: expected {name} of shape {ns}, got {t.shape}")
    axes = tuple(range(x.ndim - k, x.ndim))
    w, b = weight, bias
    if (w is not None and w.dtype != x.dtype) or (b is not None and b.dtype != x.dtype):
        x, w, b = _same_dtype("layer_norm", x, w, b)
    return LayerNorm.apply(x, w, b, axes, float(eps))


def _normalized(x, axes, eps):
    """(x - mean) / std over axes and 1 / std, as recorded Tensor ops (for gradients of gradients)."""
    xc = x - x.mean(axes, keepdims=True)
    rstd = rsqrt((xc * xc).mean(axes, keepdims=True) + eps)
    return xc * rstd, rstd


class LayerNorm(Function):
    # fused, on the input as (rows, n) with n the normalised size: the row sums are BLAS matrix-vector
    # products with a ones vector and the variance one row dot (backend.row_dot: an einsum on NumPy, as a
    # NumPy reduction over the last axis is 5x slower), so the forward makes three passes over the input
    # and the backward six. The backward gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = grad *
    # weight, from the saved normalised input (recomputed as recorded ops under create_graph, so it
    # differentiates again)
    @staticmethod
    def forward(ctx, x, w, b, axes, eps):
        xp, mm = ctx.xp, (ctx.device._backend or ctx.device.backend).matmul
        a = x.data
        k = a.ndim - len(axes)
        n = _prod(a.shape[k:])
        a2 = a.reshape(_prod(a.shape[:k]), n)
        ones = xp.ones(n, dtype=a.dtype)
        xc = a2 - _row_sums(xp, mm, a2, ones, 1.0 / n)[:, None] if n else a2.copy()
        var = _row_dot(xp, ctx.device._backend or ctx.device.backend, xc, xc, 1.0 / builtins.max(n, 1))
        var += eps
        rstd = xp.sqrt(var, out=var)
        xp.reciprocal(rstd, out=rstd)
        xc *= rstd[:, None]
        y = xc * w.data.reshape(n) if w is not None else xc.copy()
        if b is not None:
            y += b.data.reshape(n)
        ctx.axes, ctx.eps, ctx.xhat, ctx.rstd = axes, eps, xc, rstd
        ctx.save_for_backward(x, w, b)
        return ctx.wrap(y.reshape(a.shape))

    @staticmethod
    def backward(ctx, grad):
        x, w, b = ctx.saved_tensors
        axes = ctx.axes
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        lead = tuple(range(x.ndim - len(axes)))
        if not state.enabled:       # no graph of the gradient wanted: in-place array passes, few allocations
            return LayerNorm._backward_arrays(ctx, grad.data, None if w is None else w.data, x.shape)
        xhat, rstd = _normalized(x, axes, ctx.eps)
        gw = (grad * xhat).sum(lead) if need_w else None
        gb = grad.sum(lead) if need_b else None
        gx = None
        if need_x:
            g = grad if w is None else grad * w
            gx = (g - g.mean(axes, keepdims=True) - xhat * (g * xhat).mean(axes, keepdims=True)) * rstd
        return gx, gw, gb, None, None

    @staticmethod
    def _backward_arrays(ctx, g, w, shape):
        """The backward above on arrays (the result is not differentiated again), on (rows, n): the
        column sums (weight and bias gradients) and row means are BLAS products with ones vectors, and
        mean(g * w * xhat) is (grad * xhat) @ w, reusing the product the weight's gradient needs. On the
        CPU in blocks of rows (about 256 KiB an array), so the six passes over a block stay in cache: 25%
        faster on (4096, 256) float32 than whole arrays read back from memory each pass."""
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        xp, backend = ctx.xp, ctx.device._backend or ctx.device.backend
        xhat, rstd = ctx.xhat, ctx.rstd
        rows, n = xhat.shape
        g = g.reshape(rows, n)
        w = None if w is None else w.reshape(n)
        step = builtins.max(1, rows if backend.name != "numpy" else (1 << 16) // builtins.max(n, 1))   # 1: no rows
        gx = xp.empty((rows, n), dtype=xhat.dtype) if need_x else None
        gw = gb = None
        for r0 in range(0, builtins.max(rows, 1), step):
            b = slice(r0, r0 + step)
            bw, bb = _layer_norm_block(xp, backend.matmul, g[b], xhat[b], rstd[b], w, None if gx is None else gx[b],
                                       need_w, need_b)
            gw = bw if gw is None else gw + bw
            gb = bb if gb is None else gb + bb
        wshape = shape[len(shape) - len(ctx.axes):]
        return (None if gx is None else ctx.wrap(gx.reshape(shape)), ctx.wrap(gw.reshape(wshape)) if need_w else None,
                ctx.wrap(gb.reshape(wshape)) if need_b else None, None, None)


def _layer_norm_block(xp, mm, g, xhat, rstd, w, gx, need_w, need_b):
    """LayerNorm's backward on a block of rows: writes gx = rstd * (g w - mean(g w) - xhat mean(g w xhat))
    when given, returns this block's (weight, bias) gradient sums (None where not wanted)."""
    rows, n = xhat.shape
    ones_r = xp.ones(rows, dtype=xhat.dtype)
    t = g * xhat                                       # grad * xhat
    gw = mm(ones_r, t) if need_w else None
    gb = mm(ones_r, g) if need_b else None
    if gx is not None:
        u = xp.multiply(g, w, out=gx) if w is not None else _copy_into(xp, g, gx)    # g = grad * weight
        ones = xp.ones(n, dtype=xhat.dtype)
        c1 = _row_sums(xp, mm, u, ones, rstd * (1.0 / builtins.max(n, 1)))      # rstd * mean(g)
        c2 = _row_sums(xp, mm, t, w if w is not None else ones, rstd * (1.0 / builtins.max(n, 1)))  # rstd mean(g xhat)
        u *= rstd[:, None]                             # rstd * g - rstd mean(g) - xhat * rstd mean(g xhat)
        u -= xp.multiply(xhat, c2[:, None], out=t)
        u -= c1[:, None]
    return gw, gb


def _copy_into(xp, a, out):
    out[...] = a
    return out


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _row_sums(xp, mm, a, v, scale):
    """(a @ v) * scale for a (rows, n) array, in a's dtype; float16 through float32, since a sum of n
    float16 values overflows where their mean does not (a.mean() also sums float16 in float32)."""
    if a.dtype.itemsize < 4:
        return (mm(a.astype(xp.float32), v.astype(xp.float32)) * scale).astype(a.dtype)
    s = mm(a, v)
    s *= scale
    return s


def _row_dot(xp, backend, a, b, scale):
    """sum(a * b) * scale over the last axis of two (rows, n) arrays, as one pass where the backend has one
    (backend.row_dot); float16 through float32 up to the scaled result, so the sum (n times the mean)
    does not overflow."""
    if a.dtype.itemsize < 4:
        return ((a.astype(xp.float32) * b).sum(axis=-1) * scale).astype(a.dtype)
    d = backend.row_dot(a, b)
    d *= scale
    return d


# --------------------------------------------------------------------------- dropout, embedding, one_hot
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when not
    training or p == 0). The mask comes from the device's generator, so ag.manual_seed makes it
    reproducible."""
    x = as_tensor(input, "dropout")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: expected a probability p in [0, 1], got {p!r}")
    if not training or p == 0:
        return x
    if x.dtype.kind != "f":
        raise TypeError(f"dropout: expected a floating-point tensor, got dtype {x.dtype}")
    backend = x.device.backend
    if p == 1:
        mask = backend.xp.zeros(x.shape, dtype=x.dtype)
    else:
        keep = backend.rand(x.shape, x.dtype) >= p
        mask = keep.astype(x.dtype)
        mask *= 1.0 / (1.0 - p)
    return _inplace_result(x, Mul.apply(x, Tensor._make(mask, x.device)), inplace)


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


class Embedding(Function):
    """weight[indices]; the backward scatter-adds rows (repeated indices sum), skipping padding_idx and
    scaled by 1/count with scale_grad_by_freq."""

    @staticmethod
    def forward(ctx, weight, idx, row_scale):
        ctx.idx, ctx.row_scale, ctx.shape = idx, row_scale, weight.data.shape
        return ctx.wrap(weight.data[idx])

    @staticmethod
    def backward(ctx, grad):
        g = grad if ctx.row_scale is None else mul(grad, ctx.wrap(ctx.row_scale))
        return IndexAddInto.apply(g, ctx.shape, (ctx.idx, Ellipsis), False), None, None


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of weight (num_embeddings, dim) picked by integer indices of any shape -> (*indices.shape, dim).
    The row padding_idx gets no gradient; max_norm renormalises the picked rows in place first."""
    w = _float_tensor(weight, "embedding", "weight")
    if w.ndim != 2:
        raise ValueError(f"embedding: expected a 2-D weight (num_embeddings, embedding_dim), got shape {w.shape}")
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported; use sparse=False")
    idx = _index_tensor(input, w, "embedding", "input").data
    n = w.shape[0]
    _check_range(w.device.backend, idx, n, "embedding", "index", f" for a weight with {n} rows")
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx must be within [-{n}, {n}), got {padding_idx}")
        padding_idx %= n
    if max_norm is not None:
        _renorm_rows(w, idx, max_norm, norm_type)
    xp = w.device.backend.xp
    row_scale = None
    if padding_idx is not None or scale_grad_by_freq:
        row_scale = xp.ones(idx.shape + (1,), dtype=w.dtype)
        if scale_grad_by_freq:                     # counts by scatter-add: bincount would sync on a GPU
            counts = xp.zeros(n, dtype=w.dtype)
            w.device.backend.scatter_add(counts, idx.reshape(-1), xp.ones(idx.size, dtype=w.dtype))
            row_scale /= counts[idx][..., None]
        if padding_idx is not None:
            row_scale *= (idx != padding_idx)[..., None]
    return Embedding.apply(w, idx, row_scale)


def _renorm_rows(w, idx, max_norm, norm_type):
    """Rows of w picked by idx whose norm exceeds max_norm scaled down to it, in place (PyTorch's
    embedding_renorm_, outside the graph)."""
    xp = w.device.backend.xp
    rows = xp.unique(idx.reshape(-1))
    r = w.data[rows]
    norms = (xp.abs(r) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
    factor = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
    w.data[rows] = r * factor[:, None]
    w._bump_version()


def one_hot(tensor, num_classes=-1):
    """int64 tensor with a trailing dim of num_classes (max + 1 when -1): 1 at each index, else 0; no gradient."""
    t = as_tensor(tensor, "one_hot")
    if t.dtype.kind not in "iu":
        raise TypeError(f"one_hot: expected an integer tensor of class indices, got dtype {t.dtype}")
    a = t.data
    if num_classes == -1:
        if a.size == 0:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass num_classes")
        num_classes = int(t.device.backend.read_back(a.max(), "one_hot with num_classes=-1")) + 1
    _check_range(t.device.backend, a, num_classes, "one_hot", "class value", exc=ValueError)
    xp = t.device.backend.xp
    return Tensor._make((a[..., None] == xp.arange(num_classes)).astype("int64"), t.device)


# --------------------------------------------------------------------------- softmax, log_softmax
def _shifted(xp, a, dim):
    """a - max(a) along dim (rows that are all -inf shift by 0, giving nan like PyTorch, not a warning)."""
    if a.__class__ is _HOST and a.ndim == 2 and dim in (1, -1) and a.shape[1] <= 64 and a.shape[0] >= 16:
        # NumPy reduces short rows one by one (7.4 us for (128, 10) float32); the transposed copy
        # reduced along its first axis is one vectorised pass (1.7 us), with the same maxima
        m = xp.ascontiguousarray(a.T).max(axis=0)[:, None]
    else:
        m = a.max(axis=dim, keepdims=True)
    return a - xp.where(xp.isfinite(m), m, 0)


def _log_softmax_array(xp, a, dim):
    if a.shape[dim] == 0:
        return a.copy()
    s = _shifted(xp, a, dim)
    return s - xp.log(xp.exp(s).sum(axis=dim, keepdims=True))


class LogSoftmax(Function):
    # fused: shift by the max so exp cannot overflow; logsumexp of the shifted row is log(sum) >= 0
    @staticmethod
    def forward(ctx, x, dim):
        y = ctx.wrap(_log_softmax_array(ctx.xp, x.data, dim))
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        if ctx._direct():                  # LogSoftmaxBackward's forward, on arrays
            g = grad.data
            return ctx.wrap(g - ctx.xp.exp(y.data) * g.sum(axis=ctx.dim, keepdims=True)), None
        return LogSoftmaxBackward.apply(grad, y, ctx.dim), None


class LogSoftmaxBackward(Function):
    """grad - exp(y) * sum(grad) along dim, as one node; its own backward composes Tensor ops."""

    @staticmethod
    def forward(ctx, grad, y, dim):
        ctx.dim = dim
        ctx.save_for_backward(grad, y)
        g = grad.data
        return ctx.wrap(g - ctx.xp.exp(y.data) * g.sum(axis=dim, keepdims=True))

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
    @staticmethod
    def forward(ctx, x, dim):
        xp = ctx.xp
        a = x.data
        if a.shape[dim] == 0:
            y = a.copy()
        else:
            e = xp.exp(_shifted(xp, a, dim))
            y = e / e.sum(axis=dim, keepdims=True)
        y = ctx.wrap(y)
        ctx.dim = dim
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        gy = grad * y
        return gy - y * gy.sum(ctx.dim, keepdims=True), None


def _softmax_dim(x, dim, dtype, op):
    x = as_tensor(x, op)
    if dtype is not None:
        x = x.to(dtype=dtype)
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating-point tensor, got dtype {x.dtype}; pass dtype=")
    if dim is None:
        warnings.warn(f"{op}: implicit dimension choice is deprecated; pass dim=", stacklevel=3)
        dim = 0 if x.ndim in (0, 1, 3) else 1
    if x.ndim == 0:
        normalize_dim(dim, 0, op)
        return x.reshape(1), 0, True
    return x, normalize_dim(dim, x.ndim, op), False


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along dim, shifted by the max so it never overflows."""
    input, = cast_float32(input)   # autocast: run in float32
    x, d, scalar = _softmax_dim(input, dim, dtype, "softmax")
    y = Softmax.apply(x, d)
    return y.reshape(()) if scalar else y


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along dim, computed in one fused, max-shifted pass."""
    input, = cast_float32(input)   # autocast: run in float32
    x, d, scalar = _softmax_dim(input, dim, dtype, "log_softmax")
    y = LogSoftmax.apply(x, d)
    return y.reshape(()) if scalar else y


# --------------------------------------------------------------------------- attention
def _softmax_rows(xp, s):
    """softmax over the last dim of the float array s, in place; a row whose scores are all -inf (every
    key masked out) gives zeros, as PyTorch's scaled_dot_product_attention, not nan."""
    if s.shape[-1] == 0:          # no keys: nothing to normalise (the output is zeros, as PyTorch's)
        return s
    m = s.max(axis=-1, keepdims=True)
    xp.maximum(m, xp.finfo(s.dtype).min, out=m)    # an all -inf row shifts by a finite number: exp gives 0
    s -= m
    xp.exp(s, out=s)
    d = s.sum(axis=-1, keepdims=True)
    xp.maximum(d, 1.0, out=d)     # a live row sums to >= 1 after the max shift; a dead row to 0 -> stays 0
    s /= d
    return s


def _laid_out_like(backend, a, shape):
    """For matmul's out=: an empty array of ``shape`` whose axes lie in memory in the order of a's (the
    heads of attention are strided views of a (N, L, H*E) projection, so results laid out as (N, L, H, E)
    make the caller's permute and reshape back to (N, L, H*E) views, not copies); None (matmul allocates)
    where the dims differ, or off the CPU, where cuBLAS wants its own layouts."""
    if backend.name != "numpy" or len(shape) != a.ndim:
        return None
    return backend.xp.empty_like(a, shape=shape)


class ScaledDotProductAttention(Function):
    # fused softmax(q k^T * scale + mask) [* dropout] @ v: two matmuls and a few in-place passes over the
    # (L, S) scores instead of six recorded ops; the probabilities are saved, so backward is two matmuls
    # per input and dS = P * (dP - sum(dP * P)). ``keep`` is the dropout mask already scaled by 1/(1-p).
    @staticmethod
    def forward(ctx, q, k, v, mask, scale, keep):
        xp, backend = ctx.xp, ctx.device._backend or ctx.device.backend
        qs = q.data * scale        # the scale on q, not on the scores (fewer elements when S > E); the
        ctx.scale, ctx.keep, ctx.qs = scale, keep, qs                # backward's dK = dS^T @ (q * scale) reuses it
        ctx.save_for_backward(q, k, v, mask)
        ctx.blocks = _causal_blocks(backend, q, k, v, mask, keep, ctx.needs_input_grad[3])
        if ctx.blocks is not None:
            ctx.p, out = _causal_forward(backend, ctx.blocks, qs, k.data, v.data, mask.data)
            return ctx.wrap(out)
        s = backend.matmul(qs, xp.swapaxes(k.data, -1, -2))
        if mask is not None:
            s += mask.data
        p = ctx.p = _softmax_rows(xp, s)
        out = _laid_out_like(backend, q.data, p.shape[:-1] + v.shape[-1:])
        return ctx.wrap(backend.matmul(p if keep is None else p * keep, v.data, out=out))

    @staticmethod
    def backward(ctx, grad):
        q, k, v, mask = ctx.saved_tensors
        need_q, need_k, need_v, need_mask = ctx.needs_input_grad[:4]
        if not state.enabled:       # no graph of the gradient wanted: in-place array passes
            return ScaledDotProductAttention._backward_arrays(ctx, grad, q, k, v, mask)
        s = matmul(q, k.swapaxes(-1, -2)) * ctx.scale     # the probabilities as recorded ops, to differentiate
        p = Softmax.apply(s if mask is None else s + mask, s.ndim - 1)
        keep = None if ctx.keep is None else ctx.wrap(ctx.keep)
        gv = None
        if need_v:
            gv = _sum_to(matmul((p if keep is None else p * keep).swapaxes(-1, -2), grad), v.shape)
        if not (need_q or need_k or need_mask):
            return None, None, gv, None, None, None
        dp = matmul(grad, v.swapaxes(-1, -2))
        if keep is not None:
            dp = dp * keep
        ds = p * (dp - (dp * p).sum(-1, keepdims=True))
        gmask = _sum_to(ds, mask.shape) if need_mask else None
        ds = ds * ctx.scale
        gq = _sum_to(matmul(ds, k), q.shape) if need_q else None
        gk = _sum_to(matmul(ds.swapaxes(-1, -2), q), k.shape) if need_k else None
        return gq, gk, gv, gmask, None, None

    @staticmethod
    def _backward_arrays(ctx, grad, q, k, v, mask):
        """The backward above on arrays: dP and dS share one buffer, the scale goes on the (L, E) arrays (dK from the saved q * scale)."""
        need_q, need_k, need_v, need_mask = ctx.needs_input_grad[:4]
        xp, backend = ctx.xp, ctx.device._backend or ctx.device.backend
        mm = backend.matmul
        p, keep, g = ctx.p, ctx.keep, grad.data
        wrap = ctx.wrap
        if ctx.blocks is not None:
            gq, gk, gv = _causal_backward(backend, ctx.blocks, p, g, ctx.qs, k.data, v.data, (need_q, need_k, need_v))
            if need_q:
                gq *= ctx.scale
            return tuple(None if a is None else wrap(a) for a in (gq, gk, gv)) + (None, None, None)

        def reduced(a, shape):         # the gradient of a broadcast input: summed back to its shape
            return _sum_to(wrap(a), shape)

        def product(a, b, like):       # a @ b, laid out in memory as the input it is the gradient of
            return mm(a, b, out=_laid_out_like(backend, like, like.shape) if a.shape[:-1] + b.shape[-1:] == like.shape
                      else None)
        gv = reduced(product(xp.swapaxes(p if keep is None else p * keep, -1, -2), g, v.data), v.shape) if need_v \
            else None
        if not (need_q or need_k or need_mask):
            return None, None, gv, None, None, None
        ds = mm(g, xp.swapaxes(v.data, -1, -2))           # dP, then dS = P * (dP - sum(dP * P)) in place
        if keep is not None:
            ds *= keep
        rowdot = backend.row_dot(ds, p)[..., None]
        ds -= rowdot
        ds *= p
        gmask = reduced(ds, mask.shape) if need_mask else None
        gq = gk = None
        if need_q:
            gq = product(ds, k.data, q.data)
            gq *= ctx.scale
            gq = reduced(gq, q.shape)
        if need_k:
            gk = reduced(product(xp.swapaxes(ds, -1, -2), ctx.qs, k.data), k.shape)
        return gq, gk, gv, gmask, None, None


# Causal attention on the CPU skips the keys a query cannot see: the queries in CAUSAL_BLOCKS row blocks,
# block i against keys [0, end of block i) only, so the scores, softmax and products cover 10/16 of the
# (L, L) square with 4 blocks (PyTorch's CPU kernel for is_causal skips them too). Taken when the additive
# mask is exactly the causal one (is_causal, or an attn_mask equal to it, as a TransformerEncoderLayer
# given generate_square_subsequent_mask passes), L == S >= 64, no dropout, same batch dims, on NumPy.
CAUSAL_BLOCKS = 4
CAUSAL_MASKS_KEPT = 4      # (L, dtype) -> the (L, L) causal mask, for the last few lengths only (not one per length)
_causal_masks = {}


def _causal_blocks(backend, q, k, v, mask, keep, need_mask):
    """The query row blocks [(r0, r1), ...] when the blocked causal path applies, else None."""
    L = q.shape[-2]
    if (backend.name != "numpy" or mask is None or need_mask or keep is not None or L < 64 or k.shape[-2] != L
            or mask.shape != (L, L) or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        return None
    key = (L, mask.dtype)
    causal = _causal_masks.get(key)
    if causal is None:
        causal = backend.xp.triu(backend.xp.full((L, L), -math.inf, dtype=mask.dtype), 1)
        while len(_causal_masks) >= CAUSAL_MASKS_KEPT:
            _causal_masks.pop(next(iter(_causal_masks)), None)      # the oldest
        _causal_masks[key] = causal
    if not backend.xp.array_equal(mask.data, causal):
        return None
    b = -(-L // CAUSAL_BLOCKS)
    return [(r0, builtins.min(L, r0 + b)) for r0 in range(0, L, b)]


def _causal_forward(backend, blocks, qs, k, v, causal):
    """(probabilities of each row block, output): softmax(qs k^T + causal) @ v block by block; ``causal``
    the (L, L) mask, checked equal to the causal one (its diagonal blocks are all alike)."""
    xp, mm = backend.xp, backend.matmul
    out = _laid_out_like(backend, qs, qs.shape[:-1] + v.shape[-1:])
    ps = []
    for r0, r1 in blocks:
        s = mm(qs[..., r0:r1, :], xp.swapaxes(k[..., :r1, :], -1, -2))       # (..., block, r1)
        s[..., r0:] += causal[:r1 - r0, :r1 - r0]
        ps.append(_softmax_rows(xp, s))
        mm(s, v[..., :r1, :], out=out[..., r0:r1, :])
    return ps, out


def _causal_backward(backend, blocks, ps, g, qs, k, v, needs):
    """(dq / scale, dk, dv) of the blocked causal attention; the last block (all keys) writes dk and dv
    whole, the earlier ones add into their leading keys."""
    xp, mm = backend.xp, backend.matmul
    need_q, need_k, need_v = needs
    gq = _laid_out_like(backend, qs, qs.shape) if need_q else None
    gk = _laid_out_like(backend, k, k.shape) if need_k else None
    gv = _laid_out_like(backend, v, v.shape) if need_v else None
    for (r0, r1), p in reversed(list(zip(blocks, ps))):
        gi, whole = g[..., r0:r1, :], r1 == qs.shape[-2]
        if need_v:
            _into(mm, xp.swapaxes(p, -1, -2), gi, gv, r1, whole)
        if need_q or need_k:
            ds = mm(gi, xp.swapaxes(v[..., :r1, :], -1, -2))     # dP, then dS = P * (dP - sum(dP * P))
            ds -= backend.row_dot(ds, p)[..., None]
            ds *= p
            if need_q:
                mm(ds, k[..., :r1, :], out=gq[..., r0:r1, :])
            if need_k:
                _into(mm, xp.swapaxes(ds, -1, -2), qs[..., r0:r1, :], gk, r1, whole)
    return gq, gk, gv


def _into(mm, a, b, out, r1, whole):
    """out = a @ b when ``whole``, else out[..., :r1, :] += a @ b."""
    if whole:
        mm(a, b, out=out)
    else:
        out[..., :r1, :] += mm(a, b)


def _attn_mask(mask, q, op):
    """attn_mask as an additive float mask of q's dtype: bool True = takes part (0), False = -inf."""
    m = as_tensor(mask, op, like=q)
    if m.dtype.kind == "b":
        xp = m.device.backend.xp
        return Tensor._make(m.device.backend.call(lambda: xp.where(m.data, 0.0, -math.inf).astype(q.dtype)), m.device)
    if m.dtype.kind != "f":
        raise TypeError(f"{op}: expected attn_mask to be bool or floating point, got dtype {m.dtype}")
    return m if m.dtype == q.dtype else m.to(dtype=q.dtype)


def _causal_mask(q, L, S):
    """The additive mask of is_causal: query i sees keys 0..i (top-left aligned, as PyTorch)."""
    backend = q.device.backend
    xp = backend.xp
    return Tensor._make(backend.call(lambda: xp.triu(xp.full((L, S), -math.inf, dtype=q.dtype), 1)), q.device)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value for query (..., L, E), key (..., S, E), value
    (..., S, Ev) -> (..., L, Ev); batch dims broadcast. attn_mask: bool (True = takes part) or float
    (added to the scores), broadcastable to (..., L, S); is_causal masks keys after the query's position;
    dropout_p > 0 drops attention weights; scale defaults to 1/sqrt(E). With enable_gqa, key and value
    may have fewer heads (dim -3) than query, each shared by a group of query heads."""
    op = "scaled_dot_product_attention"
    q = _float_tensor(query, op, "query")
    k = _float_tensor(key, op, "key", like=q)
    v = _float_tensor(value, op, "value", like=q)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise ValueError(f"{op}: expected query, key and value of at least 2 dims (..., L, E), got shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{op}: expected query (..., L, E), key (..., S, E) and value (..., S, Ev), got shapes "
                         f"{q.shape}, {k.shape}, {v.shape}")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)) or not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"{op}: expected dropout_p in [0, 1], got {dropout_p!r}")
    if is_causal and attn_mask is not None:
        raise RuntimeError(f"{op}: explicit attn_mask should not be set when is_causal=True")
    q, k, v = cast_low(q, k, v)
    if not (q.dtype == k.dtype == v.dtype):
        q, k, v = _same_dtype(op, q, k, v)
    if enable_gqa:
        q, k, v, heads = _gqa_split(q, k, v, op)
    L, S = q.shape[-2], k.shape[-2]
    mask = _causal_mask(q, L, S) if is_causal else None if attn_mask is None else _attn_mask(attn_mask, q, op)
    batch = broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], op=op)
    if mask is not None:
        try:
            full = broadcast_shapes(mask.shape, batch + (L, S), op=op)
        except ValueError:
            full = None
        if full is None or full[-2:] != (L, S):
            raise ValueError(f"{op}: expected attn_mask broadcastable to {batch + (L, S)}, got shape {mask.shape}")
        qk = broadcast_shapes(q.shape[:-2], k.shape[:-2], op=op)
        if broadcast_shapes(mask.shape[:-2], qk, op=op) != qk:   # the scores take the mask's batch dims
            batch = full[:-2]
            q = broadcast_to(q, batch + q.shape[-2:])
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1]) if q.shape[-1] else 1.0
    keep = None
    if dropout_p > 0:
        backend = q.device.backend
        keep = backend.call(lambda: (backend.rand(batch + (L, S), q.dtype) >= dropout_p).astype(q.dtype)
                            * (1.0 / (1.0 - dropout_p)) if dropout_p < 1 else backend.xp.zeros(batch + (L, S), q.dtype))
    out = ScaledDotProductAttention.apply(q, k, v, mask, float(scale), keep)
    return out if not enable_gqa else out.reshape(out.shape[:-4] + (heads,) + out.shape[-2:])


def _gqa_split(q, k, v, op):
    """Grouped-query attention: q (..., Hq, L, E) as (..., Hkv, Hq/Hkv, L, E) and k, v as (..., Hkv, 1, S, *),
    so broadcasting shares each key/value head with its group of query heads."""
    if q.ndim < 3 or k.ndim < 3 or v.ndim < 3 or k.shape[-3] != v.shape[-3] or q.shape[-3] % k.shape[-3]:
        raise ValueError(f"{op}: enable_gqa expects query (..., Hq, L, E), key and value (..., Hkv, S, *) with Hq "
                         f"divisible by Hkv, got shapes {q.shape}, {k.shape}, {v.shape}")
    hq, hkv = q.shape[-3], k.shape[-3]
    q = q.reshape(q.shape[:-3] + (hkv, hq // hkv) + q.shape[-2:])
    return q, k.unsqueeze(-3), v.unsqueeze(-3), hq


# --------------------------------------------------------------------------- classification losses
class NllLoss(Function):
    """-coef_i * logp[i, target_i] per element, summed, or divided by sum(coef) for 'mean'; the target
    column is picked directly (no one-hot) and the backward scatters into it."""

    @staticmethod
    def forward(ctx, logp, idx, coef, reduction):
        return ctx.wrap(_nll_forward(ctx, logp.data, idx, coef, reduction))

    @staticmethod
    def backward(ctx, grad):
        if ctx._direct():
            return ctx.wrap(_nll_grad_array(ctx, grad.data)), None, None, None
        return _nll_grad(ctx, grad), None, None, None


def _nll_forward(ctx, logp, idx, coef, reduction):
    """NllLoss's forward on the array ``logp``; sets ctx.idx, ctx.scale, ctx.shape for the backward."""
    xp = ctx.xp
    losses = xp.take_along_axis(logp, idx, axis=1).reshape(coef.shape) * -coef
    scale = coef
    if reduction != "none":
        out = losses.sum()
        if reduction == "mean":
            total = coef.sum()
            out = out / total                      # every target ignored: nan, as in PyTorch...
            if coef.__class__ is _HOST and total:  # (on the host the test costs no device sync)
                scale = coef / total
            else:
                nonzero = total != 0               # ...but a zero gradient, not 0/0 = nan
                scale = xp.where(nonzero, coef, 0) / xp.where(nonzero, total, 1)
        losses = out
    ctx.idx, ctx.scale, ctx.shape = idx, scale, logp.shape
    return losses


def _nll_grad_array(ctx, g):
    """NllLoss's gradient on arrays (Function._direct): -scale * g scattered into zeros."""
    src = (g * -ctx.scale).reshape(ctx.idx.shape)
    out = ctx.xp.zeros(ctx.shape, dtype=src.dtype)
    (ctx.device._backend or ctx.device.backend).scatter_add(out, _along(ctx.xp, ctx.idx, 1), src)
    return out


def _nll_grad(ctx, grad):
    """NllLoss's gradient as recorded ops."""
    neg = ctx.wrap((ctx.device._backend or ctx.device.backend).call(ctx.xp.negative, ctx.scale))  # on its GPU
    g = Mul.apply(grad, neg) if grad.shape == neg.shape else mul(grad, neg)
    return ScatterAddInto.apply(g.reshape(ctx.idx.shape), ctx.idx, 1, ctx.shape)


class CrossEntropy(Function):
    """log_softmax over dim 1 then NllLoss, as one node: cross_entropy's common case (a 2-D input, class
    indices, no class weights or label smoothing) with one Function call and one backward step fewer,
    which is most of its cost on a small batch. The arithmetic is the two ops' own (the same helpers), so
    loss and gradient are identical. A gradient of the gradient needs log_softmax in the graph: it is
    recomputed from the saved input then; keeping the input too is why cross_entropy takes this node only
    for small inputs."""

    @staticmethod
    def forward(ctx, x, idx, coef, reduction):
        logp = _log_softmax_array(ctx.xp, x.data, 1)
        ctx.save_for_backward(x, ctx.wrap(logp))
        return ctx.wrap(_nll_forward(ctx, logp, idx, coef, reduction))

    @staticmethod
    def backward(ctx, grad):
        x, logp = ctx.saved_tensors
        if ctx._direct():                  # NllLoss's then LogSoftmax's direct backward
            g = _nll_grad_array(ctx, grad.data)
            return ctx.wrap(g - ctx.xp.exp(logp.data) * g.sum(axis=1, keepdims=True)), None, None, None
        if state.enabled:                  # create_graph: log_softmax recorded, so the gradient depends on x
            logp = LogSoftmax.apply(x, 1)
        return LogSoftmaxBackward.apply(_nll_grad(ctx, grad), logp, 1), None, None, None


_FUSED_CE_MAX = 1 << 16     # elements of input up to which cross_entropy uses CrossEntropy (it saves the input)


def _class_weight(weight, c, x, op):
    if weight is None:
        return None
    w = _float_tensor(weight, op, "weight", like=x)
    if w.shape != (c,):
        raise ValueError(f"{op}: expected a weight of shape ({c},) (one per class), got {w.shape}")
    return w


def _index_target(x, target, op):
    """The class-index target checked against input (N, C, d1, ...): shape (N, d1, ...)."""
    want = x.shape[:1] + x.shape[2:]
    if target.shape != want:
        raise ValueError(f"{op}: expected a target of shape {want} (class indices for an input of shape {x.shape}), "
                         f"got {target.shape}")
    return target


def _nll(logp, target, weight, ignore_index, reduction, op):
    """(loss, valid mask array, safe targets) for log-probabilities (N, C, d...) and targets (N, d...)."""
    if getattr(target, "_blevels", None) is not None:   # inside vmap: the target's values stay on the batch
        return _nll_one_hot(logp, target, weight, ignore_index, reduction, op), None, None
    backend = logp.device.backend              # array work outside Function.apply: on logp's GPU
    valid, safe, coef = backend.call(_nll_arrays, backend, logp, target, weight, ignore_index, op)
    return NllLoss.apply(logp, safe[:, None], coef, reduction), valid, safe


def _nll_arrays(backend, logp, target, weight, ignore_index, op):
    c = logp.shape[1]
    t = target.data
    valid = t != ignore_index
    safe = backend.xp.where(valid, t, 0)
    _check_range(backend, safe, c, op, "target", f" for {c} classes (ignore_index={ignore_index})")
    coef = valid.astype(logp.dtype) if weight is None else weight.data.astype(logp.dtype)[safe] * valid
    return valid, safe, coef


def _nll_one_hot(logp, target, weight, ignore_index, reduction, op):
    """_nll from Tensor ops only (a one-hot mask instead of host-side index arrays), for a target whose
    values cannot be read on the host: a batched tensor inside ag.func.vmap."""
    from ..creation import arange
    from ..ops.elementwise import equal, not_equal
    c = logp.shape[1]
    classes = arange(c, device=logp.device).reshape((1, c) + (1,) * (logp.ndim - 2))
    hot = equal(target[:, None], classes)                                  # (N, C, d...)
    coef = not_equal(target, ignore_index).to(dtype=logp.dtype)
    if weight is not None:
        coef = coef * where(hot, weight.detach().reshape(classes.shape), 0.0).sum(1)
    losses = -where(hot, logp, 0.0).sum(1) * coef
    if reduction == "none":
        return losses
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / coef.sum()


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of log-probabilities (N, C, d...) (or (C,)) at class indices (N, d...);
    'mean' divides by the summed weights of the non-ignored targets."""
    input, = cast_float32(input)   # autocast: run in float32
    op = "nll_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    x = _float_tensor(input, op)
    t = _index_tensor(target, x, op, "target")
    unbatched = x.ndim == 1
    if unbatched:
        x, t = x.reshape(1, -1), t.reshape(1)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of shape (N, C, ...) or (C,), got shape {x.shape}")
    _index_target(x, t, op)
    w = _class_weight(weight, x.shape[1], x, op)
    if w is not None and w.dtype != x.dtype:
        w = w.to(dtype=x.dtype)
    loss = _nll(x, t, w, ignore_index, reduction, op)[0]
    return loss.reshape(()) if unbatched and reduction == "none" else loss


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """log_softmax over dim 1 then the negative log-likelihood. ``target`` holds class indices (N, d...)
    (integer dtype; ignore_index and weight apply) or class probabilities shaped like input (float)."""
    input, = cast_float32(input)   # autocast: run in float32
    op = "cross_entropy"
    reduction = _reduction(reduction, size_average, reduce, op)
    x = _float_tensor(input, op)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"{op}: label_smoothing must be in [0, 1], got {label_smoothing!r}")
    if x.ndim == 0:
        raise ValueError(f"{op}: expected an input of shape (N, C, ...) or (C,), got a 0-d tensor")
    t = as_tensor(target, op, like=x)
    if t.device is not x.device:
        raise RuntimeError(f"{op}: expected target on {x.device}, got {t.device}; move it with .to()")
    unbatched = x.ndim == 1
    cdim = 0 if unbatched else 1
    c = x.shape[cdim]
    w = _class_weight(weight, c, x, op)
    if w is not None and w.dtype != x.dtype:
        w = w.to(dtype=x.dtype)
    if t.dtype.kind == "f":
        return _soft_cross_entropy(x, t, w, cdim, reduction, label_smoothing)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected class indices (an integer tensor) or probabilities (a float tensor), "
                        f"got dtype {t.dtype}")
    if unbatched:
        if t.ndim != 0:
            raise ValueError(f"{op}: expected a 0-d class-index target for an unbatched input of shape {x.shape}, "
                             f"got shape {t.shape}")
        x, t = x.reshape(1, -1), t.reshape(1)
    _index_target(x, t, op)
    if w is None and not label_smoothing and x.ndim == 2 and x.data.size <= _FUSED_CE_MAX and not _function._vmap:
        backend = x.device.backend             # the common case as one node (CrossEntropy)
        safe, coef = backend.call(_nll_arrays, backend, x, t, None, ignore_index, op)[1:]
        loss = CrossEntropy.apply(x, safe[:, None], coef, reduction)
        return loss.reshape(()) if unbatched and reduction == "none" else loss
    logp = LogSoftmax.apply(x, 1)
    loss, valid, safe = _nll(logp, t, w, ignore_index, reduction, op)
    if label_smoothing > 0:
        if valid is None:
            raise NotImplementedError(f"{op}: label_smoothing with class-index targets is not supported inside vmap; "
                                      "pass one-hot probability targets instead")
        loss = loss * (1.0 - label_smoothing) + _smooth_term(logp, w, valid, safe, reduction) * (label_smoothing / c)
    return loss.reshape(()) if unbatched and reduction == "none" else loss


def _smooth_term(logp, w, valid, safe, reduction):
    """PyTorch's label-smoothing term for index targets: -sum_c w_c logp_c per element, ignored ones 0;
    'mean' divides by the summed weights of the targets (their count without weights)."""
    shape = (1, logp.shape[1]) + (1,) * (logp.ndim - 2)
    per = -(logp if w is None else logp * w.detach().reshape(shape)).sum(1)   # class weights are constants, as in nll
    mask = Tensor._make(valid.astype(logp.dtype), logp.device)
    per = per * mask
    if reduction == "none":
        return per
    total = per.sum()
    if reduction == "sum":
        return total
    denom = mask.sum() if w is None else (Tensor._make(w.data[safe], logp.device) * mask).sum()
    none = equal(denom, 0)                      # every target ignored: nan, with a zero gradient
    return where(none, float("nan"), total / where(none, 1.0, denom))


def _soft_cross_entropy(x, t, w, cdim, reduction, label_smoothing):
    """Cross entropy against class probabilities (same shape as x); 'mean' averages over elements."""
    if t.shape != x.shape:
        raise ValueError(f"cross_entropy: expected probability targets of the input's shape {x.shape}, got {t.shape}")
    if t.dtype != x.dtype:
        t = t.to(dtype=x.dtype)
    c = x.shape[cdim]
    logp = LogSoftmax.apply(x, cdim)
    if label_smoothing > 0:
        t = t * (1.0 - label_smoothing) + label_smoothing / c
    prod = logp * t
    if w is not None:
        prod = prod * w.reshape((c,) + (1,) * (x.ndim - cdim - 1))
    return _reduce(-prod.sum(cdim), reduction)


# --------------------------------------------------------------------------- regression and binary losses
def _pair_loss_operands(input, target, op):
    x = _float_tensor(input, op)
    t = as_tensor(target, op, like=x)
    if t.shape != x.shape:
        warnings.warn(f"{op}: target size {t.shape} differs from input size {x.shape}; they are broadcast, "
                      "which is likely not what you want", stacklevel=3)
    return x, t


def _weighted_reduce(loss, weight, reduction, op):
    if weight is None:
        return _reduce(loss, reduction)
    w = as_tensor(weight, op, like=loss)
    if w.shape != loss.shape:
        raise ValueError(f"{op}: expected a weight of the input's shape {loss.shape}, got {w.shape}")
    loss = loss * w
    if reduction == "mean":
        return loss.sum() / w.sum()
    return _reduce(loss, reduction)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target) ** 2, reduced; with weight, 'mean' is sum(weight * se) / sum(weight)."""
    input, target = cast_float32(input, target)   # autocast: run in float32
    reduction = _reduction(reduction, size_average, reduce, "mse_loss")
    x, t = _pair_loss_operands(input, target, "mse_loss")
    return _weighted_reduce(square(x - t), weight, reduction, "mse_loss")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """|input - target|, reduced; with weight, 'mean' is sum(weight * ae) / sum(weight)."""
    input, target = cast_float32(input, target)   # autocast: run in float32
    reduction = _reduction(reduction, size_average, reduce, "l1_loss")
    x, t = _pair_loss_operands(input, target, "l1_loss")
    return _weighted_reduce(_abs(x - t), weight, reduction, "l1_loss")


def _clamped_log(v):
    """log(v) clamped at -100 (PyTorch's BCE), without evaluating log(0)."""
    pos = greater(v, 0)
    return where(pos, clamp(log(where(pos, v, 1.0)), min=-100.0), -100.0)


class BinaryCrossEntropy(Function):
    # fused: each log is clamped at -100 as in PyTorch, and the backward, grad * (x - t) / max(x (1 - x), 1e-12),
    # stays finite at x = 0 and 1 where the composed form gives 0 * inf
    @staticmethod
    def forward(ctx, x, t):
        xp = ctx.xp
        a, b = x.data, t.data
        lx = xp.where(a > 0, xp.log(xp.where(a > 0, a, 1)), -100)
        l1x = xp.where(a < 1, xp.log1p(-xp.where(a < 1, a, 0)), -100)
        ctx.save_for_backward(x, t)
        return ctx.wrap((-(b * xp.maximum(lx, -100) + (1 - b) * xp.maximum(l1x, -100))).astype(a.dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        x, t = ctx.saved_tensors
        gx = gt = None
        if ctx.needs_input_grad[0]:
            gx = grad * (x - t) / clamp(x * (1.0 - x), min=1e-12)
        if ctx.needs_input_grad[1]:
            gt = grad * (_clamped_log(1.0 - x) - _clamped_log(x))
        return gx, gt


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t log(x) + (1 - t) log(1 - x)) for probabilities x in [0, 1], each log clamped at -100."""
    input, target = cast_float32(input, target)   # autocast: run in float32
    op = "binary_cross_entropy"
    reduction = _reduction(reduction, size_average, reduce, op)
    x = _float_tensor(input, op)
    t = _float_tensor(target, op, "target", like=x)
    if t.shape != x.shape:
        raise ValueError(f"{op}: expected a target of the input's shape {x.shape}, got {t.shape}")
    xd = x.data
    if x.numel():                                  # NaN fails this too, as in PyTorch
        x.device.backend.assert_all(((xd >= 0) & (xd <= 1)).all(), ValueError,
                                    f"{op}: all elements of input should be probabilities in [0, 1]; apply sigmoid "
                                    "first or use binary_cross_entropy_with_logits")
    x, t = _same_dtype(op, x, t)
    loss = BinaryCrossEntropy.apply(x, t)
    if weight is not None:
        loss = loss * as_tensor(weight, op, like=x)
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """BCE of sigmoid(x), computed stably as (1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)."""
    input, target = cast_float32(input, target)   # autocast: run in float32
    op = "binary_cross_entropy_with_logits"
    reduction = _reduction(reduction, size_average, reduce, op)
    x = _float_tensor(input, op)
    t = _float_tensor(target, op, "target", like=x)
    if t.shape != x.shape:
        raise ValueError(f"{op}: expected a target of the input's shape {x.shape}, got {t.shape}")
    sp = Softplus.apply(-x)                 # log(1 + exp(-x)) = max(-x, 0) + log1p(exp(-|x|))
    if pos_weight is not None:
        sp = sp * ((as_tensor(pos_weight, op, like=x) - 1.0) * t + 1.0)
    loss = (1.0 - t) * x + sp
    if weight is not None:
        loss = loss * as_tensor(weight, op, like=x)
    return _reduce(loss, reduction)
