"""The op registry: every built-in op is declared once, and everything that lists ops reads that."""
import importlib
import pkgutil
from pathlib import Path

import pytest

import autograd_gpu as ag
from autograd_gpu.autograd.function import Function
from autograd_gpu.ops import registry
from autograd_gpu.ops.registry import OpTest, register

ROOT = Path(__file__).resolve().parents[1]


def _all_functions():
    for m in pkgutil.walk_packages(ag.__path__, "autograd_gpu."):
        if ".testing" not in m.name:
            importlib.import_module(m.name)
    seen, todo = [], list(Function.__subclasses__())
    while todo:
        c = todo.pop()
        seen.append(c)
        todo.extend(c.__subclasses__())
    return [c for c in seen if c.__module__.startswith("autograd_gpu.")]


def test_every_builtin_function_declares_a_batching_rule():
    missing = sorted(f"{c.__module__}:{c.__name__}" for c in _all_functions() if c.batch_rule is None)
    assert not missing, ("these Functions declare no batch_rule (a rule from autograd_gpu/ops/batching.py, "
                         f"one written beside the op, or batching.loop): {missing}")


def test_every_registered_op_has_tests_or_says_why_not():
    bare = [d.qualname for d in registry.ops() if not d.tests and not d.untested]
    assert not bare, f"registered ops with neither tests=OpTest(...) nor untested='reason': {bare}"


def test_every_registered_op_is_public():
    spaces = {"": ag, "linalg": ag.linalg, "fft": ag.fft, "nn.functional": ag.nn.functional}
    for d in registry.ops():
        for name in (d.name,) + d.aliases if d.namespace != "Tensor" else ():     # "Tensor": methods only
            assert getattr(spaces[d.namespace], name) is d.fn, f"{d.qualname}: not exported as {name}"
        for m, f in d.methods.items():
            assert getattr(ag.Tensor, m) is f, f"{d.qualname}: Tensor.{m} is not the registered callable"


def test_op_reference_is_current():
    text = (ROOT / "docs" / "ops.md").read_text()
    assert text == registry.docs_markdown() + "\n", "docs/ops.md is out of date: run python tools/gen_op_docs.py"


def test_registering_a_name_twice_is_an_error():
    with pytest.raises(ValueError, match="registered twice"):
        register("exp", untested="a test of the registry", doc="Not an op.")(lambda x: x)


def test_binding_a_method_twice_is_an_error():
    def exp_again(x):
        """Not an op."""
    with pytest.raises(ValueError, match="Tensor.exp is already bound"):
        register("exp_again_for_test", method="exp", untested="a test of the registry")(exp_again)


def test_an_op_without_a_docs_line_is_an_error():
    with pytest.raises(ValueError, match="no docs line"):
        register("undocumented_for_test", untested="a test of the registry")(lambda x: x)


def test_optest_refuses_a_bad_reference():
    with pytest.raises(TypeError, match="ref must be"):
        OpTest(((2,),), ref=3)


def test_a_misspelt_numpy_reference_is_an_error():
    from autograd_gpu.testing.op_db import resolve_ref
    with pytest.raises(ValueError, match="names nothing"):
        resolve_ref("np.exq", "test")


def test_the_worked_example_is_the_real_code():
    """docs/adding_an_op.md shows adding ag.sinh as a Function and a registration: those lines are the code
    in ops/elementwise.py, and the op reaches every channel the doc promises."""
    import re
    import warnings

    import numpy as np

    from autograd_gpu.ops import elementwise
    from autograd_gpu.testing.op_db import OP_DB

    doc = (ROOT / "docs" / "adding_an_op.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, re.S)
    source = Path(elementwise.__file__).read_text()
    assert [b for b in blocks if "Sinh" in b or "def sinh" in b] == blocks[:2]
    for block in blocks[:2]:
        assert block in source, f"docs/adding_an_op.md's example is not the code in ops/elementwise.py:\n{block}"
    x = ag.tensor(np.linspace(-1.0, 1.0, 6).reshape(2, 3))
    assert np.allclose(ag.sinh(x).numpy(), np.sinh(x.numpy()))
    assert np.allclose(x.sinh().numpy(), np.sinh(x.numpy()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a loop fallback would warn
        assert np.allclose(ag.func.vmap(ag.sinh)(x).numpy(), np.sinh(x.numpy()))
    assert "sinh" in {e.name for e in OP_DB}
    assert "| `ag.sinh` | `sinh` | Hyperbolic sine, elementwise. |" in (ROOT / "docs" / "ops.md").read_text()


def test_registering_a_function_twice_is_an_error():
    with pytest.raises(ValueError, match="registered twice"):
        register("exp", untested="a test of the registry")(ag.exp)


def test_a_registration_cannot_replace_what_the_tensor_class_defines():
    def length(x):
        """Not an op."""
    with pytest.raises(ValueError, match="defined by the Tensor class itself"):
        register("length_for_test", method="detach", untested="a test of the registry")(length)


def test_a_misspelt_operator_is_an_error():
    def plus(a, b):
        """Not an op."""
    with pytest.raises(ValueError, match="not an operator method"):
        register("plus_for_test", method="__rad__", untested="a test of the registry")(plus)


def test_an_op_cannot_replace_a_name_of_its_module():
    space = {"tensor": ag.tensor}
    registry._NAMES["", "tensor"] = registry._NAMES["", "exp"]     # as if an op were called "tensor"
    try:
        with pytest.raises(ImportError, match="would replace"):
            registry.export("", space)
    finally:
        del registry._NAMES["", "tensor"]
