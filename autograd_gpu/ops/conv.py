"""Convolution and pooling primitives, im2col-based.

Convolution builds a column matrix per sample (one row per channel and kernel tap, one column per
output pixel; the windows are read through a strided view, ``as_strided``, on NumPy and CuPy alike)
and does one (batched) matrix product with the weights, which comes out in the output's own NCHW
order. The input gradient at stride 1 works on the whole padded input as its grid instead, where each
kernel tap is one shifted contiguous slice (contiguous adds; the positions past the output's edge
carry zeros). Pooling reads the windows the same way. Every way back loops over the kh*kw kernel taps
only: Python never loops over pixels or batch elements.

The geometry travels as one tuple, ``geom = (sh, sw, pt, pb, pl, pr, dh, dw, groups)``: strides,
padding (top, bottom, left, right), dilations and groups. Every Function here is linear in each of
its tensor arguments, so each backward is another Function of this file (conv -> input grad and
weight grad -> conv again; window gather <-> window scatter) and derivatives of any order work.
"""
from ..autograd.function import Function
from ..backends import backend_of_array
from .reduction import Sum
from .elementwise import mul
from .shape import reshape
from . import batching

__all__ = ["conv2d", "max_pool2d", "avg_pool2d", "out_size"]

_KEEP_COLS_BYTES = 32 << 20      # a convolution keeps its columns of x for backward up to this size


# --------------------------------------------------------------------------- array helpers
def out_size(n, k, stride, dilation, lo, hi):
    """Output length of a window of ``k`` taps (``dilation`` apart) sliding with ``stride`` over ``n``
    values padded by ``lo`` and ``hi``."""
    return (n + lo + hi - dilation * (k - 1) - 1) // stride + 1


def _pad(xp, a, pt, pb, pl, pr, value=0.0):
    """a (N, C, H, W) padded on its last two dims (a fresh array; ``a`` itself when no padding)."""
    if not (pt or pb or pl or pr):
        return a
    n, c, h, w = a.shape
    shape = (n, c, h + pt + pb, w + pl + pr)
    out = xp.zeros(shape, dtype=a.dtype) if value == 0 else xp.full(shape, value, dtype=a.dtype)
    out[:, :, pt:pt + h, pl:pl + w] = a
    return out


def _windows(xp, a, kh, kw, geom, oh, ow):
    """The (N, C, kh, kw, OH, OW) view of padded ``a`` whose [.., i, j, y, x] is the kernel tap (i, j)
    of output pixel (y, x): no copy."""
    sh, sw, _, _, _, _, dh, dw, _ = geom
    sn, sc, sy, sx = a.strides
    n, c = a.shape[:2]
    return xp.lib.stride_tricks.as_strided(a, (n, c, kh, kw, oh, ow), (sn, sc, sy * dh, sx * dw, sy * sh, sx * sw))


def _tap(i, j, geom, oh, ow):
    """The slices of the padded input that kernel tap (i, j) sees over all output pixels."""
    sh, sw, _, _, _, _, dh, dw, _ = geom
    return (slice(i * dh, i * dh + sh * (oh - 1) + 1, sh), slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))


def _grid(x_shape, kh, kw, geom):
    """(oh, ow, gh, gw): the output size, and the grid the input gradient's columns span. At stride 1
    that grid is the whole padded input: every kernel tap is then one shifted contiguous slice of it,
    so summing the columns back is kh*kw contiguous adds (the positions past the output's edge carry a
    zero gradient). Other strides use the exact windows (gh, gw = oh, ow)."""
    _, _, h, w = x_shape
    sh, sw, pt, pb, pl, pr, dh, dw, _ = geom
    oh, ow = out_size(h, kh, sh, dh, pt, pb), out_size(w, kw, sw, dw, pl, pr)
    if sh == sw == 1:
        return oh, ow, h + pt + pb, w + pl + pr
    return oh, ow, oh, ow


def _shifts(kh, kw, geom, gw):
    """(i, j, flat offset) of each kernel tap on the stride-1 grid."""
    _, _, _, _, _, _, dh, dw, _ = geom
    return [(i, j, i * dh * gw + j * dw) for i in range(kh) for j in range(kw)]


