"""OpInfo entries for nn.functional: each op against a NumPy reference written here (direct loops
for convolution and pooling), plus gradcheck and gradgradcheck in float64.

Class weights and running statistics that take no gradient are built inside the lambdas (on the
input's device), because gradcheck differentiates every float input it is given."""
import numpy as np

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from .op_db import OpInfo

_F32 = {ag.float32: {"rtol": 1e-4, "atol": 1e-5}}      # sums in another order than the reference's


def _const(values, like):
    """A constant tensor of ``like``'s dtype and device."""
    return ag.tensor(np.asarray(values, dtype=like.dtype), device=like.device)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


# --------------------------------------------------------------------------- references: convolution, pooling
def _conv2d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """Cross-correlation by a loop over output pixels: out[:, o, y, x] = sum(patch * w[o])."""
    (sh, sw), (ph, pw), (dh, dw) = _pair(stride), _pair(padding), _pair(dilation)
    x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow), dtype=x.dtype)
    for g in range(groups):
        wg = w[g * og:(g + 1) * og]
        for i in range(oh):
            for j in range(ow):
                patch = x[:, g * cg:(g + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh, j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, g * og:(g + 1) * og, i, j] = np.einsum("nckl,ockl->no", patch, wg)
    return out if b is None else out + b.reshape(1, -1, 1, 1)


def _conv1d_ref(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    y = _conv2d_ref(x[:, :, None], w[:, :, None], b, (1, stride), (0, padding), (1, dilation), groups)
    return y[:, :, 0]


def _pool_out(n, k, s, p, d, ceil_mode):
    span = d * (k - 1) + 1
    out = (n + 2 * p - span + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= n + p else out


def _max_pool2d_ref(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    (kh, kw), (ph, pw), (dh, dw) = _pair(kernel_size), _pair(padding), _pair(dilation)
    sh, sw = _pair(stride) if stride is not None else (kh, kw)
    n, c, h, w = x.shape
    oh, ow = _pool_out(h, kh, sh, ph, dh, ceil_mode), _pool_out(w, kw, sw, pw, dw, ceil_mode)
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in range(i * sh - ph, i * sh - ph + dh * (kh - 1) + 1, dh) if 0 <= r < h]
            cols = [q for q in range(j * sw - pw, j * sw - pw + dw * (kw - 1) + 1, dw) if 0 <= q < w]
            out[:, :, i, j] = x[:, :, rows][:, :, :, cols].max(axis=(2, 3))
    return out


def _avg_pool2d_ref(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                    divisor_override=None):
    """PyTorch's rule: the divisor is the window clipped to the padded input (count_include_pad) or
    to the input, unless divisor_override."""
    (kh, kw), (ph, pw) = _pair(kernel_size), _pair(padding)
    sh, sw = _pair(stride) if stride is not None else (kh, kw)
    n, c, h, w = x.shape
    oh, ow = _pool_out(h, kh, sh, ph, 1, ceil_mode), _pool_out(w, kw, sw, pw, 1, ceil_mode)
    out = np.empty((n, c, oh, ow), dtype=x.dtype)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - ph, j * sw - pw
            r1, c1 = min(r0 + kh, h + ph), min(c0 + kw, w + pw)
            size = (r1 - r0) * (c1 - c0)
            r0, c0, r1, c1 = max(r0, 0), max(c0, 0), min(r1, h), min(c1, w)
            total = x[:, :, r0:r1, c0:c1].sum(axis=(2, 3))
            div = divisor_override or (size if count_include_pad else (r1 - r0) * (c1 - c0))
            out[:, :, i, j] = total / div
    return out


# --------------------------------------------------------------------------- references: normalisation
def _bn_ref(x, w=None, b=None, mean=None, var=None, eps=1e-5):
    """Batch statistics (biased variance) when mean/var are None, else the given ones."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    m = x.mean(axis=axes, keepdims=True) if mean is None else mean.reshape(shape)
    v = x.var(axis=axes, keepdims=True) if var is None else var.reshape(shape)
    y = (x - m) / np.sqrt(v + eps)
    if w is not None:
        y = y * w.reshape(shape)
    return (y if b is None else y + b.reshape(shape)).astype(x.dtype)


def _ln_ref(x, k, w=None, b=None, eps=1e-5):
    axes = tuple(range(x.ndim - k, x.ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    return (y if b is None else y + b).astype(x.dtype)


# --------------------------------------------------------------------------- references: softmax and losses
def log_softmax_ref(a, axis):
    s = a - a.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def softmax_ref(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _sdpa_ref(q, k, v, mask=None, causal=False):
    """softmax(q k^T / sqrt(E) + mask) v; is_causal keeps key j <= query i."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    if mask is not None:
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    return (softmax_ref(s, -1) @ v).astype(q.dtype)


_SDPA_BOOL = np.array([[1, 0, 1, 1, 0], [1, 1, 0, 0, 0], [0, 1, 1, 1, 1]], dtype=bool)   # no row all False


def _reduce_ref(loss, reduction, denom=None):
    if reduction == "none":
        return loss
    total = loss.sum()
    return total if reduction == "sum" else total / (loss.size if denom is None else denom)


def cross_entropy_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """PyTorch's cross_entropy on NumPy arrays: class-index targets (N, d...) or probabilities (x's shape)."""
    logp = log_softmax_ref(x, 1)
    c = x.shape[1]
    w = np.ones(c, dtype=x.dtype) if weight is None else np.asarray(weight, dtype=x.dtype)
    wshape = (1, c) + (1,) * (x.ndim - 2)
    if t.dtype.kind == "f":
        if label_smoothing:
            t = t * (1 - label_smoothing) + label_smoothing / c
        return _reduce_ref(-(logp * t * w.reshape(wshape)).sum(axis=1), reduction).astype(x.dtype)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = w[safe] * valid
    nll = -np.take_along_axis(logp, safe[:, None], axis=1)[:, 0] * wt
    loss = _reduce_ref(nll, reduction, wt.sum())
    if label_smoothing:
        smooth = -(logp * w.reshape(wshape)).sum(axis=1) * valid
        loss = loss * (1 - label_smoothing) + _reduce_ref(smooth, reduction, wt.sum()) * (label_smoothing / c)
    return np.asarray(loss).astype(x.dtype)


def nll_loss_ref(logp, t, weight=None, ignore_index=-100, reduction="mean"):
    w = np.ones(logp.shape[1], dtype=logp.dtype) if weight is None else np.asarray(weight, dtype=logp.dtype)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = w[safe] * valid
    nll = -np.take_along_axis(logp, safe[:, None], axis=1)[:, 0] * wt
    return np.asarray(_reduce_ref(nll, reduction, wt.sum())).astype(logp.dtype)


def bce_ref(x, t, w=None, reduction="mean"):
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log(1 - x), -100))
    if w is not None:
        loss = loss * w
    return np.asarray(_reduce_ref(loss, reduction)).astype(x.dtype)


def bce_logits_ref(x, t, w=None, pos_weight=None, reduction="mean"):
    sp = np.logaddexp(0, -x)                       # log(1 + exp(-x))
    lw = 1 if pos_weight is None else 1 + (pos_weight - 1) * t
    loss = (1 - t) * x + lw * sp
    if w is not None:
        loss = loss * w
    return np.asarray(_reduce_ref(loss, reduction)).astype(x.dtype)


def _loss_ref(fn, reduction):
    return lambda x, t: np.asarray(_reduce_ref(fn(x, t), reduction)).astype(x.dtype)


# --------------------------------------------------------------------------- the table
_W4 = [0.5, 1.0, 2.0, 1.5]            # class weights for C = 4
IMG = ((2, 3, 6, 5), (3, 3, 3, 3), (3,))
CONV = [
    OpInfo("conv2d", F.conv2d, _conv2d_ref,
           (IMG, ((1, 2, 5, 5), (4, 2, 2, 3), (4,)), ((0, 3, 6, 5), (2, 3, 3, 3), (2,))), tol=_F32),
    OpInfo("conv2d_nobias", lambda x, w: F.conv2d(x, w), _conv2d_ref, (((2, 2, 5, 4), (3, 2, 3, 3)),), tol=_F32),
    OpInfo("conv2d_stride2_pad", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
           lambda x, w, b: _conv2d_ref(x, w, b, 2, 1), (IMG, ((1, 3, 7, 7), (2, 3, 3, 3), (2,))), tol=_F32),
    OpInfo("conv2d_dilation", lambda x, w, b: F.conv2d(x, w, b, padding=(2, 1), dilation=(2, 1)),
           lambda x, w, b: _conv2d_ref(x, w, b, 1, (2, 1), (2, 1)), (IMG,), tol=_F32),
    OpInfo("conv2d_groups", lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, groups=2),
           lambda x, w, b: _conv2d_ref(x, w, b, (1, 2), 1, 1, 2), (((2, 4, 5, 5), (6, 2, 3, 3), (6,)),), tol=_F32),
    OpInfo("conv2d_groups_stride1", lambda x, w, b: F.conv2d(x, w, b, padding=(1, 0), groups=2),   # bias row per group
           lambda x, w, b: _conv2d_ref(x, w, b, 1, (1, 0), 1, 2), (((2, 4, 5, 4), (6, 2, 3, 2), (6,)),), tol=_F32),
    OpInfo("conv2d_depthwise", lambda x, w: F.conv2d(x, w, groups=3),
           lambda x, w: _conv2d_ref(x, w, groups=3), (((1, 3, 4, 4), (3, 1, 2, 2)),), tol=_F32),
    OpInfo("conv2d_same", lambda x, w: F.conv2d(x, w, padding="same"),
           lambda x, w: _conv2d_ref(x, w, padding=1), (((2, 2, 4, 5), (3, 2, 3, 3)),), tol=_F32),
    OpInfo("conv1d", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=1),
           lambda x, w, b: _conv1d_ref(x, w, b, 2, 1), (((2, 3, 7), (4, 3, 3), (4,)), ((1, 3, 4), (2, 3, 2), (2,))),
           tol=_F32),
    OpInfo("conv1d_dilation_groups", lambda x, w: F.conv1d(x, w, dilation=2, groups=2),
           lambda x, w: _conv1d_ref(x, w, dilation=2, groups=2), (((2, 4, 8), (4, 2, 3)),), tol=_F32),
]

