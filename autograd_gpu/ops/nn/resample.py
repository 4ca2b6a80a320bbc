"""nn.functional's resampling and rearranging ops: pad (constant, reflect, replicate, circular), interpolate
(nearest, nearest-exact, linear, bilinear, bicubic, trilinear, area, lanczos; antialias), pixel_shuffle / pixel_unshuffle, unfold / fold, grid_sample
and affine_grid.

Each is composed from recorded ops whose Functions hold the math and the vmap rules (index_select, Resample,
gather, the convolution primitives), so gradients of any order and vmap come with them:

- the non-constant pads are one index_select per padded dim (reflected, clamped or wrapped indices);
- interpolate's linear, cubic, area and antialias modes are separable: per spatial dim its taps (an (out, k)
  index and weight table: interpolation taps, adaptive-average windows or the normalised antialias filter),
  applied by Resample (a gather and weighted sum; on the CPU, for a finite operand of a small dim, the equal
  dense matrix product) whose gradient is ResampleAdjoint, the transposed taps: a NaN or inf stays in the
  outputs whose taps read it, as PyTorch's; the nearest modes are one index_select per dim;
- unfold is a grouped convolution with one-hot kernels (one output channel per channel and kernel tap, in
  PyTorch's (C, kh, kw) order) and fold, its adjoint, the transposed convolution with the same kernels;
- grid_sample (4-D and 5-D) gathers the corner values of each sample point from the flattened input (one
  gather per corner, 4 bilinear, 8 trilinear, 16 bicubic, for the whole batch) and weights them with
  recorded ops of the grid (gradient to the grid too).
"""
import functools
import math
import struct
from numbers import Integral, Real

from ...tensor import Tensor
from ...dtypes import float32, bfloat16, int64
from ..shape import Pad
from ..indexing import index_select
from ..batching import _union, _expand, _bsizes, _wrap
from ...autograd.function import Function
from ..linalg import matmul
from ..elementwise import where, round as round_
from ..registry import register, OpTest, OpTestOptions
from ._args import _float_tensor, _pair
from .._util import as_tensor
from . import conv_transpose as _ct
from .conv import conv2d

_F32 = {float32: {"rtol": 1e-4, "atol": 1e-5}, bfloat16: {"rtol": 0.03, "atol": 0.06}}   # sums of rounded terms


def _const(a, like):
    return Tensor._make(a, like.device)


# --------------------------------------------------------------------------- pad
def _pad_index(xp, n, lo, hi, mode, op):
    """The source index of each position of a dim of size n padded by (lo, hi) (non-negative)."""
    j = xp.arange(-lo, n + hi)
    if mode == "reflect":
        if lo >= n or hi >= n:
            raise ValueError(f"{op}: reflect padding must be smaller than the padded dim, got padding {(lo, hi)} "
                             f"for a dim of size {n}")
        j = xp.abs(j)
        return (n - 1) - xp.abs((n - 1) - j)
    if mode == "replicate":
        if n == 0:
            raise ValueError(f"{op}: replicate padding needs a non-empty dim, got size 0")
        return xp.clip(j, 0, n - 1)
    if lo > n or hi > n:
        raise ValueError(f"{op}: circular padding must be at most the padded dim's size, got padding {(lo, hi)} "
                         f"for a dim of size {n}")
    return j % n


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4),), ((3, 0),)), ref=lambda np, a: np.pad(a, [(0, 0)] * (a.ndim - 1) + [(1, 2)]),
           op=lambda x: pad(x, (1, 2)), name="pad_constant"),
    OpTest((((2, 3, 4),),), ref=lambda np, a: np.pad(a, ((0, 0), (1, 0), (0, 0)), constant_values=0.5)[:, :, 1:],
           op=lambda x: pad(x, (-1, 0, 1, 0), value=0.5), name="pad_constant_negative"),
    OpTest((((2, 3, 4, 5),),), ref=lambda np, a: np.pad(a, ((0, 0), (0, 0), (3, 1), (2, 1)), mode="reflect"),
           op=lambda x: pad(x, (2, 1, 3, 1), mode="reflect"), name="pad_reflect"),
    OpTest((((2, 3, 4, 5),),), ref=lambda np, a: np.pad(a, ((0, 0), (0, 0), (0, 2), (3, 1)), mode="edge"),
           op=lambda x: pad(x, (3, 1, 0, 2), mode="replicate"), name="pad_replicate"),
    OpTest((((2, 3, 4),),), ref=lambda np, a: np.pad(a, ((0, 0), (0, 0), (2, 4)), mode="wrap"),
           op=lambda x: pad(x, (2, 4), mode="circular"), name="pad_circular")),
    doc="Pad the last dims by (left, right, top, bottom, ...); constant, reflect, replicate or circular.")
def pad(input, pad, mode="constant", value=None):
    """PyTorch's F.pad: ``pad`` holds (before, after) pairs starting from the last dim; constant padding
    may be negative (cropping); reflect, replicate and circular pad the last len(pad) // 2 dims of an
    input with at least one more (batch or channel) dim."""
    x = as_tensor(input, "pad")
    if not isinstance(pad, (tuple, list)) or len(pad) % 2 or any(isinstance(p, bool) or not isinstance(p, int)
                                                                  for p in pad):
        raise TypeError(f"pad: expected pad as a sequence of an even number of ints, got {pad!r}")
    k = len(pad) // 2
    if k > x.ndim:
        raise ValueError(f"pad: padding of length {len(pad)} pads {k} dims, but the input has {x.ndim} "
                         f"(shape {x.shape})")
    widths = [(0, 0)] * (x.ndim - k) + [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k))]
    if mode == "constant":
        pos = tuple((max(a, 0), max(b, 0)) for a, b in widths)
        y = x if all(p == (0, 0) for p in pos) else Pad.apply(x, pos, 0.0 if value is None else value)
        if any(a < 0 or b < 0 for a, b in widths):
            idx = tuple(slice(-a if a < 0 else 0, (n + max(a, 0)) + b if b < 0 else None)
                        for (a, b), n in zip(widths, x.shape))
            y = y[idx]
        return y
    if mode not in ("reflect", "replicate", "circular"):
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if value is not None and value != 0:
        raise ValueError(f"pad: padding mode {mode!r} does not take a value (got value={value!r})")
    if k >= x.ndim or k > 3:
        raise NotImplementedError(f"pad: {mode} padding pads the last 1, 2 or 3 dims of an input with at least "
                                  f"one more dim, got padding of length {len(pad)} for shape {x.shape}")
    if any(a < 0 or b < 0 for a, b in widths):
        raise ValueError(f"pad: {mode} padding must be non-negative, got {tuple(pad)}")
    xp = x.device.backend.xp
    y = x
    for d in range(x.ndim - k, x.ndim):
        lo, hi = widths[d]
        if lo or hi:
            y = index_select(y, d, _const(_pad_index(xp, x.shape[d], lo, hi, mode, "pad"), x))
    return y


# --------------------------------------------------------------------------- interpolate
# mode -> the number of spatial dims it takes (None: 1 to 3)
_MODES = {"nearest": None, "nearest-exact": None, "area": None, "linear": 1, "bilinear": 2, "bicubic": 2,
          "trilinear": 3, "lanczos": 2}
_AA_TAPS = {"bilinear": 2, "bicubic": 4, "lanczos": 6}          # the filter's width at scale 1 (interp_size)


