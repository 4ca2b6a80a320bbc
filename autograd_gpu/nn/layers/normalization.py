"""GroupNorm, InstanceNorm1d, InstanceNorm2d, RMSNorm and LocalResponseNorm, with PyTorch's parameter names
and defaults (affine weight ones, bias zeros)."""
from ..module import Module
from ..parameter import Parameter
from .. import init
from ... import creation
from .. import functional as F
from .norm import _norm_state, _affine_params, _norm_repr

__all__ = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RMSNorm", "LocalResponseNorm"]


class GroupNorm(Module):
    """Normalise (N, C, *) over groups of C / num_groups channels; weight and bias (C,) per channel."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups <= 0 or \
                num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups}), a positive int")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_params(self, num_channels, affine, bias, {"device": device, "dtype": dtype})

    def reset_parameters(self):
        """Weight back to ones and bias to zeros (PyTorch's initialisation)."""
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(Module):
    _dims = 0

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        _norm_state(self, num_features, eps, momentum, affine, track_running_stats, device, dtype, bias)

    def forward(self, x):
        d = self._dims
        if x.ndim not in (d + 1, d + 2):
            raise ValueError(f"{type(self).__name__}: expected a {d + 1}-D or {d + 2}-D input, got shape "
                             f"{tuple(x.shape)}")
        unbatched = x.ndim == d + 1
        if unbatched:
            x = x.unsqueeze(0)
        if x.shape[1] != self.num_features and self.affine:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels (dim 1), got input of "
                             f"shape {tuple(x.shape)}")
        use_stats = self.training or not self.track_running_stats
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias, use_stats,
                            self.momentum if self.momentum is not None else 0.0, self.eps)   # as PyTorch
        return y[0] if unbatched else y

    def extra_repr(self):
        return _norm_repr(self)


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) or (C, L): each sample's channel over its length."""
    _dims = 1


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) or (C, H, W): each sample's channel over its pixels."""
    _dims = 2


class RMSNorm(Module):
    """x / sqrt(mean(x^2 over normalized_shape) + eps) * weight (ones); eps None is the dtype's epsilon."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(creation.ones(*self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        """Weight back to ones (PyTorch's initialisation)."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LocalResponseNorm(Module):
    """Normalise each channel by its size neighbouring channels' mean square (no parameters)."""

    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, x):
        return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
