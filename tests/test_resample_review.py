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
    x = np.arange(1.0, 13.0).reshape(1, 1, 3, 4)
    g = _special_grid(2)
    ref = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode=mode, padding_mode=pm, align_corners=ac).numpy()
    got = F.grid_sample(ag.tensor(x, device=device), ag.tensor(g, device=device), mode=mode, padding_mode=pm,
                        align_corners=ac).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)       # NaN where PyTorch gives NaN


@pytest.mark.parametrize("mode, pm", list(itertools.product(("bilinear", "nearest"), ("zeros", "border",
                                                                             "reflection"))))
def test_grid_sample_nan_and_inf_points_5d(mode, pm, device):
    """5-D: the finite points as PyTorch, and no NumPy IndexError for the others. For a NaN or infinite
    coordinate PyTorch 2.13's CPU 3-D kernel differs from its own 4-D one (zeros: 0 instead of NaN; border and
    reflection: NaN clipped to the last pixel, not the first); we give the 4-D kernel's rule in both: zeros NaN,
    border / reflection values read inside the input."""
    x = np.arange(1.0, 25.0).reshape(1, 1, 2, 3, 4)
    g = _special_grid(3)
    got = F.grid_sample(ag.tensor(x, device=device), ag.tensor(g, device=device), mode=mode, padding_mode=pm,
                        align_corners=False).numpy()
    ref = TF.grid_sample(torch.tensor(x), torch.tensor(g), mode=mode, padding_mode=pm, align_corners=False).numpy()
    odd = ~(np.abs(g) < 1e6).all(-1)[None]          # NaN, inf, and 1e30 (its reflection is round-off)
    np.testing.assert_allclose(got[~odd], ref[~odd], rtol=1e-12, atol=1e-12)
    if pm == "zeros":
        assert np.all(np.isnan(got[odd]) | (got[odd] == 0))     # NaN or inf: NaN; 1e30: outside
    else:
        assert np.all((got[odd] >= x.min()) & (got[odd] <= x.max()))      # finite, read inside
