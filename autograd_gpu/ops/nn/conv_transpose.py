"""nn.functional's transposed and 3-D convolutions and the remaining adaptive pools: conv_transpose1d,
conv_transpose2d, conv_transpose3d, conv3d, adaptive_avg_pool1d, adaptive_max_pool2d.

A transposed convolution is the adjoint of a convolution in its input: it runs the convolution's
input-gradient primitive (``Conv2dInputGrad`` of autograd_gpu/ops/conv.py, one product of the weight with
the columns plus the column-to-image adds) forwards, with the convolution's geometry. Its backward is then
the convolution itself (for the input) and the convolution's weight gradient (for the weight), so derivatives
of any order and vmap (the batch folded into N) come from those Functions. conv3d folds the output depth
into the batch and the kernel's depth taps into the channels: one 2-D convolution. conv_transpose3d is its
adjoint: one 2-D transposed convolution over (N * D) images with the depth taps as extra output channels,
then each depth tap's slab added at its (strided, dilated) depth offset.
"""
import builtins

from ...autograd.function import Function
from ...tensor import Tensor
from .. import batching
from .. import conv as _conv
from ..shape import Pad, stack
from ..indexing import index_select
from ..registry import register, OpTest
from ._args import _float_tensor, _same_dtype, _pair
from .._autocast import cast_low
from ...dtypes import float32, bfloat16, int64
from ..elementwise import where
from .conv import _single, _pool_input, conv2d, adaptive_avg_pool2d

_F32 = {float32: {"rtol": 1e-4, "atol": 1e-5}, bfloat16: {"rtol": 0.03, "atol": 0.06}}   # sums of rounded terms


def transposed(x, w, out_hw, stride, padding, dilation, groups):
    """The adjoint of conv2d(., w, stride, padding, dilation, groups) evaluated at x (N, Cin, H, W), for an
    output (N, Cout, *out_hw): the padding after each dim is what makes the convolution of an out_hw input
    exactly (H, W); output rows past the reach of every input pixel are zeros (appended by a pad)."""
    n, _, h, wd = x.shape
    cout = w.shape[1] * groups
    sh, sw = stride
    ph, pw = padding
    dh, dw = dilation
    kh, kw = w.shape[2:]
    full = []
    extra = []
    for length, o, s, p, d, k in ((h, out_hw[0], sh, ph, dh, kh), (wd, out_hw[1], sw, pw, dw, kw)):
        after = (length - 1) * s + d * (k - 1) + 1 - o - p        # the convolution's padding after this dim
        full.append((o + after, 0) if after < 0 else (o, after))
        extra.append(max(-after, 0))
    (oh, pb), (ow, pr) = full
    geom = (sh, sw, ph, pb, pw, pr, dh, dw, groups)
    y = _conv.Conv2dInputGrad.apply(x, w, (n, cout, oh, ow), geom)
    if extra[0] or extra[1]:
        y = Pad.apply(y, ((0, 0), (0, 0), (0, extra[0]), (0, extra[1])), 0.0)
    return y


def _t_operands(op, input, weight, bias, nd, groups):
    x = _float_tensor(input, op)
    w = _float_tensor(weight, op, "weight", like=x)
    b = None if bias is None else _float_tensor(bias, op, "bias", like=x)
    names = {1: "(N, C, L)", 2: "(N, C, H, W)", 3: "(N, C, D, H, W)"}[nd]
    if x.ndim not in (nd + 1, nd + 2):          # PyTorch raises RuntimeError for an input of the wrong rank
        raise RuntimeError(f"{op}: expected a {nd + 2}-D input {names} or a {nd + 1}-D unbatched one, got shape "
                           f"{x.shape}")
    if w.ndim != nd + 2:
        raise ValueError(f"{op}: expected a {nd + 2}-D weight (in_channels, out_channels / groups, "
                         f"{('k', 'kh, kw', 'kd, kh, kw')[nd - 1]}), got shape {w.shape}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: expected groups to be a positive int, got {groups!r}")
    c = x.shape[-nd - 1]
    if w.shape[0] != c or c % groups:
        raise ValueError(f"{op}: expected a weight with in_channels = {c} (the input's channels, divisible by groups="
                         f"{groups}) first, got weight shape {w.shape} for input shape {x.shape}")
    if 0 in w.shape[2:]:
        raise ValueError(f"{op}: expected a kernel of at least 1 per dim, got a weight of shape {w.shape}")
    if b is not None and b.shape != (w.shape[1] * groups,):
        raise ValueError(f"{op}: expected a bias of shape ({w.shape[1] * groups},), got {b.shape}")
    if x.dtype != w.dtype or (b is not None and b.dtype != w.dtype):
        x, w, b = _same_dtype(op, x, w, b)
    return cast_low(x, w, b)


