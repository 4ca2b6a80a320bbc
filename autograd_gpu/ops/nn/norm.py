"""nn.functional's normalisation: batch_norm (composed from ops, running statistics updated in place)
and layer_norm (the fused LayerNorm Function: BLAS row sums, a blocked in-place backward on the CPU)."""
import builtins

from ...autograd.function import Function
from ...autograd.grad_mode import state
from ...tensor import Tensor
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
    # fused, on the input as (rows, n) with n the normalised size: the row sums are BLAS matrix-vector
    # products with a ones vector and the variance one row dot (backend.row_dot: an einsum on NumPy, as a
    # NumPy reduction over the last axis is 5x slower), so the forward makes three passes over the input
    # and the backward six. The backward gx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = grad *
    # weight, from the saved normalised input (recomputed as recorded ops under create_graph, so it
    # differentiates again)
    batch_rule = _layer_norm_rule

    @staticmethod
    def forward(ctx, x, w, b, axes, eps):
        xp, mm = ctx.xp, (ctx.device.backend).matmul
        a = x.data
        k = a.ndim - len(axes)
        n = _prod(a.shape[k:])
        a2 = a.reshape(_prod(a.shape[:k]), n)
        ones = xp.ones(n, dtype=a.dtype)
        xc = a2 - _row_sums(xp, mm, a2, ones, 1.0 / n)[:, None] if n else a2.copy()
        var = _row_dot(xp, ctx.device.backend, xc, xc, 1.0 / builtins.max(n, 1))
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
        xp, backend = ctx.xp, ctx.device.backend
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
