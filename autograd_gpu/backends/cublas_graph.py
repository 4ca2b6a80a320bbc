"""Matrix products that a CUDA graph can capture.

CuPy refuses every cuBLAS call while a stream captures ("calling cuBLAS API during stream capture is
currently unsupported"), although cuBLAS itself captures fine on a handle with a workspace of its
own (that is how PyTorch's graphs hold matmuls). So while the CUDA fuser captures a replay
(fuse_cuda.py), the backend's matmul comes here: one ``cublasGemmStridedBatchedEx`` per product,
called through ctypes on our own handle and workspace, for float16/32/64 and complex operands in
every layout cuBLAS reads directly (row-major, or its transpose, with any leading dimension);
other layouts and broadcast batches are made contiguous first, which is a capturable kernel too.

Eager products come here too where CuPy would launch more than the product (CupyBackend.matmul): a
batched product with a transposed or strided operand (CuPy copies it first) or a broadcast batch (CuPy
builds pointer tables with a kernel per batch dim for each of three arrays; here a batch stride of 0).

Only the library call differs between a real GPU (``_Cublas``) and the test suite's CuPy stand-in,
which simulates the same call on its host buffers (``set_library``): the layout logic below runs
in CI.
"""
import ctypes
import math

import numpy as np

# cudaDataType and cublasComputeType_t codes, the alpha/beta scalar type that compute type takes
_TYPES = {"e": (2, 68, ctypes.c_float), "f": (0, 68, ctypes.c_float), "d": (1, 70, ctypes.c_double),
          "F": (4, 68, ctypes.c_float * 2), "D": (5, 70, ctypes.c_double * 2)}
OP_N, OP_T = 0, 1
_GEMM_DEFAULT = -1
_WORKSPACE = 32 << 20            # cuBLAS's recommendation for Hopper: 32 MiB per handle

_library = None                  # the stand-in's simulation, when the test suite installs one


def set_library(lib):
    """Use ``lib`` (an object with ``gemm``, as ``_Cublas``) instead of the GPU's cuBLAS; None: cuBLAS."""
    global _library
    _library = lib


def supported(dtype):
    return dtype.char in _TYPES


def matmul(xp, a, b, out=None, capture=False):
    """``xp.matmul(a, b, out=out)`` without going through CuPy's cuBLAS wrappers (so it runs while a
    stream captures: ``capture``, which puts the product on our handle's own workspace): NumPy's matmul
    rules (1-d operands, broadcast batches), float and complex only."""
    dt = np.result_type(a.dtype, b.dtype)
    if not supported(dt):
        raise TypeError(f"matmul through cuBLAS by pointer: expected float16/32/64 or complex operands, got "
                        f"{a.dtype} and {b.dtype}")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    a, b = a.astype(dt, copy=False), b.astype(dt, copy=False)
    va, vb = a.ndim == 1, b.ndim == 1
    a = a.reshape(1, -1) if va else a
    b = b.reshape(-1, 1) if vb else b
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul: mismatch in the contracted dimension: {a.shape} @ {b.shape} "
                         f"({k} != {k2})")
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    # the product lands in ``out`` itself where cuBLAS can write it (row-major, the result's dtype, apart
    # from both operands), else in a fresh array copied into ``out``
    direct = (out is not None and not (va or vb) and out.dtype == dt and tuple(out.shape) == batch + (m, n)
              and out.flags.c_contiguous and not xp.may_share_memory(out, a) and not xp.may_share_memory(out, b))
    res = out if direct else xp.empty(batch + (m, n), dt)
    nb = math.prod(batch)
    if res.size and k == 0:
        res.fill(0)
    elif res.size:
        am, sa, opa, lda = _operand(xp, a, batch, nb)
        bm, sb, opb, ldb = _operand(xp, b, batch, nb)
        # row-major C = A @ B is column-major C^T = B^T @ A^T: cuBLAS's first operand is our b
        lib = _library or _cublas(xp)
        lib.gemm(opb, opa, n, m, k, bm.data.ptr, ldb, sb, am.data.ptr, lda, sa, res.data.ptr, n, m * n, nb, dt,
                 capture=capture)
    if va or vb:                                     # the 1-d operands' dimension goes again
        res = res.reshape(batch + (() if vb else (n,)) if va else batch + (m,))
    if out is None or direct:
        return res
    xp.copyto(out, res)
    return out


def reads_as_stored(x):
    """Whether one strided-batched product reads ``x`` (..., r, c) as stored: its batch dims collapse to one
    stride (size-1 dims aside, none broadcast) and each matrix is row- or column-major. Attention's heads,
    (N, H, L, E) views of (N, L, H, E) memory, do not: CuPy's matmul and ``matmul`` here copy such an operand."""
    shape, strides = x.shape, x.strides
    r, c = shape[-2:]
    s0, s1 = strides[-2:]
    isz = x.itemsize
    if not ((s1 == isz or c == 1) and s0 >= max(c, 1) * isz or (s0 == isz or r == 1) and s1 >= max(r, 1) * isz):
        return False
    step = None
    for n, st in zip(reversed(shape[:-2]), reversed(strides[:-2])):
        if n == 1:
            continue
        if st == 0 or step is not None and st != step:
            return False
        step = st * n
    return True


