"""Host random generators the tracer cannot follow: Python's ``random`` and NumPy's ``numpy.random``.

A draw from them inside a traced function is a Python number or a host array that the trace would
keep as a constant, so every replay would repeat the traced draw. While a trace runs, their entry
points are wrapped (``random.random``, ``random.Random``'s methods, the ``numpy.random`` functions of
the global generator): a call tells the tracer, naming the user's line, and the signature runs eagerly.
A draw that no wrapper sees (``from random import random`` before the trace, a ``numpy.random.Generator``
the function reaches) is found afterwards: the generators' states (the global ones, and those the state
walk reached) are compared before and after the trace. The backends' own generators (``ag.rand``,
dropout) are recorded kernels and are not concerned.
"""
import os
import random as _random
import sys
import sysconfig
import types

from .. import backends as _backends
from .._trace_hooks import state as _active
from ..generator import Generator as _AgGenerator

__all__ = ["Patched", "is_host_rng", "rng_state", "caller_line"]

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIB_DIRS = tuple(p for p in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")} if p)


def caller_line():
    """'file:line' of the innermost frame that is the user's (not this package's, the standard library's
    or an installed package's)."""
    f = sys._getframe(1)
    while f is not None:
        fn = f.f_code.co_filename
        if not (fn.startswith(_PKG) or fn.startswith(_LIB_DIRS) or "site-packages" in fn or fn.startswith("<")):
            return f"{fn}:{f.f_lineno}"
        f = f.f_back
    return "<unknown>"


def _numpy_random():
    xp = _backends.get_backend("cpu")
    xp = xp.__dict__.get("xp", type(xp).xp)
    xp = getattr(xp, "_real", xp)                # (the namespace itself, not a trace's proxy)
    return getattr(xp, "random", None)


def is_host_rng(obj):
    """A host generator object: a ``random.Random``, a NumPy ``Generator`` or ``RandomState``. Not an
    ``ag.Generator``: its draws are backend kernels, recorded and drawn again at every replay."""
    if isinstance(obj, _AgGenerator):
        return False
    return isinstance(obj, _random.Random) or (
        obj.__class__.__name__ in ("Generator", "RandomState") and
        (hasattr(obj, "bit_generator") or hasattr(obj, "get_state")))


def _freeze(x):
    if isinstance(x, dict):
        return tuple((k, _freeze(v)) for k, v in x.items())
    if isinstance(x, (list, tuple)):
        return tuple(_freeze(v) for v in x)
    if hasattr(x, "tobytes"):
        return (getattr(x, "shape", None), x.tobytes())
    return x


def rng_state(obj):
    """A comparable snapshot of a host generator's state."""
    if isinstance(obj, _random.SystemRandom):
        return None                              # no state: its wrapped methods report it
    if isinstance(obj, _random.Random):
        return obj.getstate()
    bg = getattr(obj, "bit_generator", None)
    if bg is not None:
        return _freeze(bg.state)
    return _freeze(obj.get_state())


def _wrap(real, label, unseeded_only=False):
    def wrapper(*args, **kwargs):
        t = _active.t
        if t is not None and not (unseeded_only and (args and args[0] is not None or kwargs.get("seed") is not None)):
            t.fail(f"it uses a host random generator ({label}) at {caller_line()}; a replay would repeat "
                   "the traced numbers (use ag.rand/ag.randn, which every replay draws again)")
        return real(*args, **kwargs)
    wrapper.__name__ = getattr(real, "__name__", label)
    wrapper.__wrapped__ = real
    return wrapper


_METHODS = ("random", "getrandbits", "randbytes")
_READS = frozenset({"getstate", "get_state", "get_bit_generator"})     # reading the state changes nothing
_MAKERS = ("default_rng",)      # a generator made inside the function: from the OS's entropy unless seeded


def _entry_points():
    """(owner, name) of every entry point wrapped during a trace."""
    out = []
    for name in dir(_random):                    # the module's functions: bound methods of its generator
        v = getattr(_random, name)
        if not name.startswith("_") and name not in _READS and \
                getattr(v, "__self__", None) is getattr(_random, "_inst", None):
            out.append((_random, name))
    for cls in (_random.Random, _random.SystemRandom):   # every Python method draws through these
        out.extend((cls, n) for n in _METHODS if hasattr(cls, n))
    npr = _numpy_random()
    if npr is not None:
        glob = getattr(npr, "mtrand", None)
        glob = getattr(glob, "_rand", None)
        for name in dir(npr):
            v = getattr(npr, name, None)
            if not name.startswith("_") and name not in _READS and glob is not None and \
                    getattr(v, "__self__", None) is glob:
                out.append((npr, name))
        out.extend((npr, name) for name in _MAKERS if hasattr(npr, name))
    return out


_ENTRIES = None


class Patched:
    """Context manager for a trace: the entry points wrapped, and the global generators' states taken,
    so that ``changed()`` (called before leaving) tells whether a draw slipped past the wrappers."""

    def __enter__(self):
        global _ENTRIES
        if _ENTRIES is None:
            _ENTRIES = _entry_points()
        self.saved = []
        for owner, name in _ENTRIES:
            d = owner.__dict__
            had = name in d
            real = getattr(owner, name) if not isinstance(owner, type) else d.get(name)
            if isinstance(owner, type):
                if real is None:                 # inherited from the C base: wrap the unbound method
                    base = getattr(owner, name)
                    label = f"{owner.__name__}.{name}"
                    setattr(owner, name, _wrap(base, label))
                elif isinstance(real, types.FunctionType):
                    setattr(owner, name, _wrap(real, f"{owner.__name__}.{name}"))
                else:
                    continue
            else:
                mod = getattr(owner, "__name__", "")
                setattr(owner, name, _wrap(real, f"{mod}.{name}", unseeded_only=name in _MAKERS))
            self.saved.append((owner, name, had, real))
        self.globals = self._globals()
        self.states = [rng_state(g) for g in self.globals]
        return self

    def _globals(self):
        out = [getattr(_random, "_inst", None)]
        npr = _numpy_random()
        out.append(getattr(getattr(npr, "mtrand", None), "_rand", None))
        return [g for g in out if g is not None]

    def changed(self, reached=()):
        """The label of a generator whose state changed since the trace began, or None. ``reached`` are
        the generators the state walk found, with their states before the trace."""
        for g, s in zip(self.globals, self.states):
            if rng_state(g) != s:
                return "the global generator of " + ("random" if isinstance(g, _random.Random) else "numpy.random")
        for g, s in reached:
            if s is not None and rng_state(g) != s:
                return f"a {type(g).__name__} it reaches"
        return None

    def __exit__(self, *exc):
        for owner, name, had, real in reversed(self.saved):
            if had:
                setattr(owner, name, real)
            else:
                delattr(owner, name)
        return False
