"""The stand-in's modules: ``cupy`` (with ``cuda``, ``random``, ``linalg``, ``fft``, ``lib``) and ``cupyx``
(with ``scipy.special``). Each offers exactly CuPy's names (cupy_api.json); a CuPy function is the NumPy
function of the same name run on the host buffers, behind CuPy's argument rules."""
import numpy as np

from . import _api, _core, _kernels, cuda as _cuda
from ._core import ndarray, current_device_id, record, unwrap, unwrap_kwargs, wrap

# CuPy functions that only make views or read metadata (no kernel to capture)
_NO_KERNEL = frozenset({"broadcast_to", "expand_dims", "squeeze", "transpose", "swapaxes", "moveaxis", "shape",
                        "ndim", "size", "result_type", "can_cast", "promote_types", "isscalar", "broadcast_arrays",
                        "atleast_1d", "atleast_2d", "atleast_3d", "may_share_memory", "shares_memory",
                        "iscomplexobj", "isrealobj"})

# CuPy functions that read a size back from the device before they can allocate their result
_READS_BACK = frozenset({"nonzero", "argwhere", "flatnonzero", "unique", "unique_values", "unique_counts",
                         "unique_inverse", "unique_all", "bincount", "compress", "extract", "histogram",
                         "trim_zeros"})


# CuPy functions that call cuBLAS, which CuPy refuses while a stream captures
_CUBLAS = frozenset({"cupy.matmul", "cupy.dot", "cupy.vdot", "cupy.inner", "cupy.tensordot", "cupy.einsum",
                     "cupy.kron"})


# -- what each CuPy routine launches (count_launches) -----------------------------------------------------
# Where CuPy's count is unclear the higher one is taken, and the comment says so.
_REDUCTIONS = frozenset({"sum", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "mean", "all", "any",
                         "nansum", "nanprod", "nanmax", "nanmin", "nanargmax", "nanargmin", "count_nonzero",
                         "cumsum", "cumprod", "nancumsum", "nancumprod", "reduce", "accumulate", "reduceat",
                         "logsumexp", "trace"})
# several kernels: var = mean + a reduction of squared deviations, std = var + sqrt, ptp = max + min +
# subtract, average = sum + divide, median = a sort + a gather (conservative), eye/identity = zeros +
# a diagonal fill, pad = a fill + a copy
_SEVERAL = {"var": ("reduction", 2), "std": ("reduction", 3), "nanvar": ("reduction", 3),
            "nanstd": ("reduction", 4), "nanmean": ("reduction", 3), "ptp": ("reduction", 3),
            "average": ("reduction", 2), "median": ("other", 3), "eye": ("fill", 2), "identity": ("fill", 2),
            "pad": ("copy", 2)}
_FILLS = frozenset({"zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "fill", "arange",
                    "linspace", "logspace", "tri"})
_ALLOCATIONS = frozenset({"empty", "empty_like"})          # memory only: no kernel
_COPIES = frozenset({"copy", "ascontiguousarray", "asfortranarray", "copyto", "flatten", "tile", "repeat",
                     "roll", "tril", "triu", "diag", "ravel", "reshape", "array", "asarray"})
_GATHERS = frozenset({"take", "take_along_axis", "choose", "compress", "extract", "select"})
_SCATTERS = frozenset({"put", "put_along_axis", "place", "putmask", "scatter_add", "scatter_max",
                       "scatter_min", "at"})
_CONCATS = frozenset({"concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack"})
_ELEMENTWISE = frozenset({"where", "clip", "around", "round", "round_", "nan_to_num", "real_if_close", "conj",
                          "conjugate", "outer", "erf", "sigmoid"})
# random draws: cuRAND fills the result in one call (random_sample, rand, randn, standard_normal, normal);
# uniform scales and shifts it (CuPy: low + rand * (high - low), 3); randint draws then maps into the
# interval (2, conservative); permutation/shuffle draw keys and sort them (3, conservative)
_RANDOM = {"uniform": 3, "randint": 2, "random_integers": 2, "permutation": 3, "shuffle": 3, "choice": 3}


