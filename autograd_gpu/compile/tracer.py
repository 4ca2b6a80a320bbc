"""The tracer: runs a function for real while logging the array-level work it does.

While a trace runs, every backend's array namespace ``xp`` is a recording proxy and its named kernels
(sigmoid, matmul, rand, ...) are recording wrappers, and the arrays of the tensors involved are
``Traced`` handles around the real arrays. Every call on them (an xp function, an array method, an
operator, an indexing assignment) runs on the real arrays and is appended to the trace as a step
``(fn, args, kwargs) -> outputs`` whose arguments are value numbers or constants. The program built
from the trace (program.py) calls the same functions again on new arrays.

Reads of values into Python (``.item()``, ``bool(a)``, ``float(a)``, ``.tolist()``, host copies) are
logged as guards: the value seen is kept and the replay checks it. Anything the tracer cannot follow
(``numpy.asarray`` on a traced array, a write into an array it does not know) raises ``Untraceable``,
and the function runs eagerly instead.

The records themselves (``Ref``, ``Step``) are the trace IR of backends/trace_ir.py, which the
backends' fusers read without importing this package; the switch that says a trace runs in this
thread and the ``host_values`` hook are in _trace_hooks.py, where optimizers and layers below
compile/ reach them (``Tracer.host_values`` answers the hook).
"""
import operator
import threading
import traceback
from typing import Any, Callable

from .. import backends as _backends
from ..backends.trace_ir import Ref, Step, RecordingNamespace
from .._trace_hooks import state as _active, active, host_values  # noqa: F401  (the switch and hook the tracer registers on)

__all__ = ["Traced", "Tracer", "Untraceable", "active", "host_values"]


class Untraceable(Exception):
    """The traced function did something the tracer cannot record faithfully."""


def user_frame():
    """'file:line' of the innermost frame outside autograd_gpu (the user's code)."""
    pkg = __name__.rsplit(".", 2)[0].replace(".", "/")
    for fs in reversed(traceback.extract_stack()):
        if f"/{pkg}/" not in fs.filename.replace("\\", "/"):
            return f"{fs.filename}:{fs.lineno}"
    return "<unknown>"


# --------------------------------------------------------------------------- traced arrays
def _unwrap(x):
    c = x.__class__
    if c is Traced:
        return x.v
    if c is tuple or c is list:
        return c(_unwrap(y) for y in x) if any(_has_traced(y) for y in x) else x
    if c is dict:
        return {k: _unwrap(v) for k, v in x.items()}
    if c is slice and _has_traced(x):
        return slice(_unwrap(x.start), _unwrap(x.stop), _unwrap(x.step))
    return x


def _has_traced(x):
    c = x.__class__
    if c is Traced:
        return True
    if c is tuple or c is list:
        return any(_has_traced(y) for y in x)
    if c is dict:
        return any(_has_traced(y) for y in x.values())
    if c is slice:
        return _has_traced(x.start) or _has_traced(x.stop) or _has_traced(x.step)
    return False


def _template(x):
    """The argument as stored in a step: Traced -> Ref, containers copied."""
    c = x.__class__
    if c is Traced:
        return Ref(x.vid)
    if c is tuple or c is list:
        return c(_template(y) for y in x)
    if c is dict:
        return {k: _template(v) for k, v in x.items()}
    if c is slice and _has_traced(x):
        return slice(_template(x.start), _template(x.stop), _template(x.step))
    return x


def _binop(fn, name):
    def op(self, other):
        return _dispatch(fn, (self, other), {}, name, fresh=True)
    op.__name__ = f"__{name}__"
    return op


def _rbinop(fn, name):
    def op(self, other):
        return _dispatch(fn, (other, self), {}, name, fresh=True)
    op.__name__ = f"__r{name}__"
    return op


def _ibinop(fn, name):
    def op(self, other):
        return _dispatch(fn, (self, other), {}, "i" + name, mutates=(0,), fresh=True)
    op.__name__ = f"__i{name}__"
    return op


def _unop(fn, name):
    def op(self):
        return _dispatch(fn, (self,), {}, name, fresh=True)
    op.__name__ = f"__{name}__"
    return op


