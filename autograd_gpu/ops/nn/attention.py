"""nn.functional's attention: scaled_dot_product_attention as one fused Function (two products and
in-place passes over the scores; on the CPU a causal mask skips the keys a query cannot see, in row blocks)."""
import builtins
import math

from ... import _trace_hooks
from ...backends import address
from ...backends.cublas_graph import reads_as_stored
from ...autograd.function import Function
from ...dtypes import is_floating, bfloat16
from ...tensor import Tensor
from .._autocast import cast_low
from ..shape import broadcast_shapes, broadcast_to, sum_to as _sum_to, _sum_to_array
from ..linalg import matmul
from .._util import as_tensor
from .. import batching
from ..batching import _wrap, _union, _align, _expand
from ..registry import register, OpTest
from ._args import _float_tensor, _same_dtype
from .activation import Softmax, SoftmaxBackward

# a boolean attn_mask of the op table (True = takes part), no row all False
_BOOL_MASK = [[True, False, True, True, False], [True, True, False, False, False], [False, True, True, True, True]]


def _laid_out_like(backend, a, shape):
    """For matmul's out=: an empty array of ``shape`` whose axes lie in memory in the order of a's (the
    heads of attention are strided views of a (N, L, H*E) projection, so results laid out as (N, L, H, E)
    make the caller's permute and reshape back to (N, L, H*E) views, not copies); None (matmul allocates)
    where the dims differ, or off the CPU, where cuBLAS wants its own layouts."""
    if backend.name != "numpy" or len(shape) != a.ndim:
        return None
    return backend.xp.empty_like(a, shape=shape)


def _stack_of(xs):
    """The C-contiguous (len(xs), ...) array whose consecutive slices the arrays ``xs`` are, else None (always
    while ag.compile traces: where its arrays lie in memory is not part of the program it records)."""
    if _trace_hooks.state.t is not None:
        return None
    a = xs[0]
    base = a.base
    if (base is None or a.size == 0 or base.shape != (len(xs),) + a.shape or base.dtype != a.dtype
            or not base.flags.c_contiguous):
        return None
    at, step = address(base), a.nbytes
    for i, x in enumerate(xs):
        # C-contiguous too: a transposed view of a square slice has the slice's shape and first address
        if (x is None or x.dtype != a.dtype or x.shape != a.shape or not x.flags.c_contiguous
                or address(x) != at + i * step):
            return None
    return base


def _heads_perm(b):
    """Axes taking (*B, L, parts, H, E) (b batch dims) to (parts, *B, H, L, E)."""
    return (b + 1,) + tuple(range(b)) + (b + 2, b, b + 3)