def _concat_launches(args, kwargs):
    """CuPy's _concatenate (cupy/_core/_routines_manipulation.pyx): one elementwise copy per input, or
    one kernel over a table of pointers for more than 8 inputs of one dtype under 2 MiB each on average
    (that path also copies the pointer table to the device, which the stand-in does not log). The copies
    are ufunc calls: an empty input launches none."""
    arrays = [a for a in (args[0] if args else kwargs.get("tup", kwargs.get("arrays", ())))]
    if len(arrays) > 8 and len({getattr(a, "dtype", None) for a in arrays}) == 1:
        total = sum(a.nbytes for a in arrays if type(a) is ndarray)
        if total < 2 * 1024 * 1024 * len(arrays):
            return 1
    # elementwise_copy is a ufunc: an empty input copies nothing
    return sum(1 for a in arrays if type(a) is not ndarray or a.size)


def _outs(args, kwargs, nin):
    """The outputs given to a ufunc: positional ones after its ``nin`` inputs, or ``out=`` (an array or a
    tuple)."""
    out = kwargs.get("out") if kwargs else None
    outs = tuple(args[nin:])
    if out is not None:
        outs += tuple(out) if type(out) is tuple else (out,)
    return outs


def _bound(qualname, args, kwargs):
    """{parameter: value} of a call, by CuPy's parameter names (cupy_api.json; a method's self is ``a``)."""
    ns, name = qualname.rsplit(".", 1)
    params = list((_api.names(ns).get(name) or {}).get("params") or ())
    if ns == "cupy.ndarray":
        params = ["a"] + params
    got = dict(zip(params, args))
    got.update(kwargs or {})
    return got


def _reduction_count(qualname, name, args, kwargs):
    """``count`` of a CuPy reduction: _core.reduction_launches over the call's arguments."""
    def count(res):             # called only while a launch log is open
        b = _bound(qualname, args, kwargs)
        a, out = b.get("a"), b.get("out")
        if type(a) is not ndarray:
            return 1
        return _core.reduction_launches(name, a._a, b.get("axis"), b.get("dtype"),
                                        out if type(out) is ndarray else None, bool(b.get("keepdims", False)))
    return "reduction", count


# the reductions CuPy runs through cupy.cuda.cub or its reduction kernels (one input, one output)
_SIMPLE_REDUCTIONS = frozenset({"sum", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "mean", "all",
                                "any", "nansum", "nanprod", "nanmax", "nanmin", "nanargmax", "nanargmin",
                                "count_nonzero"})


def _launches(qualname, args, kwargs, is_ufunc=False):
    """(kind, count) for one CuPy call: ``count`` an int or a function of the result (0 for a view), or of
    it a list of (kind, n) (_core.kernel). ``is_ufunc``: the ufunc's number of inputs."""
    name = qualname.rsplit(".", 1)[-1]
    if qualname.startswith("cupy.random."):
        return "random", _RANDOM.get(name, 1)
    if is_ufunc:
        return "ufunc", _core.ufunc_launches(args[:is_ufunc], _outs(args, kwargs, is_ufunc))
    if name == "where" and len(args) == 3 and type(args[0]) is ndarray:
        # cupy/_sorting/search.py: _where_ufunc(condition.astype('?'), x, y); astype copies (copy=True)
        cond = args[0]
        return "ufunc", lambda res: [("copy", int(cond._a.size > 0)), ("ufunc", _core._one_ufunc(res))]
    if name in _ELEMENTWISE:
        return "ufunc", _core.ufunc_launches(args, _outs((), kwargs, 0))
    if qualname in _CUBLAS or name == "dot":
        return "cublas", 1                   # one GEMM (or GEMV / DOT; batched for 3-d and more)
    if qualname.startswith("cupy.linalg."):
        if name == "norm":
            return "reduction", 3            # |x|^2 (or |x|), a sum, a sqrt: conservative
        return "cusolver", 1                  # one cuSOLVER/cuBLAS routine at least (workloads use none)
    if name in _SEVERAL:
        return _SEVERAL[name]
    if name in _SIMPLE_REDUCTIONS and qualname.rsplit(".", 2)[-2] in ("cupy", "ndarray"):
        return _reduction_count(qualname, name, args, kwargs)
    if name in _REDUCTIONS:
        return "reduction", 1                # one kernel, over any number of axes
    if name in _ALLOCATIONS:
        return "fill", 0
    if name in _FILLS:
        return "fill", 1                     # zeros: a memset; ones/full/fill: a fill kernel
    if name in _CONCATS:
        return "copy", _concat_launches(args, kwargs)
    out_given = bool(kwargs) and kwargs.get("out") is not None

    def unless_view(res):
        return 0 if not out_given and _core.is_view(res, (args, kwargs)) else 1
    if name in _COPIES:
        return "copy", unless_view
    if name in _GATHERS:
        return "gather", unless_view
    if name in _SCATTERS:
        return "scatter", 1
    return "other", unless_view


