"""Activation modules (ReLU, LeakyReLU, GELU, SiLU, Tanh, Sigmoid, ELU, Softplus, Softmax,
LogSoftmax) and Dropout: thin wrappers over nn.functional."""
import warnings

from ..module import Module
from .. import functional as F

__all__ = ["ReLU", "LeakyReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "ELU", "Softplus", "Softmax", "LogSoftmax",
           "Dropout"]


class _Activation(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace     # accepted for PyTorch compatibility; the result is always a new tensor

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Activation):
    """max(x, 0)."""

    def forward(self, x):
        return F.relu(x)


class LeakyReLU(_Activation):
    """x for x > 0, negative_slope * x otherwise."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__(inplace)
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(_Activation):
    """x for x > 0, alpha * (exp(x) - 1) otherwise."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__(inplace)
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class GELU(Module):
    """x * Phi(x), exact (erf) by default or the tanh approximation with approximate='tanh'."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_Activation):
    """x * sigmoid(x)."""

    def forward(self, x):
        return F.silu(x)


class Tanh(Module):
    """Elementwise hyperbolic tangent, ``F.tanh``."""
    def forward(self, x):
        return F.tanh(x)


class Sigmoid(Module):
    """Elementwise logistic sigmoid ``1 / (1 + exp(-x))``, ``F.sigmoid``."""
    def forward(self, x):
        return F.sigmoid(x)


class Softplus(Module):
    """log(1 + exp(beta * x)) / beta (linear above ``threshold``)."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


def _implicit_dim(x, name):
    warnings.warn(f"{name}: implicit dimension choice is deprecated; pass dim=", stacklevel=3)
    return 0 if x.ndim in (0, 1, 3) else 1


class Softmax(Module):
    """exp(x) / sum(exp(x)) along ``dim``."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim if self.dim is not None else _implicit_dim(x, "Softmax"))

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """log(softmax(x)) along ``dim``, computed stably."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return F.log_softmax(x, self.dim if self.dim is not None else _implicit_dim(x, "LogSoftmax"))

    def extra_repr(self):
        return f"dim={self.dim}"


class Dropout(Module):
    """In training, zeroes each element with probability p and scales the rest by 1/(1-p); identity in eval."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
