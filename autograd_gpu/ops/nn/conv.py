"""nn.functional's convolution and pooling: conv1d, conv2d, max_pool1d/2d, avg_pool1d/2d and
adaptive_avg_pool2d check and normalise their arguments (pairs, padding modes, ceil_mode, unbatched
inputs) and call the primitives of autograd_gpu/ops/conv.py, whose Functions hold the math and the vmap
rules."""
import builtins
import functools

from ...tensor import Tensor
from ..._trace_hooks import active as _tracing
from ...dtypes import float32
from .._autocast import cast_low
from .. import conv as _conv
from ..linalg import matmul
from ..registry import register, OpTest
from ._args import _float_tensor, _same_dtype, _pair

_F32 = {float32: {"rtol": 1e-4, "atol": 1e-5}}      # the products sum in another order than the reference's
IMG = ((2, 3, 6, 5), (3, 3, 3, 3), (3,))


def _conv_geom(op, x_shape, w_shape, stride, padding, dilation, groups):
    """(geom, (oh, ow)) for ops.conv after checking shapes and arguments (all pairs already)."""
    n, c, h, wd = x_shape
    o, cg, kh, kw = w_shape
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: expected groups to be a positive int, got {groups!r}")
    if c != cg * groups:
        raise ValueError(f"{op}: expected input with {cg * groups} channels (weight of shape {tuple(w_shape)} "
                         f"with groups={groups}), got {c} channels (input shape {tuple(x_shape)})")
    if o % groups:
        raise ValueError(f"{op}: out_channels ({o}) must be divisible by groups ({groups})")
    sh, sw = stride
    dh, dw = dilation
    if isinstance(padding, str):
        if padding == "valid":
            pads = (0, 0, 0, 0)
        elif padding == "same":
            if (sh, sw) != (1, 1):
                raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride {stride})")
            th, tw = dh * (kh - 1), dw * (kw - 1)
            pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)   # the odd one extra at the end, as PyTorch
        else:
            raise ValueError(f"{op}: padding must be an int, a pair, 'valid' or 'same', got {padding!r}")
    else:
        pads = (padding[0], padding[0], padding[1], padding[1])
    pt, pb, pl, pr = pads
    oh, ow = _conv.out_size(h, kh, sh, dh, pt, pb), _conv.out_size(wd, kw, sw, dw, pl, pr)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: the padded input ({h + pt + pb}x{wd + pl + pr}) is smaller than the dilated "
                         f"kernel ({dh * (kh - 1) + 1}x{dw * (kw - 1) + 1})")
    return (sh, sw, pt, pb, pl, pr, dh, dw, groups), (oh, ow)


def _conv_operands(op, input, weight, bias, nd):
    x = _float_tensor(input, op)
    w = _float_tensor(weight, op, "weight", like=x)
    b = None if bias is None else _float_tensor(bias, op, "bias", like=x)
    names = "(N, C, L)" if nd == 1 else "(N, C, H, W)"
    if x.ndim not in (nd + 1, nd + 2):
        raise ValueError(f"{op}: expected a {nd + 2}-D input {names} or a {nd + 1}-D unbatched one, "
                         f"got shape {x.shape}")
    if w.ndim != nd + 2:
        raise ValueError(f"{op}: expected a {nd + 2}-D weight (out_channels, in_channels / groups, "
                         f"{'k' if nd == 1 else 'kh, kw'}), got shape {w.shape}")
    if 0 in w.shape[2:]:                # no taps: the sum over the kernel would be 0 (NumPy's empty sum), silently
        raise ValueError(f"{op}: expected a kernel of at least {'x'.join(['1'] * nd)}, got a weight of shape "
                         f"{w.shape} whose kernel is {'x'.join(map(str, w.shape[2:]))}")
    if b is not None and b.shape != (w.shape[0],):
        raise ValueError(f"{op}: expected a bias of shape ({w.shape[0]},), got {b.shape}")
    if x.dtype != w.dtype or (b is not None and b.dtype != w.dtype):
        x, w, b = _same_dtype(op, x, w, b)
    return cast_low(x, w, b)


