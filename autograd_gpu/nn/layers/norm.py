"""BatchNorm1d, BatchNorm2d (running statistics as buffers) and LayerNorm."""
from ..module import Module
from ..parameter import Parameter
from .. import init
from ... import creation
from ... import dtypes
from .. import functional as F

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm"]


def _affine_params(m, num_features, affine, bias, kw):
    """The norm layers' weight (ones) and bias (zeros) of shape (num_features,) when affine, the bias only when
    ``bias``; the missing ones registered as None, so state dicts name what PyTorch's do."""
    m.register_parameter("weight", Parameter(creation.ones(num_features, **kw)) if affine else None)
    m.register_parameter("bias", Parameter(creation.zeros(num_features, **kw)) if affine and bias else None)


def _norm_repr(m):
    """Batch and instance norm's extra_repr, PyTorch's (bias= says whether there is a bias parameter)."""
    return (f"{m.num_features}, eps={m.eps}, momentum={m.momentum}, affine={m.affine}, bias={m.bias is not None}, "
            f"track_running_stats={m.track_running_stats}")


def _norm_state(m, num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=True):
    """What batch and instance norm share (PyTorch's _NormBase): the settings, the weight and bias (ones and
    zeros) when affine (no bias when ``bias=False``), the running statistics and batch count when tracked (else
    None, by name)."""
    m.num_features, m.eps, m.momentum = num_features, eps, momentum
    m.affine, m.track_running_stats = affine, track_running_stats
    kw = {"device": device, "dtype": dtype}
    _affine_params(m, num_features, affine, bias, kw)
    if track_running_stats:
        m.register_buffer("running_mean", creation.zeros(num_features, **kw))
        m.register_buffer("running_var", creation.ones(num_features, **kw))
        m.register_buffer("num_batches_tracked", creation.zeros((), dtype=dtypes.int64, device=device))
    else:
        m.register_buffer("running_mean", None)
        m.register_buffer("running_var", None)
        m.register_buffer("num_batches_tracked", None)


class _BatchNorm(Module):
    _dims: tuple[int, ...] = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        _norm_state(self, num_features, eps, momentum, affine, track_running_stats, device, dtype, bias)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            self.num_batches_tracked.data.fill(0)
            self.num_batches_tracked._bump_version()

    def reset_parameters(self):
        """Reset the running statistics, and the affine weight to ones and bias to zeros."""
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, x):
        if x.ndim not in self._dims:
            raise ValueError(f"{type(self).__name__}: expected a " + " or ".join(f"{d}-D" for d in self._dims)
                             + f" input, got shape {tuple(x.shape)}")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels (dim 1), got input "
                             f"of shape {tuple(x.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            nbt = self.num_batches_tracked
            nbt.data += 1
            nbt._bump_version()
            if self.momentum is None:      # cumulative moving average
                factor = 1.0 / float(nbt.device.backend.read_back(nbt.data, "BatchNorm with momentum=None"))
        use_batch_stats = self.training or self.running_mean is None
        track = not self.training or self.track_running_stats
        return F.batch_norm(x, self.running_mean if track else None, self.running_var if track else None,
                            self.weight, self.bias, use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return _norm_repr(self)


class BatchNorm1d(_BatchNorm):
    """Batch normalisation over (N, C) or (N, C, L) inputs, per channel C."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation over (N, C, H, W) inputs, per channel C."""
    _dims = (4,)


class LayerNorm(Module):
    """Normalises over the trailing ``normalized_shape`` dims, then scales and shifts elementwise."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        kw = {"device": device, "dtype": dtype}
        if elementwise_affine:
            self.weight = Parameter(creation.ones(self.normalized_shape, **kw))
            if bias:
                self.bias = Parameter(creation.zeros(self.normalized_shape, **kw))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        """Weight to ones and bias to zeros."""
        if self.weight is not None:
            init.ones_(self.weight)
        if self.bias is not None:
            init.zeros_(self.bias)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
