"""nn.functional's ctc_loss: the connectionist temporal classification loss by the forward-backward
recursion in log space, vectorised over the batch and the extended label sequence (the only Python loop runs
over time, which the recursion needs), with PyTorch's reduction, zero_infinity and gradient."""
from ...autograd.function import Function
from ...tensor import Tensor
from .. import batching
from .._util import as_tensor
from ..registry import register, OpTest
from ._args import _float_tensor, _reduction
from .activation import log_softmax

_NEG = float("-inf")


def _lse3(xp, a, b, c):
    """log(exp(a) + exp(b) + exp(c)) elementwise, -inf where all three are -inf (no warnings, no nan)."""
    m = xp.maximum(xp.maximum(a, b), c)
    ms = xp.where(m == _NEG, 0, m)
    s = xp.exp(a - ms) + xp.exp(b - ms) + xp.exp(c - ms)
    return xp.where(s > 0, xp.log(xp.where(s > 0, s, 1)) + ms, _NEG)


def _shift(xp, a, k):
    """a[:, s - k] (k > 0) or a[:, s + |k|] (k < 0), -inf where that falls outside."""
    pad = xp.full((a.shape[0], abs(k)), _NEG, dtype=a.dtype)
    if k > 0:
        return xp.concatenate([pad, a[:, :a.shape[1] - k]], axis=1)
    return xp.concatenate([a[:, -k:], pad], axis=1)


def _ctc_arrays(xp, lp, tgt, il, tl, blank):
    """alpha, beta (T, N, L) and the negative log-likelihood (N,) of log-probabilities lp (T, N, C) for padded
    targets tgt (N, S), input lengths il (N,) and target lengths tl (N,); L = 2 S + 1 (blanks around and
    between the labels). alpha and beta both include the log-probability of their own step, as PyTorch's."""
    T, N, _ = lp.shape
    S = tgt.shape[1]
    L = 2 * S + 1
    ext = xp.full((N, L), blank, dtype=tgt.dtype)
    ext[:, 1::2] = tgt
    lpe = xp.take_along_axis(lp, xp.broadcast_to(ext[None], (T, N, L)), axis=2)        # (T, N, L)
    s_idx = xp.arange(L)[None, :]
    valid = s_idx < (2 * tl + 1)[:, None]                                                # (N, L)
    skip = xp.zeros((N, L), dtype=bool)                     # s may come from s - 2: a label unlike the one before
    if L > 2:
        skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    skip_next = xp.zeros((N, L), dtype=bool)                # the same seen from s: s + 2 may go back to s
    skip_next[:, :-2] = skip[:, 2:]
    neg = xp.full((N, L), _NEG, dtype=lp.dtype)
    alpha = xp.empty((T, N, L), dtype=lp.dtype)
    beta = xp.empty((T, N, L), dtype=lp.dtype)
    if T:
        first = (s_idx == 0) | ((s_idx == 1) & (tl > 0)[:, None])
        a = xp.where(first & valid, lpe[0], neg)
        alpha[0] = a
        for t in range(1, T):
            a = _lse3(xp, a, _shift(xp, a, 1), xp.where(skip, _shift(xp, a, 2), neg)) + lpe[t]
            a = xp.where(valid, a, neg)
            alpha[t] = a
        last = (s_idx == (2 * tl)[:, None]) | ((s_idx == (2 * tl - 1)[:, None]) & (tl > 0)[:, None])
        b = neg
        for t in range(T - 1, -1, -1):
            rec = _lse3(xp, b, _shift(xp, b, -1), xp.where(skip_next, _shift(xp, b, -2), neg)) + lpe[t]
            end = (il - 1 == t)[:, None]
            before = (t < il - 1)[:, None]
            b = xp.where(end, xp.where(last, lpe[t], neg), xp.where(before, rec, neg))
            b = xp.where(valid, b, neg)
            beta[t] = b
        a_end = alpha[xp.maximum(il - 1, 0), xp.arange(N)]                                 # (N, L)
        l2 = xp.take_along_axis(a_end, (2 * tl)[:, None], axis=1)[:, 0]
        l1 = xp.take_along_axis(a_end, xp.maximum(2 * tl - 1, 0)[:, None], axis=1)[:, 0]
        l1 = xp.where(tl > 0, l1, _NEG)
        ll = _lse3(xp, l2, l1, xp.full(l1.shape, _NEG, dtype=lp.dtype))
    else:
        ll = xp.full((N,), _NEG, dtype=lp.dtype)
    ll = xp.where(il == 0, xp.where(tl == 0, 0, _NEG), ll).astype(lp.dtype)   # no input steps: only "" fits
    return alpha, beta, -ll, ext, valid