def _read(fn, name):
    def op(self, *args):
        return _guard(fn, (self,) + args, {}, name)
    op.__name__ = f"__{name}__"
    return op


# methods of arrays that write into the array itself (their first argument is the receiver)
MUTATING_METHODS = frozenset({"fill", "sort", "partition", "put", "itemset", "resize", "setfield", "setflags",
                              "byteswap"})
# methods whose result is a new array (never a view of an argument)
FRESH_METHODS = frozenset({"sum", "mean", "prod", "max", "min", "std", "var", "argmax", "argmin", "any", "all",
                           "cumsum", "cumprod", "dot", "round", "clip", "copy", "astype", "nonzero", "argsort"})
# methods that read values into Python
READING_METHODS = frozenset({"item", "tolist", "tobytes", "tofile", "dump", "dumps", "__array__", "get"})


class Traced:
    """A handle on one real array during a trace: what ops do with it is logged."""
    __slots__ = ("v", "vid", "_ag_backend", "__weakref__")
    __array_priority__ = 10000

    # NumPy called directly (a graph node made before the trace keeps the real namespace as ctx.xp;
    # ndarray <op> Traced): logged like the proxy's calls
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = ufunc if method == "__call__" else getattr(ufunc, method)
        return _dispatch(fn, inputs, kwargs, f"{ufunc.__name__}.{method}", mutates=(0,) if method == "at" else (),
                         fresh=method == "__call__" and "out" not in kwargs)

    def __array_function__(self, func, types, args, kwargs):
        name = getattr(func, "__name__", "")
        if name in READING_FUNCS:
            return _guard(func, args, kwargs, name)
        return _dispatch(func, args, kwargs, name, fresh=name in FRESH_FUNCS and "out" not in kwargs)

    def __init__(self, v, vid, backend):
        self.v, self.vid, self._ag_backend = v, vid, backend

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        real = getattr(self.v, name)
        if callable(real):
            return _method(self, name)
        if _is_array(real):          # .T, .real, .imag, .mT: views, logged
            return _dispatch(getattr, (self, name), {}, name)
        return real                  # shape, dtype, ndim, size, strides, flags: fixed by the signature

    def __setitem__(self, key, value):
        _dispatch(operator.setitem, (self, key, value), {}, "setitem", mutates=(0,))

    def __getitem__(self, key):
        return _dispatch(operator.getitem, (self, key), {}, "getitem")

    def __len__(self):
        return len(self.v)

    def __iter__(self):
        return (self[i] for i in range(len(self.v)))

    def __array__(self, *args, **kwargs):
        if _active.t is not None:
            _active.t.fail(f"a traced array was converted with numpy.asarray at {user_frame()}")
        return self.v.__array__(*args, **kwargs)

    def __repr__(self):
        return f"Traced(v{self.vid}, {self.v!r})" if _active.t is None else _guard(repr, (self,), {}, "repr")

    __hash__ = None    # type: ignore[assignment]  # unhashable, as an array (typeshed types object.__hash__ as a method)
    __str__ = _read(str, "str")
    __format__ = _read(format, "format")
    __bool__ = _read(bool, "bool")
    __float__ = _read(float, "float")
    __int__ = _read(int, "int")
    __complex__ = _read(complex, "complex")
    __index__ = _read(operator.index, "index")
    __contains__ = _read(operator.contains, "contains")


_fn: Callable[..., Any]      # the operator of each dunder below: binary, comparison, then unary
for _name, _fn in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv), ("mod", operator.mod),
                   ("pow", operator.pow), ("matmul", operator.matmul), ("and", operator.and_),
                   ("or", operator.or_), ("xor", operator.xor), ("lshift", operator.lshift),
                   ("rshift", operator.rshift)):
    setattr(Traced, f"__{_name}__", _binop(_fn, _name))
    setattr(Traced, f"__r{_name}__", _rbinop(_fn, _name))
    setattr(Traced, f"__i{_name}__", _ibinop(getattr(operator, f"i{_name.rstrip('_')}"), _name))