def _im2col(xp, x, kh, kw, geom, ones=False):
    """x (N, C, H, W) -> columns (N, G, C/G*kh*kw, OH*OW): row (c, i, j) of sample n holds kernel tap
    (i, j) of channel c at every output pixel, so that the product with the weights comes out in
    (N, O, OH*OW) order, the output's own layout. ``ones``: one more row of ones per group (the bias
    then rides in the product)."""
    n, c, h, w = x.shape
    sh, sw, pt, pb, pl, pr, _, _, g = geom
    oh, ow = out_size(h, kh, sh, geom[6], pt, pb), out_size(w, kw, sw, geom[7], pl, pr)
    k = c // g * kh * kw
    buf = xp.empty((n, g, k + 1 if ones else k, oh * ow), dtype=x.dtype)
    v = _windows(xp, _pad(xp, x, pt, pb, pl, pr), kh, kw, geom, oh, ow)      # (N, C, kh, kw, OH, OW)
    buf[:, :, :k].reshape(n, g, c // g, kh, kw, oh, ow)[...] = v.reshape(n, g, c // g, kh, kw, oh, ow)
    if ones:
        buf[:, :, k] = 1
    return buf


def _col2im(xp, dcols, x_shape, kh, kw, geom):
    """Columns (N, G, C/G*kh*kw, gh*gw) on the grid of _grid summed back into (N, C, H, W), one add per
    kernel tap (at stride 1 a contiguous add at the tap's shift, otherwise a strided one)."""
    n, c, h, w = x_shape
    sh, sw, pt, pb, pl, pr, _, _, _ = geom
    oh, ow, gh, gw = _grid(x_shape, kh, kw, geom)
    dcols = dcols.reshape(n, c, kh, kw, gh * gw)
    if sh == sw == 1:
        taps = _shifts(kh, kw, geom, gw)
        m = n * c * gh * gw
        acc = xp.empty(m + taps[-1][2], dtype=dcols.dtype)
        acc[:m].reshape(n, c, gh * gw)[...] = dcols[:, :, 0, 0]      # tap (0, 0) has shift 0: covers [0, m)
        acc[m:] = 0
        for i, j, off in taps[1:]:
            dst = acc[off:off + m].reshape(n, c, gh * gw)
            dst += dcols[:, :, i, j]
        acc = acc[:m].reshape(n, c, gh, gw)
    else:
        dcols = dcols.reshape(n, c, kh, kw, oh, ow)
        acc = xp.zeros((n, c, h + pt + pb, w + pl + pr), dtype=dcols.dtype)
        for i in range(kh):
            for j in range(kw):
                dst = acc[(slice(None), slice(None)) + _tap(i, j, geom, oh, ow)]
                dst += dcols[:, :, i, j]   # through the view: ``acc[...] +=`` would also write the view back
    return xp.ascontiguousarray(acc[:, :, pt:pt + h, pl:pl + w])   # no copy when unpadded


def _matmul(a, b, out=None):
    """The backend's matmul (float16 products accumulate in float32 on every device)."""
    return backend_of_array(a).matmul(a, b, out=out)


def _conv(xp, x, w, b, geom):
    """(conv(x, w) + b, the columns of x): one matrix product of the weights (G, O/G, C/G*kh*kw) with
    the columns (N, G, C/G*kh*kw, OH*OW), which lands in NCHW order; the bias is one more weight column
    against a row of ones (cheaper than a pass over the output)."""
    o, cg, kh, kw = w.shape
    n = x.shape[0]
    g = geom[8]
    # on CUDA (the backend's conv_lean) the bias is one add after the product, not a ones row and a
    # concatenated weight (1 launch, not 3)
    ones = b is not None and not backend_of_array(x).conv_lean
    cols = _im2col(xp, x, kh, kw, geom, ones=ones)
    wm = w.reshape(g, o // g, cg * kh * kw)
    if ones:
        wm = xp.concatenate([wm, b.reshape(g, o // g, 1)], axis=2)
    y = _matmul(wm, cols)
    if b is not None and not ones:
        y += b.reshape(g, o // g, 1)
    return y.reshape((n, o) + _grid(x.shape, kh, kw, geom)[:2]), cols[:, :, :cg * kh * kw]


def _conv_weight_grad(xp, x, gy, w_shape, geom, cols=None):
    """d(sum gy * conv(x, w)) / dw: the output gradient times the columns (kept by the forward, or built
    again), per sample, summed over the batch."""
    o, cg, kh, kw = w_shape
    n, g = gy.shape[0], geom[8]
    if cols is None:
        cols = _im2col(xp, x, kh, kw, geom)
    rows = xp.ascontiguousarray(gy).reshape(n, g, o // g, gy.shape[2] * gy.shape[3])
    per_sample = _matmul(rows, cols.transpose(0, 1, 3, 2))          # (N, G, O/G, C/G*kh*kw)
    if backend_of_array(gy).conv_lean:
        # on CUDA the sum goes straight into an array of w's shape: .grad takes it as it is, where a reshaped
        # view would cost a copy launch (the CPU engine keeps such a view uncopied: backend.sole_view)
        out = xp.empty(w_shape, dtype=per_sample.dtype)
        xp.sum(per_sample, axis=0, out=out.reshape(per_sample.shape[1:]))
        return out
    return per_sample.sum(axis=0).reshape(w_shape)


def _conv_input_grad(xp, gy, w, x_shape, geom):
    """d(sum gy * conv(x, w)) / dx: the columns w.T @ gy (one product) on the grid of _grid (gy padded
    with zeros to it at stride 1), summed back onto the input."""
    o, cg, kh, kw = w.shape
    n, g = gy.shape[0], geom[8]
    sh, sw, pt, pb, pl, pr, dh, dw, _ = geom
    eh, ew = dh * (kh - 1), dw * (kw - 1)
    if sh == sw == 1 and min(eh - pt, eh - pb, ew - pl, ew - pr) >= 0 and backend_of_array(gy).conv_lean:
        # the convolution of gy, zero-padded by the dilated kernel's reach less the input's padding, with
        # the flipped weight (its in and out channels swapped): one product over (O/G, kh, kw), 5 launches
        # (pad 2, columns 1, weight 1, product 1) where the grid's adds take kh*kw + 4
        gp = _pad(xp, gy, eh - pt, eh - pb, ew - pl, ew - pr)
        cols = _im2col(xp, gp, kh, kw, (1, 1, 0, 0, 0, 0, dh, dw, g))             # (N, G, O/G*kh*kw, H*W)
        wf = xp.ascontiguousarray(w[:, :, ::-1, ::-1].reshape(g, o // g, cg, kh, kw).transpose(0, 2, 1, 3, 4))
        return _matmul(wf.reshape(g, cg, o // g * kh * kw), cols).reshape(x_shape)
    oh, ow, gh, gw = _grid(x_shape, kh, kw, geom)
    if (gh, gw) == (oh, ow):
        rows = xp.ascontiguousarray(gy)
    else:
        rows = xp.zeros((n, o, gh, gw), dtype=gy.dtype)
        rows[:, :, :oh, :ow] = gy
    wt = w.reshape(g, o // g, cg * kh * kw).transpose(0, 2, 1)             # (G, C/G*kh*kw, O/G)
    return _col2im(xp, _matmul(wt, rows.reshape(n, g, o // g, gh * gw)), x_shape, kh, kw, geom)


# --------------------------------------------------------------------------- batching rules
def _fold_rule(shape_pos=None, idx_pos=None):
    """The rule of an image op whose first argument is batched and whose others are not: the batch dims
    folded into N (``batching.fold_batch``), and with them the N of the input shape at ``shape_pos`` and
    of the per-window index array at ``idx_pos`` (the backward helpers: reached when a batched
    cotangent runs the backward, vmap of a vjp; the index array repeats per example)."""
    def rule(cls, args, kwargs):
        x = args[0]
        if x.__class__ is not batching.BatchedTensor or any(
                a.__class__ is batching.BatchedTensor for a in args[1:]):
            return NotImplemented        # a batched weight (per-example weights): the per-example loop
        p, b = x._bbase, batching._bsizes(x._blevels)
        n = p.shape[len(b)]
        k = batching._prod(b)
        a = list(args)
        a[0] = reshape(p, (-1,) + p.shape[len(b) + 1:])
        if shape_pos is not None:
            a[shape_pos] = (n * k,) + tuple(a[shape_pos][1:])
        if idx_pos is not None:
            idx = a[idx_pos]
            if tuple(idx.shape[:2]) != tuple(x.shape[:2]):      # one window index per example's window
                return NotImplemented
            xp = x.device.backend.xp
            a[idx_pos] = xp.broadcast_to(idx, b + idx.shape).reshape((-1,) + idx.shape[1:])
        out = cls.apply(*a, **kwargs)
        return batching._wrap(reshape(out, b + (n,) + out.shape[1:]), x._blevels)
    return rule


# --------------------------------------------------------------------------- convolution
class Conv2d(Function):
    """conv(x, w) + b, PyTorch's cross-correlation; x (N, C, H, W), w (O, C/groups, kh, kw), b (O,) or None."""
    batch_rule = batching.fold_batch

    @staticmethod
    def forward(ctx, x, w, b, geom):
        y, cols = _conv(ctx.xp, x.data, w.data, None if b is None else b.data, geom)
        ctx.geom = geom
        # the columns are kept for the weight gradient (freed with the graph) rather than redone, unless
        # they are big, where the matrix product dwarfs redoing them
        keep = ctx.needs_input_grad[1] and cols.nbytes <= _KEEP_COLS_BYTES
        ctx.save_for_backward(x, w, ctx.wrap(cols) if keep else None)
        return ctx.wrap(y)

    @staticmethod
    def backward(ctx, grad):
        x, w, kept = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        gx = Conv2dInputGrad.apply(grad, w, x.shape, ctx.geom) if need_x else None
        kept = None if kept is None else kept.data
        gw = Conv2dWeightGrad.apply(x, grad, w.shape, ctx.geom, kept) if need_w else None
        gb = Sum.apply(grad, (0, 2, 3), False) if need_b else None
        return gx, gw, gb, None


class Conv2dInputGrad(Function):
    """The adjoint of conv in x (a transposed convolution): grad (N, O, OH, OW), w -> (N, C, H, W)."""
    batch_rule = _fold_rule(shape_pos=2)

    @staticmethod
    def forward(ctx, grad, w, x_shape, geom):
        ctx.geom = geom
        ctx.save_for_backward(grad, w)
        return ctx.wrap(_conv_input_grad(ctx.xp, grad.data, w.data, x_shape, geom))

    @staticmethod
    def backward(ctx, gg):
        grad, w = ctx.saved_tensors
        need_g, need_w = ctx.needs_input_grad[:2]
        d_grad = Conv2d.apply(gg, w, None, ctx.geom) if need_g else None
        d_w = Conv2dWeightGrad.apply(gg, grad, w.shape, ctx.geom, None) if need_w else None
        return d_grad, d_w, None, None


class Conv2dWeightGrad(Function):
    """The gradient of conv in w: x (N, C, H, W), grad (N, O, OH, OW) -> (O, C/groups, kh, kw)."""
    # it sums over N: folding the batch into N would sum the examples' weight gradients together, so a
    # batched call (per-example weight gradients) runs once per example
    batch_rule = batching.loop

    @staticmethod
    def forward(ctx, x, grad, w_shape, geom, kept):
        ctx.geom = geom
        ctx.save_for_backward(x, grad)
        return ctx.wrap(_conv_weight_grad(ctx.xp, x.data, grad.data, w_shape, geom, kept))

    @staticmethod
    def backward(ctx, ggw):
        x, grad = ctx.saved_tensors
        need_x, need_g = ctx.needs_input_grad[:2]
        d_x = Conv2dInputGrad.apply(grad, ggw, x.shape, ctx.geom) if need_x else None
        d_grad = Conv2d.apply(x, ggw, None, ctx.geom) if need_g else None
        return d_x, d_grad, None, None, None


def conv2d(x, w, b, geom):
    """The convolution primitive on checked arguments (see nn.functional.conv2d for the public one)."""
    return Conv2d.apply(x, w, b, geom)


# --------------------------------------------------------------------------- pooling
def _stacked_windows(xp, a, kh, kw, geom, oh, ow):
    """(kh*kw, N, C, OH, OW) contiguous copy of the windows of padded ``a``: slab k is kernel tap k."""
    v = _windows(xp, a, kh, kw, geom, oh, ow).transpose(2, 3, 0, 1, 4, 5)
    return xp.ascontiguousarray(v).reshape((kh * kw,) + a.shape[:2] + (oh, ow))


def _scatter_taps(xp, g, idx, x_shape, kh, kw, geom):
    """g (N, C, OH, OW) put at every tap of its window (idx None) or only at tap idx[...] of it, in an
    (N, C, H, W) zero tensor: the adjoint of reading the windows. Overlapping windows accumulate;
    disjoint ones are written directly (by the backend's max_pool_scatter: one kernel on CUDA), into
    uninitialised memory where they tile the padded input."""
    n, c, h, w = x_shape
    sh, sw, pt, pb, pl, pr, dh, dw, _ = geom
    oh, ow = g.shape[2:]
    hp, wp = h + pt + pb, w + pl + pr
    overlap = sh < dh * (kh - 1) + 1 or sw < dw * (kw - 1) + 1
    if idx is not None and not overlap:
        tiled = (kh == 1 or dh == 1) and (kw == 1 or dw == 1) and sh == kh and sw == kw and \
            oh * sh == hp and ow * sw == wp
        acc = (xp.empty if tiled else xp.zeros)((n, c, hp, wp), dtype=g.dtype)
        backend_of_array(g).max_pool_scatter(g, idx, _windows(xp, acc, kh, kw, geom, oh, ow))
        return xp.ascontiguousarray(acc[:, :, pt:pt + h, pl:pl + w]) if pt or pb or pl or pr else acc
    acc = xp.zeros((n, c, hp, wp), dtype=g.dtype)
    for k in range(kh * kw):
        dst = acc[(slice(None), slice(None)) + _tap(k // kw, k % kw, geom, oh, ow)]
        if idx is None:
            dst += g
        elif overlap:
            dst += g * (idx == k)
        else:
            xp.multiply(g, idx == k, out=dst)
    return xp.ascontiguousarray(acc[:, :, pt:pt + h, pl:pl + w]) if pt or pb or pl or pr else acc


def _max_slabs(xp, a, kh, kw, geom, oh, ow):
    _, _, pt, pb, pl, pr, _, _, _ = geom
    return _stacked_windows(xp, _pad(xp, a, pt, pb, pl, pr, -float("inf")), kh, kw, geom, oh, ow)


def _first_max(slabs, y, real=None):
    """Per window, the tap index of the first maximum: the count of leading taps that miss it. ``real``
    (taps, 1, 1, oh, ow) marks the taps on the input, not on padding: a padding tap is always a miss,
    so a window of -inf inputs still routes its gradient to an input, as in PyTorch."""
    k = slabs.shape[0]
    miss = slabs[0] != y
    if real is not None:
        miss |= ~real[0]
    idx = miss.astype("int16" if k > 127 else "int8")
    for i in range(1, k - 1):
        miss &= (slabs[i] != y) | ~real[i] if real is not None else slabs[i] != y
        idx += miss
    return idx


def _real_taps(xp, shape, kh, kw, geom, oh, ow):
    """For padded pooling: which window taps fall on the input (True) rather than the padding."""
    _, _, pt, pb, pl, pr, _, _, _ = geom
    if not (pt or pb or pl or pr):
        return None
    inside = xp.ones((1, 1) + tuple(shape[2:]), dtype=bool)
    return _stacked_windows(xp, _pad(xp, inside, pt, pb, pl, pr, False), kh, kw, geom, oh, ow)


class MaxPool2d(Function):
    """Max over each window (padding is -inf); the gradient goes to the first maximum of each window."""
    batch_rule = batching.fold_batch

    @staticmethod
    def forward(ctx, x, kh, kw, geom, oh, ow):
        if geom[2:6] == (0, 0, 0, 0):      # the backend's max and first-max over the windows (one kernel on CUDA)
            y, ctx.idx = x.device.backend.max_pool_windows(_windows(ctx.xp, x.data, kh, kw, geom, oh, ow),
                                                            ctx.needs_input_grad[0])
        else:
            slabs = _max_slabs(ctx.xp, x.data, kh, kw, geom, oh, ow)
            y = slabs.max(axis=0)
            ctx.idx = (_first_max(slabs, y, _real_taps(ctx.xp, x.data.shape, kh, kw, geom, oh, ow))
                       if ctx.needs_input_grad[0] else None)
        ctx.x_shape, ctx.kernel, ctx.geom = x.data.shape, (kh, kw), geom
        return ctx.wrap(y)

    @staticmethod
    def backward(ctx, grad):
        return MaxPoolScatter.apply(grad, ctx.idx, ctx.x_shape, ctx.kernel, ctx.geom), None, None, None, None, None


def max_pool_indices(xp, a, kh, kw, geom, oh, ow):
    """PyTorch's return_indices: the flat index (into H*W of the input) of each window's first maximum."""
    slabs = _max_slabs(xp, a, kh, kw, geom, oh, ow)
    k = _first_max(slabs, slabs.max(axis=0), _real_taps(xp, a.shape, kh, kw, geom, oh, ow)).astype("int64")
    sh, sw, pt, _, pl, _, dh, dw, _ = geom
    rows = xp.arange(oh).reshape(-1, 1) * sh - pt + (k // kw) * dh
    cols = xp.arange(ow).reshape(1, -1) * sw - pl + (k % kw) * dw
    return rows * a.shape[3] + cols


class MaxPoolScatter(Function):
    """grad (N, C, OH, OW) routed to the argmax of each window (index ``idx`` per window) of an
    x-shaped zero tensor; linear in grad."""
    batch_rule = _fold_rule(shape_pos=2, idx_pos=1)

    @staticmethod
    def forward(ctx, grad, idx, x_shape, kernel, geom):
        ctx.idx, ctx.kernel, ctx.geom = idx, kernel, geom
        g = grad.data
        return ctx.wrap(_scatter_taps(ctx.xp, g, idx, x_shape, *kernel, geom))

    @staticmethod
    def backward(ctx, gg):
        return MaxPoolGather.apply(gg, ctx.idx, ctx.kernel, ctx.geom), None, None, None, None


class MaxPoolGather(Function):
    """x read at the argmax of each window: the adjoint of MaxPoolScatter."""
    batch_rule = _fold_rule(idx_pos=1)

    @staticmethod
    def forward(ctx, x, idx, kernel, geom):
        xp = ctx.xp
        kh, kw = kernel
        _, _, pt, pb, pl, pr, _, _, _ = geom
        ctx.idx, ctx.kernel, ctx.geom, ctx.x_shape = idx, kernel, geom, x.data.shape
        slabs = _stacked_windows(xp, _pad(xp, x.data, pt, pb, pl, pr), kh, kw, geom, *idx.shape[2:])
        return ctx.wrap(xp.take_along_axis(slabs, idx[None].astype("int64"), axis=0)[0])

    @staticmethod
    def backward(ctx, gg):
        return MaxPoolScatter.apply(gg, ctx.idx, ctx.x_shape, ctx.kernel, ctx.geom), None, None, None


class WindowSum(Function):
    """Sum over each window (zero padding): x (N, C, H, W) -> (N, C, OH, OW)."""
    batch_rule = batching.fold_batch

    @staticmethod
    def forward(ctx, x, kh, kw, geom, oh, ow):
        xp = ctx.xp
        _, _, pt, pb, pl, pr, _, _, _ = geom
        ctx.x_shape, ctx.kernel, ctx.geom = x.data.shape, (kh, kw), geom
        return ctx.wrap(_stacked_windows(xp, _pad(xp, x.data, pt, pb, pl, pr), kh, kw, geom, oh, ow).sum(axis=0))

    @staticmethod
    def backward(ctx, grad):
        return WindowScatter.apply(grad, ctx.x_shape, ctx.kernel, ctx.geom), None, None, None, None, None


class WindowScatter(Function):
    """grad (N, C, OH, OW) added to every position of its window: the adjoint of WindowSum."""
    batch_rule = _fold_rule(shape_pos=1)

    @staticmethod
    def forward(ctx, grad, x_shape, kernel, geom):
        g = grad.data
        ctx.kernel, ctx.geom, ctx.out_hw = kernel, geom, g.shape[2:]
        return ctx.wrap(_scatter_taps(ctx.xp, g, None, x_shape, *kernel, geom))

    @staticmethod
    def backward(ctx, gg):
        return WindowSum.apply(gg, *ctx.kernel, ctx.geom, *ctx.out_hw), None, None, None


def max_pool2d(x, kh, kw, geom, oh, ow):
    """The max-pooling primitive on checked arguments."""
    return MaxPool2d.apply(x, kh, kw, geom, oh, ow)


def avg_pool2d(x, kh, kw, geom, oh, ow, scale):
    """Window sums times ``scale`` (a number, or an (OH, OW) tensor of 1/divisor per window)."""
    s = WindowSum.apply(x, kh, kw, geom, oh, ow)
    return mul(s, scale)
