"""Correctness gaps a red-team pass found (issue 24): each test is one repro and what PyTorch does there."""
import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn as nn
import autograd_gpu.nn.functional as F
from autograd_gpu.utils import checkpoint

NAN = float("nan")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


# -- checkpoint inside checkpoint -------------------------------------------------------------------
def _two_linears(device):
    ag.manual_seed(0)
    return (nn.Linear(3, 4).to(device=device, dtype=ag.float64),
            nn.Linear(4, 2).to(device=device, dtype=ag.float64))


def _plain_grads(lin1, lin2, x):
    lin2(lin1(x)).tanh().sum().backward()
    got = [t.grad.numpy().copy() for t in (x, *lin1.parameters(), *lin2.parameters())]
    for t in (x, *lin1.parameters(), *lin2.parameters()):
        t.grad = None
    return got


def test_nested_checkpoint_gives_the_inner_blocks_parameters_their_gradients(device):
    lin1, lin2 = _two_linears(device)
    x = ag.tensor(np.random.default_rng(0).standard_normal((5, 3)), device=device, requires_grad=True)
    want = _plain_grads(lin1, lin2, x)

    def inner(h):
        return lin2(h).tanh()

    def outer(h):
        return checkpoint(inner, lin1(h))

    checkpoint(outer, x).sum().backward()
    got = [t.grad for t in (x, *lin1.parameters(), *lin2.parameters())]
    assert all(g is not None for g in got)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)
    # autograd.grad can ask for the inner block's parameters too: they are inputs of the outer node
    g = ag.autograd.grad(checkpoint(outer, x).sum(), [lin2.weight])[0]
    np.testing.assert_allclose(g.numpy(), want[3], rtol=1e-12)


def test_nested_checkpoint_of_modules_and_a_parameter_reached_through_a_global(device):
    lin1, lin2 = _two_linears(device)
    x = ag.tensor(np.random.default_rng(1).standard_normal((2, 3)), device=device, requires_grad=True)
    want = _plain_grads(lin1, lin2, x)
    _GLOBAL["lin2"] = lin2              # no closure leads to it: backward() still accumulates its .grad
    try:
        checkpoint(_outer_through_a_global, lin1(x)).sum().backward()
    finally:
        _GLOBAL.clear()
    for g, w in zip((x.grad, *[p.grad for p in lin1.parameters()], *[p.grad for p in lin2.parameters()]), want):
        np.testing.assert_allclose(g.numpy(), w, rtol=1e-12)


_GLOBAL = {}


def _inner_through_a_global(h):
    return _GLOBAL["lin2"](h).tanh()


def _outer_through_a_global(h):
    return checkpoint(_inner_through_a_global, h)


def test_nested_checkpoint_under_autograd_grad_writes_no_grad(device):
    lin1, lin2 = _two_linears(device)
    x = ag.tensor(np.ones((2, 3)), device=device, requires_grad=True)
    _GLOBAL["lin2"] = lin2
    try:
        g, = ag.autograd.grad(checkpoint(_outer_through_a_global, lin1(x)).sum(), [x])
    finally:
        _GLOBAL.clear()
    assert g.shape == (2, 3)
    assert all(p.grad is None for p in (*lin1.parameters(), *lin2.parameters()))


# -- the sync debug mode concerns GPU syncs only ----------------------------------------------------------
@pytest.mark.parametrize("mode", ["warn", "error"])
def test_sync_debug_mode_is_silent_on_the_cpu_and_reports_on_a_gpu(device, mode):
    x = ag.arange(6.0, device=device)
    ag.cuda.set_sync_debug_mode(mode)
    try:
        if ag.device(device).type == "cpu":
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                np.testing.assert_array_equal(x[x > 2].numpy(), [3.0, 4.0, 5.0])
                assert F.one_hot(ag.tensor([0, 2])).shape == (2, 3)
        elif mode == "warn":
            with pytest.warns(RuntimeWarning, match="synchronizes"):
                x[x > 2]
        else:
            with pytest.raises(RuntimeError, match="synchronizes"):
                x[x > 2]
    finally:
        ag.cuda.set_sync_debug_mode("default")


# -- two saves in one stream ---------------------------------------------------------------------------
def test_two_saves_into_one_stream_load_back_in_order(device):
    a = ag.tensor([1.0, 2.0], device=device)
    b = {"w": ag.arange(6, device=device).reshape(2, 3), "n": 3}
    buf = io.BytesIO()
    ag.save(a, buf)
    after_a = buf.tell()
    ag.save(b, buf)
    end = buf.tell()
    buf.seek(0)
    got_a = ag.load(buf)
    assert buf.tell() == after_a                     # left after the first object
    got_b = ag.load(buf)
    assert buf.tell() == end
    np.testing.assert_array_equal(got_a.numpy(), [1.0, 2.0])
    assert got_a.device == ag.device(device) and got_b["n"] == 3
    np.testing.assert_array_equal(got_b["w"].numpy(), np.arange(6).reshape(2, 3))


