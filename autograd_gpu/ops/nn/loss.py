"""nn.functional's losses: cross_entropy and nll_loss (NllLoss picks the target column, no one-hot;
CrossEntropy fuses log_softmax and NllLoss for small inputs), mse_loss, l1_loss, binary_cross_entropy
(a fused Function: logs clamped at -100, finite backward) and binary_cross_entropy_with_logits."""
import warnings

from ...autograd import function as _function
from ...autograd.function import Function
from ...dtypes import is_floating, bfloat16
from ...tensor import Tensor
from .._autocast import cast_float32
from ..elementwise import (Softplus, mul, where, clamp, exp, log, square, greater, equal, abs as _abs)
from ..indexing import Gather, ScatterAddInto, _along
from ..reduction import sum as _sum
from ..shape import reshape
from .._util import as_tensor
from .. import batching
from ..batching import _bsizes, _wrap
from ..registry import register, OpTest
from ._args import _HOST, _float_tensor, _reduction, _reduce, _same_dtype, _index_tensor, _check_range
from .activation import LogSoftmax, LogSoftmaxBackward, log_softmax, softmax

_W4 = [0.5, 1.0, 2.0, 1.5]            # class weights of the op table's entries (C = 4)


def _const(values, like):
    """An op-table constant (class weights that take no gradient) of ``like``'s dtype and device."""
    return as_tensor(values, "op table", like=like).to(dtype=like.dtype)


def _ce(reduction="mean", **kw):
    return lambda x, t: cross_entropy(x, t, reduction=reduction, **kw)


def _ce_weighted(reduction="mean", **kw):
    return lambda x, t: cross_entropy(x, t, weight=_const(_W4, x), reduction=reduction, **kw)


_CE_SAMPLES = (((5, 4), (5,)), ((1, 4), (1,)), ((2, 4, 3), (2, 3)), ((2, 4, 2, 2), (2, 2, 2)))
_INDEX = (None, "index:4")      # logits, class indices


def _nll_loss_rule(cls, args, kwargs):
    """vmap: -coef * logp[i, idx_i], reduced: the column picked with Gather on the physical tensor."""
    logp, idx, coef, reduction = args
    if isinstance(idx, Tensor) or isinstance(coef, Tensor):
        return NotImplemented
    b = _bsizes(logp._blevels)
    xp = logp.device.backend.xp
    picked = Gather.apply(logp._bbase, xp.broadcast_to(idx, b + idx.shape), 1 + len(b))
    neg = Tensor._make(-coef, logp.device)
    losses = reshape(picked, b + coef.shape) * neg
    if reduction != "none":
        losses = _sum(losses, tuple(range(len(b), len(b) + coef.ndim)))
        if reduction == "mean":
            losses = losses / Tensor._make(coef.sum(), logp.device)
    return _wrap(losses, logp._blevels)


class NllLoss(Function):
    """-coef_i * logp[i, target_i] per element, summed, or divided by sum(coef) for 'mean'; the target
    column is picked directly (no one-hot) and the backward scatters into it."""
    batch_rule = _nll_loss_rule

    @staticmethod
    def forward(ctx, logp, idx, coef, reduction):
        return ctx.wrap(_nll_forward(ctx, logp.data, idx, coef, reduction))

    @staticmethod
    def backward(ctx, grad):
        return NllLossBackward.of(ctx, grad, ctx.idx, ctx.scale, ctx.shape), None, None, None


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


def _nll_backward_rule(cls, args, kwargs):
    """vmap (a batched gradient): -scale * grad as a product, scattered into the target column, both batched
    by their rules."""
    grad, idx, scale, shape = args
    backend = grad.device.backend
    g = mul(grad, Tensor._make(backend.call(backend.xp.negative, scale), grad.device))
    return ScatterAddInto.apply(g.reshape(idx.shape), idx, 1, shape)


