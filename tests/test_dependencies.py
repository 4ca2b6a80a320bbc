"""The dependency choices: BLAS threads through threadpoolctl (backends/threads.py), SciPy's erf where
SciPy is installed with the fdlibm port as the fallback, and MKL kept out of the [test] extra."""
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import threadpoolctl

import autograd_gpu as ag
from autograd_gpu.backends import threads, numpy_backend
from autograd_gpu.backends._erf import erf as erf_port

ROOT = Path(__file__).resolve().parents[1]

try:
    import tomllib
except ModuleNotFoundError:        # Python 3.10
    import tomli as tomllib


@pytest.fixture
def restore_threads():
    before = threads.get_num_threads()
    yield
    threads.set_num_threads(before)


@pytest.fixture
def no_thread_env(monkeypatch):
    for name in ("AUTOGRAD_GPU_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)


# -- BLAS threads --------------------------------------------------------------------------------------

@pytest.mark.parametrize("cpus,load,expected", [(2, 0.2, 2), (2, 0.6, 1), (2, 7.0, 1), (16, 3.4, 13), (8, 0.0, 8)])
def test_default_threads_are_the_cpus_not_already_busy(monkeypatch, no_thread_env, cpus, load, expected):
    monkeypatch.setattr(threads, "available_cpus", lambda: cpus)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert threads.default_num_threads() == expected


def test_env_var_fixes_the_thread_count(monkeypatch, no_thread_env):
    monkeypatch.setenv("AUTOGRAD_GPU_NUM_THREADS", "3")
    monkeypatch.setattr(os, "getloadavg", lambda: (50.0, 50.0, 50.0))
    assert threads.default_num_threads() == 3


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_bad_env_var_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("AUTOGRAD_GPU_NUM_THREADS", value)
    with pytest.raises(ValueError, match="AUTOGRAD_GPU_NUM_THREADS must be a positive integer"):
        threads.default_num_threads()


def test_available_cpus_is_at_most_the_affinity_mask():
    n = threads.available_cpus()
    assert 1 <= n <= (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())


def test_set_num_threads_limits_every_loaded_blas(restore_threads):
    ag.set_num_threads(1)
    assert ag.get_num_threads() == 1
    infos = threadpoolctl.threadpool_info()
    assert all(i["num_threads"] == 1 for i in infos if i["user_api"] == "blas")
    a = np.random.default_rng(0).standard_normal((300, 300))
    np.testing.assert_allclose(ag.tensor(a) @ ag.tensor(a), a @ a, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-1, ValueError), (1.5, TypeError), ("2", TypeError),
                                     (True, TypeError)])
def test_set_num_threads_refuses_bad_counts(bad, exc):
    with pytest.raises(exc, match="set_num_threads: expected a positive int"):
        ag.set_num_threads(bad)


def test_users_own_thread_variables_are_left_alone(monkeypatch, no_thread_env, restore_threads):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")
    assert threads.apply_policy() is None
    monkeypatch.setenv("AUTOGRAD_GPU_NUM_THREADS", "1")      # ours, when given, still applies
    assert threads.apply_policy() == 1


def _blas_threads_in_child(env):
    code = ("import autograd_gpu, threadpoolctl; "
            "print(max(i['num_threads'] for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas'))")
    full = {k: v for k, v in os.environ.items() if not k.endswith("NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env={**full, **env}, capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split()[-1])


def test_the_policy_is_applied_at_import():
    assert _blas_threads_in_child({"AUTOGRAD_GPU_NUM_THREADS": "1"}) == 1
    assert _blas_threads_in_child({}) <= threads.available_cpus()


# -- erf -----------------------------------------------------------------------------------------------

def _ulps(got, expected):
    itype = {4: np.int32, 8: np.int64}[got.dtype.itemsize]
    return np.abs(got.view(itype).astype(np.int64) - expected.view(itype).astype(np.int64))


def _math_erf(x):
    return np.array([math.erf(v) for v in np.asarray(x, np.float64).ravel()]).reshape(np.shape(x))


@pytest.mark.parametrize("dtype,max_ulp", [(np.float32, 1), (np.float64, 3)])
def test_scipy_erf_is_used_where_installed_and_accurate(dtype, max_ulp):
    special = pytest.importorskip("scipy.special")
    numpy_backend._erf_impl.clear()
    x = np.random.default_rng(0).normal(0.0, 2.0, 20_000).astype(dtype)
    got = numpy_backend.erf(x)
    assert numpy_backend._erf_impl == [special.erf]
    assert got.dtype == dtype
    assert _ulps(got, _math_erf(x).astype(dtype)).max() <= max_ulp
    assert _ulps(got, erf_port(x)).max() <= max_ulp


def test_without_scipy_the_port_is_used(monkeypatch):
    monkeypatch.setattr(numpy_backend, "_erf_impl", [None])
    x = np.linspace(-7.0, 7.0, 1001)
    np.testing.assert_array_equal(numpy_backend.erf(x), erf_port(x))
    np.testing.assert_array_equal(ag.erf(ag.tensor(x)).numpy(), erf_port(x))


def test_scipy_missing_falls_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.special", None)      # import scipy.special raises ImportError
    assert numpy_backend._scipy_erf() is None


@pytest.mark.parametrize("impl", ["scipy", "port"])
def test_erf_keeps_the_ports_dtypes_and_special_values(monkeypatch, impl):
    if impl == "scipy":
        special = pytest.importorskip("scipy.special")
        monkeypatch.setattr(numpy_backend, "_erf_impl", [special.erf])
    else:
        monkeypatch.setattr(numpy_backend, "_erf_impl", [None])
    erf = numpy_backend.erf
    for dtype in (np.float16, np.float32, np.float64):
        assert erf(np.ones(3, dtype)).dtype == dtype
    assert erf(np.arange(3)).dtype == np.float64
    zero_d = erf(np.array(0.5, np.float32))
    assert isinstance(zero_d, np.ndarray) and zero_d.shape == () and zero_d.dtype == np.float32
    got = erf(np.array([-0.0, np.inf, -np.inf, np.nan]))
    assert np.signbit(got[0]) and got[0] == 0 and got[1] == 1 and got[2] == -1 and np.isnan(got[3])


def test_gelu_and_erf_gradients_hold_with_either_erf(monkeypatch):
    x = ag.tensor(np.linspace(-3, 3, 7), dtype=ag.float64, requires_grad=True)
    results = []
    for impl in ([None], list(numpy_backend._erf_impl) or [None]):
        monkeypatch.setattr(numpy_backend, "_erf_impl", impl)
        assert ag.autograd.gradcheck(ag.erf, (x,))
        results.append(ag.nn.functional.gelu(x).numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-14, atol=1e-15)


# -- extras --------------------------------------------------------------------------------------------

def test_mkl_is_opt_in_not_part_of_the_test_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any(req.lower().startswith("mkl") for req in extras["test"])
    assert any(req.lower().startswith("mkl") for req in extras["mkl"])
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(req.startswith("threadpoolctl") for req in deps)