def _out_sizes(op, x, size, scale_factor, nd):
    spatial = x.shape[2:]
    if size is not None and scale_factor is not None:
        raise ValueError(f"{op}: expected exactly one of size and scale_factor, got size={size!r} and "
                         f"scale_factor={scale_factor!r}")
    if 0 in spatial:        # nothing to resample from (PyTorch refuses too); an empty batch or C is fine
        raise ValueError(f"{op}: expected input spatial sizes > 0, got input shape {x.shape}")
    if size is not None:
        # NumPy's integers count (numbers.Integral), bools do not
        sizes = (size,) * nd if isinstance(size, Integral) else tuple(size)
        if len(sizes) != nd or any(isinstance(s, bool) or not isinstance(s, Integral) or s <= 0 for s in sizes):
            raise ValueError(f"{op}: expected size as a positive int or {nd} of them for an input of shape "
                             f"{x.shape}, got {size!r}")
        return tuple(int(s) for s in sizes), (None,) * nd
    if scale_factor is None:
        raise ValueError(f"{op}: expected exactly one of size and scale_factor, got neither")
    sf = (scale_factor,) * nd if isinstance(scale_factor, Real) else tuple(scale_factor)
    if len(sf) != nd or any(isinstance(s, bool) or not isinstance(s, Real) or s <= 0 for s in sf):
        raise ValueError(f"{op}: expected scale_factor as a positive number or {nd} of them for an input of "
                         f"shape {x.shape}, got {scale_factor!r}")
    sizes = tuple(int(n * float(s)) for n, s in zip(spatial, sf))     # floor, as PyTorch
    if any(s <= 0 for s in sizes):
        raise ValueError(f"{op}: scale_factor {scale_factor!r} gives an empty output for input shape {x.shape}")
    return sizes, tuple(float(s) for s in sf)


def _nearest_scale(xp, n, out, sf):
    """PyTorch's compute_scales_value in float32: 1 / scale_factor when given, else n / out."""
    return xp.float32(1.0 / sf) if sf is not None else xp.float32(n) / xp.float32(out)


def _nearest_index(xp, n, out, sf):
    """PyTorch's nearest source index: floor(dst * scale) in float32, clamped to n - 1 (out == n and
    out == 2 n from a size, exactly; a given scale factor is used even where the size does not change)."""
    if out == n and sf is None:
        return xp.arange(n)
    if out == 2 * n and sf is None:
        return xp.arange(out) // 2
    scale = _nearest_scale(xp, n, out, sf)
    return xp.minimum(xp.floor(xp.arange(out, dtype=xp.float32) * scale).astype(xp.int64), n - 1)


def _nearest_exact_index(xp, n, out, sf):
    """PyTorch's nearest-exact source index: floor((dst + 0.5) * scale), the product in float64 rounded to
    float32 (floorf of a double), clamped to n - 1."""
    scale = float(_nearest_scale(xp, n, out, sf))
    src = ((xp.arange(out, dtype=xp.float64) + 0.5) * scale).astype(xp.float32)
    return xp.minimum(xp.floor(src).astype(xp.int64), n - 1)


def _f32(v):
    """The Python float v rounded to float32 (PyTorch computes the nearest indices in float32)."""
    return struct.unpack("f", struct.pack("f", v))[0]


@functools.lru_cache(maxsize=512)
def _nearest_repeat(mode, n, out, sf):
    """k when the nearest (or nearest-exact) index for n -> out is each input k = out / n times in a row (k = 1:
    the identity), else None: the index functions above, replayed in Python on the host (float32 rounding can
    break an integer factor; no device read), once per size."""
    if out % n:
        return None
    k = out // n
    # float32's n / out: the float64 quotient rounded to float32 is the same (double rounding of one quotient is
    # exact for float64 -> float32)
    scale = _f32(1.0 / sf) if sf is not None else _f32(n / out)
    for i in range(out):
        src = _f32(i * scale) if mode == "nearest" else _f32((i + 0.5) * scale)
        if min(math.floor(src), n - 1) != i // k:
            return None
    return k


def _repeat_along(x, d, k):
    """Each entry of x along dim d k times in a row: a broadcast copy whose backward is a sum (index_select's
    would be a scatter-add, NumPy's slow ufunc.at on the CPU)."""
    shape = tuple(x.shape)
    wide = x.unsqueeze(d + 1).expand(*shape[:d + 1], k, *shape[d + 1:])
    return wide.reshape(shape[:d] + (shape[d] * k,) + shape[d + 1:])


def _source(xp, n, out, sf, align_corners, cubic, dtype):
    """PyTorch's area_pixel_compute_source_index over dst = 0..out-1, in ``dtype``."""
    d = xp.arange(out, dtype=dtype)
    if align_corners:
        return d * dtype((n - 1) / (out - 1) if out > 1 else 0.0)
    scale = dtype(n / out if sf is None else 1.0 / sf)
    src = (d + dtype(0.5)) * scale - dtype(0.5)
    return src if cubic else xp.maximum(src, dtype(0))


def _keys_near(u, a):
    """Keys' cubic-convolution kernel at 0 <= u <= 1 (arrays or recorded Tensor ops)."""
    return ((a + 2) * u - (a + 3)) * u * u + 1


def _keys_far(u, a):
    """Keys' cubic-convolution kernel at 1 < u < 2."""
    return ((a * u - 5 * a) * u + 8 * a) * u - 4 * a


def _cubic_weights(t, a=-0.75):
    """The four weights of the taps at -1, 0, 1, 2 for the fraction t (a = -0.75: PyTorch's bicubic). Arrays
    keep their dtype (a is a Python float); on Tensors the ops are recorded, so grid_sample's gradient reaches
    the grid through them."""
    return _keys_far(t + 1, a), _keys_near(t, a), _keys_near(1 - t, a), _keys_far(2 - t, a)


def _stack_cols(xp, cols):
    return xp.stack(cols, axis=1)


def _interp_taps(xp, n, out, sf, mode, align_corners, dtype):
    """The taps of the linear or cubic interpolation along one dim: (out, 2) or (out, 4) input indices and
    their weights (clamped taps at the edges read the edge input, as PyTorch's)."""
    cubic = mode == "bicubic"
    src = _source(xp, n, out, sf, align_corners, cubic, dtype)
    i0 = xp.floor(src).astype(xp.int64)
    t = src - i0.astype(dtype)
    if cubic:
        return (_stack_cols(xp, [xp.clip(i0 + k, 0, n - 1) for k in (-1, 0, 1, 2)]),
                _stack_cols(xp, list(_cubic_weights(t))), False)
    i0 = xp.minimum(i0, n - 1)
    return _stack_cols(xp, [i0, xp.minimum(i0 + 1, n - 1)]), _stack_cols(xp, [1 - t, t]), False


def _aa_filter(xp, mode, u, dtype):
    """PyTorch's antialias filters of |u|: the triangle, Keys' cubic with a = -0.5 (PIL's, not the -0.75 of
    plain bicubic) and Lanczos-3."""
    u = xp.abs(u)
    if mode == "bilinear":
        return xp.maximum(1 - u, dtype(0))
    if mode == "bicubic":
        return xp.where(u < 1, _keys_near(u, -0.5), xp.where(u < 2, _keys_far(u, -0.5), dtype(0)))
    return xp.where(u < 3, xp.sinc(u) * xp.sinc(u / dtype(3)), dtype(0))


def _aa_taps(xp, n, out, sf, mode, align_corners, dtype):
    """The taps of PyTorch's separable antialias resampling (_upsample_*2d_aa): output i is centred at
    scale * (i + 0.5) in input pixel units; when downsampling (scale > 1) the filter is stretched by the scale
    (support interp_size / 2 * scale, argument divided by the scale); the taps inside [center - support,
    center + support) (bounds truncated as PyTorch's int cast, clipped to the input) are normalised to sum 1.
    Rows have a fixed number of taps (a bound on the window); the unused ones have index n (no input)."""
    if align_corners:
        scale = (n - 1) / (out - 1) if out > 1 else 0.0
    else:
        scale = n / out if sf is None else 1.0 / sf
    support = _AA_TAPS[mode] * 0.5 * (scale if scale >= 1.0 else 1.0)
    inv = 1.0 / scale if scale >= 1.0 else 1.0
    k = min(int(math.ceil(2 * support)) + 2, n)                    # hi - lo <= 2 support + 1
    center = dtype(scale) * (xp.arange(out, dtype=dtype).reshape(out, 1) + dtype(0.5))
    lo = xp.maximum(xp.trunc(center - dtype(support) + dtype(0.5)), dtype(0))
    hi = xp.minimum(xp.trunc(center + dtype(support) + dtype(0.5)), dtype(n))
    j = lo + xp.arange(k, dtype=dtype).reshape(1, k)
    valid = j < hi
    w = xp.where(valid, _aa_filter(xp, mode, (j - center + dtype(0.5)) * dtype(inv), dtype), dtype(0))
    total = w.sum(axis=1, keepdims=True)
    w = w / xp.where(total == 0, dtype(1), total)
    return xp.where(valid, j.astype(xp.int64), n), w.astype(dtype), True