def _operand(xp, x, batch, nb):
    """``x`` (..., r, c) as cuBLAS reads it: (array, batch stride in elements (0: one matrix for every
    batch), operation, leading dimension)."""
    r, c = x.shape[-2:]
    if math.prod(x.shape[:-2]) == 1:
        x3, stride = x.reshape(1, r, c), 0
    else:
        if tuple(x.shape[:-2]) != batch:
            x = xp.broadcast_to(x, batch + (r, c))
        x3 = x.reshape(nb, r, c)                     # a view where the batch dims collapse, else a copy
        stride = None
    isz = x3.dtype.itemsize
    bs, s0, s1 = (s // isz if s % isz == 0 else -1 for s in x3.strides)
    if stride is None and (bs < 0 or nb > 1 and bs == 0):
        x3, stride = xp.ascontiguousarray(x3), r * c
        bs, s0, s1 = r * c, c, 1
    stride = bs if stride is None else stride
    if (s1 == 1 or c == 1) and s0 >= max(c, 1):
        return x3, stride, OP_N, s0                  # row-major: column-major c x r, the transpose
    if (s0 == 1 or r == 1) and s1 >= max(r, 1):
        return x3, stride, OP_T, s1                  # a transposed row-major matrix: read as stored
    x3 = xp.ascontiguousarray(x3)
    return x3, (r * c if stride else 0), OP_N, max(c, 1)


# -- cuBLAS through ctypes ---------------------------------------------------------------------------
_handles = {}


def prepare(xp):
    """Make the current GPU's handle and workspace now, before a capture: made during one, the workspace
    would come from that graph's private memory pool."""
    if _library is None:
        _cublas(xp)


def _cublas(xp):
    dev = xp.cuda.Device().id
    lib = _handles.get(dev)
    if lib is None:
        lib = _handles[dev] = _Cublas(xp)
    return lib


class _Cublas:
    """A cuBLAS handle of our own on the current GPU, with its own workspace (so a capture never
    allocates), its stream set to the current stream at every call."""

    def __init__(self, xp):
        xp.cuda.device.get_cublas_handle()           # CuPy loads its cuBLAS: use the same library
        self.xp, self.dll = xp, ctypes.CDLL(_find_library())
        vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        self.dll.cublasGemmStridedBatchedEx.argtypes = (
            [vp, i, i, i, i, i]                      # handle, transa, transb, m, n, k
            + [vp, vp, i, i, ll]                     # alpha, A, Atype, lda, strideA
            + [vp, i, i, ll]                         # B, Btype, ldb, strideB
            + [vp, vp, i, i, ll]                     # beta, C, Ctype, ldc, strideC
            + [i, i, i])                             # batchCount, computeType, algo
        self.dll.cublasSetStream_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self.dll.cublasSetWorkspace_v2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        handle = ctypes.c_void_p()
        self._check(self.dll.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.handle = handle
        self.workspace = xp.empty(_WORKSPACE, dtype=np.uint8)
        self._check(self.dll.cublasSetWorkspace_v2(handle, self.workspace.data.ptr, _WORKSPACE), "cublasSetWorkspace")
        # alpha = 1, beta = 0 in the compute type's scalar type (host pointers: read when captured)
        self.one = {ch: t(1, 0) if ch in "FD" else t(1) for ch, (_, _, t) in _TYPES.items()}
        self.zero = {ch: t() for ch, (_, _, t) in _TYPES.items()}
        self.stream = None                           # (stream, own workspace) the handle is set to (None: not yet)

    def gemm(self, opa, opb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch, dtype, capture=False):
        """One cublasGemmStridedBatchedEx on the current stream. While a graph captures (``capture``) on our
        workspace, which the graph then holds (cuBLAS would otherwise allocate during the capture); outside
        one on cuBLAS's default workspace pool, as CuPy's own products run: one workspace of ours shared by
        products on two streams at once would be a race (cuBLAS's documentation of cublasSetWorkspace)."""
        code, compute, _ = _TYPES[dtype.char]
        state = (self.xp.cuda.get_current_stream().ptr, capture)
        if state != self.stream:
            # cublasSetStream also puts the handle back on cuBLAS's default workspace pool (cuBLAS docs): ours is
            # set again after it for a capture
            self._check(self.dll.cublasSetStream_v2(self.handle, state[0]), "cublasSetStream")
            if capture:
                self._check(self.dll.cublasSetWorkspace_v2(self.handle, self.workspace.data.ptr, _WORKSPACE),
                            "cublasSetWorkspace")
            self.stream = state
        self._check(self.dll.cublasGemmStridedBatchedEx(
            self.handle, opa, opb, m, n, k, ctypes.byref(self.one[dtype.char]), a, code, lda, sa, b, code, ldb, sb,
            ctypes.byref(self.zero[dtype.char]), c, code, ldc, sc, batch, compute, _GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx")

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"{what} failed with cuBLAS status {status}")


def _find_library():
    """The libcublas CuPy loaded (found in this process's memory map), else the usual sonames."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(" ", 1)[-1].strip()
                if "/libcublas.so" in path:
                    return path
    except OSError:
        pass
    for name in ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"):
        try:
            ctypes.CDLL(name)
            return name
        except OSError:
            continue
    raise OSError("cuBLAS (libcublas.so) was not found in this process or on the library path")
