"""nn.functional's normalisation: batch_norm (composed from ops, running statistics updated in place)
and layer_norm (the fused LayerNorm Function over the backend's layer_norm kernels); group_norm,
instance_norm, rms_norm and local_response_norm, composed from recorded ops (their Functions hold the
gradients and vmap rules)."""
from ...autograd.function import Function
from ...tensor import Tensor
from ...dtypes import bfloat16
from .._autocast import cast_float32
from ..elementwise import rsqrt
from ..shape import broadcast_to
from ..batching import BatchedTensor, _wrap, _shift
from ..registry import register, OpTest
from ._args import _float_tensor, _same_dtype, as_tensor
from .resample import pad
from .conv import avg_pool2d


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
        return LayerNormBackward.of(ctx, grad, ctx.stats, ctx.axes, ctx.eps, ctx.needs_input_grad[:3]) + (None, None)


def _norm_backward_rule(cls, args, kwargs):
    """vmap (a batched gradient): the gradients as recorded ops from the input (their rules batch them)."""
    center = cls is LayerNormBackward
    grad, x, w = args[:3]
    axes, eps, needs = args[-3:]
    lead = tuple(range(x.ndim - len(axes)))
    xhat, rstd = _normalized(x, axes, eps) if center else _rms_normalized(x, axes, eps)
    gw = (grad * xhat).sum(lead) if needs[1] else None
    gx = None
    if needs[0]:
        g = grad if w is None else grad * w
        gx = (g - g.mean(axes, keepdims=True) if center else g) - xhat * (g * xhat).mean(axes, keepdims=True)
        gx = gx * rstd
    return (gx, gw, grad.sum(lead) if needs[2] else None) if center else (gx, gw)


class LayerNormBackward(Function):
    """LayerNorm's gradients (gx, gw, gb; ``needs``: which are wanted, the others None) as one op: the backend's
    fused backward (layer_norm_backward) from the forward's saved statistics. Differentiable again: its own
    backward is the analytic second derivative as recorded ops (_norm_grad_grads)."""
    batch_rule = _norm_backward_rule
    materialize_grads = False     # a gradient not wanted is None (and so is its gradient's gradient)

    @staticmethod
    def arrays(ctx, g, x, w, b, stats, axes, eps, needs):
        shape, k = x.shape, len(axes)
        n = _prod(shape[len(shape) - k:])
        gx, gw, gb = ctx.device.backend.layer_norm_backward(
            g.reshape(_prod(shape[:len(shape) - k]), n), stats, None if w is None else w.reshape(n), *needs)
        wshape = shape[len(shape) - k:]
        return (None if gx is None else _shaped(gx, shape), None if gw is None else _shaped(gw, wshape),
                None if gb is None else _shaped(gb, wshape))

    @staticmethod
    def forward(ctx, grad, x, w, b, stats, axes, eps, needs):
        ctx.axes, ctx.eps = axes, eps
        ctx.save_for_backward(grad, x, w)
        out = LayerNormBackward.arrays(ctx, grad.data, x.data, None if w is None else w.data, None, stats, axes,
                                       eps, needs)
        return tuple(None if a is None else ctx.wrap(a) for a in out)

    @staticmethod
    def backward(ctx, ggx, ggw, ggb):
        grad, x, w = ctx.saved_tensors
        return _norm_grad_grads(ctx.needs_input_grad[:3], ggx, ggw, ggb, grad, x, w, ctx.axes, ctx.eps,
                                True) + (None,) * 5


def _rms_normalized(x, axes, eps):
    """x / rms(x) over axes and 1 / rms(x), as recorded Tensor ops."""
    rstd = rsqrt((x * x).mean(axes, keepdims=True) + eps)
    return x * rstd, rstd


