"""Review of issue 26's resampling ops: grid_sample with NaN and infinite grid points (PyTorch's values, no
NumPy IndexError from the corner gather), interpolate's separable resampling leaving a NaN or inf pixel in the
outputs that read it (not in the whole row and column), and the grid_sample gather staying one take over the
flattened input."""
import itertools

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F


torch = pytest.importorskip("torch")
TF = torch.nn.functional

_SPECIAL = [float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 0.3]


def _special_grid(nd):
    """One sample point per special value in each coordinate, the other coordinates ordinary."""
    pts = []
    for v, k in itertools.product(_SPECIAL, range(nd)):
        p = [0.1 * (j + 1) for j in range(nd)]
        p[k] = v
        pts.append(p)
    return np.asarray(pts, dtype=np.float64).reshape((1,) * nd + (len(pts), nd))


@pytest.mark.parametrize("mode, pm, ac", list(itertools.product(("bilinear", "nearest", "bicubic"),
                                                                ("zeros", "border", "reflection"), (False, True))))
def test_grid_sample_nan_and_inf_points_4d_as_pytorch(mode, pm, ac, device):
    """PyTorch's values, except one choice: with zero padding a NaN or infinite point is outside and reads 0
    (PyTorch's 3-D kernel and its nearest mode; its 4-D bilinear / bicubic kernels give NaN)."""
    x = np.arange(1.0, 13.0).reshape(1, 1, 3, 4)
    g = _special_grid(2)
    ref = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode=mode, padding_mode=pm, align_corners=ac).numpy()
    if pm == "zeros":
        ref = np.where(np.isfinite(g).all(-1)[None], ref, 0.0)
    got = F.grid_sample(ag.tensor(x, device=device), ag.tensor(g, device=device), mode=mode, padding_mode=pm,
                        align_corners=ac).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)       # NaN where PyTorch gives NaN


@pytest.mark.parametrize("mode, pm", list(itertools.product(("bilinear", "nearest"), ("zeros", "border",
                                                                             "reflection"))))
def test_grid_sample_nan_and_inf_points_5d(mode, pm, device):
    """5-D: PyTorch's values for finite points and, with zero padding, for all (0 outside); for a NaN or
    infinite coordinate with border / reflection PyTorch 2.13's CPU 3-D kernel clips NaN to the last pixel
    where its 4-D one clips it to the first: we follow the 4-D kernel, values read inside the input."""
    x = np.arange(1.0, 25.0).reshape(1, 1, 2, 3, 4)
    g = _special_grid(3)
    got = F.grid_sample(ag.tensor(x, device=device), ag.tensor(g, device=device), mode=mode, padding_mode=pm,
                        align_corners=False).numpy()
    ref = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode=mode, padding_mode=pm, align_corners=False).numpy()
    odd = ~(np.abs(g) < 1e6).all(-1)[None] if pm != "zeros" else np.zeros(got.shape, bool)   # 1e30: round-off
    np.testing.assert_allclose(got[~odd], ref[~odd], rtol=1e-12, atol=1e-12)
    assert np.all((got[odd] >= x.min()) & (got[odd] <= x.max()))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("shape, gshape", [((1, 2, 3, 4), (1, 2, 3, 2)), ((1, 2, 2, 3, 4), (1, 2, 1, 3, 3))])