for _name, _fn in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt), ("ge", operator.ge),
                   ("eq", operator.eq), ("ne", operator.ne)):
    setattr(Traced, f"__{_name}__", _binop(_fn, _name))
for _name, _fn in (("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs),
                   ("invert", operator.invert)):
    setattr(Traced, f"__{_name}__", _unop(_fn, _name))


def _method(recv, name):
    fn = getattr(type(recv.v), name, None)
    if fn is None:                       # an attribute of the instance: call it through getattr
        def fn(a, *args, **kwargs):
            return getattr(a, name)(*args, **kwargs)
        fn.__name__ = name

    def call(*args, **kwargs):
        if name in READING_METHODS:
            return _guard(fn, (recv,) + args, kwargs, name)
        return _dispatch(fn, (recv,) + args, kwargs, name, mutates=(0,) if name in MUTATING_METHODS else (),
                         fresh=name in FRESH_METHODS and "out" not in kwargs and kwargs.get("copy", True) is not False)
    return call


def _is_array(x):
    return _backends.backend_of_array(x) is not None or x.__class__ in _backends.SCALAR_TYPES


def _dispatch(fn, args, kwargs, label, mutates=(), fresh=False):
    t = _active.t
    if t is None:                        # a handle that outlived its trace: plain array semantics
        return fn(*_unwrap(args), **_unwrap(kwargs))
    return t.call(fn, args, kwargs, label, mutates, fresh)


def _guard(fn, args, kwargs, label):
    t = _active.t
    if t is None:
        return fn(*_unwrap(args), **_unwrap(kwargs))
    return t.guard(fn, args, kwargs, label)


# --------------------------------------------------------------------------- the tracer
class Tracer:
    """The log of one run: steps, and the real array of every value number at trace time."""

    def __init__(self):
        self.steps = []
        self.values = {}            # vid -> real array at trace time (for shapes and dtypes)
        self.backend_of = {}        # vid -> backend
        self.handles = {}           # id(real array) -> Traced, so one array has one number
        self.mutated_external = False
        self.externals = set()      # vids of arrays that live outside the function (inputs, state)
        self.read_after_write = None   # where a value was read after external state was written
        self.failed = None          # why this trace cannot be replayed (the run itself goes on eagerly)
        self._n = 0

    def fail(self, reason):
        if self.failed is None:
            self.failed = reason

    def new_value(self, real, backend):
        h = self.handles.get(id(real))
        if h is not None and h.v is real:
            return h
        h = Traced(real, self._n, backend)
        self.values[self._n] = real
        self.backend_of[self._n] = backend
        self.handles[id(real)] = h
        self._n += 1
        return h

    def external(self, real, backend):
        h = self.new_value(real, backend)
        self.externals.add(h.vid)
        return h

    def host_values(self, fn, args, dtype, device):
        """``_trace_hooks.host_values`` while this tracer runs: the call is logged as a step that calls
        ``fn`` again on every replay, and its numbers reach the program as 0-d arrays."""
        backend = _backends.get_backend(device or "cpu")
        xp = backend.__dict__.get("xp")
        real_xp = xp._real if isinstance(xp, XpProxy) else backend.xp

        def arrays():        # the arguments are Python state, by reference (never copied into the program)
            return tuple(backend.call(real_xp.asarray, v, dtype=dtype) for v in fn(*args))
        out = arrays()
        step = Step("call", arrays, (), {}, "host_values")
        res = self._wrap_out(out, (), {}, step)
        self.steps.append(step)
        return res

    def _wrap_out(self, out, args, kwargs, step):
        """Handles for a call's result: an input array returned again keeps its number."""
        if _is_array(out):
            for a in _iter_traced((args, kwargs)):
                if a.v is out:
                    step.outs = a.vid
                    return a
            b = _backends.backend_of_array(out) or self._backend_for(args, kwargs)
            step.scalar = out.__class__ in _backends.SCALAR_TYPES
            h = self.new_value(_backends.as_ndarray(out) if out.__class__ in _backends.SCALAR_TYPES else out, b)
            step.outs = h.vid
            return h
        if out.__class__ is tuple or out.__class__ is list or isinstance(out, tuple) and hasattr(out, "_fields"):
            items = [self._wrap_out(o, args, kwargs, _Sink()) if _is_array(o) else o for o in out]
            if any(not _is_array(o) and o is not None for o in out):
                self.fail(f"{step.label} returned a mix of arrays and other values, at {user_frame()}")
            step.outs = tuple(i.vid if i.__class__ is Traced else None for i in items)
            step.box = type(out)
            return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)
        return out

    def _backend_for(self, args, kwargs):
        for a in _iter_traced((args, kwargs)):
            return a._ag_backend
        return _backends.get_backend("cpu")

    def call(self, fn, args, kwargs, label, mutates=(), fresh=False, effect=False):
        real_args, real_kwargs = _unwrap(args), _unwrap(kwargs)
        for i in mutates:
            if args[i].__class__ is not Traced and _is_array(args[i]):
                self.fail(f"{label} writes into an array the trace does not know, at {user_frame()}")
        out_arg = kwargs.get("out")
        if out_arg is not None and any(o.__class__ is not Traced and _is_array(o) for o in
                                       (out_arg if isinstance(out_arg, tuple) else (out_arg,))):
            self.fail(f"{label} writes (out=) into an array the trace does not know, at {user_frame()}")
        _active.t = None                # the call itself runs untraced (a kernel calling kernels)
        try:
            out = fn(*real_args, **real_kwargs)
        finally:
            _active.t = self
        has = _has_traced((args, kwargs))
        if not has and not (effect and out is None) and (out.__class__ in _backends.SCALAR_TYPES or not _is_array(
                out) and not (isinstance(out, (tuple, list)) and any(map(_is_array, out)))):
            return out                   # a constant computation (dtypes, shapes, typed scalars): nothing to log
        step = Step("call", fn, _template(args), _template(kwargs), label)
        written = [args[i].vid for i in mutates]
        if out_arg is not None:
            written += [a.vid for a in _iter_traced(out_arg)]
        step.mutates = tuple(written)
        step.fresh = fresh
        if any(v in self.externals for v in written):
            self.mutated_external = True
        if has and not _is_array(out) and out is not None and not isinstance(out, (tuple, list)):
            if _is_metadata(fn):
                return out
            return self._guard_step(step, out, label)
        res = self._wrap_out(out, args, kwargs, step)
        self.steps.append(step)
        if not fresh and step.outs is not None and any(a.vid in self.externals for a in _iter_traced((args, kwargs))):
            # a view of a parameter or a gradient is outside state too: writing through it counts
            outs = step.outs if isinstance(step.outs, tuple) else (step.outs,)
            self.externals.update(o for o in outs if o is not None)
        if label in _DATA_DEPENDENT_SHAPE or (label == "getitem" and _bool_index(real_args[1])):
            step.shape_guard = _shapes(out)
            self._note_read(label)
        return res

    def guard(self, fn, args, kwargs, label):
        _active.t = None
        try:
            out = fn(*_unwrap(args), **_unwrap(kwargs))
        finally:
            _active.t = self
        step = Step("guard", fn, _template(args), _template(kwargs), label)
        return self._guard_step(step, out, label)

    def _guard_step(self, step, out, label):
        step.kind = "guard"
        _active.t = None
        try:
            step.expect = _freeze(out)
        finally:
            _active.t = self
        step.where = user_frame()
        self.steps.append(step)
        self._note_read(label)
        if _is_array(out):               # a host copy: read-only, so writes to it fail loudly
            out = out.view()
            out.flags.writeable = False
        return out

    def _note_read(self, label):
        if self.mutated_external and self.read_after_write is None:
            self.read_after_write = f"{label} at {user_frame()}"

    def record_backend(self, backend, name, fn, args, kwargs):
        """A named kernel of a backend, logged whole."""
        return self.call(fn, args, kwargs, name, mutates=_BACKEND_MUTATES.get(name, ()),
                         fresh=name in _BACKEND_FRESH or name in ("matmul", "matmul_packed")
                         and kwargs.get("out") is None,
                         effect=True)       # a kernel returning nothing acts on state (seed): replayed


