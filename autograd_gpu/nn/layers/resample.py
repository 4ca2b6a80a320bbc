"""Upsample (and its 2-D shorthands UpsamplingNearest2d, UpsamplingBilinear2d), PixelShuffle,
PixelUnshuffle, Unfold, Fold and the padding layers (ZeroPad2d, ConstantPad1d,
ConstantPad2d, ReflectionPad1d, ReflectionPad2d, ReplicationPad2d, CircularPad2d): parameter-free wrappers of
nn.functional's resampling ops."""
from ..module import Module
from .. import functional as F

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d",
           "PixelShuffle", "PixelUnshuffle", "Unfold", "Fold", "ZeroPad2d", "ConstantPad1d",
           "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d", "ReplicationPad2d", "CircularPad2d"]


class Upsample(Module):
    """F.interpolate as a layer: size or scale_factor, mode "nearest" (default), "nearest-exact", "linear",
    "bilinear", "bicubic", "trilinear" or "area", align_corners for the interpolating modes."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None):
        super().__init__()
        self.size, self.mode, self.align_corners = size, mode, align_corners
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else \
            (tuple(float(s) for s in scale_factor) if scale_factor is not None else None)
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x):
        return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        what = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return f"{what}, mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Upsample(size, scale_factor, mode="nearest") of (N, C, H, W), PyTorch's 2-D shorthand."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Upsample(size, scale_factor, mode="bilinear", align_corners=True) of (N, C, H, W), PyTorch's 2-D
    shorthand (note align_corners=True, unlike Upsample's bilinear default)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r)."""

    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x):
        return F.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W)."""

    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x):
        return F.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


class Unfold(Module):
    """Sliding blocks of (N, C, H, W) as columns (N, C * kh * kw, L)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride

    def forward(self, x):
        return F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")


class Fold(Module):
    """Columns (N, C * kh * kw, L) summed back into (N, C, *output_size)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, x):
        return F.fold(x, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


def _padding(v, n, name):
    if isinstance(v, int) and not isinstance(v, bool):
        return (v,) * (2 * n)
    t = tuple(v) if isinstance(v, (tuple, list)) else None
    if t is None or len(t) != 2 * n or any(isinstance(a, bool) or not isinstance(a, int) for a in t):
        raise TypeError(f"{name}: expected padding as an int or {2 * n} ints, got {v!r}")
    return t


class _PadNd(Module):
    _n, _mode = 0, "constant"

    def __init__(self, padding, value=None):
        super().__init__()
        self.padding = _padding(padding, self._n, type(self).__name__)
        if value is not None:
            self.value = float(value)

    def forward(self, x):
        return F.pad(x, self.padding, self._mode, getattr(self, "value", None))

    def extra_repr(self):
        s = f"{self.padding}"
        return s + (f", value={self.value}" if hasattr(self, "value") else "")


class ConstantPad1d(_PadNd):
    """Pad the last dim with a constant value: padding an int or (left, right)."""
    _n = 1

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ConstantPad2d(_PadNd):
    """Pad the last two dims with a constant value: padding an int or (left, right, top, bottom)."""
    _n = 2

    def __init__(self, padding, value):
        super().__init__(padding, value)


class ZeroPad2d(_PadNd):
    """Pad the last two dims with zeros: padding an int or (left, right, top, bottom)."""
    _n = 2

    def __init__(self, padding):
        super().__init__(padding, 0.0)


class ReflectionPad1d(_PadNd):
    """Pad the last dim of (N, C, L) or (C, L) by reflection (the edge not repeated)."""
    _n, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last two dims of (N, C, H, W) or (C, H, W) by reflection (the edge not repeated)."""
    _n, _mode = 2, "reflect"


class ReplicationPad2d(_PadNd):
    """Pad the last two dims of (N, C, H, W) or (C, H, W) by repeating the edge."""
    _n, _mode = 2, "replicate"


class CircularPad2d(_PadNd):
    """Pad the last two dims of (N, C, H, W) or (C, H, W) by wrapping around."""
    _n, _mode = 2, "circular"