def _t_len(op, n, k, s, p, op_, d):
    if op_ >= s and op_ >= d:
        raise ValueError(f"{op}: output_padding ({op_}) must be smaller than either stride ({s}) or dilation ({d})")
    out = (n - 1) * s - 2 * p + d * (k - 1) + op_ + 1
    if out <= 0:
        raise ValueError(f"{op}: the output would have size {out} (input {n}, kernel {k}, stride {s}, padding {p}, "
                         f"dilation {d}, output_padding {op_})")
    return out


def _refs_conv_t(np, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """NumPy reference: each input pixel scatters w * x into the output, then crop the padding."""
    s, p, op_, d = [(v, v) if isinstance(v, int) else v for v in (stride, padding, output_padding, dilation)]
    n, cin, h, wd = x.shape
    _, cg, kh, kw = w.shape
    oh = (h - 1) * s[0] - 2 * p[0] + d[0] * (kh - 1) + op_[0] + 1
    ow = (wd - 1) * s[1] - 2 * p[1] + d[1] * (kw - 1) + op_[1] + 1
    full = np.zeros((n, cg * groups, oh + 2 * p[0] + kh * d[0], ow + 2 * p[1] + kw * d[1]), dtype=x.dtype)
    ig = cin // groups
    for g in range(groups):
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for c in range(kw):
                        full[:, g * cg:(g + 1) * cg, i * s[0] + a * d[0], j * s[1] + c * d[1]] += \
                            x[:, g * ig:(g + 1) * ig, i, j] @ w[g * ig:(g + 1) * ig, :, a, c]
    y = full[:, :, p[0]:p[0] + oh, p[1]:p[1] + ow]
    return y if b is None else y + b.reshape(1, -1, 1, 1)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 5), (3, 2, 3, 3), (2,)), ((0, 3, 2, 2), (3, 1, 2, 2), (1,))),
           ref=lambda np, x, w, b: _refs_conv_t(np, x, w, b), name="conv_transpose2d", tol=_F32),
    OpTest((((1, 2, 3, 4), (2, 3, 3, 2), (3,)),),
           ref=lambda np, x, w, b: _refs_conv_t(np, x, w, b, 2, 1, (1, 0)),
           op=lambda x, w, b: conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=(1, 0)),
           name="conv_transpose2d_stride_outpad", tol=_F32),
    OpTest((((1, 4, 3, 3), (4, 1, 2, 3)),),
           ref=lambda np, x, w: _refs_conv_t(np, x, w, None, (1, 2), 0, 0, 2, (2, 1)),
           op=lambda x, w: conv_transpose2d(x, w, stride=(1, 2), groups=2, dilation=(2, 1)),
           name="conv_transpose2d_groups_dilation", tol=_F32),
    OpTest((((3, 2, 2), (3, 2, 2, 2)),), ref=lambda np, x, w: _refs_conv_t(np, x[None], w, None, 2)[0],
           op=lambda x, w: conv_transpose2d(x, w, stride=2), name="conv_transpose2d_unbatched", tol=_F32)),
    doc="Transposed 2-D convolution (the adjoint of conv2d) of (N, Cin, H, W) with a (Cin, Cout / groups, kh, kw) "
        "weight.")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch's conv_transpose2d: input (N, Cin, H, W) or (Cin, H, W), weight (Cin, Cout / groups, kh, kw);
    output size (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1."""
    op = "conv_transpose2d"
    x, w, b = _t_operands(op, input, weight, bias, 2, groups)
    unbatched = x.ndim == 3
    if unbatched:
        x = x.unsqueeze(0)
    s, p, o, d = (_pair(stride, "stride", op), _pair(padding, "padding", op, 0),
                  _pair(output_padding, "output_padding", op, 0), _pair(dilation, "dilation", op))
    out = tuple(_t_len(op, x.shape[2 + i], w.shape[2 + i], s[i], p[i], o[i], d[i]) for i in range(2))
    y = transposed(x, w, out, s, p, d, groups)
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1)
    return y[0] if unbatched else y


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 5), (3, 2, 3), (2,)),), ref=lambda np, x, w, b: _refs_conv_t(np, x[:, :, None], w[:, :, None], b,
                                                                                   (1, 2), 0, (0, 1))[:, :, 0],
           op=lambda x, w, b: conv_transpose1d(x, w, b, stride=2, output_padding=1), name="conv_transpose1d",
           tol=_F32),),
    doc="Transposed 1-D convolution of (N, Cin, L) with a (Cin, Cout / groups, k) weight.")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch's conv_transpose1d: input (N, Cin, L) or (Cin, L), weight (Cin, Cout / groups, k); a 2-D
    transposed convolution over a unit height."""
    op = "conv_transpose1d"
    x, w, b = _t_operands(op, input, weight, bias, 1, groups)
    y = conv_transpose2d(x.unsqueeze(-2), w.unsqueeze(-2), b, (1, _single(stride, "stride", op=op)),
                         (0, _single(padding, "padding", 0, op)), (0, _single(output_padding, "output_padding", 0, op)),
                         groups, (1, _single(dilation, "dilation", op=op)))
    return y.squeeze(-2)


def _triple(v, name, op, minimum=1):
    if isinstance(v, (tuple, list)) and len(v) == 1:
        v = v[0]
    t = (v,) * 3 if isinstance(v, int) and not isinstance(v, bool) else tuple(v) if isinstance(v, (tuple, list)) \
        else None
    if t is None or len(t) != 3 or any(isinstance(a, bool) or not isinstance(a, int) for a in t):
        raise TypeError(f"{op}: expected {name} as an int or 3 ints, got {v!r}")
    if min(t) < minimum:
        raise ValueError(f"{op}: expected {name} of at least {minimum}, got {v!r}")
    return t


def _refs_conv3d(np, x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    s, p, d = [(v,) * 3 if isinstance(v, int) else v for v in (stride, padding, dilation)]
    x = np.pad(x, ((0, 0), (0, 0)) + tuple((q, q) for q in p))
    n, c, dd, h, wd = x.shape
    o, cg, kd, kh, kw = w.shape
    od, oh, ow = [(size - dl * (k - 1) - 1) // st + 1 for size, k, st, dl in zip((dd, h, wd), (kd, kh, kw), s, d)]
    out = np.zeros((n, o, od, oh, ow), dtype=x.dtype)
    og = o // groups
    for g in range(groups):
        for a in range(kd):
            for i in range(kh):
                for j in range(kw):
                    patch = x[:, g * cg:(g + 1) * cg, a * d[0]:a * d[0] + s[0] * (od - 1) + 1:s[0],
                              i * d[1]:i * d[1] + s[1] * (oh - 1) + 1:s[1], j * d[2]:j * d[2] + s[2] * (ow - 1) + 1:s[2]]
                    out[:, g * og:(g + 1) * og] += np.einsum("ncdhw,oc->nodhw", patch, w[g * og:(g + 1) * og, :, a, i, j])
    return out if b is None else out + b.reshape(1, -1, 1, 1, 1)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 2, 4, 4, 3), (3, 2, 2, 3, 2), (3,)),), ref=lambda np, x, w, b: _refs_conv3d(np, x, w, b),
           name="conv3d", tol=_F32),
    OpTest((((1, 4, 5, 4, 4), (2, 2, 3, 2, 2)),), ref=lambda np, x, w: _refs_conv3d(np, x, w, None, (2, 1, 2), 1,
                                                                                   (1, 2, 1), 2),
           op=lambda x, w: conv3d(x, w, stride=(2, 1, 2), padding=1, dilation=(1, 2, 1), groups=2),
           name="conv3d_stride_groups", tol=_F32)),
    doc="3-D cross-correlation of (N, C, D, H, W) with a (out_channels, C / groups, kd, kh, kw) weight.")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """PyTorch's conv3d: input (N, C, D, H, W) or unbatched (C, D, H, W); padding an int, 3 ints, 'valid'
    or 'same'. The kd depth taps of each output depth become channels of one 2-D convolution over
    (N * OD) images."""
    op = "conv3d"
    x = _float_tensor(input, op)
    w = _float_tensor(weight, op, "weight", like=x)
    b = None if bias is None else _float_tensor(bias, op, "bias", like=x)
    if x.ndim not in (4, 5) or w.ndim != 5:
        raise ValueError(f"{op}: expected a 5-D input (N, C, D, H, W) (or 4-D unbatched) and a 5-D weight, got "
                         f"shapes {x.shape} and {w.shape}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: expected groups to be a positive int, got {groups!r}")
    unbatched = x.ndim == 4
    if unbatched:
        x = x.unsqueeze(0)
    if x.shape[1] != w.shape[1] * groups:
        raise ValueError(f"{op}: expected input with {w.shape[1] * groups} channels (weight of shape {w.shape} with "
                         f"groups={groups}), got {x.shape[1]} channels (input shape {x.shape})")
    if x.dtype != w.dtype or (b is not None and b.dtype != w.dtype):
        x, w, b = _same_dtype(op, x, w, b)
    s = _triple(stride, "stride", op)
    d = _triple(dilation, "dilation", op)
    kd = w.shape[2]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ValueError(f"{op}: padding must be an int, 3 ints, 'valid' or 'same', got {padding!r}")
        if padding == "same" and s != (1, 1, 1):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride {stride})")
        t = d[0] * (kd - 1) if padding == "same" else 0
        dpad, hw_pad = (t // 2, t - t // 2), padding
    else:
        p = _triple(padding, "padding", op, 0)
        dpad, hw_pad = (p[0], p[0]), p[1:]
    n, c, depth = x.shape[:3]
    if dpad != (0, 0):
        x = Pad.apply(x, ((0, 0), (0, 0), dpad, (0, 0), (0, 0)), 0.0)
    od = (depth + dpad[0] + dpad[1] - d[0] * (kd - 1) - 1) // s[0] + 1
    if od <= 0:
        raise ValueError(f"{op}: the padded input depth ({depth + sum(dpad)}) is smaller than the dilated kernel "
                         f"({d[0] * (kd - 1) + 1})")
    taps = stack([x[:, :, i * d[0]:i * d[0] + s[0] * (od - 1) + 1:s[0]] for i in range(kd)], dim=2)
    h, wd = x.shape[3:]
    cols = taps.permute(0, 3, 1, 2, 4, 5).reshape(n * od, c * kd, h, wd)      # channel c * kd + tap
    w2 = w.reshape(w.shape[0], w.shape[1] * kd, w.shape[3], w.shape[4])
    y = conv2d(cols, w2, b, s[1:], hw_pad, d[1:], groups)
    y = y.reshape((n, od) + y.shape[1:]).permute(0, 2, 1, 3, 4)
    return y[0] if unbatched else y


def _refs_conv_t3d(np, x, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """NumPy reference: each input voxel scatters x * w into the output, then crop the padding."""
    s, p, op_, d = [(v,) * 3 if isinstance(v, int) else v for v in (stride, padding, output_padding, dilation)]
    n, cin = x.shape[:2]
    size = x.shape[2:]
    cg, k = w.shape[1], w.shape[2:]
    out = [(size[i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + op_[i] + 1 for i in range(3)]
    full = np.zeros((n, cg * groups) + tuple(out[i] + 2 * p[i] + k[i] * d[i] + s[i] for i in range(3)),
                    dtype=x.dtype)
    ig = cin // groups
    for g in range(groups):
        for a in range(k[0]):
            for i in range(k[1]):
                for j in range(k[2]):
                    contrib = np.einsum("ncdhw,co->nodhw", x[:, g * ig:(g + 1) * ig],
                                        w[g * ig:(g + 1) * ig, :, a, i, j])
                    full[:, g * cg:(g + 1) * cg, a * d[0]:a * d[0] + s[0] * (size[0] - 1) + 1:s[0],
                         i * d[1]:i * d[1] + s[1] * (size[1] - 1) + 1:s[1],
                         j * d[2]:j * d[2] + s[2] * (size[2] - 1) + 1:s[2]] += contrib
    y = full[:, :, p[0]:p[0] + out[0], p[1]:p[1] + out[1], p[2]:p[2] + out[2]]
    return y if b is None else y + b.reshape(1, -1, 1, 1, 1)


def _depth_total(kd, depth, s, p, d, od):
    """Length of the uncropped output depth: the last tap's reach, or p + od where output_padding adds
    zero planes past it."""
    return builtins.max(d * (kd - 1) + s * (depth - 1) + 1, p + od)


class DepthTapsAdd(Function):
    """y (N, C, kd, D, OH, OW) -> (N, C, od, OH, OW): depth tap a of input depth i added at output depth
    i * s + a * d - p (the planes outside [0, od) dropped). One strided add per tap (a loop over the kd
    taps, never the batch); linear in y, its backward is DepthTapsGather."""
    batch_rule = batching.fold_batch

    @staticmethod
    def forward(ctx, y, s, p, d, od):
        xp, a = ctx.xp, y.data
        n, c, kd, depth = a.shape[:4]
        ctx.geom = (s, p, d, kd, depth, od)
        out = xp.zeros((n, c, _depth_total(kd, depth, s, p, d, od)) + a.shape[4:], dtype=a.dtype)
        for t in range(kd):
            dst = out[:, :, t * d:t * d + s * (depth - 1) + 1:s]
            dst += a[:, :, t]          # through the view: ``out[...] += `` would also write the view back
        return ctx.wrap(xp.ascontiguousarray(out[:, :, p:p + od]))

    @staticmethod
    def backward(ctx, grad):
        return DepthTapsGather.apply(grad, *ctx.geom), None, None, None, None


class DepthTapsGather(Function):
    """g (N, C, od, OH, OW) -> (N, C, kd, D, OH, OW): each tap's view of the output depths, the adjoint of
    DepthTapsAdd (zeros where a tap lands in the cropped padding)."""
    batch_rule = batching.fold_batch

    @staticmethod
    def forward(ctx, g, s, p, d, kd, depth, od):
        xp, a = ctx.xp, g.data
        n, c = a.shape[:2]
        ctx.geom = (s, p, d, od)
        full = xp.zeros((n, c, _depth_total(kd, depth, s, p, d, od)) + a.shape[3:], dtype=a.dtype)
        full[:, :, p:p + od] = a
        out = xp.empty((n, c, kd, depth) + a.shape[3:], dtype=a.dtype)
        for t in range(kd):
            out[:, :, t] = full[:, :, t * d:t * d + s * (depth - 1) + 1:s]
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, gg):
        return (DepthTapsAdd.apply(gg, *ctx.geom),) + (None,) * 6


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 3, 4, 3), (3, 2, 2, 3, 2), (2,)), ((0, 2, 2, 2, 2), (2, 1, 2, 2, 2), (1,))),
           ref=lambda np, x, w, b: _refs_conv_t3d(np, x, w, b), name="conv_transpose3d", tol=_F32),
    OpTest((((1, 2, 3, 2, 3), (2, 3, 3, 2, 2), (3,)),),
           ref=lambda np, x, w, b: _refs_conv_t3d(np, x, w, b, 2, (1, 0, 1), (1, 0, 1)),
           op=lambda x, w, b: conv_transpose3d(x, w, b, stride=2, padding=(1, 0, 1), output_padding=(1, 0, 1)),
           name="conv_transpose3d_stride_outpad", tol=_F32),
    OpTest((((1, 4, 3, 2, 3), (4, 1, 2, 2, 3)),),
           ref=lambda np, x, w: _refs_conv_t3d(np, x, w, None, (2, 1, 2), (1, 0, 0), (1, 0, 0), 2, (2, 1, 1)),
           op=lambda x, w: conv_transpose3d(x, w, stride=(2, 1, 2), padding=(1, 0, 0), output_padding=(1, 0, 0),
                                            groups=2, dilation=(2, 1, 1)),
           name="conv_transpose3d_groups_dilation", tol=_F32),
    OpTest((((2, 2, 3, 2), (2, 2, 2, 2, 2)),), ref=lambda np, x, w: _refs_conv_t3d(np, x[None], w, None, 2)[0],
           op=lambda x, w: conv_transpose3d(x, w, stride=2), name="conv_transpose3d_unbatched", tol=_F32)),
    doc="Transposed 3-D convolution (the adjoint of conv3d) of (N, Cin, D, H, W) with a (Cin, Cout / groups, kd, kh, "
        "kw) weight.")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """PyTorch's conv_transpose3d: input (N, Cin, D, H, W) or (Cin, D, H, W), weight (Cin, Cout / groups, kd, kh,
    kw); each output size (n - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1."""
    op = "conv_transpose3d"
    x, w, b = _t_operands(op, input, weight, bias, 3, groups)
    unbatched = x.ndim == 4
    if unbatched:
        x = x.unsqueeze(0)
    s, p, o, d = (_triple(stride, "stride", op), _triple(padding, "padding", op, 0),
                  _triple(output_padding, "output_padding", op, 0), _triple(dilation, "dilation", op))
    out = tuple(_t_len(op, x.shape[2 + i], w.shape[2 + i], s[i], p[i], o[i], d[i]) for i in range(3))
    n, cin, depth, h, wd = x.shape
    cin_, cg, kd, kh, kw = w.shape
    # the depth taps ride as output channels (cout / groups * kd per group): one 2-D transposed convolution
    x2 = x.permute(0, 2, 1, 3, 4).reshape(n * depth, cin, h, wd)
    y = transposed(x2, w.reshape(cin_, cg * kd, kh, kw), out[1:], s[1:], p[1:], d[1:], groups)
    y = y.reshape((n, depth, cg * groups, kd) + out[1:]).permute(0, 2, 3, 1, 4, 5)
    y = DepthTapsAdd.apply(y, s[0], p[0], d[0], out[0])
    if b is not None:
        y = y + b.reshape(1, -1, 1, 1, 1)
    return y[0] if unbatched else y


