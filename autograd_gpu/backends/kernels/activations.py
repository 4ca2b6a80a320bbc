"""Fused kernels: activation backwards (GELU, SiLU, tanh, sigmoid, ReLU), bias + ReLU after a product, and
attention's scale + mask + softmax (forward and backward). See backends/kernels/__init__.py for the contract.

Launches on CUDA (one per kernel, reduction or cuBLAS call; the unfused counts in brackets): each activation
backward 1 [tanh 3, sigmoid 3, relu 2, gelu ~10 and silu ~8 as composed ops]; gelu and silu forward 1 [5 and 5];
bias + ReLU 1 [2]; attention's scale + mask + softmax 3 [9, and 1 for the scale on q], its backward 2 [5, and 1
for the scale on dQ].
"""
import math

import numpy as np

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


class NumpyActivations:
    """NumPy implementations (mixed into NumpyBackend): in place on fresh arrays, few passes."""

    # attention's scale goes on q (L x E elements, fewer than the L x S scores when S > E; dK reuses q * scale)
    softmax_takes_scale = False

    def relu_backward(self, g, y):
        """grad * (y > 0): relu's backward from its saved output (equals ReluBackward)."""
        return g * (y > 0)

    def bias_relu(self, y, b):
        """max(y + b, 0) in place in y (a fresh product), b broadcast over the rows: relu(linear) after the
        product (equals the add then relu)."""
        y += b
        return self.xp.maximum(y, 0, out=y)

    def bias_grad(self, g):
        """The column sums of the (rows, n) array g (a bias's gradient) as one BLAS product with a ones
        vector: 2x NumPy's sum over axis 0."""
        ones = self.xp.empty(g.shape[0], dtype=g.dtype)
        ones.fill(1)                               # (np.ones is a Python function around these two calls)
        return self.matmul(ones, g)

    def tanh_backward(self, g, y):
        """grad * (1 - y * y) from tanh's saved output (equals TanhBackward's composed ops)."""
        return _times(1 - y * y, g)

    def sigmoid_backward(self, g, y):
        """grad * (1 - y) * y from sigmoid's saved output."""
        return _times((1 - y) * y, g)

    def gelu(self, x, approximate):
        """(gelu(x), aux) for approximate "none" (x * Phi(x), Phi by erf) or "tanh"; aux is what
        gelu_backward takes back (here Phi(x), or the tanh term, so the backward computes no erf)."""
        if x.ndim == 0:      # NumPy gives 0-d results as scalars, which the in-place steps cannot write
            return tuple(a.reshape(()) for a in self.gelu(x.reshape(1), approximate))
        if approximate == "tanh":
            t = x * x
            t *= _GELU_C * _SQRT_2_OVER_PI
            t += _SQRT_2_OVER_PI
            t *= x
            self.xp.tanh(t, out=t)                            # tanh(sqrt(2/pi) (x + 0.044715 x^3))
            y = t + 1
            y *= x
            y *= 0.5
            return y, t
        cdf = self.erf(x * _SQRT_HALF)
        cdf += 1
        cdf *= 0.5                                       # Phi(x)
        return x * cdf, cdf

    def gelu_backward(self, g, x, aux, approximate):
        """grad * gelu'(x) (exact: Phi(x) + x phi(x); tanh: the tanh form's derivative), aux from gelu (None:
        computed here, as gelu would)."""
        if aux is None:
            aux = self.gelu(x, approximate)[1]
        if x.ndim == 0:
            return self.gelu_backward(g.reshape(1), x.reshape(1), aux.reshape(1), approximate).reshape(())
        if approximate == "tanh":
            t = aux
            d = x * x
            d *= 3 * _GELU_C
            d += 1
            d *= 1 - t * t
            d *= x
            d *= _SQRT_2_OVER_PI                         # x (1 - t^2) sqrt(2/pi) (1 + 3c x^2)
            d += t
            d += 1
            d *= 0.5
            return _times(d, g)
        d = x * x
        d *= -0.5
        self.xp.exp(d, out=d)
        d *= x
        d *= _INV_SQRT_2PI                               # x phi(x)
        d += aux
        return _times(d, g)

    def silu(self, x):
        """(x * sigmoid(x), sigmoid(x)): the second is what silu_backward takes back."""
        s = self.sigmoid(x)
        return x * s, s

    def silu_backward(self, g, x, aux):
        """grad * s (1 + x (1 - s)), s = sigmoid(x) (aux from silu; None: computed here)."""
        if aux is None:
            aux = self.sigmoid(x)
        if x.ndim == 0:
            return self.silu_backward(g.reshape(1), x.reshape(1), aux.reshape(1)).reshape(())
        d = 1 - aux
        d *= x
        d += 1
        d *= aux
        return _times(d, g)

    def attention_softmax(self, s, mask, scale):
        """softmax(s * scale + mask) over the last axis, in place in the float scores s (mask None or an
        additive mask broadcast to s); a row whose scores are all -inf gives zeros, as PyTorch's attention."""
        if scale != 1.0:
            s *= scale
        if mask is not None:
            s += mask
        if s.shape[-1] == 0:       # no keys: nothing to normalise (the output is zeros, as PyTorch's)
            return s
        xp = self.xp
        m = s.max(axis=-1, keepdims=True)
        xp.maximum(m, np.finfo(s.dtype).min, out=m)  # an all -inf row shifts by a finite number: exp gives 0
        s -= m
        xp.exp(s, out=s)
        d = s.sum(axis=-1, keepdims=True)
        xp.maximum(d, 1.0, out=d)  # a live row sums to >= 1 after the max shift; a dead row to 0 -> stays 0
        s /= d
        return s

    def attention_softmax_backward(self, dp, p, scale):
        """dS = p * (dp - sum(dp * p)) * scale over the last axis, in place in dp (the softmax's backward
        from its output p; scale the one attention_softmax took)."""
        dp -= self.row_dot(dp, p)[..., None]
        dp *= p
        if scale != 1.0:
            dp *= scale
        return dp


