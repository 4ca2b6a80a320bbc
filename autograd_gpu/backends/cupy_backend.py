"""GPU backend: CuPy imported lazily (the package imports without it), install hints, per-device seeds,
explicit reads that carry the device-side checks back with them."""
import math
import numpy as np

from . import cublas_graph
from . import sync as _sync
from .base import Backend
from .kernels import CUPY_MIXINS, TRACE_THROUGH, TRACE_AS

_INSTALL_HINT = ('install it with pip install -e ".[cuda12]" in a checkout of autograd_gpu (CUDA 12; ".[cuda13]" '
                 'for CUDA 13), or pip install cupy-cuda12x (cupy-cuda13x)')
_cupy = None
_cupyx = None
_import_error = None
_simulated = False
_global_seed = [None]
# the dtypes cupyx.scatter_add takes with an index array, in CuPy 13 and 14 (CUDA atomicAdd)
# (dtype objects: a set lookup, where NumPy's ``dtype.name`` is Python code)
_ATOMIC_ADD = frozenset(np.dtype(n) for n in ("int32", "uint32", "uint64", "float16", "float32", "float64"))


def _import_cupy():
    global _cupy, _cupyx, _import_error
    if _cupy is None and _import_error is None:
        try:
            import cupy
            import cupyx
            import cupyx.scipy.special  # noqa: F401  (erf)
            _cupy, _cupyx = cupy, cupyx
        except Exception as e:   # ImportError, or a broken CUDA install raising something else
            _import_error = e
    return _cupy


def nccl_module():
    """CuPy's NCCL bindings (``cupy.cuda.nccl``), loaded on demand; ImportError/OSError where CuPy or
    NCCL's library is missing (the distributed package turns that into its install hint)."""
    cp = _import_cupy()
    if cp is None:
        raise ImportError(f"CuPy is not installed ({_import_error})")
    if _simulated:                       # the stand-in's NCCL, carried out over MPI
        return cp.cuda.nccl
    import importlib
    return importlib.import_module("cupy.cuda.nccl")


def use_modules(cupy, cupyx, simulated=False):
    """Run the CUDA backend on these modules (the test suite's CuPy stand-in), or, with None, go back to
    importing the real CuPy on demand. Forgets the backends made so far."""
    global _cupy, _cupyx, _import_error, _simulated
    _cupy, _cupyx, _import_error, _simulated = cupy, cupyx, None, bool(simulated and cupy is not None)
    from . import _forget_cuda_backends
    _forget_cuda_backends()


def simulated():
    """True while the CUDA backend runs on the CuPy stand-in."""
    return _simulated


def is_cupy_array(a):
    # only look at CuPy when the object could be one, so CPU code never triggers the import
    cp = _cupy
    if cp is None:
        if not type(a).__module__.startswith("cupy") or _import_cupy() is None:
            return False
        cp = _cupy
    return isinstance(a, cp.ndarray)


def device_count():
    cp = _import_cupy()
    if cp is None:
        return 0
    try:
        return cp.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


def is_available():
    return device_count() > 0


def _fold_seed(seed):
    """A seed for a RandomState: below 2**32 as it is, wider ones folded to 32 bits (see make_rng)."""
    return (seed ^ (seed >> 32)) & 0xFFFFFFFF if seed >= 2 ** 32 else seed


def set_global_seed(seed):
    _global_seed[0] = seed


def require_cuda(index=0):
    """Return cupy, or raise RuntimeError saying what is missing and how to install it."""
    cp = _import_cupy()
    if cp is None:
        raise RuntimeError(f"CUDA was requested but CuPy is not installed ({_import_error}); {_INSTALL_HINT}")
    n = device_count()
    if n == 0:
        raise RuntimeError("CUDA was requested but no CUDA device is visible (CuPy is installed, "
                           "but the driver reports no GPU); check nvidia-smi and CUDA_VISIBLE_DEVICES")
    if index >= n:
        raise RuntimeError(f"CUDA device cuda:{index} was requested but only {n} GPU(s) are visible")
    return cp


def _weak_scalars(cp):
    """Whether this CuPy keeps a Python number weak in arithmetic (float32 array * 2.5 stays float32, int8
    array + 1 stays int8), so ops pass Python numbers as they are (no ``scalar()`` call per op).

    CuPy 14 does: it follows NumPy 2's promotion, NEP 50 (cupy/cupy#8323, "NEP50"; #8306: "match CuPy v14
    API with NumPy 2.0"; #8754 dropped the user guide's value-based "Type promotion" section). CuPy 13
    follows NumPy 1's value-based rules for Python scalars, so there ops pass them typed by ``scalar()``.
    The stand-in runs NumPy 2 under CuPy 14's API (it has no ``__version__``): weak, as CuPy 14."""
    if _simulated:
        return True
    try:
        return int(str(cp.__version__).split(".")[0]) >= 14
    except (AttributeError, ValueError):
        return False


