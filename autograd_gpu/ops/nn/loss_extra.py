"""nn.functional's further losses: smooth_l1_loss, huber_loss, kl_div, margin_ranking_loss, triplet_margin_loss,
cosine_embedding_loss, poisson_nll_loss, gaussian_nll_loss, multi_margin_loss, multilabel_soft_margin_loss,
hinge_embedding_loss, soft_margin_loss, each with PyTorch's ``reduction`` (and its deprecated ``size_average`` /
``reduce``). ctc_loss is in ctc.py.

Each is composed from ag ops as PyTorch's reference formula, so they need no backward of their own and are
differentiable twice; the piecewise ones use ``where`` so the gradient at a kink is the one PyTorch picks."""
import math
import warnings

from ...creation import arange
from ..elementwise import Softplus, where, clamp, exp, log, abs as _abs, equal, not_equal, greater, minimum
from ..reduction import sum as _sum
from ..indexing import gather
from .._util import as_tensor
from ..registry import register, OpTest
from ..special import xlogy
from ._args import _float_tensor, _reduction, _reduce, _index_tensor, _check_range
from .loss import _pair_loss_operands
from .activation_extra import pairwise_distance, logsigmoid

_PAIR = (((3, 4), (3, 4)), ((5,), (5,)), ((), ()))


def _red(np, loss, reduction):
    """The references' reduction."""
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


def _sign(t):
    """An op-table target of +-1 from a float sample (inputs are kept away from 0)."""
    return where(greater(t, 0), 1.0, -1.0).to(dtype=t.dtype)


def _np_sign(np, t):
    return np.where(t > 0, 1.0, -1.0).astype(t.dtype)


def _relu0(v):
    """max(v, 0) with the gradient 0 at 0 (PyTorch's multi_margin_loss, whose kernel tests ``v > 0``)."""
    return where(greater(v, 0), v, 0.0)


def _clamp_min0(v):
    """max(v, 0) with the gradient 1 at 0: PyTorch's ``clamp_min(v, 0)`` of the hinge-type losses
    (margin_ranking, triplet_margin, cosine_embedding, hinge_embedding) passes it at the boundary."""
    return clamp(v, min=0.0)


# --------------------------------------------------------------------------- regression
def _smooth_l1_ref(np, x, t, reduction="mean", beta=1.0):
    d = np.abs(x - t)
    return _red(np, np.where(d < beta, 0.5 * d * d / beta, d - 0.5 * beta), reduction)


@register(namespace="nn.functional", tests=(
    OpTest(_PAIR, ref=_smooth_l1_ref, name="smooth_l1_loss"),
    OpTest(_PAIR[:1], ref=lambda np, x, t: _smooth_l1_ref(np, x, t, "none", 0.5),
           op=lambda x, t: smooth_l1_loss(x, t, reduction="none", beta=0.5), name="smooth_l1_loss_beta")))
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta, for d = input - target; beta 0 is l1_loss."""
    op = "smooth_l1_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    if beta < 0:
        raise RuntimeError(f"{op}: beta must be non-negative, got {beta}")     # RuntimeError, as PyTorch
    x, t = _pair_loss_operands(input, target, op)
    d = x - t
    ad = _abs(d)
    if beta == 0:
        return _reduce(ad, reduction)
    return _reduce(where(ad < beta, d * d * (0.5 / beta), ad - 0.5 * beta), reduction)


def _huber_ref(np, x, t, reduction="mean", delta=1.0):
    d = np.abs(x - t)
    return _red(np, np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)


@register(namespace="nn.functional", tests=(
    OpTest(_PAIR, ref=_huber_ref, name="huber_loss"),
    OpTest(_PAIR[:1], ref=lambda np, x, t: _huber_ref(np, x, t, "sum", 0.7),
           op=lambda x, t: huber_loss(x, t, reduction="sum", delta=0.7), name="huber_loss_delta"),
    OpTest((((3, 4), (3, 4), (3, 4)),), ref=lambda np, x, t, w: (_huber_ref(np, x, t, "none") * w).mean(),
           op=lambda x, t, w: huber_loss(x, t, weight=w), name="huber_loss_weight")))
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta), for d = input - target.

    With weight, each element's loss times its weight, then reduced ('mean' of the products, as PyTorch)."""
    op = "huber_loss"
    reduction = _reduction(reduction, None, None, op)
    if delta <= 0:
        raise RuntimeError(f"{op}: delta must be positive, got {delta}")       # RuntimeError, as PyTorch
    x, t = _pair_loss_operands(input, target, op)
    d = x - t
    ad = _abs(d)
    loss = where(ad < delta, d * d * 0.5, (ad - 0.5 * delta) * float(delta))
    if weight is not None:
        w = _float_tensor(weight, op, "weight", like=x)
        if w.shape != x.shape:
            raise ValueError(f"{op}: expected a weight of the input's shape {x.shape}, got {w.shape}")
        loss = loss * w
    return _reduce(loss, reduction)