def _times(t, g):
    """t * g, into t when it is a fresh array of the result's shape and dtype."""
    if t.shape == g.shape and t.dtype == g.dtype and t.ndim:
        t *= g
        return t
    return t * g


# -- CUDA ------------------------------------------------------------------------------------------------
# name: (in_params, out_params, operation); dtype-generic sources, each built per (namespace, dtype) once.
# Constants are typed scalar parameters, so one source serves float32 and float64.
_ELEMENTWISE = {
    "relu_backward": ("g y", "gx", "gx = g * (y > 0)"),
    "bias_relu": ("x b", "y", "y = x + b < 0 ? 0 : x + b"),
    "tanh_backward": ("g y", "gx", "gx = g * (1 - y * y)"),
    "sigmoid_backward": ("g y", "gx", "gx = g * ((1 - y) * y)"),
    "gelu": ("x r", "y", "y = x * (erf(x * r) + 1) / 2"),
    "gelu_backward": ("g x r p", "gx", "gx = g * ((erf(x * r) + 1) / 2 + x * exp(-(x * x) / 2) * p)"),
    "gelu_tanh": ("x c k", "y", "y = x * (tanh((x + x * x * x * c) * k) + 1) / 2"),
    "gelu_tanh_backward": ("g x c k", "gx",
                           "gx = g * ((tanh((x + x * x * x * c) * k) + 1) / 2 + x * (1 - tanh((x + x * x * x * c) * k)"
                           " * tanh((x + x * x * x * c) * k)) * k * (1 + 3 * c * x * x) / 2)"),
    "silu": ("x", "y", "y = x / (1 + exp(-x))"),
    "silu_backward": ("g x", "gx", "gx = g / (1 + exp(-x)) * (1 + x * (1 - 1 / (1 + exp(-x))))"),
    # attention: s the unscaled scores, m the row max of the scaled and masked ones (at least the lowest
    # finite number: a dead row, all -inf, then gives exp 0 and d == 0), d the row sum of the exponentials
    # a dead row (every score -inf: d == 0) gives zeros; a NaN or +inf score keeps the row NaN, as unfused
    "softmax_masked": ("s mask m d scale", "p", "p = d == 0 ? 0 : exp(s * scale + mask - m) / d"),
    "softmax_scaled": ("s m d scale", "p", "p = d == 0 ? 0 : exp(s * scale - m) / d"),
    "softmax_backward": ("dp p r scale", "ds", "ds = p * (dp - r) * scale"),
}
_REDUCTIONS = {   # name: (in_params, out_params, map_expr[, reduce_expr]); sums unless said
    "max_masked": ("s mask scale", "m", "s * scale + mask", "max(a, b)"),
    "max_scaled": ("s scale", "m", "s * scale", "max(a, b)"),
    "exp_sum_masked": ("s mask m scale", "d", "exp(s * scale + mask - m)"),
    "exp_sum_scaled": ("s m scale", "d", "exp(s * scale - m)"),
    "dot": ("a b", "d", "a * b"),
}
_built = {}


