"""GPU backend: CuPy imported lazily (the package imports without it), install hints, per-device seeds."""
import numpy as np

from .base import Backend

_INSTALL_HINT = ('install it with pip install "autograd-gpu[cuda12]" (CUDA 12) '
                 'or pip install "autograd-gpu[cuda13]" (CUDA 13)')
_cupy = None
_import_error = None
_global_seed = [None]


def _import_cupy():
    global _cupy, _import_error
    if _cupy is None and _import_error is None:
        try:
            import cupy
            _cupy = cupy
        except Exception as e:   # ImportError, or a broken CUDA install raising something else
            _import_error = e
    return _cupy


def is_cupy_array(a):
    # only look at CuPy when the object could be one, so CPU code never triggers the import
    return type(a).__module__.startswith("cupy") and _import_cupy() is not None and isinstance(a, _cupy.ndarray)


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


class CupyBackend(Backend):
    name = "cupy"
    weak_scalars = False     # older CuPy promotes by value: pass scalars typed (see scalar())

    def __init__(self, device):
        super().__init__(device)
        cp = require_cuda(device.index)
        self.xp = cp
        self._cuda_device = cp.cuda.Device(device.index)
        # on GPU 0 (the usual case) no context switch is needed around each op
        self.context = None if device.index == 0 else (lambda: self._cuda_device)
        with self._cuda_device:
            self.rng = cp.random.RandomState(_global_seed[0])

    # -- arrays and transfers ----------------------------------------------------------------
    def asarray(self, data, dtype=None, copy=False):
        cp = self.xp
        with self._cuda_device:
            if copy:
                return cp.array(data, dtype=dtype, copy=True)
            return cp.asarray(data, dtype=dtype)

    def to_host(self, a):
        return a.get()

    def from_dlpack(self, obj):
        with self._cuda_device:
            return self.xp.from_dlpack(obj)

    def scalar(self, value, dtype):
        """A Python scalar as a typed NumPy scalar, so CuPy keeps a float32 array float32 whatever
        its promotion rules (and no host-to-device copy happens)."""
        return dtype.type(value)

    def synchronize(self):
        with self._cuda_device:
            self.xp.cuda.Device().synchronize()

    def format(self, a):
        return np.array2string(a.get(), separator=", ", prefix="Tensor(")

    # -- kernels where the namespaces differ ---------------------------------------------------
    def scatter_add(self, out, index, values):
        import cupyx
        with self._cuda_device:
            cupyx.scatter_add(out, index, values)

    def sigmoid(self, x):
        """1 / (1 + exp(-x)); exp overflowing to inf gives the right 0 (CuPy does not warn)."""
        with self._cuda_device:
            return 1 / (1 + self.xp.exp(-x))

    def matmul(self, a, b, out=None):
        """cupy.matmul: float16 goes to cuBLAS, which accumulates in float32."""
        with self._cuda_device:
            return self.xp.matmul(a, b) if out is None else self.xp.matmul(a, b, out=out)

    def erf(self, x):
        import cupyx.scipy.special
        with self._cuda_device:
            return cupyx.scipy.special.erf(x)

    # -- random numbers ----------------------------------------------------------------------------
    def seed(self, seed):
        with self._cuda_device:
            self.rng = self.xp.random.RandomState(seed)

    def rand(self, shape, dtype):
        with self._cuda_device:
            return self.rng.random_sample(shape, dtype=np.float64).astype(dtype, copy=False)

    def randn(self, shape, dtype):
        with self._cuda_device:
            return self.rng.standard_normal(shape, dtype=np.float64).astype(dtype, copy=False)

    def randint(self, low, high, shape, dtype):
        with self._cuda_device:
            return self.rng.randint(low, high, size=shape).astype(dtype, copy=False)

    def permutation(self, n):
        with self._cuda_device:
            return self.rng.permutation(n)