def _area_taps(xp, n, out, dtype):
    """The taps of adaptive average pooling along one dim: output i averages the inputs
    floor(i n / out) .. ceil((i + 1) n / out) - 1 (rows padded with index n, no input)."""
    i = xp.arange(out).reshape(out, 1)
    lo = (i * n) // out
    hi = ((i + 1) * n + out - 1) // out
    k = min(-(-n // out) + 1, n)                                    # hi - lo <= ceil(n / out) + 1
    j = lo + xp.arange(k).reshape(1, k)
    valid = j < hi
    w = valid.astype(dtype) / (hi - lo).astype(dtype)
    return xp.where(valid, j, n), w, True


class _Taps:
    """One dim's resampling operator: output i (of ``out``) along the dim is the sum over k of
    w[i, k] * input[idx[i, k]] (of ``n``); idx == n marks an unused tap (``padded``). Applied locally (a
    NaN or inf input reaches only the outputs whose taps read it, as PyTorch's kernels), by a gather (or
    its transposed scatter on the GPU); on the CPU, for a finite operand where it is cheaper, by the dense
    (out, n) matrix product (BLAS)."""
    __slots__ = ("idx", "w", "n", "out", "padded", "_dense", "_t")

    def __init__(self, idx, w, n, out, padded):
        self.idx, self.w, self.n, self.out, self.padded = idx, w, n, out, padded
        self._dense = self._t = None

    def dense(self, xp):
        """The (out, n) matrix (repeated taps add up)."""
        if self._dense is None:
            cols = xp.arange(self.n).reshape(1, self.n)
            m = xp.zeros((self.out, self.n), dtype=self.w.dtype)
            for k in range(self.idx.shape[1]):
                m += (self.idx[:, k:k + 1] == cols) * self.w[:, k:k + 1]
            self._dense = m
        return self._dense

    def transposed(self, xp):
        """The adjoint as taps (CPU only: its width is read on the host): input j's row lists the outputs
        whose taps read it, with their weights, padded with index out."""
        if self._t is None:
            out, k = self.idx.shape
            flat = self.idx.reshape(-1)
            keep = xp.nonzero(flat < self.n)[0]
            src = flat[keep]
            order = keep[xp.argsort(src, kind="stable")]
            col = flat[order]
            counts = xp.bincount(src, minlength=self.n)
            width = max(int(counts.max()) if counts.size else 0, 1)
            rank = xp.arange(col.size) - (xp.cumsum(counts) - counts)[col]
            tidx = xp.full((self.n, width), out, dtype=xp.int64)
            tw = xp.zeros((self.n, width), dtype=self.w.dtype)
            tidx[col, rank] = order // k
            tw[col, rank] = self.w.reshape(-1)[order]
            self._t = _Taps(tidx, tw, out, self.n, bool((counts < width).any()))
        return self._t


def _gather_taps(xp, a, axis, idx, w, pad):
    """sum over k of w[:, k] * take(a, idx[:, k], axis) (axis negative); idx == a.shape[axis] reads a zero
    slab appended along the axis when ``pad``, else (a finite operand) input 0 with weight 0."""
    n = a.shape[axis]
    if pad:
        slab = list(a.shape)
        slab[axis] = 1
        a = xp.concatenate([a, xp.zeros(tuple(slab), dtype=a.dtype)], axis=axis)
    else:
        idx = xp.where(idx >= n, 0, idx)
    w = w.astype(a.dtype)
    out, k = idx.shape
    if axis == -1:
        v = xp.take(a, idx.reshape(-1), axis=-1).reshape(a.shape[:-1] + (out, k))
        y = v[..., 0] * w[:, 0]
        for j in range(1, k):
            y += v[..., j] * w[:, j]
        return y
    bshape = (out,) + (1,) * (-axis - 1)
    y = xp.take(a, idx[:, 0], axis=axis) * w[:, 0].reshape(bshape)
    for j in range(1, k):
        y += xp.take(a, idx[:, j], axis=axis) * w[:, j].reshape(bshape)
    return y


def _scatter_taps(backend, xp, g, axis, op):
    """The adjoint of op along axis (negative) of g: each w[i, k] * g[i] added at idx[i, k] (scatter-add,
    the GPU's way; an unused tap adds into a dropped extra slot)."""
    shape = g.shape
    nd = len(shape)
    ax = nd + axis
    pre = 1
    for s in shape[:ax]:
        pre *= s
    post = 1
    for s in shape[ax + 1:]:
        post *= s
    g3 = xp.ascontiguousarray(g).reshape(pre, op.out, post)
    w = op.w.astype(g.dtype)
    buf = xp.zeros((pre, op.n + 1 if op.padded else op.n, post), dtype=g.dtype)
    for k in range(op.idx.shape[1]):
        backend.scatter_add(buf, (slice(None), op.idx[:, k]), g3 * w[:, k].reshape(1, op.out, 1))
    if op.padded:
        buf = buf[:, :op.n]
    return xp.ascontiguousarray(buf).reshape(shape[:ax] + (op.n,) + shape[ax + 1:])


# the CPU's relative cost of a gathered tap against a multiply-add of the dense product (NumPy, measured on
# (8, 16, 64, 64) and (1, 3, 1024, 1024)): along the last dim the gather is a per-element copy
_TAP_COST_LAST, _TAP_COST = 40, 40


def _apply(ctx, x, op, axis, adjoint):
    """The array of op (or its adjoint) applied along axis (negative) of Tensor x."""
    xp = ctx.xp
    a = x.data
    if a.size == 0 or ctx.device.type != "cpu":
        if not adjoint:
            return _gather_taps(xp, a, axis, op.idx, op.w, op.padded)
        return _scatter_taps(ctx.device.backend, xp, a, axis, op)
    finite = bool(xp.isfinite(a.sum()))        # one pass; a sum that overflows only takes the gather
    n_in = op.out if adjoint else op.n
    k = op.idx.shape[1] if not adjoint else max(2, -(-op.idx.shape[1] * op.out // op.n))   # the adjoint's width, about
    if finite and n_in <= k * (_TAP_COST_LAST if axis == -1 else _TAP_COST):
        m = op.dense(xp).astype(a.dtype)
        m = m if adjoint else m.T
        mm = ctx.device.backend.matmul
        if axis == -1:
            return mm(a, m)
        return xp.swapaxes(mm(xp.swapaxes(a, axis, -1), m), axis, -1)
    t = op.transposed(xp) if adjoint else op
    return _gather_taps(xp, a, axis, t.idx, t.w, t.padded and not finite)


def _resample_rule(cls, args, kwargs):
    """vmap: the batch levels are leading dims, the resampled axis is counted from the end: one call."""
    x = args[0]
    levels = _union([x])
    return _wrap(cls.apply(_expand(x, levels, tuple(x.shape)), *args[1:]), levels)


class Resample(Function):
    """x resampled along one dim (axis, negative) by a _Taps operator: interpolate's linear, cubic, area and
    antialias modes, one dim at a time. Linear in x; the backward is ResampleAdjoint (whose is this)."""
    batch_rule = _resample_rule

    @staticmethod
    def forward(ctx, x, op, axis):
        ctx.op, ctx.axis = op, axis
        return ctx.wrap(_apply(ctx, x, op, axis, False))

    @staticmethod
    def backward(ctx, grad):
        return ResampleAdjoint.apply(grad, ctx.op, ctx.axis), None, None


class ResampleAdjoint(Function):
    """The adjoint (transpose) of Resample: g along axis (op.out long) -> op.n long, each output's gradient
    sent to the inputs its taps read, locally (a NaN gradient reaches only those inputs, as PyTorch's)."""
    batch_rule = _resample_rule

    @staticmethod
    def forward(ctx, g, op, axis):
        ctx.op, ctx.axis = op, axis
        return ctx.wrap(_apply(ctx, g, op, axis, True))

    @staticmethod
    def backward(ctx, grad):
        return Resample.apply(grad, ctx.op, ctx.axis), None, None


def _interp_ref(np, a, sizes, mode, align_corners=False, sf=None):
    """NumPy reference for the op table: per output position the same formulas, written point by point."""
    out = a
    for k, o in enumerate(sizes):
        d = a.ndim - len(sizes) + k
        n = out.shape[d]
        rows = []
        for i in range(o):
            if mode == "nearest":
                j = min(int(np.floor(np.float32(i) * np.float32(n / o))), n - 1)
                rows.append(np.take(out, j, axis=d))
                continue
            if mode == "nearest-exact":
                j = min(int(np.floor(np.float32((i + 0.5) * float(np.float32(n) / np.float32(o))))), n - 1)
                rows.append(np.take(out, j, axis=d))
                continue
            if mode == "area":
                lo, hi = (i * n) // o, -(-(i + 1) * n // o)
                rows.append(np.take(out, range(lo, hi), axis=d).mean(axis=d))
                continue
            if align_corners:
                src = i * ((n - 1) / (o - 1) if o > 1 else 0.0)
            else:
                src = (i + 0.5) * (n / o) - 0.5
                src = src if mode == "bicubic" else max(src, 0.0)
            j = int(np.floor(src))
            t = src - j
            if mode == "bicubic":
                a_ = -0.75
                ws = [((a_ * u - 5 * a_) * u + 8 * a_) * u - 4 * a_ if k2 in (0, 3) else ((a_ + 2) * u - (a_ + 3)) * u * u + 1
                      for k2, u in enumerate((t + 1, t, 1 - t, 2 - t))]
                rows.append(sum(w * np.take(out, min(max(j + k2 - 1, 0), n - 1), axis=d) for k2, w in enumerate(ws)))
            else:
                j = min(j, n - 1)
                rows.append((1 - t) * np.take(out, j, axis=d) + t * np.take(out, min(j + 1, n - 1), axis=d))
        out = np.stack(rows, axis=d)
    return out.astype(a.dtype)


def _aa_ref(np, a, sizes, mode, align_corners=False, sfs=(None, None)):
    """NumPy reference of antialias=True, as PyTorch's C loop (_compute_indices_min_size_weights_aa): per
    output position its centre, its window of taps and their normalised filter weights."""
    def filt(u):
        u = abs(u)
        if mode == "bilinear":
            return max(1 - u, 0.0)
        if mode == "bicubic":
            c = -0.5
            return ((c + 2) * u - (c + 3)) * u * u + 1 if u < 1 else (
                ((c * u - 5 * c) * u + 8 * c) * u - 4 * c if u < 2 else 0.0)
        return float(np.sinc(u) * np.sinc(u / 3)) if u < 3 else 0.0

    out = a.astype(np.float64)
    for k, (o, sf) in enumerate(zip(sizes, sfs)):
        d = a.ndim - len(sizes) + k
        n = out.shape[d]
        scale = ((n - 1) / (o - 1) if o > 1 else 0.0) if align_corners else (n / o if sf is None else 1 / sf)
        support = _AA_TAPS[mode] * 0.5 * max(scale, 1.0)
        inv = 1 / scale if scale >= 1 else 1.0
        rows = []
        for i in range(o):
            center = scale * (i + 0.5)
            lo = max(int(center - support + 0.5), 0)
            size = min(int(center + support + 0.5), n) - lo
            ws = [filt((j + lo - center + 0.5) * inv) for j in range(size)]
            total = sum(ws)
            ws = [w / total for w in ws] if total != 0 else ws
            rows.append(sum(w * np.take(out, lo + j, axis=d) for j, w in enumerate(ws)))
        out = np.stack(rows, axis=d)
    return out.astype(a.dtype)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 5),),), ref=lambda np, a: _interp_ref(np, a, (7, 3), "nearest"),
           op=lambda x: interpolate(x, size=(7, 3)), name="interpolate_nearest"),
    OpTest((((2, 3, 5),),), ref=lambda np, a: _interp_ref(np, a, (8,), "linear"),
           op=lambda x: interpolate(x, size=8, mode="linear"), name="interpolate_linear"),
    OpTest((((1, 2, 4, 3),),), ref=lambda np, a: _interp_ref(np, a, (6, 5), "bilinear", True),
           op=lambda x: interpolate(x, size=(6, 5), mode="bilinear", align_corners=True),
           name="interpolate_bilinear_align", tol=_F32),
    OpTest((((1, 2, 4, 3),),), ref=lambda np, a: _interp_ref(np, a, (8, 6), "bilinear"),
           op=lambda x: interpolate(x, scale_factor=2, mode="bilinear"), name="interpolate_bilinear_scale", tol=_F32),
    OpTest((((1, 2, 4, 5),),), ref=lambda np, a: _interp_ref(np, a, (7, 3), "bicubic"),
           op=lambda x: interpolate(x, size=(7, 3), mode="bicubic"), name="interpolate_bicubic", tol=_F32),
    OpTest((((1, 2, 7, 6),),), ref=lambda np, a: _aa_ref(np, a, (3, 4), "bilinear"),
           op=lambda x: interpolate(x, size=(3, 4), mode="bilinear", antialias=True),
           name="interpolate_bilinear_antialias", tol=_F32),
    OpTest((((1, 2, 5, 7),),), ref=lambda np, a: _aa_ref(np, a, (2, 9), "bicubic", True),
           op=lambda x: interpolate(x, size=(2, 9), mode="bicubic", align_corners=True, antialias=True),
           name="interpolate_bicubic_antialias_align", tol=_F32),
    OpTest((((1, 1, 8, 5),),), ref=lambda np, a: _aa_ref(np, a, (3, 2), "lanczos", False, (0.4, 0.4)),
           op=lambda x: interpolate(x, scale_factor=0.4, mode="lanczos", antialias=True),
           name="interpolate_lanczos", tol=_F32),
    OpTest((((2, 3, 7),), ((1, 2, 5, 4, 3),)), ref=lambda np, a: _interp_ref(np, a, (3,) * (a.ndim - 2), "area"),
           op=lambda x: interpolate(x, size=3, mode="area"), name="interpolate_area", tol=_F32),
    OpTest((((2, 3, 4, 5),),), ref=lambda np, a: _interp_ref(np, a, (7, 3), "nearest-exact"),
           op=lambda x: interpolate(x, size=(7, 3), mode="nearest-exact"), name="interpolate_nearest_exact")),
    doc="Resize the spatial dims to size or by scale_factor: nearest, nearest-exact, linear, bilinear, bicubic, "
        "trilinear, area, lanczos; antialias for bilinear, bicubic and lanczos.")