POOL = [
    OpInfo("max_pool2d", lambda x: F.max_pool2d(x, 2), lambda a: _max_pool2d_ref(a, 2),
           (((2, 3, 4, 6),), ((1, 2, 5, 5),), ((0, 2, 4, 4),))),
    OpInfo("max_pool2d_overlap", lambda x: F.max_pool2d(x, 3, stride=1, padding=1),
           lambda a: _max_pool2d_ref(a, 3, 1, 1), (((2, 2, 4, 5),),)),
    OpInfo("max_pool2d_stride_dilation", lambda x: F.max_pool2d(x, (2, 3), (2, 1), dilation=(1, 2)),
           lambda a: _max_pool2d_ref(a, (2, 3), (2, 1), dilation=(1, 2)), (((1, 2, 5, 7),),)),
    OpInfo("max_pool2d_ceil", lambda x: F.max_pool2d(x, 3, 2, 1, ceil_mode=True),
           lambda a: _max_pool2d_ref(a, 3, 2, 1, ceil_mode=True), (((1, 2, 6, 6),),)),
    OpInfo("max_pool2d_unbatched", lambda x: F.max_pool2d(x, 2), lambda a: _max_pool2d_ref(a[None], 2)[0],
           (((2, 4, 4),),)),
    OpInfo("max_pool1d", lambda x: F.max_pool1d(x, 3, 2, 1), lambda a: _max_pool2d_ref(a[:, :, None], (1, 3), (1, 2),
                                                                                         (0, 1))[:, :, 0],
           (((2, 3, 7),),)),
    OpInfo("avg_pool2d", lambda x: F.avg_pool2d(x, 2), lambda a: _avg_pool2d_ref(a, 2),
           (((2, 3, 4, 6),), ((1, 2, 5, 5),), ((0, 2, 4, 4),))),
    OpInfo("avg_pool2d_pad", lambda x: F.avg_pool2d(x, 3, 2, 1), lambda a: _avg_pool2d_ref(a, 3, 2, 1),
           (((2, 2, 5, 6),),)),
    OpInfo("avg_pool2d_exclude_pad_ceil", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
           lambda a: _avg_pool2d_ref(a, 3, 2, 1, True, False), (((1, 2, 6, 5),),)),
    OpInfo("avg_pool2d_divisor", lambda x: F.avg_pool2d(x, (2, 3), 1, divisor_override=4),
           lambda a: _avg_pool2d_ref(a, (2, 3), 1, divisor_override=4), (((1, 2, 4, 4),),)),
    OpInfo("avg_pool1d", lambda x: F.avg_pool1d(x, 2), lambda a: _avg_pool2d_ref(a[:, :, None], (1, 2))[:, :, 0],
           (((2, 3, 6),),)),
    OpInfo("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
           lambda a: np.stack([np.stack([a[:, :, (i * 5) // 2:-(-(i + 1) * 5 // 2), (j * 7) // 3:-(-(j + 1) * 7 // 3)]
                                         .mean(axis=(2, 3)) for j in range(3)], -1) for i in range(2)], -2),
           (((2, 2, 5, 7),),)),
]

NORM = [
    OpInfo("linear", F.linear, lambda x, w, b: x @ w.T + b,
           (((4, 3), (5, 3), (5,)), ((2, 3, 3), (2, 3), (2,)), ((3,), (2, 3), (2,)), ((0, 3), (2, 3), (2,)))),
    OpInfo("linear_nobias", lambda x, w: F.linear(x, w), lambda x, w: x @ w.T, (((1, 4), (3, 4)),)),
    OpInfo("batch_norm_train", lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
           lambda x, w, b: _bn_ref(x, w, b), (((4, 3), (3,), (3,)), ((2, 3, 2, 2), (3,), (3,)))),
    OpInfo("batch_norm_train_stats", lambda x: F.batch_norm(x, ag.zeros(3, dtype=x.dtype, device=x.device),
                                                            ag.ones(3, dtype=x.dtype, device=x.device), training=True),
           lambda x: _bn_ref(x), (((3, 3, 2),),)),
    OpInfo("batch_norm_eval", lambda x, m, v, w, b: F.batch_norm(x, m, v * v + 0.5, w, b),
           lambda x, m, v, w, b: _bn_ref(x, w, b, m, v * v + 0.5), (((4, 3), (3,), (3,), (3,), (3,)),
                                                                     ((2, 3, 2, 2), (3,), (3,), (3,), (3,)))),
    OpInfo("layer_norm", lambda x, w, b: F.layer_norm(x, (4,), w, b), lambda x, w, b: _ln_ref(x, 1, w, b),
           (((3, 4), (4,), (4,)), ((2, 2, 4), (4,), (4,)))),
    OpInfo("layer_norm_2d", lambda x: F.layer_norm(x, (2, 3)), lambda x: _ln_ref(x, 2), (((2, 2, 3),),)),
    OpInfo("softmax", lambda x: F.softmax(x, dim=1), lambda a: softmax_ref(a, 1), (((3, 4),), ((2, 3, 2),), ((0, 3),))),
    OpInfo("softmax_last", lambda x: F.softmax(x, -1), lambda a: softmax_ref(a, -1), (((2, 3, 4),), ((5,),))),
    OpInfo("log_softmax", lambda x: F.log_softmax(x, dim=1), lambda a: log_softmax_ref(a, 1), (((3, 4),), ((2, 3, 2),))),
    OpInfo("log_softmax_first", lambda x: F.log_softmax(x, 0), lambda a: log_softmax_ref(a, 0), (((4, 2),), ((3,),))),
    OpInfo("scaled_dot_product_attention", F.scaled_dot_product_attention, _sdpa_ref,
           (((2, 3, 4), (2, 5, 4), (2, 5, 3)), ((3, 2), (4, 2), (4, 3)), ((2, 2, 3, 4), (1, 5, 4), (2, 1, 5, 2)))),
    OpInfo("sdpa_causal", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
           lambda q, k, v: _sdpa_ref(q, k, v, causal=True), (((2, 4, 3), (2, 4, 3), (2, 4, 2)),
                                                             ((2, 3, 3), (2, 5, 3), (2, 5, 2)))),
    OpInfo("sdpa_float_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
           _sdpa_ref, (((2, 3, 4), (2, 5, 4), (2, 5, 3), (3, 5)), ((2, 3, 4), (2, 5, 4), (2, 5, 3), (2, 1, 5)))),
    OpInfo("sdpa_bool_mask", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=_const(_SDPA_BOOL, q)
                                                                            .bool()),
           lambda q, k, v: _sdpa_ref(q, k, v, _SDPA_BOOL), (((2, 3, 4), (2, 5, 4), (2, 5, 3)),)),
    OpInfo("dropout_eval", lambda x: F.dropout(x, 0.5, training=False), lambda a: a, (((3, 4),),)),
    OpInfo("dropout_p0", lambda x: F.dropout(x, 0.0), lambda a: a, (((3, 4),),)),
    OpInfo("embedding", lambda w, i: F.embedding(i, w), lambda w, i: w[i], (((5, 3), (2, 4)), ((4, 2), (3,))),
           kinds=(None, "index:4")),
    # padding_idx withholds that row's gradient on purpose (PyTorch's semantics), so finite differences
    # disagree there; tests/test_functional.py checks its gradient directly
    OpInfo("embedding_padding_idx", lambda w, i: F.embedding(i, w, padding_idx=1), lambda w, i: w[i],
           (((4, 3), (6,)),), kinds=(None, "index:4"), grad=False, gradgrad=False),
    OpInfo("one_hot", lambda i: F.one_hot(i, 5), lambda i: np.eye(5, dtype=np.int64)[i], (((2, 3),), ((0,),)),
           kinds=("index:5",), grad=False, gradgrad=False),
]