def _norm_grad_grads(needs, ggx, ggw, ggb, grad, x, w, axes, eps, center):
    """The gradients with respect to grad, x and w of layer norm's (center) or RMS norm's gradients
    gx = r (g - [mean(g)] - xhat mean(g xhat)), g = grad * w, gw = sum(grad * xhat), gb = sum(grad), given
    theirs (None: zero), as recorded ops (xhat and r = 1 / std recomputed from x). With a = mean(ggx xhat):
    d/dg = r (ggx - [mean(ggx)] - a xhat); the explicit gradient on xhat, D = grad ggw - r (c ggx + a g) with
    c = mean(g xhat), goes back through xhat = [x - mean(x)] r, whose r depends on x:
    d/dx = q [- mean(q)], q = r (D - xhat (mean(ggx gx) + mean(xhat D)))."""
    need_g, need_x, need_w = needs
    lead = tuple(range(x.ndim - len(axes)))
    xhat, r = _normalized(x, axes, eps) if center else _rms_normalized(x, axes, eps)

    def mean(t):
        return t.mean(axes, keepdims=True)
    d_grad = d_x = d_w = None
    if ggx is not None:
        a = mean(ggx * xhat)
        dg = ((ggx - mean(ggx) if center else ggx) - a * xhat) * r
        if need_g:
            d_grad = dg if w is None else dg * w
        if need_w and w is not None:
            d_w = (grad * dg).sum(lead)
    if need_g:
        if ggw is not None:
            d_grad = ggw * xhat if d_grad is None else d_grad + ggw * xhat
        if ggb is not None:
            d_grad = broadcast_to(ggb, grad.shape) if d_grad is None else d_grad + ggb
    if need_x and (ggx is not None or ggw is not None):
        D = k = None
        if ggx is not None:
            g = grad if w is None else grad * w
            c = mean(g * xhat)
            D = (ggx * c + g * a) * -r
            k = mean(ggx * ((g - mean(g) if center else g) - xhat * c) * r)      # mean(ggx * gx)
        if ggw is not None:
            D = grad * ggw if D is None else D + grad * ggw
        s = mean(xhat * D)
        q = (D - xhat * (s if k is None else s + k)) * r
        d_x = q - mean(q) if center else q
    return d_grad, d_x, d_w


def _shaped(a, shape):
    """a reshaped to shape, or a itself where it has that shape already: a reshape makes a view, which a
    leaf's .grad gets a copy of (one copy kernel per parameter per step on a GPU)."""
    return a if a.shape == shape else a.reshape(shape)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# --------------------------------------------------------------------------- group, instance, RMS, local response
def _affine(y, weight, bias, c, op):
    """y * weight + bias with per-channel (dim 1) parameters of shape (C,)."""
    shape = (1, c) + (1,) * (y.ndim - 2)
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and (not isinstance(t, Tensor) or t.shape != (c,)):
            got = t.shape if isinstance(t, Tensor) else type(t).__name__
            raise ValueError(f"{op}: expected {name} of shape ({c},) for an input with {c} channels, got {got}")
    if weight is not None:
        y = y * weight.reshape(shape)
    return y if bias is None else y + bias.reshape(shape)


def _group_norm_ref(np, x, g, w=None, b=None, eps=1e-5):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1)
    y = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    y = y if w is None else y * w.reshape(shape)
    return (y if b is None else y + b.reshape(shape)).astype(x.dtype)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 4, 3, 2), (4,), (4,)), ((3, 6, 5), (6,), (6,))), ref=lambda np, x, w, b: _group_norm_ref(np, x, 2, w, b),
           op=lambda x, w, b: group_norm(x, 2, w, b), name="group_norm"),
    OpTest((((2, 3, 4),),), ref=lambda np, x: _group_norm_ref(np, x, 3), op=lambda x: group_norm(x, 3),
           name="group_norm_noaffine")),
    doc="Normalise (N, C, *) over groups of C / num_groups channels (and the spatial dims), then per-channel affine.")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """PyTorch's group_norm: the channels of (N, C, *) split into num_groups groups, each sample's group
    normalised by its mean and biased variance, then weight and bias (C,) per channel."""
    op = "group_norm"
    input, = cast_float32(input)
    x = _float_tensor(input, op)
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of shape (N, C, *), got shape {x.shape}")
    n, c = x.shape[:2]
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups <= 0 or c % num_groups:
        raise ValueError(f"{op}: expected num_groups to be a positive int dividing the {c} channels, got "
                         f"{num_groups!r}")
    xg = x.reshape(n, num_groups, -1)
    y, _ = _normalized(xg, (2,), eps)
    return _affine(y.reshape(x.shape), weight, bias, c, op)


