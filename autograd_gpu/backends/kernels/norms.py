"""Fused kernels: layer norm and RMS norm, forward and backward. See backends/kernels/__init__.py for the contract.

Both take the input as (rows, n), n the normalised size, and weight/bias as (n,) arrays or None.
``layer_norm`` returns (y, saved), ``layer_norm_backward`` takes saved back: what each backend keeps differs
(NumPy: the normalised input and 1/std per row; CuPy: the input, its row sums and centred sums of squares,
from which its kernels recompute both for free).

Launches on CUDA: forward 3 (a row sum, a centred sum of squares, one normalise-scale-shift kernel)
[13 as BLAS row sums and in-place passes]; backward 5 (the weight and bias column sums, two row sums, one
kernel for the input's gradient) [15]. RMS norm (x / sqrt(mean(x^2) + eps) * w; saved as layer norm's):
forward 2 (a row sum of squares, one kernel) [6 composed], backward 3 (the weight's column sums, one row sum,
one kernel) [about 12 composed].
"""
import builtins

import numpy as np

from .activations import _built, kernel

# -- CPU ------------------------------------------------------------------------------------------------


class NumpyNorms:
    """NumPy implementations (mixed into NumpyBackend): BLAS row sums, a blocked in-place backward."""

    def layer_norm(self, x, w, b, eps):
        """((x - mean) / sqrt(var + eps) * w + b over each row of x, saved): the row sums are BLAS
        matrix-vector products with a ones vector and the variance one row dot (row_dot: NumPy's reduction
        over the last axis is 5x slower), so three passes over the input. Equals the unfused ops."""
        rows, n = x.shape
        xp = self.xp
        ones = xp.ones(n, dtype=x.dtype)
        xc = x - _row_sums(self, x, ones, 1.0 / n)[:, None] if n else x.copy()
        var = _row_dot(self, xc, xc, 1.0 / builtins.max(n, 1))
        var += eps
        rstd = xp.sqrt(var, out=var)
        xp.reciprocal(rstd, out=rstd)
        xc *= rstd[:, None]
        y = xc * w if w is not None else xc.copy()
        if b is not None:
            y += b
        return y, (xc, rstd)

    def layer_norm_backward(self, g, saved, w, need_x, need_w, need_b):
        """(gx, gw, gb) of layer_norm for the (rows, n) gradient g (None where not needed): gx = rstd * (g w -
        mean(g w) - xhat mean(g w xhat)), gw = column sums of g xhat, gb of g. The column sums and row means
        are BLAS products with ones vectors, and mean(g w xhat) is (g xhat) @ w, reusing the product gw needs;
        in blocks of rows (about 256 KiB an array), so the six passes over a block stay in cache: 25% faster
        on (4096, 256) float32 than whole arrays read back from memory each pass."""
        xhat, rstd = saved
        rows, n = xhat.shape
        step = builtins.max(1, (1 << 16) // builtins.max(n, 1))
        gx = self.xp.empty((rows, n), dtype=xhat.dtype) if need_x else None
        gw = gb = None
        for r0 in range(0, builtins.max(rows, 1), step):    # (one empty block when there are no rows)
            blk = slice(r0, r0 + step)
            bw, bb = _layer_norm_block(self, g[blk], xhat[blk], rstd[blk], w, None if gx is None else gx[blk],
                                       need_w, need_b)
            gw = bw if gw is None else gw + bw
            gb = bb if gb is None else gb + bb
        return gx, gw, gb


    def rms_norm(self, x, w, eps):
        """(x / sqrt(mean(x^2) + eps) * w over each row of x (rows, n), saved (xhat, 1/rms per row)): one row
        dot for the mean square (float16 through float32), two passes more. Equals the unfused ops."""
        rows, n = x.shape
        xp = self.xp
        ms = _row_dot(self, x, x, 1.0 / builtins.max(n, 1))
        ms += eps
        rstd = xp.sqrt(ms, out=ms)
        xp.reciprocal(rstd, out=rstd)
        xhat = x * rstd[:, None]
        return (xhat * w if w is not None else xhat.copy()), (xhat, rstd)

    def rms_norm_backward(self, g, saved, w, need_x, need_w):
        """(gx, gw) of rms_norm for the (rows, n) gradient g (None where not needed): gx = rstd * (g w - xhat
        mean(g w xhat)), gw = column sums of g xhat (BLAS products with ones vectors)."""
        xhat, rstd = saved
        rows, n = xhat.shape
        xp = self.xp
        t = g * xhat                                       # grad * xhat
        gw = self.matmul(xp.ones(rows, dtype=t.dtype), t) if need_w else None
        gx = None
        if need_x:
            u = g * w if w is not None else g.copy()       # g = grad * weight
            c = _row_dot(self, t, w if w is not None else xp.ones(n, dtype=t.dtype), 1.0 / builtins.max(n, 1))
            u -= xhat * c[:, None]                         # g w - xhat mean(g w xhat)
            u *= rstd[:, None]
            gx = u
        return gx, gw


def _layer_norm_block(backend, g, xhat, rstd, w, gx, need_w, need_b):
    """LayerNorm's backward on a block of rows: writes gx = rstd * (g w - mean(g w) - xhat mean(g w xhat))
    when given, returns this block's (weight, bias) gradient sums (None where not wanted)."""
    mm = backend.matmul
    rows, n = xhat.shape
    xp = backend.xp
    ones_r = xp.ones(rows, dtype=xhat.dtype)
    t = g * xhat                                       # grad * xhat
    gw = mm(ones_r, t) if need_w else None
    gb = mm(ones_r, g) if need_b else None
    if gx is not None:
        if w is not None:
            u = xp.multiply(g, w, out=gx)              # g = grad * weight
        else:
            gx[...] = g
            u = gx
        ones = xp.ones(n, dtype=xhat.dtype)
        c1 = _row_sums(backend, u, ones, rstd * (1.0 / builtins.max(n, 1)))      # rstd * mean(g)
        c2 = _row_sums(backend, t, w if w is not None else ones, rstd * (1.0 / builtins.max(n, 1)))  # rstd mean(g xhat)
        u *= rstd[:, None]                             # rstd * g - rstd mean(g) - xhat * rstd mean(g xhat)
        u -= xp.multiply(xhat, c2[:, None], out=t)
        u -= c1[:, None]
    return gw, gb


def _row_sums(backend, a, v, scale):
    """(a @ v) * scale for a (rows, n) array, in a's dtype; float16 through float32, since a sum of n
    float16 values overflows where their mean does not (a.mean() also sums float16 in float32)."""
    if a.dtype.itemsize < 4:
        return (backend.matmul(a.astype(np.float32), v.astype(np.float32)) * scale).astype(a.dtype)
    s = backend.matmul(a, v)
    s *= scale
    return s


def _row_dot(backend, a, b, scale):
    """sum(a * b) * scale over the last axis of two (rows, n) arrays in one pass (backend.row_dot);
    float16 through float32 up to the scaled result, so the sum (n times the mean) does not overflow."""
    if a.dtype.itemsize < 4:
        return ((a.astype(np.float32) * b).sum(axis=-1) * scale).astype(a.dtype)
    d = backend.row_dot(a, b)
    d *= scale
    return d


# -- CUDA -----------------------------------------------------------------------------------------------
# x (rows, n); s its row sums and v its centred row sums of squares, both (rows, 1); w, b (n,); inv_n = 1/n.
_XHAT = "(x - s * inv_n) / sqrt(v * inv_n + eps)"
_ELEMENTWISE = {
    "ln_forward_wb": ("x s v w b inv_n eps", "y", f"y = {_XHAT} * w + b"),
    "ln_forward_w": ("x s v w inv_n eps", "y", f"y = {_XHAT} * w"),
    "ln_forward_b": ("x s v b inv_n eps", "y", f"y = {_XHAT} + b"),
    "ln_forward": ("x s v inv_n eps", "y", f"y = {_XHAT}"),
    # c1 = sum(g w), c2 = sum(g w xhat) per row
    "ln_grad_x_w": ("g w x s v c1 c2 inv_n eps", "gx",
                    f"gx = (g * w - c1 * inv_n - {_XHAT} * c2 * inv_n) / sqrt(v * inv_n + eps)"),
    "ln_grad_x": ("g x s v c1 c2 inv_n eps", "gx",
                  f"gx = (g - c1 * inv_n - {_XHAT} * c2 * inv_n) / sqrt(v * inv_n + eps)"),
}
# RMS norm: v the row sums of squares (rows, 1); xhat = x / sqrt(v * inv_n + eps); c = sum(g w xhat) per row
_RHAT = "x / sqrt(v * inv_n + eps)"
_ELEMENTWISE.update({
    "rms_forward_w": ("x v w inv_n eps", "y", f"y = {_RHAT} * w"),
    "rms_forward": ("x v inv_n eps", "y", f"y = {_RHAT}"),
    "rms_grad_x_w": ("g w x v c inv_n eps", "gx", f"gx = (g * w - {_RHAT} * c * inv_n) / sqrt(v * inv_n + eps)"),
    "rms_grad_x": ("g x v c inv_n eps", "gx", f"gx = (g - {_RHAT} * c * inv_n) / sqrt(v * inv_n + eps)"),
})
_REDUCTIONS = {
    "rms_squares": ("x", "v", "x * x"),
    "rms_g_xhat": ("g x v inv_n eps", "d", f"g * {_RHAT}"),
    "rms_gw_xhat": ("g w x v inv_n eps", "d", f"g * w * {_RHAT}"),
    "ln_centred_squares": ("x s inv_n", "v", "(x - s * inv_n) * (x - s * inv_n)"),
    "ln_g_xhat": ("g x s v inv_n eps", "d", f"g * {_XHAT}"),
    "ln_gw_xhat": ("g w x s v inv_n eps", "d", f"g * w * {_XHAT}"),
    "ln_gw": ("g w", "d", "g * w"),
}


class CupyNorms:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached."""

    def _nk(self, name, dtype):        # built: one dict get, no further call (a kernel object is always true)
        return _built.get((self.xp, name, dtype.char)) or kernel(self.xp, name, dtype, _ELEMENTWISE, _REDUCTIONS)

    def layer_norm(self, x, w, b, eps):
        """((x - mean) / sqrt(var + eps) * w + b over each row of x, saved): a row sum, a centred sum of
        squares (two passes, as exact as the CPU's) and one kernel. float16 runs in float32."""
        if x.dtype.char == "e":
            y, saved = self.layer_norm(x.astype(np.float32), _f32(w), _f32(b), eps)
            return y.astype(x.dtype), saved
        rows, n = x.shape
        inv_n = 1.0 / builtins.max(n, 1)
        with self._cuda_device:
            s = x.sum(axis=1, keepdims=True)
            v = self._nk("ln_centred_squares", x.dtype)(x, s, inv_n, axis=1, keepdims=True)
            if w is not None and b is not None:
                y = self._nk("ln_forward_wb", x.dtype)(x, s, v, w, b, inv_n, eps)
            elif w is not None:
                y = self._nk("ln_forward_w", x.dtype)(x, s, v, w, inv_n, eps)
            elif b is not None:
                y = self._nk("ln_forward_b", x.dtype)(x, s, v, b, inv_n, eps)
            else:
                y = self._nk("ln_forward", x.dtype)(x, s, v, inv_n, eps)
        return y, (x, s, v, inv_n, eps)

    def layer_norm_backward(self, g, saved, w, need_x, need_w, need_b):
        """(gx, gw, gb) of layer_norm (None where not needed): the weight's and bias's column sums, two row
        sums and one kernel for gx, which recompute the normalised input from the saved statistics."""
        x, s, v, inv_n, eps = saved
        if g.dtype.char == "e":                  # float16: the forward saved float32 statistics
            gs = self.layer_norm_backward(g.astype(np.float32), saved, _f32(w), need_x, need_w, need_b)
            return tuple(None if a is None else a.astype(g.dtype) for a in gs)
        dt = x.dtype
        gx = gw = gb = None
        with self._cuda_device:
            if need_w:
                gw = self._nk("ln_g_xhat", dt)(g, x, s, v, inv_n, eps, axis=0)
            if need_b:
                gb = g.sum(axis=0)
            if need_x:
                if w is not None:
                    c1 = self._nk("ln_gw", dt)(g, w, axis=1, keepdims=True)
                    c2 = self._nk("ln_gw_xhat", dt)(g, w, x, s, v, inv_n, eps, axis=1, keepdims=True)
                    gx = self._nk("ln_grad_x_w", dt)(g, w, x, s, v, c1, c2, inv_n, eps)
                else:
                    c1 = g.sum(axis=1, keepdims=True)
                    c2 = self._nk("ln_g_xhat", dt)(g, x, s, v, inv_n, eps, axis=1, keepdims=True)
                    gx = self._nk("ln_grad_x", dt)(g, x, s, v, c1, c2, inv_n, eps)
        return gx, gw, gb

    def rms_norm(self, x, w, eps):
        """(x / sqrt(mean(x^2) + eps) * w per row, saved (x, v, inv_n, eps)): a row sum of squares and one
        kernel. float16 runs in float32."""
        if x.dtype.char == "e":
            y, saved = self.rms_norm(x.astype(np.float32), _f32(w), eps)
            return y.astype(x.dtype), saved
        rows, n = x.shape
        inv_n = 1.0 / builtins.max(n, 1)
        with self._cuda_device:
            v = self._nk("rms_squares", x.dtype)(x, axis=1, keepdims=True)
            if w is not None:
                y = self._nk("rms_forward_w", x.dtype)(x, v, w, inv_n, eps)
            else:
                y = self._nk("rms_forward", x.dtype)(x, v, inv_n, eps)
        return y, (x, v, inv_n, eps)

    def rms_norm_backward(self, g, saved, w, need_x, need_w):
        """(gx, gw) of rms_norm: the weight's column sums, one row sum and one kernel for the input's."""
        x, v, inv_n, eps = saved
        if g.dtype.char == "e":                      # float16: the forward saved float32 statistics
            gs = self.rms_norm_backward(g.astype(np.float32), saved, _f32(w), need_x, need_w)
            return tuple(None if a is None else a.astype(g.dtype) for a in gs)
        dt = x.dtype
        gx = gw = None
        with self._cuda_device:
            if need_w:
                gw = self._nk("rms_g_xhat", dt)(g, x, v, inv_n, eps, axis=0)
            if need_x:
                if w is not None:
                    c = self._nk("rms_gw_xhat", dt)(g, w, x, v, inv_n, eps, axis=1, keepdims=True)
                    gx = self._nk("rms_grad_x_w", dt)(g, w, x, v, c, inv_n, eps)
                else:
                    c = self._nk("rms_g_xhat", dt)(g, x, v, inv_n, eps, axis=1, keepdims=True)
                    gx = self._nk("rms_grad_x", dt)(g, x, v, c, inv_n, eps)
        return gx, gw


def _f32(a):
    return None if a is None else a.astype(np.float32)
