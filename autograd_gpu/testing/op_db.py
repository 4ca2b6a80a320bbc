"""OP_DB: the op table that drives the forward, gradcheck, gradgradcheck and cross-device tests.

Every entry is declared with its op, as an ``OpTest`` in the op's registration (autograd_gpu/ops/
registry.py); this module turns them into ``OpInfo``s: the op (a call on Tensors), its NumPy reference
(the same call on arrays), input shapes (incl. broadcasting, 0-d and size-0 cases), the domain inputs
are drawn from and points to keep away from (kinks, poles). A reference that names nothing, or two
entries with one id, is an error when this module is imported (so in every op test).
"""
import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import autograd_gpu as ag
from autograd_gpu.ops import registry
from autograd_gpu.testing import refs


@dataclass(frozen=True)
class OpInfo:
    name: str                            # test id
    op: Callable                         # Tensors -> Tensor: ag function, method or operator
    ref: Callable | None                 # the same call on NumPy arrays; None = no forward check
    samples: tuple                       # each sample is a tuple of input shapes
    domain: tuple = (-2.0, 2.0)          # inputs are drawn from here...
    avoid: tuple = ()                    # ...and kept away from these points (kinks, poles)
    dtypes: tuple = (ag.float32, ag.float64)
    grad: bool = True                    # gradcheck
    gradgrad: bool = True                # gradgradcheck
    tol: dict = field(default_factory=dict)   # {dtype: {"rtol": .., "atol": ..}} if defaults are too tight
    kinds: tuple | None = None           # per input: None (float), "int", "bool", "index:N" (ints in [0, N));
    #                                      "real" with complex dtypes: a real input of their precision
    no_bfloat16: str | None = None       # why the op refuses bfloat16 (with a TypeError), if it does

    @property
    def bfloat16(self):
        """Whether the entry runs in bfloat16: a float32 entry with a float input that does not refuse it."""
        return ag.float32 in self.dtypes and self.no_bfloat16 is None and any(
            k is None for k in (self.kinds or (None,)))



def resolve_ref(ref, where):
    """An OpTest's reference as a call on arrays: "np.exp" and "refs.conv2d" name a function (in NumPy or
    autograd_gpu/testing/refs.py), a callable is f(np, *arrays). A name that does not resolve is an error."""
    if ref is None:
        return None
    if callable(ref):
        return functools.partial(ref, np)
    root, _, path = ref.partition(".")
    spaces = {"np": np, "refs": refs}
    if root not in spaces or not path:
        raise ValueError(f"{where}: ref {ref!r} must start with 'np.' or 'refs.'")
    try:
        return functools.reduce(getattr, path.split("."), spaces[root])
    except AttributeError:
        raise ValueError(f"{where}: ref {ref!r} names nothing") from None


def registered(module=None):
    """The op-table entries declared with the ops (``register(tests=OpTest(...))``); of the ops defined in
    ``module`` (e.g. "autograd_gpu.ops.elementwise") when given."""
    out = []
    for d in registry.ops():
        if module is not None and d.module != module:
            continue
        for t in d.tests:
            name = t.name or (d.name if d.namespace == "" else f"{d.namespace.split('.')[-1]}.{d.name}")
            out.append(OpInfo(name, t.op or d.fn, resolve_ref(t.ref, f"{d.qualname} ({name})"), tuple(t.samples),
                              t.domain, t.avoid, t.dtypes, t.grad, t.gradgrad, t.tol, t.kinds, t.no_bfloat16))
    return out


# the elementwise ops' entries (declared in ops/elementwise.py) on real dtypes: tests/test_compile.py fuses them
ELEMENTWISE = [e for e in registered("autograd_gpu.ops.elementwise") if e.dtypes[0].kind != "c"]


def _unique(entries):
    seen = {}
    for e in entries:
        if e.name in seen:
            raise ValueError(f"op table: two entries named {e.name!r}; give one OpTest a name=")
        seen[e.name] = e
    return entries


OP_DB = _unique(registered())