# --------------------------------------------------------------------------- adaptive pools
@register(namespace="nn.functional", tests=OpTest(
    (((2, 3, 7),), ((3, 8),)), op=lambda x: adaptive_avg_pool1d(x, 3),
    ref=lambda np, a: np.stack([a[..., (i * a.shape[-1]) // 3:-(-((i + 1) * a.shape[-1]) // 3)].mean(-1)
                                for i in range(3)], -1)),
    doc="Average pooling of (N, C, L) to a fixed output length, with PyTorch's adaptive windows.")
def adaptive_avg_pool1d(input, output_size):
    """Average pooling of (N, C, L) or (C, L) to length output_size, windows [floor(i*L/o), ceil((i+1)*L/o))."""
    op = "adaptive_avg_pool1d"
    x = _float_tensor(input, op)
    if x.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 3-D input (N, C, L) or a 2-D unbatched one, got shape {x.shape}")
    o = _single(output_size, "output_size", op=op)
    return adaptive_avg_pool2d(x.unsqueeze(-2), (1, o)).squeeze(-2)


def _adaptive_index(xp, n, out):
    """(out, kmax) source indices of PyTorch's adaptive windows, short windows padded with their last index
    (a repeat changes no maximum), and kmax."""
    i = xp.arange(out)
    lo = (i * n) // out
    hi = -((-(i + 1) * n) // out)
    kmax = max(-(-((j + 1) * n) // out) - (j * n) // out for j in range(out))
    idx = lo[:, None] + xp.arange(kmax)[None, :]
    return xp.minimum(idx, hi[:, None] - 1), kmax


def _adaptive_max_ref(np, a, oh, ow):
    n, c, h, w = a.shape
    out = np.zeros((n, c, oh, ow), dtype=a.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = a[:, :, (i * h) // oh:-(-((i + 1) * h) // oh), (j * w) // ow:-(-((j + 1) * w) // ow)].max((2, 3))
    return out


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 5, 7),), ((1, 2, 4, 4),)), op=lambda x: adaptive_max_pool2d(x, (2, 3)),
           ref=lambda np, a: _adaptive_max_ref(np, a, 2, 3), name="adaptive_max_pool2d"),
    OpTest((((2, 5, 4),),), op=lambda x: adaptive_max_pool2d(x, 3),
           ref=lambda np, a: _adaptive_max_ref(np, a[None], 3, 3)[0], name="adaptive_max_pool2d_unbatched")),
    doc="Max pooling to a fixed output size (oh, ow) with PyTorch's adaptive windows; return_indices as max_pool2d.")