def _call(qualname, npf, check, args, kwargs, is_ufunc=False):
    if check is not None:
        check(args, kwargs)
    if qualname in _CUBLAS or qualname.startswith("cupy.linalg."):
        _core.refuse_cublas_under_capture(qualname)
    dev = current_device_id()
    if qualname.rsplit(".", 1)[-1] in _READS_BACK:
        record("d2h", f"{qualname} (reads the result's size back from the device)")
    uargs, ukwargs = unwrap(args, dev, qualname), unwrap_kwargs(kwargs, dev, qualname)
    out = kwargs.get("out") if kwargs else None

    def run():
        with np.errstate(all="ignore"):                       # CUDA kernels never warn
            res = npf(*uargs, **ukwargs)
        if type(out) is ndarray and res is out._a:
            return out
        return wrap(res, dev)
    if qualname.rsplit(".", 1)[-1] in _NO_KERNEL:
        return run()
    if qualname == "cupy.matmul" and len(uargs) >= 2:        # the GEMM and CuPy's copies and pointer tables
        return _core.matmul_kernel(run, (args, kwargs), qualname, uargs[0], uargs[1],
                                   uargs[2] if len(uargs) > 2 else ukwargs.get("out"))
    kind, count = _launches(qualname, args, kwargs, is_ufunc)
    return _core.kernel(run, (args, kwargs), kind, qualname, count)


def function(qualname, npf, entry):
    check = _api.keyword_checker(qualname, entry)

    def f(*args, **kwargs):
        return _call(qualname, npf, check, args, kwargs)
    f.__name__ = qualname.rsplit(".", 1)[-1]
    f.__qualname__ = qualname
    f.__module__ = qualname.rsplit(".", 1)[0]       # "cupy", "cupy.random", ... as CuPy's functions say
    f.__doc__ = f"CuPy stand-in for {qualname} (NumPy's {getattr(npf, '__name__', npf)} on the host buffers)."
    return f


class ufunc:
    """A CuPy ufunc: callable, with ``nin``/``nout`` and the methods CuPy's ufuncs have."""

    def __init__(self, qualname, npu, entry):
        self.__name__ = qualname.rsplit(".", 1)[-1]
        self.__module__ = qualname.rsplit(".", 1)[0]
        self._qualname, self._npu = qualname, npu
        self._check = _api.keyword_checker(qualname, entry)
        self.nin, self.nout = npu.nin, npu.nout

    def __call__(self, *args, **kwargs):
        for a in args:                  # a CuPy ufunc takes arrays and scalars, never lists or tuples
            if type(a) is list or type(a) is tuple:
                raise TypeError(f"Unsupported type {type(a)} (in {self._qualname}: CuPy ufuncs take CuPy "
                                "arrays and scalars only)")
        return _call(self._qualname, self._npu, self._check, args, kwargs, is_ufunc=self.nin)

    def __getattr__(self, method):
        if method.startswith("_") or method not in _api.UFUNC_METHODS:
            raise AttributeError(f"'cupy.ufunc' object has no attribute '{method}'")
        name = f"{self._qualname}.{method}"
        supported = _UFUNC_METHODS_SUPPORTED.get(method)
        if supported is not None and self.__name__ not in supported:
            return _api.not_supported(name, f"`{name}` is not supported yet")
        if method == "at":
            return _scatter(self._npu, name, self.__name__)
        entry = {"params": _api.UFUNC_METHODS[method], "varargs": False, "varkw": False}
        return function(name, getattr(self._npu, method), entry)

    def __repr__(self):
        return f"<ufunc '{self.__name__}' (CuPy stand-in)>"