def _ctc_grad_array(xp, lp, alpha, beta, nll, ext, il, zero_infinity):
    """PyTorch's gradient of each sample's loss with respect to lp (T, N, C):
    exp(lp) - exp(log(sum over s with ext[s] = c of alpha beta) + nll - lp) for t < input length, else 0.
    (It includes the exp(lp) term of a log_softmax in front, which PyTorch's kernel assumes: through
    log_softmax it gives the exact gradient of the logits.)"""
    T, N, C = lp.shape
    ab = alpha + beta
    m = ab.max(axis=2)                                                                      # (L >= 1)
    ms = xp.where(m == _NEG, 0, m)
    e = xp.exp(ab - ms[..., None])                                                          # (T, N, L)
    hot = (ext[:, :, None] == xp.arange(C)[None, None, :]).astype(lp.dtype)                # (N, L, C)
    summed = xp.matmul(e.transpose(1, 0, 2), hot).transpose(1, 0, 2)                      # (T, N, C)
    pos = summed > 0
    occ = xp.where(pos, xp.exp(xp.log(xp.where(pos, summed, 1)) + ms[..., None] + nll[None, :, None] - lp), 0)
    g = xp.exp(lp) - occ
    finite = xp.isfinite(nll)[None, :, None]
    g = xp.where(finite, g, 0 if zero_infinity else float("nan"))
    live = (xp.arange(T)[:, None] < il[None, :])[..., None]
    return xp.where(live, g, 0).astype(lp.dtype)


class CtcLoss(Function):
    """Each sample's negative log-likelihood (N,) as one node; its gradient is computed in the forward pass's
    arrays (alpha, beta) in the backward. vmap: the op once per example (the recursion runs over time)."""
    batch_rule = batching.loop

    @staticmethod
    def forward(ctx, lp, tgt, il, tl, blank, zero_infinity):
        xp = ctx.xp
        alpha, beta, nll, ext, _ = _ctc_arrays(xp, lp.data, tgt, il, tl, blank)
        ctx.save_for_backward(lp)
        ctx.state = (alpha, beta, nll, ext, il, zero_infinity)
        if zero_infinity:
            nll = xp.where(xp.isinf(nll), 0, nll).astype(nll.dtype)
        return ctx.wrap(nll)

    @staticmethod
    def backward(ctx, grad):
        lp, = ctx.saved_tensors
        alpha, beta, nll, ext, il, zero_infinity = ctx.state
        g = _ctc_grad_array(ctx.xp, lp.data, alpha, beta, nll, ext, il, zero_infinity)
        return CtcLossBackward.apply(grad, lp, g), None, None, None, None, None


class CtcLossBackward(Function):
    """grad (N,) times ctc_loss's per-sample gradient g (T, N, C); as PyTorch, not differentiable again in
    log_probs (it raises rather than silently giving 0)."""
    batch_rule = batching.loop

    @staticmethod
    def forward(ctx, grad, lp, g):
        ctx.g = g
        return ctx.wrap(g * grad.data[None, :, None])

    @staticmethod
    def backward(ctx, gg):
        if ctx.needs_input_grad[1]:
            raise RuntimeError("ctc_loss: the derivative of ctc_loss's gradient with respect to log_probs is not "
                               "implemented (PyTorch's is not either)")
        d_grad = (gg * ctx.wrap(ctx.g)).sum((0, 2)) if ctx.needs_input_grad[0] else None
        return d_grad, None, None


