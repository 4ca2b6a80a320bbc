"""AdaptiveAvgPool1d, AdaptiveMaxPool2d, Unflatten, EmbeddingBag, Dropout1d, Dropout2d, AlphaDropout and
Bilinear, with PyTorch's parameter names, shapes and default initialisations."""
import math
from typing import Any

from ..module import Module
from ..parameter import Parameter
from .. import init
from ... import creation
from ...ops.linalg import einsum
from .. import functional as F

__all__ = ["AdaptiveAvgPool1d", "AdaptiveMaxPool2d", "Unflatten", "EmbeddingBag", "Dropout1d", "Dropout2d",
           "AlphaDropout", "Bilinear"]


class AdaptiveAvgPool1d(Module):
    """Average pooling of (N, C, L) to a fixed length output_size."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool1d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(Module):
    """Max pooling of (N, C, H, W) to a fixed (oh, ow); return_indices as MaxPool2d."""

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class Unflatten(Module):
    """Dim ``dim`` split into ``unflattened_size`` (one entry may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, bool) or not isinstance(dim, int):
            raise TypeError(f"Unflatten: expected dim as an int, got {dim!r}")
        if not isinstance(unflattened_size, (tuple, list)) or not unflattened_size:
            raise TypeError(f"Unflatten: expected unflattened_size as a non-empty tuple of ints, got "
                            f"{unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        d = self.dim + x.ndim if self.dim < 0 else self.dim
        if not 0 <= d < x.ndim:
            raise IndexError(f"Unflatten: dim {self.dim} is out of range for an input with {x.ndim} dims")
        sizes = list(self.unflattened_size)
        known = 1
        for s in sizes:
            known *= s if s != -1 else 1
        if sizes.count(-1) > 1 or (-1 not in sizes and known != x.shape[d]) or \
                (-1 in sizes and (known == 0 or x.shape[d] % known)):
            raise ValueError(f"Unflatten: sizes {self.unflattened_size} do not multiply to dim {self.dim}'s size "
                             f"{x.shape[d]} (input shape {tuple(x.shape)})")
        return x.reshape(tuple(x.shape[:d]) + tuple(sizes) + tuple(x.shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class EmbeddingBag(Module):
    """Bags of embedding rows reduced by mode ("mean" by default, "sum", "max"): weight (num_embeddings,
    embedding_dim) initialised N(0, 1), the padding_idx row zero."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None,
                 device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"EmbeddingBag: mode must be 'sum', 'mean' or 'max', got {mode!r}")
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"EmbeddingBag: padding_idx must be within [-{num_embeddings}, {num_embeddings}), "
                                 f"got {padding_idx}")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(creation.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"EmbeddingBag: expected _weight of shape {(num_embeddings, embedding_dim)}, got "
                                 f"{tuple(_weight.shape)}")
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        """Weights drawn again from N(0, 1), the padding row zeroed (PyTorch's initialisation)."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0
            self.weight._bump_version()

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, self.sparse, per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}"


class _DropoutNd(Module):
    _fn: Any = None     # the subclass's F function (a staticmethod)

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: p must be in [0, 1], got {p!r}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return type(self)._fn(x, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_DropoutNd):
    """In training, zeroes whole channels of (N, C, L) with probability p (the rest scaled by 1/(1-p))."""
    _fn: Any = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """In training, zeroes whole channels of (N, C, H, W) with probability p (the rest scaled by 1/(1-p))."""
    _fn: Any = staticmethod(F.dropout2d)


class AlphaDropout(_DropoutNd):
    """In training, SELU-preserving dropout (F.alpha_dropout); identity in eval."""
    _fn: Any = staticmethod(F.alpha_dropout)


class Bilinear(Module):
    """y = x1^T A x2 + b: weight (out_features, in1_features, in2_features) and bias (out_features,), both
    uniform on +-1/sqrt(in1_features) as PyTorch."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        for name, v in (("in1_features", in1_features), ("in2_features", in2_features),
                        ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"Bilinear: expected {name} to be a non-negative int, got {v!r}")
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        kw = {"device": device, "dtype": dtype}
        self.weight = Parameter(creation.empty(out_features, in1_features, in2_features, **kw))
        if bias:
            self.bias = Parameter(creation.empty(out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Weight and bias drawn again from U(-1/sqrt(in1_features), 1/sqrt(in1_features)) (PyTorch's initialisation)."""
        bound = 1 / math.sqrt(self.in1_features) if self.in1_features else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        if input1.shape[-1] != self.in1_features or input2.shape[-1] != self.in2_features or \
                tuple(input1.shape[:-1]) != tuple(input2.shape[:-1]):
            raise ValueError(f"Bilinear: expected inputs (*, {self.in1_features}) and (*, {self.in2_features}) with "
                             f"the same leading dims, got {tuple(input1.shape)} and {tuple(input2.shape)}")
        y = einsum("...i,oij,...j->...o", input1, self.weight, input2)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
