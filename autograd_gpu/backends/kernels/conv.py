"""Fused kernels: max pooling's forward (the max and the index of the first maximum of each window) and its
scatter back onto disjoint windows. See backends/kernels/__init__.py for the contract.

Both work on kernel taps: ``max_pool_windows`` takes the (N, C, kh, kw, OH, OW) strided view of the
(unpadded) input whose [.., i, j, y, x] is tap (i, j) of output pixel (y, x); ``max_pool_scatter`` takes
the gradient, the per-window tap index and the same (N, C, kh, kw, OH, OW) view of the input gradient's
buffer, the taps disjoint (stride >= the dilated kernel). The CuPy kernels read and write that strided view
directly, as one raw parameter (CuPy's raw indexing is C-order whatever the strides: tap t of window q is
at (q // P * kh*kw + t) * P + q % P, P = OH * OW), so no stacked copy of the windows and no view per tap is
made (a CuPy view costs the host several us; these were 16 of the small CNN step's 23).

``conv_lean`` (a flag, as activations' ``softmax_takes_scale``): True where a launch costs more than a pass
(CUDA), so ops/conv.py adds a convolution's bias after the product (1 launch, not a ones row and a
concatenated weight: 3) and forms the stride-1 input gradient as one convolution of the zero-padded output
gradient with the flipped weight (5 launches, not a product and kh*kw adds into a grid: kh*kw + 4). The CPU
keeps the formulations that are fastest there.

Launches on CUDA per max-pooling layer (kh*kw <= 25 taps, no padding): forward 1 [3 + 3 (kh*kw - 1): a
stacked copy, a max and the first-max passes], backward 1 when the windows tile the input, 2 otherwise [1 +
2 kh*kw]. Larger windows run the NumPy twins' ops.
"""
import numpy as np

_MAX_TAPS = 25           # up to 5x5 windows get one kernel; larger ones run the unfused ops


def _first_max(slabs, y):
    """Per window, the tap index of the first maximum of the (taps, ...) stack: the count of leading taps
    that miss it (ops/conv.py's rule without padding; NaN windows give taps - 1, or 1 for one tap)."""
    k = slabs.shape[0]
    miss = slabs[0] != y
    idx = miss.astype("int16" if k > 127 else "int8")
    for i in range(1, k - 1):
        miss &= slabs[i] != y
        idx += miss
    return idx


class NumpyConv:
    """NumPy implementations (mixed into NumpyBackend): the unfused ops, in the passes ops/conv.py made."""

    conv_lean = False

    def max_pool_windows(self, v, need_idx):
        """(y, idx) for the (N, C, kh, kw, OH, OW) window view v: y the max of each window (NaN if any tap
        is NaN), idx (int8; int16 past 127 taps) the first tap equal to it, or None unless need_idx."""
        kh, kw = v.shape[2:4]
        slabs = self.xp.ascontiguousarray(v.transpose(2, 3, 0, 1, 4, 5)).reshape((kh * kw,) + v.shape[:2] + v.shape[4:])
        y = slabs.max(axis=0)
        return y, (_first_max(slabs, y) if need_idx else None)

    def max_pool_scatter(self, g, idx, wv):
        """Write g * (idx == k) into tap k of the (N, C, kh, kw, OH, OW) window view ``wv`` of the input
        gradient's buffer (the taps disjoint) for every tap k."""
        kh, kw = wv.shape[2:4]
        for k in range(kh * kw):
            self.xp.multiply(g, idx == k, out=wv[:, :, k // kw, k % kw])


# -- CUDA ------------------------------------------------------------------------------------------------
_built = {}


def _pool_kernel(xp, k, need_idx):
    """y = the max of the k taps a0..a{k-1} of each window of the raw window view ``w`` (the first of equal
    ones; a NaN tap makes it NaN), and with need_idx idx = the count of leading taps that miss y (as
    _first_max); the loop runs over y, ``P`` = OH * OW."""
    key = (xp, "pool", k, need_idx)
    kern = _built.get(key)
    if kern is None:
        ins = "raw T w, int64 P"
        body = [f"ptrdiff_t q = (i / P) * {k} * P + i % P;"] + [f"T a{t} = w[q + {t} * P];" for t in range(k)]
        body += ["T v = a0;"] + [f"v = (a{i} > v || a{i} != a{i}) ? a{i} : v;" for i in range(1, k)] + ["y = v;"]
        outs = "T y"
        if need_idx:
            outs += ", int8 idx"
            body += ["bool m = a0 != v;", "int n = m;"]
            for i in range(1, k - 1):
                body += [f"m = m && (a{i} != v);", "n += m;"]
            body.append("idx = n;")
        kern = _built[key] = xp.ElementwiseKernel(ins, outs, "\n".join(body), f"ag_max_pool_{k}")
    return kern


def _scatter_kernel(xp, k):
    """Tap t of each window of the raw window view ``w`` = g * (idx == t), for each of the k taps; the loop
    runs over g, ``P`` = OH * OW."""
    key = (xp, "scatter", k)
    kern = _built.get(key)
    if kern is None:
        body = [f"ptrdiff_t q = (i / P) * {k} * P + i % P;"] + [f"w[q + {t} * P] = g * (idx == {t});"
                                                                    for t in range(k)]
        kern = _built[key] = xp.ElementwiseKernel("T g, int8 idx, int64 P", "raw T w", "\n".join(body),
                                                  f"ag_max_pool_scatter_{k}")
    return kern


class CupyConv:
    """CuPy implementations (mixed into CupyBackend): one kernel each, built once per tap count."""

    conv_lean = True

    def max_pool_windows(self, v, need_idx):
        """(y, idx) for the (N, C, kh, kw, OH, OW) window view v (see NumpyConv): one kernel over the taps'
        strided views."""
        kh, kw = v.shape[2:4]
        k = kh * kw
        if k > _MAX_TAPS or v.dtype.kind != "f":
            return NumpyConv.max_pool_windows(self, v, need_idx)
        kern, xp = _pool_kernel(self.xp, k, need_idx), self.xp
        shape = v.shape[:2] + v.shape[4:]
        with self._cuda_device:
            y = xp.empty(shape, dtype=v.dtype)
            if need_idx:
                idx = xp.empty(shape, dtype=np.int8)
                kern(v, shape[2] * shape[3], y, idx)
                return y, idx
            kern(v, shape[2] * shape[3], y)
        return y, None

    def max_pool_scatter(self, g, idx, wv):
        """Write g * (idx == k) into tap k of the window view ``wv`` for every tap k (see NumpyConv): one
        kernel."""
        k = wv.shape[2] * wv.shape[3]
        if k > _MAX_TAPS or idx.dtype != np.int8 or idx.shape != g.shape or g.dtype.kind != "f":
            return NumpyConv.max_pool_scatter(self, g, idx, wv)
        with self._cuda_device:
            _scatter_kernel(self.xp, k)(g, idx, g.shape[2] * g.shape[3], wv)