def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """PyTorch's F.interpolate over the dims after (N, C): modes "nearest" and "nearest-exact" (1-3 spatial
    dims), "linear" (3-D input), "bilinear" / "bicubic" (4-D), "trilinear" (5-D), "area" (adaptive average
    pooling, 1-3 spatial dims) and "lanczos" (4-D, antialias=True only); align_corners for the interpolating
    modes (default False). antialias=True (bilinear, bicubic, lanczos on 4-D input): PyTorch's separable
    antialias filter, stretched by the scale when downsampling, weights normalised. With scale_factor, the
    output size is floor(in * scale_factor) and the source positions use 1 / scale_factor unless
    recompute_scale_factor=True (always for "area")."""
    op = "interpolate"
    x = _float_tensor(input, op)
    if mode not in _MODES:
        raise ValueError(f"{op}: mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    if mode in ("nearest", "nearest-exact", "area") and align_corners is not None:
        raise ValueError(f"{op}: align_corners can only be set with the interpolating modes (linear, bilinear, "
                         f"bicubic, trilinear), got mode {mode!r}")
    nd = x.ndim - 2
    if nd < 1 or nd > 3:
        raise ValueError(f"{op}: expects a 3-D, 4-D or 5-D input (N, C, spatial...), got shape {x.shape}")
    sizes, sfs = _out_sizes(op, x, size, scale_factor, nd)
    if x.shape[1] == 0 and mode != "area":      # PyTorch's kernels refuse it (adaptive pooling takes it)
        raise ValueError(f"{op}: expected a non-empty channel dim (C > 0) for mode {mode!r}, got input shape "
                         f"{x.shape}")
    if recompute_scale_factor and size is not None:
        raise ValueError(f"{op}: recompute_scale_factor is not meaningful with an explicit size")
    if antialias and not (mode in _AA_TAPS and x.ndim == 4):
        raise ValueError(f"{op}: antialias=True needs mode 'bilinear', 'bicubic' or 'lanczos' and a 4-D input, "
                         f"got mode {mode!r} and shape {x.shape}")
    if mode == "lanczos":
        if align_corners:
            raise ValueError(f"{op}: mode 'lanczos' does not support align_corners=True")
        if not antialias:
            raise ValueError(f"{op}: mode 'lanczos' requires antialias=True")
    want = _MODES[mode]
    if want is not None and nd != want:
        raise NotImplementedError(f"{op}: mode {mode!r} expects a {want + 2}-D input (N, C, spatial...), got a "
                                  f"{x.ndim}-D input of shape {x.shape}")
    if recompute_scale_factor or mode == "area":
        sfs = (None,) * nd
    xp = x.device.backend.xp
    dtype = xp.float64 if x.data.dtype == xp.float64 else xp.float32     # the weights in float32 for low precision
    if (antialias or mode in ("linear", "bilinear", "trilinear")) and sizes == tuple(x.shape[2:]):
        return x.clone()            # PyTorch's kernels copy the input when the size is kept (whatever the scale)
    y = x
    for k, (o, sf) in enumerate(zip(sizes, sfs)):
        d = 2 + k
        n = x.shape[d]
        if mode in ("nearest", "nearest-exact"):
            k = _nearest_repeat(mode, n, o, sf)
            if k is None:
                idx = (_nearest_index if mode == "nearest" else _nearest_exact_index)(xp, n, o, sf)
                y = index_select(y, d, _const(idx, x))
            elif k > 1:
                y = _repeat_along(y, d, k)
            continue
        if mode == "area":
            if o == n:
                continue
            taps = _area_taps(xp, n, o, dtype)
        elif antialias:
            taps = _aa_taps(xp, n, o, sf, mode, bool(align_corners), dtype)
        else:
            taps = _interp_taps(xp, n, o, sf, mode, bool(align_corners), dtype)
        y = Resample.apply(y, _Taps(*taps[:2], n, o, taps[2]), d - x.ndim)
    return x.clone() if y is x else y            # a new tensor, as PyTorch's, never the input itself


# --------------------------------------------------------------------------- pixel (un)shuffle
def _factor(r, op, name):
    if isinstance(r, bool) or not isinstance(r, int) or r <= 0:
        raise ValueError(f"{op}: expected {name} to be a positive int, got {r!r}")
    return r


@register(namespace="nn.functional", tests=OpTest(
    (((2, 8, 3, 2),), ((4, 2, 2),)), op=lambda x: pixel_shuffle(x, 2),
    ref=lambda np, a: _shuffle_ref(np, a, 2)),
    doc="Rearrange (*, C * r * r, H, W) into (*, C, H * r, W * r).")
def pixel_shuffle(input, upscale_factor):
    """(*, C * r^2, H, W) -> (*, C, H * r, W * r), PyTorch's depth-to-space order."""
    x = as_tensor(input, "pixel_shuffle")
    r = _factor(upscale_factor, "pixel_shuffle", "upscale_factor")
    if x.ndim < 3:                      # PyTorch raises RuntimeError for an input of the wrong rank
        raise RuntimeError(f"pixel_shuffle: expected an input (*, C * {r * r}, H, W) with at least 3 dims, got "
                           f"shape {x.shape}")
    if x.shape[-3] % (r * r):
        raise ValueError(f"pixel_shuffle: expected an input (*, C * {r * r}, H, W) (channels divisible by "
                         f"upscale_factor ** 2 = {r * r}), got shape {x.shape}")
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    k = len(lead)
    y = x.reshape(lead + (c // (r * r), r, r, h, w))
    y = y.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)
    return y.reshape(lead + (c // (r * r), h * r, w * r))


def _shuffle_ref(np, a, r):
    lead, (c, h, w) = a.shape[:-3], a.shape[-3:]
    out = np.zeros(lead + (c // (r * r), h * r, w * r), dtype=a.dtype)
    for ch in range(c):
        o, i, j = ch // (r * r), (ch % (r * r)) // r, ch % r
        out[..., o, i::r, j::r] = a[..., ch, :, :]
    return out


@register(namespace="nn.functional", tests=OpTest(
    (((2, 2, 4, 6),), ((1, 4, 2),)), op=lambda x: pixel_unshuffle(x, 2),
    ref=lambda np, a: np.stack([a[..., i::2, j::2] for i in range(2) for j in range(2)], axis=-3)
    .reshape(a.shape[:-3] + (a.shape[-3] * 4, a.shape[-2] // 2, a.shape[-1] // 2))),
    doc="Rearrange (*, C, H * r, W * r) into (*, C * r * r, H, W): the inverse of pixel_shuffle.")
def pixel_unshuffle(input, downscale_factor):
    """(*, C, H * r, W * r) -> (*, C * r^2, H, W), the inverse of pixel_shuffle."""
    x = as_tensor(input, "pixel_unshuffle")
    r = _factor(downscale_factor, "pixel_unshuffle", "downscale_factor")
    if x.ndim < 3:
        raise RuntimeError(f"pixel_unshuffle: expected an input (*, C, H, W) with at least 3 dims, got shape "
                           f"{x.shape}")
    if x.shape[-2] % r or x.shape[-1] % r:
        raise ValueError(f"pixel_unshuffle: expected an input (*, C, H, W) with H and W divisible by {r}, got "
                         f"shape {x.shape}")
    lead, (c, h, w) = x.shape[:-3], x.shape[-3:]
    k = len(lead)
    y = x.reshape(lead + (c, h // r, r, w // r, r))
    y = y.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)
    return y.reshape(lead + (c * r * r, h // r, w // r))


# --------------------------------------------------------------------------- unfold / fold
def _onehot_kernels(x, c, kh, kw):
    """(C * kh * kw, 1, kh, kw): channel c * kh * kw + t picks tap t of channel c (groups=C)."""
    xp = x.device.backend.xp
    eye = xp.eye(kh * kw, dtype=x.data.dtype).reshape(kh * kw, 1, kh, kw)
    return _const(xp.ascontiguousarray(xp.broadcast_to(eye[None], (c,) + eye.shape).reshape(c * kh * kw, 1, kh, kw)), x)


def _unfold_ref(np, a, k, d=1, p=0, s=1):
    a = np.pad(a, ((0, 0), (0, 0), (p, p), (p, p)))
    n, c, h, w = a.shape
    oh, ow = (h - d * (k - 1) - 1) // s + 1, (w - d * (k - 1) - 1) // s + 1
    cols = np.zeros((n, c, k, k, oh, ow), dtype=a.dtype)
    for i in range(k):
        for j in range(k):
            cols[:, :, i, j] = a[:, :, i * d:i * d + s * (oh - 1) + 1:s, j * d:j * d + s * (ow - 1) + 1:s]
    return cols.reshape(n, c * k * k, oh * ow)


def _fold_ref(np, a, out, k, d=1, p=0, s=1):
    n, ckk, _ = a.shape
    c = ckk // (k * k)
    h, w = out[0] + 2 * p, out[1] + 2 * p
    oh, ow = (h - d * (k - 1) - 1) // s + 1, (w - d * (k - 1) - 1) // s + 1
    cols = a.reshape(n, c, k, k, oh, ow)
    acc = np.zeros((n, c, h, w), dtype=a.dtype)
    for i in range(k):
        for j in range(k):
            acc[:, :, i * d:i * d + s * (oh - 1) + 1:s, j * d:j * d + s * (ow - 1) + 1:s] += cols[:, :, i, j]
    return acc[:, :, p:p + out[0], p:p + out[1]]


def _window_args(op, kernel_size, dilation, padding, stride):
    return (_pair(kernel_size, "kernel_size", op), _pair(dilation, "dilation", op), _pair(padding, "padding", op, 0),
            _pair(stride, "stride", op))


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 5),),), ref=lambda np, a: _unfold_ref(np, a, 2), op=lambda x: unfold(x, 2), name="unfold"),
    OpTest((((1, 2, 5, 5),),), ref=lambda np, a: _unfold_ref(np, a, 3, 2, 1, 2),
           op=lambda x: unfold(x, 3, dilation=2, padding=1, stride=2), name="unfold_strided")),
    doc="Extract sliding kernel_size blocks: (N, C, H, W) -> (N, C * kh * kw, L).")
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) (or (C, H, W)) -> (N, C * kh * kw, L), the blocks in PyTorch's order (channel,
    then kernel row and column) and L output positions row-major."""
    op = "unfold"
    x = _float_tensor(input, op)
    if x.ndim not in (3, 4):            # PyTorch raises RuntimeError for an input of the wrong rank
        raise RuntimeError(f"{op}: expected a 4-D input (N, C, H, W) or a 3-D unbatched one, got shape {x.shape}")
    unbatched = x.ndim == 3
    if unbatched:
        x = x.unsqueeze(0)
    (kh, kw), dil, pad_, st = _window_args(op, kernel_size, dilation, padding, stride)
    c = x.shape[1]
    if c == 0:
        raise ValueError(f"{op}: expected an input with at least one channel, got shape {x.shape}")
    y = conv2d(x, _onehot_kernels(x, c, kh, kw), None, st, pad_, dil, c)
    y = y.reshape(y.shape[:2] + (y.shape[2] * y.shape[3],))
    return y[0] if unbatched else y


@register(namespace="nn.functional", tests=(
    OpTest((((2, 12, 12),),), ref=lambda np, a: _fold_ref(np, a, (4, 5), 2), op=lambda x: fold(x, (4, 5), 2),
           name="fold"),
    OpTest((((1, 18, 4),),), ref=lambda np, a: _fold_ref(np, a, (5, 6), 3, 2, 1, 2),
           op=lambda x: fold(x, (5, 6), 3, dilation=2, padding=1, stride=2), name="fold_strided")),
    doc="Sum sliding blocks back into an image: (N, C * kh * kw, L) -> (N, C, *output_size).")
def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: (N, C * kh * kw, L) (or unbatched) -> (N, C, oh, ow), overlapping
    blocks summed."""
    op = "fold"
    x = _float_tensor(input, op)
    if x.ndim not in (2, 3):            # PyTorch raises RuntimeError for an input of the wrong rank
        raise RuntimeError(f"{op}: expected a 3-D input (N, C * kh * kw, L) or a 2-D unbatched one, got shape "
                           f"{x.shape}")
    unbatched = x.ndim == 2
    if unbatched:
        x = x.unsqueeze(0)
    oh, ow = _pair(output_size, "output_size", op)
    (kh, kw), (dh, dw), (ph, pw), (sh, sw) = _window_args(op, kernel_size, dilation, padding, stride)
    if x.shape[1] % (kh * kw):
        raise ValueError(f"{op}: expected dim 1 of the input to be divisible by kh * kw = {kh * kw}, got shape "
                         f"{x.shape}")
    lh = (oh + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    lw = (ow + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if lh <= 0 or lw <= 0 or lh * lw != x.shape[2]:
        raise ValueError(f"{op}: expected {max(lh, 0) * max(lw, 0)} blocks (dim 2) for output_size {(oh, ow)}, "
                         f"kernel {(kh, kw)}, dilation {(dh, dw)}, padding {(ph, pw)}, stride {(sh, sw)}, got "
                         f"shape {x.shape}")
    c = x.shape[1] // (kh * kw)
    y = _ct.transposed(x.reshape(x.shape[:2] + (lh, lw)), _onehot_kernels(x, c, kh, kw), (oh, ow), (sh, sw),
                       (ph, pw), (dh, dw), c)
    return y[0] if unbatched else y


# --------------------------------------------------------------------------- affine_grid / grid_sample
def _take_cols_rule(cls, args, kwargs):
    """vmap: x (N, C, P) and the per-sample columns idx (N, Q), either or both batched: both aligned to
    the union of their batch levels, the batch dims folded into N, one call."""
    x, idx = args[0], args[1]
    levels = _union([x, idx])
    xs, ids = tuple(x.shape), tuple(idx.shape)
    xe, ie = _expand(x, levels, xs), _expand(idx, levels, ids)
    b = _bsizes(levels)
    out = cls.apply(xe.reshape((-1,) + xs[1:]), ie.reshape((-1,) + ids[1:]), *args[2:])
    return _wrap(out.reshape(b + (xs[0],) + tuple(out.shape[1:])), levels)


def _flat_cols(xp, idx, n, c, p):
    """(N, C, Q) positions in a flattened (N, C, P) array of the columns idx (N, Q) of each sample."""
    return xp.arange(n * c).reshape(n, c, 1) * p + idx[:, None, :]


class TakeCols(Function):
    """x (N, C, P) read at the columns idx (N, Q) of each sample -> (N, C, Q): grid_sample's corner reads,
    one gather for the whole batch; linear in x (the backward is PutCols)."""
    batch_rule = _take_cols_rule

    @staticmethod
    def forward(ctx, x, idx):
        ctx.save_for_backward(idx)
        xp = ctx.xp
        n, c, ctx.p = x.data.shape
        # one take over the flattened input: four times faster on NumPy than take_along_axis (which builds
        # a broadcast index per dim)
        return ctx.wrap(xp.take(xp.ascontiguousarray(x.data).reshape(-1), _flat_cols(xp, idx.data, n, c, ctx.p)))

    @staticmethod
    def backward(ctx, grad):
        idx, = ctx.saved_tensors
        return PutCols.apply(grad, idx, ctx.p), None


class PutCols(Function):
    """g (N, C, Q) added at the columns idx (N, Q) of an (N, C, P) zero tensor (repeats accumulate): the
    adjoint of TakeCols."""
    batch_rule = _take_cols_rule

    @staticmethod
    def forward(ctx, g, idx, p):
        ctx.save_for_backward(idx)
        xp = ctx.xp
        n, c, q = g.data.shape
        out = xp.zeros((n, c, p), dtype=g.data.dtype)
        rows = _flat_cols(xp, idx.data, n, c, p).reshape(-1)
        ctx.device.backend.scatter_add(out.reshape(-1), rows, xp.ascontiguousarray(g.data).reshape(-1))
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        idx, = ctx.saved_tensors
        return TakeCols.apply(grad, idx), None, None


def _base_coords(xp, n, align_corners, dtype):
    if n == 1:
        return xp.zeros(1, dtype=dtype)
    v = xp.linspace(-1.0, 1.0, n).astype(dtype)
    return v if align_corners else v * dtype((n - 1) / n)


@register(namespace="nn.functional", tests=(
    OpTest((((2, 2, 3),),), op=lambda t: affine_grid(t, (2, 1, 3, 4), align_corners=False),
           ref=lambda np, t: _affine_ref(np, t, (3, 4), False), name="affine_grid"),
    OpTest((((1, 2, 3),),), op=lambda t: affine_grid(t, (1, 2, 2, 5), align_corners=True),
           ref=lambda np, t: _affine_ref(np, t, (2, 5), True), name="affine_grid_align"),
    OpTest((((2, 3, 4),),), op=lambda t: affine_grid(t, (2, 1, 2, 3, 4), align_corners=False),
           ref=lambda np, t: _affine_ref(np, t, (2, 3, 4), False), name="affine_grid_3d"),
    OpTest((((1, 3, 4),),), op=lambda t: affine_grid(t, (1, 2, 3, 1, 2), align_corners=True),
           ref=lambda np, t: _affine_ref(np, t, (3, 1, 2), True), name="affine_grid_3d_align")),
    doc="The sampling grid of a batch of affine matrices, for grid_sample: theta (N, 2, 3) -> (N, H, W, 2), "
        "theta (N, 3, 4) -> (N, D, H, W, 3).")
def affine_grid(theta, size, align_corners=None):
    """2-D: (N, H, W, 2) grid of (x, y) = theta @ (x, y, 1) over the normalised [-1, 1] pixel centres of an
    (N, C, H, W) ``size``; 3-D: (N, D, H, W, 3) grid of (x, y, z) = theta @ (x, y, z, 1) for an (N, C, D, H, W)
    ``size`` and theta (N, 3, 4) (align_corners=False: the corner pixels' centres at +-(1 - 1/n))."""
    op = "affine_grid"
    t = _float_tensor(theta, op, "theta")
    if not isinstance(size, (tuple, list)) or any(isinstance(s, bool) or not isinstance(s, Integral) for s in size):
        raise TypeError(f"{op}: expected size as a tuple of 4 or 5 ints ((N, C, H, W) or (N, C, D, H, W)), got "
                        f"{size!r}")
    size = tuple(int(s) for s in size)
    if len(size) not in (4, 5):
        raise NotImplementedError(f"{op}: expected a 4-D size (N, C, H, W) for 2-D or a 5-D size (N, C, D, H, W) "
                                  f"for 3-D affine transforms, got size {size}")
    nd = len(size) - 2
    if t.ndim != 3 or t.shape != (size[0], nd, nd + 1):
        raise ValueError(f"{op}: expected theta of shape (N, {nd}, {nd + 1}) with N = {size[0]} for size {size}, "
                         f"got theta {t.shape}")
    if min(size) <= 0:
        raise ValueError(f"{op}: expected a positive size, got {size}")
    xp = t.device.backend.xp
    dtype = t.data.dtype.type
    spatial = size[2:]                                  # (H, W) or (D, H, W)
    axes = [_base_coords(xp, spatial[nd - 1 - k], bool(align_corners), dtype) for k in range(nd)]   # x, y(, z)
    cols = []
    for k, v in enumerate(axes):                        # axis k of the grid runs along spatial dim nd - 1 - k
        shape = [1] * nd
        shape[nd - 1 - k] = spatial[nd - 1 - k]
        cols.append(xp.broadcast_to(v.reshape(shape), spatial))
    cols.append(xp.ones(spatial, dtype=dtype))
    base = xp.stack(cols, axis=-1).reshape(1, -1, nd + 1)
    return matmul(_const(base, t), t.transpose(1, 2)).reshape((size[0],) + spatial + (nd,))


def _affine_ref(np, t, spatial, ac):
    def base(n):
        if n == 1:
            return np.zeros(1)
        v = np.linspace(-1, 1, n)
        return v if ac else v * (n - 1) / n
    grids = np.meshgrid(*[base(n) for n in spatial], indexing="ij")     # (z,) y, x
    pts = np.stack(list(grids[::-1]) + [np.ones_like(grids[0])], -1)      # (..., x, y(, z), 1)
    return np.einsum("...k,njk->n...j", pts, t).astype(t.dtype)


def _unnormalize(g, n, align_corners):
    return (g + 1) * ((n - 1) / 2) if align_corners else ((g + 1) * n - 1) / 2


def _reflect(c, lo2, hi2):
    """PyTorch's reflect_coordinates over [lo2 / 2, hi2 / 2] (recorded ops: the gradient flips sign in the
    mirrored stretches)."""
    if lo2 == hi2:
        return c * 0
    mn, span = lo2 / 2, (hi2 - lo2) / 2
    a = (c - mn).abs()
    flips = (a.detach() / span).floor()
    extra = a - flips * span
    even = (flips - (flips / 2).floor() * 2) == 0
    return where(even, extra + mn, span - extra + mn)


def _pad_coords(c, n, padding_mode, align_corners):
    """PyTorch's compute_coordinates: border clips to [0, n - 1], reflection mirrors then clips; zeros leaves
    the coordinate (the reads outside are masked)."""
    if padding_mode == "border":
        c = c.clamp(0, n - 1)
    elif padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (n - 1)) if align_corners else _reflect(c, -1, 2 * n - 1)
        c = c.clamp(0, n - 1)
    else:
        return c
    return where(c != c, 0.0, c)        # a NaN point (or an infinite one reflected) reads 0, as PyTorch's clip


def _source_coords(g, n, padding_mode, align_corners):
    return _pad_coords(_unnormalize(g, n, align_corners), n, padding_mode, align_corners)


def _masked(w, inside):
    """The weights w of the reads, exactly 0 outside (where, not a product: a NaN or infinite point's weight is
    NaN, and NaN * 0 would reach the output and, through the placeholder read, the input's gradient)."""
    return where(inside > 0, w, 0.0)


_GS_SAMPLES: OpTestOptions = {"domain": (-0.9, 0.9), "tol": _F32}       # points inside, off the kinks


@register(namespace="nn.functional", tests=(
    OpTest((((2, 3, 4, 5), (2, 3, 2, 2)),), op=lambda x, g: grid_sample(x, g * 1.2, align_corners=False),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g * 1.2, "bilinear", "zeros", False), name="grid_sample",
           avoid=(-1, 0, 1), tol=_F32),
    OpTest((((1, 2, 3, 4), (1, 2, 3, 2)),), op=lambda x, g: grid_sample(x, g, padding_mode="border",
                                                                          align_corners=True),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g, "bilinear", "border", True), name="grid_sample_border",
           **_GS_SAMPLES),
    OpTest((((1, 2, 3, 4), (1, 2, 3, 2)),), op=lambda x, g: grid_sample(x, g * 1.4, padding_mode="reflection"),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g * 1.4, "bilinear", "reflection", False),
           name="grid_sample_reflection", **_GS_SAMPLES),
    OpTest((((1, 2, 3, 4), (1, 2, 2, 2)),), op=lambda x, g: grid_sample(x, g, mode="nearest", align_corners=True),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g, "nearest", "zeros", True), name="grid_sample_nearest",
           domain=(-0.9, 0.9)),
    OpTest((((2, 2, 4, 5), (2, 2, 3, 2)),), op=lambda x, g: grid_sample(x, g * 1.3, mode="bicubic"),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g * 1.3, "bicubic", "zeros", False),
           name="grid_sample_bicubic", **_GS_SAMPLES),
    OpTest((((1, 2, 4, 3), (1, 2, 2, 2)),), op=lambda x, g: grid_sample(x, g * 1.4, mode="bicubic",
                                                                          padding_mode="reflection",
                                                                          align_corners=True),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g * 1.4, "bicubic", "reflection", True),
           name="grid_sample_bicubic_reflection", **_GS_SAMPLES),
    OpTest((((2, 2, 3, 4, 5), (2, 2, 3, 2, 3)),), op=lambda x, g: grid_sample(x, g * 1.2, align_corners=False),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g * 1.2, "bilinear", "zeros", False),
           name="grid_sample_3d", **_GS_SAMPLES),
    OpTest((((1, 2, 3, 2, 4), (1, 2, 2, 1, 3)),), op=lambda x, g: grid_sample(x, g * 1.3, padding_mode="border",
                                                                             align_corners=True),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g * 1.3, "bilinear", "border", True),
           name="grid_sample_3d_border", **_GS_SAMPLES),
    OpTest((((1, 2, 3, 2, 4), (1, 2, 2, 1, 3)),), op=lambda x, g: grid_sample(x, g * 1.4,
                                                                             padding_mode="reflection"),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g * 1.4, "bilinear", "reflection", False),
           name="grid_sample_3d_reflection", **_GS_SAMPLES),
    OpTest((((1, 2, 3, 2, 4), (1, 2, 2, 2, 3)),), op=lambda x, g: grid_sample(x, g, mode="nearest"),
           ref=lambda np, x, g: _grid_sample_ref(np, x, g, "nearest", "zeros", False),
           name="grid_sample_3d_nearest", domain=(-0.9, 0.9))),
    doc="Sample (N, C, H, W) at the normalised (x, y) points of grid (N, Ho, Wo, 2) (bilinear, nearest, "
        "bicubic), or (N, C, D, H, W) at the (x, y, z) points of grid (N, Do, Ho, Wo, 3) (trilinear, nearest).")
