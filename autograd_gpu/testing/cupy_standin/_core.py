"""The stand-in's device array, its simulated devices, and the transfer log.

Everything here is host NumPy underneath; what makes it a stand-in for CuPy is what it refuses and
what it counts:

- ``ndarray`` is not a ``numpy.ndarray``: ``numpy.asarray`` on it raises ``TypeError`` (CuPy's
  "Implicit conversion to a NumPy array is not allowed"), NumPy arrays passed where CuPy wants
  device arrays raise ``TypeError``, and arrays on another simulated GPU than the current one raise
  ``ValueError`` (CuPy's check: operations run on the current device).
- every device-to-host transfer (``get``, ``item``, ``tolist``, ``float()``, ``int()``, ``bool()``,
  printing, boolean-mask indexing and the other ops that read back a size) and
  every host-to-device copy is logged, so tests can count them.
- CuPy's own differences from NumPy are kept: operations return 0-d arrays, never NumPy scalars;
  out-of-bounds integer-array indices wrap around instead of raising.
"""
import operator
import threading

import numpy as np

N_DEVICES = 2                      # cuda:0 and cuda:1, so device mixing can be tested
_local = threading.local()


def current_device_id():
    return getattr(_local, "device", 0)


def _set_current_device_id(i):
    _local.device = i


# -- the transfer log ---------------------------------------------------------------------------------
class TransferLog:
    """Counts of device-to-host transfers (``d2h``), host-to-device copies (``h2d``) and explicit
    synchronisations (``sync``), each with the list of what caused it (``events``)."""

    def __init__(self):
        self.d2h = self.h2d = self.sync = 0
        self.events = []

    def __repr__(self):
        return f"TransferLog(d2h={self.d2h}, h2d={self.h2d}, sync={self.sync})"


_logs: list = []                    # the logs now open (count_transfers nests)
_hooks: list = []                   # callables hook(kind, what), run before each transfer


def record(kind, what):
    """Log one transfer or sync: ``kind`` is "d2h", "h2d" or "sync", ``what`` says which call."""
    cap = getattr(_local, "capture", None)
    if cap is not None:                 # CUDA refuses transfers and syncs while a stream captures
        cap.refuse(kind, what)
    for hook in _hooks:
        hook(kind, what)
    for log in _logs:
        setattr(log, kind, getattr(log, kind) + 1)
        log.events.append((kind, what))


class count_transfers:
    """``with count_transfers() as log: ...`` then ``log.d2h``, ``log.h2d``, ``log.events``."""

    def __enter__(self):
        self.log = TransferLog()
        _logs.append(self.log)
        return self.log

    def __exit__(self, *exc):
        _logs.remove(self.log)