class _Sink:
    outs = None
    scalar = False


def _iter_traced(x):
    c = x.__class__
    if c is Traced:
        yield x
    elif c is tuple or c is list:
        for y in x:
            yield from _iter_traced(y)
    elif c is dict:
        for y in x.values():
            yield from _iter_traced(y)
    elif c is slice:
        yield from _iter_traced((x.start, x.stop, x.step))


def _bool_index(key):
    keys = key if isinstance(key, tuple) else (key,)
    # a 0-d mask too: x[True] has one more axis of length 1, x[False] of length 0
    return any(getattr(k, "dtype", None) is not None and k.dtype.kind == "b" and getattr(k, "ndim", None) is not None
               for k in keys)


def _shapes(out):
    if isinstance(out, (tuple, list)):
        return tuple(getattr(o, "shape", None) for o in out)
    return getattr(out, "shape", None)


def _freeze(v):
    """The guarded value in a form compared with ``==`` (arrays as host copies)."""
    if _is_array(v):
        return _ArrayValue(_backends.to_numpy(v).copy())
    return v


class _ArrayValue:
    __slots__ = ("a",)

    def __init__(self, a):
        self.a = a

    def __eq__(self, other):
        host = _backends.get_backend("cpu").xp        # both are host copies
        b = _backends.to_numpy(other)
        return b.shape == self.a.shape and b.dtype == self.a.dtype and bool(
            host.array_equal(b, self.a, equal_nan=b.dtype.kind in "fc"))

    def __ne__(self, other):
        return not self.__eq__(other)


