"""The op registry: one registration per public op, read by everything that lists ops.

An op is written in one place: its Function (forward and backward side by side, with its vmap rule as
the class attribute ``batch_rule``) and one ``@register`` on its public function, right below it::

    class Exp(Function):
        batch_rule = batching.elementwise

        @staticmethod
        def forward(ctx, x):
            y = ctx.wrap(ctx.xp.exp(x.data))
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            y, = ctx.saved_tensors
            return grad * y

    @register(method=True, tests=OpTest(UNARY, ref="np.exp"))
    def exp(x):
        \"\"\"Elementwise e**x.\"\"\"
        return Exp.apply(x)

What reads the registration:
- the package namespaces: ``ag.exp`` (and ``ag.linalg.*``, ``ag.fft.*``, ``F.*`` for the other
  namespaces) come from ``names(namespace)``;
- Tensor methods and operators: bound on ``Tensor`` when the op registers (``methods()`` lists them);
- the op table of the tests: ``autograd_gpu/testing/op_db.py`` turns every ``OpTest`` into an entry
  (forward against NumPy, gradcheck, gradgradcheck, cuda against cpu);
- the op reference ``docs/ops.md``: ``python tools/gen_op_docs.py`` writes it from ``docs_markdown()``,
  and a test fails when it is out of date.

Mistakes are errors at import (a name registered twice, a method bound twice, no docs line) or in the
tests (an op with neither tests nor a stated reason, a NumPy reference name that does not exist, a
built-in Function without ``batch_rule``), never a silent fallback. This module is plain data: no
NumPy (references are named, or written as ``f(np, *arrays)``, and resolved by the testing layer).
"""
import operator
from dataclasses import dataclass, field
from typing import Callable, TypedDict

from ..dtypes import float32, float64, complex64, complex128
from ..tensor import Tensor

__all__ = ["OpTest", "OpTestOptions", "OpDef", "register", "ops", "names", "export", "methods", "docs_markdown", "UNARY", "BINARY",
           "COMPLEX", "NO_GRAD"]

# namespace -> how its ops are spelt; "Tensor" holds ops that are Tensor methods only (x.to(...))
NAMESPACES = {"": "ag", "linalg": "ag.linalg", "fft": "ag.fft", "nn.functional": "F", "Tensor": "Tensor"}

# sample shapes most op-table entries use: a matrix, a 0-d tensor, an empty one, one that broadcasts
UNARY = (((3, 4),), ((),), ((0, 3),), ((2, 1, 3),))
BINARY = (((2, 3), (2, 3)), ((2, 3), (3,)), ((), (4,)), ((3, 1), (1, 4)), ((2, 0), (2, 1)))


class OpTestOptions(TypedDict, total=False):
    """OpTest keywords shared by several entries of a module, ``OpTest(samples, ref=..., **options)``: any of
    them but the per-entry ``ref``, ``op`` and ``name``. A plain dict at run time; typed so that a type checker
    checks the keys and values as it checks written-out keywords. (An entry that also passes one of these
    keywords itself needs a TypedDict with exactly the keys the table has, as ``COMPLEX``'s.)"""
    domain: tuple
    avoid: tuple
    dtypes: tuple
    grad: bool
    gradgrad: bool
    tol: dict
    kinds: tuple | None
    no_bfloat16: str | None


class _ComplexOptions(TypedDict):
    """COMPLEX's keywords, typed so that ``OpTest(..., **COMPLEX)`` is type-checked like written-out keywords."""
    dtypes: tuple
    tol: dict


# an entry on complex inputs: OpTest(..., **COMPLEX) (gradients checked in complex128, PyTorch's convention)
COMPLEX: _ComplexOptions = {"dtypes": (complex64, complex128), "tol": {complex64: {"rtol": 1e-4, "atol": 1e-5}}}


class _NoGradOptions(TypedDict):
    """NO_GRAD's keywords, typed as COMPLEX's are."""
    grad: bool
    gradgrad: bool


# an entry of an op whose result is a constant of the graph (comparisons, rounding): OpTest(..., **NO_GRAD)
NO_GRAD: _NoGradOptions = {"grad": False, "gradgrad": False}
# Why the LAPACK-backed ops refuse bfloat16 (OpTest's no_bfloat16): their TypeError says what to do
NO_BF16_LAPACK = "LAPACK and cuSOLVER have no bfloat16 (PyTorch refuses it too)"