class NllLossBackward(Function):
    """NllLoss's gradient, -scale * grad scattered into zeros of the input's shape at the target columns
    (``idx``, ``scale``: what NllLoss's forward kept, or _index_scale's from a fused loss's targets), as one op;
    differentiable again: its own backward picks the gradient's gradient at those columns (_nll_grad_grad)."""
    batch_rule = _nll_backward_rule

    @staticmethod
    def arrays(ctx, g, idx, scale, shape):
        src = (g * -scale).reshape(idx.shape)
        out = ctx.xp.zeros(shape, dtype=src.dtype)
        ctx.device.backend.scatter_add(out, _along(ctx.xp, idx, 1), src)
        return out

    @staticmethod
    def forward(ctx, grad, idx, scale, shape):
        ctx.idx, ctx.scale, ctx.shape = idx, scale, grad.shape
        return ctx.wrap(NllLossBackward.arrays(ctx, grad.data, idx, scale, shape))

    @staticmethod
    def backward(ctx, gg):
        return _nll_grad_grad(ctx, gg, ctx.idx, ctx.scale, ctx.shape), None, None, None


def _nll_grad_grad(ctx, gg, idx, scale, shape):
    """The gradient with respect to grad of NllLoss's gradient (of shape ``shape``), given that gradient's
    gradient gg: -scale * gg at the target columns, summed to the loss's shape (a recorded op each)."""
    backend = ctx.device.backend
    d = mul(Gather.apply(gg, idx, 1).reshape(scale.shape), ctx.wrap(backend.call(backend.xp.negative, scale)))
    return d if d.shape == shape else _sum(d).reshape(shape)


def _index_scale(backend, t, ignore, reduction, dtype):
    """NllLoss's (idx, scale) from the fused losses' targets (backend.class_targets' pair) again, for the
    gradient's gradient and vmap (on the targets' GPU: backend.call)."""
    xp = backend.xp
    t, valid = backend.target_mask(t, ignore)
    coef = valid.astype(dtype)
    if reduction == "mean":
        total = coef.sum()
        nonzero = total != 0                       # every target ignored: a zero gradient, not 0/0 = nan
        coef = xp.where(nonzero, coef, 0) / xp.where(nonzero, total, 1)
    return t[:, None], coef


def _fused_loss(ctx, kernel, x, t, ignore, reduction):
    """The forward of a fused loss node: the backend kernel's loss, its state kept for the fused backward."""
    loss, *fused = kernel(x.data, t, ignore, reduction)
    ctx.fused, ctx.t, ctx.ignore, ctx.reduction = fused, t, ignore, reduction
    ctx.save_for_backward(x)
    return ctx.wrap(loss)


class FusedNllLoss(Function):
    """nll_loss's common case, -logp[i, t_i] reduced for 2-D logp and class indices without weights, as the
    backend's fused kernels (backend.nll_loss: one reduction; its backward one kernel), on the targets of
    backend.class_targets (t, ignore). The backward that records a graph (create_graph) is NllLoss's Tensor-op
    one."""
    batch_rule = batching.loop      # taken outside vmap only

    @staticmethod
    def forward(ctx, logp, t, ignore, reduction):
        return _fused_loss(ctx, ctx.device.backend.nll_loss, logp, t, ignore, reduction)

    @staticmethod
    def backward(ctx, grad):
        return FusedNllLossBackward.of(ctx, grad, ctx.t, ctx.ignore, ctx.fused, ctx.reduction), None, None, None


def _fused_backward_rule(cls, args, kwargs):
    """vmap (a batched gradient): NllLossBackward (and for cross-entropy LogSoftmaxBackward), batched by their
    rules, on the targets as NllLoss's (idx, scale)."""
    grad, x, t, ignore, _, reduction = args
    backend = x.device.backend
    idx, scale = backend.call(_index_scale, backend, t, ignore, reduction, x.dtype)
    g = NllLossBackward.apply(grad, idx, scale, x.shape)
    return g if cls is FusedNllLossBackward else LogSoftmaxBackward.apply(g, LogSoftmax.apply(x, 1), 1)