def test_grid_sample_nan_point_leaves_the_input_gradient_clean(mode, shape, gshape, device):
    """Zero padding: a NaN point reads nothing, so it adds nothing to the input's gradient (as PyTorch); the
    gathered index of a NaN point is a valid placeholder whose weight must be exactly 0, not NaN * 0."""
    if mode == "bicubic" and len(shape) == 5:
        pytest.skip("bicubic is 4-D only")
    x = np.random.default_rng(0).standard_normal(shape)
    g = np.random.default_rng(1).uniform(-0.9, 0.9, gshape)
    g.reshape(-1, g.shape[-1])[1, 0] = np.nan
    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(g, requires_grad=True)
    TF.grid_sample(xt, gt, mode=mode, align_corners=False).sum().backward()
    xa, ga = ag.tensor(x, device=device, requires_grad=True), ag.tensor(g, device=device, requires_grad=True)
    F.grid_sample(xa, ga, mode=mode, align_corners=False).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)
    finite = np.isfinite(g).all(-1)
    np.testing.assert_allclose(ga.grad.numpy()[finite], gt.grad.numpy()[finite], rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- the CuPy path of the new modes
def _paths():
    from tests import test_breadth_gpu_paths as paths       # its counting helpers
    return paths


def _gx(*shape, low=None):
    rng = np.random.default_rng(sum(shape))
    a = rng.standard_normal(shape) if low is None else rng.uniform(low, -low, shape)
    return ag.tensor(a, device="cuda", requires_grad=True)


# issue 26's second round of resampling modes: name -> n -> (call, args), batch n
NEW_MODES = {
    "interpolate_bilinear_antialias": lambda n: (
        lambda x: F.interpolate(x, scale_factor=0.4, mode="bilinear", antialias=True), (_gx(n, 2, 11, 9),)),
    "interpolate_bicubic_antialias_align": lambda n: (
        lambda x: F.interpolate(x, size=(4, 13), mode="bicubic", antialias=True, align_corners=True),
        (_gx(n, 2, 11, 9),)),
    "interpolate_lanczos": lambda n: (
        lambda x: F.interpolate(x, size=(5, 3), mode="lanczos", antialias=True), (_gx(n, 2, 11, 9),)),
    "interpolate_area": lambda n: (lambda x: F.interpolate(x, size=(3, 2, 4), mode="area"), (_gx(n, 2, 7, 5, 6),)),
    "interpolate_nearest_exact": lambda n: (
        lambda x: F.interpolate(x, scale_factor=1.7, mode="nearest-exact"), (_gx(n, 2, 5, 6),)),
    "grid_sample_3d_reflection": lambda n: (
        lambda x, g: F.grid_sample(x, g, padding_mode="reflection", align_corners=False),
        (_gx(n, 2, 3, 4, 5), _gx(n, 2, 3, 4, 3, low=-1.3))),
    "grid_sample_3d_nearest": lambda n: (
        lambda x, g: F.grid_sample(x, g, mode="nearest", align_corners=True),
        (_gx(n, 2, 3, 4, 5), _gx(n, 2, 3, 4, 3, low=-1.3))),
    "grid_sample_bicubic_border": lambda n: (
        lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode="border"),
        (_gx(n, 2, 4, 5), _gx(n, 3, 4, 2, low=-1.3))),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(NEW_MODES))
def test_new_modes_on_the_device_no_transfer_no_batch_loop(name, standin):
    """Forward and backward: no host transfer either way, nothing declared to the sync debug mode, as many
    kernel launches for batch 8 as for batch 1, and the CPU's values and gradients."""
    paths = _paths()
    counts = {}
    for n in (1, 8):
        call, args = NEW_MODES[name](n)
        paths._run(call, args)                                  # warm caches
        ag.cuda.set_sync_debug_mode("error")
        try:
            transfers, counts[n] = paths._counted(standin, call, args)
        finally:
            ag.cuda.set_sync_debug_mode("default")
        assert (transfers.d2h, transfers.h2d) == (0, 0), transfers.events
    assert counts[1].launches == counts[8].launches > 0, (counts[1].by_kind, counts[8].by_kind)
    call, args = NEW_MODES[name](2)
    host = [ag.tensor(a.numpy(), requires_grad=True) for a in args]
    out_d, out_h = paths._run(call, args), paths._run(call, host)
    np.testing.assert_allclose(out_d.detach().numpy(), out_h.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, b in zip(args, host):
        if a.grad is None:                                      # nearest: no gradient to the grid on either
            assert b.grad is None
            continue
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- interpolate's arguments
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact", "bilinear", "bicubic", "area"])
@pytest.mark.parametrize("aa", [False, True])
def test_interpolate_empty_spatial_input_raises_naming_the_sizes(mode, aa):
    """PyTorch refuses a spatial size 0 (there is nothing to resample from); we did not: zeros or an
    IndexError from the backend's index_select."""
    if aa and mode not in ("bilinear", "bicubic"):
        pytest.skip("antialias only with bilinear / bicubic")
    with pytest.raises(ValueError, match=r"interpolate: expected input spatial sizes > 0, got input shape "
                                         r"\(1, 2, 0, 4\)"):
        F.interpolate(ag.zeros((1, 2, 0, 4)), size=(3, 3), mode=mode, antialias=aa)
    with pytest.raises(RuntimeError):
        TF.interpolate(torch.zeros((1, 2, 0, 4)), size=(3, 3), mode=mode, antialias=aa)


def test_interpolate_empty_batch_is_fine(device):
    got = F.interpolate(ag.zeros((0, 2, 4, 5), device=device), size=(3, 7), mode="bicubic", antialias=True)
    assert got.shape == tuple(TF.interpolate(torch.zeros((0, 2, 4, 5)), size=(3, 7), mode="bicubic",
                                             antialias=True).shape)


@pytest.mark.parametrize("kw", [{"size": np.int64(3)}, {"size": (np.int64(3), np.int32(2))},
                                {"scale_factor": (np.float32(0.5), 2)}, {"scale_factor": np.float64(1.5)},
                                {"scale_factor": np.int64(2)}])
def test_interpolate_takes_numpy_numbers_as_pytorch(kw, device):
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 6))
    got = F.interpolate(ag.tensor(x, device=device), mode="bilinear", **kw)
    ref = TF.interpolate(torch.tensor(x), mode="bilinear", **kw)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- nearest modes
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("sf", [1.0009, 1.0004, 1.2])
def test_nearest_with_a_scale_that_keeps_the_size_still_resamples(mode, sf, device):
    """floor(1000 * 1.0009) = 1000: the output has the input's size, but PyTorch's source index uses the given
    scale (1 / 1.0009), so it is not the identity; we returned the input unchanged."""
    x = np.arange(1000.0).reshape(1, 1, 1000)
    got = F.interpolate(ag.tensor(x, device=device), scale_factor=sf, mode=mode)
    ref = TF.interpolate(torch.tensor(x), scale_factor=sf, mode=mode)
    np.testing.assert_array_equal(got.numpy(), ref.numpy())


