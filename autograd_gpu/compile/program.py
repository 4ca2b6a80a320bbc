"""A trace as a replayable program: the steps turned into the source of one Python function.

Each value number becomes a local variable (``v12``); each step becomes one line calling the function
the trace saw (operators stay Python operators); constants and functions are globals of the generated
function. A backend's fuser (``backends/fusers.py``; None replays unfused) may rewrite runs of
elementwise steps into fused kernels and give the results of elementwise steps preallocated output
buffers, planned by liveness so that a warm replay allocates nothing it does not hand out.

Guards compare a value read at trace time with the value now and raise ``GuardFailed`` on a change;
steps whose result shape depends on the data (boolean masks, nonzero) check that shape too.
"""
import keyword
import operator
import types

from ..backends.trace_ir import Ref, collect_refs, map_refs, rename_refs, alias_groups
from .. import backends as _backends

__all__ = ["Program", "GuardFailed", "build_program"]


class GuardFailed(Exception):
    """A value or shape the trace depended on is different in this call."""

    def __init__(self, index, where):
        super().__init__(index, where)
        self.index, self.where = index, where


_BINOPS = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.truediv: "/",
           operator.floordiv: "//", operator.mod: "%", operator.pow: "**", operator.matmul: "@",
           operator.and_: "&", operator.or_: "|", operator.xor: "^", operator.lshift: "<<",
           operator.rshift: ">>", operator.lt: "<", operator.le: "<=", operator.gt: ">", operator.ge: ">=",
           operator.eq: "==", operator.ne: "!="}
_IOPS = {operator.iadd: "+=", operator.isub: "-=", operator.imul: "*=", operator.itruediv: "/=",
         operator.ifloordiv: "//=", operator.imod: "%=", operator.ipow: "**=", operator.imatmul: "@=",
         operator.iand: "&=", operator.ior: "|=", operator.ixor: "^=", operator.ilshift: "<<=",
         operator.irshift: ">>="}
_UNOPS = {operator.neg: "-", operator.pos: "+", operator.invert: "~"}


class Program:
    """The replayable form of one trace: ``run(inputs) -> finals`` (arrays of the final values)."""

    def __init__(self, run, source, n_steps, n_fused, n_buffers):
        self.run, self.source = run, source
        self.n_steps, self.n_fused, self.n_buffers = n_steps, n_fused, n_buffers


class _Emitter:
    def __init__(self):
        self.glob = {"GuardFailed": GuardFailed, "A": _backends.as_ndarray}
        self.lines = []
        self._n = 0

    def const(self, value):
        c = value.__class__
        if value is None or c is bool or c is int or c is str or (c is float and value == value
                                                                 and abs(value) != float("inf")):
            return repr(value)
        name = f"k{self._n}"
        self._n += 1
        self.glob[name] = value
        return name

    def expr(self, x):
        """Source for an argument template."""
        c = x.__class__
        if c is Ref:
            return f"v{x.vid}"
        if c is tuple or c is list:
            refs = []
            collect_refs(x, refs)
            if not refs:
                return self.const(x)
            inner = ", ".join(self.expr(y) for y in x)
            return f"({inner},)" if c is tuple else f"[{inner}]"
        if c is dict:
            refs = []
            collect_refs(x, refs)
            if not refs:
                return self.const(x)
            return "{" + ", ".join(f"{self.const(k)}: {self.expr(v)}" for k, v in x.items()) + "}"
        if c is slice:
            refs = []
            collect_refs(x, refs)
            if refs:
                return f"slice({self.expr(x.start)}, {self.expr(x.stop)}, {self.expr(x.step)})"
        return self.const(x)

    def call(self, fn, args, kwargs):
        parts = [self.expr(a) for a in args]
        for k, v in kwargs.items():
            parts.append(f"{k}={self.expr(v)}" if k.isidentifier() and not keyword.iskeyword(k)
                         else f"**{{{k!r}: {self.expr(v)}}}")
        return f"{self.const(fn)}({', '.join(parts)})"


def _target(step):
    outs = step.outs
    if outs is None or outs == ():
        return None
    if isinstance(outs, tuple):
        names = [f"v{o}" if o is not None else "_" for o in outs]
        return "(" + ", ".join(names) + ",)"
    return f"v{outs}"