@register(namespace="nn.functional", tests=(
    OpTest((IMG, ((1, 2, 5, 5), (4, 2, 2, 3), (4,)), ((0, 3, 6, 5), (2, 3, 3, 3), (2,))), ref="refs.conv2d",
           name="conv2d", tol=_F32),
    OpTest((((2, 2, 5, 4), (3, 2, 3, 3)),), ref="refs.conv2d", op=lambda x, w: conv2d(x, w), name="conv2d_nobias",
           tol=_F32),
    OpTest((IMG, ((1, 3, 7, 7), (2, 3, 3, 3), (2,))), ref="refs.conv2d_stride2_pad",
           op=lambda x, w, b: conv2d(x, w, b, stride=2, padding=1), name="conv2d_stride2_pad", tol=_F32),
    OpTest((IMG,), ref="refs.conv2d_dilation", op=lambda x, w, b: conv2d(x, w, b, padding=(2, 1), dilation=(2, 1)),
           name="conv2d_dilation", tol=_F32),
    OpTest((((2, 4, 5, 5), (6, 2, 3, 3), (6,)),), ref="refs.conv2d_groups",
           op=lambda x, w, b: conv2d(x, w, b, stride=(1, 2), padding=1, groups=2), name="conv2d_groups", tol=_F32),
    OpTest((((2, 4, 5, 4), (6, 2, 3, 2), (6,)),), ref="refs.conv2d_groups_stride1",    # bias row per group
           op=lambda x, w, b: conv2d(x, w, b, padding=(1, 0), groups=2), name="conv2d_groups_stride1", tol=_F32),
    OpTest((((1, 3, 4, 4), (3, 1, 2, 2)),), ref="refs.conv2d_depthwise", op=lambda x, w: conv2d(x, w, groups=3),
           name="conv2d_depthwise", tol=_F32),
    OpTest((((2, 2, 4, 5), (3, 2, 3, 3)),), ref="refs.conv2d_same", op=lambda x, w: conv2d(x, w, padding="same"),
           name="conv2d_same", tol=_F32)),
    doc="2-D cross-correlation of (N, C, H, W) with a (out_channels, C / groups, kh, kw) weight.")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation, PyTorch's conv2d: input (N, C, H, W) or (C, H, W), weight
    (out_channels, C / groups, kh, kw); padding an int, a pair, 'valid' or 'same'."""
    x, w, b = _conv_operands("conv2d", input, weight, bias, 2)
    unbatched = x.ndim == 3
    if unbatched:
        x = x.reshape((1,) + x.shape)
    pad = padding if isinstance(padding, str) else _pair(padding, "padding", "conv2d", 0)
    geom, _ = _conv_geom("conv2d", x.shape, w.shape, _pair(stride, "stride", "conv2d"), pad,
                         _pair(dilation, "dilation", "conv2d"), groups)
    y = _conv.conv2d(x, w, b, geom)
    return y.reshape(y.shape[1:]) if unbatched else y


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 7), (4, 3, 3), (4,)), ((1, 3, 4), (2, 3, 2), (2,))), ref="refs.conv1d_stride2_pad",
           op=lambda x, w, b: conv1d(x, w, b, stride=2, padding=1), name="conv1d", tol=_F32),
    OpTest((((2, 4, 8), (4, 2, 3)),), ref="refs.conv1d_dilation_groups",
           op=lambda x, w: conv1d(x, w, dilation=2, groups=2), name="conv1d_dilation_groups", tol=_F32)),
    doc="1-D cross-correlation of (N, C, L) with a (out_channels, C / groups, k) weight.")
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation: input (N, C, L) or (C, L), weight (out_channels, C / groups, k); a 2-D
    convolution over a unit height."""
    x, w, b = _conv_operands("conv1d", input, weight, bias, 1)
    unbatched = x.ndim == 2
    x = x.reshape((1,) + x.shape[:1] + (1,) + x.shape[1:]) if unbatched else x.reshape(x.shape[:2] + (1,) + x.shape[2:])
    w = w.reshape(w.shape[:2] + (1,) + w.shape[2:])
    pad = padding if isinstance(padding, str) else (0, _single(padding, "padding", 0))
    geom, _ = _conv_geom("conv1d", x.shape, w.shape, (1, _single(stride, "stride")), pad,
                         (1, _single(dilation, "dilation")), groups)
    y = _conv.conv2d(x, w, b, geom)
    return y.reshape(y.shape[1:2] + y.shape[3:]) if unbatched else y.reshape(y.shape[:2] + y.shape[3:])


