"""interpolate's linear, cubic, area and antialias modes keep a NaN or inf local, as PyTorch's kernels: an input
pixel reaches only the outputs whose taps read it (it spread along its whole row and column through a dense
resampling matrix, 0 * NaN), and a NaN in the gradient reaches only the inputs that output read. Both ways of
applying a dim's taps (the gather, and on the CPU the dense product for a finite operand) against PyTorch and
each other, gradients of the gradient, vmap; grid_sample's nearest mode twice differentiable; argument checks."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu.ops.nn import resample as R

torch = pytest.importorskip("torch")
TF = torch.nn.functional

# (shape, kwargs): each interpolating mode, up and down, align_corners both ways
CASES = [
    ((2, 3, 9), dict(size=17, mode="linear")),
    ((2, 3, 9), dict(size=4, mode="linear", align_corners=True)),
    ((1, 2, 7, 6), dict(size=(13, 11), mode="bilinear")),
    ((1, 2, 7, 6), dict(scale_factor=0.5, mode="bilinear", align_corners=True)),
    ((1, 2, 7, 6), dict(size=(12, 5), mode="bicubic")),
    ((1, 2, 7, 6), dict(size=(3, 13), mode="bicubic", align_corners=True)),
    ((1, 2, 4, 5, 6), dict(size=(7, 3, 9), mode="trilinear")),
    ((1, 2, 4, 5, 6), dict(size=(2, 3, 4), mode="area")),
    ((2, 3, 11), dict(size=4, mode="area")),
    ((1, 2, 13, 11), dict(size=(4, 5), mode="bilinear", antialias=True)),
    ((1, 2, 13, 11), dict(size=(5, 3), mode="bicubic", antialias=True)),
    ((1, 2, 6, 5), dict(size=(11, 9), mode="bicubic", antialias=True, align_corners=True)),
]


def _specials(shape, seed=0, infs=True):
    x = np.random.default_rng(seed).standard_normal(shape)
    flat = x.reshape(-1)
    flat[flat.size // 3] = np.nan
    flat[(2 * flat.size) // 3] = np.inf if infs else np.nan
    flat[-2] = -np.inf if infs else np.nan
    return x


@pytest.fixture(params=["auto", "gather", "dense"])
def path(request, monkeypatch):
    """auto: the CPU's choice by size; gather / dense: that way for every finite operand (a non-finite one is
    always gathered)."""
    if request.param == "gather":
        monkeypatch.setattr(R, "_TAP_COST_LAST", 0)
        monkeypatch.setattr(R, "_TAP_COST", 0)
    elif request.param == "dense":
        monkeypatch.setattr(R, "_TAP_COST_LAST", 10 ** 9)
        monkeypatch.setattr(R, "_TAP_COST", 10 ** 9)
    return request.param


@pytest.mark.parametrize("shape, kw", CASES)
def test_nan_and_inf_input_stay_local_as_pytorch(shape, kw, path, device):
    x = _specials(shape)
    got = F.interpolate(ag.tensor(x, device=device), **kw).numpy()
    ref = TF.interpolate(torch.tensor(x), **kw).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape, kw", CASES)
def test_nan_gradient_stays_local_as_pytorch(shape, kw, path, device):
    x = np.random.default_rng(1).standard_normal(shape)
    xa, xt = ag.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = F.interpolate(xa, **kw), TF.interpolate(xt, **kw)
    # NaNs only: an inf gradient through the two separable passes meets zero weights (inf * 0) in an order
    # that differs from PyTorch's (which pass runs first), though it stays as local
    g = _specials(tuple(yt.shape), seed=2, infs=False)
    ya.backward(ag.tensor(g, device=device))
    yt.backward(torch.tensor(g))
    ref = xt.grad.numpy()
    np.testing.assert_array_equal(np.isnan(xa.grad.numpy()), np.isnan(ref))
    np.testing.assert_allclose(xa.grad.numpy(), ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(scale_factor=2, mode="bilinear"), dict(size=(9, 31), mode="bicubic"),
                                dict(size=(5, 7), mode="bicubic", antialias=True)])
def test_one_nan_pixel_reaches_a_few_outputs(kw, path, device):
    x = np.random.default_rng(0).standard_normal((2, 3, 12, 16))
    x[1, 2, 5, 7] = np.nan
    y = F.interpolate(ag.tensor(x, device=device), **kw).numpy()
    bad = np.argwhere(np.isnan(y))
    assert 0 < len(bad) <= 64 and (bad[:, :2] == (1, 2)).all(), bad


@pytest.mark.parametrize("shape, kw", CASES)
def test_finite_values_and_gradients_as_pytorch(shape, kw, path, device):
    x = np.random.default_rng(3).standard_normal(shape)
    xa, xt = ag.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = F.interpolate(xa, **kw), TF.interpolate(xt, **kw)
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    g = np.random.default_rng(4).standard_normal(tuple(yt.shape))
    ya.backward(ag.tensor(g, device=device))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_large_input_nan_local_and_gradient_as_pytorch_float32():
    """A size where the CPU gathers even a finite operand: values and gradients in float32 against PyTorch's."""
    x = _specials((1, 2, 300, 260)).astype(np.float32)
    for kw in (dict(scale_factor=2, mode="bilinear"), dict(scale_factor=0.25, mode="bilinear", antialias=True),
               dict(size=(301, 97), mode="bicubic")):
        got = F.interpolate(ag.tensor(x), **kw).numpy()
        ref = TF.interpolate(torch.tensor(x), **kw).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-5)
        xf = np.nan_to_num(x, nan=0.5, posinf=1.0, neginf=-1.0)
        xa, xt = ag.tensor(xf, requires_grad=True), torch.tensor(xf, requires_grad=True)
        ya, yt = F.interpolate(xa, **kw), TF.interpolate(xt, **kw)
        g = np.random.default_rng(5).standard_normal(tuple(yt.shape)).astype(np.float32)
        ya.backward(ag.tensor(g))
        yt.backward(torch.tensor(g))
        np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("kw", [dict(size=(5, 7), mode="bilinear"), dict(size=(3, 8), mode="bicubic",
                                                                        align_corners=True),
                                dict(size=(2, 3), mode="bicubic", antialias=True), dict(size=(3, 2), mode="area")])
