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
                                          ("gp_regression.py", "gp.png"), ("adder.py", "adder.png"),
                                          ("char_lm.py", "char_lm.png")])
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


def test_char_lm_transformer_smoke_run_and_generate(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    out = tmp_path / "char_lm.png"
    ns = run_example("char_lm.py", ["--smoke", "--model", "transformer", "--out", str(out)], monkeypatch)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and "validation loss" in capsys.readouterr().out
    vocab = ns["Vocab"]()
    for model in (ns["LSTMLM"](vocab, 8, 16, 1, 0.0), ns["TransformerLM"](vocab, 16, 2, 1, 8, 0.0)):
        s = ns["generate"](model, "def f", 12, temperature=0.0)
        assert s.startswith("def f") and len(s) == 17
        assert s == ns["generate"](model, "def f", 12, temperature=0.0)          # greedy is deterministic
        a, b = (ns["generate"](model, "x", 20, temperature=1.0, top_k=3, seed=1) for _ in range(2))
        assert a == b and len(a) == 21