def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """PyTorch's grid_sample: out[n, :, i, j] = input[n] sampled at grid[n, i, j] = (x, y) in [-1, 1] for a
    4-D input, out[n, :, k, i, j] at grid[n, k, i, j] = (x, y, z) for a 5-D one (x along W, y along H, z
    along D; align_corners=False, the default: -1 and 1 are the outer edges of the corner pixels; True:
    their centres). mode "bilinear" (trilinear on 5-D), "nearest" (half to even) or "bicubic" (4-D only,
    A = -0.75, the padding applied to each of the 16 taps); padding_mode "zeros", "border" or "reflection".
    Differentiable in the input and (bilinear, bicubic) in the grid; the whole batch in one gather per
    corner."""
    op = "grid_sample"
    x = _float_tensor(input, op)
    g = _float_tensor(grid, op, "grid", like=x)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"{op}: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"{op}: padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}")
    nd = x.ndim - 2
    if nd not in (2, 3) or g.ndim != x.ndim or g.shape[0] != x.shape[0] or g.shape[-1] != nd:
        raise ValueError(f"{op}: expected input (N, C, H, W) with grid (N, Ho, Wo, 2), or input (N, C, D, H, W) "
                         f"with grid (N, Do, Ho, Wo, 3), got {x.shape} and {g.shape}")
    if mode == "bicubic" and nd == 3:
        raise ValueError(f"{op}: mode 'bicubic' supports 4-D input only, got a 5-D input of shape {x.shape}")
    if g.dtype != x.dtype:              # PyTorch does not cast either
        raise RuntimeError(f"{op}: expected input and grid to have same dtype, got input {x.dtype} and grid "
                           f"{g.dtype}")
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    outs = g.shape[1:-1]
    q = 1
    for s in outs:
        q *= s
    p = 1
    for s in spatial:
        p *= s
    sizes = [spatial[nd - 1 - k] for k in range(nd)]                   # along x, y(, z)
    strides = [1]
    for s in sizes[:-1]:
        strides.append(strides[-1] * s)                                  # x: 1, y: W, z: H * W
    ac = bool(align_corners)
    flat = x.reshape(n, c, p)

    def corner(cs):
        """Values at the integral (float) coordinates cs (x, y(, z), each (N, *outs)), zero outside:
        (N, C, *outs), and the inside mask (N, 1, *outs). Tensor ops throughout (no .data), so vmap batches
        them."""
        dt = x.dtype
        inside, idx = None, None
        for cc, size, stride in zip(cs, sizes, strides):
            m = (cc >= 0).to(dtype=dt) * (cc <= size - 1).to(dtype=dt)
            inside = m if inside is None else inside * m
            term = where(cc != cc, 0.0, cc.clamp(0, size - 1)) * stride     # a NaN point: any valid read, masked
            idx = term if idx is None else idx + term
        v = TakeCols.apply(flat, idx.to(dtype=int64).reshape(n, q)).reshape((n, c) + outs)
        return v, inside.reshape((n, 1) + outs)

    if mode == "bicubic":
        ix, iy = (_unnormalize(g[..., k], sizes[k], ac) for k in range(2))
        x0, y0 = ix.detach().floor(), iy.detach().floor()
        wx = _cubic_weights((ix - x0).unsqueeze(1))
        wy = _cubic_weights((iy - y0).unsqueeze(1))
        out = None
        for j in range(4):
            py = _pad_coords(y0 + (j - 1), sizes[1], padding_mode, ac)
            for i in range(4):
                v, m = corner((_pad_coords(x0 + (i - 1), sizes[0], padding_mode, ac), py))
                term = v * _masked(wx[i] * wy[j], m)
                out = term if out is None else out + term
        return out
    coords = [_source_coords(g[..., k], sizes[k], padding_mode, ac) for k in range(nd)]
    if mode == "nearest":
        v, m = corner([round_(cc.detach()) for cc in coords])      # half to even, as PyTorch's nearbyint
        return v * m
    lows = [cc.detach().floor() for cc in coords]
    fracs = [(cc - lo).unsqueeze(1) for cc, lo in zip(coords, lows)]
    out = None
    for corner_bits in range(2 ** nd):
        offs = [(corner_bits >> k) & 1 for k in range(nd)]
        wgt = None
        for t, o in zip(fracs, offs):
            f = t if o else 1 - t
            wgt = f if wgt is None else wgt * f
        v, m = corner([lo + o for lo, o in zip(lows, offs)])
        term = v * _masked(wgt, m)
        out = term if out is None else out + term
    return out


