"""CuPy's real public names and keyword arguments (cupy_api.json, made by tools/gen_cupy_api.py from the
installed package), and the namespace type that offers exactly those names and no others."""
import json
import types
from pathlib import Path

_DATA = json.loads((Path(__file__).with_name("cupy_api.json")).read_text())
VERSION = _DATA["cupy_version"]
NAMESPACES = _DATA["namespaces"]
UFUNC_METHODS = _DATA.get("ufunc_methods", {})


def names(namespace):
    return NAMESPACES.get(namespace, {})


def keyword_checker(qualname, entry):
    """A function that raises TypeError, as CuPy would, for keywords CuPy's ``qualname`` does not take
    (None when CuPy's signature is unknown or takes ``**kwargs``)."""
    params = entry.get("params") if entry else None
    if params is None or entry.get("varkw"):
        return None
    allowed = frozenset(params)
    max_positional = None if entry.get("varargs") else len(params)

    def check(args, kwargs):
        for k in kwargs:
            if k not in allowed:
                raise TypeError(f"{qualname}() got an unexpected keyword argument '{k}' "
                                f"(CuPy {VERSION} does not take it, whatever NumPy does)")
        if max_positional is not None and len(args) > max_positional:
            raise TypeError(f"{qualname}() takes at most {max_positional} positional arguments "
                            f"({len(args)} given)")
    return check


def not_simulated(qualname):
    def f(*args, **kwargs):
        raise NotImplementedError(f"{qualname} is CuPy API that the CuPy stand-in does not simulate; "
                                  "add it to autograd_gpu/testing/cupy_standin if the code needs it")
    f.__name__ = qualname.rsplit(".", 1)[-1]
    return f


def not_supported(qualname, message):
    """What CuPy offers under ``qualname`` but raises NotImplementedError for (``message``, CuPy's own)."""
    def f(*args, **kwargs):
        raise NotImplementedError(message)
    f.__name__ = qualname.rsplit(".", 1)[-1]
    return f


class Namespace(types.ModuleType):
    """A module offering exactly CuPy's names for ``qualname``: each is made on first use, by
    ``make(name, entry)``; a name that CuPy lacks raises AttributeError even where NumPy has it."""

    def __init__(self, qualname, make, doc=None):
        super().__init__(qualname, doc)
        self._api = names(qualname)
        self._make = make

    def __getattr__(self, name):
        if name.startswith("__") or name in ("_api", "_make"):
            raise AttributeError(name)
        entry = self._api.get(name)
        if entry is None:
            raise AttributeError(f"module '{self.__name__}' has no attribute '{name}' (CuPy {VERSION} "
                                 "has no such name: the CuPy stand-in offers only CuPy's names)")
        obj = self._make(name, entry)
        setattr(self, name, obj)
        return obj

    def __dir__(self):
        return sorted(self._api)

    def __repr__(self):
        return f"<module '{self.__name__}' (CuPy stand-in)>"
