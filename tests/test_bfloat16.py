"""ag.bfloat16: creation, casting, PyTorch's promotion, float32 accumulation in sums and products,
autograd and optimizers, save/load, DLPack, and autocast(dtype=ag.bfloat16) training the digits MLP.
(The op table runs every float op in bfloat16 too: tests/test_ops.py.)"""
import io

import ml_dtypes
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn as nn
import autograd_gpu.nn.functional as F

bf16 = ag.bfloat16


def _bits_round(values):
    """values rounded to bfloat16 (round to nearest even), as float64: the expected stored values."""
    return np.asarray(values, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def test_bfloat16_is_ml_dtypes_numpy_dtype():
    assert bf16 == np.dtype(ml_dtypes.bfloat16) and str(bf16) == "bfloat16"
    assert ag.tensor([1.0], dtype="bfloat16").dtype == bf16
    assert "dtype=bfloat16" in repr(ag.ones(2, dtype=bf16))


@pytest.mark.parametrize("make", [
    lambda d: ag.tensor([1.1, 2.2, 3.3], dtype=bf16, device=d),
    lambda d: ag.zeros(2, 3, dtype=bf16, device=d),
    lambda d: ag.ones(4, dtype=bf16, device=d),
    lambda d: ag.full((2,), 0.1, dtype=bf16, device=d),
    lambda d: ag.arange(5, dtype=bf16, device=d),
    lambda d: ag.randn(3, 3, dtype=bf16, device=d),
    lambda d: ag.rand(3, dtype=bf16, device=d),
    lambda d: ag.empty(2, dtype=bf16, device=d),
    lambda d: ag.zeros_like(ag.ones(2, device=d), dtype=bf16),
    lambda d: ag.ones(3, device=d).to(bf16),
    lambda d: ag.ones(3, device=d).bfloat16(),
    lambda d: ag.ones(3, dtype=ag.float64, device=d).to(d, bf16),
], ids=["tensor", "zeros", "ones", "full", "arange", "randn", "rand", "empty", "zeros_like", "to", "method",
        "to_device_dtype"])
def test_creation_and_casts_give_bfloat16(make, device):
    t = make(device)
    assert t.dtype == bf16 and t.device == ag.device(device)


def test_casting_rounds_to_nearest_and_widening_is_exact(device):
    values = [0.1, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -3.14159, 1e30, 65504.0 * 4]
    t = ag.tensor(values, device=device).to(bf16)
    np.testing.assert_array_equal(t.float().numpy(), _bits_round(values))
    assert t.to(ag.float64).dtype == ag.float64
    np.testing.assert_array_equal(t.to(ag.float64).numpy(), _bits_round(values))
    assert ag.tensor(1.5, dtype=bf16, device=device).item() == 1.5


def test_python_numbers_keep_bfloat16(device):
    x = ag.tensor([1.0, 2.0, 3.0], dtype=bf16, device=device)
    for y in (x * 1.5, 1.5 * x, x / 3, 3 / x, x + 1, x - 0.25, x ** 2, -x, x.clamp(0.5, 2.5), ag.where(x > 1, x, 0.0)):
        assert y.dtype == bf16


@pytest.mark.parametrize("other, expected", [
    (ag.float32, ag.float32), (ag.float64, ag.float64), (ag.float16, ag.float32),
    (ag.int64, bf16), (ag.int32, bf16), (ag.uint8, bf16), (ag.bool_, bf16), (ag.complex64, ag.complex64)])
def test_promotion_follows_pytorch(other, expected, device):
    x = ag.ones(3, dtype=bf16, device=device)
    y = ag.ones(3, device=device).to(other)
    assert ag.dtypes.result_type(bf16, other) == expected
    assert (x + y).dtype == expected and (y * x).dtype == expected


def test_sums_and_means_accumulate_in_float32(device):
    # 4096 * 0.01 added in bfloat16 stalls near 8 (the step there exceeds 0.01); float32 accumulation
    # gives the rounded true sum
    x = ag.full((4096,), 0.01, dtype=bf16, device=device)
    total = float(np.float32(ml_dtypes.bfloat16(0.01))) * 4096
    assert x.sum().dtype == bf16
    assert x.sum().item() == pytest.approx(total, rel=2 ** -8)
    assert x.mean().item() == pytest.approx(total / 4096, rel=2 ** -8)
    assert x.cumsum(0)[-1].item() == pytest.approx(total, rel=2 ** -8)
    assert ag.full((10,), 1.1, dtype=bf16, device=device).prod().item() == pytest.approx(
        float(np.float32(ml_dtypes.bfloat16(1.1))) ** 10, rel=2 ** -8)
    assert x.reshape(64, 64).sum(dim=1).float().numpy() == pytest.approx(np.full(64, total / 64), rel=2 ** -8)


def test_matmul_accumulates_in_float32_and_rounds_once(device):
    a = ag.full((2, 4096), 0.01, dtype=bf16, device=device)
    b = ag.ones(4096, 3, dtype=bf16, device=device)
    y = a @ b
    assert y.dtype == bf16
    expected = _bits_round(float(np.float32(ml_dtypes.bfloat16(0.01))) * 4096)
    np.testing.assert_array_equal(y.float().numpy(), np.full((2, 3), expected))
    assert F.linear(a, b.T).dtype == bf16


def test_broadcast_gradient_is_summed_in_float32(device):
    w = ag.zeros(1, 8, dtype=bf16, device=device, requires_grad=True)
    x = ag.full((4096, 8), 0.01, dtype=bf16, device=device)
    (x + w).float().sum().backward()
    assert w.grad.dtype == bf16
    np.testing.assert_array_equal(w.grad.float().numpy(), np.full((1, 8), 4096.0))


def test_gradients_and_optimizer_steps_stay_bfloat16(device):
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).to(device=device, dtype=bf16)
    opts = [ag.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), ag.optim.Adam(model.parameters(), lr=1e-2)]
    x = ag.randn(16, 4, device=device).to(bf16)
    y = ag.randint(0, 3, (16,), device=device)
    for opt in opts:
        before = [p.detach().clone() for p in model.parameters()]
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        for p, b in zip(model.parameters(), before):
            assert p.dtype == bf16 and p.grad.dtype == bf16
            assert not np.array_equal(p.float().numpy(), b.float().numpy())


