"""interpolate's antialias filters (bilinear, bicubic, lanczos) and its area / nearest-exact modes, grid_sample on
5-D input (trilinear, nearest) and in bicubic mode, affine_grid for 3-D transforms: values and the gradients of
every input against PyTorch's (float64 to round-off, float32 to its rounding) on each device, PyTorch's errors
for the bad combinations, and vmap against a loop."""
import itertools
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn as nn
import autograd_gpu.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

_TOL = {"float64": (1e-10, 1e-10), "float32": (2e-4, 2e-5)}


def _compare(ag_fn, torch_fn, arrays, device, dtype="float64"):
    """Value and the gradient of sum(y * g) of each input, in ``dtype`` on ``device``."""
    rtol, atol = _TOL[dtype]
    rng = np.random.default_rng(0)
    arrays = [np.asarray(a, dtype=dtype) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    xs = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    ref = torch_fn(*ts)
    got = ag_fn(*xs)
    assert got.dtype == getattr(ag, dtype) and got.device == ag.device(device)
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = rng.standard_normal(ref.shape).astype(dtype)
    (ref * torch.tensor(g)).sum().backward()
    (got * ag.tensor(g, device=device)).sum().backward()
    for i, (t, x) in enumerate(zip(ts, xs)):
        if x.grad is None:          # no path to this input (a nearest grid): PyTorch's zeros
            assert not t.grad.numpy().any(), f"input {i}"
            continue
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")


def _r(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


# --------------------------------------------------------------------------- interpolate
# (input shape, size / scale_factor keywords): down and up, odd sizes, per-axis scales, recompute
_AA_SIZES = [((2, 3, 9, 7), {"size": (4, 3)}), ((1, 2, 8, 8), {"size": (3, 13)}),
             ((2, 1, 10, 11), {"scale_factor": 0.37}), ((1, 2, 5, 6), {"scale_factor": (2.5, 0.5)}),
             ((1, 2, 7, 7), {"size": (1, 2)}), ((1, 2, 13, 7), {"scale_factor": 0.3, "recompute_scale_factor": True})]
_AA = [(m, ac, shape, kw) for m in ("bilinear", "bicubic", "lanczos") for ac in (False, True)
       for shape, kw in _AA_SIZES if not (m == "lanczos" and ac)]


@pytest.mark.parametrize("mode, ac, shape, kw", _AA, ids=[f"{m}-{ac}-{i % len(_AA_SIZES)}"
                                                          for i, (m, ac, _, _) in enumerate(_AA)])
def test_interpolate_antialias_matches_pytorch(mode, ac, shape, kw, device):
    _compare(lambda x: F.interpolate(x, mode=mode, align_corners=ac, antialias=True, **kw),
             lambda x: TF.interpolate(x, mode=mode, align_corners=ac, antialias=True, **kw), [_r(*shape)], device)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic", "lanczos"])
def test_interpolate_antialias_float32(mode, device):
    _compare(lambda x: F.interpolate(x, size=(5, 4), mode=mode, antialias=True),
             lambda x: TF.interpolate(x, size=(5, 4), mode=mode, antialias=True), [_r(2, 3, 11, 9)], device,
             "float32")


def test_interpolate_bilinear_antialias_upsampling_is_plain_bilinear(device):
    """Upsampling: the triangle filter is not stretched, so antialias changes nothing (bilinear)."""
    x = ag.tensor(_r(1, 2, 4, 5), device=device)
    a = F.interpolate(x, size=(9, 11), mode="bilinear", antialias=True)
    b = F.interpolate(x, size=(9, 11), mode="bilinear")
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, atol=1e-12)


def test_interpolate_antialias_preserves_constants_and_differs_from_plain(device):
    x = ag.full((1, 1, 12, 10), 3.0, dtype=ag.float64, device=device)
    for mode in ("bilinear", "bicubic", "lanczos"):
        np.testing.assert_allclose(F.interpolate(x, size=(5, 3), mode=mode, antialias=True).numpy(), 3.0, rtol=1e-12)
    z = ag.tensor(_r(1, 1, 12, 10), device=device)
    assert not np.allclose(F.interpolate(z, size=(3, 3), mode="bilinear", antialias=True).numpy(),
                           F.interpolate(z, size=(3, 3), mode="bilinear").numpy())


def test_interpolate_antialias_to_width_one_is_the_separable_filter(device):
    """Output width 1 with a changed height: PyTorch 2.13's CPU kernel repeats its first output row (its
    vertical pass on a width-1 image); ours is the separable filter, which PyTorch itself gives when the
    height is resized before the width."""
    x = _r(1, 2, 13, 5)
    got = F.interpolate(ag.tensor(x, device=device), size=(3, 1), mode="bilinear", antialias=True)
    t = torch.tensor(x)
    ref = TF.interpolate(TF.interpolate(t, size=(3, 5), mode="bilinear", antialias=True), size=(3, 1),
                         mode="bilinear", antialias=True)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


_MODES_SIZES = [((2, 3, 9), {"size": 4}), ((2, 3, 9, 7), {"size": (4, 13)}), ((1, 2, 5, 7, 6), {"size": (3, 2, 11)}),
                ((1, 2, 10, 7), {"scale_factor": (2.15, 0.33)}), ((1, 1, 10), {"scale_factor": 2.15}),
                ((1, 2, 6, 5, 7), {"scale_factor": 1.7}),
                ((1, 1, 13, 9), {"scale_factor": 0.61, "recompute_scale_factor": True})]
_MODES = [(m, shape, kw) for m in ("area", "nearest-exact", "nearest") for shape, kw in _MODES_SIZES]


@pytest.mark.parametrize("mode, shape, kw", _MODES, ids=[f"{m}-{i % len(_MODES_SIZES)}"
                                                         for i, (m, _, _) in enumerate(_MODES)])
def test_interpolate_area_and_nearest_exact_match_pytorch(mode, shape, kw, device):
    _compare(lambda x: F.interpolate(x, mode=mode, **kw), lambda x: TF.interpolate(x, mode=mode, **kw),
             [_r(*shape)], device)


@pytest.mark.parametrize("mode", ["area", "nearest-exact"])
def test_interpolate_area_nearest_exact_float32(mode, device):
    _compare(lambda x: F.interpolate(x, size=(3, 7), mode=mode), lambda x: TF.interpolate(x, size=(3, 7), mode=mode),
             [_r(2, 3, 8, 5)], device, "float32")


def test_upsample_takes_the_new_modes(device):
    x = _r(1, 2, 5, 4)
    for mode in ("area", "nearest-exact"):
        m = nn.Upsample(scale_factor=1.5, mode=mode)
        ref = torch.nn.Upsample(scale_factor=1.5, mode=mode)(torch.tensor(x))
        np.testing.assert_allclose(m(ag.tensor(x, device=device)).numpy(), ref.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name, kw", [("UpsamplingNearest2d", {"scale_factor": 2.5}),
                                      ("UpsamplingBilinear2d", {"size": (7, 3)}),
                                      ("UpsamplingBilinear2d", {"scale_factor": 1.5})])