def _instance_norm_ref(np, x, w=None, b=None, eps=1e-5):
    axes = tuple(range(2, x.ndim))
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    y = y if w is None else y * w.reshape(shape)
    return (y if b is None else y + b.reshape(shape)).astype(x.dtype)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 3), (3,), (3,)), ((2, 3, 5), (3,), (3,))),
           ref=lambda np, x, w, b: _instance_norm_ref(np, x, w, b),
           op=lambda x, w, b: instance_norm(x, weight=w, bias=b), name="instance_norm"),
    OpTest((((2, 3, 4),),), ref=lambda np, x: _instance_norm_ref(np, x),
           op=lambda x: instance_norm(x, _const([0.0] * 3, x), _const([1.0] * 3, x)), name="instance_norm_stats")),
    doc="Normalise each sample's channel of (N, C, *) over its spatial dims (running statistics optional).")
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """PyTorch's instance_norm: each (sample, channel) of (N, C, *) normalised over the spatial dims by its
    mean and biased variance; with running statistics given and use_input_stats, they are updated in place
    with the batch mean of the per-instance statistics (variance unbiased); use_input_stats=False
    normalises by the running statistics instead."""
    op = "instance_norm"
    input, = cast_float32(input)
    x = _float_tensor(input, op)
    if x.ndim < 3:
        raise ValueError(f"{op}: expected an input of shape (N, C, *) with at least one spatial dim, got shape "
                         f"{x.shape}")
    c = x.shape[1]
    if not use_input_stats:
        return batch_norm(x, running_mean, running_var, weight, bias, False, momentum, eps)
    axes = tuple(range(2, x.ndim))
    m = _prod(x.shape[2:])
    if m <= 1:
        raise ValueError(f"{op}: expected more than 1 spatial element per channel, got input shape {x.shape}")
    y, _ = _normalized(x, axes, eps)
    for name, r in (("running_mean", running_mean), ("running_var", running_var)):
        if r is not None and (not isinstance(r, Tensor) or r.shape != (c,)):
            raise ValueError(f"{op}: expected {name} of shape ({c},), got "
                             f"{r.shape if isinstance(r, Tensor) else type(r).__name__}")
    if running_mean is not None or running_var is not None:
        a = x.data
        _update_running(running_mean, a.mean(axis=axes).mean(axis=0), momentum)
        _update_running(running_var, a.var(axis=axes, ddof=1).mean(axis=0), momentum)
    return _affine(y, weight, bias, c, op)


def _rms_norm_rule(cls, args, kwargs):
    """vmap: as layer norm's (the axes shifted past the batch dims; a per-example weight applied after)."""
    x, w, axes, eps = args
    if w.__class__ is BatchedTensor:
        y = cls.apply(x, None, axes, eps)
        return y * w
    return _wrap(cls.apply(x._bbase, w, _shift(axes, len(x._blevels)), eps), x._blevels)


class RmsNorm(Function):
    # fused, on the input as (rows, n): the backend's rms_norm kernels (backends/kernels/norms.py; on CUDA
    # two launches forward and three backward, against about six and twelve composed). The backward
    # gx = rstd * (g - xhat * mean(g * xhat)), g = grad * weight, runs on arrays when no graph is recorded,
    # else as recorded ops from the input (so it differentiates again), as LayerNorm's
    batch_rule = _rms_norm_rule

    @staticmethod
    def forward(ctx, x, w, axes, eps):
        a = x.data
        k = a.ndim - len(axes)
        n = _prod(a.shape[k:])
        y, ctx.stats = ctx.device.backend.rms_norm(a.reshape(_prod(a.shape[:k]), n),
                                                   None if w is None else w.data.reshape(n), eps)
        ctx.axes, ctx.eps = axes, eps
        ctx.save_for_backward(x, w)
        return ctx.wrap(y.reshape(a.shape))

    @staticmethod
    def backward(ctx, grad):
        return RmsNormBackward.of(ctx, grad, ctx.stats, ctx.axes, ctx.eps, ctx.needs_input_grad[:2]) + (None, None)


class RmsNormBackward(Function):
    """RmsNorm's gradients (gx, gw) as one op: the backend's fused backward (rms_norm_backward) from the
    forward's saved statistics; differentiable again as LayerNormBackward (_norm_grad_grads, not centred)."""
    batch_rule = _norm_backward_rule
    materialize_grads = False

    @staticmethod
    def arrays(ctx, g, x, w, stats, axes, eps, needs):
        shape, k = x.shape, len(axes)
        n = _prod(shape[len(shape) - k:])
        gx, gw = ctx.device.backend.rms_norm_backward(
            g.reshape(_prod(shape[:len(shape) - k]), n), stats, None if w is None else w.reshape(n), *needs)
        return None if gx is None else _shaped(gx, shape), None if gw is None else _shaped(gw, shape[len(shape) - k:])

    @staticmethod
    def forward(ctx, grad, x, w, stats, axes, eps, needs):
        ctx.axes, ctx.eps = axes, eps
        ctx.save_for_backward(grad, x, w)
        gx, gw = RmsNormBackward.arrays(ctx, grad.data, x.data, None if w is None else w.data, stats, axes, eps,
                                        needs)
        return (None if gx is None else ctx.wrap(gx)), (None if gw is None else ctx.wrap(gw))

    @staticmethod
    def backward(ctx, ggx, ggw):
        grad, x, w = ctx.saved_tensors
        return _norm_grad_grads(ctx.needs_input_grad[:3], ggx, ggw, None, grad, x, w, ctx.axes, ctx.eps,
                                False) + (None,) * 4


