"""Generate the list of CuPy's real public API that the strict CuPy stand-in enforces.

The stand-in (``autograd_gpu/testing/cupy_standin/``) is a fake ``cupy`` built on
NumPy, so tests can run without a GPU.  To catch code that only works because
NumPy is more permissive than CuPy, the stand-in refuses any name or keyword
that real CuPy lacks.  This script records what real CuPy has, by introspection
only (no GPU needed), into ``cupy_api.json``.

Usage (in an environment where ``import cupy`` works)::

    python tools/gen_cupy_api.py [--out PATH]

``collect()`` returns the same dict, so a test can compare the committed file
with the installed package.
"""
import argparse
import importlib
import inspect
import json
import os
import pkgutil
import re
import sys
import types

DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir,
                           "autograd_gpu", "testing", "cupy_standin", "cupy_api.json")

MODULES = ["cupy", "cupy.cuda", "cupy.cuda.runtime", "cupy.random", "cupy.linalg",
           "cupy.fft", "cupy.lib.stride_tricks", "cupyx", "cupyx.scipy.special"]
CLASSES = {"cupy.ndarray": "cupy.ndarray", "cupy.cuda.Device": "cupy.cuda.Device",
           "cupy.cuda.Stream": "cupy.cuda.Stream",
           "cupy.random.RandomState": "cupy.random.RandomState",
           "cupy.random.Generator": "cupy.random.Generator"}
UFUNC_METHODS = ["accumulate", "at", "outer", "reduce", "reduceat"]

# Cython embeds signatures as the first docstring line, e.g.
# "_ndarray_base.sum(self, axis=None, dtype=None, out=None, keepdims=False) -> _ndarray_base"
_SIG_LINE = re.compile(r"^[\w.]+\((.*)\)\s*(->.*)?$")


def _resolve(dotted):
    mod, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(mod), attr)


def _split_top_level(text):
    """Split on commas that are not inside brackets or quotes (defaults like (1, 2) or ',')."""
    parts, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def _params_from_doc(doc):
    """(params, varargs, varkw) from an embedded signature line, or None if there is none."""
    lines = (doc or "").strip().splitlines()
    m = _SIG_LINE.match(lines[0].strip()) if lines else None
    if not m:
        return None
    params, varargs, varkw = [], False, False
    for arg in _split_top_level(m.group(1).replace("\\*", "*")):
        arg = arg.split("=", 1)[0].split(":", 1)[0].strip()
        name = arg.split()[-1] if arg else ""  # drop Cython C types ("int alignment")
        if name in ("*", "/"):
            continue
        if name.startswith("**"):
            varkw = True
        elif name.startswith("*"):
            varargs = True
        elif name.isidentifier():
            params.append(name)
        else:
            return None  # unreadable (e.g. "[, out1]" notation): accept any keyword
    return params, varargs, varkw


def _params_from_signature(obj):
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    kinds = {p.name: p.kind for p in sig.parameters.values()}
    star, star2 = inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD
    return ([n for n, k in kinds.items() if k not in (star, star2)],
            star in kinds.values(), star2 in kinds.values())


def _entry(kind, found=None, drop_first=False):
    params, varargs, varkw = found if found else (None, False, False)
    if params and drop_first and params[0] in ("self", "cls"):
        params = params[1:]
    return {"kind": kind, "params": params, "varargs": varargs, "varkw": varkw}


def _describe(obj, ufunc_type):
    if isinstance(obj, ufunc_type):
        entry = _entry("ufunc", (_ufunc_kwargs(), False, False))
        entry.update(nin=obj.nin, nout=obj.nout)
        return entry
    if isinstance(obj, types.ModuleType):  # includes cupy.testing's lazy module
        return _entry("module")
    if isinstance(obj, type):
        # Prefer the documented constructor line: cupy.ndarray's Python signature is
        # (*args, _obj=None, _no_init=False, **kwargs); Cython classes have none at all.
        return _entry("class", _params_from_doc(obj.__doc__) or _params_from_signature(obj))
    if callable(obj):  # Python/Cython functions, builtins, _GUFunc, fused and kernel objects
        sig, doc = _params_from_signature(obj), _params_from_doc(obj.__doc__)
        if sig and sig[2] and doc and not doc[2]:
            sig = None  # einsum(*operands, **kwargs) documents (and enforces) dtype/optimize only
        return _entry("function", sig or doc or _params_from_doc(type(obj).__call__.__doc__),
                      drop_first=True)
    if obj is None or (isinstance(obj, (int, float, complex)) and not isinstance(obj, bool)):
        return _entry("constant")  # pi, inf, newaxis, cudaMemcpyHostToDevice, ...
    return _entry("attribute")  # c_, mgrid, fft.config, boolean settings, Stream.null, ...