class FusedNllLossBackward(Function):
    """FusedNllLoss's gradient as one op: the backend's fused kernel (backend.nll_loss_backward); differentiable
    again as NllLossBackward (the gradient is linear in grad and does not depend on logp)."""
    batch_rule = _fused_backward_rule

    @staticmethod
    def arrays(ctx, g, logp, t, ignore, fused, reduction):
        return ctx.device.backend.nll_loss_backward(g, logp, t, ignore, fused, reduction)

    @staticmethod
    def forward(ctx, grad, logp, t, ignore, fused, reduction):
        backend = ctx.device.backend
        ctx.idx, ctx.scale = backend.call(_index_scale, backend, t, ignore, reduction, logp.dtype)
        ctx.shape = grad.shape
        return ctx.wrap(FusedNllLossBackward.arrays(ctx, grad.data, logp.data, t, ignore, fused, reduction))

    @staticmethod
    def backward(ctx, gg):
        return _nll_grad_grad(ctx, gg, ctx.idx, ctx.scale, ctx.shape), None, None, None, None, None


class CrossEntropy(Function):
    """log_softmax over dim 1 then NllLoss, as one node: cross_entropy's common case (a 2-D input, class
    indices, no class weights or label smoothing) as the backend's fused kernels (backend.cross_entropy; on
    a GPU the row max, the row sum of exp and one reduction; its backward one kernel), equal to the two
    ops. A gradient of the gradient needs log_softmax in the graph: it is recomputed from the saved input
    then (create_graph), and the backward is LogSoftmaxBackward of NllLoss's, recorded."""
    # vmap: cross_entropy takes this node only outside vmap (_function._vmap), so a batched call is a user's
    # own; the op once per example
    batch_rule = batching.loop

    @staticmethod
    def forward(ctx, x, t, ignore, reduction):
        return _fused_loss(ctx, ctx.device.backend.cross_entropy, x, t, ignore, reduction)

    @staticmethod
    def backward(ctx, grad):
        return CrossEntropyBackward.of(ctx, grad, ctx.t, ctx.ignore, ctx.fused, ctx.reduction), None, None, None


class CrossEntropyBackward(Function):
    """CrossEntropy's gradient as one op: the backend's fused kernel (backend.cross_entropy_backward), equal to
    gx = LogSoftmaxBackward(h, log_softmax(x)) with h NllLoss's gradient of grad. Differentiable again: its own
    backward recomputes log_softmax(x) from the saved input and is that of the two ops it fuses, bit for bit
    (recorded ops: d/dh = gg - sum(gg * p), d/dlogp = -gg * p * sum(h) through log_softmax's backward)."""
    batch_rule = _fused_backward_rule

    @staticmethod
    def arrays(ctx, g, x, t, ignore, fused, reduction):
        return ctx.device.backend.cross_entropy_backward(g, x, t, ignore, fused, reduction)

    @staticmethod
    def forward(ctx, grad, x, t, ignore, fused, reduction):
        backend = ctx.device.backend
        ctx.idx, ctx.scale = backend.call(_index_scale, backend, t, ignore, reduction, x.dtype)
        ctx.save_for_backward(grad, x)
        return ctx.wrap(CrossEntropyBackward.arrays(ctx, grad.data, x.data, t, ignore, fused, reduction))

    @staticmethod
    def backward(ctx, gg):
        grad, x = ctx.saved_tensors
        need_g, need_x = ctx.needs_input_grad[:2]
        logp = LogSoftmax.apply(x, 1)
        p = exp(logp)
        d_grad = d_x = None
        if need_g:
            d_grad = _nll_grad_grad(ctx, gg - (gg * p).sum(1, keepdims=True), ctx.idx, ctx.scale, grad.shape)
        if need_x:
            h = NllLossBackward.apply(grad, ctx.idx, ctx.scale, x.shape)
            d_x = LogSoftmaxBackward.apply(-(gg * p * h.sum(1, keepdims=True)), logp, 1)
        return d_grad, d_x, None, None, None, None


_FUSED_CE_MAX = 1 << 16     # elements of input up to which cross_entropy uses CrossEntropy on the host (NumPy
#                             keeps log_softmax's result for the backward); a GPU's fused path keeps no more
#                             than the row max and sum, and takes every size