def _xlogy_self(t):
    """t * log(t), 0 where t is 0: PyTorch's xlogy(t, t), with its gradient (NaN at t = 0: the 0 / 0 of
    xlogy's gradient in its second operand; a target that needs no gradient is unaffected)."""
    return xlogy(t, t)


def _kl_ref(np, x, t, reduction="batchmean", log_target=False):
    if log_target:
        loss = np.exp(t) * (t - x)
    else:
        loss = np.where(t == 0, 0, t * np.log(np.where(t == 0, 1, t))) - t * x
    if reduction == "batchmean":
        return loss.sum() / x.shape[0] if x.ndim else loss.sum()
    return _red(np, loss, reduction)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((5,), (5,))), ref=_kl_ref, op=lambda x, t: kl_div(x, t, reduction="batchmean"),
           name="kl_div", domain=(0.1, 2.0)),
    OpTest((((3, 4), (3, 4)),), ref=lambda np, x, t: _kl_ref(np, x, t, "none", True),
           op=lambda x, t: kl_div(x, t, reduction="none", log_target=True), name="kl_div_log_target"),
    OpTest((((3, 4), (3, 4)),), ref=lambda np, x, t: _kl_ref(np, x, t, "sum"),
           op=lambda x, t: kl_div(x, t, reduction="sum"), name="kl_div_sum", domain=(0.1, 2.0))))
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence t (log t - x) of log-probabilities x from target t (log-probabilities with log_target).

    t log t is 0 where t is 0. reduction 'batchmean' divides the
    sum by the batch size (the mathematical KL); 'mean' averages over elements and warns, as PyTorch."""
    op = "kl_div"
    if size_average is not None or reduce is not None:
        reduction = _reduction(reduction, size_average, reduce, op)
    elif reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides the total loss by both the batch size and the support "
                      "size; 'batchmean' divides only by the batch size, as the KL divergence is defined",
                      stacklevel=2)
    elif reduction not in ("batchmean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'batchmean', 'sum' or 'none', got {reduction!r}")
    x = _float_tensor(input, op)
    t = _float_tensor(target, op, "target", like=x)
    loss = exp(t) * (t - x) if log_target else _xlogy_self(t) - t * x
    if reduction == "batchmean":
        total = loss.sum()
        return total / x.shape[0] if x.ndim else total
    return _reduce(loss, reduction)


# --------------------------------------------------------------------------- ranking and embedding losses
def _same_ndim(op, *ts):
    if len({t.ndim for t in ts}) != 1:
        raise ValueError(f"{op}: expected all input tensors to have the same number of dimensions, got shapes "
                         f"{', '.join(str(t.shape) for t in ts)}")


@register(namespace="nn.functional", tests=(
    OpTest((((5,), (5,), (5,)), ((), (), ())),
           ref=lambda np, a, b, y: np.maximum(-_np_sign(np, y) * (a - b) + 0.3, 0).mean(),
           op=lambda a, b, y: margin_ranking_loss(a, b, _sign(y), margin=0.3), name="margin_ranking_loss"),
    OpTest((((2, 3), (2, 3), (2, 3)),), ref=lambda np, a, b, y: np.maximum(-_np_sign(np, y) * (a - b), 0),
           op=lambda a, b, y: margin_ranking_loss(a, b, _sign(y), reduction="none"),
           name="margin_ranking_loss_none")))
def margin_ranking_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), target +1 or -1."""
    op = "margin_ranking_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    a = _float_tensor(input1, op, "input1")
    b = _float_tensor(input2, op, "input2", like=a)
    y = as_tensor(target, op, like=a)
    _same_ndim(op, a, b, y)
    return _reduce(_clamp_min0(-y * (a - b) + float(margin)), reduction)


