"""What a compiled function touches besides its arguments, and the signature that keys its programs.

The state of a call is found from the arguments, the function's closure cells, the globals its code
names and (for a bound method or a callable module) its owner: modules (their parameters, buffers and
train/eval flags), optimizers (their parameters, hyperparameters and per-parameter state) and tensors
held directly or in a list, tuple or dict. Every tensor found is a *holder*: its array (and its .grad's
array) is an input of the program, and what the trace did to it (a new .grad, a rebound buffer) is done
again on every replay.
"""
import functools
import inspect
import sys
import types
from collections import deque
from math import copysign as _copysign
from operator import is_not as _is_not
from typing import Callable

from ..tensor import Tensor
from .. import backends as _backends
from ..autograd.grad_mode import state as _grad_state
from ..dtypes import get_default_dtype
from .._autocast_state import state as _amp_state
from ..device import get_default_device
from ..nn.module import Module, state_version as _state_version
from ..nn.hooks import global_key as _global_module_hooks
from ..optim.optimizer import Optimizer
from .host_rng import is_host_rng

__all__ = ["find_state", "signature", "dynamic_signature", "plain_args", "Watch", "Binding"]

MAX_NESTING = 64         # containers nested deeper than this make the call run eagerly
MAX_ARRAY_KEY = 4096     # raw arrays up to this size are compared by value on each call; bigger ones run eagerly
_SCALARS = (int, float, complex, bool, str, bytes, type(None))


class Binding:
    """A place that holds a tensor (or None, or a Python value): an attribute or a dict entry."""
    __slots__ = ("holder", "key", "attr", "dynamic")

    def __init__(self, holder, key, attr, dynamic=False):
        self.holder, self.key, self.attr, self.dynamic = holder, key, attr, dynamic

    def ident(self):
        return id(self.holder), self.key

    def get(self):
        return getattr(self.holder, self.key, None) if self.attr else self.holder.get(self.key)

    def set(self, value):
        if self.attr:
            setattr(self.holder, self.key, value)
        else:
            self.holder[self.key] = value