class SplitHeads(Function):
    # (..., L, parts*H*E) -> ``parts`` tensors (..., H, L, E), each C-contiguous, from one transposing copy
    # into one (parts, ..., H, L, E) buffer: on CUDA the attention's products then read every operand as
    # stored (as views of the packed projection their batch dims (N, H) have no single stride, and each
    # product copied them again: 3 in the forward and 3 in the backward for q, k and v). The gradients
    # come back the same way (MergeHeads): one copy when they are slices of one buffer, as attention's
    # backward writes them for such inputs.
    batch_rule = batching.loop
    materialize_grads = False     # a gradient not reaching a part is zeros there (MergeHeads fills it)

    @staticmethod
    def forward(ctx, x, heads, parts):
        xp = ctx.xp
        lead, (L, e) = x.shape[:-2], x.shape[-2:]
        ctx.shape = x.shape
        a = x.data.reshape(lead + (L, parts, heads, e // (parts * heads)))
        s = xp.ascontiguousarray(a.transpose(_heads_perm(len(lead))))
        return tuple(ctx.wrap(s[i]) for i in range(parts)) if parts > 1 else ctx.wrap(s[0])

    @staticmethod
    def backward(ctx, *grads):
        return MergeHeads.apply(ctx.shape, *grads), None, None


class MergeHeads(Function):
    """SplitHeads' gradient: ``parts`` tensors (..., H, L, E) (None: zeros) back into one (..., L, parts*H*E)
    in the packed layout, by one copy when they are consecutive slices of one buffer."""
    batch_rule = batching.loop

    @staticmethod
    def forward(ctx, shape, *gs):
        xp = ctx.xp
        arrays = [None if g is None else g.data for g in gs]
        like = next(a for a in arrays if a is not None)
        ctx.heads, ctx.parts = like.shape[-3], len(gs)
        b = like.ndim - 3
        inverse = tuple(sorted(range(b + 4), key=_heads_perm(b).__getitem__))
        stacked = _stack_of(arrays) if all(a is not None for a in arrays) else None
        if stacked is not None:
            out = xp.ascontiguousarray(stacked.transpose(inverse))
        else:
            h, L, e = like.shape[-3:]
            out = xp.empty(like.shape[:-3] + (L, len(gs), h, e), dtype=like.dtype)
            for i, a in enumerate(arrays):
                if a is None:
                    out[..., i, :, :] = 0
                else:
                    out[..., i, :, :] = xp.swapaxes(a, -2, -3)
        return ctx.wrap(out.reshape(shape))

    @staticmethod
    def backward(ctx, grad):
        gs = SplitHeads.apply(grad, ctx.heads, ctx.parts)
        return (None,) + (gs if ctx.parts > 1 else (gs,))


def _split_heads(x, heads, parts=1):
    """(..., L, parts*E) -> ``parts`` tensors (..., heads, L, E // heads) (one when parts is 1): views of x
    (NumPy's matmul reads their strided batches as stored), C-contiguous copies from one SplitHeads on CUDA."""
    if x.device.backend.name != "cupy":
        e = x.shape[-1] // parts
        out = tuple(c.reshape(x.shape[:-1] + (heads, e // heads)).swapaxes(-2, -3)
                    for c in (x.chunk(parts, dim=-1) if parts > 1 else (x,)))
        return out if parts > 1 else out[0]
    return SplitHeads.apply(x, heads, parts)


def _sdpa_rule(cls, args, kwargs):
    """vmap: attention broadcasts over leading dims, so the vmapped dims go in front of every operand; q
    takes them all, so the scores have every batch dim the mask may add in place."""
    q, k, v, mask, scale, keep = args
    ops = [t for t in (q, k, v, mask) if t is not None]
    levels = _union(ops)
    nd = max(t.ndim for t in ops)
    q = _expand(q, levels, (1,) * (nd - q.ndim) + tuple(q.shape))
    k, v = _align(k, levels, nd), _align(v, levels, nd)
    mask = None if mask is None else _align(mask, levels, nd)
    return _wrap(cls.apply(q, k, v, mask, scale, keep), levels)


class ScaledDotProductAttention(Function):
    # fused softmax(q k^T * scale + mask) [* dropout] @ v: the two products around the backend's
    # attention_softmax (scale, mask and softmax: 3 or 4 launches on CUDA, in-place passes on the CPU) instead
    # of six recorded ops; the probabilities are saved, so backward is two matmuls per input around
    # attention_softmax_backward, dS = P * (dP - sum(dP * P)) * scale (2 launches on CUDA). ``keep`` is the
    # dropout mask already scaled by 1/(1-p). Where the scale goes is the backend's choice
    # (softmax_takes_scale): inside the softmax kernel on CUDA (then dS carries it), on q on the CPU (fewer
    # elements than the scores when S > E, and dK = dS^T @ (q * scale) reuses it).
    batch_rule = _sdpa_rule

    @staticmethod
    def forward(ctx, q, k, v, mask, scale, keep):
        xp, backend = ctx.xp, ctx.device.backend
        ctx.folded = backend.softmax_takes_scale
        qs = q.data if ctx.folded else q.data * scale
        ctx.scale, ctx.keep, ctx.qs = scale, keep, qs
        ctx.save_for_backward(q, k, v, mask)
        ctx.blocks = _causal_blocks(backend, q, k, v, mask, keep, ctx.needs_input_grad[3])
        if ctx.blocks is not None:
            ctx.p, out = _causal_forward(backend, ctx.blocks, qs, k.data, v.data, mask.data)
            return ctx.wrap(out)
        s = backend.matmul(qs, xp.swapaxes(k.data, -1, -2))
        p = ctx.p = backend.attention_softmax(s, None if mask is None else mask.data, scale if ctx.folded else 1.0)
        out = _laid_out_like(backend, q.data, p.shape[:-1] + v.shape[-1:])
        return ctx.wrap(backend.matmul(p if keep is None else p * keep, v.data, out=out))

    @staticmethod
    def backward(ctx, grad):
        return AttentionBackward.of(ctx, grad, ctx) + (None, None)


class AttentionBackward(Function):
    """ScaledDotProductAttention's gradients (gq, gk, gv, gmask; None where ``node``, the attention's node, needs
    none) as one op on arrays: dP and dS share one buffer; the scale in dS (softmax_takes_scale), or on the
    (L, E) arrays (dK from the saved q * scale); the blocked causal path on the CPU. Differentiable again: its
    own backward recomputes the probabilities from q and k as recorded ops and runs the second derivative
    through the two products around the softmax's backward. On CUDA every product reads its operands as
    stored: the output's gradient, when its batch dims have no single stride (a view of out_proj's gradient),
    is made C-contiguous once, and where q, k, v are the slices of one buffer (SplitHeads) their gradients are
    written into one such buffer, which MergeHeads takes back to the packed projection's layout by one copy."""
    batch_rule = batching.loop
    materialize_grads = False     # a gradient not wanted is None (and so is its gradient's gradient)

    @staticmethod
    def arrays(ctx, g, q, k, v, mask, node):
        need_q, need_k, need_v, need_mask = node.needs_input_grad[:4]
        xp, backend = ctx.xp, ctx.device.backend
        mm = backend.matmul
        p, keep, scale, folded = node.p, node.keep, node.scale, node.folded
        if node.blocks is not None:
            gq, gk, gv = _causal_backward(backend, node.blocks, p, g, node.qs, k, v, (need_q, need_k, need_v))
            if need_q:
                gq *= scale
            return gq, gk, gv, None

        outs = None
        if backend.name == "cupy":     # every product reads its operands as stored (see SplitHeads)
            if not reads_as_stored(g):
                g = xp.ascontiguousarray(g)          # once, not in each of the two products that read it
            if need_q and need_k and need_v and _stack_of([q, k, v]) is not None:
                outs = xp.empty((3,) + q.shape, dtype=q.dtype)    # gq, gk, gv stacked as q, k, v are

        def product(a, b, like, i):    # a @ b, laid out in memory as the input it is the gradient of
            if a.shape[:-1] + b.shape[-1:] != like.shape:
                return mm(a, b)
            return mm(a, b, out=outs[i] if outs is not None else _laid_out_like(backend, like, like.shape))
        gv = _sum_to_array(product(xp.swapaxes(p if keep is None else p * keep, -1, -2), g, v, 2), v.shape) \
            if need_v else None
        if not (need_q or need_k or need_mask):
            return None, None, gv, None
        ds = mm(g, xp.swapaxes(v, -1, -2))           # dP, then dS = P * (dP - sum(dP * P)) in place
        if keep is not None:
            ds *= keep
        folded = folded and not need_mask                  # the mask's gradient is dS without the scale
        backend.attention_softmax_backward(ds, p, scale if folded else 1.0)
        gmask = _sum_to_array(ds, mask.shape) if need_mask else None
        if node.folded and need_mask:
            ds = ds * backend.scalar(scale, ds.dtype)     # a new array: gmask may be ds itself
        gq = gk = None
        if need_q:
            gq = product(ds, k, q, 0)
            if not node.folded:
                gq *= scale
            gq = _sum_to_array(gq, q.shape)
        if need_k:
            gk = _sum_to_array(product(xp.swapaxes(ds, -1, -2), node.qs, k, 1), k.shape)
        return gq, gk, gv, gmask

    @staticmethod
    def forward(ctx, grad, q, k, v, mask, node):
        ctx.scale, ctx.keep = node.scale, node.keep
        ctx.save_for_backward(grad, q, k, v, mask)
        out = AttentionBackward.arrays(ctx, grad.data, q.data, k.data, v.data, None if mask is None else mask.data,
                                       node)
        return tuple(None if a is None else ctx.wrap(a) for a in out)

    @staticmethod
    def backward(ctx, ggq, ggk, ggv, ggmask):
        # the first derivative, with s = scale q k^T + mask, p = softmax(s), P = p * keep:
        # gv = P^T grad, dp = (grad v^T) * keep, ds = softmax_backward(dp, p), gmask = ds, gq = scale ds k,
        # gk = scale ds^T q; its gradient runs back through each step (recorded ops)
        grad, q, k, v, mask = ctx.saved_tensors
        need_g, need_q, need_k, need_v, need_m = ctx.needs_input_grad[:5]
        c = ctx.scale
        kt = k.swapaxes(-1, -2)
        s = matmul(q, kt) * c
        d = s.ndim - 1
        p = Softmax.apply(s if mask is None else s + mask, d)
        keep = None if ctx.keep is None else ctx.wrap(ctx.keep)
        d_g = d_q = d_k = d_v = d_m = d_p = None

        def add(a, b):
            return b if a is None else a + b
        lam = None                              # the gradient reaching ds
        if ggq is not None:
            lam = matmul(ggq, kt) * c
        if ggk is not None:
            lam = add(lam, matmul(q, ggk.swapaxes(-1, -2)) * c)
        if ggmask is not None:
            lam = add(lam, ggmask)
        if lam is not None:
            dp = matmul(grad, v.swapaxes(-1, -2))
            dp = dp if keep is None else dp * keep
            if need_g or need_v:
                d_dp = SoftmaxBackward.apply(lam, p, d)
                d_dp = d_dp if keep is None else d_dp * keep
                d_g = matmul(d_dp, v) if need_g else None
                d_v = matmul(d_dp.swapaxes(-1, -2), grad) if need_v else None
            if need_q or need_k or need_m:
                d_p = lam * (dp - (dp * p).sum(d, keepdims=True)) - dp * (lam * p).sum(d, keepdims=True)
                if (need_q and ggk is not None) or (need_k and ggq is not None):
                    ds = SoftmaxBackward.apply(dp, p, d)
                    if need_q and ggk is not None:
                        d_q = matmul(ds, ggk) * c
                    if need_k and ggq is not None:
                        d_k = matmul(ds.swapaxes(-1, -2), ggq) * c
        if ggv is not None:
            if need_g:
                d_g = add(d_g, matmul(p if keep is None else p * keep, ggv))
            if need_q or need_k or need_m:
                t = matmul(grad, ggv.swapaxes(-1, -2))
                d_p = add(d_p, t if keep is None else t * keep)
        if d_p is not None:
            d_s = SoftmaxBackward.apply(d_p, p, d)
            if need_q:
                d_q = add(d_q, matmul(d_s, k) * c)
            if need_k:
                d_k = add(d_k, matmul(d_s.swapaxes(-1, -2), q) * c)
            d_m = d_s if need_m else None
        return (None if d_g is None else _sum_to(d_g, grad.shape), None if d_q is None else _sum_to(d_q, q.shape),
                None if d_k is None else _sum_to(d_k, k.shape), None if d_v is None else _sum_to(d_v, v.shape),
                None if d_m is None else _sum_to(d_m, mask.shape), None)


# Causal attention on the CPU skips the keys a query cannot see: the queries in CAUSAL_BLOCKS row blocks,
# block i against keys [0, end of block i) only, so the scores, softmax and products cover 10/16 of the
# (L, L) square with 4 blocks (PyTorch's CPU kernel for is_causal skips them too). Taken when the additive
# mask is exactly the causal one (is_causal, or an attn_mask equal to it, as a TransformerEncoderLayer
# given generate_square_subsequent_mask passes), L == S >= 64, no dropout, same batch dims, on NumPy.
CAUSAL_BLOCKS = 4
CAUSAL_MASKS_KEPT = 4      # (L, dtype) -> the (L, L) causal mask, for the last few lengths only (not one per length)
_causal_masks: dict = {}


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
        ps.append(backend.attention_softmax(s, None, 1.0))
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
            ds = backend.attention_softmax_backward(mm(gi, xp.swapaxes(v[..., :r1, :], -1, -2)), p, 1.0)   # dP -> dS
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
    if not is_floating(m.dtype):
        raise TypeError(f"{op}: expected attn_mask to be bool or floating point, got dtype {m.dtype}")
    return m if m.dtype == q.dtype else m.to(dtype=q.dtype)


def _causal_mask(q, L, S):
    """The additive mask of is_causal: query i sees keys 0..i (top-left aligned, as PyTorch)."""
    backend = q.device.backend
    xp = backend.xp
    return Tensor._make(backend.call(lambda: xp.triu(xp.full((L, S), -math.inf, dtype=q.dtype), 1)), q.device)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4), (2, 5, 4), (2, 5, 3)), ((3, 2), (4, 2), (4, 3)), ((2, 2, 3, 4), (1, 5, 4), (2, 1, 5, 2))),
           ref="refs.sdpa", name="scaled_dot_product_attention"),
    OpTest((((2, 4, 3), (2, 4, 3), (2, 4, 2)), ((2, 3, 3), (2, 5, 3), (2, 5, 2))), ref="refs.sdpa_causal",
           op=lambda q, k, v: scaled_dot_product_attention(q, k, v, is_causal=True), name="sdpa_causal"),
    OpTest((((2, 3, 4), (2, 5, 4), (2, 5, 3), (3, 5)), ((2, 3, 4), (2, 5, 4), (2, 5, 3), (2, 1, 5))), ref="refs.sdpa",
           op=lambda q, k, v, m: scaled_dot_product_attention(q, k, v, attn_mask=m), name="sdpa_float_mask"),
    OpTest((((2, 3, 4), (2, 5, 4), (2, 5, 3)),), ref="refs.sdpa_bool_mask",
           op=lambda q, k, v: scaled_dot_product_attention(q, k, v,
                                                           attn_mask=as_tensor(_BOOL_MASK, "op table", like=q)),
           name="sdpa_bool_mask")),
    doc="softmax(query @ key^T * scale + mask) @ value over (..., L, E) queries; batch dims broadcast.")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(query @ key^T * scale + mask) @ value for query (..., L, E), key (..., S, E), value
    (..., S, Ev) -> (..., L, Ev); batch dims broadcast. attn_mask: bool (True = takes part) or float
    (added to the scores), broadcastable to (..., L, S); is_causal masks keys after the query's position;
    dropout_p > 0 drops attention weights; scale defaults to 1/sqrt(E). With enable_gqa, key and value
    may have fewer heads (dim -3) than query, each shared by a group of query heads."""
    op = "scaled_dot_product_attention"
    if isinstance(query, Tensor) and query.dtype is bfloat16:
        # in float32, the result rounded once (the fused softmax kernels have no bfloat16)
        widen = [x.float() if isinstance(x, Tensor) and x.dtype is bfloat16 else x for x in (query, key, value, attn_mask)]
        return scaled_dot_product_attention(*widen, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                                            enable_gqa=enable_gqa).to(dtype=bfloat16)
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