_FACTORS = [(4, {"scale_factor": 2}), (3, {"scale_factor": 3}), (5, {"size": 35}), (2, {"scale_factor": 25}),
            (7, {"size": 21}), (6, {"scale_factor": 5.0}), (4, {"size": 9}), (5, {"scale_factor": 1.7}),
            (40, {"size": 41})]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("n, kw", _FACTORS)
def test_nearest_upsampling_values_and_gradients_as_pytorch(mode, n, kw, device):
    x = np.random.default_rng(n).standard_normal((2, 3, n))
    xa, xt = ag.tensor(x, device=device, requires_grad=True), torch.tensor(x, requires_grad=True)
    ya, yt = F.interpolate(xa, mode=mode, **kw), TF.interpolate(xt, mode=mode, **kw)
    np.testing.assert_array_equal(ya.numpy(), yt.detach().numpy())
    g = np.random.default_rng(1).standard_normal(tuple(yt.shape))
    (ya * ag.tensor(g, device=device)).sum().backward()
    (yt * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_by_an_integer_factor_repeats_without_a_scatter(mode, standin):
    """Each input read k times in a row: a repeat, whose backward is a sum (the index_select's backward is a
    scatter-add, NumPy's slow ufunc.at on the CPU: 6 to 9 times PyTorch's time on (8, 16, 64, 64))."""
    x = ag.tensor(np.random.default_rng(0).standard_normal((2, 3, 4, 5)), device="cuda", requires_grad=True)
    for kw in ({"scale_factor": 2}, {"size": (12, 15)}, {"scale_factor": (1, 4)}):
        with standin.count_launches() as launches:
            F.interpolate(x, mode=mode, **kw).sum().backward()
        assert "scatter" not in launches.by_kind and "gather" not in launches.by_kind, (kw, launches.by_kind)


@pytest.mark.parametrize("size", [None, (1, 1, 2.0, 2), (True, 1, 2, 2), 4, "1122"])
def test_affine_grid_size_not_ints_raises_naming_it(size):
    """A TypeError naming size and what it got (it was NumPy's, from linspace, or Python's len() of None)."""
    with pytest.raises(TypeError, match=r"affine_grid: expected size as a tuple of 4 or 5 ints"):
        F.affine_grid(ag.zeros((1, 2, 3)), size)
    with pytest.raises((TypeError, ValueError)):
        TF.affine_grid(torch.zeros(1, 2, 3), size, align_corners=False)


def test_affine_grid_takes_numpy_ints_and_torch_size():
    theta = np.random.default_rng(0).standard_normal((1, 2, 3))
    ref = TF.affine_grid(torch.tensor(theta), (1, 1, 3, 4), align_corners=False).numpy()
    for size in [(np.int64(1), 1, np.int32(3), 4), torch.Size((1, 1, 3, 4)), [1, 1, 3, 4]]:
        np.testing.assert_allclose(F.affine_grid(ag.tensor(theta), size, align_corners=False).numpy(), ref,
                                   rtol=1e-12, atol=1e-12)