def test_load_reads_from_where_the_stream_is(tmp_path):
    path = tmp_path / "three.ag"
    with open(path, "wb") as f:
        f.write(b"a header of the user's own")
        start = f.tell()
        for i in range(3):
            ag.save({"i": i, "t": ag.full((i + 1,), float(i))}, f)
    with open(path, "rb") as f:
        f.seek(start)
        for i in range(3):
            got = ag.load(f)
            assert got["i"] == i and got["t"].tolist() == [float(i)] * (i + 1)
        assert f.read() == b""
    with open(path, "rb") as f:
        f.seek(start)
        f.read(1)                                      # not at the start of a save: refused, as before
        with pytest.raises(ValueError, match="not an autograd_gpu file"):
            ag.load(f)


def test_a_single_save_in_a_stream_is_unchanged_and_a_damaged_second_one_raises_valueerror():
    buf = io.BytesIO()
    ag.save(ag.ones(3), buf)
    one = buf.getvalue()
    ag.save(ag.zeros(2), buf)
    buf = io.BytesIO(buf.getvalue()[:-10])           # the second save cut short
    assert ag.load(buf).tolist() == [1.0, 1.0, 1.0]
    assert buf.tell() == len(one)
    with pytest.raises(ValueError):
        ag.load(buf)


# -- a zero-size kernel ----------------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda d: F.conv2d(ag.ones(1, 1, 3, 3, device=d), ag.ones(1, 1, 0, 0, device=d)),
    lambda d: F.conv2d(ag.ones(1, 1, 3, 3, device=d), ag.ones(1, 1, 2, 0, device=d), ag.zeros(1, device=d)),
    lambda d: F.conv2d(ag.ones(1, 3, 3, device=d), ag.ones(2, 1, 0, 1, device=d)),
    lambda d: F.conv1d(ag.ones(1, 1, 4, device=d), ag.ones(1, 1, 0, device=d)),
], ids=["conv2d", "conv2d_bias", "conv2d_unbatched", "conv1d"])
def test_convolution_with_a_zero_size_kernel_raises_naming_the_kernel(device, call):
    with pytest.raises(ValueError, match=r"expected a kernel of at least 1.*got a weight of shape .*kernel is"):
        call(device)


# -- empty reductions ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_argmax_argmin_over_a_non_empty_dim_of_an_empty_tensor_is_empty(device, name):
    x = ag.zeros(0, 3, device=device)
    for kwargs, shape in [(dict(dim=1), (0,)), (dict(dim=-1, keepdim=True), (0, 1))]:
        got = getattr(x, name)(**kwargs)
        want = getattr(np.zeros((0, 3)), name)(axis=kwargs["dim"], keepdims=kwargs.get("keepdim", False))
        assert got.shape == want.shape == shape and got.dtype == ag.int64
    got = getattr(ag, name)(ag.zeros(2, 0, 3, device=device), dim=2)
    assert got.shape == (2, 0) and got.device == ag.device(device)


@pytest.mark.parametrize("name", ["argmax", "argmin", "max", "min", "amax", "amin"])
def test_empty_reductions_raise_pytorchs_exception_types(device, name):
    x = ag.zeros(0, 3, device=device)
    op = {"amax": "max", "amin": "min"}.get(name, name)        # aliases report as the op they alias
    with pytest.raises(RuntimeError, match=rf"{op}: cannot reduce an empty tensor"):
        getattr(ag, name)(x)
    with pytest.raises(IndexError, match=r"empty dimension \(dim 0 of shape \(0, 3\)\)"):
        getattr(ag, name)(x, dim=0)
    assert getattr(ag, name)(x, dim=1).shape == (0,)


# -- max/min gradients at NaNs ---------------------------------------------------------------------------
def _grad_of(device, values, f):
    x = ag.tensor(values, dtype=ag.float64, device=device, requires_grad=True)
    f(x).sum().backward()
    return x.grad.numpy()


def test_max_min_send_the_gradient_to_the_nan(device):
    np.testing.assert_array_equal(_grad_of(device, [1.0, NAN, 2.0], ag.max), [0, 1, 0])
    np.testing.assert_array_equal(_grad_of(device, [1.0, NAN, 2.0], ag.min), [0, 1, 0])
    np.testing.assert_array_equal(_grad_of(device, [NAN, 3.0, NAN], ag.max), [0.5, 0, 0.5])   # shared, as ties
    np.testing.assert_array_equal(_grad_of(device, [[1.0, NAN, 5.0], [3.0, 2.0, 3.0]], lambda x: x.max(dim=1)),
                                  [[0, 1, 0], [0.5, 0, 0.5]])
    np.testing.assert_array_equal(_grad_of(device, [[1.0, 4.0], [NAN, 2.0]], lambda x: x.min(dim=0)),
                                  [[0, 0], [1, 1]])
    np.testing.assert_array_equal(_grad_of(device, [1.0, 2.0, 2.0], ag.max), [0, 0.5, 0.5])   # ties unchanged