def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling of (N, C, H, W) or (C, H, W) to (oh, ow) (None keeps that size) over PyTorch's adaptive
    windows; the gradient goes to each window's first maximum. return_indices also gives each maximum's
    flat index into H * W."""
    op = "adaptive_max_pool2d"
    x, unbatched = _pool_input(input, op)
    n, c, h, w = x.shape
    oh, ow = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
    oh, ow = h if oh is None else oh, w if ow is None else ow
    if isinstance(oh, bool) or isinstance(ow, bool) or oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: expected a positive output size, got {output_size!r}")
    if h == 0 or w == 0:
        raise ValueError(f"{op}: expected non-empty spatial dims, got input shape {x.shape}")
    xp = x.device.backend.xp
    ri, kh = _adaptive_index(xp, h, oh)
    ci, kw = _adaptive_index(xp, w, ow)
    # flat index of every window tap: (oh, ow, kh * kw), one gather over H * W for the whole batch
    flat = (ri[:, None, :, None] * w + ci[None, :, None, :]).reshape(oh * ow * kh * kw)
    win = index_select(x.reshape(n, c, h * w), 2, Tensor._make(flat, x.device)).reshape(n, c, oh, ow, kh * kw)
    # each window's first maximum (NaN counts as the maximum, as PyTorch), in Tensor ops so vmap batches it
    wd_ = win.detach()
    hit = ((wd_ == wd_.amax(dim=-1, keepdim=True)).to(dtype=int64) + (wd_ != wd_).to(dtype=int64)) > 0
    pos = Tensor._make(xp.arange(kh * kw), x.device)
    past = Tensor._make(xp.full((), kh * kw, dtype=pos.data.dtype), x.device)     # a fill, not a host copy
    first = where(hit, pos, past).amin(dim=-1, keepdim=True)
    pick = first == pos                                      # one-hot over each window's taps
    y = where(pick, win, Tensor._make(xp.zeros((), dtype=win.data.dtype), x.device)).sum(dim=-1)
    if unbatched:
        y = y[0]
    if not return_indices:
        return y
    taps = Tensor._make(flat.reshape(oh, ow, kh * kw), x.device)
    idx = where(pick, taps, Tensor._make(xp.zeros((), dtype=flat.dtype), x.device)).sum(dim=-1)
    return y, (idx[0] if unbatched else idx)