def step_source(em, step, i):
    """The line(s) of one step."""
    fn, args, kw = step.fn, step.args, step.kwargs
    if step.kind == "guard":
        return [f"if {em.const(step.expect)} != {em.call(fn, args, kw)}: raise GuardFailed({i}, {step.where!r})"]
    tgt = _target(step)
    if not kw and fn in _BINOPS and len(args) == 2:
        src = f"{em.expr(args[0])} {_BINOPS[fn]} {em.expr(args[1])}"
    elif not kw and fn in _IOPS and len(args) == 2 and args[0].__class__ is Ref:
        return [f"{em.expr(args[0])} {_IOPS[fn]} {em.expr(args[1])}"]
    elif not kw and fn in _UNOPS and len(args) == 1:
        src = f"{_UNOPS[fn]}{em.expr(args[0])}"
    elif fn is operator.getitem and not kw and args[0].__class__ is Ref:
        src = f"{em.expr(args[0])}[{em.expr(args[1])}]"
    elif fn is operator.setitem and not kw and args[0].__class__ is Ref:
        return [f"{em.expr(args[0])}[{em.expr(args[1])}] = {em.expr(args[2])}"]
    elif fn is getattr and args[1].__class__ is str and args[1].isidentifier():
        src = f"{em.expr(args[0])}.{args[1]}"
    elif len(kw) == 1 and kw.get("out").__class__ is Ref and len(args) == getattr(fn, "nin", -1) and \
            type(fn).__name__ == "ufunc" and fn.__name__ not in ("maximum", "minimum"):   # deprecated there
        src = em.call(fn, (*args, kw["out"]), {})       # ufunc(a, b, out): positional, cheaper than out=
    else:
        src = em.call(fn, args, kw)
    if getattr(step, "scalar", False):
        src = f"A({src})"
    lines = [f"{tgt} = {src}" if tgt else src]
    if step.shape_guard is not None and tgt:
        got = f"{tgt}.shape" if not isinstance(step.outs, tuple) else \
            "(" + ", ".join(f"v{o}.shape" if o is not None else "None" for o in step.outs) + ",)"
        lines.append(f"if {got} != {em.const(step.shape_guard)}: raise GuardFailed({i}, 'data-dependent shape')")
    return lines


def build_program(steps, inputs, finals, values, backend_of, fuser=None):
    """Generate the replay function. ``inputs``: vids bound from the argument list in order;
    ``finals``: vids returned (a constant array there is copied on every replay)."""
    keep = set(finals) | set(inputs)
    steps = eliminate_dead(common_subexpressions(steps, keep), keep)
    n_fused = n_buffers = 0
    em = _Emitter()
    if getattr(fuser, "fold_constants", False):
        steps = fold_constants(steps, values, finals)
    if fuser is not None:
        steps, n_fused, n_buffers, renamed = fuser.plan(steps, inputs, keep, values, em)
        finals = [renamed.get(v, v) for v in finals]
        steps = eliminate_dead(steps, set(finals) | set(inputs))
    body = []
    if inputs:
        body.append(", ".join(f"v{v}" for v in inputs) + ", = I")
    for i, s in enumerate(steps):
        body.extend(s.source(em, i) if hasattr(s, "source") else step_source(em, s, i))
    outs, defined = [], _defined(steps, inputs)
    for v in finals:
        # a constant result: copied from a copy of its own (the trace handed its array to the caller)
        outs.append(f"v{v}" if v in defined else f"{em.const(values[v].copy())}.copy()")
    body.append(f"return ({', '.join(outs)}{',' if outs else ''})")
    src = "def replay(I):\n" + "\n".join("    " + line for line in body) + "\n"
    exec(compile(src, "<ag.compile replay>", "exec"), em.glob)
    return Program(em.glob["replay"], src, len(steps), n_fused, n_buffers)


