"""nn.functional's attention: scaled_dot_product_attention as one fused Function (two products and
in-place passes over the scores; on the CPU a causal mask skips the keys a query cannot see, in row blocks)."""
import builtins
import math

from ...autograd.function import Function
from ...dtypes import is_floating, bfloat16
from ...autograd.grad_mode import state
from ...tensor import Tensor
from .._autocast import cast_low
from ..shape import broadcast_shapes, broadcast_to, sum_to as _sum_to
from ..linalg import matmul
from .._util import as_tensor
from ..batching import _wrap, _union, _align, _expand
from ..registry import register, OpTest
from ._args import _float_tensor, _same_dtype
from .activation import Softmax

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
        """The backward above on arrays: dP and dS share one buffer; the scale in dS (softmax_takes_scale),
        or on the (L, E) arrays (dK from the saved q * scale)."""
        need_q, need_k, need_v, need_mask = ctx.needs_input_grad[:4]
        xp, backend = ctx.xp, ctx.device.backend
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
        folded = ctx.folded and not need_mask                 # the mask's gradient is dS without the scale
        backend.attention_softmax_backward(ds, p, ctx.scale if folded else 1.0)
        gmask = reduced(ds, mask.shape) if need_mask else None
        if ctx.folded and need_mask:
            ds = ds * backend.scalar(ctx.scale, ds.dtype)     # a new array: gmask may be ds itself
        gq = gk = None
        if need_q:
            gq = product(ds, k.data, q.data)
            if not ctx.folded:
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