def _params(names, dt):
    return ", ".join(f"{dt} {n}" for n in names.split())


def kernel(xp, name, dtype, elementwise=_ELEMENTWISE, reductions=_REDUCTIONS):
    """The ElementwiseKernel or ReductionKernel (a sum) ``name`` of the tables (by default the ones above;
    norms.py passes its own) for ``dtype``, built on first use and cached (per array namespace: the CuPy
    stand-in and CuPy each get their own)."""
    key = (xp, name, dtype.char)
    k = _built.get(key)
    if k is None:
        dt = np.dtype(dtype).name
        if name in elementwise:
            ins, outs, op = elementwise[name]
            k = xp.ElementwiseKernel(_params(ins, dt), _params(outs, dt), op, f"ag_{name}")
        else:
            ins, outs, op, *red = reductions[name]
            # a max starts from the lowest finite number (never -inf), a sum from 0; float16 reduces in
            # float32, as CuPy's own sum does
            identity = repr(float(np.finfo(dtype).min)) if red else "0"
            k = xp.ReductionKernel(_params(ins, dt), _params(outs, dt), op, red[0] if red else "a + b",
                                   f"{outs} = a", identity, f"ag_{name}",
                                   reduce_type="float" if dt == "float16" else None)   # a C type name
        _built[key] = k
    return k