def _code_names(code, out):
    out.update(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code_names(c, out)


def roots(fn, watch=None):
    """The objects a function reaches besides its arguments. ``watch`` (a list) gets what was read, for
    the cheap recheck of later calls (``Watch``)."""
    objs = []
    f = fn
    if inspect.ismethod(fn):
        objs.append(fn.__self__)
        f = fn.__func__                      # a bound method's __self__ and __func__ are read-only
    elif not inspect.isfunction(fn) and callable(fn):
        objs.append(fn)                      # a module or another callable object
        f = getattr(type(fn), "__call__", None)
        if watch is not None:
            watch.append(("call", fn, None))
    code = getattr(f, "__code__", None)
    if code is None:
        return objs
    objs.extend(getattr(f, "__defaults__", None) or ())
    objs.extend((getattr(f, "__kwdefaults__", None) or {}).values())
    for cell in getattr(f, "__closure__", None) or ():
        try:
            objs.append(cell.cell_contents)
        except ValueError:
            pass
    names = _names.get(code)
    if names is None:
        names = set()
        _code_names(code, names)
        names = _names[code] = sorted(names)
    g = getattr(f, "__globals__", {})
    objs.extend(g[n] for n in names if n in g)
    if watch is not None:
        watch.append(("fn", f, tuple(names)))
    for n in names:                              # `import cfg; cfg.scale`: the user module's attributes read
        m = g.get(n)
        if m.__class__ is types.ModuleType:
            _module_reads(m, names, objs, watch, set())
    return objs


def _module_reads(m, names, objs, watch, seen):
    """The attributes of a user module that a code object may read (its names), and of the user modules
    among them (``pkg.cfg.scale``)."""
    if id(m) in seen or not _user_module(m):
        return
    seen.add(id(m))
    d = m.__dict__
    attrs = tuple(n for n in names if n in d and not n.startswith("__"))
    if watch is not None and attrs:
        watch.append(("modattrs", m, attrs))
    for n in attrs:
        v = d[n]
        if v.__class__ is types.ModuleType:
            _module_reads(v, names, objs, watch, seen)
        else:
            objs.append(v)


_names: dict[types.CodeType, list[str]] = {}     # code object -> the global names it (and the functions inside it) reads


class State:
    """The modules, optimizers and tensors one call reaches."""

    def __init__(self):
        self.modules, self.optimizers, self.tensors = [], [], []
        self.module_scalars = []      # per module (in self.modules' order), its Python numbers and flags
        self.objects = []             # plain objects whose attributes were visited (a GradScaler, a config)
        self.values = []              # Python numbers reached (a closure's or a global's float): may be baked in
        self.refuse = None            # why the call cannot be compiled safely (a big raw array), else None
        self.rngs = []                # host random generators reached (their draws make the trace run eagerly)
        self._seen = set()
        # what the walk read (kind, object, detail), so that a later call can check by identity that the
        # walk would find the same (Watch); fast_ok is False when that check would not be enough
        self.watch = []
        self.fast_ok = True
        self._arg_ids = None
        self._nest = 0

    def add_tensor(self, t):
        if id(t) in self._seen:
            if self._arg_ids is not None and id(t) in self._arg_ids:
                self.fast_ok = False             # an argument is also state: the recheck cannot see that
            return
        self._seen.add(id(t))
        self.tensors.append(t)
        if t._hooks or t._post_acc_hooks:
            for h in [*(t._hooks or ()), *(t._post_acc_hooks or ())]:
                self.visit(h)                    # the values a hook reads count too

    def visit(self, obj, depth=0):
        if obj.__class__ in _SCALAR_CLASSES:     # the common case first: a set lookup, not isinstance on a tuple
            self.values.append(_value_key(obj))
            return
        if isinstance(obj, Tensor):
            self.add_tensor(obj)
            return
        if isinstance(obj, _SCALARS):
            self.values.append(_value_key(obj))
            return
        if isinstance(obj, types.FunctionType):
            if id(obj) not in self._seen and _user_code(obj):
                self._seen.add(id(obj))          # a helper the function calls: its globals and closure count too
                for o in roots(obj, self.watch):
                    self.visit(o)
            return
        if isinstance(obj, type):                # a class the code names: its attributes (Cfg.scale)
            self.visit_class(obj)
            return
        if isinstance(obj, types.ModuleType):    # (its attributes are reached through roots)
            return
        if isinstance(obj, Module):
            stack, seen = [obj], self._seen
            while stack:                          # modules in the order of Module.modules()
                m = stack.pop()
                if id(m) in seen:
                    continue
                seen.add(id(m))
                self.modules.append(m)
                self.visit_class(type(m))
                d = m.__dict__
                w = self.watch
                w.append(("module", m, _slot_names(type(m))))
                w.append(("dict", d["_parameters"], None))
                w.append(("dict", d["_buffers"], None))
                w.append(("dict", d["_modules"], None))
                for t in d["_parameters"].values():
                    if t is not None:
                        self.add_tensor(t)
                for t in d["_buffers"].values():
                    if t is not None:
                        self.add_tensor(t)
                mods = d["_modules"]
                scalars = []                     # what _scalars(m) gives, gathered in the same pass
                for k, v in d.items():           # plain attributes: a tensor, an array, a list of numbers
                    c = v.__class__
                    if c in _SCALAR_CLASSES:
                        scalars.append((k, _value_key(v) if c is float or c is complex else v))
                        continue
                    if c is tuple and all(x.__class__ in _SCALAR_CLASSES for x in v):
                        scalars.append((k, v))
                    if k in _MODULE_SLOTS or k in mods:
                        continue
                    if isinstance(v, Tensor):
                        self.add_tensor(v)
                    else:
                        self.visit(v, 1)
                self.module_scalars.append(tuple(scalars) if not _slot_names(type(m)) else _scalars(m))
                if mods:
                    stack.extend([c for c in reversed(mods.values()) if c is not None])
            return
        if isinstance(obj, Optimizer):
            if id(obj) in self._seen:
                return
            self._seen.add(id(obj))
            self.optimizers.append(obj)
            w = self.watch
            w.append(("attrs", obj, ("__class__", "param_groups", "state")))
            w.append(("seq", obj.param_groups, None))
            w.append(("keys", obj.state, None))
            dyn_opts, dyn_state = getattr(obj, "_dynamic_options", ()), getattr(obj, "_dynamic_state", ())
            for g in obj.param_groups:
                w.append(("dict_skip", g, dyn_opts))
                w.append(("seq", g["params"], None))
                for p in g["params"]:
                    s = obj.state.get(p)
                    if s is not None:
                        w.append(("dict_skip", s, dyn_state))
            for g in obj.param_groups:
                for p in g["params"]:
                    self.add_tensor(p)
                    for v in obj.state.get(p, {}).values():
                        if isinstance(v, Tensor):
                            self.add_tensor(v)
            return
        if isinstance(obj, (list, tuple, deque)):  # containers at any depth (they are not a level)
            if obj.__class__ is not tuple:
                if id(obj) in self._seen:
                    self.values.append(("ref", id(obj)))
                    return
                self._seen.add(id(obj))
                self.watch.append(("seq", obj, None))
            if self._nest > MAX_NESTING:
                self._too_deep()
                return
            self._nest += 1
            for x in obj:
                self.visit(x, depth)
            self._nest -= 1
        elif isinstance(obj, dict):
            if id(obj) in self._seen:
                self.values.append(("ref", id(obj)))
                return
            self._seen.add(id(obj))
            self.watch.append(("dict", obj, None))
            if self._nest > MAX_NESTING:
                self._too_deep()
                return
            self._nest += 1
            for x in obj.values():
                self.visit(x, depth)
            self._nest -= 1
        elif obj.__class__ in _SETS:
            pass
        elif _backends.is_array(obj):
            self.visit_array(obj)
        elif obj.__class__.__module__ == "numpy" and getattr(obj, "ndim", 1) == 0 and hasattr(obj, "item"):
            self.values.append((obj.__class__, _value_key(obj.item())))      # a NumPy scalar
        elif is_host_rng(obj) or is_host_rng(getattr(obj, "__self__", None)):
            g = obj if is_host_rng(obj) else obj.__self__     # a generator, or one of its bound methods
            if id(g) not in self._seen:
                self._seen.add(id(g))
                self.rngs.append(g)
        elif _value_like(obj):
            self.values.append((obj.__class__, obj))
        elif obj.__class__ is functools.partial:
            self.watch.append(("dict", obj.keywords, None))
            for x in (obj.func, *obj.args, *obj.keywords.values()):
                self.visit(x, depth)
        elif depth < 2 and (hasattr(obj, "__dict__") or _slot_names(obj.__class__)) and \
                (not callable(obj) or _user_code(type(obj))):
            if id(obj) in self._seen:            # reached again: where it was reached counts (mode = Mode.B)
                self.values.append(("ref", id(obj)))
                return
            self._seen.add(id(obj))
            self.objects.append(obj)
            self.watch.append(("obj", obj, _slot_names(obj.__class__)))
            self.visit_class(type(obj))
            for x in _attrs(obj).values():     # a plain object holding a model and its optimizer
                self.visit(x, depth + 1)

    def _too_deep(self):
        if self.refuse is None:
            self.refuse = f"it reaches containers nested more than {MAX_NESTING} deep (not all of them are checked)"

    def visit_array(self, obj):
        """A raw NumPy/CuPy array (not a Tensor) is a constant of the program: its contents key the call."""
        self.fast_ok = False                     # its contents can change in place: no identity recheck
        if obj.size <= MAX_ARRAY_KEY:
            self.values.append((obj.shape, obj.dtype.str, _backends.to_numpy(obj).tobytes()))
        elif self.refuse is None:
            self.refuse = (f"it reads a {obj.__class__.__name__} of {obj.size} elements that is not a Tensor "
                           "(it would be a constant of the program; pass ag.tensor(...) instead)")

    def visit_class(self, cls):
        """A user class's methods (the globals they read) and its class-level numbers."""
        user = _user_classes.get(cls)
        if user is None:
            user = _user_classes[cls] = tuple(k for k in cls.__mro__ if k is not object and _user_code(k))
        if not user or id(cls) in self._seen:
            return
        self._seen.add(id(cls))
        for k in user:
            self.watch.append(("cls", k, None))
            for name, v in list(vars(k).items()):
                if isinstance(v, (staticmethod, classmethod)):
                    v = v.__func__
                elif isinstance(v, property):
                    v = v.fget
                if isinstance(v, types.FunctionType) or not name.startswith("__"):
                    self.visit(v)                # methods, numbers, containers, objects (Cfg.scale, Cfg.sizes)


_MODULE_SLOTS = frozenset({"_parameters", "_buffers", "_modules", "_non_persistent_buffers"})
_SETS = frozenset({set, frozenset})
_LIBRARIES = frozenset({"autograd_gpu", "numpy", "cupy", "numexpr", "torch", "scipy", "builtins"}) | \
    frozenset(getattr(sys, "stdlib_module_names", ()))
_user: dict[str, bool] = {}      # module name -> whether it is the user's code (_user_code)
_user_classes: dict[type, tuple[type, ...]] = {}     # class -> the user classes in its MRO (none for the library's modules)


def _user_module(m):
    """Whether a module is the user's own (see _user_code)."""
    return _user_code(m, m.__name__)


def _user_code(obj, mod=None):
    """Whether a function or class is the user's own (not this library's, NumPy's or the standard library's):
    only those are walked for the Python values they read."""
    if mod is None:
        mod = getattr(obj, "__module__", None) or ""
    r = _user.get(mod)
    if r is None:
        path = getattr(sys.modules.get(mod), "__file__", None) or ""
        r = _user[mod] = mod.partition(".")[0] not in _LIBRARIES and "site-packages" not in path
    return r


def find_state(fn, args, kwargs):
    """(argument tensors in order, State of everything else reached)."""
    st = State()
    for a in args:
        st.visit(a)
    for a in kwargs.values():
        st.visit(a)
    n_args = len(st.tensors)
    st._arg_ids = {id(t) for t in st.tensors}
    for o in roots(fn, st.watch):
        st.visit(o)
    return n_args, st


class _Missing:
    __slots__ = ()

    def __repr__(self):
        return "<missing>"


_MISSING = _Missing()


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:
        return _MISSING


class Watch:
    """Everything a state walk read, taken again cheaply: ``same()`` says whether every closure value, global,
    default, module attribute and registry entry, list and dict item, class attribute and optimizer option
    or state entry the walk read is still the very object it read (one generated function builds the tuple
    of them, compared item by item with ``is``). When it is, a new walk would find the same modules,
    optimizers, tensors and Python values, so the call's signature differs from the walk's only in what
    ``dynamic_signature`` computes again on every call (arguments, switches, the tensors' shapes, layouts,
    gradients, hooks and aliasing). The snapshot holds strong references, so no object it compares can be
    replaced by a new one at the same address."""

    __slots__ = ("objs", "read", "snap", "version", "modules")

    def __init__(self, watch):
        self.objs = tuple(o for _, o, _ in watch)
        # a module's __dict__ (its plain attributes, train/eval flag) is rechecked through the counter that
        # Module.__setattr__, __delattr__, register_* and train() bump; its registries by their contents
        self.modules = any(k == "module" for k, _, _ in watch)
        self.version = _state_version[0]
        src = _watch_source(watch)
        read = _readers.get(src)
        if read is None:
            glob = {"M": _MISSING, "C": _cell}
            exec(compile(src, "<ag.compile state check>", "exec"), glob)
            read = _readers[src] = glob["read"]
        self.read = read
        self.snap = read(self.objs)

    def same(self):
        if self.modules and _state_version[0] != self.version:
            return False
        try:
            cur = self.read(self.objs)
        except Exception:                        # an attribute or cell gone: the walk would differ
            return False
        return len(cur) == len(self.snap) and not any(map(_is_not, cur, self.snap))


_readers: dict[str, Callable] = {}     # generated reader source -> function (walks of one structure share it)


def _watch_source(watch):
    parts = []
    for i, (kind, obj, detail) in enumerate(watch):
        w = f"W[{i}]"
        if kind == "seq":
            parts.append(f"len({w}), *{w}")
        elif kind == "dict" and not obj:     # empty (a leaf's _modules, most _buffers): its length says it all
            parts.append(f"len({w})")
        elif kind == "dict" or kind == "cls":
            d = w if kind == "dict" else f"{w}.__dict__"
            parts.append(f"len({d}), *{d}, *{d}.values()")
        elif kind == "keys":
            parts.append(f"len({w}), *{w}")
        elif kind == "dict_skip":       # keys, and values but those of the skipped (dynamic) keys
            keys = [k for k in obj if k not in detail]
            parts.append(f"len({w}), *{w}" + "".join(f", {w}.get({k!r}, M)" for k in keys))
        elif kind == "attrs":
            parts.append(", ".join(f"{w}.{a}" for a in detail))
        elif kind == "modattrs":       # a user module's attributes that the code names
            parts.append(", ".join(f"getattr({w}, {a!r}, M)" for a in detail))
        elif kind == "call":
            parts.append(f"{w}.__class__, {w}.__class__.__call__")
        elif kind == "fn":
            # a cell filled at the walk is read directly (emptied later, it raises: not the same)
            cells = "".join(f", C({w}.__closure__[{j}])" if _cell(c) is _MISSING else f", {w}.__closure__[{j}].cell_contents"
                            for j, c in enumerate(obj.__closure__ or ()))
            parts.append(f"{w}.__code__, {w}.__defaults__, {w}.__kwdefaults__, {w}.__globals__" + cells +
                         (f", *map({w}.__globals__.get, {detail!r}, {'(M,) * ' + str(len(detail))})"
                          if detail else ""))
            if obj.__kwdefaults__:
                parts.append(f"len({w}.__kwdefaults__), *{w}.__kwdefaults__, *{w}.__kwdefaults__.values()")
        elif kind == "module" or kind == "obj":
            d = f"{w}.__dict__"
            if kind == "obj" and hasattr(obj, "__dict__"):
                parts.append(f"{w}.__class__, len({d}), *{d}, *{d}.values()")
            else:                     # a module's __dict__: through the version counter
                parts.append(f"{w}.__class__")
            parts.extend(f"getattr({w}, {n!r}, M)" for n in detail)
        else:
            raise AssertionError(kind)
    return "def read(W):\n    return (" + ",\n            ".join(parts) + ",)\n"


def bindings(st):
    """Every place whose tensor the trace may rebind: module parameters and buffers, optimizer state."""
    out = []
    for m in st.modules:
        for reg in ("_parameters", "_buffers"):
            for name in getattr(m, reg):
                out.append(Binding(m, name, True))
    for opt in st.optimizers:
        for g in opt.param_groups:
            dynamic = getattr(opt, "_dynamic_state", ())
            for p in g["params"]:
                s = opt.state.get(p)
                if s is not None:
                    for k in s:
                        out.append(Binding(s, k, False, k in dynamic))
    return out


# --------------------------------------------------------------------------- aliasing, from memory ranges
# Two arrays alias when their memory overlaps, whatever made them (a view, DLPack, as_strided, a buffer).
# Reading pointers costs about 1 us per NumPy array, too much for every call, so an array whose memory
# is known to be one allocation's (an array that owns its memory, or a chain of views ending at one) is
# keyed by that allocation, and only the others ("foreign" memory: a DLPack capsule, a Python buffer,
# CuPy's unowned memory) are compared by their byte ranges with every allocation of the call.

def _host_class():
    return _backends.get_backend("cpu").xp.ndarray


_HOST = None            # the host array class (set on first use: the backends choose it)


def _allocation(d):
    """The object that owns ``d``'s memory (an array owning its memory, or a device allocation), or None
    when the memory is foreign (then only its byte range tells what it overlaps)."""
    global _HOST
    if _HOST is None:
        _HOST = _host_class()
    if isinstance(d, _HOST):
        o = d
        while True:                              # views of views (as_strided's helper has a .base too)
            b = getattr(o, "base", None)
            if b is None:
                return o if isinstance(o, _HOST) else None
            o = b
    ptr = getattr(d, "data", None)
    mem = getattr(ptr, "mem", None)              # a device array: its MemoryPointer's allocation
    if mem is None or not (mem.__class__.__name__ in _OWNED_MEMORY or isinstance(mem, _HOST)):
        return None                              # imported memory (DLPack, another library's): by range
    return mem


# CuPy's allocations made by CuPy itself (the stand-in's is the host array under it); other memory
# classes (UnownedMemory, DLPack's) wrap memory that something else allocated
_OWNED_MEMORY = frozenset({"Memory", "PooledMemory", "ManagedMemory", "MemoryAsync"})


def _extent(a):
    """(first byte, last byte + 1) of an array or of a device allocation. (Host and device addresses do
    not overlap: CUDA maps them into one address space.)"""
    i = getattr(a, "__array_interface__", None)
    if i is not None:                            # a host array
        lo, shape, strides = i["data"][0], i["shape"], i["strides"]
        item = a.itemsize
    elif hasattr(a, "shape"):                    # a device array: its MemoryPointer
        lo, shape, strides, item = a.data.ptr, a.shape, a.strides, a.itemsize
    else:                                        # a device allocation: pointer and size
        return a.ptr, a.ptr + a.size
    if strides is None:                          # C-contiguous
        n = 1
        for s in shape:
            n *= s
        return lo, lo + n * item
    if 0 in shape:
        return lo, lo
    hi = lo
    for s, st in zip(shape, strides):
        if st < 0:
            lo += st * (s - 1)
        else:
            hi += st * (s - 1)
    return lo, hi + item


def alias_groups(arrays, keys=None):
    """For each array, the index of the first array whose memory it may share (its own index if none):
    arrays of one allocation share, and a foreign array shares with every array whose range it overlaps.
    ``keys`` are the arrays' allocations (``_allocation``), when the caller has them already."""
    if keys is None:
        keys = [_allocation(a) for a in arrays]
    first, out, foreign = {}, [], False
    for i, k in enumerate(keys):
        if k is None:
            foreign = True
            out.append(i)
        else:
            out.append(first.setdefault(id(k), i))
    if not foreign:
        return out
    ranges = [_extent(a if k is None else k) for a, k in zip(arrays, keys)]
    for i, k in enumerate(keys):                 # join each foreign array to what it overlaps
        if k is not None:
            continue
        lo, hi = ranges[i]
        for j, (lo2, hi2) in enumerate(ranges):
            if j != i and lo < hi2 and lo2 < hi and lo < hi and lo2 < hi2:
                a, b = out[i], out[j]
                root = min(a, b)
                out = [root if g in (a, b) else g for g in out]
    return out


def shares_memory(tensors):
    """Whether two of the tensors (or their gradients) use the same memory through different arrays: the
    tracer gives them different value numbers, so it cannot see that writing one changes the other."""
    arrays = {}
    for t in tensors:
        for a in (t.data, None if t._grad is None else t._grad.data):
            if a is not None:
                arrays[id(a)] = a
    arrays = list(arrays.values())
    return len(set(alias_groups(arrays))) < len(arrays)


def _arg_sig(x, depth=0):
    if isinstance(x, Tensor):
        d = x.data
        # the class too: a function may branch on isinstance(x, nn.Parameter)
        return (x.__class__, d.shape, d.dtype, _dev(x.device), x.requires_grad, _layout(d))
    if isinstance(x, _SCALARS):
        if x.__class__ is float and (x == 0.0 or x != x):
            return _float_key(x)
        return (type(x), x)
    if depth < 4 and isinstance(x, (list, tuple)):
        return (type(x),) + tuple(_arg_sig(y, depth + 1) for y in x)
    if depth < 4 and isinstance(x, dict):
        return (dict,) + tuple((k, _arg_sig(v, depth + 1)) for k, v in x.items())
    if x.__class__.__module__ == "numpy" and hasattr(x, "item") and getattr(x, "ndim", 1) == 0:
        return (type(x), x.item())
    if _value_like(x):
        return (type(x), x)
    return ("id", id(x))


def _float_key(x):
    """A float that ``==`` does not tell apart: 0.0 and -0.0 are equal (``x / c`` gives +inf or -inf), and
    NaN equals nothing (a signature holding it would never match)."""
    return (float, "nan" if x != x else "-0.0" if _copysign(1.0, x) < 0 else "0.0")


def _value_key(v):
    """How a Python value reached by the walk is kept in the signature."""
    c = v.__class__
    if c is float and (v == 0.0 or v != v):
        return _float_key(v)
    if c is complex and (v != v or not v.real or not v.imag):
        return (complex, _value_key(v.real), _value_key(v.imag))
    return (c, v)


def _value_like(x):
    """An immutable value compared by equality (a range, a slice, a Fraction): keyed by value, since a new
    one made for each call may reuse an earlier one's id."""
    c = x.__class__
    if c.__eq__ is object.__eq__ or c.__hash__ is None or hasattr(x, "__dict__") or \
            isinstance(x, (tuple, frozenset)):          # containers may hold tensors (compared elementwise)
        return False
    try:
        hash(x)
    except TypeError:
        return False
    return True


def _layout(d):
    """The strides: for a contiguous array they follow from shape and dtype; other layouts retrace per
    strides (finer than contiguity flags, and half the cost)."""
    return getattr(d, "strides", None)


def _dev(device):
    """A device as its name: a str hashes and compares in C (a Device's __hash__ and __eq__ are Python)."""
    return getattr(device, "_str", device)


def _opt_sig(opt):
    skip = ("params",) + tuple(getattr(opt, "_dynamic_options", ()))     # options read through host_values
    groups = tuple(tuple((k, v if isinstance(v, _SCALARS + (tuple,)) else id(v)) for k, v in g.items()
                         if k not in skip) for g in opt.param_groups)
    dynamic = getattr(opt, "_dynamic_state", ())
    st = []
    for g in opt.param_groups:
        for p in g["params"]:
            s = opt.state.get(p)
            st.append(None if s is None else tuple(
                (k, ("T", id(v)) if isinstance(v, Tensor) else "dyn" if k in dynamic else v) for k, v in s.items()))
    return groups, tuple(st)


_slots: dict[type, tuple[str, ...]] = {}     # user class -> its __slots__ names (_slot_names)


def _slot_names(cls):
    """The ``__slots__`` attribute names of a user class (and its user bases)."""
    r = _slots.get(cls)
    if r is None:
        r = _slots[cls] = tuple(n for k in cls.__mro__ if k is not object and _user_code(k)
                                for n in ((k.__dict__.get("__slots__", ()),) if isinstance(
                                    k.__dict__.get("__slots__", ()), str) else k.__dict__.get("__slots__", ()))
                                if n not in ("__dict__", "__weakref__"))
    return r


def _attrs(obj):
    """An object's attributes: its ``__dict__`` and its slots."""
    d = getattr(obj, "__dict__", None)
    names = _slot_names(obj.__class__)
    if not names:
        return vars(obj) if d is not None else {}
    out = dict(d) if d is not None else {}
    for n in names:
        try:
            out[n] = getattr(obj, n)
        except AttributeError:
            pass
    return out


def _scalars(obj):
    """The Python numbers, strings and flags among an object's attributes (a dropout's p, a
    GradScaler's scale): values the traced code may have baked in."""
    return tuple((k, _value_key(v)) for k, v in _attrs(obj).items() if v.__class__ in _SCALAR_CLASSES or
                 (v.__class__ is tuple and all(x.__class__ in _SCALAR_CLASSES for x in v)))


_SCALAR_CLASSES = frozenset({int, float, bool, str, complex, type(None)})
def _global_modes():
    """Thread-local switches the ops read: autocast blocks, anomaly mode, the default device; and which
    global module hooks exist (a module call runs them: adding or removing one traces again)."""
    return _amp_state.active, _grad_state.anomaly, _dev(get_default_device()), _global_module_hooks[0]


def dynamic_signature(fn_args, fn_kwargs, tensors):
    """The part of the signature computed again on every call, fast path included: the arguments, the global
    switches, which tensors share memory, and each tensor's shape, dtype, layout, gradient and hooks."""
    return (tuple(_arg_sig(a) for a in fn_args) if fn_args else (),
            tuple((k, _arg_sig(v)) for k, v in fn_kwargs.items()) if fn_kwargs else (),
            _grad_state.enabled, get_default_dtype(), _global_modes(), *_tensors_sig(tensors))


def _tensors_sig(tensors):
    """(which tensors share an array and which share memory, as first indices), and per tensor its shape,
    dtype, device, flags, strides, gradient and hooks (by identity: a hook added between calls retraces);
    one loop with the helpers inlined, since it runs on every call."""
    global _HOST
    if _HOST is None:
        _HOST = _host_class()
    host = _HOST
    datas, bases, same, owner, sigs, foreign = {}, {}, [], [], [], None
    for i, t in enumerate(tensors):
        d = t.data
        same.append(datas.setdefault(id(d), i))
        if d.__class__ is host:                  # inline _allocation's common cases: owner or one view
            b = d.base
            o = d if b is None else b if b.__class__ is host and b.base is None else _allocation(d)
        else:
            o = _allocation(d)
        if o is None:
            foreign = True
            owner.append(i)
        else:
            owner.append(bases.setdefault(id(o), i))
        g, h, ph, dev = t._grad, t._hooks, t._post_acc_hooks, t.device
        if g is not None:
            gd = g.data
            g = (gd.shape, gd.dtype, g.requires_grad, getattr(gd, "strides", None), gd is d)
        sigs.append((d.shape, d.dtype, getattr(dev, "_str", dev), t.requires_grad, getattr(d, "strides", None),
                     t.grad_fn is None, g, tuple(map(id, h)) if h else (), tuple(map(id, ph)) if ph else ()))
    if foreign:                                  # memory from elsewhere (DLPack, a buffer): by byte range
        owner = alias_groups([t.data for t in tensors])
    return (tuple(same), tuple(owner)), tuple(sigs)


def signature(fn_args, fn_kwargs, n_args, st):
    """Everything the trace may depend on besides the values in the arrays: the dynamic part, and what the
    walk found (which tensors, the Python values, the modules' flags, the optimizers' options)."""
    return (dynamic_signature(fn_args, fn_kwargs, st.tensors), n_args, tuple(id(t) for t in st.tensors[n_args:]),
            tuple(st.module_scalars), tuple(_opt_sig(o) for o in st.optimizers),
            tuple((id(o), _scalars(o)) for o in st.objects), tuple(st.values))


def plain_args(fn_args, fn_kwargs):
    """The argument tensors in order when every argument is a tensor or a Python number, string, flag or
    None (what the fast path handles), else None."""
    out = []
    for a in (*fn_args, *fn_kwargs.values()) if fn_kwargs else fn_args:
        if isinstance(a, Tensor):
            out.append(a)
        elif a.__class__ not in _SCALAR_CLASSES:
            return None
    return out