_METADATA = frozenset({"shape", "ndim", "size", "result_type", "iscomplexobj", "isrealobj", "isscalar",
                       "broadcast_shapes", "can_cast", "promote_types", "min_scalar_type", "may_share_memory",
                       "shares_memory", "iscomplex_dtype", "issubdtype", "get_array_module"})
_DATA_DEPENDENT_SHAPE = frozenset({"nonzero", "flatnonzero", "argwhere", "unique", "compress", "extract",
                                   "unique_values", "unique_counts", "unique_inverse", "unique_all",
                                   "trim_zeros"})
_BACKEND_MUTATES = {"scatter_add": (0,), "scatter_combine": (0,), "axpy": (0,)}
_BACKEND_FRESH = frozenset({"rand", "randn", "randint", "permutation", "sigmoid", "erf"})


def _is_metadata(fn):
    return getattr(fn, "__name__", "") in _METADATA


# --------------------------------------------------------------------------- the namespace proxy
class XpProxy(RecordingNamespace):
    """Stands for a backend's array namespace (or a submodule) during a trace."""

    def __init__(self, real, backend):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_backend", backend)

    def __getattr__(self, name):
        real = getattr(self._real, name)
        if isinstance(real, type) or not callable(real):
            if hasattr(real, "__dict__") and not isinstance(real, type):   # a submodule: numpy.fft, cupy.linalg
                real = XpProxy(real, self._backend)
                object.__setattr__(self, name, real)
            return real
        w = _FnProxy(real, name, self._backend)
        object.__setattr__(self, name, w)
        return w

    def __setattr__(self, name, value):
        if _active.t is not None:
            _active.t.fail(f"setting {name} on the array namespace during a trace")
        setattr(self._real, name, value)

    def __repr__(self):
        return f"<traced {self._real!r}>"


class _FnProxy:
    """A recording stand-in for one xp function (or ufunc: .reduce, .at, ... are recorded too)."""
    __slots__ = ("real", "name", "backend", "__dict__")

    def __init__(self, real, name, backend):
        self.real, self.name, self.backend = real, name, backend

    def __call__(self, *args, **kwargs):
        t = _active.t
        if t is None:
            return self.real(*_unwrap(args), **_unwrap(kwargs))
        if self.name in READING_FUNCS:
            return t.guard(self.real, args, kwargs, self.name)
        fresh = (_is_ufunc(self.real) or self.name in FRESH_FUNCS) and "out" not in kwargs
        return t.call(self.real, args, kwargs, self.name, fresh=fresh,
                      mutates=(0,) if self.name in MUTATING_FUNCS else ())

    def __getattr__(self, name):
        real = getattr(self.real, name)
        if not callable(real):
            return real
        mut = (0,) if name == "at" else ()
        label = f"{self.name}.{name}"

        def call(*args, **kwargs):
            t = _active.t
            if t is None:
                return real(*_unwrap(args), **_unwrap(kwargs))
            return t.call(real, args, kwargs, label, mutates=mut)
        return call