def test_maximum_minimum_send_the_gradient_to_the_nan_as_pytorch(device):
    one = ag.tensor(1.0, dtype=ag.float64, device=device)
    np.testing.assert_array_equal(_grad_of(device, [NAN, 2.0], lambda x: ag.maximum(x, one)), [1, 1])
    np.testing.assert_array_equal(_grad_of(device, [NAN, 2.0], lambda x: ag.minimum(x, one)), [1, 0])
    # both operands: where either is NaN both get the gradient (PyTorch's masked_fill formula), ties halve it
    a = ag.tensor([NAN, 2.0, 3.0, 1.0, NAN], dtype=ag.float64, device=device, requires_grad=True)
    b = ag.tensor([1.0, NAN, 3.0, 2.0, NAN], dtype=ag.float64, device=device, requires_grad=True)
    ag.maximum(a, b).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), [1, 1, 0.5, 0, 1])
    np.testing.assert_array_equal(b.grad.numpy(), [1, 1, 0.5, 1, 1])


# -- retain_grad and hooks ---------------------------------------------------------------------------------
def test_retain_grad_keeps_the_hooked_gradient_whichever_came_first(device):
    for hook_first in (False, True):
        x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
        y = x * 2
        if hook_first:
            y.register_hook(lambda g: g * 10)
            y.retain_grad()
        else:
            y.retain_grad()
            y.register_hook(lambda g: g * 10)
        y.register_hook(lambda g: g + 1)
        y.sum().backward()
        np.testing.assert_array_equal(y.grad.numpy(), [11.0, 11.0])       # (1 * 10) + 1
        np.testing.assert_array_equal(x.grad.numpy(), [22.0, 22.0])
        assert y.retains_grad


def test_retain_grad_on_the_root_keeps_the_hooked_gradient_and_a_removed_hook_is_gone(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = (x * 3).sum()
    y.retain_grad()
    handle = y.register_hook(lambda g: g * 10)
    y.backward(retain_graph=True)
    assert y.grad.item() == 10.0
    handle.remove()
    y.grad = None
    y.backward()
    assert y.grad.item() == 1.0


# -- conversions (docs/api.md's wording) -------------------------------------------------------------------
def test_float_int_item_of_several_elements_raise_valueerror_bool_runtimeerror(device):
    t = ag.ones(3, device=device)
    for convert in (float, int, complex, lambda v: v.item()):
        with pytest.raises(ValueError, match="one-element"):
            convert(t)
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)
    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    assert "`int(t)`, `complex(t)` (one element; more raises `ValueError`" in text


# -- the examples ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("script", ["train_mlp.py", "train_cnn.py"])
def test_mnist_example_without_the_files_names_the_download_flag(tmp_path, script):
    done = subprocess.run([sys.executable, str(EXAMPLES / script), "--dataset", "mnist", "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "AG_CUDA"})
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert "--download" in done.stderr and "download=True" not in done.stderr
    assert str(tmp_path / "MNIST" / "raw") in done.stderr


def test_mnist_example_with_a_damaged_file_prints_one_line(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                 "t10k-labels-idx1-ubyte"):
        (raw / name).write_bytes(b"not an IDX file")
    done = subprocess.run([sys.executable, str(EXAMPLES / "train_mlp.py"), "--dataset", "mnist", "--root",
                           str(tmp_path)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={k: v for k, v in os.environ.items() if k != "AG_CUDA"})
    assert done.returncode == 1
    assert done.stderr.startswith("error: read_idx:") and "Traceback" not in done.stderr


def test_examples_write_their_plots_under_an_ignored_outputs_folder(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    import runpy
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(sys, "argv", ["fit_sin.py", "--smoke"])
    runpy.run_path(str(EXAMPLES / "fit_sin.py"), run_name="__main__")
    assert "saved outputs/fit_sin.png" in capsys.readouterr().out
    assert (tmp_path / "outputs" / "fit_sin.png").read_bytes()[:4] == b"\x89PNG"
    assert list(tmp_path.iterdir()) == [tmp_path / "outputs"]
    root = EXAMPLES.parent
    ignored = subprocess.run(["git", "check-ignore", "-q", "outputs/mlp_training.png"], cwd=root)
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0
    assert "outputs/mlp_training.png" in (root / "README.md").read_text()