def test_upsampling_2d_layers_match_pytorch(name, kw, device):
    _compare(lambda x: getattr(nn, name)(**kw)(x), lambda x: getattr(torch.nn, name)(**kw)(x), [_r(2, 3, 4, 5)],
             device)
    assert repr(getattr(nn, name)(**kw)).startswith(name + "(")


@pytest.mark.parametrize("bad, exc, match", [
    (lambda x: F.interpolate(x, size=3, mode="area", align_corners=False), ValueError, "align_corners"),
    (lambda x: F.interpolate(x, size=3, mode="nearest-exact", align_corners=True), ValueError, "align_corners"),
    (lambda x: F.interpolate(x, size=3, mode="nearest", antialias=True), ValueError, "antialias"),
    (lambda x: F.interpolate(x, size=3, mode="area", antialias=True), ValueError, "antialias"),
    (lambda x: F.interpolate(x[0], size=3, mode="linear", antialias=True), ValueError, "4-D input"),
    (lambda x: F.interpolate(x, size=3, mode="lanczos"), ValueError, "requires antialias=True"),
    (lambda x: F.interpolate(x, size=3, mode="lanczos", antialias=True, align_corners=True), ValueError,
     "align_corners=True"),
    (lambda x: F.interpolate(x, size=3, mode="bilinear", recompute_scale_factor=True), ValueError,
     "recompute_scale_factor"),
    (lambda x: F.interpolate(x, mode="bilinear"), ValueError, "size and scale_factor"),
    (lambda x: F.interpolate(x, size=3, mode="trilinear"), NotImplementedError, "5-D input"),
    (lambda x: F.interpolate(x, size=3, mode="cubic"), ValueError, "mode must be one of"),
])
def test_interpolate_bad_combinations_raise_as_pytorch(bad, exc, match):
    x = ag.zeros((1, 1, 4, 4))
    with pytest.raises(exc, match=match):
        bad(x)
    with pytest.raises((ValueError, NotImplementedError, RuntimeError)):     # PyTorch refuses the same call
        _torch_call(bad)