@dataclass(frozen=True)
class OpTest:
    """One entry of the op table, declared with the op.

    ``samples``: input shapes per sample, e.g. ``(((3, 4),), ((),))`` for a unary op.
    ``ref``: the same call on NumPy arrays: a name resolved by the testing layer (``"np.exp"``,
    ``"refs.conv2d"`` for autograd_gpu/testing/refs.py) or a callable ``f(np, *arrays)``; None = no
    forward check. ``op``: Tensors -> Tensor (keyword arguments go in a lambda); the registered function
    when omitted. ``name``: the test id; the op's name when omitted. The rest as in the op table:
    inputs drawn from ``domain`` and kept away from ``avoid``, ``kinds`` per input (None float, "int",
    "bool", "index:N", "real"), ``tol`` per dtype, ``grad``/``gradgrad`` for the finite-difference checks.
    Entries that take float32 also run in bfloat16 (computed against the reference in float32, with
    bfloat16's tolerances, or ``tol[bfloat16]``); ``no_bfloat16="why"`` declares an op that refuses
    bfloat16 instead, with a TypeError that the op table checks.
    """
    samples: tuple
    ref: object = None
    op: Callable | None = None
    name: str | None = None
    domain: tuple = (-2.0, 2.0)
    avoid: tuple = ()
    dtypes: tuple = (float32, float64)
    grad: bool = True
    gradgrad: bool = True
    tol: dict = field(default_factory=dict)
    kinds: tuple | None = None
    no_bfloat16: str | None = None

    def __post_init__(self):
        if not isinstance(self.samples, (tuple, list)) or not self.samples:
            raise TypeError(f"OpTest: expected samples as a non-empty tuple of shape tuples, got {self.samples!r}")
        if self.ref is not None and not isinstance(self.ref, str) and not callable(self.ref):
            raise TypeError(f"OpTest: ref must be a name ('np.exp') or a callable f(np, *arrays), got {self.ref!r}")


@dataclass(frozen=True)
class OpDef:
    """What one registration declares (see the module docstring)."""
    name: str
    fn: Callable
    namespace: str
    doc: str
    methods: dict           # Tensor attribute name -> callable bound to it
    aliases: tuple
    tests: tuple
    untested: str | None
    module: str

    @property
    def qualname(self):
        prefix = NAMESPACES[self.namespace]
        return f"{prefix}.{self.name}"


_OPS: dict[tuple[str, str], OpDef] = {}      # (namespace, name) -> OpDef, in registration order
_NAMES: dict[tuple[str, str], OpDef] = {}    # (namespace, public name or alias) -> OpDef
_METHODS: dict[str, tuple[OpDef, Callable]] = {}    # Tensor attribute -> (OpDef, callable)
# what the Tensor class body defines itself (__repr__, __len__, shape, ...): no registration may replace it
_CLASS_ATTRS = frozenset(vars(Tensor)) - {"__module__", "__doc__", "__slots__", "__dict__", "__weakref__",
                                         "__qualname__"}
# the operator methods a registration may bind: Python's (operator.__add__ ...) and their reflections
_OPERATORS = frozenset(n for n in dir(operator) if n.startswith("__") and n.endswith("__") and n != "__all__"
                       and callable(getattr(operator, n)))
_OPERATORS |= {"__r" + n[2:] for n in _OPERATORS}


