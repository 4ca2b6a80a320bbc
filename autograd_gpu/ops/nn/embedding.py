"""nn.functional's index-to-vector functions (PyTorch's "sparse functions"): embedding (rows of a weight
picked by integer indices; the backward scatter-adds), embedding_bag (bags of rows reduced through a bag
matrix) and one_hot."""
from ...autograd.function import Function
from ...tensor import Tensor
from ..elementwise import mul, where
from ..linalg import matmul
from ..indexing import IndexAddInto, gather
from .._util import as_tensor
from .. import batching
from ..registry import register, OpTest
from ._args import _float_tensor, _index_tensor, _check_range


class Embedding(Function):
    """weight[indices]; the backward scatter-adds rows (repeated indices sum), skipping padding_idx and
    scaled by 1/count with scale_grad_by_freq."""
    # vmap: the indices are a host array the wrapper has already read (a batched index tensor cannot be),
    # so only a per-example weight table reaches here, which is rare: once per example
    batch_rule = batching.loop

    @staticmethod
    def forward(ctx, weight, idx, row_scale):
        ctx.idx, ctx.row_scale, ctx.shape = idx, row_scale, weight.data.shape
        return ctx.wrap(weight.data[idx])

    @staticmethod
    def backward(ctx, grad):
        g = grad if ctx.row_scale is None else mul(grad, ctx.wrap(ctx.row_scale))
        return IndexAddInto.apply(g, ctx.shape, (ctx.idx, Ellipsis), False), None, None


@register(namespace="nn.functional", tests=(
    OpTest((((5, 3), (2, 4)), ((4, 2), (3,))), ref=lambda np, w, i: w[i], op=lambda w, i: embedding(i, w),
           name="embedding", kinds=(None, "index:4")),
    # padding_idx withholds that row's gradient on purpose (PyTorch's semantics), so finite differences
    # disagree there; tests/test_functional.py checks its gradient directly
    OpTest((((4, 3), (6,)),), ref=lambda np, w, i: w[i], op=lambda w, i: embedding(i, w, padding_idx=1),
           name="embedding_padding_idx", kinds=(None, "index:4"), grad=False, gradgrad=False)))
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """Rows of weight (num_embeddings, dim) picked by integer indices of any shape -> (*indices.shape, dim).
    The row padding_idx gets no gradient; max_norm renormalises the picked rows in place first."""
    w = _float_tensor(weight, "embedding", "weight")
    if w.ndim != 2:
        raise ValueError(f"embedding: expected a 2-D weight (num_embeddings, embedding_dim), got shape {w.shape}")
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported; use sparse=False")
    idx = _index_tensor(input, w, "embedding", "input").data
    n = w.shape[0]
    _check_range(w.device.backend, idx, n, "embedding", "index", f" for a weight with {n} rows")
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx must be within [-{n}, {n}), got {padding_idx}")
        padding_idx %= n
    if max_norm is not None:
        _renorm_rows(w, idx, max_norm, norm_type)
    xp = w.device.backend.xp
    row_scale = None
    if padding_idx is not None or scale_grad_by_freq:
        row_scale = xp.ones(idx.shape + (1,), dtype=w.dtype)
        if scale_grad_by_freq:                     # counts by scatter-add: bincount would sync on a GPU
            counts = xp.zeros(n, dtype=w.dtype)
            w.device.backend.scatter_add(counts, idx.reshape(-1), xp.ones(idx.size, dtype=w.dtype))
            row_scale /= counts[idx][..., None]
        if padding_idx is not None:
            row_scale *= (idx != padding_idx)[..., None]
    return Embedding.apply(w, idx, row_scale)