class CupyActivations:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached."""

    # the scale costs nothing inside the softmax kernel, and dS then carries it (no pass over q or dQ)
    softmax_takes_scale = True

    # relu, bias_relu, tanh, sigmoid and silu look their kernel up inline, ``_built.get(key) or kernel(...)``
    # (a kernel object is always true): once built, no Python call, so each costs CUDA no more Python calls
    # than its NumPy twin costs the CPU (issue 23: Python calls per op on CUDA no more than on the CPU).
    def _k(self, name, dtype):
        return _built.get((self.xp, name, dtype.char)) or kernel(self.xp, name, dtype)

    def relu_backward(self, g, y):
        """grad * (y > 0): relu's backward from its saved output (equals ReluBackward). One kernel."""
        k = _built.get((self.xp, "relu_backward", g.dtype.char)) or kernel(self.xp, "relu_backward", g.dtype)
        with self._cuda_device:
            return k(g, y)

    def bias_relu(self, y, b):
        """max(y + b, 0) in place in y, b broadcast over the rows (equals the add then relu). One kernel."""
        k = _built.get((self.xp, "bias_relu", y.dtype.char)) or kernel(self.xp, "bias_relu", y.dtype)
        with self._cuda_device:
            return k(y, b, y)

    def bias_grad(self, g):
        """The column sums of the (rows, n) array g (a bias's gradient): one reduction."""
        with self._cuda_device:
            return g.sum(axis=0)

    def tanh_backward(self, g, y):
        """grad * (1 - y * y) from tanh's saved output. One kernel."""
        k = _built.get((self.xp, "tanh_backward", g.dtype.char)) or kernel(self.xp, "tanh_backward", g.dtype)
        with self._cuda_device:
            return k(g, y)

    def sigmoid_backward(self, g, y):
        """grad * (1 - y) * y from sigmoid's saved output. One kernel."""
        k = _built.get((self.xp, "sigmoid_backward", g.dtype.char)) or kernel(self.xp, "sigmoid_backward", g.dtype)
        with self._cuda_device:
            return k(g, y)

    def gelu(self, x, approximate):
        """(gelu(x), None): one kernel; the backward recomputes from x (free inside its kernel)."""
        if x.dtype.char == "e":                 # float16: through float32 (CUDA has no half erf)
            return self.gelu(x.astype(np.float32), approximate)[0].astype(x.dtype), None
        with self._cuda_device:
            if approximate == "tanh":
                return self._k("gelu_tanh", x.dtype)(x, _GELU_C, _SQRT_2_OVER_PI), None
            return self._k("gelu", x.dtype)(x, _SQRT_HALF), None

    def gelu_backward(self, g, x, aux, approximate):
        """grad * gelu'(x): one kernel."""
        if g.dtype.char == "e":
            return self.gelu_backward(g.astype(np.float32), x.astype(np.float32), aux, approximate).astype(g.dtype)
        with self._cuda_device:
            if approximate == "tanh":
                return self._k("gelu_tanh_backward", g.dtype)(g, x, _GELU_C, _SQRT_2_OVER_PI)
            return self._k("gelu_backward", g.dtype)(g, x, _SQRT_HALF, _INV_SQRT_2PI)

    def silu(self, x):
        """(x * sigmoid(x), None): one kernel."""
        k = _built.get((self.xp, "silu", x.dtype.char)) or kernel(self.xp, "silu", x.dtype)
        with self._cuda_device:
            return k(x), None

    def silu_backward(self, g, x, aux):
        """grad * s (1 + x (1 - s)), s = sigmoid(x): one kernel."""
        k = _built.get((self.xp, "silu_backward", g.dtype.char)) or kernel(self.xp, "silu_backward", g.dtype)
        with self._cuda_device:
            return k(g, x)

    def attention_softmax(self, s, mask, scale):
        """softmax(s * scale + mask) over the last axis, in place in s (the unscaled scores, fresh; mask None
        or additive, broadcast to s); dead rows (all -inf) give zeros. Three launches: the row max and the
        row sum of exponentials of the scaled, masked scores (formed inside each kernel, never stored), and
        the normalisation."""
        dt = s.dtype
        with self._cuda_device:
            if s.size == 0:
                return s
            if mask is None:
                m = self._k("max_scaled", dt)(s, scale, axis=-1, keepdims=True)
                d = self._k("exp_sum_scaled", dt)(s, m, scale, axis=-1, keepdims=True)
                return self._k("softmax_scaled", dt)(s, m, d, scale, s)
            m = self._k("max_masked", dt)(s, mask, scale, axis=-1, keepdims=True)
            d = self._k("exp_sum_masked", dt)(s, mask, m, scale, axis=-1, keepdims=True)
            return self._k("softmax_masked", dt)(s, mask, m, d, scale, s)

    def attention_softmax_backward(self, dp, p, scale):
        """dS = p * (dp - sum(dp * p)) * scale, in place in dp: one reduction and one kernel."""
        dt = dp.dtype
        with self._cuda_device:
            r = self._k("dot", dt)(dp, p, axis=-1, keepdims=True)
            return self._k("softmax_backward", dt)(dp, p, r, scale, dp)
