"""ConvTranspose1d, ConvTranspose2d, ConvTranspose3d (weight (in_channels, out_channels // groups, *kernel_size))
and Conv3d (weight (out_channels, in_channels // groups, kd, kh, kw)), with PyTorch's default initialisation."""
from ..module import Module
from ..parameter import Parameter
from .. import init
from ... import creation
from .. import functional as F
from .conv import _ConvNd, _check_channels, _tuple

__all__ = ["ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "Conv3d"]


class Conv3d(_ConvNd):
    """3-D convolution over (N, C_in, D, H, W) (or unbatched (C_in, D, H, W)) inputs."""
    _n = 3

    def forward(self, x):
        if self.padding_mode != "zeros":
            return F.conv3d(self._pad_input(x), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)
        return F.conv3d(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)


class _ConvTransposeNd(Module):
    _n = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        name, n = type(self).__name__, self._n
        _check_channels(name, in_channels, out_channels, groups, padding_mode)
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n, name, "kernel_size", 1)
        self.stride = _tuple(stride, n, name, "stride", 1)
        self.padding = _tuple(padding, n, name, "padding", 0)
        self.output_padding = _tuple(output_padding, n, name, "output_padding", 0)
        self.dilation = _tuple(dilation, n, name, "dilation", 1)
        for o, s, d in zip(self.output_padding, self.stride, self.dilation):
            if o >= s and o >= d:
                raise ValueError(f"{name}: output_padding {self.output_padding} must be smaller than either stride "
                                 f"{self.stride} or dilation {self.dilation}")
        self.padding_mode = padding_mode
        kw = {"device": device, "dtype": dtype}
        self.weight = Parameter(creation.empty(in_channels, out_channels // groups, *self.kernel_size, **kw))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """PyTorch's default: Kaiming-uniform(a=sqrt(5)) on the weight, fan_in from its dim 1 and kernel
        (out_channels / groups * prod(kernel_size)), and the bias uniform on 1/sqrt(fan_in)."""
        init.default_init_(self.weight, self.bias)

    def _output_padding(self, x, output_size):
        """PyTorch's output_size argument of forward: the output_padding that reaches it."""
        if output_size is None:
            return self.output_padding
        n = self._n
        size = tuple(output_size)[-n:]
        if len(size) != n:
            raise ValueError(f"{type(self).__name__}: expected output_size with {n} spatial sizes, got {output_size!r}")
        pads = []
        for i in range(n):
            base = ((x.shape[x.ndim - n + i] - 1) * self.stride[i] - 2 * self.padding[i]
                    + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            extra = size[i] - base
            if not 0 <= extra < max(self.stride[i], self.dilation[i]):
                raise ValueError(f"{type(self).__name__}: requested an output size of {tuple(size)}, but the valid "
                                 f"sizes of dim {i} range from {base} to {base + max(self.stride[i], self.dilation[i]) - 1}")
            pads.append(extra)
        return tuple(pads)

    def extra_repr(self):
        n = self._n
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution over (N, C_in, L) (or unbatched (C_in, L)) inputs."""
    _n = 1

    def forward(self, x, output_size=None):
        op = self._output_padding(x, output_size)
        return F.conv_transpose1d(x, self.weight, self.bias, self.stride[0], self.padding[0], op[0], self.groups,
                                  self.dilation[0])


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution over (N, C_in, H, W) (or unbatched (C_in, H, W)) inputs: the adjoint of
    Conv2d, the upsampling layer of decoders and U-Nets."""
    _n = 2

    def forward(self, x, output_size=None):
        op = self._output_padding(x, output_size)
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                                  self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution over (N, C_in, D, H, W) (or unbatched (C_in, D, H, W)) inputs: the adjoint of
    Conv3d, the upsampling layer of volumetric decoders."""
    _n = 3

    def forward(self, x, output_size=None):
        op = self._output_padding(x, output_size)
        return F.conv_transpose3d(x, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                                  self.dilation)