class _TorchF:
    """F's names mapped to torch's, so that one lambda runs against both."""
    interpolate = staticmethod(TF.interpolate)


def _torch_call(bad):
    g = bad.__globals__
    saved = g["F"]
    g["F"] = _TorchF
    try:
        return bad(torch.zeros((1, 1, 4, 4)))
    finally:
        g["F"] = saved


# --------------------------------------------------------------------------- grid_sample / affine_grid
_GRID = list(itertools.product(("bilinear", "nearest"), ("zeros", "border", "reflection"), (False, True)))


@pytest.mark.parametrize("mode, pm, ac", _GRID)
def test_grid_sample_5d_matches_pytorch(mode, pm, ac, device):
    x = _r(2, 3, 3, 4, 5)
    g = np.random.default_rng(3).uniform(-1.4, 1.4, (2, 2, 3, 4, 3))
    _compare(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac),
             lambda x, g: TF.grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac), [x, g], device)
    x1 = _r(1, 2, 1, 2, 3)          # a size-1 dim and points far outside
    g1 = np.random.default_rng(4).uniform(-2.5, 2.5, (1, 2, 1, 3, 3))
    _compare(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac),
             lambda x, g: TF.grid_sample(x, g, mode=mode, padding_mode=pm, align_corners=ac), [x1, g1], device)


@pytest.mark.parametrize("pm, ac", list(itertools.product(("zeros", "border", "reflection"), (False, True))))
def test_grid_sample_bicubic_matches_pytorch(pm, ac, device):
    x = _r(2, 3, 4, 5)
    g = np.random.default_rng(5).uniform(-1.4, 1.4, (2, 3, 6, 2))
    _compare(lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode=pm, align_corners=ac),
             lambda x, g: TF.grid_sample(x, g, mode="bicubic", padding_mode=pm, align_corners=ac), [x, g], device)
    x1 = _r(1, 2, 1, 3)
    g1 = np.random.default_rng(6).uniform(-2.5, 2.5, (1, 2, 2, 2))
    _compare(lambda x, g: F.grid_sample(x, g, mode="bicubic", padding_mode=pm, align_corners=ac),
             lambda x, g: TF.grid_sample(x, g, mode="bicubic", padding_mode=pm, align_corners=ac), [x1, g1], device)


@pytest.mark.parametrize("mode, shape, gshape", [("bilinear", (2, 3, 3, 4, 5), (2, 2, 3, 4, 3)),
                                                 ("bicubic", (2, 3, 4, 5), (2, 3, 6, 2))])
def test_grid_sample_float32(mode, shape, gshape, device):
    g = np.random.default_rng(7).uniform(-1.2, 1.2, gshape)
    _compare(lambda x, g: F.grid_sample(x, g, mode=mode, align_corners=False),
             lambda x, g: TF.grid_sample(x, g, mode=mode, align_corners=False), [_r(*shape), g], device, "float32")