def _triplet_ref(np, a, p, n, margin=1.0, swap=False, reduction="mean"):
    def dist(u, v):
        return np.sqrt(((u - v + 1e-6) ** 2).sum(-1))
    dap, dan = dist(a, p), dist(a, n)
    if swap:
        dan = np.minimum(dan, dist(p, n))
    return _red(np, np.maximum(margin + dap - dan, 0), reduction)


@register(namespace="nn.functional", tests=(
    OpTest((((4, 3), (4, 3), (4, 3)), ((3,), (3,), (3,))), ref=_triplet_ref, name="triplet_margin_loss"),
    OpTest((((4, 3), (4, 3), (4, 3)),), ref=lambda np, a, p, n: _triplet_ref(np, a, p, n, 0.5, True, "none"),
           op=lambda a, p, n: triplet_margin_loss(a, p, n, margin=0.5, swap=True, reduction="none"),
           name="triplet_margin_loss_swap")))
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(d(a, p) - d(a, n) + margin, 0) with d = pairwise_distance(., ., p, eps).

    swap uses min(d(a, n), d(p, n)) as the negative distance."""
    op = "triplet_margin_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    a = _float_tensor(anchor, op, "anchor")
    pos = _float_tensor(positive, op, "positive", like=a)
    neg = _float_tensor(negative, op, "negative", like=a)
    if not a.ndim == pos.ndim == neg.ndim:
        raise ValueError(f"{op}: expected the anchor, positive and negative tensors to have the same number of "
                         f"dimensions, got {a.ndim}-D, {pos.ndim}-D and {neg.ndim}-D inputs")
    d_ap = pairwise_distance(a, pos, p, eps)
    d_an = pairwise_distance(a, neg, p, eps)
    if swap:
        d_pn = pairwise_distance(pos, neg, p, eps)
        d_an = minimum(d_an, d_pn)                 # PyTorch's: equal distances share the gradient
    return _reduce(_clamp_min0(d_ap - d_an + float(margin)), reduction)


def _cos_emb_ref(np, a, b, y, margin=0.0, reduction="mean"):
    y = _np_sign(np, y)
    prod = (a * b).sum(-1)
    cos = prod / np.sqrt(((a * a).sum(-1) + 1e-12) * ((b * b).sum(-1) + 1e-12))
    loss = np.where(y == 1, 1 - cos, 0) + np.where(y == -1, np.maximum(cos - margin, 0), 0)
    return _red(np, loss, reduction)


@register(namespace="nn.functional", tests=(
    OpTest((((5, 3), (5, 3), (5,)), ((4,), (4,), ())), ref=_cos_emb_ref,
           op=lambda a, b, y: cosine_embedding_loss(a, b, _sign(y)), name="cosine_embedding_loss"),
    OpTest((((5, 3), (5, 3), (5,)),), ref=lambda np, a, b, y: _cos_emb_ref(np, a, b, y, -0.2, "sum"),
           op=lambda a, b, y: cosine_embedding_loss(a, b, _sign(y), margin=-0.2, reduction="sum"),
           name="cosine_embedding_loss_margin")))
def cosine_embedding_loss(input1, input2, target, margin=0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1.

    Inputs (N, D) or (D,), target (N,) or 0-d."""
    op = "cosine_embedding_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    a = _float_tensor(input1, op, "input1")
    b = _float_tensor(input2, op, "input2", like=a)
    y = as_tensor(target, op, like=a)
    if a.shape != b.shape:
        raise ValueError(f"{op}: expected input1 and input2 of one shape, got {a.shape} and {b.shape}")
    if a.ndim not in (1, 2) or y.ndim != a.ndim - 1:
        raise ValueError(f"{op}: expected inputs (N, D) with a target (N,), or (D,) with a 0-d target, got "
                         f"inputs {a.shape} and target {y.shape}")
    d = a.ndim - 1
    prod = _sum(a * b, d)
    cos = prod / ((_sum(a * a, d) + 1e-12) * (_sum(b * b, d) + 1e-12)) ** 0.5
    loss = where(equal(y, 1), 1.0 - cos, 0.0) + where(equal(y, -1), _clamp_min0(cos - float(margin)), 0.0)
    return _reduce(loss, reduction)


