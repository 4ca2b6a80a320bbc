"""docs/api.md names every public name of the package, and the docs point only inside the project."""
import re
import types
from pathlib import Path

import pytest

import autograd_gpu as ag

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api.md"
OPS = ROOT / "docs" / "ops.md"

# module -> the heading of its section in docs/api.md (the section runs to the next heading of the
# same or a higher level, so it includes its subsections)
SECTIONS = {
    ag.backends: "`ag.backends`",
    ag.autograd: "`ag.autograd`",
    ag.func: "`ag.func`",
    ag.nn: "`ag.nn`",
    ag.nn.functional: "`ag.nn.functional`",
    ag.nn.init: "`ag.nn.init`",
    ag.nn.utils: "`ag.nn.utils`",
    ag.optim: "`ag.optim`",
    ag.optim.lr_scheduler: "`ag.optim.lr_scheduler`",
    ag.data: "`ag.data`",
    ag.data.datasets: "`ag.data.datasets`",
    ag.amp: "`ag.amp`",
    ag.viz: "`ag.viz`",
    ag.cuda: "`ag.cuda`",
    ag.linalg: "`ag.linalg`",
    ag.fft: "`ag.fft`",
    ag.utils: "`ag.utils`",
}


def public_names(module):
    """``__all__`` when the module has one, else its public non-module attributes."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items()
                 if not n.startswith("_") and not isinstance(v, types.ModuleType)]
    return sorted(names)


def code_words(text):
    """Every identifier that appears inside a `code span` of ``text``."""
    return {w for span in re.findall(r"`([^`]+)`", text) for w in re.findall(r"[A-Za-z_]\w*", span)}


def section(text, heading_marker):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#") and heading_marker in line:
            level = len(line) - len(line.lstrip("#"))
            end = next((j for j in range(i + 1, len(lines))
                        if lines[j].startswith("#") and len(lines[j]) - len(lines[j].lstrip("#")) <= level),
                       len(lines))
            return "\n".join(lines[i:end])
    raise AssertionError(f"docs/api.md has no heading containing {heading_marker}")


def test_every_top_level_name_is_documented():
    """In docs/api.md, or for a registered op in the op reference docs/ops.md (generated from the
    registrations, so an op's docs line is written once, with the op)."""
    words = code_words(API.read_text()) | code_words(OPS.read_text())
    missing = [n for n in public_names(ag) if n not in words]
    assert not missing, f"neither docs/api.md nor docs/ops.md mentions ag.{', ag.'.join(missing)}"


@pytest.mark.parametrize("module", list(SECTIONS), ids=lambda m: m.__name__)
def test_every_public_name_of_a_module_is_documented_in_its_section(module):
    words = code_words(section(API.read_text(), SECTIONS[module]))
    ops_section = {ag.linalg: "`ag.linalg`", ag.fft: "`ag.fft`", ag.nn.functional: "`F`"}.get(module)
    if ops_section:                  # registered ops: their docs line is in the generated op reference
        words |= code_words(section(OPS.read_text(), ops_section))
    missing = [n for n in public_names(module) if n not in words]
    assert not missing, f"the {SECTIONS[module]} section of docs/api.md does not mention {missing}"


@pytest.mark.parametrize("path", [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_point_only_inside_the_project(path):
    assert "shared/" not in path.read_text(), f"{path.name} refers to shared/, which is not part of the project"
