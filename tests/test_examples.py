"""Every script in examples/ runs in its smoke mode."""
import runpy
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_micrograd_scalar_example_prints_expected_gradients(capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["micrograd_scalar.py"])
    runpy.run_path(str(EXAMPLES / "micrograd_scalar.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "dy/dx = 46.0" in out
    assert "= 8, " in out and "= 17, " in out