def _rms_norm_ref(np, x, k, w=None, eps=None):
    eps = np.finfo(x.dtype).eps if eps is None else eps
    axes = tuple(range(x.ndim - k, x.ndim))
    y = x / np.sqrt((x * x).mean(axes, keepdims=True) + eps)
    return (y if w is None else y * w).astype(x.dtype)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (4,)), ((2, 2, 4), (4,)), ((0, 4), (4,)), ((1, 5), (5,))),
           ref=lambda np, x, w: _rms_norm_ref(np, x, 1, w), op=lambda x, w: rms_norm(x, w.shape, w), name="rms_norm"),
    OpTest((((2, 2, 3),),), ref=lambda np, x: _rms_norm_ref(np, x, 2, None, 1e-3),
           op=lambda x: rms_norm(x, (2, 3), eps=1e-3), name="rms_norm_2d")),
    doc="Divide by the root mean square over the trailing dims normalized_shape, then weight elementwise.")
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """PyTorch's rms_norm: x / sqrt(mean(x^2 over the trailing normalized_shape) + eps) * weight; eps None
    is the machine epsilon of the input's dtype, as PyTorch."""
    op = "rms_norm"
    x = _float_tensor(input, op)
    ns = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(ns)
    if k == 0 or k > x.ndim or x.shape[x.ndim - k:] != ns:
        raise ValueError(f"{op}: expected an input whose trailing dims are normalized_shape {ns}, got shape "
                         f"{x.shape}")
    if weight is not None and (not isinstance(weight, Tensor) or weight.shape != ns):
        raise ValueError(f"{op}: expected weight of shape {ns}, got "
                         f"{weight.shape if isinstance(weight, Tensor) else type(weight).__name__}")
    if eps is None:
        eps = 2.0 ** -7 if x.dtype is bfloat16 else float(x.device.backend.xp.finfo(x.data.dtype).eps)
    axes = tuple(range(x.ndim - k, x.ndim))
    if x.dtype is not bfloat16 and (weight is None or weight.dtype == x.dtype):
        return RmsNorm.apply(x, weight, axes, float(eps))      # fused (bfloat16, mixed dtypes: composed below)
    y = x * rsqrt((x * x).mean(axes, keepdims=True) + eps)
    return y if weight is None else y * weight


def _lrn_ref(np, x, size, alpha=1e-4, beta=0.75, k=1.0):
    c = x.shape[1]
    sq = np.pad(x * x, [(0, 0), (size // 2, (size - 1) // 2)] + [(0, 0)] * (x.ndim - 2))
    div = sum(sq[:, i:i + c] for i in range(size)) / size
    return (x / (div * alpha + k) ** beta).astype(x.dtype)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 5, 3, 2),), ((2, 4, 3),)), ref=lambda np, x: _lrn_ref(np, x, 3, 0.5, 0.75, 1.0),
           op=lambda x: local_response_norm(x, 3, 0.5), name="local_response_norm"),
    OpTest((((1, 3, 2, 2, 2),),), ref=lambda np, x: _lrn_ref(np, x, 2, 0.3, 0.5, 2.0),
           op=lambda x: local_response_norm(x, 2, 0.3, 0.5, 2.0), name="local_response_norm_5d")),
    doc="Divide each channel by (k + alpha * mean of x^2 over size neighbouring channels) ** beta.")
def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """PyTorch's local_response_norm over dim 1 of (N, C, *): x / (k + alpha * avg(x^2 over the size
    channels around, zero-padded size // 2 before and (size - 1) // 2 after)) ** beta."""
    op = "local_response_norm"
    x = _float_tensor(input, op)
    if x.ndim < 3:
        raise ValueError(f"{op}: expected an input (N, C, *) with at least 3 dims, got shape {x.shape}")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ValueError(f"{op}: expected size to be a positive int, got {size!r}")
    n, c = x.shape[:2]
    sq = (x * x).reshape(n, 1, c, -1)
    div = _window_mean_channels(sq, size)
    div = div.reshape(x.shape)
    return x / (div * alpha + k) ** beta


def _window_mean_channels(sq, size):
    sq = pad(sq, (0, 0, size // 2, (size - 1) // 2))
    return avg_pool2d(sq, (size, 1), stride=1)
