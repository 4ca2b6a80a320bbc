"""nn.functional's normalisation: batch_norm (composed from ops, running statistics updated in place)
and layer_norm (the fused LayerNorm Function over the backend's layer_norm kernels)."""
from ...autograd.function import Function
from ...autograd.grad_mode import state
from ...tensor import Tensor
from ...dtypes import bfloat16
from .._autocast import cast_float32
from ..elementwise import rsqrt
from ..batching import BatchedTensor, _wrap, _shift
from ..registry import register, OpTest
from ._args import _float_tensor, _same_dtype, as_tensor


def _const(values, like):
    """An op-table constant (running statistics that take no gradient) of ``like``'s dtype and device."""
    return as_tensor(values, "op table", like=like).to(dtype=like.dtype)


@register(namespace="nn.functional", tests=(
    OpTest((((4, 3), (3,), (3,)), ((2, 3, 2, 2), (3,), (3,))), ref="refs.batch_norm",
           op=lambda x, w, b: batch_norm(x, None, None, w, b, training=True), name="batch_norm_train"),
    OpTest((((3, 3, 2),),), ref="refs.batch_norm",
           op=lambda x: batch_norm(x, _const([0.0] * 3, x), _const([1.0] * 3, x), training=True),
           name="batch_norm_train_stats"),
    OpTest((((4, 3), (3,), (3,), (3,), (3,)), ((2, 3, 2, 2), (3,), (3,), (3,), (3,))), ref="refs.batch_norm_eval",
           op=lambda x, m, v, w, b: batch_norm(x, m, v * v + 0.5, w, b), name="batch_norm_eval")),
    doc="Normalise each channel (dim 1) by the batch statistics (training) or the running statistics.")
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


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (4,), (4,)), ((2, 2, 4), (4,), (4,))), ref="refs.layer_norm_last",
           op=lambda x, w, b: layer_norm(x, (4,), w, b), name="layer_norm"),
    OpTest((((2, 2, 3),),), ref="refs.layer_norm_last2", op=lambda x: layer_norm(x, (2, 3)), name="layer_norm_2d")),
    doc="Normalise over the trailing dims normalized_shape, then weight and bias elementwise.")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing dims ``normalized_shape`` (biased variance), then weight and bias
    (of that shape) elementwise."""
    input, = cast_float32(input)   # autocast: run in float32
    if isinstance(input, Tensor) and input.dtype is bfloat16:      # in float32, rounded once (as PyTorch;
        widen = [t.float() if isinstance(t, Tensor) and t.dtype is bfloat16 else t for t in (weight, bias)]
        return layer_norm(input.float(), normalized_shape, *widen, eps=eps).to(dtype=bfloat16)   # no bf16 kernels)
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


def _layer_norm_rule(cls, args, kwargs):
    """vmap: normalised over trailing axes with shared weight and bias, the axes shifted past the batch dims;
    per-example affine parameters are applied after the normalisation."""
    x, w, b, axes, eps = args
    if w.__class__ is BatchedTensor or b.__class__ is BatchedTensor:
        y = cls.apply(x, None, None, axes, eps)
        y = y if w is None else y * w
        return y if b is None else y + b
    return _wrap(cls.apply(x._bbase, w, b, _shift(axes, len(x._blevels)), eps), x._blevels)


class LayerNorm(Function):
    # fused, on the input as (rows, n) with n the normalised size: the backend's layer_norm kernels
    # (backends/kernels/norms.py: on the CPU BLAS row sums and a blocked in-place backward; on CUDA three
    # launches forward and five backward). The backward gx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
    # g = grad * weight, runs on arrays when no graph is recorded, else as recorded ops from the input (so it
    # differentiates again)
    batch_rule = _layer_norm_rule

    @staticmethod
    def forward(ctx, x, w, b, axes, eps):
        a = x.data
        k = a.ndim - len(axes)
        n = _prod(a.shape[k:])
        y, ctx.stats = ctx.device.backend.layer_norm(a.reshape(_prod(a.shape[:k]), n),
                                                       None if w is None else w.data.reshape(n),
                                                       None if b is None else b.data.reshape(n), eps)
        ctx.axes, ctx.eps = axes, eps
        ctx.save_for_backward(x, w, b)
        return ctx.wrap(y.reshape(a.shape))

    @staticmethod
    def backward(ctx, grad):
        x, w, b = ctx.saved_tensors
        axes = ctx.axes
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        if not state.enabled:       # no graph of the gradient wanted: the backend's fused backward on arrays
            shape, k = x.shape, len(axes)
            n = _prod(shape[len(shape) - k:])
            gx, gw, gb = ctx.device.backend.layer_norm_backward(
                grad.data.reshape(_prod(shape[:len(shape) - k]), n), ctx.stats,
                None if w is None else w.data.reshape(n), need_x, need_w, need_b)
            wshape = shape[len(shape) - k:]
            return (None if gx is None else ctx.wrap(gx.reshape(shape)),
                    None if gw is None else ctx.wrap(gw.reshape(wshape)),
                    None if gb is None else ctx.wrap(gb.reshape(wshape)), None, None)
        lead = tuple(range(x.ndim - len(axes)))
        xhat, rstd = _normalized(x, axes, ctx.eps)
        gw = (grad * xhat).sum(lead) if need_w else None
        gb = grad.sum(lead) if need_b else None
        gx = None
        if need_x:
            g = grad if w is None else grad * w
            gx = (g - g.mean(axes, keepdims=True) - xhat * (g * xhat).mean(axes, keepdims=True)) * rstd
        return gx, gw, gb, None, None


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n