def _from_numpy(qualname, source):
    """``make`` for a namespace whose functions are NumPy's (``source``) under CuPy's rules."""
    overrides = _OVERRIDES.get(qualname, {})

    def make(name, entry):
        if name in overrides:
            return overrides[name]
        sub = f"{qualname}.{name}"
        if entry["kind"] == "module":
            return _SUBMODULES[sub]() if sub in _SUBMODULES else _api.Namespace(sub, _unsimulated_in(sub))
        npobj = getattr(source, name, None)
        if npobj is None:
            return _api.not_simulated(sub)
        if entry["kind"] == "ufunc" and isinstance(npobj, np.ufunc):
            return ufunc(sub, npobj, entry)
        if entry["kind"] in ("function", "ufunc") and callable(npobj):
            return function(sub, npobj, entry)
        return npobj                                     # dtypes, constants (pi, inf, newaxis)
    return make


def _unsimulated_in(qualname):
    return lambda name, entry: _api.not_simulated(f"{qualname}.{name}")


def _from_module(qualname, module):
    """``make`` for a namespace whose names are defined by the stand-in (``module``)."""
    def make(name, entry):
        obj = getattr(module, name, None)
        return _api.not_simulated(f"{qualname}.{name}") if obj is None else obj
    return make


# -- the functions that move data or differ from NumPy ---------------------------------------------
def asarray(a, dtype=None, order=None, *, blocking=False):
    return array(a, dtype=dtype, copy=False, order=order)


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    dev = current_device_id()
    if type(obj) is ndarray:                              # device to device: no host transfer
        a = obj._a
        if obj._dev != dev:
            copy = True
        if copy:
            res = _core.kernel(lambda: np.array(a, dtype=dtype, copy=True, order=order, ndmin=ndmin), (obj,),
                               "copy", "cupy.array")
        else:
            res = np.asarray(a, dtype=dtype, order=order if order != "K" else None)
            if res is not a and _core._launch_logs and not np.may_share_memory(res, a) and res.size:
                # another dtype or order: CuPy's _array_from_cupy_ndarray copies by a.astype (one kernel)
                _core.launch("copy", "cupy.asarray")
        if ndmin and res.ndim < ndmin:
            res = res.reshape((1,) * (ndmin - res.ndim) + res.shape)
        return obj if (res is a and obj._dev == dev) else ndarray._from_host(res, dev)
    _check_host_data(obj)
    record("h2d", "cupy.array / cupy.asarray of host data")
    res = np.array(obj, dtype=dtype, copy=True, order=order, ndmin=ndmin)   # device memory is separate
    _core.check_dtype(res.dtype, "cupy.array")
    return ndarray._from_host(res, dev)


def _check_host_data(obj):
    if type(obj) in (list, tuple):
        for v in obj:
            if type(v) is ndarray:
                raise ValueError("Unsupported: a list mixing CuPy arrays with host data; use cupy.stack")
            _check_host_data(v)


def asanyarray(a, dtype=None, order=None, *, blocking=False):
    return asarray(a, dtype=dtype, order=order)


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    if type(a) is ndarray:
        return a.get(stream=stream, order=order, out=out)
    return np.asarray(a, order=order)


def get_array_module(*args):
    from . import cupy as _cp
    return _cp if any(type(a) is ndarray for a in args) else np


def from_dlpack(array, *, device=None, copy=None):
    if type(array) is ndarray:
        return ndarray._from_host(array._a, array._dev)
    kind = getattr(array, "__dlpack_device__", lambda: (None,))()[0]
    raise BufferError(f"cupy.from_dlpack: the stand-in takes only its own device arrays (got {type(array)}, "
                      f"DLPack device type {kind}; CuPy accepts only CUDA memory here)")


def _wrapping(npf, qualname):
    """take / take_along_axis with CuPy's out-of-bounds rule: indices wrap around."""
    entry = _api.names("cupy").get(qualname.rsplit(".", 1)[-1])
    check = _api.keyword_checker(qualname, entry)

    def f(a, indices, *args, **kwargs):
        if check is not None:
            check((a, indices) + args, kwargs)
        dev = current_device_id()
        x, idx0 = unwrap(a, dev, qualname), unwrap(indices, dev, qualname)
        axis = args[0] if args else kwargs.get("axis")
        n = x.size if axis is None else x.shape[axis]
        ua, uk = unwrap(args, dev, qualname), unwrap_kwargs(kwargs, dev, qualname)

        def run():              # the indices wrapped inside the kernel: a graph launch reads them again
            idx = idx0 % n if isinstance(idx0, np.ndarray) and n else idx0
            return wrap(npf(x, idx, *ua, **uk), dev)
        return _core.kernel(run, (a, indices), "gather", qualname)
    f.__name__ = qualname.rsplit(".", 1)[-1]
    return f


