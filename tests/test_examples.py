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
                                          ("char_lm.py", "char_lm.png"), ("unet_digits.py", "unet.png"),
                                          ("llama_char.py", "llama_char.png")])
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


@pytest.mark.gpu
@pytest.mark.parametrize("name,says", [("unet_digits.py", "dB denoised"), ("llama_char.py", "perplexity")])
def test_unet_and_llama_examples_smoke_run_on_cuda(name, says, tmp_path, capsys, monkeypatch):
    """`--device cuda --smoke`: every op of both models (ConvTranspose2d, GroupNorm, interpolate, pad,
    RMSNorm, tril, topk, sort, cumsum) on the CUDA backend; `AG_CUDA=standin` runs it on the stand-in."""
    import autograd_gpu as ag
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the stand-in)")
    pytest.importorskip("matplotlib")
    out = tmp_path / "picture.png"
    run_example(name, ["--smoke", "--device", "cuda", "--out", str(out)], monkeypatch)
    printed = capsys.readouterr().out
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and says in printed and "on cuda" in printed


def _example_module(name, monkeypatch):
    import importlib
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module(name)


def test_unet_keeps_the_image_size_also_when_a_level_has_an_odd_size(monkeypatch):
    """9x9 -> 4x4 -> 2x2 -> back up to 8x8, which F.pad brings to the skip connection's 9x9."""
    import autograd_gpu as ag
    unet = _example_module("unet_digits", monkeypatch)
    ag.manual_seed(0)
    model = unet.UNet(8)
    for side in ((9, 9), (8, 8), (10, 12)):
        x = ag.randn(2, 1, *side, requires_grad=True)
        y = model(x)
        assert y.shape == x.shape
        y.sum().backward()
        assert x.grad.shape == x.shape and all(p.grad is not None for p in model.parameters())
        model.zero_grad()
    assert unet.psnr(ag.zeros(3, 1, 4, 4), ag.full((3, 1, 4, 4), 0.1)) == pytest.approx(20.0, abs=1e-4)


@pytest.mark.parametrize("pos", ["rope", "learned"])
def test_llama_model_is_causal(pos, monkeypatch):
    """Changing a character changes no logits before it (ag.tril's mask), and changes those after it."""
    import autograd_gpu as ag
    llama = _example_module("llama_char", monkeypatch)
    vocab = _example_module("char_lm", monkeypatch).Vocab()
    ag.manual_seed(0)
    model = llama.LlamaLM(vocab, 16, 2, 2, 8, pos)
    x = ag.tensor([[5, 6, 7, 8, 9, 10, 11, 12]])
    y = x.clone()
    y[0, 5] = 40
    a, b = model(x).detach().numpy(), model(y).detach().numpy()
    assert (a[0, :5] == b[0, :5]).all() and not (a[0, 5:] == b[0, 5:]).all()
    with pytest.raises(ValueError, match="block size 8"):
        model(ag.zeros(1, 9, dtype=ag.int64))
    s = llama.generate(model, "def f", 12, temperature=0.0)
    assert s.startswith("def f") and len(s) == 17 and s == llama.generate(model, "def f", 12, temperature=0.0)
    a, b = (llama.generate(model, "x", 20, temperature=1.0, top_k=5, top_p=0.9, seed=1) for _ in range(2))
    assert a == b and len(a) == 21


def test_llama_sampling_keeps_the_top_k_and_the_nucleus(monkeypatch):
    """top_k keeps the k largest logits, top_p the fewest most probable whose probability reaches p
    (the first always), each renormalised; the draws follow those probabilities."""
    import numpy as np
    import autograd_gpu as ag
    llama = _example_module("llama_char", monkeypatch)
    ag.manual_seed(0)
    logits = ag.tensor([0.0, 1.0, 3.0, 2.0, -1.0])
    p = np.exp([0.0, 1.0, 3.0, 2.0, -1.0])
    p /= p.sum()                                     # sorted: 0.636 (index 2), 0.234 (3), 0.086 (1), ...
    assert {llama.sample_next(logits, 1.0, top_k=1) for _ in range(20)} == {2}
    assert {llama.sample_next(logits, 1.0, top_p=0.5) for _ in range(20)} == {2}
    assert llama.sample_next(logits, 0.0) == 2
    n = 3000
    for kw, keep in (({"top_k": 2}, [2, 3]), ({"top_p": 0.8}, [2, 3]), ({"top_p": 0.95}, [2, 3, 1]),
                     ({"top_k": 3, "top_p": 0.8}, [2, 3]), ({}, [0, 1, 2, 3, 4])):
        counts = np.bincount([llama.sample_next(logits, 1.0, **kw) for _ in range(n)], minlength=5) / n
        expected = np.zeros(5)
        expected[keep] = p[keep] / p[keep].sum()
        assert np.abs(counts - expected).max() < 0.04, (kw, counts, expected)
