"""No import cycle among the package's top-level units (autograd_gpu.ops, autograd_gpu.tensor, ...),
imports inside functions included: the check behind the layer contracts in pyproject.toml
(``lint-imports`` runs them in CI), kept here so that the test suite fails on a new circle too.

Imports listed in the layers contract's ``ignore_imports`` (each with its reason in pyproject.toml; there
are none today) are left out here too, so the two checks agree."""
import os
import re

import pytest

try:
    import tomllib
except ImportError:             # Python 3.10: the [test] extra installs tomli, the same parser
    import tomli as tomllib

grimp = pytest.importorskip("grimp", reason="pip install import-linter (the [test] extra has it)")

ROOT = "autograd_gpu"
PYPROJECT = os.path.join(os.path.dirname(__file__), os.pardir, "pyproject.toml")


def _unit(module):
    """autograd_gpu.ops.linalg -> autograd_gpu.ops; the package itself -> None."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else None


def _pattern(expr):
    """An import-linter module expression as a regex: ``*`` is one name, ``**`` one or more."""
    parts = [r"[^.]+(\.[^.]+)*" if p == "**" else r"[^.]+" if p == "*" else re.escape(p) for p in expr.split(".")]
    return r"\.".join(parts)


def _ignored():
    """A test ``(importer, imported) -> bool`` for the layers contract's ignore_imports."""
    with open(PYPROJECT, "rb") as f:
        contracts = tomllib.load(f)["tool"]["importlinter"]["contracts"]
    layers, = [c for c in contracts if c["type"] == "layers"]
    pairs = [[_pattern(s.strip()) for s in line.split("->")] for line in layers.get("ignore_imports", ())]
    regex = re.compile("|".join(f"(?:{a} -> {b})" for a, b in pairs) or "(?!)")
    return lambda m, i: regex.fullmatch(f"{m} -> {i}") is not None


def _unit_graph():
    """unit -> {imported unit: an example (importer, imported) module pair}."""
    graph = grimp.build_graph(ROOT, include_external_packages=False, cache_dir=None)
    ignored = _ignored()
    edges = {}
    for m in graph.modules:
        a = _unit(m)
        for i in graph.find_modules_directly_imported_by(m):
            b = _unit(i)
            if a and b and a != b and not ignored(m, i):
                edges.setdefault(a, {}).setdefault(b, (m, i))
    return edges


def _find_cycle(edges):
    """One cycle as a list of units [u0, u1, ..., u0], or None (iterative depth-first search)."""
    colour = {}
    for start in sorted(edges):
        if colour.get(start):
            continue
        path, stack = [start], [iter(sorted(edges.get(start, ())))]
        colour[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                colour[path.pop()] = 2
                stack.pop()
            elif colour.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not colour.get(nxt):
                colour[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(edges.get(nxt, ()))))
    return None


def test_ignore_patterns():
    assert re.fullmatch(_pattern("autograd_gpu.ops.**"), "autograd_gpu.ops.nn.norm")
    assert not re.fullmatch(_pattern("autograd_gpu.ops.**"), "autograd_gpu.ops")
    assert not re.fullmatch(_pattern("autograd_gpu.ops.*"), "autograd_gpu.ops.nn.norm")


def test_find_cycle_finds_one():
    assert _find_cycle({"a": {"b": 0}, "b": {"c": 0}, "c": {"a": 0}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b": 0}, "b": {"c": 0}, "c": {}}) is None


def test_no_import_cycle_between_top_level_units():
    edges = _unit_graph()
    cycle = _find_cycle(edges)
    if cycle is not None:
        steps = "\n".join(f"  {a} -> {b}   ({' imports '.join(edges[a][b])})" for a, b in zip(cycle, cycle[1:]))
        pytest.fail(f"import cycle between top-level units of {ROOT} (lazy imports included):\n{steps}\n"
                    "Point the upward import down: move what both sides need into a leaf module "
                    "(shared/STYLE.md section 1; the layers are in pyproject.toml's [tool.importlinter]).")


# host-only loaders that read files into NumPy arrays before any Tensor exists (the datasets hand them to
# ag.tensor): the only modules outside backends/ and testing/ that may import NumPy themselves
_NUMPY_OUTSIDE_BACKENDS = {"data/datasets/digits.py", "data/datasets/mnist.py", "data/datasets/toy.py"}


def test_numpy_and_cupy_are_imported_only_by_the_backends():
    """Everything above backends/ reaches arrays through a backend (its xp, or a helper in backends/), so the
    same code runs on NumPy and CuPy; an import of numpy or cupy elsewhere is a CPU-only path waiting to happen."""
    root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "autograd_gpu")
    pattern = re.compile(r"^\s*(import (numpy|cupy)\b|from (numpy|cupy)\b)", re.M)
    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if not name.endswith(".py") or rel.startswith(("backends/", "testing/")) or rel in _NUMPY_OUTSIDE_BACKENDS:
                continue
            with open(path, encoding="utf-8") as f:
                if pattern.search(f.read()):
                    found.append(rel)
    assert found == [], f"numpy/cupy imported outside autograd_gpu/backends/: {found}"