@register(namespace="nn.functional", tests=(
    OpTest(_PAIR, ref=lambda np, x, y: np.where(_np_sign(np, y) == 1, x, np.maximum(1.0 - x, 0)).mean(),
           op=lambda x, y: hinge_embedding_loss(x, _sign(y)), name="hinge_embedding_loss", avoid=(1.0,)),
    OpTest(_PAIR[:1], ref=lambda np, x, y: np.where(_np_sign(np, y) == 1, x, np.maximum(0.5 - x, 0)).sum(),
           op=lambda x, y: hinge_embedding_loss(x, _sign(y), margin=0.5, reduction="sum"),
           name="hinge_embedding_loss_margin", avoid=(0.5,))))
def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1 (a target of neither adds both)."""
    op = "hinge_embedding_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    x = _float_tensor(input, op)
    y = as_tensor(target, op, like=x)
    loss = where(not_equal(y, 1), _clamp_min0(float(margin) - x), 0.0) + where(not_equal(y, -1), x, 0.0)
    return _reduce(loss, reduction)


@register(namespace="nn.functional", tests=(
    OpTest(_PAIR, ref=lambda np, x, y: np.logaddexp(0, -_np_sign(np, y) * x).mean(),
           op=lambda x, y: soft_margin_loss(x, _sign(y)), name="soft_margin_loss"),
    OpTest(_PAIR[:1], ref=lambda np, x, y: np.logaddexp(0, -y * x),
           op=lambda x, y: soft_margin_loss(x, y, reduction="none"), name="soft_margin_loss_none")))
def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), computed without overflow."""
    op = "soft_margin_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    x, y = _pair_loss_operands(input, target, op)
    return _reduce(Softplus.apply(-y * x), reduction)


def _mlsm_ref(np, x, t, w=None, reduction="mean"):
    ls = lambda v: -np.logaddexp(0, -v)  # noqa: E731
    loss = -(t * ls(x) + (1 - t) * ls(-x))
    if w is not None:
        loss = loss * w
    return _red(np, loss.sum(-1) / x.shape[-1], reduction)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((4,), (4,))), ref=lambda np, x, t: _mlsm_ref(np, x, 1 / (1 + np.exp(-t))), op=lambda x, t: multilabel_soft_margin_loss(x, t.sigmoid()),
           name="multilabel_soft_margin_loss"),
    OpTest((((3, 4), (3, 4), (4,)),), ref=lambda np, x, t, w: _mlsm_ref(np, x, 1 / (1 + np.exp(-t)), w, "none"),
           op=lambda x, t, w: multilabel_soft_margin_loss(x, t.sigmoid(), w, reduction="none"),
           name="multilabel_soft_margin_loss_weight")))
