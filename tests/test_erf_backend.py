"""Tests for the NumPy erf in autograd_gpu/backends/_erf.py against math.erf."""

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

# Load the module straight from its file so the test does not depend on the
# autograd_gpu package (and everything its __init__ imports) importing cleanly.
_PATH = Path(__file__).resolve().parents[1] / "autograd_gpu" / "backends" / "_erf.py"
_spec = importlib.util.spec_from_file_location("_erf_under_test", _PATH)
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
erf = _mod.erf


def _reference(x):
    """math.erf of every element of x, in float64 and flattened."""
    return np.array([math.erf(v) for v in np.asarray(x, dtype=np.float64).ravel()])


def assert_within_1ulp(got, x):
    """got == erf(x) within the 1 ulp (of x's float dtype) that _erf.py promises.

    Never bit-equality: math.erf comes from the platform's libm, and two
    implementations with errors below 1 ulp may each return either float next to
    the exact value, so they can differ by 1 ulp, but never by 2.
    """
    got = np.asarray(got)
    expected = _reference(x).astype(got.dtype).reshape(got.shape)
    np.testing.assert_array_max_ulp(got, expected, maxulp=1)


def test_dense_grid():
    x = np.linspace(-10.0, 10.0, 400_001)
    assert_within_1ulp(erf(x), x)


def test_random_points():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.uniform(-10.0, 10.0, 100_000),
        rng.normal(0.0, 2.0, 100_000),
        rng.uniform(-1e-3, 1e-3, 10_000),
    ])
    assert_within_1ulp(erf(x), x)


def test_branch_boundaries():
    # fdlibm switches formulas at 2**-28, 0.84375, 1.25, 1/0.35 and 6.
    edges = np.array([2.0 ** -28, 0.84375, 1.25, 1 / 0.35, 2.857142734527588, 6.0])
    x = np.concatenate([np.nextafter(edges, 0.0), edges, np.nextafter(edges, np.inf)])
    x = np.concatenate([x, -x])
    assert_within_1ulp(erf(x), x)


def test_tiny_and_subnormal_relative():
    x = np.array([1e-300, 5e-324, 2.2e-308, 1e-20, 3e-9, -1e-300, -5e-324])
    ref = _reference(x)
    got = erf(x)
    assert np.all(np.sign(got) == np.sign(ref))
    assert_within_1ulp(got, x)  # subnormal results too: ulps shrink with them


def test_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e308, -1e308])
    y = erf(x)
    assert y[0] == 1.0 and y[1] == -1.0
    assert np.isnan(y[2])
    assert y[3] == 0.0 and not np.signbit(y[3])
    assert y[4] == 0.0 and np.signbit(y[4])
    assert y[5] == 1.0 and y[6] == -1.0


def test_odd_symmetry():
    x = np.linspace(0.0, 7.0, 10_001)
    assert np.array_equal(erf(-x), -erf(x))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_dtype_preserved(dtype):
    x = np.linspace(-4.0, 4.0, 101).astype(dtype)
    y = erf(x)
    assert y.dtype == dtype
    assert_within_1ulp(y, x)


@pytest.mark.parametrize("shape", [(), (0,), (3, 0), (2, 3), (2, 3, 4)])
def test_shapes(shape):
    x = np.random.default_rng(1).normal(size=shape)
    y = erf(x)
    assert isinstance(y, np.ndarray)
    assert y.shape == shape and y.dtype == np.float64
    assert_within_1ulp(y, x)


def test_zero_dim_values():
    y = erf(np.array(0.5, dtype=np.float32))
    assert isinstance(y, np.ndarray) and y.shape == () and y.dtype == np.float32
    assert_within_1ulp(y, np.float32(0.5))


def test_input_not_modified_and_noncontiguous():
    x = np.linspace(-3.0, 3.0, 60).reshape(6, 10)
    x_copy = x.copy()
    view = x[:, ::3].T
    y = erf(view)
    assert np.array_equal(x, x_copy)
    assert y.shape == view.shape
    assert_within_1ulp(y, view)


def test_no_floating_point_warnings():
    x = np.array([0.0, -0.0, 1e-320, np.inf, -np.inf, np.nan, 30.0, 1e308])
    with np.errstate(divide="raise", invalid="raise", over="raise"):
        erf(x)