def _renorm_rows(w, idx, max_norm, norm_type):
    """Rows of w picked by idx whose norm exceeds max_norm scaled down to it, in place (PyTorch's
    embedding_renorm_, outside the graph)."""
    xp = w.device.backend.xp
    rows = xp.unique(idx.reshape(-1))
    r = w.data[rows]
    norms = (xp.abs(r) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
    factor = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
    w.data[rows] = r * factor[:, None]
    w._bump_version()


@register(namespace="nn.functional", tests=OpTest(
    (((2, 3),), ((0,),)), ref=lambda np, i: np.eye(5, dtype=np.int64)[i], op=lambda i: one_hot(i, 5), name="one_hot",
    kinds=("index:5",), grad=False, gradgrad=False))     # an int64 result, as PyTorch's: nothing to differentiate
def one_hot(tensor, num_classes=-1):
    """int64 tensor with a trailing dim of num_classes (max + 1 when -1): 1 at each index, else 0; no gradient."""
    t = as_tensor(tensor, "one_hot")
    if t.dtype.kind not in "iu":
        raise TypeError(f"one_hot: expected an integer tensor of class indices, got dtype {t.dtype}")
    a = t.data
    if num_classes == -1:
        if a.size == 0:
            raise ValueError("one_hot: cannot infer num_classes from an empty tensor; pass num_classes")
        num_classes = int(t.device.backend.read_back(a.max(), "one_hot with num_classes=-1")) + 1
    _check_range(t.device.backend, a, num_classes, "one_hot", "class value", exc=ValueError)
    xp = t.device.backend.xp
    return Tensor._make((a[..., None] == xp.arange(num_classes)).astype("int64"), t.device)


def _bag_ref(np, w, i, mode, offsets=None, psw=None):
    bags = [i[b] for b in range(i.shape[0])] if offsets is None else \
        [i[offsets[b]:(offsets[b + 1] if b + 1 < len(offsets) else len(i))] for b in range(len(offsets))]
    out = []
    pos = 0
    for bag in bags:
        e = w[bag]
        if psw is not None:
            e = e * psw[pos:pos + len(bag), None]
        pos += len(bag)
        out.append(np.zeros(w.shape[1], w.dtype) if len(bag) == 0 else
                   e.sum(0) if mode == "sum" else e.mean(0) if mode == "mean" else e.max(0))
    return np.stack(out).astype(w.dtype)


def _offsets(values, like):
    return as_tensor(values, "op table", like=like).to(dtype="int64")


@register(namespace="nn.functional", tests=(
    OpTest((((6, 3), (2, 4)),), ref=lambda np, w, i: _bag_ref(np, w, i, "mean"), op=lambda w, i: embedding_bag(i, w),
           name="embedding_bag", kinds=(None, "index:6")),
    OpTest((((6, 3), (5,)),), ref=lambda np, w, i: _bag_ref(np, w, i, "sum", [0, 2, 2]),
           op=lambda w, i: embedding_bag(i, w, _offsets([0, 2, 2], w), mode="sum"), name="embedding_bag_offsets_sum",
           kinds=(None, "index:6")),
    OpTest((((6, 3), (5,), (5,)),), ref=lambda np, w, i, p: _bag_ref(np, w, i, "sum", [0, 3], p),
           op=lambda w, i, p: embedding_bag(i, w, _offsets([0, 3], w), mode="sum", per_sample_weights=p),
           name="embedding_bag_weights", kinds=(None, "index:6", None)),
    OpTest((((7, 2), (6,)),), ref=lambda np, w, i: _bag_ref(np, w, np.arange(6), "max", [0, 4]),
           op=lambda w, i: embedding_bag(_offsets(list(range(6)), w), w, _offsets([0, 4, 6], w), mode="max",
                                         include_last_offset=True),
           name="embedding_bag_max", kinds=(None, "index:7"))),
    doc="Sums, means or maxima of bags of embedding rows: (B, L) indices, or 1-D indices cut by offsets.")
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """PyTorch's embedding_bag: each bag's rows of weight reduced by mode ("sum", "mean", "max"); input
    (B, L) is B bags of L indices, or 1-D input with offsets (the start of each bag; include_last_offset:
    the last entry is the end). padding_idx entries are left out (and out of the mean's count); empty
    bags give zeros; per_sample_weights (mode "sum" only) scale each index's row. One (B, n) bag matrix
    for the whole batch: sum and mean are a matrix product, max a masked argmax (the gradient goes to
    each bag's first maximum per column, ties not split, as PyTorch's)."""
    op = "embedding_bag"
    w = _float_tensor(weight, op, "weight")
    if w.ndim != 2:
        raise ValueError(f"{op}: expected a 2-D weight (num_embeddings, embedding_dim), got shape {w.shape}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode must be 'sum', 'mean' or 'max', got {mode!r}")
    if sparse:
        raise NotImplementedError(f"{op}: sparse gradients are not supported; use sparse=False")
    if scale_grad_by_freq and mode == "max":
        raise ValueError(f"{op}: scale_grad_by_freq is not supported with mode='max'")
    idx = _index_tensor(input, w, op, "input")
    xp = w.device.backend.xp
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: offsets must be None for a 2-D input (B, L), got offsets")
        nb, length = idx.shape
        seg = xp.repeat(xp.arange(nb), length)
        flat = idx.reshape(-1)
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: a 1-D input needs offsets (the start of each bag)")
        off = _index_tensor(offsets, w, op, "offsets")
        if off.ndim != 1:
            raise ValueError(f"{op}: expected 1-D offsets, got shape {off.shape}")
        nb = off.shape[0] - (1 if include_last_offset else 0)
        seg = xp.searchsorted(off.data, xp.arange(idx.shape[0]), side="right") - 1
        flat = idx
    else:
        raise ValueError(f"{op}: expected a 1-D (with offsets) or 2-D input of indices, got shape {idx.shape}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise ValueError(f"{op}: per_sample_weights are only supported with mode='sum', got mode={mode!r}")
        psw = _float_tensor(per_sample_weights, op, "per_sample_weights", like=w)
        if psw.shape != tuple(idx.shape):
            raise ValueError(f"{op}: expected per_sample_weights of the input's shape {idx.shape}, got {psw.shape}")
    n = w.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise ValueError(f"{op}: padding_idx must be within [-{n}, {n}), got {padding_idx}")
        padding_idx %= n
    emb = embedding(flat, w, None, max_norm, norm_type, scale_grad_by_freq)           # (n, D)
    member = seg[None, :] == xp.arange(nb)[:, None]                                   # (B, n)
    if padding_idx is not None:
        member &= (flat.data != padding_idx)[None, :]
    count = member.sum(axis=1, keepdims=True)
    if mode == "max" and flat.shape[0]:
        # each bag's first maximum per column, as PyTorch's: that one row gets the gradient (ties are not
        # split); an argmax over the (B, n, D) masked rows and one gather, on the device
        masked = xp.where(member[:, :, None], emb.data[None], xp.full((), -xp.inf, dtype=emb.data.dtype))
        y = gather(emb, 0, Tensor._make(masked.argmax(axis=1), w.device))
        return where(Tensor._make(count > 0, w.device), y, Tensor._make(xp.zeros((), w.dtype), w.device))
    if per_sample_weights is not None:
        emb = emb * psw.reshape(-1, 1)
    mat = member.astype(w.dtype)
    if mode == "mean":
        mat /= xp.maximum(count, 1).astype(w.dtype)
    return matmul(Tensor._make(mat, w.device), emb)
