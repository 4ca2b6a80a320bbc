"""CPU matrix products through Intel MKL's CBLAS, when the ``mkl`` wheel is installed.

NumPy's wheels multiply with OpenBLAS. On a training step's shapes (batch 128, widths 512-784, float32)
OpenBLAS reaches 210-320 GFLOP/s on the project's 2-core Xeon where MKL, PyTorch's CPU BLAS, reaches
330-380: the products were most of why our MLP, LSTM and transformer steps trailed PyTorch's. So the
CPU backend's ``matmul`` hands float32/float64 products to MKL's ``cblas_?gemm`` (and
``cblas_?gemm_batch_strided`` or ``cblas_?gemm_batch`` for stacks of matrices) through ctypes, and NumPy
keeps every case this module does not take: other dtypes, dot products of two vectors, products below
MIN_WORK, stacks of small matrices that are short or broadcast (see matmul), a forked child, no MKL.
Odd strides are copied first, as NumPy does. ``axpy`` (y += alpha x) makes an optimizer's update one
pass; ``pack`` / ``matmul_packed`` serve a matrix multiplied at every step (an LSTM's recurrent weight).

``AUTOGRAD_GPU_CPU_BLAS`` picks: ``auto`` (the default: MKL when found), ``mkl`` (an error when it is
not found) or ``numpy``. ``AUTOGRAD_GPU_MKL`` names the runtime library's path where it is not beside
the interpreter (``<prefix>/lib``, where the wheel puts it).

Threads: MKL runs its products on GNU OpenMP's pool where the system has libgomp (see
_threading_layer), and every product large enough for OpenBLAS to thread comes here (MIN_WORK): two
BLAS pools whose idle threads spin took the cores from each other and made steps 2x slower.
"""
import ctypes
import glob
import os
import site
import sys
from collections import namedtuple

import numpy as np

__all__ = ["matmul", "axpy", "pack", "matmul_packed", "available", "library_path"]

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_FLIP = {_NO_TRANS: _TRANS, _TRANS: _NO_TRANS}
_INTEL, _GNU = 0, 3
# products below this many multiply-adds stay with NumPy: there OpenBLAS runs them on one thread (its
# own cutoff, 65536 x GEMM_MULTITHREAD_THRESHOLD 4) in ~3 us where MKL's call and pool cost ~10 us.
# Larger ones all come here: OpenBLAS's threads, once woken, spin for a while beside MKL's pool.
MIN_WORK = 1 << 18
MIN_STACK = 64          # matrices in a stack of small ones before MKL's batch call takes it (see matmul)

_choice = os.environ.get("AUTOGRAD_GPU_CPU_BLAS", "auto").strip().lower() or "auto"
if _choice not in ("auto", "mkl", "numpy"):
    raise ImportError(f"AUTOGRAD_GPU_CPU_BLAS must be 'auto', 'mkl' or 'numpy', got {_choice!r}")


def _candidates():
    path = os.environ.get("AUTOGRAD_GPU_MKL")
    if path:
        yield path
        return
    dirs = []
    for prefix in (sys.prefix, sys.exec_prefix, sys.base_prefix, getattr(site, "USER_BASE", None)):
        if prefix:
            dirs += [os.path.join(prefix, "lib"), os.path.join(prefix, "Library", "bin")]
    for d in dict.fromkeys(dirs):
        for pattern in ("libmkl_rt.so*", "libmkl_rt*.dylib", "mkl_rt*.dll"):
            yield from sorted(glob.glob(os.path.join(d, pattern)), reverse=True)


_dll_dirs = []