def test_gradgradcheck_both_paths(kw, path, device):
    x = ag.tensor(np.random.default_rng(6).standard_normal((1, 2, 4, 5)), device=device, requires_grad=True)
    assert ag.autograd.gradcheck(lambda t: F.interpolate(t, **kw), (x,))
    assert ag.autograd.gradgradcheck(lambda t: F.interpolate(t, **kw), (x,))


@pytest.mark.parametrize("kw", [dict(size=(5, 7), mode="bilinear"), dict(size=(2, 3), mode="bicubic",
                                                                        antialias=True)])
def test_vmap_matches_a_loop(kw, path, device):
    x = ag.tensor(np.random.default_rng(7).standard_normal((3, 2, 2, 4, 5)), device=device)
    got = ag.func.vmap(lambda t: F.interpolate(t, **kw))(x)
    ref = np.stack([F.interpolate(x[i], **kw).numpy() for i in range(3)])
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-12, atol=1e-12)
    # the gradient's vmap: a batch of cotangents through the adjoint
    xs = ag.tensor(np.random.default_rng(8).standard_normal((2, 2, 4, 5)), device=device, requires_grad=True)
    y = F.interpolate(xs, **kw)
    gs = ag.tensor(np.random.default_rng(9).standard_normal((3,) + tuple(y.shape)), device=device)
    got = ag.func.vmap(lambda g: ag.autograd.grad(y, xs, g, retain_graph=True)[0])(gs)
    for i in range(3):
        ref = ag.autograd.grad(y, xs, gs[i], retain_graph=True)[0]
        np.testing.assert_allclose(got[i].numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- grid_sample nearest, arguments
@pytest.mark.parametrize("shape, gshape", [((1, 2, 3, 4), (1, 2, 3, 2)), ((1, 2, 3, 2, 4), (1, 2, 2, 1, 3))])
def test_grid_sample_nearest_twice_differentiable(shape, gshape, device):
    """Its backward is linear in the gradient (a scatter): the gradient's gradient as PyTorch's."""
    rng = np.random.default_rng(10)
    x, g = rng.standard_normal(shape), rng.uniform(-0.9, 0.9, gshape)
    xa = ag.tensor(x, device=device, requires_grad=True)
    assert ag.autograd.gradgradcheck(lambda t: F.grid_sample(t, ag.tensor(g, device=device), mode="nearest",
                                                             align_corners=False), (xa,))
    xt = torch.tensor(x, requires_grad=True)
    ya = F.grid_sample(xa, ag.tensor(g, device=device), mode="nearest", align_corners=False)
    yt = TF.grid_sample(xt, torch.tensor(g), mode="nearest", align_corners=False)
    v = rng.standard_normal(tuple(yt.shape))
    ga, = ag.autograd.grad(ya, xa, ag.tensor(v, device=device, requires_grad=True), create_graph=True)
    vt = torch.tensor(v, requires_grad=True)
    gt, = torch.autograd.grad(yt, xt, vt, create_graph=True)
    np.testing.assert_allclose(ga.numpy(), gt.detach().numpy(), rtol=1e-12, atol=1e-12)
    w = rng.standard_normal(shape)
    (ga * ag.tensor(w, device=device)).sum().backward()
    (gt * torch.tensor(w)).sum().backward()


def test_grid_sample_grid_of_another_dtype_raises(device):
    x = ag.zeros((1, 1, 3, 3), device=device)
    with pytest.raises(RuntimeError, match=r"grid_sample: expected input and grid to have same dtype, got input "
                                           r"float32 and grid float64"):
        F.grid_sample(x, ag.zeros((1, 2, 2, 2), dtype=ag.float64, device=device), align_corners=False)
    with pytest.raises(RuntimeError):
        TF.grid_sample(torch.zeros(1, 1, 3, 3), torch.zeros(1, 2, 2, 2, dtype=torch.float64), align_corners=False)


@pytest.mark.parametrize("mode, aa", [("nearest", False), ("nearest-exact", False), ("bilinear", False),
                                      ("bicubic", False), ("bilinear", True)])
def test_interpolate_zero_channels_raises_as_pytorch(mode, aa, device):
    with pytest.raises(ValueError, match=r"interpolate: expected a non-empty channel dim \(C > 0\) for mode"):
        F.interpolate(ag.zeros((1, 0, 4, 4), device=device), size=3, mode=mode, antialias=aa)
    with pytest.raises(RuntimeError):
        TF.interpolate(torch.zeros(1, 0, 4, 4), size=3, mode=mode, antialias=aa)


def test_interpolate_area_zero_channels_is_fine_as_pytorch(device):
    got = F.interpolate(ag.zeros((1, 0, 4, 4), device=device), size=3, mode="area")
    assert got.shape == tuple(TF.interpolate(torch.zeros(1, 0, 4, 4), size=3, mode="area").shape)


def test_compiled_interpolate_keeps_a_later_nan_local(device):
    """ag.compile replays the resampling per call: a NaN in a later input (after finite ones, which the CPU
    resamples by the dense product) stays local."""
    f = ag.compile(lambda t: F.interpolate(t, scale_factor=2, mode="bilinear"))
    x = np.random.default_rng(11).standard_normal((1, 2, 6, 6))
    for _ in range(3):
        np.testing.assert_allclose(f(ag.tensor(x, device=device)).numpy(),
                                   TF.interpolate(torch.tensor(x), scale_factor=2, mode="bilinear").numpy(),
                                   rtol=1e-12, atol=1e-12)
    x[0, 1, 2, 3] = np.nan
    got = f(ag.tensor(x, device=device)).numpy()
    ref = TF.interpolate(torch.tensor(x), scale_factor=2, mode="bilinear").numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