# xp functions whose result is a new array (never a view of an argument)
FRESH_FUNCS = frozenset({"sum", "mean", "prod", "max", "min", "amax", "amin", "matmul", "dot", "tensordot",
                         "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
                         "arange", "linspace", "eye", "where", "concatenate", "stack", "copy", "clip", "sort",
                         "argsort", "cumsum", "cumprod", "var", "std", "any", "all", "argmax", "argmin",
                         "count_nonzero", "outer", "logsumexp", "tanh", "exp", "log"})
# xp functions that write into their first argument (put_along_axis's write went unseen: stale gradients)
MUTATING_FUNCS = frozenset({"copyto", "put", "put_along_axis", "place", "putmask", "fill_diagonal"})
READING_FUNCS = frozenset({"array_equal", "allclose", "array_equiv", "array2string", "array_repr", "array_str",
                           "save", "savez", "savetxt", "asnumpy", "isclose_all"})


def _is_ufunc(f):
    return hasattr(f, "nin") and hasattr(f, "reduce")


# --------------------------------------------------------------------------- entering a trace
# backend methods that run through (they call other recorded functions), and reads
_PASS = frozenset({"call", "context", "sync_point", "make_current"})
_READS = frozenset({"item", "to_host", "read_back", "format"})


def _backend_method(backend, name, real):
    if name in _READS:
        def wrapper(*args, **kwargs):
            t = _active.t
            if t is None:
                return real(*_unwrap(args), **_unwrap(kwargs))
            return t.guard(real, args, kwargs, name)
    else:
        def wrapper(*args, **kwargs):
            t = _active.t
            if t is None:
                return real(*_unwrap(args), **_unwrap(kwargs))
            return t.record_backend(backend, name, real, args, kwargs)
    wrapper.__name__ = name
    return wrapper


def _patch(backend):
    """Put the recording proxies on the backend instance; returns what to put back (only those names:
    what the trace sets on the backend for real, a reseeded generator, stays)."""
    d = backend.__dict__
    through = getattr(type(backend), "trace_through", frozenset())    # fused kernels: see backends/kernels/
    names = ["xp"] + [n for n in dir(type(backend)) if not n.startswith("_") and n not in _PASS and n not in through]
    saved = [(n, n in d, d.get(n)) for n in names]
    backend.xp = XpProxy(d.get("xp", type(backend).xp), backend)
    for name in names[1:]:
        real = getattr(backend, name)
        if callable(real) and not isinstance(real, type):
            setattr(backend, name, _backend_method(backend, name, real))
    for name, impl in getattr(type(backend), "trace_as", {}).items():   # a fused kernel's traceable twin
        saved.append((name, name in d, d.get(name)))
        d[name] = impl.__get__(backend)
    return saved


def _unpatch(backend, saved):
    d = backend.__dict__
    for name, had, old in saved:
        if had:
            d[name] = old
        else:
            d.pop(name, None)


_one_trace = threading.Lock()      # the backends are patched for every thread: one trace at a time


class tracing:
    """Context manager: patch every backend made so far and make ``tracer`` this thread's tracer."""

    def __init__(self, tracer):
        self.tracer = tracer

    def __enter__(self):
        _one_trace.acquire()
        try:
            self.backends = [_backends.get_backend("cpu")] + list(_backends._backends.values())
            self.saved = [_patch(b) for b in self.backends]
        except BaseException:
            _one_trace.release()
            raise
        _active.t = self.tracer
        return self.tracer

    def __exit__(self, *exc):
        _active.t = None
        try:
            for b, s in zip(self.backends, self.saved):
                _unpatch(b, s)
        finally:
            _one_trace.release()
        return False
