"""pytest at the repository root: doctests in the package see ``ag`` (``import autograd_gpu as ag``), as the
examples in its docstrings assume (``python -m pytest --doctest-modules autograd_gpu/creation.py``).
The test suite's own fixtures are in tests/conftest.py."""
import pytest


@pytest.fixture(autouse=True)
def _ag_in_doctests(request):
    if type(request.node).__name__ == "DoctestItem":
        import autograd_gpu
        request.getfixturevalue("doctest_namespace")["ag"] = autograd_gpu