class _Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x)[0]


LAYERS = {
    "activations": (lambda: nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Sigmoid(), nn.Linear(8, 8),
                                          nn.GELU(), nn.Linear(8, 8), nn.SiLU(), nn.Linear(8, 8), nn.ReLU()),
                    lambda d: ag.randn(3, 4, device=d)),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(4), nn.Flatten(),
                                  nn.Linear(36, 2)),
            lambda d: ag.randn(2, 1, 8, 8, device=d)),
    "layer_norm": (lambda: nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.Linear(8, 3)),
                   lambda d: ag.randn(3, 4, device=d)),
    "embedding": (lambda: nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 2)),
                  lambda d: ag.tensor([[1, 2], [3, 4]], device=d)),
    "lstm": (lambda: nn.LSTM(4, 6, batch_first=True), lambda d: ag.randn(2, 3, 4, device=d)),
    "gru": (lambda: nn.GRU(4, 6, batch_first=True), lambda d: ag.randn(2, 3, 4, device=d)),
    "attention": (_Attention, lambda d: ag.randn(2, 3, 8, device=d)),
    "transformer": (lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
                    lambda d: ag.randn(2, 3, 8, device=d)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layers_run_and_train_in_bfloat16_close_to_float32(name, device):
    """A bfloat16 copy of each model gives bfloat16 outputs and gradients close to its float32 twin on
    the same (rounded) weights and inputs, and every optimizer steps it (no CUDA kernel gets bfloat16:
    the stand-in refuses them)."""
    make, inputs = LAYERS[name]
    ag.manual_seed(0)
    wide = make().to(device)
    with ag.no_grad():
        for p in wide.parameters():
            p.copy_(p.to(bf16).float())
    low = make().to(device)
    low.load_state_dict(wide.state_dict())
    low.to(bf16)
    x = inputs(device)
    if x.dtype == ag.float32:
        x = x.to(bf16).float()
    outs = []
    for model, xi in ((wide, x), (low, x.to(bf16) if x.dtype == ag.float32 else x)):
        out = model(xi)
        out = out[0] if isinstance(out, tuple) else out
        out.float().sum().backward()
        outs.append(out)
    assert outs[1].dtype == bf16
    scale = float(np.abs(outs[0].detach().numpy()).max()) + 1.0
    np.testing.assert_allclose(outs[1].float().detach().numpy(), outs[0].detach().numpy(), rtol=0.05, atol=0.05 * scale)
    for (n, pw), pl in zip(wide.named_parameters(), low.parameters()):
        assert pl.grad.dtype == bf16, n
        gscale = float(np.abs(pw.grad.numpy()).max()) + 1e-3
        np.testing.assert_allclose(pl.grad.float().numpy(), pw.grad.numpy(), rtol=0.1, atol=0.1 * gscale, err_msg=n)
    for opt in (ag.optim.SGD, ag.optim.Adam, ag.optim.AdamW, ag.optim.RMSprop, ag.optim.Adagrad):
        opt(low.parameters(), lr=1e-3).step()
    assert all(p.dtype == bf16 and np.isfinite(p.float().detach().numpy()).all() for p in low.parameters())


def test_requires_grad_and_default_dtype():
    assert ag.ones(2, dtype=bf16).requires_grad_().requires_grad
    ag.set_default_dtype(bf16)
    try:
        assert ag.tensor([1.5]).dtype == bf16 and ag.zeros(2).dtype == bf16
    finally:
        ag.set_default_dtype(ag.float32)


def test_ag_save_and_load_keep_bfloat16(tmp_path, device):
    x = ag.randn(3, 4, device=device).to(bf16).requires_grad_()
    ag.save({"x": x, "s": ag.tensor(0.1, dtype=bf16)}, tmp_path / "bf.agt")
    got = ag.load(tmp_path / "bf.agt")
    assert got["x"].dtype == bf16 and got["x"].requires_grad and got["x"].device == ag.device(device)
    np.testing.assert_array_equal(got["x"].float().numpy(), x.float().numpy())
    assert got["s"].shape == () and got["s"].dtype == bf16


def test_safetensors_keep_bfloat16(device):
    pytest.importorskip("safetensors")
    x = ag.randn(5, device=device).to(bf16)
    got = ag.safetensors.load(ag.safetensors.save({"x": x}), device=device)["x"]
    assert got.dtype == bf16
    np.testing.assert_array_equal(got.float().numpy(), x.float().numpy())


def test_torch_bfloat16_through_dlpack_says_what_works():
    torch = pytest.importorskip("torch")
    t = torch.linspace(-2, 2, 7, dtype=torch.bfloat16)
    with pytest.raises(TypeError, match=r"NumPy's DLPack has no bfloat16.*ag\.from_numpy\(t\.view\(torch\.int16\)"):
        ag.from_dlpack(t)
    shared = ag.from_numpy(t.view(torch.int16).numpy().view(ag.bfloat16))      # the route the error names
    assert shared.dtype == bf16
    np.testing.assert_array_equal(shared.float().numpy(), t.float().numpy())
    x = ag.tensor(t.float().numpy(), dtype=bf16)
    with pytest.raises(BufferError, match="cannot export bfloat16"):
        torch.from_dlpack(x)
    back = torch.from_numpy(x.numpy().view("int16")).view(torch.bfloat16)
    assert torch.equal(back, t)
    assert torch.equal(torch.from_dlpack(x.float()).bfloat16(), t)


def test_ops_without_bfloat16_raise_type_error():
    x = ag.eye(3, dtype=bf16)
    with pytest.raises(TypeError, match="expected a float32 or float64 tensor, got bfloat16"):
        ag.linalg.inv(x)
    with pytest.raises(TypeError, match="bfloat16 input is not supported"):
        ag.fft.rfft(x)


# --------------------------------------------------------------------------- autocast
def _dev_type(device):
    return "cpu" if device == "cpu" else "cuda"


def test_autocast_bfloat16_casts_products_down_and_precision_ops_up(device):
    lin = nn.Linear(4, 3).to(device)
    x = ag.randn(2, 4, device=device)
    with ag.amp.autocast(_dev_type(device), dtype=bf16):
        assert ag.amp.get_autocast_dtype(_dev_type(device)) == bf16
        y = lin(x)
        assert y.dtype == bf16 and (x @ x.T).dtype == bf16
        p = F.softmax(y, dim=1)
        assert p.dtype == ag.float32
        loss = F.cross_entropy(y, ag.tensor([0, 2], device=device))
    assert loss.dtype == ag.float32
    loss.backward()
    assert lin.weight.grad.dtype == ag.float32      # float32 parameters get float32 gradients


def test_autocast_refuses_other_low_dtypes():
    with pytest.raises(ValueError, match="expected float16 or bfloat16"):
        ag.amp.autocast("cpu", dtype=ag.float64)


def test_autocast_bfloat16_trains_digits_mlp_to_float32_accuracy(device):
    def train(amp):
        ag.manual_seed(0)
        xtr, ytr = ag.data.datasets.load_digits(device=device, split="train")
        xte, yte = ag.data.datasets.load_digits(device=device, split="test")
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)).to(device)
        opt = ag.optim.Adam(model.parameters(), lr=3e-3)
        loader = ag.data.DataLoader(ag.data.TensorDataset(xtr, ytr), batch_size=64, shuffle=True)
        for _ in range(10):
            for xb, yb in loader:
                with ag.amp.autocast(_dev_type(device), dtype=bf16, enabled=amp):
                    logits = model(xb)
                    loss = F.cross_entropy(logits, yb)
                assert logits.dtype == (bf16 if amp else ag.float32)
                opt.zero_grad()
                loss.backward()                  # bfloat16 has float32's range: no GradScaler
                opt.step()
        with ag.no_grad():
            return float((model(xte).argmax(dim=1) == yte).float().mean().item())
    full, mixed = train(False), train(True)
    assert full > 0.93 and mixed >= full - 0.015


def test_bfloat16_state_dict_roundtrip_through_bytes():
    m = nn.Linear(3, 2).to(bf16)
    buf = io.BytesIO()
    ag.save(m.state_dict(), buf)
    buf.seek(0)
    m2 = nn.Linear(3, 2).to(bf16)
    m2.load_state_dict(ag.load(buf))
    np.testing.assert_array_equal(m2.weight.float().numpy(), m.weight.float().numpy())