def _cupy_batch_extras(a, b):
    """Whether ``a @ b`` (float arrays) is cheaper through cuBLAS by pointer than through CuPy's matmul, which
    launches more than its cuBLAS call beyond 2-d: it copies an operand that is not C-contiguous, and gives
    broadcast batch dims three pointer tables. By pointer, a transposed matrix or a batch that collapses to
    one stride is read as stored, and an operand that is one matrix for the whole batch has batch stride 0;
    an operand broadcast over only some batch dims would be copied out in full there, where CuPy's tables
    cost a few small kernels: that stays with CuPy. At most 2-d cuBLAS reads either memory order and
    CuPy's own call is the cheaper one."""
    if a.ndim <= 2 and b.ndim <= 2:
        return False
    ba, bb = a.shape[:-2], b.shape[:-2]
    if ba == bb:
        return not (a.flags.c_contiguous and b.flags.c_contiguous)
    return math.prod(ba) == 1 or math.prod(bb) == 1


class CupyBackend(*CUPY_MIXINS, Backend):
    name = "cupy"
    weak_scalars = False     # set per backend from the CuPy version: see _weak_scalars
    trace_through = TRACE_THROUGH     # ag.compile traces into the fused kernels' NumPy twins, TRACE_AS
    trace_as = TRACE_AS               # (backends/kernels/__init__.py)

    def __init__(self, device):
        super().__init__(device)
        cp = require_cuda(device.index)
        self.xp = cp
        self.weak_scalars = _weak_scalars(cp)
        self._cuda_device = cp.cuda.Device(device.index)
        # on GPU 0 (the usual case) no context switch is needed around each op
        self.context = None if device.index == 0 else (lambda: self._cuda_device)
        self.cupyx = _cupyx
        self.label = f"{device} (simulated)" if _simulated else None
        with self._cuda_device:
            self.rng = cp.random.RandomState(_global_seed[0])
        # device-side checks not yet read: a 2-element int64 array (message code, offending value) and
        # the messages by code; read with the next explicit read and raised then. _err is None while none is
        # pending, else _err_buf: one buffer made here, never during a trace or a CUDA graph's capture (made
        # there, it came from the graph's private pool, which later replays reuse: codes read back as garbage)
        with self._cuda_device:
            self._err_buf = cp.zeros(2, dtype=np.int64)
        self._err = None
        self._codes, self._messages = {}, [None]
        self.capturing = False          # set while the CUDA fuser captures a graph (fuse_cuda.py)

    def make_current(self):
        self._cuda_device.use()

    # -- arrays and transfers ----------------------------------------------------------------
    def asarray(self, data, dtype=None, copy=False):
        cp = self.xp
        with self._cuda_device:
            if copy:
                return cp.array(data, dtype=dtype, copy=True)
            return cp.asarray(data, dtype=dtype)

    def to_host(self, a):
        """An explicit read (.numpy(), .item(), printing): one transfer that also brings back the
        device-side checks pending on this GPU, which raise here if one failed."""
        with _sync.allowed():
            if self._err is None:
                return a.get()
            if a.nbytes > (1 << 20):                         # big: a second small read beats a copy
                host = a.get()
                self._raise_pending(self._err.get())
                return host
            cp = self.xp
            with self._cuda_device:
                flat = cp.ascontiguousarray(a).reshape(-1).view(cp.uint8)
                both = cp.concatenate([flat, self._err.view(cp.uint8)]).get()
            self._raise_pending(both[a.nbytes:].view(np.int64))
            return both[:a.nbytes].view(a.dtype).reshape(a.shape)

    def from_dlpack(self, obj):
        with self._cuda_device:
            return self.xp.from_dlpack(obj)

    def scalar(self, value, dtype):
        """A Python scalar as a typed NumPy scalar, so CuPy keeps a float32 array float32 whatever
        its promotion rules (and no host-to-device copy happens). Arithmetic with a Python number
        (``t * 0.5``) calls it only where ``weak_scalars`` is False (CuPy 13)."""
        return dtype.type(value)

    def synchronize(self):
        with self._cuda_device:
            self.xp.cuda.Device().synchronize()
        if self._err is not None:
            with _sync.allowed():
                self._raise_pending(self._err.get())

    def format(self, a):
        return np.array2string(self.to_host(a), separator=", ", prefix="Tensor(")

    # -- device-side checks (PyTorch's device asserts): no host sync in the op ------------------------
    def assert_all(self, ok, exc_type, message, value=None):
        """Record the check on the device; it raises ``exc_type(message)`` at the next explicit read or
        ``synchronize()`` if ``ok`` was false (the first failing check wins)."""
        cp = self.xp
        code = self._codes.get((exc_type, message))
        if code is None:
            code = self._codes[(exc_type, message)] = len(self._messages)
            self._messages.append((exc_type, message))
        with self._cuda_device:
            if self._err is None:
                self._err = self._err_buf
                self._err.fill(0)
            v = cp.zeros((), np.int64) if value is None else value.astype(np.int64)
            new = cp.stack([cp.where(ok, 0, code), v])
            cp.copyto(self._err, new, where=(self._err[0] == 0) & (new[0] != 0))

    def discard_checks(self):
        """Forget the device-side checks not yet read (the test suite does this between tests)."""
        self._err = None

    def _raise_pending(self, host_err):
        self._err = None
        code = int(host_err[0])
        if code:
            exc_type, message = self._messages[code]
            raise exc_type(message.replace("{value}", str(int(host_err[1])))
                           + f" (checked on {self.device}; reported at the next synchronization)")

    # -- kernels where the namespaces differ ---------------------------------------------------
    def scatter_add(self, out, index, values):
        with self._cuda_device:
            if out.dtype in _ATOMIC_ADD or out.dtype.kind not in "biuV":
                self.cupyx.scatter_add(out, index, values)
                return
            if out.dtype.name == "bfloat16":      # no bfloat16 atomics in CuPy: add in float32, round once
                acc = out.astype(np.float32)
                self.cupyx.scatter_add(acc, index, values.astype(np.float32))
                out[...] = acc.astype(out.dtype)
                return
            # CuPy has no atomic add for bool, int8, int16, uint8, uint16 (nor int64 before CuPy 14): it
            # raises TypeError. Add in uint64, whose wrapping sums are two's-complement sums, then fold the
            # sums in at out's dtype, wrapping (or, for bool, or-ing) as NumPy's add.at does.
            acc = self.xp.zeros(out.shape, dtype=np.uint64)
            self.cupyx.scatter_add(acc, index, values.astype(np.int64).view(np.uint64))
            if out.dtype.kind == "b":
                out |= acc != 0
            else:
                out += acc.astype(out.dtype)

    def sigmoid(self, x):
        """1 / (1 + exp(-x)); exp overflowing to inf gives the right 0 (CuPy does not warn)."""
        with self._cuda_device:
            return 1 / (1 + self.xp.exp(-x))

    def matmul(self, a, b, out=None):
        """cupy.matmul: float16 goes to cuBLAS, which accumulates in float32. Float products go to cuBLAS by
        pointer instead (cublas_graph.py) while a CUDA graph captures (CuPy refuses cuBLAS then), and where
        CuPy would launch more than the product: a batched product with an operand not C-contiguous (CuPy
        copies it; cuBLAS reads a transposed or strided batch as stored) or batch dims that broadcast (CuPy
        builds three pointer tables, a kernel per batch dim each, for a pointer-array batched call; a
        broadcast operand is a batch stride of 0). A conv's product took CuPy ~120 us of host time
        against ~30 us for a plain one (H200 profile, docs/bench/gpu/h200-2026-11-28)."""
        with self._cuda_device:
            if a.dtype.kind in "fc" and b.dtype.kind in "fc" and (self.capturing or _cupy_batch_extras(a, b)):
                return cublas_graph.matmul(self.xp, a, b, out, capture=self.capturing)
            if a.dtype.kind == "V" or b.dtype.kind == "V":   # bfloat16: a bfloat16 result (float32 accumulation)
                y = self.xp.matmul(a, b)
                y = y if y.dtype == a.dtype else y.astype(a.dtype)
                if out is None:
                    return y
                out[...] = y
                return out
            return self.xp.matmul(a, b) if out is None else self.xp.matmul(a, b, out=out)

    def pinned_copy(self, a):
        """A copy of the host (NumPy) array ``a`` in page-locked memory from CuPy's pinned allocator, from
        which a copy to the GPU can run asynchronously (DataLoader's pin_memory)."""
        if a.nbytes == 0:
            return a
        out = np.ndarray(a.shape, dtype=a.dtype, buffer=self.xp.cuda.alloc_pinned_memory(a.nbytes))
        out[...] = a
        return out

    def row_dot(self, a, b):
        """sum(a * b) over the last axis as a product and a sum: CuPy sends einsum to cuBLAS, which it
        refuses while a CUDA graph captures (a compiled attention or layer-norm step would get none)."""
        with self._cuda_device:
            return (a * b).sum(axis=-1)

    def erf(self, x):
        with self._cuda_device:
            return self.cupyx.scipy.special.erf(x)

    # special functions: cupyx.scipy.special's kernels (float16 and bfloat16 in float32, rounded once)
    def _special(self, name, x, n=None):
        dt = x.dtype
        with self._cuda_device:
            small = dt.kind not in "biu" and dt.itemsize < 4
            a = x.astype("float32") if small else x
            f = getattr(self.cupyx.scipy.special, name)
            y = f(a) if n is None else f(self.xp.asarray(n, a.dtype), a)
            return y.astype(dt) if small else y

    def erfc(self, x):
        return self._special("erfc", x)

    def erfinv(self, x):
        return self._special("erfinv", x)

    def lgamma(self, x):
        return self._special("gammaln", x)

    def digamma(self, x):
        return self._special("digamma", x)

    def polygamma(self, n, x):
        # cupyx's polygamma takes n as an array broadcast against x; n = 0 is digamma
        return self._special("digamma", x) if n == 0 else self._special("polygamma", x, n)

    # -- random numbers ----------------------------------------------------------------------------
    def seed(self, seed):
        with self._cuda_device:
            self.rng = self.xp.random.RandomState(seed)

    def get_rng_state(self):
        """A state set_rng_state() restores. CuPy's RandomState cannot be copied, so the generator is
        forked: a seed drawn from it (one read) restarts it, and restarting from that seed replays."""
        with self._cuda_device:
            seed = int(self.item(self.rng.randint(0, 2 ** 31 - 1, size=(), dtype="int64")))
            self.rng = self.xp.random.RandomState(seed)
        return seed

    def set_rng_state(self, state):
        with self._cuda_device:
            self.rng = self.xp.random.RandomState(state)

    def make_rng(self, seed):
        """A RandomState on this GPU (an ag.Generator wraps one). cuRAND takes a 64-bit seed, but
        NumPy's RandomState, which the CuPy stand-in draws with, only 32 bits: wider seeds are folded to 32
        bits (seeds below 2**32, the usual ones, are passed as they are, so they draw as seed() does)."""
        with self._cuda_device:
            return self.xp.random.RandomState(_fold_seed(seed))

    def reseed_rng(self, rng, seed):
        """Seed a RandomState from make_rng again, in place (whoever holds it, a compiled program too, follows)."""
        with self._cuda_device:
            rng.seed(_fold_seed(seed))

    def generator_state(self, rng):
        """A RandomState's state as bytes, for set_generator_state. cuRAND's state cannot be read, so the generator
        is forked: a seed is drawn from it (one read from the device) and it restarts from that seed, which the
        8 bytes record (so the numbers drawn after a get_state() differ from those without one)."""
        with self._cuda_device:
            start = int(self.item(rng.randint(0, 2 ** 31 - 1, size=(), dtype="int64")))
        self.reseed_rng(rng, start)
        return start.to_bytes(8, "little")

    def set_generator_state(self, rng, raw):
        """Restart a RandomState from the seed generator_state recorded."""
        self.reseed_rng(rng, int.from_bytes(raw, "little"))

    # the draws take rng=None (the backend's global generator) or one made by make_rng (an ag.Generator's)
    def rand(self, shape, dtype, rng=None):
        with self._cuda_device:
            return (self.rng if rng is None else rng).random_sample(shape, dtype=np.float64).astype(dtype, copy=False)

    def randn(self, shape, dtype, rng=None):
        with self._cuda_device:
            return (self.rng if rng is None else rng).standard_normal(shape, dtype=np.float64).astype(dtype, copy=False)

    def randint(self, low, high, shape, dtype, rng=None):
        with self._cuda_device:
            return (self.rng if rng is None else rng).randint(low, high, size=shape).astype(dtype, copy=False)

    def permutation(self, n, rng=None):
        with self._cuda_device:
            return (self.rng if rng is None else rng).permutation(n)