def _load():
    if _choice == "numpy":
        return None, None
    tried = []
    for path in _candidates():
        tried.append(path)
        try:
            if os.name == "nt" and hasattr(os, "add_dll_directory"):
                # Windows looks for the libraries mkl_rt loads itself (core, threading layer, OpenMP)
                # only in the folders named so; the handle is kept, or the folder is dropped again
                _dll_dirs.append(os.add_dll_directory(os.path.dirname(os.path.abspath(path))))
            lib = ctypes.CDLL(path)
            lib.cblas_sgemm_batch_strided, lib.cblas_dgemm_batch_strided   # MKL 2020.2 and later
        except (OSError, AttributeError):
            continue
        return lib, path
    if _choice == "mkl":
        where = ", ".join(tried) or "nothing found under the interpreter's lib/ folders"
        raise ImportError("AUTOGRAD_GPU_CPU_BLAS=mkl, but no usable MKL runtime (libmkl_rt) was found "
                          f"(tried: {where}); install it with `pip install mkl`, or set AUTOGRAD_GPU_MKL "
                          "to its path")
    return None, None


_lib, library_path = _load()


def _threading_layer():
    """GNU OpenMP (libgomp) where the system has it, else Intel's (libiomp5, from the wheel). GNU's: a
    process with PyTorch loaded already runs Intel's pool on one thread (PyTorch's own libgomp answers
    its omp_* calls), and GNU's pool sleeps soon after a product, so NumPy's passes get the cores back."""
    if os.environ.get("MKL_THREADING_LAYER"):
        return None                         # the user's choice, read by MKL itself
    try:
        ctypes.CDLL("libgomp.so.1")
        return _GNU
    except OSError:
        return _INTEL


def _setup(lib):
    c_int, c_void_p = ctypes.c_int, ctypes.c_void_p
    lib.MKL_Set_Interface_Layer.argtypes = [c_int]
    if lib.MKL_Set_Interface_Layer(0) & 1:  # LP64: 32-bit integers, as declared below (MKL_INTERFACE_LAYER
        # could otherwise have picked 64-bit ones). It answers the layer in use: ILP64 (or -1) where another
        # user of this library in the process fixed it first, and our 32-bit arguments would crash MKL
        if _choice == "mkl":
            raise ImportError("AUTOGRAD_GPU_CPU_BLAS=mkl, but the MKL runtime in this process already runs "
                              "64-bit integers (ILP64: MKL_INTERFACE_LAYER or another library using it); "
                              "these products need LP64")
        return {}
    global _layer
    layer = _threading_layer()
    if layer is not None:
        lib.MKL_Set_Threading_Layer.argtypes = [c_int]
        lib.MKL_Set_Threading_Layer.restype = c_int
        _layer = lib.MKL_Set_Threading_Layer(layer)    # the layer in use (one set earlier in the process wins)
    if (_layer == _GNU or os.environ.get("MKL_THREADING_LAYER", "").strip().upper() == "GNU") and \
            hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_forked)
    calls = {}
    for t, real in (("s", ctypes.c_float), ("d", ctypes.c_double)):
        gemm = getattr(lib, f"cblas_{t}gemm")
        gemm.argtypes = [c_int, c_int, c_int, c_int, c_int, c_int, real, c_void_p, c_int, c_void_p, c_int,
                         real, c_void_p, c_int]
        gemm.restype = None
        batch = getattr(lib, f"cblas_{t}gemm_batch_strided")
        batch.argtypes = [c_int, c_int, c_int, c_int, c_int, c_int, real, c_void_p, c_int, c_int,
                          c_void_p, c_int, c_int, real, c_void_p, c_int, c_int, c_int]
        batch.restype = None
        axpy = getattr(lib, f"cblas_{t}axpy")
        axpy.argtypes = [c_int, real, c_void_p, c_int, c_void_p, c_int]
        axpy.restype = None
        group = getattr(lib, f"cblas_{t}gemm_batch")     # pointer arrays: any batch layout
        group.argtypes = [c_int] + [c_void_p] * 13 + [c_int, c_void_p]
        group.restype = None
        size = getattr(lib, f"cblas_{t}gemm_pack_get_size")
        size.argtypes, size.restype = [c_int, c_int, c_int, c_int], ctypes.c_size_t
        pack = getattr(lib, f"cblas_{t}gemm_pack")
        pack.argtypes, pack.restype = [c_int, c_int, c_int, c_int, c_int, c_int, real, c_void_p, c_int, c_void_p], None
        compute = getattr(lib, f"cblas_{t}gemm_compute")
        compute.argtypes = [c_int, c_int, c_int, c_int, c_int, c_int, c_void_p, c_int, c_void_p, c_int, real,
                            c_void_p, c_int]
        compute.restype = None
        calls[np.dtype(real)] = _Calls(gemm, batch, group, axpy, size, pack, compute)
    return calls