def _lengths(v, like, n, op, name):
    """Lengths as an int64 array (n,) on like's device, from a tensor or a sequence of ints."""
    t = as_tensor(v, op, like=like) if not isinstance(v, Tensor) else v
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected {name} of an integer dtype, got {t.dtype}")
    if t.device is not like.device:
        t = t.to(like.device)
    if t.shape not in ((n,), ()) or (t.ndim == 0 and n != 1):
        raise ValueError(f"{op}: expected {name} of shape ({n},), got {t.shape}")
    return t.data.reshape(n).astype("int64")


def _padded_targets(xp, backend, targets, tl, n, op):
    """Targets (N, S) from the padded form or from the 1-D concatenation of the batch's targets."""
    if targets.ndim == 2:
        if targets.shape[0] != n:
            raise ValueError(f"{op}: expected padded targets of shape ({n}, S), got {targets.shape}")
        return targets.data.astype("int64")
    if targets.ndim != 1:
        raise ValueError(f"{op}: expected targets (N, S) or the 1-D concatenation of the targets, got shape "
                         f"{targets.shape}")
    total = targets.shape[0]
    # the longest target sizes the padded targets: a value-dependent shape, so a read declared to the sync
    # debug mode (PyTorch's CUDA ctc_loss copies the lengths to the host too); padded (N, S) targets need none
    s = int(backend.read_back(tl.max(), "ctc_loss with 1-D concatenated targets")) if n and total else 0
    backend.assert_all(tl.sum() <= total, ValueError,
                       f"{op}: the target lengths add up to more than the {total} concatenated targets")
    start = xp.cumsum(tl) - tl
    pos = start[:, None] + xp.arange(s)[None, :]
    inside = xp.arange(s)[None, :] < tl[:, None]
    flat = targets.data.astype("int64")
    return xp.where(inside, flat[xp.clip(pos, 0, max(total - 1, 0))], 0) if total else xp.zeros((n, s), "int64")


def _ctc_ref(np, x, t, il, tl, blank=0, reduction="mean"):
    """A per-sample reference of ctc_loss(log_softmax(x, 2), t, il, tl) by the plain alpha recursion."""
    lp = x - np.log(np.exp(x - x.max(2, keepdims=True)).sum(2, keepdims=True)) - x.max(2, keepdims=True)
    out = []
    for n in range(x.shape[1]):
        lab = [int(v) for v in t[n][:tl[n]]]
        ext = [blank]
        for c in lab:
            ext += [c, blank]
        a = np.full(len(ext), -np.inf)
        a[0] = lp[0, n, ext[0]]
        if len(ext) > 1:
            a[1] = lp[0, n, ext[1]]
        for s in range(1, il[n]):
            b = np.full(len(ext), -np.inf)
            for k in range(len(ext)):
                v = [a[k]] + ([a[k - 1]] if k >= 1 else []) + ([a[k - 2]] if k >= 2 and ext[k] != blank
                                                                 and ext[k] != ext[k - 2] else [])
                b[k] = np.logaddexp.reduce(v) + lp[s, n, ext[k]]
            a = b
        out.append(-np.logaddexp.reduce(a[-2:] if len(ext) > 1 else a[-1:]))
    loss = np.array(out, dtype=x.dtype)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return (loss / np.maximum(np.array(tl), 1)).mean().astype(x.dtype)


_IL, _TL = [6, 4], [3, 2]


