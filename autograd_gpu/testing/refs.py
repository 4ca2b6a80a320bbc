"""NumPy references too long to write inline in an op's OpTest: named there as ``ref="refs.<name>"``.

Each takes and returns NumPy arrays (host), computing what the op computes, the plain way."""
import math
from functools import partial

import numpy as np


def erf(a):
    return np.vectorize(math.erf, otypes=[a.dtype])(a) if a.size else a.copy()


def _mp(f, a):
    """An mpmath function, elementwise, in double precision (mpmath: the [test] extra)."""
    return np.vectorize(lambda v: float(f(float(v))), otypes=[a.dtype])(a) if a.size else a.copy()


def erfc(a):
    return np.vectorize(math.erfc, otypes=[a.dtype])(a) if a.size else a.copy()


def lgamma(a):
    return np.vectorize(math.lgamma, otypes=[a.dtype])(a) if a.size else a.copy()


def erfinv(a):
    import mpmath
    return _mp(mpmath.erfinv, a)


def digamma(a):
    import mpmath
    return _mp(mpmath.digamma, a)


def polygamma_1(a):
    import mpmath
    return _mp(lambda v: mpmath.polygamma(1, v), a)


def polygamma_2(a):
    import mpmath
    return _mp(lambda v: mpmath.polygamma(2, v), a)


def gelu(a):
    return (a * (1 + erf(a / np.sqrt(2).astype(a.dtype))) / 2).astype(a.dtype)


def sigmoid(a):
    return (1 / (1 + np.exp(-a))).astype(a.dtype)


def softplus(a):
    return np.logaddexp(0, a).astype(a.dtype)


# --------------------------------------------------------------------------- ag.linalg
# the op-table entries make random inputs well-conditioned (autograd_gpu/ops/solvers.py: _wc, _spd, _sym);
# these references do the same to their arrays
def _eye(a):
    return np.eye(a.shape[-1], dtype=a.dtype)


def _wc(a):
    return a + 4.0 * _eye(a)


def _spd(a):
    return a @ np.swapaxes(a, -1, -2) + float(a.shape[-1]) * _eye(a)


def _sym(a):
    return (a + np.swapaxes(a, -1, -2)) * 0.5


def linalg_inv(a):
    return np.linalg.inv(_wc(a))


def linalg_solve(a, b):
    return np.linalg.solve(_wc(a), b)


def linalg_det(a):
    return np.linalg.det(_wc(a))


def linalg_slogdet(a):
    """slogdet's sign (a constant) checked through sign * logabsdet, as the op-table entry does."""
    sign, logabs = np.linalg.slogdet(a - 4.0 * _eye(a))
    return logabs, sign * logabs


def linalg_cholesky(a):
    return np.linalg.cholesky(_spd(a))


def linalg_qr(a):
    """QR with R's diagonal made positive: unique, so LAPACK's sign choices drop out."""
    q, r = np.linalg.qr(a)
    d = np.sign(np.linalg.diagonal(r))
    return q * d[..., None, :], r * d[..., :, None]


def linalg_eigh(a):
    """Eigenvalues and squared eigenvectors (gauge-invariant) of the symmetric part."""
    w, v = np.linalg.eigh(_sym(a))
    return w, v * v


def linalg_eigvalsh(a):
    return np.linalg.eigvalsh(_sym(a))


def linalg_svd(a):
    """U and Vh squared (gauge-invariant), S."""
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return u * u, s, vh * vh


def linalg_lstsq(a, b):
    """NumPy's lstsq is 2-D only: loop over the batch."""
    if a.ndim == 2:
        return np.linalg.lstsq(a, b)[0]
    return np.stack([np.linalg.lstsq(ai, bi)[0] for ai, bi in zip(a, b)])


def linalg_matrix_power_neg(a):
    return np.linalg.matrix_power(_wc(a), -2)


def logsumexp(a, axis=None, keepdims=False):
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


# --------------------------------------------------------------------------- nn.functional (autograd_gpu/ops/nn/)
def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
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


def conv1d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    y = conv2d(x[:, :, None], w[:, :, None], b, (1, stride), (0, padding), (1, dilation), groups)
    return y[:, :, 0]


def _pool_out(n, k, s, p, d, ceil_mode):
    span = d * (k - 1) + 1
    out = (n + 2 * p - span + (s - 1 if ceil_mode else 0)) // s + 1
    return out - 1 if ceil_mode and (out - 1) * s >= n + p else out


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
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


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
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


