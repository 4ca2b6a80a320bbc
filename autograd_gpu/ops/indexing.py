"""Indexing: getitem (its backward scatter-adds, so repeated indices sum), setitem, gather, ..."""
from ..autograd.function import Function
from ..tensor import Tensor

__all__ = ["getitem"]


def _index_data(idx):
    """The index with Tensors replaced by their arrays."""
    if isinstance(idx, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in idx)
    return idx.data if isinstance(idx, Tensor) else idx


class GetItem(Function):
    @staticmethod
    def forward(ctx, x, idx):
        ctx.shape, ctx.idx = x.data.shape, idx
        return ctx.wrap(x.data[idx])

    @staticmethod
    def backward(ctx, grad):
        return IndexAddInto.apply(grad, ctx.shape, ctx.idx), None


class IndexAddInto(Function):
    """zeros(shape) with grad added at idx (repeated indices accumulate): getitem's backward."""

    @staticmethod
    def forward(ctx, grad, shape, idx):
        ctx.idx = idx
        out = ctx.xp.zeros(shape, dtype=grad.data.dtype)
        (ctx.device._backend or ctx.device.backend).scatter_add(out, idx, grad.data)
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        return GetItem.apply(grad, ctx.idx), None, None


def getitem(x, idx):
    """x[idx] with NumPy semantics: ints, slices, None, Ellipsis, integer arrays/Tensors, bool masks."""
    return GetItem.apply(x, _index_data(idx))