# op table: gradgrad off: PyTorch's ctc_loss is not twice differentiable either (gradgradcheck raises
# "derivative for aten::_ctc_loss_backward is not implemented"); ours raises too (CtcLossBackward)
@register(namespace="nn.functional", tests=(
    OpTest((((6, 2, 4), (2, 3)),), ref=lambda np, x, t: _ctc_ref(np, x, t + 1, _IL, _TL),
           op=lambda x, t: ctc_loss(log_softmax(x, 2), t + 1, _IL, _TL), name="ctc_loss", kinds=(None, "index:3"),
           gradgrad=False),
    OpTest((((5, 2, 3), (2, 2)),), ref=lambda np, x, t: _ctc_ref(np, x, t + 1, [5, 5], [2, 1], 0, "none"),
           op=lambda x, t: ctc_loss(log_softmax(x, 2), t + 1, [5, 5], [2, 1], reduction="none"),
           name="ctc_loss_none", kinds=(None, "index:2"), gradgrad=False)),
    doc="Connectionist temporal classification loss of log-probabilities (T, N, C) for unaligned targets.")
def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification loss of log-probabilities (T, N, C) (or (T, C)) for targets
    (N, S) padded or 1-D concatenated, by the forward-backward recursion in log space.

    'mean' divides each sample's loss by its target length (at least 1) and averages over the batch;
    zero_infinity sets infinite losses (impossible alignments) and their gradients to 0. The gradient with
    respect to log_probs is PyTorch's, which assumes log_probs come from log_softmax (exact through it).
    Not differentiable twice, as PyTorch's."""
    op = "ctc_loss"
    reduction = _reduction(reduction, None, None, op)
    lp = _float_tensor(log_probs, op, "log_probs")
    unbatched = lp.ndim == 2
    if unbatched:
        lp = lp.reshape(lp.shape[0], 1, lp.shape[1])
    if lp.ndim != 3:
        raise ValueError(f"{op}: expected log_probs of shape (T, N, C) or (T, C), got {lp.shape}")
    T, N, C = lp.shape
    if not 0 <= blank < C:
        raise ValueError(f"{op}: blank must be in [0, {C}) for {C} classes, got {blank}")
    t = as_tensor(targets, op, like=lp)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected targets of an integer dtype, got {t.dtype}")
    if t.device is not lp.device:
        raise RuntimeError(f"{op}: expected targets on {lp.device}, got {t.device}; move them with .to()")
    if unbatched and t.ndim == 1:
        t = t.reshape(1, -1)
    backend = lp.device.backend
    xp = backend.xp
    il = backend.call(_lengths, input_lengths, lp, N, op, "input_lengths")
    tl = backend.call(_lengths, target_lengths, lp, N, op, "target_lengths")
    tgt = backend.call(_padded_targets, xp, backend, t, tl, N, op)
    if N:
        backend.assert_all(((il >= 0) & (il <= T)).all(), ValueError,
                           f"{op}: expected input_lengths in [0, {T}] (T = {T}), got {{value}}",
                           xp.where((il < 0) | (il > T), il, 0).max())
        backend.assert_all(((tl >= 0) & (tl <= tgt.shape[1])).all(), ValueError,
                           f"{op}: expected target_lengths in [0, {tgt.shape[1]}] (the targets' length), "
                           "got {value}", xp.where((tl < 0) | (tl > tgt.shape[1]), tl, 0).max())
    if tgt.size:
        inside = xp.arange(tgt.shape[1])[None, :] < tl[:, None]
        used = xp.where(inside, tgt, 0)
        backend.assert_all(((used >= 0) & (used < C)).all(), IndexError,
                           f"{op}: target {{value}} is out of range [0, {C}) for {C} classes",
                           xp.where((used < 0) | (used >= C), used, 0).max())
        tgt = xp.where(inside, tgt, 0)          # padding: any class (never read), but one inside [0, C)
    loss = CtcLoss.apply(lp, tgt, il, tl, blank, bool(zero_infinity))
    if reduction == "none":
        return loss.reshape(()) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    lengths = Tensor._make(xp.maximum(tl, 1).astype(lp.dtype), lp.device)
    return (loss / lengths).mean()