def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(t logsigmoid(x) + (1 - t) logsigmoid(-x)), times weight, averaged over the classes (last dim)."""
    op = "multilabel_soft_margin_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    x = _float_tensor(input, op)
    t = as_tensor(target, op, like=x)
    if x.ndim == 0:
        raise ValueError(f"{op}: expected an input of shape (N, C) or (C,), got a 0-d tensor")
    loss = -(t * logsigmoid(x) + (1.0 - t) * logsigmoid(-x))
    if weight is not None:
        loss = loss * as_tensor(weight, op, like=x)
    c = x.shape[-1]
    return _reduce(_sum(loss, x.ndim - 1) / float(c), reduction)


def _multi_margin_ref(np, x, y, p=1, margin=1.0, w=None, reduction="mean"):
    x2 = x.reshape(-1, x.shape[-1])
    y2 = y.reshape(-1)
    xy = np.take_along_axis(x2, y2[:, None], 1)
    z = np.maximum(margin - xy + x2, 0) ** p
    if w is not None:
        z = z * w[y2][:, None]
    z[np.arange(len(y2)), y2] = 0
    loss = (z.sum(1) / x.shape[-1]).reshape(y.shape)
    return _red(np, loss, reduction)


_MM_KINDS = (None, "index:4")


@register(namespace="nn.functional", tests=(
    OpTest((((5, 4), (5,)), ((4,), ())), ref=_multi_margin_ref, name="multi_margin_loss", kinds=_MM_KINDS),
    OpTest((((5, 4), (5,), (4,)),), ref=lambda np, x, y, w: _multi_margin_ref(np, x, y, 2, 0.5, w, "none"),
           op=lambda x, y, w: multi_margin_loss(x, y, p=2, margin=0.5, weight=w, reduction="none"),
           name="multi_margin_loss_p2_weight", kinds=_MM_KINDS + (None,))))
def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
    """Multi-class hinge loss: sum over i != y of max(0, margin - x[y] + x[i]) ** p, over the class count.

    Times weight[y] when given; input (N, C) or (C,), target class indices (N,) or 0-d."""
    op = "multi_margin_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 are supported, got p={p!r}")
    x = _float_tensor(input, op)
    y = _index_tensor(target, x, op, "target")
    if x.ndim not in (1, 2) or y.ndim != x.ndim - 1 or (x.ndim == 2 and y.shape[0] != x.shape[0]):
        raise ValueError(f"{op}: expected an input (N, C) with a target (N,), or (C,) with a 0-d target, got "
                         f"input {x.shape} and target {y.shape}")
    unbatched = x.ndim == 1
    if unbatched:
        x, y = x.reshape(1, -1), y.reshape(1)
    c = x.shape[1]
    backend = x.device.backend
    backend.call(_check_range, backend, y.data, c, op, "target", f" for {c} classes")
    col = y.reshape(-1, 1)
    z = _relu0(float(margin) - gather(x, 1, col) + x)
    if p == 2:
        z = z * z
    hot = equal(col, arange(c, device=x.device).reshape(1, c))
    if weight is not None:
        w = _float_tensor(weight, op, "weight", like=x)
        if w.shape != (c,):
            raise ValueError(f"{op}: expected a weight of shape ({c},) (one per class), got {w.shape}")
        z = z * _sum(where(hot, w.reshape(1, c), 0.0), 1, keepdims=True)     # weight[y] per row
    loss = _sum(where(hot, 0.0, z), 1) / float(c)
    if unbatched:
        loss = loss.reshape(())
    return _reduce(loss, reduction)


# --------------------------------------------------------------------------- likelihoods
def _poisson_ref(np, x, t, log_input=True, full=False, eps=1e-8, reduction="mean"):
    loss = np.exp(x) - t * x if log_input else x - t * np.log(x + eps)
    if full:
        tt = np.where(t > 1, t, 2.0)
        loss = loss + np.where(t > 1, tt * np.log(tt) - tt + 0.5 * np.log(2 * np.pi * tt), 0)
    return _red(np, loss, reduction)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4)), ((5,), (5,))), ref=_poisson_ref, name="poisson_nll_loss"),
    OpTest((((3, 4), (3, 4)),), ref=lambda np, x, t: _poisson_ref(np, x, t, False, True, 1e-8, "none"),
           op=lambda x, t: poisson_nll_loss(x, t, log_input=False, full=True, reduction="none"),
           name="poisson_nll_loss_full", domain=(0.2, 3.0), avoid=(1.0,))))
def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """Poisson negative log-likelihood: exp(x) - t x (log_input), else x - t log(x + eps).

    full adds Stirling's approximation of log(t!) where t > 1."""
    op = "poisson_nll_loss"
    reduction = _reduction(reduction, size_average, reduce, op)
    x = _float_tensor(input, op)
    t = as_tensor(target, op, like=x)
    loss = exp(x) - t * x if log_input else x - t * log(x + float(eps))
    if full:
        big = greater(t, 1)
        tt = where(big, t, 2.0)
        loss = loss + where(big, tt * log(tt) - tt + 0.5 * log(tt * (2 * math.pi)), 0.0)
    return _reduce(loss, reduction)


