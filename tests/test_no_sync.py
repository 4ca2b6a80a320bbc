"""A training step on "cuda" never makes the host wait for the device, and bad input still raises.

On the CuPy stand-in every device-to-host transfer is counted, so these tests say exactly how many a
step makes (0) and how many reading the loss makes (1). On a real GPU they run the same steps under
``ag.cuda.set_sync_debug_mode("error")``, which raises on every sync the library declares."""
import os
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
import autograd_gpu.nn.functional as F
from autograd_gpu.backends import cupy_backend

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture
def cuda():
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs these on the CuPy stand-in)")
    d = os.environ.get("AG_CUDA_DEVICE", "cuda")     # the GPU the `gpu` tests run on (conftest.py)
    ag.cuda.set_device(d)
    return d


class transfers:
    """Counts device-to-host transfers on the stand-in (``d2h`` is None on a real GPU), with the sync
    debug mode set to "error" inside, so a declared implicit sync raises on either."""

    def __enter__(self):
        self.d2h, self._log = None, None
        if cupy_backend.simulated():
            from autograd_gpu.testing.cupy_standin import count_transfers
            self._counter = count_transfers()
            self._log = self._counter.__enter__()
        ag.cuda.set_sync_debug_mode("error")
        return self

    def __exit__(self, *exc):
        ag.cuda.set_sync_debug_mode("default")
        if self._log is not None:
            self._counter.__exit__(*exc)
            self.d2h, self.events = self._log.d2h, self._log.events

    def assert_count(self, n):
        if self.d2h is not None:
            assert self.d2h == n, f"expected {n} device-to-host transfers, got {self.d2h}: {self.events}"


def _mlp_batch(device):
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5)).to(device)
    x = ag.randn(16, 20, device=device)
    y = ag.randint(0, 5, (16,), device=device)
    return model, x, y


def _train_step(model, opt, loss_fn, clip=None):
    opt.zero_grad()
    loss = loss_fn(model)
    loss.backward()
    if clip is not None:
        nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss


@pytest.mark.device_index
def test_mlp_adam_step_with_clipping_makes_no_transfer_and_item_makes_one(cuda):
    model, x, y = _mlp_batch(cuda)
    opt = optim.Adam(model.parameters(), lr=1e-3)
    _train_step(model, opt, lambda m: F.cross_entropy(m(x), y), clip=1.0)      # warm-up: state made
    with transfers() as t:
        loss = _train_step(model, opt, lambda m: F.cross_entropy(m(x), y), clip=1.0)
    t.assert_count(0)
    with transfers() as t:
        value = loss.item()
    t.assert_count(1)
    assert np.isfinite(value)


@pytest.mark.device_index
def test_cnn_sgd_momentum_step_makes_no_transfer(cuda):
    ag.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Dropout(0.1), nn.Linear(4 * 4 * 4, 3)).to(cuda)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4)
    x = ag.randn(8, 1, 8, 8, device=cuda)
    y = ag.randint(0, 3, (8,), device=cuda)
    for _ in range(2):                          # the second step uses the momentum buffers
        with transfers() as t:
            loss = _train_step(model, opt, lambda m: F.cross_entropy(m(x), y, label_smoothing=0.1), clip=5.0)
        t.assert_count(0)
    with transfers() as t:
        assert np.isfinite(loss.item())
    t.assert_count(1)


@pytest.mark.device_index
def test_embedding_nll_and_bce_steps_make_no_transfer(cuda):
    ag.manual_seed(0)
    emb = nn.Embedding(10, 6, padding_idx=0).to(cuda)
    head = nn.Linear(6, 4).to(cuda)
    opt = optim.RMSprop(list(emb.parameters()) + list(head.parameters()), lr=1e-2)
    tokens = ag.randint(0, 10, (5, 7), device=cuda)
    target = ag.randint(0, 4, (5,), device=cuda)
    probs_target = ag.rand(5, 4, device=cuda).round()
    with transfers() as t:
        opt.zero_grad()
        h = emb(tokens).mean(dim=1)
        logits = head(h)
        loss = (F.nll_loss(F.log_softmax(logits, dim=1), target)
                + F.binary_cross_entropy(ag.sigmoid(logits), probs_target)
                + F.binary_cross_entropy_with_logits(logits, probs_target))
        loss.backward()
        opt.step()
    t.assert_count(0)
    with transfers() as t:
        loss.item()
    t.assert_count(1)