def _forked():
    """A forked child leaves its products to NumPy: libgomp's pool does not survive fork (the child's first
    MKL product waits forever on its parent's threads), where OpenBLAS's and Intel's OpenMP restart theirs."""
    _fns.clear()


# one dtype's MKL functions (float32: the cblas_s* ones, float64: cblas_d*)
_Calls = namedtuple("_Calls", "gemm batched group axpy pack_size pack compute")
_layer = None
_fns = _setup(_lib) if _lib is not None else {}
_INT_MAX = 2 ** 31 - 1


def available():
    """True when products go to MKL."""
    return bool(_fns)


def describe():
    """Which library the CPU backend's products go to, for benchmark reports: "MKL 2026.2 (GNU OpenMP)"
    or "NumPy's (OpenBLAS ...)"."""
    if not _fns:
        cfg = getattr(np, "show_config", None)
        try:
            blas = cfg(mode="dicts")["Build Dependencies"]["blas"]
            return f"NumPy's ({blas.get('name')} {blas.get('version')})"
        except Exception:           # an older NumPy without mode=: the name is enough
            return "NumPy's"
    buf = ctypes.create_string_buffer(256)
    _lib.MKL_Get_Version_String(buf, len(buf))
    words = buf.value.decode(errors="replace").split()
    version = next((w.split("-")[0] for w in words if w[:1].isdigit()), "")
    layer = {_GNU: "GNU OpenMP", _INTEL: "Intel OpenMP", 1: "sequential", 2: "PGI OpenMP", 4: "TBB",
             None: os.environ.get("MKL_THREADING_LAYER", "")}      # (1, 2, 4: set first by another user)
    return f"MKL {version}".strip() + f" ({layer.get(_layer, '')})"


def _operand(x, rows, cols, item):
    """(transpose flag, leading dimension) describing the (rows, cols) matrix x (its last two axes) to
    CBLAS in row-major terms, or None when its strides are not a BLAS layout (NumPy then copies)."""
    s0, s1 = x.strides[-2], x.strides[-1]
    if s0 % item or s1 % item:
        return None
    s0, s1 = s0 // item, s1 // item
    if (s1 == 1 or cols == 1) and (rows == 1 or s0 >= cols):
        return _NO_TRANS, (s0 if rows > 1 else cols)
    if (s0 == 1 or rows == 1) and (cols == 1 or s1 >= rows):
        return _TRANS, (s1 if cols > 1 else rows)
    return None


def _batch_stride(x, item):
    """The one stride (in elements) between consecutive matrices of x's leading axes (0 when they are all
    broadcast), or None when those axes are not one evenly strided run."""
    stride = None
    for n, s in zip(reversed(x.shape[:-2]), reversed(x.strides[:-2])):
        if n == 1:
            continue
        if stride is None:
            if s < 0 or s % item:
                return None
            stride, span = s // item, n
        elif s != stride * span * item:
            return None
        else:
            span *= n
    return stride or 0


def _layout(x, rows, cols, item):
    """(x or a contiguous copy of it, its _operand description, its _batch_stride or None): NumPy's
    matmul copies such operands (a broadcast gradient of ones, a strided slice) the same way before
    calling BLAS. A batch that is not one evenly strided run (None) goes by pointer arrays, uncopied."""
    d = _operand(x, rows, cols, item)
    if d is None or not x.flags.aligned:
        x = np.ascontiguousarray(x)
        d = _operand(x, rows, cols, item)
    return x, d, _batch_stride(x, item) if x.ndim > 2 else 0