# -- cupy.random ------------------------------------------------------------------------------------------
_FLOAT_KINDS = frozenset({"random_sample", "random", "rand", "randn", "standard_normal", "normal", "uniform",
                          "standard_exponential", "exponential", "gamma", "standard_gamma"})
# those that draw through cuRAND and so take float32 and float64 only (cupy/random/_generator.py,
# _check_and_get_dtype: TypeError "cupy.random only supports float32 and float64")
_CURAND_FLOAT = frozenset({"random_sample", "rand", "randn", "standard_normal", "normal", "uniform"})


class _RandomBase:
    """Forwards CuPy's sampling methods to a NumPy generator and puts the samples on the device.
    CuPy's float samplers take ``dtype`` where NumPy's RandomState does not: drawn in float64, cast."""
    _namespace: str | None = None

    def __getattr__(self, name):
        entry = _api.names(self._namespace).get(name)
        if name.startswith("_") or entry is None:
            raise AttributeError(f"'{self._namespace}' object has no attribute '{name}'")
        npf = getattr(self._rng, name, None)
        if npf is None:
            return _api.not_simulated(f"{self._namespace}.{name}")
        check = _api.keyword_checker(f"{self._namespace}.{name}", entry)
        dev = self._dev

        def method(*args, **kwargs):
            if check is not None:
                check(args, kwargs)
            dtype = kwargs.pop("dtype", None) if name in _FLOAT_KINDS else None
            if name in _CURAND_FLOAT and np.dtype(float if dtype is None else dtype).char not in "fd":
                raise TypeError(f"cupy.random only supports float32 and float64 (got {np.dtype(dtype)} "
                                f"in {self._namespace}.{name})")
            if _core._local.__dict__.get("capture") is not None:
                raise NotImplementedError(f"{self._namespace}.{name} while a stream captures: cuRAND's "
                                          "host API would replay the same numbers at every launch, and the "
                                          "CuPy stand-in does not simulate that")
            with _cuda.Device(dev):
                out = _call(f"{self._namespace}.{name}", npf, None, args, kwargs)
            if dtype is not None and type(out) is ndarray:      # CuPy draws in dtype: no cast kernel
                out = ndarray._from_host(out._a.astype(dtype, copy=False), out._dev)
            return out
        return method


class RandomState(_RandomBase):
    _namespace = "cupy.random.RandomState"

    def __init__(self, seed=None, method=None):
        self._rng = np.random.RandomState(seed)
        self._dev = current_device_id()

    def seed(self, seed=None):
        self._rng.seed(seed)


class Generator(_RandomBase):
    _namespace = "cupy.random.Generator"

    def __init__(self, bit_generator=None):
        self._rng = np.random.default_rng(bit_generator)
        self._dev = current_device_id()


def default_rng(seed=None):
    return Generator(seed)


_random_states: dict[int, RandomState] = {}     # device id -> its RandomState


def get_random_state():
    dev = current_device_id()
    if dev not in _random_states:
        _random_states[dev] = RandomState()
    return _random_states[dev]


def _module_random(name, entry):
    """``make`` for cupy.random: the classes, or the function of the device's global RandomState."""
    local = {"RandomState": RandomState, "Generator": Generator, "default_rng": default_rng,
             "get_random_state": get_random_state, "seed": lambda seed=None: get_random_state().seed(seed)}
    if name in local:
        return local[name]
    if name in _api.names("cupy.random.RandomState"):
        return lambda *a, **k: getattr(get_random_state(), name)(*a, **k)
    return _api.not_simulated(f"cupy.random.{name}")


# -- cupyx --------------------------------------------------------------------------------------------
# The ufunc methods CuPy 14 implements, and for which ufuncs (cupy/_core/_kernel.pyx, ufunc.reduce /
# accumulate / reduceat / at: any other raises NotImplementedError "`<name>.<method>` is not supported yet").
_UFUNC_METHODS_SUPPORTED = {"reduce": {"add", "multiply"}, "accumulate": {"add", "multiply"},
                            "reduceat": {"add"},
                            "at": {"add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or",
                                   "bitwise_xor"}}

