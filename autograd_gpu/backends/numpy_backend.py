"""CPU backend: xp = numpy; host copies are no-ops."""
import sys
from contextlib import nullcontext

import numpy as np
import ml_dtypes

from .base import Backend
from .kernels import NUMPY_MIXINS, TRACE_THROUGH
from .cupy_backend import is_cupy_array
from ._erf import erf as _erf_port
from . import _special
from . import mkl_blas
from . import threads


_mkl = mkl_blas.matmul if mkl_blas.available() else None
_BF16 = np.dtype(ml_dtypes.bfloat16)
threads.apply_policy()       # BLAS threads: the CPUs free of other work (threads.py), after MKL is loaded


def _scipy_erf():
    """scipy.special.erf where SciPy is installed (5-7x the port's speed), else None; imported on the
    first erf, not with the package (SciPy's import costs ~0.2 s)."""
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return erf


_erf_impl = []               # [scipy's erf or None], filled on the first call


def erf(x):
    """Elementwise erf of a NumPy array: SciPy's where installed (within 3 ulp of math.erf in float64,
    1 in float32), else the fdlibm port (_erf.py, within 1 ulp). The result has x's float dtype
    (float64 for integers), as the port's."""
    if not _erf_impl:
        _erf_impl.append(_scipy_erf())
    f = _erf_impl[0]
    x = np.asarray(x)
    if f is None or x.dtype.kind not in "biuf":
        return _erf_port(x)
    if x.dtype.kind != "f":
        return np.asarray(f(x.astype(np.float64)))
    return np.asarray(f(x)).astype(x.dtype, copy=False)     # float16 comes back float32 from SciPy


def float_matmul(a, b, out=None):
    """np.matmul, through MKL where it is installed and takes the case (mkl_blas.py: PyTorch's CPU BLAS,
    1.2-1.5x OpenBLAS's speed on training shapes). The backend's matmul for float32/float64, and what
    ag.compile's CPU programs call for it."""
    if _mkl is not None:
        y = _mkl(a, b, out)
        if y is not None:
            return y
    return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)



def _sole_refs():
    """sys.getrefcount of the base of a view that alone holds it, counted as sole_view counts (3 on
    CPython 3.10-3.13; an interpreter that borrows a local's reference counts fewer)."""
    a = np.empty(2).reshape(1, 2)
    b = a.base
    return sys.getrefcount(b)


_SOLE_REFS = _sole_refs()


_ROUNDS_MIN = 4096          # below this many values np.add.at is as fast
_ROUNDS_MAX = 32            # more repeats of one index than this: np.add.at


def _scatter_add_rounds(out, index, values):
    """out[index] += values for index = (slice(None), ..., idx) or idx with idx a 1-d integer array, as
    rounds of plain fancy ``+=``: round r adds each target's r-th occurrence (in index order, as np.add.at
    does, so the sums are bit for bit np.add.at's). Returns False (nothing done) where it does not apply;
    an out-of-range index is left to np.add.at's IndexError."""
    if isinstance(index, tuple):
        arrays = [k for k, sl in enumerate(index) if not (isinstance(sl, slice) and sl == slice(None))]
        if len(arrays) == 2 and arrays[1] == len(index) - 1 and index[-1] is Ellipsis:
            arrays = arrays[:1]                     # (:, ..., idx, ...): the trailing Ellipsis is full slices
        if len(arrays) != 1:
            return False
        lead, idx = index[:arrays[0]], index[arrays[0]]
    else:
        lead, idx = (), index
    if not isinstance(idx, np.ndarray) or idx.ndim != 1 or idx.dtype.kind not in "iu":
        return False
    ax = len(lead)
    if ax >= out.ndim:
        return False
    values = np.asarray(values)
    shape = out.shape[:ax] + idx.shape + out.shape[ax + 1:]
    size = 1
    for s in shape:
        size *= s
    if size < _ROUNDS_MIN or not np.can_cast(values.dtype, out.dtype, "same_kind") or \
            np.may_share_memory(out, values):       # (a round would read what an earlier one wrote)
        return False
    n = out.shape[ax]
    lo, hi = (int(idx.min()), int(idx.max())) if idx.size else (0, 0)
    if lo < -n or hi >= n:
        return False
    if lo < 0:
        idx = np.where(idx < 0, idx + n, idx)
    try:
        values = np.broadcast_to(values, shape)
    except ValueError:
        return False
    order = np.argsort(idx, kind="stable")
    srt = idx[order]
    first = np.ones(srt.size, dtype=bool)
    first[1:] = srt[1:] != srt[:-1]
    starts = np.flatnonzero(first)
    rank = np.arange(srt.size) - np.repeat(starts, np.diff(np.append(starts, srt.size)))
    rounds = int(rank.max()) + 1
    if rounds > _ROUNDS_MAX:
        return False
    pre = (slice(None),) * ax
    if rounds == 1:
        out[pre + (idx,)] += values
        return True
    for r in range(rounds):
        pos = order[rank == r]
        out[pre + (idx[pos],)] += values[pre + (pos,)]
    return True