_OFFSETS = {}


def _pointers(x):
    """The address of each matrix of x's batch, in C order (uint64): byte offsets cached by the batch's
    shape and strides, plus x's address."""
    key = (x.shape[:-2], x.strides[:-2])
    off = _OFFSETS.get(key)
    if off is None:
        off = np.zeros((), np.int64)
        for n, s in zip(*key):
            off = off[..., None] + np.arange(n, dtype=np.int64) * s
        off = off.ravel()
        if len(_OFFSETS) > 256:
            _OFFSETS.clear()
        _OFFSETS[key] = off
    return (off + x.ctypes.data).astype(np.uint64)


def matmul(a, b, out=None):
    """a @ b through MKL, written into ``out`` when given; None when the case is not taken here (the
    caller runs NumPy's matmul instead, which also raises NumPy's errors for mismatched shapes)."""
    if a.size * (b.shape[-1] if b.ndim > 1 else 1) < MIN_WORK:
        return None             # every case below MIN_WORK, decided at once (a tiny product's cost is ~3 us)
    if out is None and a.ndim == 2 and b.ndim == 2:           # the common case, with less Python
        (m, k), (k2, n) = a.shape, b.shape
        fns = _fns.get(a.dtype)
        if fns is not None and b.dtype == a.dtype and k == k2 and m * n * k >= MIN_WORK and \
                a.__class__ is np.ndarray and b.__class__ is np.ndarray and max(m, n, k) <= _INT_MAX // 4:
            item = a.itemsize
            da, db = _operand(a, m, k, item), _operand(b, k, n, item)
            if da is not None and db is not None and a.flags.aligned and b.flags.aligned and \
                    max(da[1], db[1]) <= _INT_MAX:
                c = np.empty((m, n), a.dtype)
                fns.gemm(_ROW_MAJOR, da[0], db[0], m, n, k, 1.0, a.ctypes.data, da[1], b.ctypes.data, db[1],
                         0.0, c.ctypes.data, n)
                return c
    fns = _fns.get(a.dtype)
    if fns is None or b.dtype != a.dtype or a.__class__ is not np.ndarray or b.__class__ is not np.ndarray \
            or a.ndim == 0 or b.ndim == 0 or a.ndim + b.ndim == 2:
        return None                           # (a dot product of two vectors is a reduction: NumPy's)
    if a.ndim == 1 or b.ndim == 1:         # a vector is a one-row (left) or one-column (right) matrix
        if out is not None and not out.ndim:
            return None                       # (NumPy's error: the product has at least one axis)
        o = out
        if o is not None:
            o = o[..., None, :] if a.ndim == 1 else o
            o = o[..., None] if b.ndim == 1 else o
        y = matmul(a[None] if a.ndim == 1 else a, b[:, None] if b.ndim == 1 else b, o)
        if y is None or out is not None:
            return None if y is None else out
        y = y[..., 0, :] if a.ndim == 1 else y
        return y[..., 0] if b.ndim == 1 else y
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    work = m * n * k
    if k != k2 or not work or max(m, n, k) > _INT_MAX // 4:
        return None
    if b.ndim == 2 and a.ndim > 2 and a.flags.c_contiguous and (out is None or out.flags.c_contiguous):
        shape = a.shape[:-1] + (n,)                     # stacked rows times one matrix: one product
        if out is not None and out.shape != shape:
            return None
        y = matmul(a.reshape(-1, k), b, None if out is None else out.reshape(-1, n))
        return None if y is None else (out if out is not None else y.reshape(shape))
    if work < MIN_WORK and (a.shape[:-2] != b.shape[:-2] or a.size // (m * k) < MIN_STACK
                            or work * (a.size // (m * k)) < MIN_WORK):
        # small matrices: NumPy calls OpenBLAS once a matrix, on one thread. A stack of MIN_STACK or more
        # comes here (attention's 32 x 4 heads: 1.9x NumPy's loop), unless one operand is broadcast over
        # it; a convolution's per-sample products (32 of them, one operand broadcast or not) ran slower
        # here than in NumPy's loop inside a training step (185 against 122 us, 134 against 74)
        return None
    batch = a.shape[:-2]
    if a.shape[:-2] != b.shape[:-2]:
        try:
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            return None
        a, b = np.broadcast_to(a, batch + (m, k)), np.broadcast_to(b, batch + (k, n))
    item = a.dtype.itemsize
    (a, da, sa), (b, db, sb) = _layout(a, m, k, item), _layout(b, k, n, item)
    count = _prod(batch)
    if da is None or db is None or max(da[1], db[1], sa or 0, sb or 0, count) > _INT_MAX:
        return None
    shape = batch + (m, n)
    if out is None:
        c, dc, sc = np.empty(shape, a.dtype), (_NO_TRANS, n), m * n
        sc = sc if sc <= _INT_MAX else None             # (ctypes would wrap it: by pointers)
    else:
        # any BLAS layout (attention writes into views laid out for the permute that follows)
        if out.__class__ is not np.ndarray or out.shape != shape or out.dtype != a.dtype or \
                not out.flags.writeable or not out.flags.aligned or \
                np.may_share_memory(out, a) or np.may_share_memory(out, b):
            return None
        c, dc, sc = out, _operand(out, m, n, item), _batch_stride(out, item) if out.ndim > 2 else 0
        if dc is None or max(dc[1], sc or 0) > _INT_MAX or \
                any(s == 0 and d > 1 for d, s in zip(out.shape[:-2], out.strides[:-2])):
            return None                                 # (a broadcast out: matrices written twice)
        if sc and sc < dc[1] * (m if dc[0] == _NO_TRANS else n):
            sc = None       # matrices interleaved ((L, H, E) seen as (H, L, E)): ?gemm_batch_strided rejects
                            # a stridec below ldc * rows (prints an error, writes nothing): by pointers
    if not count:
        return c
    if dc[0] == _NO_TRANS:
        ops, dims, lds = (a, b), (da[0], db[0], m, n, k), (da[1], db[1], dc[1])
        strides = (sa, sb, sc)
    else:                                           # c stored transposed: c.T = b.T @ a.T
        ops, dims, lds = (b, a), (_FLIP[db[0]], _FLIP[da[0]], n, m, k), (db[1], da[1], dc[1])
        strides = (sb, sa, sc)
    x, y = ops
    if count == 1:
        fns.gemm(_ROW_MAJOR, *dims, 1.0, x.ctypes.data, lds[0], y.ctypes.data, lds[1], 0.0, c.ctypes.data,
                 lds[2])
    elif None not in strides:
        fns.batched(_ROW_MAJOR, *dims, 1.0, x.ctypes.data, lds[0], strides[0], y.ctypes.data, lds[1],
                    strides[1], 0.0, c.ctypes.data, lds[2], strides[2], count)
    else:                                           # batch axes not one run each: one address per matrix
        px, py, pc = _pointers(x), _pointers(y), _pointers(c)
        ints = np.array(dims + lds + (count,), np.int32)
        reals = np.array([1.0, 0.0], a.dtype)
        i, r = ints.ctypes.data, reals.ctypes.data
        fns.group(_ROW_MAJOR, i, i + 4, i + 8, i + 12, i + 16, r, px.ctypes.data, i + 20, py.ctypes.data,
                  i + 24, r + item, pc.ctypes.data, i + 28, 1, i + 32)
    return c


def _prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


AXPY_MIN = 1 << 14      # smaller updates stay with NumPy (its two passes then cost less than this call)


def axpy(y, alpha, x):
    """y += alpha * x in place through MKL's ?axpy; False (nothing done) when the case is not taken here:
    another dtype, a size below AXPY_MIN, shapes that differ (broadcasting), arrays that are not both
    contiguous, or memory they share."""
    fns = _fns.get(y.dtype)
    if fns is None or x.dtype != y.dtype or x.shape != y.shape or y.size < AXPY_MIN or y.size > _INT_MAX \
            or x.__class__ is not np.ndarray or y.__class__ is not np.ndarray or not y.flags.c_contiguous \
            or not x.flags.c_contiguous or not y.flags.writeable or np.may_share_memory(x, y):
        return False
    fns.axpy(y.size, float(alpha), x.ctypes.data, 1, y.ctypes.data, 1)
    return True


# ---------------------------------------------------------------------------------------------------------
# Packed products: one matrix multiplied again and again (a recurrent layer's weight, once a time step) is
# laid out once in MKL's internal format, and each product skips that step: at batch 32 an LSTM's (32, 256)
# @ (256, 1024) takes 55 us this way against 76 us as a plain product.
_PACKED_B, _PACKED = 162, 151


def pack(b, rows):
    """``b`` (k, n) in MKL's packed format for products (rows, k) @ b: a 1-D array of b's dtype (keep it
    while it is used), or None where this is not taken (no MKL, another dtype, a small product)."""
    fns = _fns.get(b.dtype)
    if fns is None or b.__class__ is not np.ndarray or b.ndim != 2 or rows < 1:
        return None
    k, n = b.shape
    if rows * n * k < MIN_WORK or max(rows, n, k) > _INT_MAX // 4:
        return None
    item = b.itemsize
    d = _operand(b, k, n, item)
    if d is None or not b.flags.aligned or d[1] > _INT_MAX:
        b = np.ascontiguousarray(b)
        d = _operand(b, k, n, item)
    size = -(-fns.pack_size(_PACKED_B, rows, n, k) // item)     # MKL's bytes, in whole elements
    raw = np.empty(size + 64 // item, b.dtype)
    start = (-raw.ctypes.data % 64) // item                # MKL asks for 64-byte aligned packed buffers
    buf = raw[start:start + size]
    fns.pack(_ROW_MAJOR, _PACKED_B, d[0], rows, n, k, 1.0, b.ctypes.data, d[1], buf.ctypes.data)
    return buf


def matmul_packed(a, packed, k, n, out=None):
    """a @ b for ``packed`` = pack(b, rows) with b of shape (k, n) and a of shape (rows, k) (the rows
    ``pack`` was given), into ``out`` (a C-contiguous (rows, n) array) when given."""
    fns = _fns.get(packed.dtype)
    if fns is None:
        raise RuntimeError("matmul_packed: MKL is not in use in this process (a forked child, or it was "
                           "never loaded), but the matrix was packed for it")
    if a.ndim != 2 or a.shape[1] != k or a.dtype != packed.dtype:
        raise ValueError(f"matmul_packed: expected a (rows, {k}) {packed.dtype} matrix, got {a.shape} {a.dtype}")
    rows = a.shape[0]
    d = _operand(a, rows, k, a.itemsize)
    if d is None or not a.flags.aligned:
        a = np.ascontiguousarray(a)
        d = _operand(a, rows, k, a.itemsize)
    if out is None:
        out = np.empty((rows, n), a.dtype)
    elif out.shape != (rows, n) or out.dtype != a.dtype or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError(f"matmul_packed: out must be a writeable C-contiguous {(rows, n)} {a.dtype} array, "
                         f"got {out.shape} {out.dtype}")
    fns.compute(_ROW_MAJOR, d[0], _PACKED, rows, n, k, a.ctypes.data, d[1], packed.ctypes.data, n, 0.0,
           out.ctypes.data, n)
    return out
