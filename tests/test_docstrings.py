"""Every public callable of the package has a docstring, the main ones have an example, and every example
in a docstring runs (the doctests; `python -m pytest --doctest-modules autograd_gpu/creation.py` runs one
module's the same way, with `ag` from the root conftest.py)."""
import doctest
import importlib
import inspect
from pathlib import Path

import pytest

import autograd_gpu as ag

PACKAGE = Path(ag.__file__).resolve().parent

# the namespaces a user reaches; their public names (``__all__``, else no leading underscore)
NAMESPACES = ["autograd_gpu", "autograd_gpu.nn", "autograd_gpu.nn.functional", "autograd_gpu.nn.init",
              "autograd_gpu.nn.utils", "autograd_gpu.linalg", "autograd_gpu.fft", "autograd_gpu.optim",
              "autograd_gpu.optim.lr_scheduler", "autograd_gpu.data", "autograd_gpu.data.datasets",
              "autograd_gpu.func", "autograd_gpu.cuda", "autograd_gpu.autograd", "autograd_gpu.amp",
              "autograd_gpu.utils", "autograd_gpu.distributed", "autograd_gpu.viz", "autograd_gpu.serialization",
              "autograd_gpu.backends", "autograd_gpu.testing", "autograd_gpu.testing.cupy_standin"]
# the stand-in's ndarray and modules copy CuPy's API, which CuPy documents
MIRRORS = ("autograd_gpu.testing.cupy_standin._",)

# the callables a new user meets first: each shows an example
WITH_EXAMPLES = ["tensor", "zeros", "ones", "empty", "eye", "full", "arange", "linspace", "randn", "zeros_like",
                 "ones_like", "full_like", "no_grad", "is_grad_enabled", "get_default_dtype", "Tensor.item",
                 "Tensor.tolist", "Tensor.shape", "Tensor.size", "Tensor.dtype", "Tensor.requires_grad_",
                 "func.grad", "nn.Module.parameters"]


def _public_callables():
    seen = set()
    for name in NAMESPACES:
        module = importlib.import_module(name)
        names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
        for n in names:
            obj = getattr(module, n, None)
            owner = getattr(obj, "__module__", None) or ""
            if obj is None or inspect.ismodule(obj) or not callable(obj) or not owner.startswith("autograd_gpu") \
                    or owner.startswith(MIRRORS) or id(obj) in seen:
                continue
            seen.add(id(obj))
            yield f"{name}.{n}", obj, obj.__dict__.get("__doc__") if inspect.isclass(obj) else inspect.getdoc(obj)
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    if attr.startswith("_") or not (callable(value) or isinstance(value, (property, staticmethod,
                                                                                          classmethod))):
                        continue
                    member = getattr(obj, attr, None)
                    doc = inspect.getdoc(value.fget) if isinstance(value, property) else inspect.getdoc(member)
                    yield f"{name}.{n}.{attr}", member, doc     # getdoc: an override inherits its base's


def test_every_public_callable_has_a_docstring():
    items = list(_public_callables())
    assert len(items) > 500          # the enumeration reaches the package, not a stub of it
    missing = sorted(name for name, _, doc in items if not (doc or "").strip())
    assert not missing, f"{len(missing)} public callables without a docstring: {missing}"


def _resolve(path):
    obj = ag
    for part in path.split("."):
        obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else getattr(obj, part)
    return obj.fget if isinstance(obj, property) else getattr(obj, "__func__", obj)


@pytest.mark.parametrize("path", WITH_EXAMPLES)
def test_the_main_callables_show_an_example(path):
    doc = _resolve(path).__doc__ or ""
    assert ">>> " in doc, f"ag.{path}'s docstring has no example"


def _modules_with_examples():
    for f in sorted(PACKAGE.rglob("*.py")):
        if ">>> " in f.read_text(encoding="utf-8"):
            rel = f.relative_to(PACKAGE.parent).with_suffix("")
            yield ".".join(p for p in rel.parts if p != "__init__")


MODULES = list(_modules_with_examples())


def test_the_examples_are_in_the_modules_users_read_first():
    assert {"autograd_gpu.creation", "autograd_gpu.tensor"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    default_dtype, default_device = ag.get_default_dtype(), ag.get_default_device()
    tests = [t for t in finder.find(module, name, globs={**vars(module), "ag": ag}) if t.examples]
    assert tests, f"{name} mentions '>>> ' but holds no doctest"
    try:
        for t in tests:
            runner.run(t)
    finally:
        ag.set_default_dtype(default_dtype)
        ag.set_default_device(default_device)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (output above)"
