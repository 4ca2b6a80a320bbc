"""Linear (y = x W^T + b), Identity, Flatten, Embedding."""

from ..module import Module
from ..parameter import Parameter
from .. import init
from ... import creation
from ...ops.shape import flatten
from .. import functional as F

__all__ = ["Linear", "Identity", "Flatten", "Embedding"]


def _factory(device, dtype):
    return {"device": device, "dtype": dtype}


class Identity(Module):
    """Returns its input unchanged (a placeholder that accepts and ignores any constructor arguments)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features); PyTorch's default init."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        kw = _factory(device, dtype)
        self.weight = Parameter(creation.empty(out_features, in_features, **kw))
        if bias:
            self.bias = Parameter(creation.empty(out_features, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw weight and bias with PyTorch's default (Kaiming-uniform) initialisation."""
        init.default_init_(self.weight, self.bias)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Flatten(Module):
    """Flattens dims start_dim..end_dim into one (by default all but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Embedding(Module):
    """A lookup table: integer indices of any shape -> rows of weight (num_embeddings, embedding_dim),
    initialised N(0, 1); the row at ``padding_idx`` starts at zero and gets no gradient."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} must be within [-{num_embeddings}, "
                                 f"{num_embeddings})")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(creation.empty(num_embeddings, embedding_dim, **_factory(device, dtype)))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Embedding: _weight has shape {tuple(_weight.shape)}, expected "
                                 f"{(num_embeddings, embedding_dim)}")
            self.weight = Parameter(_weight)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight shares memory with the 2-D tensor ``embeddings``."""
        if embeddings.ndim != 2:
            raise ValueError(f"Embedding.from_pretrained: expected a 2-D tensor, got shape {tuple(embeddings.shape)}")
        m = cls(embeddings.shape[0], embeddings.shape[1], padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                _weight=embeddings.detach())
        m.weight.requires_grad_(not freeze)
        return m

    def reset_parameters(self):
        """Re-draw the embeddings from N(0, 1); the ``padding_idx`` row is zero."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            self.weight.data[self.padding_idx] = 0
            self.weight._bump_version()

    def forward(self, indices):
        return F.embedding(indices, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

