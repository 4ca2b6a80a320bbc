"""Every script in examples/ runs in its smoke mode (a few steps) and writes its picture."""
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name, args, monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(sys, "argv", [name] + args)
    return runpy.run_path(str(EXAMPLES / name), run_name="__main__")


def test_micrograd_scalar_example_prints_expected_gradients(capsys, monkeypatch):
    run_example("micrograd_scalar.py", [], monkeypatch)
    out = capsys.readouterr().out
    assert "dy/dx = 46.0" in out
    assert "= 8, " in out and "= 17, " in out


@pytest.mark.parametrize("name,picture", [("train_mlp.py", "mlp.png"), ("train_cnn.py", "cnn.png"),
                                          ("micrograd_moons.py", "moons.png"), ("fit_sin.py", "fit.png")])
def test_example_smoke_run_writes_its_plot(name, picture, tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    out = tmp_path / picture
    run_example(name, ["--smoke", "--out", str(out)], monkeypatch)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "saved" in capsys.readouterr().out