def _ce(reduction="mean", **kw):
    return (lambda x, t: F.cross_entropy(x, t, reduction=reduction, **kw),
            lambda x, t: cross_entropy_ref(x, t, reduction=reduction, **kw))


def _ce_weighted(reduction="mean", **kw):
    return (lambda x, t: F.cross_entropy(x, t, weight=_const(_W4, x), reduction=reduction, **kw),
            lambda x, t: cross_entropy_ref(x, t, weight=_W4, reduction=reduction, **kw))


_CE_SAMPLES = (((5, 4), (5,)), ((1, 4), (1,)), ((2, 4, 3), (2, 3)), ((2, 4, 2, 2), (2, 2, 2)))
LOSSES = [
    OpInfo("cross_entropy", *_ce(), _CE_SAMPLES, kinds=(None, "index:4")),
    OpInfo("cross_entropy_sum", *_ce("sum"), _CE_SAMPLES + (((0, 4), (0,)),), kinds=(None, "index:4")),
    OpInfo("cross_entropy_none", *_ce("none"), _CE_SAMPLES, kinds=(None, "index:4")),
    OpInfo("cross_entropy_weight", *_ce_weighted(), _CE_SAMPLES, kinds=(None, "index:4")),
    OpInfo("cross_entropy_ignore", *_ce(ignore_index=2), _CE_SAMPLES[:1] + _CE_SAMPLES[2:], kinds=(None, "index:4")),
    OpInfo("cross_entropy_weight_ignore_none", *_ce_weighted("none", ignore_index=0), _CE_SAMPLES,
           kinds=(None, "index:4")),
    OpInfo("cross_entropy_smoothing", *_ce(label_smoothing=0.2), _CE_SAMPLES, kinds=(None, "index:4")),
    OpInfo("cross_entropy_smoothing_weight_ignore", *_ce_weighted(ignore_index=1, label_smoothing=0.3),
           _CE_SAMPLES[:1] + _CE_SAMPLES[2:], kinds=(None, "index:4")),
    OpInfo("cross_entropy_probs", lambda x, p: F.cross_entropy(x, F.softmax(p, 1)),
           lambda x, p: cross_entropy_ref(x, softmax_ref(p, 1)), (((3, 4), (3, 4)), ((2, 4, 3), (2, 4, 3)))),
    OpInfo("cross_entropy_probs_weight_smoothing",
           lambda x, p: F.cross_entropy(x, F.softmax(p, 1), _const(_W4, x), reduction="none", label_smoothing=0.1),
           lambda x, p: cross_entropy_ref(x, softmax_ref(p, 1), _W4, reduction="none", label_smoothing=0.1),
           (((3, 4), (3, 4)),)),
    OpInfo("nll_loss", lambda x, t: F.nll_loss(F.log_softmax(x, 1), t), lambda x, t: nll_loss_ref(log_softmax_ref(x, 1), t),
           _CE_SAMPLES[:3], kinds=(None, "index:4")),
    OpInfo("nll_loss_weight_ignore", lambda x, t: F.nll_loss(x, t, _const(_W4, x), ignore_index=3, reduction="sum"),
           lambda x, t: nll_loss_ref(x, t, _W4, 3, "sum"), _CE_SAMPLES[:1] + _CE_SAMPLES[2:3], kinds=(None, "index:4")),
    OpInfo("mse_loss", F.mse_loss, _loss_ref(lambda x, t: (x - t) ** 2, "mean"), (((3, 4), (3, 4)), ((), ()))),
    OpInfo("mse_loss_none", lambda x, t: F.mse_loss(x, t, reduction="none"), lambda x, t: (x - t) ** 2,
           (((3, 4), (3, 4)),)),
    OpInfo("mse_loss_weight", lambda x, t, w: F.mse_loss(x, t, weight=w),
           lambda x, t, w: ((x - t) ** 2 * w).sum() / w.sum(), (((3, 4), (3, 4), (3, 4)),), domain=(0.2, 2.0)),
    OpInfo("l1_loss", F.l1_loss, _loss_ref(lambda x, t: np.abs(x - t), "mean"), (((3, 4), (3, 4)),),
           ),
    OpInfo("l1_loss_sum", lambda x, t: F.l1_loss(x, t, reduction="sum"),
           _loss_ref(lambda x, t: np.abs(x - t), "sum"), (((3, 4), (3, 4)),)),
    OpInfo("binary_cross_entropy", F.binary_cross_entropy, bce_ref, (((3, 4), (3, 4)), ((5,), (5,))),
           domain=(0.05, 0.95)),
    OpInfo("binary_cross_entropy_weight_sum", lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction="sum"),
           lambda x, t, w: bce_ref(x, t, w, "sum"), (((3, 4), (3, 4), (3, 4)),), domain=(0.05, 0.95)),
    OpInfo("binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits, bce_logits_ref,
           (((3, 4), (3, 4)), ((5,), (5,)))),
    OpInfo("binary_cross_entropy_with_logits_pos_weight",
           lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, reduction="none", pos_weight=pw),
           lambda x, t, w, pw: bce_logits_ref(x, t, w, pw, "none"), (((3, 4), (3, 4), (3, 4), (4,)),),
           domain=(0.2, 2.0)),
]

OPS = CONV + POOL + NORM + LOSSES
