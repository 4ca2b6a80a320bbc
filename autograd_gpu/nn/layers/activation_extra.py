"""More activation modules (Mish, Hardswish, Hardsigmoid, Hardtanh, ReLU6, SELU, CELU, GLU, PReLU, Softsign,
Tanhshrink, Softshrink, Hardshrink, LogSigmoid, Softmax2d) and the vector modules CosineSimilarity and
PairwiseDistance: thin wrappers over nn.functional, with PyTorch's arguments and attribute names."""
from typing import Any

from ...creation import full
from ..module import Module
from ..parameter import Parameter
from .. import functional as F

__all__ = ["Mish", "Hardswish", "Hardsigmoid", "Hardtanh", "ReLU6", "SELU", "CELU", "GLU", "PReLU", "Softsign",
           "Tanhshrink", "Softshrink", "Hardshrink", "LogSigmoid", "Softmax2d", "CosineSimilarity",
           "PairwiseDistance"]


class _Inplace(Module):
    _fn: Any = None     # the subclass's F function (a staticmethod)

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class Mish(_Inplace):
    """x * tanh(softplus(x))."""
    _fn: Any = staticmethod(F.mish)


class Hardswish(_Inplace):
    """x * relu6(x + 3) / 6."""
    _fn: Any = staticmethod(F.hardswish)


class Hardsigmoid(_Inplace):
    """relu6(x + 3) / 6."""
    _fn: Any = staticmethod(F.hardsigmoid)


class SELU(_Inplace):
    """scale * elu(x, alpha) with the self-normalising constants."""
    _fn: Any = staticmethod(F.selu)


class Hardtanh(Module):
    """x clamped to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val cannot be greater than max_val, got {min_val} > {max_val}")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}" + (", inplace=True" if self.inplace else "")


class ReLU6(Hardtanh):
    """min(max(x, 0), 6)."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class CELU(Module):
    """x where x > 0, else alpha * (exp(x / alpha) - 1)."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GLU(Module):
    """a * sigmoid(b) for the two halves a, b of the input along dim."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """x where x > 0, else weight * x, with a learnt weight of num_parameters (1, or one per channel) elements,
    all ``init`` at the start."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        if not isinstance(num_parameters, int) or num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be a positive int, got {num_parameters!r}")
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(full((num_parameters,), float(init), dtype=dtype, device=device))

    def reset_parameters(self):
        """Set every slope back to ``init`` (PyTorch's PReLU initialisation)."""
        self.weight.data[...] = self.init

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class _Plain(Module):
    _fn: Any = None     # the subclass's F function (a staticmethod)

    def forward(self, input):
        return type(self)._fn(input)


class Softsign(_Plain):
    """x / (1 + |x|)."""
    _fn: Any = staticmethod(F.softsign)


class Tanhshrink(_Plain):
    """x - tanh(x)."""
    _fn: Any = staticmethod(F.tanhshrink)


class LogSigmoid(_Plain):
    """log(sigmoid(x))."""
    _fn: Any = staticmethod(F.logsigmoid)


class Softshrink(Module):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.softshrink(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Hardshrink(Softshrink):
    """x where |x| > lambd, else 0."""

    def forward(self, input):
        return F.hardshrink(input, self.lambd)


class Softmax2d(Module):
    """softmax over the channels (dim -3) of (N, C, H, W) or (C, H, W)."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected an input of 3 or 4 dimensions, got {input.ndim}")
        return F.softmax(input, -3)


class CosineSimilarity(Module):
    """F.cosine_similarity(x1, x2, dim, eps)."""

    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """F.pairwise_distance(x1, x2, p, eps, keepdim)."""

    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