def _single(v, name, minimum=1, op="conv1d"):
    if isinstance(v, (tuple, list)) and len(v) == 1:
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"{op}: expected {name} as an int, got {v!r}")
    if v < minimum:
        raise ValueError(f"{op}: expected {name} of at least {minimum}, got {v!r}")
    return v


# --------------------------------------------------------------------------- pooling
def _pool_input(input, op):
    x = _float_tensor(input, op)
    if x.ndim not in (3, 4):            # PyTorch raises RuntimeError for an input of the wrong rank
        raise RuntimeError(f"{op}: expected a 4-D input (N, C, H, W) or a 3-D unbatched one (C, H, W), "
                           f"got shape {x.shape}")
    return (x.reshape((1,) + x.shape), True) if x.ndim == 3 else (x, False)


def _pool_len(n, k, s, p, d, ceil_mode):
    """(output length, padding after) for pooling, with PyTorch's ceil_mode rule that the last window
    must start inside the input or the leading padding."""
    span = d * (k - 1) + 1
    out = (n + 2 * p - span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:
        out -= 1
    return out, builtins.max(p, (out - 1) * s + span - n - p)


def _pool_geom(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw = _pair(kernel_size, "kernel_size", op)
    sh, sw = (kh, kw) if stride is None or stride == () or stride == [] else _pair(stride, "stride", op)
    ph, pw = _pair(padding, "padding", op, 0)
    dh, dw = _pair(dilation, "dilation", op)
    if ph > kh // 2 or pw > kw // 2:
        raise ValueError(f"{op}: padding should be at most half the kernel size, got padding {(ph, pw)} for kernel "
                         f"{(kh, kw)}")
    h, w = x.shape[2:]
    oh, pb = _pool_len(h, kh, sh, ph, dh, ceil_mode)
    ow, pr = _pool_len(w, kw, sw, pw, dw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: the input of shape {x.shape} is too small for kernel {(kh, kw)} (dilation "
                         f"{(dh, dw)}, padding {(ph, pw)}): the output would be {oh}x{ow}")
    return (kh, kw), (sh, sw, ph, pb, pw, pr, dh, dw, 1), (oh, ow)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 6),), ((1, 2, 5, 5),), ((0, 2, 4, 4),)), ref="refs.max_pool2d_k2",
           op=lambda x: max_pool2d(x, 2), name="max_pool2d"),
    OpTest((((2, 2, 4, 5),),), ref="refs.max_pool2d_overlap", op=lambda x: max_pool2d(x, 3, stride=1, padding=1),
           name="max_pool2d_overlap"),
    OpTest((((1, 2, 5, 7),),), ref="refs.max_pool2d_stride_dilation",
           op=lambda x: max_pool2d(x, (2, 3), (2, 1), dilation=(1, 2)), name="max_pool2d_stride_dilation"),
    OpTest((((1, 2, 6, 6),),), ref="refs.max_pool2d_ceil", op=lambda x: max_pool2d(x, 3, 2, 1, ceil_mode=True),
           name="max_pool2d_ceil"),
    OpTest((((2, 4, 4),),), ref="refs.max_pool2d_unbatched", op=lambda x: max_pool2d(x, 2),
           name="max_pool2d_unbatched")),
    doc="Max over kernel_size windows of (N, C, H, W); return_indices also gives each maximum's index.")
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over kernel_size windows (stride defaults to kernel_size, padding counts as -inf); the gradient
    goes to the first maximum of each window. return_indices also gives each maximum's flat index in H*W."""
    x, unbatched = _pool_input(input, "max_pool2d")
    (kh, kw), geom, (oh, ow) = _pool_geom("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    y = _conv.max_pool2d(x, kh, kw, geom, oh, ow)
    if unbatched:
        y = y.reshape(y.shape[1:])
    if not return_indices:
        return y
    idx = _conv.max_pool_indices(x.device.backend.xp, x.data, kh, kw, geom, oh, ow)
    return y, Tensor._make(idx[0] if unbatched else idx, x.device)


@register(namespace="nn.functional", tests=OpTest(
    (((2, 3, 7),),), ref="refs.max_pool1d_k3_s2_p1", op=lambda x: max_pool1d(x, 3, 2, 1), name="max_pool1d"))
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of the last dim of (N, C, L) or (C, L)."""
    x = _float_tensor(input, "max_pool1d")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"max_pool1d: expected a 3-D input (N, C, L) or a 2-D unbatched one, got shape {x.shape}")
    op = "max_pool1d"
    y = max_pool2d(x.unsqueeze(-2), (1, _single(kernel_size, "kernel_size", op=op)),
                   None if stride is None else (1, _single(stride, "stride", op=op)),
                   (0, _single(padding, "padding", 0, op)), (1, _single(dilation, "dilation", op=op)),
                   ceil_mode, return_indices)
    return (y[0].squeeze(-2), y[1].squeeze(-2)) if return_indices else y.squeeze(-2)


def _avg_divisors(n, k, s, p, out, count_include_pad):
    """PyTorch's divisor per output position along one dim: the window clipped to the padded input
    (count_include_pad) or to the input itself."""
    sizes = []
    for i in range(out):
        lo = i * s - p
        hi = builtins.min(lo + k, n + p)
        sizes.append(hi - lo if count_include_pad else builtins.min(hi, n) - builtins.max(lo, 0))
    return sizes


def _divisor_axis(xp, n, k, s, p, out, count_include_pad):
    """_avg_divisors as a device array: built by the backend's kernels from an arange (no host copy)."""
    lo = xp.arange(out, dtype="int64") * s - p
    hi = xp.minimum(lo + k, n + p)
    return hi - lo if count_include_pad else xp.minimum(hi, n) - xp.maximum(lo, 0)


@functools.lru_cache(maxsize=64)
def _inverse_divisors(device, dtype, rows, cols, count_include_pad):
    """(OH, OW) array of 1 / divisor per window on ``device``, for the geometry rows / cols = (n, k, stride,
    padding, out) of each dim: built on the device and kept per geometry, so a call copies nothing from the
    host (read-only: every user multiplies by it)."""
    xp = device.backend.xp
    div = _divisor_axis(xp, *rows, count_include_pad)[:, None] * _divisor_axis(xp, *cols, count_include_pad)[None, :]
    return (1.0 / div).astype(dtype)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 6),), ((1, 2, 5, 5),), ((0, 2, 4, 4),)), ref="refs.avg_pool2d_k2",
           op=lambda x: avg_pool2d(x, 2), name="avg_pool2d"),
    OpTest((((2, 2, 5, 6),),), ref="refs.avg_pool2d_pad", op=lambda x: avg_pool2d(x, 3, 2, 1), name="avg_pool2d_pad"),
    OpTest((((1, 2, 6, 5),),), ref="refs.avg_pool2d_exclude_pad_ceil",
           op=lambda x: avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
           name="avg_pool2d_exclude_pad_ceil"),
    OpTest((((1, 2, 4, 4),),), ref="refs.avg_pool2d_divisor", op=lambda x: avg_pool2d(x, (2, 3), 1, divisor_override=4),
           name="avg_pool2d_divisor")),
    doc="Mean over kernel_size windows of (N, C, H, W); zero padding counts unless count_include_pad=False.")
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over kernel_size windows (stride defaults to kernel_size); by default zero padding counts
    in the mean (count_include_pad=True), as in PyTorch."""
    x, unbatched = _pool_input(input, "avg_pool2d")
    (kh, kw), geom, (oh, ow) = _pool_geom("avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    sh, sw, ph, _, pw, _, _, _, _ = geom
    h, w = x.shape[2:]
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or not isinstance(divisor_override, int) or divisor_override <= 0:
            raise ValueError(f"avg_pool2d: divisor_override must be a positive int, got {divisor_override!r}")
        scale = 1.0 / divisor_override
    else:
        rows = _avg_divisors(h, kh, sh, ph, oh, count_include_pad)
        cols = _avg_divisors(w, kw, sw, pw, ow, count_include_pad)
        if len(set(rows)) == 1 and len(set(cols)) == 1:
            scale = 1.0 / (rows[0] * cols[0])
        else:
            # kept per geometry eagerly; while ag.compile traces, built afresh so the trace records it (a kept
            # array belongs to the eager backend, not to the arrays the trace runs on)
            build = _inverse_divisors if _tracing() is None else _inverse_divisors.__wrapped__
            scale = Tensor._make(build(x.device, x.dtype, (h, kh, sh, ph, oh), (w, kw, sw, pw, ow),
                                       count_include_pad), x.device)
    y = _conv.avg_pool2d(x, kh, kw, geom, oh, ow, scale)
    return y.reshape(y.shape[1:]) if unbatched else y


@register(namespace="nn.functional", tests=OpTest(
    (((2, 3, 6),),), ref="refs.avg_pool1d_k2", op=lambda x: avg_pool1d(x, 2), name="avg_pool1d"))
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over windows of the last dim of (N, C, L) or (C, L)."""
    x = _float_tensor(input, "avg_pool1d")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"avg_pool1d: expected a 3-D input (N, C, L) or a 2-D unbatched one, got shape {x.shape}")
    return avg_pool2d(x.unsqueeze(-2), (1, _single(kernel_size, "kernel_size", op="avg_pool1d")),
                      None if stride is None else (1, _single(stride, "stride", op="avg_pool1d")),
                      (0, _single(padding, "padding", 0, "avg_pool1d")), ceil_mode, count_include_pad).squeeze(-2)