def batch_norm(x, w=None, b=None, mean=None, var=None, eps=1e-5):
    """Batch statistics (biased variance) when mean/var are None, else the given ones."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, -1) + (1,) * (x.ndim - 2)
    m = x.mean(axis=axes, keepdims=True) if mean is None else mean.reshape(shape)
    v = x.var(axis=axes, keepdims=True) if var is None else var.reshape(shape)
    y = (x - m) / np.sqrt(v + eps)
    if w is not None:
        y = y * w.reshape(shape)
    return (y if b is None else y + b.reshape(shape)).astype(x.dtype)


def layer_norm(x, k, w=None, b=None, eps=1e-5):
    """Normalised over the last k dims."""
    axes = tuple(range(x.ndim - k, x.ndim))
    y = (x - x.mean(axis=axes, keepdims=True)) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    return (y if b is None else y + b).astype(x.dtype)


def log_softmax(a, axis):
    s = a - a.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sdpa(q, k, v, mask=None, causal=False):
    """softmax(q k^T / sqrt(E) + mask) v; is_causal keeps key j <= query i."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], dtype=bool)), s, -np.inf)
    if mask is not None:
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    return (softmax(s, -1) @ v).astype(q.dtype)


def _reduce(loss, reduction, denom=None):
    if reduction == "none":
        return loss
    total = loss.sum()
    return total if reduction == "sum" else total / (loss.size if denom is None else denom)


def cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """PyTorch's cross_entropy on NumPy arrays: class-index targets (N, d...) or probabilities (x's shape)."""
    logp = log_softmax(x, 1)
    c = x.shape[1]
    w = np.ones(c, dtype=x.dtype) if weight is None else np.asarray(weight, dtype=x.dtype)
    wshape = (1, c) + (1,) * (x.ndim - 2)
    if t.dtype.kind == "f":
        if label_smoothing:
            t = t * (1 - label_smoothing) + label_smoothing / c
        return _reduce(-(logp * t * w.reshape(wshape)).sum(axis=1), reduction).astype(x.dtype)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = w[safe] * valid
    nll = -np.take_along_axis(logp, safe[:, None], axis=1)[:, 0] * wt
    loss = _reduce(nll, reduction, wt.sum())
    if label_smoothing:
        smooth = -(logp * w.reshape(wshape)).sum(axis=1) * valid
        loss = loss * (1 - label_smoothing) + _reduce(smooth, reduction, wt.sum()) * (label_smoothing / c)
    return np.asarray(loss).astype(x.dtype)


def nll_loss(logp, t, weight=None, ignore_index=-100, reduction="mean"):
    w = np.ones(logp.shape[1], dtype=logp.dtype) if weight is None else np.asarray(weight, dtype=logp.dtype)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    wt = w[safe] * valid
    nll = -np.take_along_axis(logp, safe[:, None], axis=1)[:, 0] * wt
    return np.asarray(_reduce(nll, reduction, wt.sum())).astype(logp.dtype)


def mse_loss(x, t, reduction="mean"):
    return np.asarray(_reduce((x - t) ** 2, reduction)).astype(x.dtype)


def l1_loss(x, t, reduction="mean"):
    return np.asarray(_reduce(np.abs(x - t), reduction)).astype(x.dtype)


def bce(x, t, w=None, reduction="mean"):
    with np.errstate(divide="ignore"):
        loss = -(t * np.maximum(np.log(x), -100) + (1 - t) * np.maximum(np.log(1 - x), -100))
    if w is not None:
        loss = loss * w
    return np.asarray(_reduce(loss, reduction)).astype(x.dtype)


def bce_logits(x, t, w=None, pos_weight=None, reduction="mean"):
    sp = np.logaddexp(0, -x)                       # log(1 + exp(-x))
    lw = 1 if pos_weight is None else 1 + (pos_weight - 1) * t
    loss = (1 - t) * x + lw * sp
    if w is not None:
        loss = loss * w
    return np.asarray(_reduce(loss, reduction)).astype(x.dtype)