def _fused_targets(x, t, ignore_index, op):
    """backend.class_targets' pair (t, ignore) for the fused losses: the targets range-checked, those equal to
    ignore_index excepted (on a GPU at the next synchronisation; _check_range's message). On the CPU (and
    under ag.compile's trace) new arrays, the targets with the ignored ones at 0 and the mask of the others:
    a compiled program must not see the caller's targets as possibly written through the loss's results; on a
    GPU the targets themselves and ignore_index, which the loss kernels only read."""
    backend = x.device.backend
    c = x.shape[1]
    message = f"{op}: target {{value}} is out of range [0, {c}) for {c} classes (ignore_index={ignore_index})"
    return backend.call(backend.class_targets, t.data, ignore_index, c, IndexError, message)


def _fusable(x, t):
    """The fused losses' case: a 2-D input with rows and classes, outside vmap (a batched target's values
    stay on the batch)."""
    return (x.ndim == 2 and x.shape[0] and x.shape[1] and not _function._vmap
            and getattr(t, "_blevels", None) is None)


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
    from ...creation import arange
    from ..elementwise import not_equal
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


@register(namespace="nn.functional", tests=(
    OpTest(_CE_SAMPLES[:3], ref="refs.nll_loss_of_log_softmax", op=lambda x, t: nll_loss(log_softmax(x, 1), t),
           name="nll_loss", kinds=_INDEX),
    OpTest(_CE_SAMPLES[:1] + _CE_SAMPLES[2:3], ref="refs.nll_loss_weight_ignore",
           op=lambda x, t: nll_loss(x, t, _const(_W4, x), ignore_index=3, reduction="sum"),
           name="nll_loss_weight_ignore", kinds=_INDEX)),
    doc="Negative log-likelihood of log-probabilities (N, C, d...) at class indices (N, d...).")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of log-probabilities (N, C, d...) (or (C,)) at class indices (N, d...);
    'mean' divides by the summed weights of the non-ignored targets."""
    input, = cast_float32(input)   # autocast: run in float32
    if isinstance(input, Tensor) and input.dtype is bfloat16:   # in float32 (as PyTorch; the fused kernels
        return nll_loss(input.float(), target, weight, ignore_index=ignore_index,   # have no bfloat16), rounded
                        reduction=_reduction(reduction, size_average, reduce, "nll_loss")).to(dtype=bfloat16)
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
    if w is None and _fusable(x, t):
        loss = FusedNllLoss.apply(x, *_fused_targets(x, t, ignore_index, op), reduction)
        return loss.reshape(()) if unbatched and reduction == "none" else loss
    if w is not None and w.dtype != x.dtype:
        w = w.to(dtype=x.dtype)
    loss = _nll(x, t, w, ignore_index, reduction, op)[0]
    return loss.reshape(()) if unbatched and reduction == "none" else loss


@register(namespace="nn.functional", tests=(
    OpTest(_CE_SAMPLES, ref="refs.cross_entropy", name="cross_entropy", kinds=_INDEX),
    OpTest(_CE_SAMPLES + (((0, 4), (0,)),), ref="refs.cross_entropy_sum", op=_ce("sum"), name="cross_entropy_sum",
           kinds=_INDEX),
    OpTest(_CE_SAMPLES, ref="refs.cross_entropy_none", op=_ce("none"), name="cross_entropy_none", kinds=_INDEX),
    OpTest(_CE_SAMPLES, ref="refs.cross_entropy_weight", op=_ce_weighted(), name="cross_entropy_weight",
           kinds=_INDEX),
    OpTest(_CE_SAMPLES[:1] + _CE_SAMPLES[2:], ref="refs.cross_entropy_ignore", op=_ce(ignore_index=2),
           name="cross_entropy_ignore", kinds=_INDEX),
    OpTest(_CE_SAMPLES, ref="refs.cross_entropy_weight_ignore_none", op=_ce_weighted("none", ignore_index=0),
           name="cross_entropy_weight_ignore_none", kinds=_INDEX),
    OpTest(_CE_SAMPLES, ref="refs.cross_entropy_smoothing", op=_ce(label_smoothing=0.2),
           name="cross_entropy_smoothing", kinds=_INDEX),
    OpTest(_CE_SAMPLES[:1] + _CE_SAMPLES[2:], ref="refs.cross_entropy_smoothing_weight_ignore",
           op=_ce_weighted(ignore_index=1, label_smoothing=0.3), name="cross_entropy_smoothing_weight_ignore",
           kinds=_INDEX),
    OpTest((((3, 4), (3, 4)), ((2, 4, 3), (2, 4, 3))), ref="refs.cross_entropy_probs",
           op=lambda x, p: cross_entropy(x, softmax(p, 1)), name="cross_entropy_probs"),
    OpTest((((3, 4), (3, 4)),), ref="refs.cross_entropy_probs_weight_smoothing",
           op=lambda x, p: cross_entropy(x, softmax(p, 1), _const(_W4, x), reduction="none", label_smoothing=0.1),
           name="cross_entropy_probs_weight_smoothing")),
    doc="log_softmax over dim 1 then the negative log-likelihood of class indices or class probabilities.")
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    """log_softmax over dim 1 then the negative log-likelihood. ``target`` holds class indices (N, d...)
    (integer dtype; ignore_index and weight apply) or class probabilities shaped like input (float)."""
    input, = cast_float32(input)   # autocast: run in float32
    if isinstance(input, Tensor) and input.dtype is bfloat16:   # in float32, rounded once (as nll_loss)
        return cross_entropy(input.float(), target, weight, ignore_index=ignore_index, label_smoothing=label_smoothing,
                             reduction=_reduction(reduction, size_average, reduce, "cross_entropy")).to(dtype=bfloat16)
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
    if is_floating(t.dtype):
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
    if (w is None and not label_smoothing and _fusable(x, t)
            and (x.data.size <= _FUSED_CE_MAX or x.data.__class__ is not _HOST)):
        # the common case as one node of fused kernels (CrossEntropy)
        loss = CrossEntropy.apply(x, *_fused_targets(x, t, ignore_index, op), reduction)
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


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((), ())), ref="refs.mse_loss", name="mse_loss"),
    OpTest((((3, 4), (3, 4)),), ref=lambda np, x, t: (x - t) ** 2, op=lambda x, t: mse_loss(x, t, reduction="none"),
           name="mse_loss_none"),
    OpTest((((3, 4), (3, 4), (3, 4)),), ref=lambda np, x, t, w: ((x - t) ** 2 * w).sum() / w.sum(),
           op=lambda x, t, w: mse_loss(x, t, weight=w), name="mse_loss_weight", domain=(0.2, 2.0))))
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """(input - target) ** 2, reduced; with weight, 'mean' is sum(weight * se) / sum(weight)."""
    input, target = cast_float32(input, target)   # autocast: run in float32
    reduction = _reduction(reduction, size_average, reduce, "mse_loss")
    x, t = _pair_loss_operands(input, target, "mse_loss")
    return _weighted_reduce(square(x - t), weight, reduction, "mse_loss")


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)),), ref="refs.l1_loss", name="l1_loss"),
    OpTest((((3, 4), (3, 4)),), ref="refs.l1_loss_sum", op=lambda x, t: l1_loss(x, t, reduction="sum"),
           name="l1_loss_sum")))
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
    batch_rule = batching.elementwise

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


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((5,), (5,))), ref="refs.bce", name="binary_cross_entropy", domain=(0.05, 0.95)),
    OpTest((((3, 4), (3, 4), (3, 4)),), ref="refs.bce_weight_sum",
           op=lambda x, t, w: binary_cross_entropy(x, t, w, reduction="sum"), name="binary_cross_entropy_weight_sum",
           domain=(0.05, 0.95))))
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


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((5,), (5,))), ref="refs.bce_logits", name="binary_cross_entropy_with_logits"),
    OpTest((((3, 4), (3, 4), (3, 4), (4,)),), ref="refs.bce_logits_none",
           op=lambda x, t, w, pw: binary_cross_entropy_with_logits(x, t, w, reduction="none", pos_weight=pw),
           name="binary_cross_entropy_with_logits_pos_weight", domain=(0.2, 2.0))))
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