# -- the launch log ------------------------------------------------------------------------------------
class LaunchLog:
    """What ``count_launches`` saw: ``launches`` (the total), ``by_kind`` ({kind: count}) and ``events``
    (one ``(kind, name)`` per launch, in order). Kinds: "ufunc" (an elementwise ufunc or operator),
    "reduction", "elementwise_kernel" / "reduction_kernel" (user kernels), "cublas", "fill" (memset or
    fill kernel), "copy" (device-to-device), "gather" / "scatter" (index-array kernels), "random",
    "graph" (one CUDA graph launch), "other" (any other CuPy routine that launches, and the scans of
    boolean masks)."""

    def __init__(self):
        self.launches = 0
        self.by_kind = {}
        self.events = []

    def __repr__(self):
        kinds = ", ".join(f"{k}={v}" for k, v in sorted(self.by_kind.items()))
        return f"LaunchLog(launches={self.launches}{', ' if kinds else ''}{kinds})"

    def names(self):
        """{name: count} over the events, most frequent first."""
        out = {}
        for _, name in self.events:
            out[name] = out.get(name, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


_launch_logs: list = []             # the launch logs now open (count_launches nests)


def launch(kind, name, n=1):
    """Log ``n`` kernel launches of ``kind`` made by the CuPy call ``name``."""
    if n <= 0:
        return
    for log in _launch_logs:
        log.launches += n
        log.by_kind[kind] = log.by_kind.get(kind, 0) + n
        log.events.extend([(kind, name)] * n)


class count_launches:
    """``with count_launches() as log: ...`` then ``log.launches``, ``log.by_kind``, ``log.events``: the
    kernel launches CuPy would make for the calls inside (none for allocation, views or transfers)."""

    def __enter__(self):
        self.log = LaunchLog()
        _launch_logs.append(self.log)
        return self.log

    def __exit__(self, *exc):
        _launch_logs.remove(self.log)


def add_hook(fn):
    _hooks.append(fn)


def remove_hook(fn):
    if fn in _hooks:
        _hooks.remove(fn)


def refuse_cublas_under_capture(what):
    """CuPy's cuBLAS wrappers raise while the current stream captures (CuPy 13 and 14)."""
    cap = getattr(_local, "capture", None)
    if cap is not None:
        raise NotImplementedError(f"calling cuBLAS API during stream capture is currently unsupported ({what})")


def kernel(run, args=(), kind="other", name="kernel", count=1):
    """Run one simulated CuPy call ``run()``; while the thread captures a stream (_kernels.py) it is
    recorded for the graph, and the arrays in ``args`` it may write are put back afterwards. The call
    is logged as ``count`` launches of ``kind`` (``count`` may be a function of the result: 0 where
    CuPy returns a view)."""
    cap = getattr(_local, "capture", None)
    res = run() if cap is None else cap.record(run, args)
    if _launch_logs:
        n = count(res) if callable(count) else count
        if type(n) is list:                 # several kinds: [(kind, n)], as the *_launches rules give
            for k, m in n:
                launch(k, name, m)
        else:
            launch(kind, name, n)
    return res


def matmul_kernel(run, args, name, a, b, out=None):
    """``kernel`` for a CuPy matmul of host arrays ``a`` @ ``b``: logged as matmul_launches says."""
    if not all(isinstance(x, np.ndarray) and x.ndim for x in (a, b)):
        return kernel(run, args, "cublas", name)      # scalar operands: CuPy raises, as run() will
    (kind, n), *rest = matmul_launches(a, b, out if isinstance(out, np.ndarray) else None)
    res = kernel(run, args, kind, name, n)
    for kind, n in rest:
        launch(kind, name, n)
    return res


def arrays_in(x):
    """The stand-in arrays in a result (an array, or lists and tuples of them)."""
    if type(x) is ndarray:
        return [x]
    if type(x) in (list, tuple):
        return [a for v in x for a in arrays_in(v)]
    return []


def is_view(res, args):
    """Whether every array in ``res`` shares memory with an array among ``args`` (CuPy made a view,
    launching nothing); False where ``res`` holds no array."""
    got = arrays_in(res)
    if not got:
        return False
    bufs = [a._a for a in arrays_in(args)]
    return all(any(np.may_share_memory(r._a, b) for b in bufs) for r in got)


def scan_launches(n):
    """Kernels CuPy's internal prefix sum launches over ``n`` elements (cupy/_core/_routines_math.pyx,
    ``scan``): one blocked-scan kernel over chunks of 512 (2 x 256 threads); past one chunk, the chunks'
    sums are scanned again (recursively) and added back by one more kernel."""
    k = 1
    while n > 512:
        n = -(-(n - 511) // 512)          # out[511::512]: the last element of each full chunk
        k += 2
    return k


def index_launches(key, shape, value=None, target=None, setting=False):
    """[(kind, n)]: the kernels CuPy 14 launches to get or set ``a[key]`` (NumPy form ``key``, with at least
    one index array; ``shape`` is a's) (cupy/_core/_routines_indexing.pyx):
    - one integer index array: one take (``_take_kernel``) or scatter (``_scatter_*_kernel``) kernel;
    - one boolean mask: its scan (``_prepare_mask_indexing_single``: scan_launches; a mask that does not
      cover ``a`` from its first axis is broadcast and scanned a second time), then one mask kernel; a
      mask that is not C-contiguous is copied by ``ravel`` first;
    - several index arrays (``_prepare_multiple_array_indexing``): the flat index is zero-filled, each
      integer array folded into it by one ``cupy_prepare_array_indexing`` kernel, each boolean mask first
      turned into ``mask.ndim`` integer arrays by ``_ndarray_argwhere`` (its scan and a nonzero kernel;
      the true count is read back), then one take or scatter kernel.
    Setting (``setting``; ``value`` the host buffer of a device value, ``target`` a's dtype) adds the
    cast ``value.astype(a.dtype, copy=False)`` makes when the dtypes differ (a host value is cast as it
    is copied in). Nothing runs where the result is
    empty; that is left to the caller."""
    arrays = [p for p in key if isinstance(p, np.ndarray)]
    out = []
    if len(arrays) == 1:
        m = arrays[0]
        if m.dtype == np.bool_:
            axis = 0
            for p in key:
                if p is m:
                    break
                axis += len(shape) - sum(_axes_used(q) for q in key) if p is Ellipsis else _axes_used(p)
            if m.size:
                out.append(("other", scan_launches(m.size) + (not m.flags.c_contiguous)))
                if not (m.ndim == len(shape) and axis == 0):
                    out.append(("other", scan_launches(int(np.prod(shape)))))
            out.append(("scatter" if setting else "gather", 1))
        else:
            out.append(("scatter" if setting else "gather", 1))
    else:
        folds = 0
        for p in arrays:
            if p.dtype == np.bool_:
                out.append(("other", scan_launches(p.size) + 1 + (not p.flags.c_contiguous)))
                folds += p.ndim
            else:
                folds += 1
        out += [("fill", 1), ("elementwise_kernel", folds), ("scatter" if setting else "gather", 1)]
    if isinstance(value, np.ndarray) and target is not None and value.dtype != target:
        out.append(("copy", 1))
    return out


def _one_ufunc(res):
    """``count`` of a ufunc with no given output: one kernel, none for an empty result."""
    got = arrays_in(res)
    return 0 if got and all(r._a.size == 0 for r in got) else 1


_ONE_UFUNC = _one_ufunc


def overlap_copies(ins, outs):
    """The copies CuPy makes before a ufunc runs (cupy/_core/_kernel.pyx, ``_copy_in_args_if_needed``):
    one of each input array that overlaps a given output (``may_share_bounds``) without being that very
    array object. ``ins``/``outs``: the call's stand-in arrays (others are skipped)."""
    n = 0
    for x in ins:
        if type(x) is ndarray:
            for o in outs:
                if type(o) is ndarray and x is not o and np.may_share_memory(x._a, o._a):
                    n += 1
                    break
    return n


def ufunc_launches(ins, outs=()):
    """``count`` for ``kernel`` of one CuPy ufunc call (cupy/_core/_kernel.pyx, ``ufunc.__call__``): one
    kernel, none where the broadcast shape has a zero (``_contains_zero``: the empty result is returned
    unlaunched), and before it a copy of each input that overlaps a given output (``overlap_copies``)."""
    def count(res):             # called only while a launch log is open; memory layouts do not change
        got = arrays_in(res) or [o for o in outs if type(o) is ndarray]
        if got and all(r._a.size == 0 for r in got):
            return 0
        copies = overlap_copies(ins, outs) if outs else 0
        return [("copy", copies), ("ufunc", 1)] if copies else 1
    return count


def setitem_launches(view, value):
    """[(kind, n)] for ``a[basic index] = value`` with a device array ``value`` (host buffers: ``view`` is
    ``a[index]``) (cupy/_core/_routines_indexing.pyx, ``_scatter_op`` 'update'): ``value`` loses its leading
    unit dims (``_squeeze_leading_unit_dims``); of the same shape and strides as the view it is skipped
    when it is the view's memory, copied by one ``cudaMemcpyAsync`` when the view is C-contiguous and of
    its dtype; otherwise one ``elementwise_copy`` (a ufunc: nothing for an empty view, and a copy of
    ``value`` first where it overlaps the view)."""
    if view.size == 0:
        return []
    x = value
    while x.ndim and x.shape[0] == 1:
        x = x[0]
    if x.shape == view.shape and x.strides == view.strides:
        if x.__array_interface__["data"][0] == view.__array_interface__["data"][0]:
            return []
        if view.flags.c_contiguous and x.dtype == view.dtype:
            return [("copy", 1)]
    return [("copy", 1 + bool(np.may_share_memory(x, view)))]


# CuPy 14 takes CUPY_ACCELERATORS="cub" by default on CUDA (cupy#6549; cupy/_core/_accelerator.pyx): the
# routine reductions try cupy.cuda.cub first, and the reduction kernels CUB's block reduction.
_CUB_SUM_DTYPES = frozenset(np.dtype(t) for t in ("int64", "uint64", "float16", "float32", "float64",
                                                   "complex64", "complex128"))
_CUB_DTYPES = _CUB_SUM_DTYPES | frozenset(np.dtype(t) for t in ("int8", "uint8", "int16", "uint16", "int32",
                                                                 "uint32"))
_CUB_ROUTINES = {"sum": "sum", "prod": "sum", "mean": "sum", "max": "max", "min": "max", "amax": "max",
                 "amin": "max", "argmax": "arg", "argmin": "arg"}


def _reduce_axes(ndim, axis):
    if axis is None:
        return tuple(range(ndim))
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    return tuple(sorted(int(x) % ndim if ndim else int(x) for x in axes))


def cub_device_reduce_launches(n, itemsize):
    """Kernels CUB's DeviceReduce launches over ``n`` items (cub/device/dispatch/dispatch_reduce.cuh):
    one single-tile kernel where the items fit one tile, else a per-block pass and the single-tile pass.
    The tile is taken as CUB's Policy600 one (256 threads x 16 four-byte items, fewer items for wider
    types); a tuning with larger tiles would make one launch of some counted here as two."""
    tile = 256 * max(1, min(16, 64 // max(int(itemsize), 1)))
    return 1 if n <= tile else 2


def cub_block_reduction_launches(a, axes, n_in=1):
    """Kernels a CuPy reduction kernel launches (cupy/_core/_reduction.pyx ``_call`` with try_use_cub,
    and cupy/_core/_cub_reduction.pyx): CUB's block reduction takes one input array and one output, C-
    or F-contiguous, reduced over trailing (C) or leading (F) axes; over every axis (a full reduction)
    it runs two passes (``_cub_two_pass_launch``), otherwise one kernel as the plain reduction does.
    CuPy skips CUB when it finds no nvcc (``_can_use_cub_block_reduction``), which depends on the
    install: the higher count is kept."""
    full = len(axes) == a.ndim and a.ndim > 0
    if n_in == 1 and full and a.size > 0 and (a.flags.c_contiguous or a.flags.f_contiguous):
        return 2
    return 1


def reduction_launches(name, a, axis=None, dtype=None, out=None, keepdims=False):
    """[(kind, n)]: the kernels CuPy 14 launches for the reduction ``name`` (sum, prod, mean, max/amax,
    min/amin, argmax, argmin, all, any, count_nonzero, nan*) of the host array ``a`` with CUB on
    (CuPy's default):
    - nothing where the result is empty (``_AbstractReductionKernel._call``: ``ret.size == 0``);
    - sum, prod, mean, max, min, argmax, argmin of a C- or F-contiguous array of a type CUB takes
      (cupy/cuda/cub.pyx ``cub_reduction``): over every axis CUB's DeviceReduce
      (cub_device_reduce_launches), after a copy of an F-ordered array of more than one dim
      (``_internal_ascontiguousarray``), then argmax/argmin cast the index (``astype``); over trailing
      (C) or leading (F) axes one DeviceSegmentedReduce (not argmax/argmin); either way ``out=`` is filled
      by one more copy (``out[...] = y``), and mean divides in place (a ``true_divide`` ufunc,
      _routines_statistics.pyx ``_ndarray_mean``);
    - otherwise one reduction kernel (cub_block_reduction_launches: two for a full reduction);
    - mean copies its result by ``astype(dtype_out)`` without ``out`` where it has a dtype_out (a
      ``dtype`` given, or an integer, boolean or float16 input)."""
    axes = _reduce_axes(a.ndim, axis)
    out_size = 1
    for i in range(a.ndim):
        if i not in axes:
            out_size *= a.shape[i]
    if out_size == 0:
        return []
    c, f = a.flags.c_contiguous, a.flags.f_contiguous
    full = len(axes) == a.ndim
    route = _CUB_ROUTINES.get(name)
    sum_dtype = out_dtype = dtype                 # _ndarray_mean's dtype_sum and dtype_out
    if name == "mean":
        if dtype is None and (a.dtype.kind in "iub" or a.dtype == np.float16):
            sum_dtype = np.float64 if a.dtype.kind in "iub" else np.float32
            out_dtype = np.float64 if a.dtype.kind in "iub" else np.float16
        elif dtype is not None and np.dtype(dtype).kind in "iub":
            sum_dtype = np.float64
    mean_cast = name == "mean" and out is None and out_dtype is not None     # result.astype(dtype_out)
    ok = route is not None and (c or f) and a.size > 0 and a.ndim > 0 and (
        sum_dtype is None or np.dtype(sum_dtype) == a.dtype) and (
        a.dtype in (_CUB_SUM_DTYPES if route == "sum" else _CUB_DTYPES))
    if route == "arg" and dtype is not None:
        ok = False
    out_copy = out is not None
    if ok and full:
        n = cub_device_reduce_launches(a.size, a.itemsize)
        return [("copy", (not c) + (route == "arg") + out_copy + mean_cast), ("reduction", n),
                ("ufunc", int(name == "mean"))]
    if ok and route != "arg" and axes and (
            (c and axes == tuple(range(a.ndim - len(axes), a.ndim))) or (f and axes == tuple(range(len(axes))))):
        return [("copy", out_copy + mean_cast), ("reduction", 1), ("ufunc", int(name == "mean"))]
    return [("reduction", cub_block_reduction_launches(a, axes)), ("copy", int(mean_cast))]


def matmul_launches(a, b, out=None):
    """[(kind, n)]: the kernels ``cupy.matmul(a, b, out=out)`` launches in CuPy 14
    (cupy/_core/_routines_linalg.pyx), for host arrays ``a``, ``b`` (and ``out``). One cuBLAS call (for a
    1x1 result of at most 2-d operands a multiply and a sum instead; one fill for an empty operand), and:
    - at most 2-d (``dot``): a copy of each operand cuBLAS cannot read as it is stored (neither C- nor
      F-contiguous), and of the result into an ``out`` that is not C-contiguous, of another dtype, or
      overlapping an operand;
    - more dims: a copy of each operand that is not C-contiguous (``ascontiguousarray``); where the
      batch dims broadcast, cuBLAS's pointer-table batched call, whose tables take one ElementwiseKernel
      per batch dim for each of a, b and the result (``_mat_ptrs``), and for 16-bit types misaligned
      operands copied and a padded result copied out; a copy into an ``out`` that cannot take the
      result directly."""
    dt = np.result_type(a.dtype, b.dtype)
    ndim = max(a.ndim, b.ndim)
    copies = (a.dtype != dt) + (b.dtype != dt)                # operands cast to the result's type
    if a.size == 0 or b.size == 0:
        return [("fill", 1)]
    out_copy = out is not None and (not out.flags.c_contiguous or out.dtype != dt
                                    or np.may_share_memory(out, a) or np.may_share_memory(out, b))
    if ndim <= 2:
        a2 = a.reshape(1, -1) if a.ndim == 1 else a
        b2 = b.reshape(-1, 1) if b.ndim == 1 else b
        if a2.shape[0] == 1 and b2.shape[1] == 1:
            # a 1x1 result (tensordot_core, CUB on as by default): (a.ravel() * b.ravel()).sum(out=c), so the
            # ravels' copies of strided operands, one multiply, CUB's reduction and its copy into c; no casts
            ravels = sum(not np.may_share_memory(x.ravel(), x) for x in (a, b))
            return [("copy", ravels + out_copy), ("ufunc", 1)] + reduction_launches(
                "sum", np.empty(a2.size, dt), out=np.empty((), dt))
        copies += sum(not (x.flags.c_contiguous or x.flags.f_contiguous) for x in (a2, b2))
        return [("cublas", 1), ("copy", copies + out_copy)]
    copies += sum(not x.flags.c_contiguous for x in (a, b))
    sa = (1,) * (ndim - a.ndim) + (a.shape[:-2] if a.ndim > 1 else ())
    sb = (1,) * (ndim - b.ndim) + (b.shape[:-2] if b.ndim > 1 else ())
    sa, sb = sa + (1,) * (ndim - 2 - len(sa)), sb + (1,) * (ndim - 2 - len(sb))
    broadcast = any(x != y and 1 in (x, y) for x, y in zip(sa, sb))
    ptrs = 3 * (ndim - 2) if broadcast else 0
    if broadcast and dt.itemsize == 2 and dt.kind in "fV":    # float16/bfloat16: _align_16bit_broadcast
        k = a.shape[-1]
        align = 16 if k % 8 == 0 else 4 if k % 2 == 0 else 2
        copies += sum(x.ctypes.data % align != 0 for x in (a, b))
        rows, cols = (a.shape[-2] if a.ndim > 1 else 1), (b.shape[-1] if b.ndim > 1 else 1)
        out_copy = out_copy or (out is None and rows * cols * 2 % align != 0) or (
            out is not None and out.ctypes.data % align != 0)
    return [("cublas", 1), ("elementwise_kernel", ptrs), ("copy", copies + out_copy)]


# -- argument conversion ------------------------------------------------------------------------------
def _device_mismatch(array_dev, dev):
    return ValueError(f"Array device must be same as the current device: array device = {array_dev} while "
                      f"current = {dev}")


def unwrap(x, dev, name):
    """A call argument as NumPy data for the simulated kernel: device arrays give their host buffer
    (after the device check), NumPy arrays are refused as CuPy refuses them, sequences are walked."""
    t = type(x)
    if t is ndarray:
        if x._dev != dev:
            raise _device_mismatch(x._dev, dev)
        return x._a
    if t is list or t is tuple:
        return t(unwrap(v, dev, name) for v in x)
    if isinstance(x, np.ndarray):
        raise TypeError(f"Unsupported type {np.ndarray} (in {name}: CuPy takes device arrays, "
                        "not NumPy arrays; copy with cupy.asarray first)")
    return x


def unwrap_kwargs(kwargs, dev, name):
    return {k: unwrap(v, dev, name) for k, v in kwargs.items()} if kwargs else kwargs


def wrap(out, dev):
    """A NumPy result as the stand-in's: arrays and NumPy scalars become device arrays (CuPy returns
    0-d arrays where NumPy returns scalars); tuples and lists are walked; other values pass."""
    t = type(out)
    if t is np.ndarray:
        return ndarray._from_host(out, dev)
    if isinstance(out, np.generic):
        return ndarray._from_host(np.asarray(out), dev)
    if t is tuple or t is list:
        return t(wrap(v, dev) for v in out)
    if isinstance(out, tuple):           # NumPy's named results (QRResult, EighResult): CuPy gives tuples
        return tuple(wrap(v, dev) for v in out)
    return out


def _bfloat16():
    """ml_dtypes' bfloat16, which CuPy 14 takes as an array dtype when ml_dtypes is installed (cupy#9494),
    or None."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


_BF16 = _bfloat16()


def check_dtype(dt, name):
    if np.dtype(dt).kind in "OSUVMm" and np.dtype(dt) != _BF16:
        raise ValueError(f"Unsupported dtype {np.dtype(dt)} (in {name}: CuPy has no {np.dtype(dt)} arrays)")


# -- indexing -----------------------------------------------------------------------------------------
def _index_key(a, key, dev, setting):
    """NumPy's form of an index into ``a``: device index arrays unwrapped (boolean masks log a
    read-back, as CuPy syncs to count them, to get or to set), host index arrays and lists copied in (logged),
    and integer-array indices wrapped modulo the axis length, as CuPy does instead of raising."""
    parts = list(key) if type(key) is tuple else [key]
    consumed = sum(_axes_used(p) for p in parts)
    axis, out = 0, []
    for p in parts:
        if p is Ellipsis:
            axis += a.ndim - consumed
            out.append(p)
            continue
        if isinstance(p, np.ndarray) or (type(p) is list and p):
            record("h2d", "an index array copied from the host")
            p = np.asarray(p)
        elif type(p) is bool or type(p) is np.bool_:
            p = np.asarray(p)               # CuPy makes a bool scalar a 0-d mask (_prepare_slice_list)
        elif type(p) is ndarray:
            if p._dev != dev:
                raise _device_mismatch(p._dev, dev)
            p = p._a
        if isinstance(p, np.ndarray):
            if p.dtype == np.bool_:
                # getting and setting alike: CuPy counts the mask's true entries and reads the count back
                # (_routines_indexing.pyx: _prepare_mask_indexing_single's int(mask_scanned[-1]) for one
                # mask, _ndarray_argwhere for a mask among other index arrays); an empty mask reads nothing
                if p.size:
                    record("d2h", "indexing with a boolean mask (the number of true entries is read back)")
            elif p.dtype.kind in "iu" and axis < a.ndim and a.shape[axis] > 0:
                p = p % a.shape[axis]          # CuPy wraps out-of-bounds indices around
        out.append(p)
        axis += _axes_used(p)
    return tuple(out)


def _advanced(key):
    """Whether CuPy indexes with ``key`` through an index array (cupy/_core/_routines_indexing.pyx,
    _prepare_slice_list: lists, tuples, NumPy and device arrays and booleans become index arrays)."""
    for p in (key if type(key) is tuple else (key,)):
        if type(p) in (list, tuple, ndarray, bool, np.bool_) or isinstance(p, np.ndarray):
            return True
    return False


def _fill_value(value):
    """The value of ``a[basic index] = value`` as CuPy takes it when it is no device array: CuPy's
    _scatter_op calls ``a.fill(value)`` (cupy/_core/_routines_indexing.pyx), and fill takes only scalars
    (core.pyx: "non-scalar numpy.ndarray cannot be used for fill"; a list or tuple reaches the fill
    kernel's argument check: "Unsupported type"). So ``a[...] = host_array`` raises on CuPy 14 (copy with
    cupy.asarray or ndarray.set); an index array (``a[idx] = host_array``) does copy it in."""
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill (CuPy's a[basic index] = "
                             "value fills with a scalar; copy a host array in with cupy.asarray first)")
        return value.item()
    if type(value) in (bool, int, float, complex) or isinstance(value, np.generic):
        return value
    raise TypeError(f"Unsupported type {type(value)} (CuPy's a[basic index] = value takes a CuPy array or "
                    "a scalar)")


def _axes_used(p):
    if p is None or p is Ellipsis:
        return 0
    if isinstance(p, (np.ndarray, ndarray)) and p.dtype == np.bool_:
        return p.ndim
    return 1


# -- the device array ---------------------------------------------------------------------------------
class ndarray:
    """The stand-in's ``cupy.ndarray``: a host buffer, the simulated GPU it lives on, and CuPy's rules."""

    __slots__ = ("_a", "_dev", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        check_dtype(dtype, "cupy.ndarray")
        self._a = np.empty(shape, dtype, order=order)
        self._dev = current_device_id()

    @classmethod
    def _from_host(cls, a, dev):
        obj = object.__new__(cls)
        obj._a = a
        obj._dev = dev
        return obj

    def _here(self, name):
        """The current device, after checking that this array lives there (a kernel is launched)."""
        dev = current_device_id()
        if self._dev != dev:
            raise _device_mismatch(self._dev, dev)
        return dev

    # -- metadata (no kernel, no transfer) --
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    strides = property(lambda self: self._a.strides)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: ndarray._from_host(self._a.T, self._dev))
    mT = property(lambda self: ndarray._from_host(self._a.mT, self._dev))
    base = property(lambda self: None if self._a.base is None else ndarray._from_host(self._a.base, self._dev))
    real = property(lambda self: ndarray._from_host(self._a.real, self._dev))

    @property
    def imag(self):
        """A view for complex arrays; for real ones CuPy fills a new array with zeros (core.pyx
        ``_ndarray_imag_getter``: ``new_array.fill(0)``, one launch)."""
        if self._a.dtype.kind == "c":
            return ndarray._from_host(self._a.imag, self._dev)
        return kernel(lambda: ndarray._from_host(np.zeros_like(self._a), self._dev), (self,), "fill",
                      "ndarray.imag")

    @property
    def device(self):
        from .cuda import Device
        return Device(self._dev)

    @property
    def data(self):
        from .cuda import MemoryPointer
        mem = self._a
        while isinstance(mem.base, np.ndarray):
            mem = mem.base
        return MemoryPointer(self._a.__array_interface__["data"][0], self._dev, mem)

    @property
    def __cuda_array_interface__(self):
        i = self._a.__array_interface__
        return {"shape": i["shape"], "typestr": i["typestr"], "descr": i["descr"], "data": i["data"],
                "strides": i["strides"], "version": 3}

    # -- what CuPy refuses --
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to "
                        "construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from . import _modules
        for x in inputs + tuple(kwargs.get("out", ()) or ()):
            if isinstance(x, np.ndarray):
                raise TypeError(f"Unsupported type {np.ndarray} (numpy.{ufunc.__name__} mixes a NumPy array "
                                "with a CuPy array)")
        f = getattr(_modules.cupy, ufunc.__name__, None)
        if f is None:
            return NotImplemented
        return f(*inputs, **kwargs) if method == "__call__" else getattr(f, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from . import _modules
        try:
            f = getattr(_modules.cupy, func.__name__)
        except AttributeError:
            return NotImplemented
        return f(*args, **kwargs)

    # -- device-to-host transfers (each one logged) --
    def get(self, stream=None, order="C", out=None, blocking=True):
        record("d2h", "ndarray.get")
        if out is not None:
            out[...] = self._a
            return out
        return np.array(self._a, order=order)

    def item(self):                 # CuPy's item() takes no index (core.pyx: _ndarray_base.item(self))
        record("d2h", "ndarray.item")
        return self._a.item()

    def tolist(self):
        record("d2h", "ndarray.tolist")
        return self._a.tolist()

    def _scalar(self, what):
        if self._a.size != 1:
            raise TypeError(f"only size-1 arrays can be converted to Python scalars ({what})")
        record("d2h", what)
        return self._a.reshape(()).item()

    def __float__(self):
        return float(self._scalar("ndarray.__float__"))

    def __int__(self):
        return int(self._scalar("ndarray.__int__"))

    def __complex__(self):
        return complex(self._scalar("ndarray.__complex__"))

    def __bool__(self):
        if self._a.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous. "
                             "Use a.any() or a.all()")
        record("d2h", "ndarray.__bool__")
        return bool(self._a)

    # No __index__: cupy.ndarray has none (CuPy 14.2.0: hasattr(cupy.ndarray, "__index__") is False), so
    # range(a), operator.index(a) and a[i] with i a 0-d device array used as a Python int raise TypeError.

    def __repr__(self):
        record("d2h", "ndarray.__repr__")
        return repr(self._a)

    def __str__(self):
        record("d2h", "ndarray.__str__")
        return str(self._a)

    def __format__(self, spec):
        record("d2h", "ndarray.__format__")
        return format(self._a.item() if self._a.ndim == 0 else self._a, spec)

    # -- host-to-device --
    def set(self, arr, stream=None):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr)}")
        if arr.shape != self.shape or arr.dtype != self.dtype:
            raise ValueError("Shape or dtype mismatch")
        record("h2d", "ndarray.set")
        self._a[...] = arr

    # -- containers --
    def __len__(self):
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return len(self._a)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (ndarray._from_host(self._a[i], self._dev) for i in range(len(self._a)))

    def __getitem__(self, key):
        dev = self._dev
        k = [_index_key(self, key, dev, setting=False)]
        res = self._a[k[0]]
        if not isinstance(res, np.ndarray) and not _advanced(key) and Ellipsis not in k[0]:
            res = self._a[k[0] + (Ellipsis,)]       # CuPy's a[0] on a 1-d array is a 0-d view, not a copy
        if isinstance(res, np.ndarray) and (np.may_share_memory(res, self._a) or not _advanced(key)):
            return wrap(res, dev)                   # a view: no kernel
        # a gather: the key (wrapped indices) is made again from the index arrays at every graph launch
        key0, shape = k[0], self._a.shape

        def count(res):         # an empty result: only the masks' scans ran
            got = index_launches(key0, shape)
            return [kn for kn in got if kn[0] == "other"] if res._a.size == 0 else got
        return kernel(lambda: wrap(self._a[k.pop() if k else _index_key(self, key, dev, False)], dev), (self, key),
                      "gather", "ndarray.__getitem__", count)

    def __setitem__(self, key, value):
        dev = self._here("__setitem__")
        if type(value) is not ndarray and not _advanced(key):
            value = _fill_value(value)
        if type(value) is list or type(value) is tuple:         # an index array's value: copied in
            value = np.asarray(value)
        on_host = isinstance(value, np.ndarray)
        if on_host:
            record("h2d", "ndarray.__setitem__ with a NumPy value")
        else:
            value = unwrap(value, dev, "ndarray.__setitem__")
        k = [_index_key(self, key, dev, setting=True)]
        key0, host = k[0], self._a

        def count(_):
            if _advanced(key):  # an empty selection: only the masks' scans ran
                got = index_launches(key0, host.shape, None if on_host else value, host.dtype, setting=True)
                return got if host[key0].size else [kn for kn in got if kn[0] == "other"]
            view = host[key0]
            if isinstance(value, np.ndarray):           # a device array's buffer (a host one was refused)
                return setitem_launches(view, value)
            return [("fill", 1)] if view.size else []  # CuPy: view.fill(value), an elementwise fill

        def run():              # a graph launch makes the key again from the index arrays
            self._a[k.pop() if k else _index_key(self, key, dev, setting=True)] = value
        kernel(run, (self, key), "scatter", "ndarray.__setitem__", count)

    __hash__ = None    # type: ignore[assignment]  # unhashable, as numpy.ndarray (typeshed types object.__hash__ as a method)

    # -- copies, views and casts with CuPy's device rules --
    def copy(self, order="C"):
        dev = current_device_id()
        return kernel(lambda: ndarray._from_host(self._a.copy(order=order), dev), (self,), "copy", "ndarray.copy")

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        check_dtype(dtype, "ndarray.astype")
        dev = self._here("astype")
        return kernel(lambda: ndarray._from_host(self._a.astype(dtype, order=order, copy=copy), dev), (self,),
                      "copy", "ndarray.astype", lambda res: 0 if res._a.size == 0 or is_view(res, self) else 1)

    def view(self, *args, **kwargs):
        return ndarray._from_host(self._a.view(*args, **kwargs), self._dev)

    def reshape(self, *shape, order="C"):
        res = self._a.reshape(*shape, order=order)
        if res.size == 0 or np.may_share_memory(res, self._a):
            return ndarray._from_host(res, self._dev)
        # not expressible as a view: CuPy copies (a kernel), NumPy too
        return kernel(lambda: ndarray._from_host(self._a.reshape(*shape, order=order), self._dev), (self,),
                      "copy", "ndarray.reshape")

    def transpose(self, *axes):
        return ndarray._from_host(self._a.transpose(*axes), self._dev)

    # -- DLPack (a CUDA device, kDLCUDA = 2) --
    def __dlpack_device__(self):
        return (2, self._dev)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        raise BufferError("the CuPy stand-in's arrays live on a simulated GPU: DLPack export is not simulated")


def _install_operators():
    import operator
    for op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
               "lshift", "rshift"):
        fn = getattr(operator, op + "_" if op in ("and", "or") else op)
        setattr(ndarray, f"__{op}__", _binary(fn))
        setattr(ndarray, f"__r{op}__", _binary(fn, reflected=True))
        if op != "matmul":             # cupy.ndarray has no __imatmul__: a @= b rebinds a to a new array
            setattr(ndarray, f"__i{op}__", _binary(getattr(operator, "i" + op), inplace=True))
    for op in ("lt", "le", "gt", "ge", "eq", "ne"):
        setattr(ndarray, f"__{op}__", _binary(getattr(operator, op)))
    for op in ("neg", "pos", "abs", "invert"):
        setattr(ndarray, f"__{op}__", _unary(getattr(operator, op)))

    def divmod_(self, other):
        return (self // other, self % other)
    ndarray.__divmod__ = divmod_


def _binary(fn, reflected=False, inplace=False):
    def method(self, other):
        dev = self._here(fn.__name__)
        if fn is operator.matmul:
            refuse_cublas_under_capture("ndarray.__matmul__")
        if isinstance(other, np.ndarray):
            raise TypeError(f"Unsupported type {np.ndarray} (an operator between a CuPy and a NumPy array)")
        o = unwrap(other, dev, fn.__name__)

        def run():
            with np.errstate(all="ignore"):                     # CUDA kernels never warn
                if inplace:
                    fn(self._a, o)
                    return self
                return wrap(fn(o, self._a) if reflected else fn(self._a, o), dev)
        if fn is operator.matmul:                       # a cuBLAS GEMM and what CuPy does around it
            a, b = (o, self._a) if reflected else (self._a, o)
            return matmul_kernel(run, (self, other), "ndarray.__matmul__", a, b)
        # a += b is CuPy's add(a, b, out=a): b is copied first where it overlaps a without being it
        return kernel(run, (self, other), "ufunc", f"ndarray.__{fn.__name__}__",
                      ufunc_launches((self, other), (self,) if inplace else ()))
    return method


def _unary(fn):
    def method(self):
        dev = self._here(fn.__name__)
        return kernel(lambda: wrap(fn(self._a), dev), (self,), "ufunc", f"ndarray.__{fn.__name__}__",
                      _ONE_UFUNC)
    return method


_install_operators()