# the nn.functional op-table entries' fixed arguments (each OpTest names its reference here)
conv2d_stride2_pad = partial(conv2d, stride=2, padding=1)
conv2d_dilation = partial(conv2d, padding=(2, 1), dilation=(2, 1))
conv2d_groups = partial(conv2d, stride=(1, 2), padding=1, groups=2)
conv2d_groups_stride1 = partial(conv2d, padding=(1, 0), groups=2)
conv2d_depthwise = partial(conv2d, groups=3)
conv2d_same = partial(conv2d, padding=1)
conv1d_stride2_pad = partial(conv1d, stride=2, padding=1)
conv1d_dilation_groups = partial(conv1d, dilation=2, groups=2)
max_pool2d_k2 = partial(max_pool2d, kernel_size=2)
max_pool2d_overlap = partial(max_pool2d, kernel_size=3, stride=1, padding=1)
max_pool2d_stride_dilation = partial(max_pool2d, kernel_size=(2, 3), stride=(2, 1), dilation=(1, 2))
max_pool2d_ceil = partial(max_pool2d, kernel_size=3, stride=2, padding=1, ceil_mode=True)
avg_pool2d_k2 = partial(avg_pool2d, kernel_size=2)
avg_pool2d_pad = partial(avg_pool2d, kernel_size=3, stride=2, padding=1)
avg_pool2d_exclude_pad_ceil = partial(avg_pool2d, kernel_size=3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False)
avg_pool2d_divisor = partial(avg_pool2d, kernel_size=(2, 3), stride=1, divisor_override=4)
softmax_dim1 = partial(softmax, axis=1)
softmax_last = partial(softmax, axis=-1)
log_softmax_dim1 = partial(log_softmax, axis=1)
log_softmax_dim0 = partial(log_softmax, axis=0)
sdpa_causal = partial(sdpa, causal=True)
_W4 = [0.5, 1.0, 2.0, 1.5]            # class weights for C = 4 (as autograd_gpu/ops/nn/loss.py's entries)
cross_entropy_sum = partial(cross_entropy, reduction="sum")
cross_entropy_none = partial(cross_entropy, reduction="none")
cross_entropy_weight = partial(cross_entropy, weight=_W4)
cross_entropy_ignore = partial(cross_entropy, ignore_index=2)
cross_entropy_weight_ignore_none = partial(cross_entropy, weight=_W4, reduction="none", ignore_index=0)
cross_entropy_smoothing = partial(cross_entropy, label_smoothing=0.2)
cross_entropy_smoothing_weight_ignore = partial(cross_entropy, weight=_W4, ignore_index=1, label_smoothing=0.3)
l1_loss_sum = partial(l1_loss, reduction="sum")
bce_weight_sum = partial(bce, reduction="sum")
bce_logits_none = partial(bce_logits, reduction="none")


def max_pool2d_unbatched(a):
    return max_pool2d(a[None], 2)[0]


def max_pool1d_k3_s2_p1(a):
    return max_pool2d(a[:, :, None], (1, 3), (1, 2), (0, 1))[:, :, 0]


def avg_pool1d_k2(a):
    return avg_pool2d(a[:, :, None], (1, 2))[:, :, 0]


def adaptive_avg_pool2d_2x3(a):
    """PyTorch's adaptive windows [floor(i*H/oh), ceil((i+1)*H/oh)) for (H, W) = (5, 7) -> (2, 3)."""
    return np.stack([np.stack([a[:, :, (i * 5) // 2:-(-(i + 1) * 5 // 2), (j * 7) // 3:-(-(j + 1) * 7 // 3)]
                               .mean(axis=(2, 3)) for j in range(3)], -1) for i in range(2)], -2)


def layer_norm_last(x, w, b):
    return layer_norm(x, 1, w, b)


def layer_norm_last2(x):
    return layer_norm(x, 2)


def batch_norm_eval(x, m, v, w, b):
    return batch_norm(x, w, b, m, v * v + 0.5)


# no row all False
SDPA_BOOL = np.array([[1, 0, 1, 1, 0], [1, 1, 0, 0, 0], [0, 1, 1, 1, 1]], dtype=bool)


def sdpa_bool_mask(q, k, v):
    return sdpa(q, k, v, SDPA_BOOL)


def cross_entropy_probs(x, p):
    return cross_entropy(x, softmax(p, 1))


def cross_entropy_probs_weight_smoothing(x, p):
    return cross_entropy(x, softmax(p, 1), _W4, reduction="none", label_smoothing=0.1)


def nll_loss_of_log_softmax(x, t):
    return nll_loss(log_softmax(x, 1), t)


def nll_loss_weight_ignore(x, t):
    return nll_loss(x, t, _W4, 3, "sum")