@register(namespace="nn.functional", tests=OpTest(
    (((2, 2, 5, 7),),), ref="refs.adaptive_avg_pool2d_2x3", op=lambda x: adaptive_avg_pool2d(x, (2, 3)),
    name="adaptive_avg_pool2d"),
    doc="Average pooling to a fixed output size (oh, ow), with PyTorch's adaptive windows.")
def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed (oh, ow) (None keeps that size) with PyTorch's windows
    [floor(i*H/oh), ceil((i+1)*H/oh)); separable, so it is A_h @ x @ A_w.T."""
    x, unbatched = _pool_input(input, "adaptive_avg_pool2d")
    h, w = x.shape[2:]
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh, ow = h if oh is None else oh, w if ow is None else ow
    if oh <= 0 or ow <= 0:
        raise ValueError(f"adaptive_avg_pool2d: expected a positive output size, got {output_size!r}")
    if h % oh == 0 and w % ow == 0:
        y = avg_pool2d(x, (h // oh, w // ow))
    else:
        y = matmul(matmul(_avg_matrix(h, oh, x), x), _avg_matrix(w, ow, x).T)
    return y.reshape(y.shape[1:]) if unbatched else y


def _avg_matrix(n, out, like):
    """(out, n) matrix whose row i averages PyTorch's adaptive window i."""
    xp = like.device.backend.xp
    m = xp.zeros((out, n), dtype=like.dtype)
    for i in range(out):
        lo, hi = (i * n) // out, -(-((i + 1) * n) // out)
        m[i, lo:hi] = 1.0 / (hi - lo)
    return Tensor._make(m, like.device)
