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
                                          ("micrograd_moons.py", "moons.png"), ("fit_sin.py", "fit.png"),
                                          ("gp_regression.py", "gp.png"), ("adder.py", "adder.png")])
def test_example_smoke_run_writes_its_plot(name, picture, tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    out = tmp_path / picture
    run_example(name, ["--smoke", "--out", str(out)], monkeypatch)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "saved" in capsys.readouterr().out


def test_example_asked_for_cuda_without_it_prints_one_error_line_and_exits_2():
    import os
    import subprocess
    import autograd_gpu as ag
    if ag.cuda.is_available():
        pytest.skip("CUDA is available here (a GPU, or the CuPy stand-in)")
    env = {k: v for k, v in os.environ.items() if k != "AG_CUDA"}   # no CuPy stand-in in the child
    done = subprocess.run([sys.executable, str(EXAMPLES / "train_mlp.py"), "--device", "cuda", "--smoke"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2
    assert "CuPy" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) < 5 and done.stderr.startswith("error: ")
