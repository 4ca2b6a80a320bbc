"""Leftovers of the breadth audits: avg_pool's per-window divisor is built on the device (no host-to-device
copy, forward or backward, on the CuPy stand-in); smooth_l1_loss's negative beta and huber_loss's non-positive
delta raise RuntimeError as PyTorch; the pooling family, fold/unfold and pixel_(un)shuffle take PyTorch's
unbatched forms with PyTorch's results and raise RuntimeError, as PyTorch, for an input of the wrong rank."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu import nn

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(9)


# --------------------------------------------------------------------------- avg_pool's divisor
AVG = {
    "2d_exclude_pad_ceil": (lambda f, x: f.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                            (2, 3, 6, 5)),
    "2d_exclude_pad": (lambda f, x: f.avg_pool2d(x, (3, 2), (2, 1), (1, 1), count_include_pad=False), (1, 2, 5, 4)),
    "2d_include_pad_ceil": (lambda f, x: f.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (1, 2, 6, 6)),
    "1d_exclude_pad_ceil": (lambda f, x: f.avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                            (2, 3, 8)),
}


@pytest.mark.parametrize("name", sorted(AVG))
def test_avg_pool_divisors_match_torch(name, device):
    call, shape = AVG[name]
    a = RNG.standard_normal(shape)
    t = torch.tensor(a, requires_grad=True)
    x = ag.tensor(a, device=device, requires_grad=True)
    ref, got = call(TF, t), call(F, x)
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    g = RNG.standard_normal(tuple(ref.shape))
    (ref * torch.tensor(g)).sum().backward()
    (got * ag.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)



@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(AVG))
def test_avg_pool_copies_nothing_from_the_host_forward_or_backward(name, standin):
    """The divisor table is built by device kernels, also on the first call of a geometry (cache emptied)."""
    from autograd_gpu.ops.nn.conv import _inverse_divisors
    call, shape = AVG[name]
    x = ag.tensor(RNG.standard_normal(shape), device="cuda", requires_grad=True)
    for _ in range(2):                  # a fresh geometry, then the kept table
        _inverse_divisors.cache_clear() if _ == 0 else None
        with standin.count_transfers() as transfers:
            call(F, x).sum().backward()
        assert (transfers.h2d, transfers.d2h) == (0, 0), transfers.events


# --------------------------------------------------------------------------- losses
@pytest.mark.parametrize("call", [
    lambda f, x: f.smooth_l1_loss(x, x, beta=-0.5),
    lambda f, x: f.huber_loss(x, x, delta=-1.0),
    lambda f, x: f.huber_loss(x, x, delta=0.0),
], ids=["smooth_l1_negative_beta", "huber_negative_delta", "huber_zero_delta"])
def test_loss_parameter_errors_are_runtime_errors_as_torch(call):
    with pytest.raises(RuntimeError):
        call(TF, torch.zeros(3))
    with pytest.raises(RuntimeError, match=r"(beta must be non-negative|delta must be positive), got"):
        call(F, ag.zeros(3))
    with pytest.raises(RuntimeError, match="beta must be non-negative"):
        nn.SmoothL1Loss(beta=-1.0)(ag.zeros(3), ag.zeros(3))


# --------------------------------------------------------------------------- unbatched forms and ranks
# name -> (call(F or torch.nn.functional, x), an unbatched input shape, wrong-rank shapes)
UNBATCHED = {
    "max_pool1d": (lambda f, x: f.max_pool1d(x, 3, 2, 1), (3, 7), [(7,), (1, 2, 3, 7)]),
    "max_pool2d": (lambda f, x: f.max_pool2d(x, 2, padding=1), (3, 5, 4), [(5, 4), (1, 1, 3, 5, 4)]),
    "max_pool2d_indices": (lambda f, x: f.max_pool2d(x, 2, return_indices=True)[1], (2, 4, 5), []),
    "max_pool1d_indices": (lambda f, x: f.max_pool1d(x, 2, return_indices=True)[1], (2, 6), []),
    "avg_pool1d": (lambda f, x: f.avg_pool1d(x, 3, 2, 1, count_include_pad=False), (3, 8), [(8,), (1, 2, 3, 8)]),
    "avg_pool2d": (lambda f, x: f.avg_pool2d(x, 3, 2, 1, ceil_mode=True), (2, 6, 5), [(6, 5), (1, 1, 2, 6, 5)]),
    "adaptive_avg_pool1d": (lambda f, x: f.adaptive_avg_pool1d(x, 3), (2, 7), [(7,), (1, 1, 2, 7)]),
    "adaptive_avg_pool2d": (lambda f, x: f.adaptive_avg_pool2d(x, (2, 3)), (2, 5, 7), [(5, 7), (1, 1, 2, 5, 7)]),
    "adaptive_max_pool2d": (lambda f, x: f.adaptive_max_pool2d(x, (2, 3)), (2, 5, 7), [(5, 7), (1, 1, 2, 5, 7)]),
    "unfold": (lambda f, x: f.unfold(x, 2, padding=1, stride=2), (2, 4, 5), [(4, 5), (1, 1, 2, 4, 5)]),
    "fold": (lambda f, x: f.fold(x, (3, 4), 2), (8, 6), [(48,), (1, 1, 8, 6)]),
    "pixel_shuffle": (lambda f, x: f.pixel_shuffle(x, 2), (8, 2, 3), [(8, 3)]),
    "pixel_unshuffle": (lambda f, x: f.pixel_unshuffle(x, 2), (2, 4, 6), [(4, 6)]),
}


@pytest.mark.parametrize("name", sorted(UNBATCHED))
def test_unbatched_input_matches_torch(name, device):
    call, shape, _ = UNBATCHED[name]
    a = RNG.standard_normal(shape)
    t = torch.tensor(a, requires_grad=True)
    x = ag.tensor(a, device=device, requires_grad=True)
    ref, got = call(TF, t), call(F, x)
    assert got.shape == tuple(ref.shape)
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    if ref.requires_grad:
        g = RNG.standard_normal(tuple(ref.shape))
        (ref * torch.tensor(g)).sum().backward()
        (got * ag.tensor(g, device=device)).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, shape", [(n, s) for n in sorted(UNBATCHED) for s in UNBATCHED[n][2]])
def test_an_input_of_the_wrong_rank_raises_runtime_error(name, shape):
    """PyTorch's checks raise RuntimeError (a too-short input sometimes fails its dim wrap first, an
    IndexError, or a Python-level check, a ValueError); here always RuntimeError, naming the op and the
    ranks it takes."""
    call = UNBATCHED[name][0]
    # (torch's adaptive pools check a tuple output_size against the rank in Python first: a ValueError)
    with pytest.raises((RuntimeError, IndexError, ValueError)):
        call(TF, torch.zeros(shape))
    with pytest.raises(RuntimeError, match=rf"{name.split('_indices')[0]}: expected .*got shape"):
        call(F, ag.zeros(shape))


@pytest.mark.parametrize("make, tmake, shape", [
    (lambda: nn.MaxPool2d(2), lambda: torch.nn.MaxPool2d(2), (2, 4, 6)),
    (lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False),
     lambda: torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 5, 5)),
    (lambda: nn.AvgPool1d(2), lambda: torch.nn.AvgPool1d(2), (3, 6)),
    (lambda: nn.AdaptiveAvgPool2d((2, 2)), lambda: torch.nn.AdaptiveAvgPool2d((2, 2)), (2, 5, 3)),
    (lambda: nn.Fold((3, 3), 2), lambda: torch.nn.Fold((3, 3), 2), (8, 4)),
    (lambda: nn.Unfold(2), lambda: torch.nn.Unfold(2), (2, 3, 3)),
    (lambda: nn.PixelShuffle(2), lambda: torch.nn.PixelShuffle(2), (4, 2, 2)),
], ids=["MaxPool2d", "AvgPool2d", "AvgPool1d", "AdaptiveAvgPool2d", "Fold", "Unfold", "PixelShuffle"])
def test_layers_take_unbatched_inputs_as_torch(make, tmake, shape):
    a = RNG.standard_normal(shape)
    np.testing.assert_allclose(make()(ag.tensor(a)).numpy(), tmake()(torch.tensor(a)).numpy(), rtol=1e-12,
                               atol=1e-12)