def _grid_sample_ref(np, x, g, mode, padding_mode, ac):
    """NumPy reference, point by point as PyTorch's CPU loops (2-D and 3-D; bilinear, nearest, bicubic)."""
    import itertools
    nd = x.ndim - 2
    sizes = x.shape[2:][::-1]                       # along x, y(, z)
    out = np.zeros(x.shape[:2] + g.shape[1:-1], dtype=x.dtype)

    def unnorm(v, size):
        v = float(v)
        return (v + 1) / 2 * (size - 1) if ac else ((v + 1) * size - 1) / 2

    def pad(p, size):
        if padding_mode == "border":
            p = min(max(p, 0), size - 1)
        elif padding_mode == "reflection":
            lo, hi = (0, 2 * (size - 1)) if ac else (-1, 2 * size - 1)
            if lo == hi:
                p = 0.0
            else:
                mn, span = lo / 2, (hi - lo) / 2
                a = abs(p - mn)
                fl = np.floor(a / span)
                ex = a - fl * span
                p = ex + mn if fl % 2 == 0 else span - ex + mn
            p = min(max(p, 0), size - 1)
        return p

    def at(b, pos):                                   # pos along x, y(, z), integral
        if all(0 <= q < s for q, s in zip(pos, sizes)):
            return x[(b, slice(None)) + tuple(int(q) for q in pos[::-1])]
        return np.zeros(x.shape[1], dtype=x.dtype)

    def cubic(t):
        a = -0.75
        c1 = lambda u: ((a + 2) * u - (a + 3)) * u * u + 1             # noqa: E731
        c2 = lambda u: ((a * u - 5 * a) * u + 8 * a) * u - 4 * a       # noqa: E731
        return c2(t + 1), c1(t), c1(1 - t), c2(2 - t)

    for b in range(x.shape[0]):
        for o in itertools.product(*[range(s) for s in g.shape[1:-1]]):
            pt = g[(b,) + o]
            if mode == "bicubic":
                px, py = unnorm(pt[0], sizes[0]), unnorm(pt[1], sizes[1])
                x0, y0 = np.floor(px), np.floor(py)
                wx, wy = cubic(px - x0), cubic(py - y0)
                out[(b, slice(None)) + o] = sum(
                    wx[i] * wy[j] * at(b, (pad(x0 + i - 1, sizes[0]), pad(y0 + j - 1, sizes[1])))
                    for i in range(4) for j in range(4))
                continue
            ps = [pad(unnorm(pt[k], sizes[k]), sizes[k]) for k in range(nd)]
            if mode == "nearest":
                out[(b, slice(None)) + o] = at(b, [np.rint(p) for p in ps])
                continue
            lows = [np.floor(p) for p in ps]
            acc = 0
            for offs in itertools.product((0, 1), repeat=nd):
                w = 1.0
                for p, lo, of in zip(ps, lows, offs):
                    w *= (p - lo) if of else 1 - (p - lo)
                acc = acc + w * at(b, [lo + of for lo, of in zip(lows, offs)])
            out[(b, slice(None)) + o] = acc
    return out