@pytest.mark.parametrize("make_bad, exc, op", [
    (lambda d: F.cross_entropy(ag.randn(4, 3, device=d), ag.tensor([0, 1, 3, 2], device=d)), IndexError,
     "cross_entropy"),
    (lambda d: F.nll_loss(ag.randn(4, 3, device=d), ag.tensor([0, -1, 2, 2], device=d)), IndexError, "nll_loss"),
    (lambda d: F.embedding(ag.tensor([[1, 10]], device=d), ag.randn(10, 2, device=d)), IndexError, "embedding"),
    (lambda d: F.binary_cross_entropy(ag.tensor([0.5, 1.5], device=d), ag.tensor([0.0, 1.0], device=d)),
     ValueError, "binary_cross_entropy"),
])
@pytest.mark.device_index
def test_bad_labels_raise_naming_the_op_at_the_next_read(cuda, make_bad, exc, op):
    with transfers() as t:
        loss = make_bad(cuda)                   # checked on the device: no sync here
    t.assert_count(0)
    with pytest.raises(exc, match=op):
        loss.sum().item()
    assert np.isfinite(ag.ones(1, device=cuda).sum().item())    # reported once, then cleared


@pytest.mark.device_index
def test_bad_labels_raise_at_synchronize_too(cuda):
    F.cross_entropy(ag.randn(2, 3, device=cuda), ag.tensor([0, 7], device=cuda))
    with pytest.raises(IndexError, match="cross_entropy: .*7"):
        ag.cuda.synchronize()


@pytest.mark.parametrize("read", [lambda t: t.cpu(), lambda t: t.to("cpu"), lambda t: t.tolist()],
                         ids=["cpu", "to_cpu", "tolist"])
@pytest.mark.device_index
def test_bad_labels_raise_when_the_result_is_moved_to_the_cpu(cuda, read):
    """.cpu() / .to("cpu") read the device as .numpy() does: a pending device-side check raises there."""
    loss = F.cross_entropy(ag.randn(2, 3, device=cuda), ag.tensor([0, 7], device=cuda), reduction="none")
    with pytest.raises(IndexError, match="cross_entropy: .*7"):
        read(loss)
    assert read(ag.ones(2, device=cuda)) is not None                # reported once, then cleared


@pytest.mark.device_index
def test_declared_syncs_warn_or_raise_by_mode(cuda):
    x = ag.arange(6.0, device=cuda)
    mask = x > 2
    assert x[mask].shape == (3,)                # default: allowed silently
    ag.cuda.set_sync_debug_mode("warn")
    with pytest.warns(RuntimeWarning, match="boolean mask"):
        x[mask]
    ag.cuda.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="boolean mask.*synchronizes"):
        x[mask]
    assert x.sum().item() == 15.0 and x.numpy().shape == (6,) and x.tolist()[0] == 0.0   # explicit reads
    ag.cuda.synchronize()
    assert "Tensor(" in repr(x)


def test_sync_debug_mode_values():
    for mode in ("default", "warn", "error"):
        ag.cuda.set_sync_debug_mode(mode)
        assert ag.cuda.get_sync_debug_mode() == mode
    ag.cuda.set_sync_debug_mode(1)
    assert ag.cuda.get_sync_debug_mode() == "warn"
    with pytest.raises(ValueError, match="'default', 'warn', 'error'"):
        ag.cuda.set_sync_debug_mode("loud")
    ag.cuda.set_sync_debug_mode("default")


@pytest.mark.device_index
def test_train_mlp_example_runs_an_epoch_under_sync_error_mode(cuda, monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(sys, "argv", ["train_mlp.py", "--device", cuda, "--epochs", "1",
                                      "--out", str(tmp_path / "mlp.png")])
    ag.cuda.set_sync_debug_mode("error")
    runpy.run_path(str(EXAMPLES / "train_mlp.py"), run_name="__main__")
    assert "test accuracy" in capsys.readouterr().out


@pytest.mark.device_index
def test_bool_scalar_indices_are_declared_syncs(cuda):
    x = ag.arange(6.0, device=cuda).reshape(2, 3).requires_grad_()
    ag.cuda.set_sync_debug_mode("error")
    for index in (True, False, (True, 0), (Ellipsis, False)):
        with pytest.raises(RuntimeError, match="boolean scalar index"):
            x[index]
    ag.cuda.set_sync_debug_mode("default")
    y = x[True]
    assert y.shape == (1, 2, 3) and x[False].shape == (0, 2, 3)
    y.sum().backward()
    assert x.grad.tolist() == [[1.0] * 3] * 2