@pytest.mark.parametrize("ac", [False, True])
@pytest.mark.parametrize("size", [(2, 3, 4, 5, 6), (2, 1, 1, 3, 2), (2, 3, 4, 5)])
def test_affine_grid_matches_pytorch(size, ac, device):
    nd = len(size) - 2
    theta = _r(size[0], nd, nd + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # PyTorch's warning about unit-size grids with align_corners
        _compare(lambda t: F.affine_grid(t, size, align_corners=ac),
                 lambda t: TF.affine_grid(t, size, align_corners=ac), [theta], device)


def test_affine_grid_then_grid_sample_3d_identity(device):
    """The identity theta samples every voxel centre at itself (align_corners=False)."""
    x = ag.tensor(_r(2, 3, 3, 4, 5), device=device)
    theta = ag.tensor(np.broadcast_to(np.eye(3, 4), (2, 3, 4)).copy(), device=device)
    y = F.grid_sample(x, F.affine_grid(theta, (2, 3, 3, 4, 5), align_corners=False), align_corners=False)
    np.testing.assert_allclose(y.numpy(), x.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad, exc, match", [
    (lambda: F.grid_sample(ag.zeros((1, 1, 2, 3, 3)), ag.zeros((1, 2, 2, 2, 2))), ValueError, "grid"),
    (lambda: F.grid_sample(ag.zeros((1, 1, 2, 3, 3)), ag.zeros((1, 2, 2, 3))), ValueError, "grid"),
    (lambda: F.grid_sample(ag.zeros((1, 1, 2, 3, 3)), ag.zeros((1, 2, 2, 2, 3)), mode="bicubic"), ValueError,
     "bicubic"),
    (lambda: F.grid_sample(ag.zeros((1, 1, 3, 3)), ag.zeros((1, 2, 2, 2)), mode="area"), ValueError, "mode"),
    (lambda: F.affine_grid(ag.zeros((1, 2, 3)), (1, 1, 2, 3, 3)), ValueError, r"\(N, 3, 4\)"),
    (lambda: F.affine_grid(ag.zeros((1, 3, 4)), (1, 1, 3)), NotImplementedError, "4-D size"),
    (lambda: F.affine_grid(ag.zeros((1, 3, 4)), (1, 1, 0, 3, 3)), ValueError, "positive"),
])
def test_grid_sample_affine_grid_bad_arguments(bad, exc, match):
    with pytest.raises(exc, match=match):
        bad()


# --------------------------------------------------------------------------- vmap
@pytest.mark.parametrize("fn", [
    lambda x, g: F.grid_sample(x, g, mode="bilinear", padding_mode="reflection"),
    lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True),
])
def test_vmap_grid_sample_5d_equals_a_loop(fn):
    x = ag.tensor(_r(3, 1, 2, 3, 4, 2))
    g = ag.tensor(np.random.default_rng(8).uniform(-1.2, 1.2, (3, 1, 2, 2, 3, 3)))
    got = ag.func.vmap(fn)(x, g)
    want = np.stack([fn(x[i], g[i]).numpy() for i in range(3)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)


def test_vmap_interpolate_antialias_and_bicubic_grid_equal_a_loop():
    x = ag.tensor(_r(3, 1, 2, 9, 7))
    f = lambda a: F.interpolate(a, size=(4, 3), mode="bicubic", antialias=True)        # noqa: E731
    np.testing.assert_allclose(ag.func.vmap(f)(x).numpy(), np.stack([f(x[i]).numpy() for i in range(3)]),
                               rtol=1e-12, atol=1e-12)
    g = ag.tensor(np.random.default_rng(9).uniform(-1.2, 1.2, (3, 1, 2, 3, 2)))
    h = lambda a, b: F.grid_sample(a, b, mode="bicubic")        # noqa: E731
    np.testing.assert_allclose(ag.func.vmap(h)(x, g).numpy(), np.stack([h(x[i], g[i]).numpy() for i in range(3)]),
                               rtol=1e-12, atol=1e-12)