def _gnll_ref(np, x, t, v, full=False, eps=1e-6, reduction="mean"):
    if v.ndim == x.ndim - 1:
        v = v[..., None]
    v = np.maximum(v, eps)
    loss = 0.5 * (np.log(v) + (x - t) ** 2 / v)
    if full:
        loss = loss + 0.5 * float(np.log(2 * np.pi))
    return _red(np, loss, reduction)


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4), (3, 4), (3, 4)), ((3, 4), (3, 4), (3,)), ((3, 4), (3, 4), (3, 1))),
           ref=lambda np, x, t, v: _gnll_ref(np, x, t, np.abs(v)),
           op=lambda x, t, v: gaussian_nll_loss(x, t, v.abs()), name="gaussian_nll_loss", avoid=(0.0,)),
    OpTest((((3, 4), (3, 4), (3, 4)),), ref=lambda np, x, t, v: _gnll_ref(np, x, t, np.abs(v), True, 1e-6, "sum"),
           op=lambda x, t, v: gaussian_nll_loss(x, t, v.abs(), full=True, reduction="sum"),
           name="gaussian_nll_loss_full", avoid=(0.0,))))
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """Gaussian negative log-likelihood 0.5 (log(var) + (input - target)**2 / var), + 0.5 log(2 pi) with full.

    var has input's shape, one dim fewer (the last), or one size-1 dim; it is clamped at eps for the
    value only (the gradient passes as if unclamped, as PyTorch's in-place clamp under no_grad)."""
    op = "gaussian_nll_loss"
    x = _float_tensor(input, op)
    t = as_tensor(target, op, like=x)
    if isinstance(var, (int, float)) and not isinstance(var, bool):
        if var < 0:
            raise ValueError(f"{op}: var has negative entry/entries, got {var}")
        v = x.detach() * 0.0 + float(var)
    else:
        v = _float_tensor(var, op, "var", like=x)
        if v.numel():
            vd = v.data
            v.device.backend.assert_all((vd >= 0).all(), ValueError, f"{op}: var has negative entry/entries")
    if v.shape != x.shape:
        if x.shape[:-1] == v.shape:
            v = v.reshape(v.shape + (1,))
        elif not (x.ndim == v.ndim and sum(b for a, b in zip(x.shape, v.shape) if a != b) == 1):
            raise ValueError(f"{op}: var is of incorrect size: expected {x.shape}, {x.shape[:-1]} or one dim of "
                             f"size 1, got {v.shape}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    c = v.detach()
    v = v + (clamp(c, min=float(eps)) - c)
    d = x - t
    loss = (log(v) + d * d / v) * 0.5
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)

