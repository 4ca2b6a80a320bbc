"""Conv1d and Conv2d: weight (out_channels, in_channels // groups, *kernel_size), PyTorch's default init."""

from ..module import Module
from ..parameter import Parameter
from .. import init
from ... import creation
from .. import functional as F

__all__ = ["Conv1d", "Conv2d"]


def _tuple(v, n, what, name="argument", minimum=None):
    """``v`` (an int or n ints) as n ints, each at least ``minimum``: checked when the layer is made, so a
    bad size fails at the line that gives it, not deep inside the first forward."""
    t = (v,) * n if isinstance(v, int) and not isinstance(v, bool) else tuple(v) if isinstance(v, (tuple, list)) else None
    if t is None or len(t) != n or not all(isinstance(a, int) and not isinstance(a, bool) for a in t):
        raise TypeError(f"{what}: expected {name} as an int{f' or {n} ints' if n > 1 else ''}, got {v!r}")
    if minimum is not None and any(a < minimum for a in t):
        raise ValueError(f"{what}: expected {name} of at least {minimum}, got {v!r}")
    return t


def _check_channels(name, in_channels, out_channels, groups, padding_mode, modes=("zeros",)):
    """The checks a convolution layer (plain or transposed) makes of its channel counts and padding mode (one
    of ``modes``: a plain convolution takes PyTorch's four, a transposed one only 'zeros', as PyTorch)."""
    for what, v in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name}: expected {what} to be a positive int, got {v!r}")
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                         f"divisible by groups ({groups})")
    if padding_mode not in modes:
        raise ValueError(f"{name}: padding_mode must be " + (" or ".join(repr(m) for m in modes) if len(modes) > 1
                                                              else f"{modes[0]!r} (the only one PyTorch supports here)")
                         + f", got {padding_mode!r}")


class _ConvNd(Module):
    _n = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name, n = type(self).__name__, self._n
        _check_channels(name, in_channels, out_channels, groups, padding_mode,
                        ("zeros", "reflect", "replicate", "circular"))
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n, name, "kernel_size", 1)
        self.stride = _tuple(stride, n, name, "stride", 1)
        self.dilation = _tuple(dilation, n, name, "dilation", 1)
        self.padding_mode = padding_mode
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: padding must be 'same', 'valid', an int or {n} ints, got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(padding, n, name, "padding", 0)
        # padding_mode other than 'zeros': F.pad by these amounts (F.pad's order: last dim first), then convolve
        # without padding, as PyTorch ('same' puts the odd one on the right)
        if self.padding == "valid":
            pads = [(0, 0)] * n
        elif self.padding == "same":
            pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for d, k in zip(self.dilation, self.kernel_size)]
        else:
            pads = [(p, p) for p in self.padding]
        self._reversed_padding_repeated_twice = tuple(v for pair in reversed(pads) for v in pair)
        kw = {"device": device, "dtype": dtype}
        self.weight = Parameter(creation.empty(out_channels, in_channels // groups, *self.kernel_size, **kw))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw weight and bias with PyTorch's default (Kaiming-uniform) initialisation."""
        init.default_init_(self.weight, self.bias)     # fan_in = in/groups * prod(kernel)

    def extra_repr(self):
        n = self._n
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"        # unquoted, as PyTorch prints it
        return s

    def _pad_input(self, x):
        """The input padded by ``padding_mode`` (not 'zeros'), to convolve with no padding."""
        return F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C_in, L) (or unbatched (C_in, L)) inputs."""
    _n = 1

    def forward(self, x):
        if self.padding_mode != "zeros":
            return F.conv1d(self._pad_input(x), self.weight, self.bias, self.stride[0], 0, self.dilation[0],
                            self.groups)
        p = self.padding if isinstance(self.padding, str) else self.padding[0]
        return F.conv1d(x, self.weight, self.bias, self.stride[0], p, self.dilation[0], self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C_in, H, W) (or unbatched (C_in, H, W)) inputs."""
    _n = 2

    def forward(self, x):
        if self.padding_mode != "zeros":
            return F.conv2d(self._pad_input(x), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