# The dtypes CuPy 14.2.0's scatter kernels take when the index has an index array (they use CUDA
# atomics): its _routines_indexing module raises TypeError "cupy.add.at only supports int32, int64,
# float16, float32, float64, uint32, uint64 as data type" and the like (read from the 14.2.0 binary's
# strings); cupyx.scatter_add / scatter_max / scatter_min take the same path. Boolean-mask and basic
# indices use plain kernels instead and take any dtype.
_ATOMIC_DTYPES = {
    "add": ("int32", "int64", "float16", "float32", "float64", "uint32", "uint64"),
    "subtract": ("int32", "uint32"),
    "maximum": ("int32", "int64", "float32", "float64", "uint32", "uint64"),
    "minimum": ("int32", "int64", "float32", "float64", "uint32", "uint64"),
    "bitwise_and": ("int32", "int64", "uint32", "uint64"),
    "bitwise_or": ("int32", "int64", "uint32", "uint64"),
    "bitwise_xor": ("int32", "int64", "uint32", "uint64"),
}


def _uses_atomics(key):
    """Whether CuPy scatters with ``key`` through its atomic kernels: an integer index array, or more
    than one index array (a lone boolean mask takes the mask kernel)."""
    arrays = [p for p in key if isinstance(p, np.ndarray)]
    return len(arrays) > 1 or any(p.dtype != np.bool_ for p in arrays)


def _scatter(npu, qualname, op):
    def f(a, slices, value=None):
        if type(a) is not ndarray:
            raise TypeError(f"{qualname}: expected a cupy.ndarray, got {type(a)}")
        dev = a._here(qualname)
        key = _core._index_key(a, slices, dev, setting=True)
        if _uses_atomics(key) and a.dtype.name not in _ATOMIC_DTYPES[op]:
            raise TypeError(f"cupy.{op}.at only supports {', '.join(_ATOMIC_DTYPES[op])} as data type "
                            f"(got {a.dtype}; in {qualname})")
        v = unwrap(value, dev, qualname)
        k = [key]

        def count(_):   # CuPy's _scatter_op: index kernels, or the ufunc in place on a basic view
            if _core._advanced(slices):
                got = _core.index_launches(key, a.shape, v, a.dtype, setting=True)
                return got if a._a[key].size else [kn for kn in got if kn[0] == "other"]
            view = a._a[key]
            if view.size == 0:
                return []
            return [("copy", int(isinstance(v, np.ndarray) and bool(np.may_share_memory(v, view)))), ("ufunc", 1)]
        _core.kernel(lambda: npu.at(a._a, k.pop() if k else _core._index_key(a, slices, dev, setting=True), v),
                     (a, slices), "scatter", qualname, count)
    f.__name__ = qualname.rsplit(".", 1)[-1]
    return f


def _erf(x):
    from ...backends._erf import erf              # the same fdlibm port the CPU backend uses
    dev = x._here("cupyx.scipy.special.erf") if type(x) is ndarray else current_device_id()
    ux = unwrap(x, dev, "cupyx.scipy.special.erf")
    return _core.kernel(lambda: wrap(erf(ux), dev), (x,), "ufunc", "cupyx.scipy.special.erf")


def _special(name):
    """cupyx.scipy.special.<name> as the CPU backend computes it (backends/_special.py), as one kernel."""
    def f(*args):
        from ...backends import _special as sp
        qual = f"cupyx.scipy.special.{name}"
        x = args[-1]
        dev = x._here(qual) if type(x) is ndarray else current_device_id()
        us = [unwrap(a, dev, qual) for a in args]
        impl = {"gammaln": sp.lgamma, "polygamma": lambda n, a: sp.polygamma(int(n.flat[0]), a)}.get(
            name, getattr(sp, name, None))
        return _core.kernel(lambda: wrap(impl(*us), dev), args, "ufunc", qual)
    f.__name__ = name
    return f