def register(name=None, *, namespace="", method=False, methods=None, aliases=(), tests=(), untested=None,
             doc=None):
    """Register the decorated public function as an op (returned unchanged).

    name: the public name (the function's own name when None). namespace: "" for ``ag.*``, or "linalg",
    "fft", "nn.functional", or "Tensor" for an op that is a Tensor method only (exported nowhere else).
    method: True binds the function as the Tensor method of the same name; a name or a tuple of names
    (operators included, "__add__") binds it under those. methods: {name: callable}
    for Tensor methods whose signature differs (``x.reshape(2, 3)``, ``__rsub__``). aliases: other public
    names of the same function (``divide`` for ``div``). tests: an OpTest or a sequence of them; an op
    without tests gives the reason in ``untested``. doc: the docs line (the docstring's first line when
    None).
    """
    def deco(fn):
        n = name or fn.__name__
        if namespace not in NAMESPACES:
            raise ValueError(f"register({n}): namespace must be one of {sorted(NAMESPACES)}, got {namespace!r}")
        line = doc or (fn.__doc__ or "").strip().split("\n")[0].strip()
        if not line:
            raise ValueError(f"register({n}): no docs line; give the function a docstring or pass doc=")
        ts = (tests,) if isinstance(tests, OpTest) else tuple(tests)
        for t in ts:
            if not isinstance(t, OpTest):
                raise TypeError(f"register({n}): tests must be OpTest entries, got {type(t).__name__}")
        if ts and untested:
            raise ValueError(f"register({n}): pass tests or untested=reason, not both")
        bound = {}
        names_ = (n,) if method is True else (method,) if isinstance(method, str) else tuple(method or ())
        for m in names_:
            bound[m] = fn
        for m, f in (methods or {}).items():
            bound[m] = f
        for m in bound:
            if m.startswith("__") and m not in _OPERATORS:
                raise ValueError(f"register({n}): {m} is not an operator method Python calls (a misspelling?)")
        if namespace == "Tensor" and not bound:
            raise ValueError(f"register({n}): an op of the 'Tensor' namespace must bind a method (method=)")
        if (namespace, n) in _OPS:
            raise ValueError(f"register: {NAMESPACES[namespace]}.{n} is registered twice ({_OPS[namespace, n].module} "
                             f"and {fn.__module__})")
        d = OpDef(n, fn, namespace, line, bound, tuple(aliases), ts, untested, fn.__module__)
        for public in (n,) + d.aliases:          # check everything first: a refused op leaves no trace
            prev = _NAMES.get((namespace, public))
            if prev is not None and prev.fn is not fn:
                raise ValueError(f"register: {NAMESPACES[namespace]}.{public} is registered twice "
                                 f"({prev.module} and {d.module})")
        for m, f in bound.items():
            prev = _METHODS.get(m)
            if prev is not None and prev[1] is not f:
                raise ValueError(f"register({n}): Tensor.{m} is already bound by {prev[0].qualname}")
            if prev is None and m in _CLASS_ATTRS:
                raise ValueError(f"register({n}): Tensor.{m} is defined by the Tensor class itself")
        for public in (n,) + d.aliases:
            _NAMES[namespace, public] = d
        for m, f in bound.items():
            _METHODS[m] = (d, f)
            setattr(Tensor, m, f)
        _OPS[namespace, n] = d
        return fn
    return deco


def ops(namespace=None):
    """Every registration (of one namespace when given), in registration order."""
    return [d for (ns, _), d in _OPS.items() if namespace is None or ns == namespace]


def names(namespace=""):
    """{public name: function} of a namespace, aliases included: what its module exports."""
    return {public: d.fn for (ns, public), d in _NAMES.items() if ns == namespace}


def export(namespace, into):
    """Put a namespace's ops into a module's globals ``into`` (ag, ag.linalg, ag.fft, F), refusing to
    replace a name the module already has for something else (an op called ``tensor`` or ``float32``)."""
    ns = names(namespace)
    clash = sorted(k for k, f in ns.items() if k in into and into[k] is not f)
    if clash:
        raise ImportError(f"ops registered in {NAMESPACES[namespace]} would replace names the module already "
                          f"defines: {clash}; rename the ops")
    into.update(ns)
    return sorted(ns)


def methods():
    """{Tensor attribute: callable} that the registrations bind."""
    return {m: f for m, (_, f) in _METHODS.items()}


def docs_markdown():
    """The op reference (docs/ops.md), generated from the registrations."""
    out = ["# Op reference", "",
           "Generated from the op registrations by `python tools/gen_op_docs.py`; do not edit by hand.",
           "Each op: its public name, its Tensor methods, what it computes.", ""]
    for ns, prefix in NAMESPACES.items():
        ds = sorted(ops(ns), key=lambda d: d.name)
        if not ds:
            continue
        out += [f"## `{prefix}`", "", "| op | Tensor methods | what it computes |", "|---|---|---|"]
        for d in ds:
            public = ", ".join(f"`{prefix}.{a}`" for a in (d.name,) + d.aliases)
            ms = ", ".join(f"`{m}`" for m in d.methods)
            line = d.doc.replace("``", "`").replace("|", "\\|")     # docstrings' ``x`` is Markdown's `x`
            out.append(f"| {public} | {ms} | {line} |")
        out.append("")
    return "\n".join(out)
