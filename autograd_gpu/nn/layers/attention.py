"""MultiheadAttention with PyTorch's parameters, masks and return values."""
import math

from ..module import Module
from ...dtypes import is_floating
from ..parameter import Parameter
from .. import init
from ... import creation
from ...tensor import Tensor
from ...ops.linalg import matmul
from ...ops.reduction import mean
from ...ops.nn.attention import _split_heads
from .linear import Linear
from .. import functional as F

__all__ = ["MultiheadAttention"]


def _additive(mask, dtype, what):
    """A mask as a Tensor to add to the attention scores: bool True -> -inf (not attended), float as is."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"MultiheadAttention: {what} must be a Tensor, got {type(mask).__name__}")
    if mask.dtype.kind == "b":
        xp = mask.device.backend.xp
        return Tensor._make(xp.where(mask.data, -math.inf, 0.0).astype(dtype), mask.device)
    if not is_floating(mask.dtype):
        raise TypeError(f"MultiheadAttention: {what} must be bool or floating point, got {mask.dtype}")
    return mask if mask.dtype == dtype else mask.to(dtype=dtype)


class MultiheadAttention(Module):
    """Attention from queries (L, N, E) to keys (S, N, kdim) and values (S, N, vdim) over num_heads heads
    (batch first with batch_first=True; unbatched (L, E) inputs too). forward returns (output, weights):
    output like the query, weights (N, L, S) averaged over heads, or (N, num_heads, L, S), or None."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads}), both positive")
        if add_bias_kv or add_zero_attn:
            raise ValueError("MultiheadAttention: add_bias_kv and add_zero_attn are not supported")
        self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        kw = {"device": device, "dtype": dtype}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(creation.empty(3 * embed_dim, embed_dim, **kw))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            self.q_proj_weight = Parameter(creation.empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(creation.empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(creation.empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(creation.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
        self._reset_parameters()

    def _reset_parameters(self):
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def _project(self, query, key, value):
        """q, k, v (N, H, L, head_dim) = the input projections of query, key and value (batch first), split
        into heads (views of the projections; on CUDA C-contiguous copies, made once: _split_heads)."""
        e, b, h = self.embed_dim, self.in_proj_bias, self.num_heads
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e:2 * e], b[2 * e:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:                  # self-attention: one matrix product
                return _split_heads(F.linear(query, w, b), h, 3)
            wq, wk, wv = w[:e], w[e:2 * e], w[2 * e:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        return (_split_heads(F.linear(query, wq, bq), h), _split_heads(F.linear(key, wk, bk), h),
                _split_heads(F.linear(value, wv, bv), h))

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise ValueError(f"MultiheadAttention: expected query, key and value all 3-D (batched) or all 2-D, got "
                             f"shapes {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        if query.shape[-1] != self.embed_dim:
            raise ValueError(f"MultiheadAttention: expected query's last dim {self.embed_dim}, got {query.shape[-1]}")
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.swapaxes(0, 1), key.swapaxes(0, 1), value.swapaxes(0, 1)
        n, tgt, src, h, hd = query.shape[0], query.shape[1], key.shape[1], self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)                      # (N, H, L, hd), (N, H, S, hd) twice
        mask = self._mask(attn_mask, key_padding_mask, is_causal, n, tgt, src, q.dtype, query.device)
        p = self.dropout if self.training else 0.0
        if need_weights:      # the weights are wanted: the composed chain keeps them (as PyTorch does)
            scores = matmul(q * (1.0 / math.sqrt(hd)), k.swapaxes(-1, -2))     # (N, H, L, S)
            weights = F.softmax(scores if mask is None else scores + mask, -1)
            out = matmul(F.dropout(weights, p, True) if p > 0 else weights, v)
        else:                 # one fused attention node
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        out = self.out_proj(out.permute(0, 2, 1, 3).reshape(n, tgt, self.embed_dim))
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.swapaxes(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = mean(weights, dim=1)
        return out, (weights if batched else weights.squeeze(0))

    def _mask(self, attn_mask, key_padding_mask, is_causal, n, tgt, src, dtype, device):
        """The additive mask (broadcastable to (N, H, L, S)) from attn_mask, key_padding_mask, is_causal."""
        mask = None
        if attn_mask is None and is_causal:
            xp = device.backend.xp
            attn_mask = Tensor._make(xp.triu(xp.ones((tgt, src), dtype=bool), 1), device)
        if attn_mask is not None:
            mask = _additive(attn_mask, dtype, "attn_mask")
            if mask.ndim == 3:
                if mask.shape != (n * self.num_heads, tgt, src):
                    raise ValueError(f"MultiheadAttention: a 3-D attn_mask must have shape "
                                     f"{(n * self.num_heads, tgt, src)}, got {tuple(mask.shape)}")
                mask = mask.reshape(n, self.num_heads, tgt, src)
            elif mask.shape != (tgt, src):
                raise ValueError(f"MultiheadAttention: a 2-D attn_mask must have shape {(tgt, src)}, got "
                                 f"{tuple(mask.shape)}")
        if key_padding_mask is not None:
            if tuple(key_padding_mask.shape) != (n, src):
                raise ValueError(f"MultiheadAttention: key_padding_mask must have shape {(n, src)}, got "
                                 f"{tuple(key_padding_mask.shape)}")
            kpm = _additive(key_padding_mask, dtype, "key_padding_mask").reshape(n, 1, 1, src)
            mask = kpm if mask is None else mask + kpm
        return mask