class NumpyBackend(*NUMPY_MIXINS, Backend):
    xp = np
    name = "numpy"
    weak_scalars = True      # NumPy 2 keeps Python scalars weak: float32 array * 2.5 stays float32
    trace_through = TRACE_THROUGH     # ag.compile traces into the fused kernels (backends/kernels/)

    def __init__(self, device):
        super().__init__(device)
        self.rng = np.random.default_rng()

    # -- arrays and transfers ----------------------------------------------------------------
    def asarray(self, data, dtype=None, copy=False):
        if is_cupy_array(data):
            data = data.get()
        return np.array(data, dtype=dtype, copy=True) if copy else np.asarray(data, dtype=dtype)

    def to_host(self, a):
        return a

    def sole_view(self, a):
        """Backend.sole_view: ``a`` spans all of its base, is writeable and dense, and nothing but ``a`` holds
        the base (its references: a.base, the local ``b`` and getrefcount's argument, as counted by
        _SOLE_REFS on this interpreter). A view of a kept buffer (a compiled program's, the cached backward
        seed) or of anything else alive is not one."""
        b = a.base
        return (b.__class__ is np.ndarray and a.nbytes == b.nbytes and a.flags.writeable
                and (a.flags.c_contiguous or a.flags.f_contiguous) and sys.getrefcount(b) == _SOLE_REFS)

    # the host reads its own memory: no sync, so nothing for the sync debug mode (a CUDA-only mode, as PyTorch's)
    def read_back(self, a, what):
        return a

    def sync_point(self, what):
        return nullcontext()

    def from_dlpack(self, obj):
        return np.from_dlpack(obj)

    def scalar(self, value, dtype):
        """A Python scalar as an operand for an array of ``dtype``: NumPy 2 keeps it weak already."""
        return value

    def synchronize(self):
        pass

    def format(self, a):
        return np.array2string(a, separator=", ", prefix="Tensor(")

    def check_range(self, a, low, high, exc_type, message):
        """Backend.check_range on host values: the bounds compared as numbers, the offending entry
        found only when there is one (the base class builds it as an array for a device-side check)."""
        if a.size:
            lo, hi = np.minimum.reduce(a, axis=None), np.maximum.reduce(a, axis=None)   # (a.min(): Python around these)
            if lo < low or hi >= high:
                raise exc_type(message.replace("{value}", str((lo if lo < low else hi).item())))

    # -- kernels where the namespaces differ ---------------------------------------------------
    def scatter_add(self, out, index, values):
        """out[index] += values, with repeated indices accumulating (unbuffered). An index of one 1-d integer
        array along one dim (after full slices) scatters in rounds of duplicate-free fancy ``+=`` (the
        gathers' backward: 4-6x np.add.at's speed, the same sums in the same order); anything else, or a
        small scatter, takes np.add.at."""
        if not _scatter_add_rounds(out, index, values):
            np.add.at(out, index, values)

    def scatter_combine(self, out, pos, values, reduce):
        """Backend.scatter_combine as NumPy's unbuffered ufunc.at (every ufunc and dtype; about 100x the
        scan's speed on the host)."""
        getattr(np, self._COMBINE[reduce]).at(out, pos, values)

    def erf(self, x):
        return erf(x)

    # special functions (_special.py: SciPy's where installed, else NumPy ports)
    def erfc(self, x):
        return _special.erfc(x)

    def erfinv(self, x):
        return _special.erfinv(x)

    def lgamma(self, x):
        return _special.lgamma(x)

    def digamma(self, x):
        return _special.digamma(x)

    def polygamma(self, n, x):
        return _special.polygamma(n, x)

    def matmul(self, a, b, out=None):
        """float_matmul (NumPy's, or MKL's where installed); float16 operands are multiplied in float32
        and the result rounded to float16 (what tensor cores do; NumPy's own float16 matmul has no BLAS
        and is 7x slower). bfloat16 likewise (float32 accumulation, one rounding: PyTorch's result)."""
        if a.dtype == np.float16 or b.dtype == np.float16 or a.dtype is _BF16 or b.dtype is _BF16:
            y = float_matmul(a.astype(np.float32), b.astype(np.float32))
            dt = np.result_type(a.dtype, b.dtype)
            if out is None:
                return y.astype(dt)
            out[...] = y
            return out
        return float_matmul(a, b, out)

    def pack_matmul(self, b, rows):
        """b in MKL's packed format (mkl_blas.pack: 1.4x a plain product at a batch of 32 rows) where MKL
        takes it, else b itself."""
        p = mkl_blas.pack(b, rows) if _mkl is not None else None
        return b if p is None else p

    def matmul_packed(self, a, packed, k, n, out=None):
        if packed.ndim == 2:                       # not packed: b itself
            return self.matmul(a, packed, out=out)
        return mkl_blas.matmul_packed(a, packed, k, n, out)

    def axpy(self, y, alpha, x):
        """y += alpha * x: one pass through MKL's ?axpy where it takes the case (8x NumPy's two passes on
        a 400k-float weight, which stay in cache on both cores), else NumPy's ``y += alpha * x``."""
        if _mkl is None or not mkl_blas.axpy(y, alpha, x):
            y += alpha * x
        return y

    def sigmoid(self, x):
        """1 / (1 + exp(-x)) in three passes; exp overflows to inf for x << 0, giving the right 0, so
        the overflow warning is silenced (the where-based 'stable' form is 15x slower here). bfloat16 is
        computed in float32 and rounded once, as PyTorch does."""
        if x.dtype is _BF16:
            return self.sigmoid(x.astype(np.float32)).astype(_BF16)
        out = np.empty_like(x, dtype=np.result_type(x.dtype, np.float16))   # an array even for 0-d x
        with np.errstate(over="ignore"):
            np.negative(x, out=out)
            np.exp(out, out=out)
            out += 1
            return np.reciprocal(out, out=out)

    # -- random numbers ----------------------------------------------------------------------------
    def seed(self, seed):
        self.rng = np.random.default_rng(seed)

    def get_rng_state(self):
        """A snapshot of the generator that set_rng_state() restores (ag.utils.checkpoint replays with it)."""
        return self.rng.bit_generator.state

    def set_rng_state(self, state):
        self.rng.bit_generator.state = state

    def make_rng(self, seed):
        """A generator of this backend's kind (an ag.Generator wraps one), seeded as seed() seeds the global one."""
        return np.random.default_rng(seed)

    def reseed_rng(self, rng, seed):
        """Seed a generator from make_rng again, in place (whoever holds it, a compiled program too, follows)."""
        rng.bit_generator.state = np.random.default_rng(seed).bit_generator.state

    # PCG64's state as bytes (an ag.Generator's get_state): state and increment (16 bytes each), has_uint32 (1),
    # uinteger (4), little-endian
    _RNG_FIELDS = (("state", 16), ("inc", 16), ("has_uint32", 1), ("uinteger", 4))

    def generator_state(self, rng):
        """The state of a generator from make_rng as bytes, for set_generator_state."""
        st = rng.bit_generator.state
        values = {**st["state"], "has_uint32": st["has_uint32"], "uinteger": st["uinteger"]}
        return b"".join(int(values[k]).to_bytes(w, "little") for k, w in self._RNG_FIELDS)

    def set_generator_state(self, rng, raw):
        """Restore generator_state's bytes into a generator from make_rng, in place."""
        v, pos = {}, 0
        for k, w in self._RNG_FIELDS:
            v[k], pos = int.from_bytes(raw[pos:pos + w], "little"), pos + w
        rng.bit_generator.state = {"bit_generator": "PCG64", "state": {"state": v["state"], "inc": v["inc"]},
                                   "has_uint32": v["has_uint32"], "uinteger": v["uinteger"]}

    # the draws take rng=None (the backend's global generator) or one made by make_rng (an ag.Generator's)
    def rand(self, shape, dtype, rng=None):
        return (self.rng if rng is None else rng).random(shape, dtype=np.float64).astype(dtype, copy=False)

    def randn(self, shape, dtype, rng=None):
        return (self.rng if rng is None else rng).standard_normal(shape, dtype=np.float64).astype(dtype, copy=False)

    def randint(self, low, high, shape, dtype, rng=None):
        return (self.rng if rng is None else rng).integers(low, high, size=shape, dtype=dtype)

    def permutation(self, n, rng=None):
        return (self.rng if rng is None else rng).permutation(n)
