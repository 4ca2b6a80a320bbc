"""A simulated ``cublasGemmStridedBatchedEx`` for ``backends/cublas_graph.py``, on the stand-in's host
buffers: column-major matrices at raw device pointers with leading dimensions and batch strides, as
cuBLAS reads them, so CI runs the layout logic that a real GPU runs through ctypes. Strict where
cuBLAS is: a leading dimension under the stored rows is CUBLAS_STATUS_INVALID_VALUE. While a stream
captures, the product is recorded for the graph like any kernel."""
import ctypes

import numpy as np

from . import _core, _kernels

_INVALID_VALUE = 7


class Library:
    """What ``cublas_graph._Cublas`` offers: ``gemm``."""

    def __init__(self):
        self.calls = 0

    def gemm(self, opa, opb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch, dtype, capture=False):
        for v in (opa, opb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise TypeError(f"cublasGemmStridedBatchedEx: expected ints, got {type(v).__name__}")
        if opa not in (0, 1) or opb not in (0, 1) or min(m, n, k, batch) < 0:
            raise RuntimeError(f"cublasGemmStridedBatchedEx failed with cuBLAS status {_INVALID_VALUE}")
        dtype = np.dtype(dtype)
        A = _matrix(a, (m, k) if opa == 0 else (k, m), lda, sa, batch, dtype)
        B = _matrix(b, (k, n) if opb == 0 else (n, k), ldb, sb, batch, dtype)
        C = _matrix(c, (m, n), ldc, sc, batch, dtype)
        self.calls += 1

        def run():
            opA = A if opa == 0 else A.transpose(0, 2, 1)
            opB = B if opb == 0 else B.transpose(0, 2, 1)
            with np.errstate(all="ignore"):
                prod = np.matmul(opA.astype(np.float32) if dtype == np.float16 else opA,
                                 opB.astype(np.float32) if dtype == np.float16 else opB)
            C[...] = prod.astype(dtype, copy=False)
        _core.launch("cublas", "cublasGemmStridedBatchedEx")
        cap = _kernels.capturing()
        if cap is None:
            run()
        else:                                    # recorded; what the capture wrote is put back after it
            cap.saved.setdefault(id(C), (C, C.copy()))
            run()
            cap.ops.append((run, None))


def _matrix(ptr, shape, ld, stride, batch, dtype):
    """``batch`` column-major ``shape`` matrices at ``ptr``: element (b, i, j) at b * stride + i + j * ld."""
    rows, cols = shape
    if ld < max(1, rows) or stride < 0:
        raise RuntimeError(f"cublasGemmStridedBatchedEx failed with cuBLAS status {_INVALID_VALUE} "
                           f"(leading dimension {ld} for {rows} rows, batch stride {stride})")
    isz = dtype.itemsize
    if 0 in (rows, cols, batch):
        return np.empty((batch, rows, cols), dtype)
    n = (batch - 1) * stride + (rows - 1) + (cols - 1) * ld + 1
    base = np.frombuffer((ctypes.c_char * (n * isz)).from_address(ptr), dtype=dtype)
    return np.lib.stride_tricks.as_strided(base, (batch, rows, cols), (stride * isz, isz, ld * isz))