def _describe_member(cls, name):
    static = inspect.getattr_static(cls, name)
    if isinstance(static, (property, types.GetSetDescriptorType, types.MemberDescriptorType)):
        return _entry("property")
    if isinstance(static, (classmethod, staticmethod)) or \
            type(static).__name__ == "classmethod_descriptor":
        static = getattr(cls, name)  # bound to the class, so cls is already dropped
    if callable(static):
        found = _params_from_signature(static) or _params_from_doc(static.__doc__)
        return _entry("method", found, drop_first=True)
    return _entry("attribute")


def _ufunc_kwargs():
    # ufunc.__call__ is (*args, **kwargs) and pops out/dtype/casting (and private
    # _where), raising "Wrong arguments" for anything else.  CuPy documents exactly
    # those public keywords in the signature line it generates for every ufunc.
    from cupy._core._kernel import _ufunc_doc_signature_formatter
    import cupy
    return re.findall(r"(\w+)=", _ufunc_doc_signature_formatter(cupy.add, "add"))


def _is_public(name, obj):
    # Leaked imports are not API: `from __future__ import annotations` in cupy,
    # `import contextlib, warnings` in cupy.cuda.
    if isinstance(obj, types.ModuleType) and not obj.__name__.startswith("cupy"):
        return False
    return not name.startswith("_") and type(obj).__name__ != "_Feature"


def _module_namespace(mod, ufunc_type):
    """Public names of a module, the same whatever else has been imported so far."""
    # Attributes served by a module __getattr__ (cupy.random.Generator, cupy.cuda.cublas,
    # cupyx.lapack, ...) only show in dir() once touched: touch them all.
    lazy = mod.__dict__.get("__getattr__")
    lazy = re.findall(r"key == '(\w+)'", inspect.getsource(lazy)) if lazy else []
    for name in lazy:
        try:
            getattr(mod, name)
        except Exception:  # its CUDA library is missing here; it is a module anyway
            pass
    # Submodules are attributes only once imported somewhere; list them all.
    submodules = [m.name for m in pkgutil.iter_modules(getattr(mod, "__path__", []))]
    names = {n: _describe(getattr(mod, n), ufunc_type)
             for n in dir(mod) if _is_public(n, getattr(mod, n))}
    for n in submodules + lazy:
        if not n.startswith("_"):
            names.setdefault(n, _entry("module"))
    return names


def collect():
    import cupy
    ufunc_type = type(cupy.add)
    namespaces = {name: _module_namespace(importlib.import_module(name), ufunc_type)
                  for name in MODULES}
    for name, dotted in CLASSES.items():
        cls = _resolve(dotted)
        namespaces[name] = {n: _describe_member(cls, n) for n in dir(cls)
                            if _is_public(n, inspect.getattr_static(cls, n))}
    ufunc_methods = {}
    for m in UFUNC_METHODS:
        if hasattr(ufunc_type, m):
            ufunc_methods[m] = _params_from_doc(getattr(ufunc_type, m).__doc__)[0][1:]  # drop self
    return {"cupy_version": cupy.__version__,
            "generated_by": "python tools/gen_cupy_api.py",
            "namespaces": namespaces,
            "ufunc_methods": ufunc_methods}


def dumps(api):
    return json.dumps(api, indent=1, sort_keys=True) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.path.normpath(DEFAULT_OUT))
    args = parser.parse_args(argv)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write(dumps(collect()))
    print("wrote", args.out, file=sys.stderr)


if __name__ == "__main__":
    main()
