"""nn.functional's index-to-vector functions (PyTorch's "sparse functions"): embedding (rows of a weight
picked by integer indices; the backward scatter-adds) and one_hot."""
from ...autograd.function import Function
from ...tensor import Tensor
from ..elementwise import mul
from ..indexing import IndexAddInto
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
    kinds=("index:5",), grad=False, gradgrad=False))
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
