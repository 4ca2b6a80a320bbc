"""MaxPool1d/2d, AvgPool1d/2d, AdaptiveAvgPool2d: modules over the nn.functional pooling ops."""
from ..module import Module
from .. import functional as F
from .conv import _tuple

__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool2d"]


def _check_window(layer, kernel_size, stride, padding, dilation=1):
    """Sizes checked when the layer is made, so a bad one fails at the line that gives it."""
    name, n = type(layer).__name__, 2 if type(layer).__name__.endswith("2d") else 1
    _tuple(kernel_size, n, name, "kernel_size", 1)
    if stride is not None:
        _tuple(stride, n, name, "stride", 1)
    _tuple(padding, n, name, "padding", 0)
    _tuple(dilation, n, name, "dilation", 1)


class _MaxPool(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False, ceil_mode=False):
        super().__init__()
        _check_window(self, kernel_size, stride, padding, dilation)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPool):
    """Max over windows of the last dim of (N, C, L) inputs; stride defaults to kernel_size."""

    def forward(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class MaxPool2d(_MaxPool):
    """Max over kernel_size windows of (N, C, H, W) inputs; stride defaults to kernel_size."""

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode,
                            self.return_indices)


class AvgPool1d(Module):
    """Mean over windows of the last dim of (N, C, L) inputs (zero padding counts by default)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
        super().__init__()
        _check_window(self, kernel_size, stride, padding)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad

    def forward(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """Mean over kernel_size windows of (N, C, H, W) inputs (zero padding counts by default)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        _check_window(self, kernel_size, stride, padding)
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode, self.count_include_pad = padding, ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                            self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """Average pooling of (N, C, H, W) or (C, H, W) inputs to a fixed output size (oh, ow) whatever the
    input size (None keeps that dim), with PyTorch's windows [floor(i*H/oh), ceil((i+1)*H/oh))."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"