def fold_constants(steps, values, finals=()):
    """Pure calls on constants only (the backward's seed ``ones(())``, its scaled and reshaped copies,
    ``arange(n)`` for an index) are computed once, at trace time: their traced results become constants of
    the program and later steps read them as such. Results that anything writes (through any view) stay
    steps, so each replay starts from a fresh array. One that may share memory with a result (``finals``)
    is copied: the traced call handed that result to its caller, who may write it."""
    group = alias_groups(steps)
    written, seen = set(), set()
    for s in steps:
        for v in s.mutates:
            written |= group.get(v, {v})
    for v in finals:
        seen |= group.get(v, {v})
    const, out = {}, []
    for s in steps:
        if const:
            s.args, s.kwargs = _substitute(s.args, const), _substitute(s.kwargs, const)
        o = s.outs
        if (s.kind == "call" and o.__class__ is int and not s.mutates and s.shape_guard is None
                and o not in written and o in values and not s.refs() and _pure(s.fn)):
            const[o] = values[o].copy() if o in seen else values[o]
            continue
        out.append(s)
    return out


def _pure(fn):
    """Whether fn is a deterministic array function without side effects: an operator, a NumPy/CuPy function
    or ufunc (not a random one), an array method or a ufunc's method; never a backend kernel or host_values."""
    if fn in _BINOPS or fn in _UNOPS or fn is operator.getitem or fn is getattr:
        return True
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        return type(owner).__name__ == "ufunc"          # add.reduce and the like; not a bound kernel
    mod = getattr(fn, "__module__", None) or ""
    if mod.partition(".")[0] in ("numpy", "cupy"):
        return "random" not in mod
    cls = getattr(fn, "__objclass__", None)             # ndarray.reshape, ndarray.astype, ...
    return cls is not None and cls.__name__ in ("ndarray", "_ndarray_base")     # CuPy 13+: _ndarray_base


def _substitute(x, const):
    """x with every Ref to a folded value replaced by that value."""
    return map_refs(x, lambda r: const.get(r.vid, r))


def common_subexpressions(steps, keep):
    """A pure operator or ufunc call repeated on the same values (no write to them in between) is
    computed once: ``g * w + g * w`` from a backward becomes one product. Results that are written
    later or handed out stay separate arrays."""
    group = alias_groups(steps)                 # a write through one view changes all of them
    root = {v: min(g) for v, g in group.items()}
    written = set()
    for s in steps:
        for v in s.mutates:
            written |= group.get(v, {v})
    seen, version, alias, out = {}, {}, {}, []
    for s in steps:
        if alias:
            s.args, s.kwargs = rename_refs(s.args, alias), rename_refs(s.kwargs, alias)
        for v in s.mutates:
            r = root.get(v, v)
            version[r] = version.get(r, 0) + 1
        key = None
        if (s.kind == "call" and s.fresh and not s.kwargs and not s.mutates and isinstance(s.outs, int)
                and s.outs not in written and s.outs not in keep):
            try:
                key = (s.fn, _key(s.args, version, root))
                hash(key)
            except TypeError:
                key = None
        if key is not None:
            prev = seen.get(key)
            if prev is not None:
                alias[s.outs] = prev
                continue
            seen[key] = s.outs
        out.append(s)
    return out


def _key(x, version, root):
    c = x.__class__
    if c is Ref:
        return ("v", x.vid, version.get(root.get(x.vid, x.vid), 0))
    if c is tuple or c is list:
        return (c,) + tuple(_key(y, version, root) for y in x)
    if c in (int, float, bool, str) or x is None:
        return (c, x)
    raise TypeError("not a simple argument")


def eliminate_dead(steps, keep):
    """Drop steps whose results nothing uses (a loss computed only to be thrown away): pure calls only;
    guards, writes, calls without results and the backends' kernels (random numbers) always stay."""
    needed, out = set(keep), []
    for s in reversed(steps):
        outs = s.outs if isinstance(s.outs, tuple) else (s.outs,)
        if (s.kind == "guard" or s.mutates or s.outs is None or s.outs == () or _is_kernel(s.fn)
                or any(o in needed for o in outs if o is not None)):
            out.append(s)
            needed.update(s.refs())
    return out[::-1]


def _is_kernel(fn):
    """A backend's named kernel (random numbers, checks): never dropped."""
    return isinstance(getattr(fn, "__self__", None), _backends.Backend) or not hasattr(fn, "__name__") \
        or fn.__name__ == "arrays"


def _defined(steps, inputs):
    out = set(inputs)
    for s in steps:
        o = s.outs
        if isinstance(o, tuple):
            out.update(x for x in o if x is not None)
        elif o is not None:
            out.add(o)
    return out