_OVERRIDES = {
    "cupy": {"ElementwiseKernel": _kernels.ElementwiseKernel, "ReductionKernel": _kernels.ReductionKernel,
             "ndarray": ndarray, "asarray": asarray, "array": array, "asanyarray": asanyarray,
             "asnumpy": asnumpy, "get_array_module": get_array_module, "from_dlpack": from_dlpack,
             "take": _wrapping(np.take, "cupy.take"),
             "take_along_axis": _wrapping(np.take_along_axis, "cupy.take_along_axis")},
    "cupyx": {"scatter_add": _scatter(np.add, "cupyx.scatter_add", "add"),
              "scatter_max": _scatter(np.maximum, "cupyx.scatter_max", "maximum"),
              "scatter_min": _scatter(np.minimum, "cupyx.scatter_min", "minimum")},
    "cupyx.scipy.special": {"erf": _erf, **{n: _special(n) for n in ("erfc", "erfinv", "gammaln", "digamma",
                                                                      "polygamma")}},
}

_SUBMODULES = {
    "cupy.cuda": lambda: _api.Namespace("cupy.cuda", _from_module("cupy.cuda", _cuda)),
    "cupy.cuda.runtime": lambda: _api.Namespace("cupy.cuda.runtime",
                                                _from_module("cupy.cuda.runtime", _cuda.runtime)),
    "cupy.random": lambda: _api.Namespace("cupy.random", _module_random),
    "cupy.linalg": lambda: _api.Namespace("cupy.linalg", _from_numpy("cupy.linalg", np.linalg)),
    "cupy.fft": lambda: _api.Namespace("cupy.fft", _from_numpy("cupy.fft", np.fft)),
    "cupy.lib": lambda: _lib(),
    "cupyx.scipy": lambda: _scipy(),
}


def _lib():
    m = _api.Namespace("cupy.lib", _unsimulated_in("cupy.lib"))
    m.stride_tricks = _api.Namespace("cupy.lib.stride_tricks",
                                     _from_numpy("cupy.lib.stride_tricks", np.lib.stride_tricks))
    return m


def _scipy():
    m = _api.Namespace("cupyx.scipy", _unsimulated_in("cupyx.scipy"))
    m.special = _api.Namespace("cupyx.scipy.special", _from_numpy("cupyx.scipy.special", np))
    return m


def _install_ndarray_methods():
    """CuPy's ndarray methods that the class does not define itself: NumPy's method on the buffer,
    after the device check (a kernel runs on the current device), with CuPy's keywords."""
    views = {"squeeze", "swapaxes", "diagonal", "ravel"}
    for name, entry in _api.names("cupy.ndarray").items():
        if entry["kind"] != "method" or name in ndarray.__dict__:
            continue
        if not hasattr(np.ndarray, name):
            setattr(ndarray, name, _api.not_simulated(f"cupy.ndarray.{name}"))
            continue
        setattr(ndarray, name, _method(name, entry, name in views))
    for name, fn in list(vars(ndarray).items()):    # as CuPy's method descriptors: ndarray.reshape.__objclass__
        if callable(fn) and not name.startswith("__") and not isinstance(fn, type):
            try:
                fn.__objclass__ = ndarray
            except AttributeError:                 # staticmethod/classmethod objects
                pass


def _method(name, entry, view):
    qualname = f"cupy.ndarray.{name}"
    check = _api.keyword_checker(qualname, entry)

    def method(self, *args, **kwargs):
        if check is not None:
            check(args, kwargs)
        dev = self._dev if view else self._here(name)
        if name == "dot":
            _core.refuse_cublas_under_capture(qualname)
        if name in _READS_BACK:
            record("d2h", f"{qualname} (reads the result's size back from the device)")
        ua, uk = unwrap(args, dev, qualname), unwrap_kwargs(kwargs, dev, qualname)
        out = kwargs.get("out")

        def run():
            with np.errstate(all="ignore"):
                res = getattr(self._a, name)(*ua, **uk)
            return out if type(out) is ndarray and res is out._a else wrap(res, dev)
        if view:                       # ravel / squeeze / swapaxes / diagonal: a copy only where no view exists
            res = run()
            if _core._launch_logs and not _core.is_view(res, self):
                _core.launch("copy", qualname)
            return res
        kind, count = _launches(qualname, (self,) + args, kwargs)
        return _core.kernel(run, (self, args, kwargs), kind, qualname, count)
    method.__name__ = name
    return method


_install_ndarray_methods()
cupy = _api.Namespace("cupy", _from_numpy("cupy", np), "The CuPy stand-in (NumPy underneath, CuPy's rules).")
cupyx = _api.Namespace("cupyx", _from_numpy("cupyx", np))
