import os

import pytest

import autograd_gpu as ag

# AG_CUDA=standin runs every CUDA code path on the strict CuPy stand-in (NumPy underneath): the `gpu`
# tests then run on a machine without a GPU, as CI does with `AG_CUDA=standin python -m pytest -m gpu`.
_CUDA_MODE = os.environ.get("AG_CUDA", "")
_CUDA_DEVICE = os.environ.get("AG_CUDA_DEVICE", "cuda")      # the GPU the `cuda` tests run on
if _CUDA_MODE == "standin":
    from autograd_gpu.testing import cupy_standin
    cupy_standin.install()
elif _CUDA_MODE not in ("", "real"):
    raise pytest.UsageError(f"AG_CUDA: expected 'standin' or 'real' (or unset), got {_CUDA_MODE!r}")


def pytest_report_header(config):
    from autograd_gpu.backends import cupy_backend
    if cupy_backend.simulated():
        from autograd_gpu.testing import cupy_standin
        return (f"cuda: simulated by the CuPy stand-in ({cupy_standin.N_DEVICES} devices, "
                f"CuPy {cupy_standin.CUPY_VERSION}'s API)")
    return f"cuda: {'available' if ag.cuda.is_available() else 'not available (gpu tests skip)'}"


def _cuda_param():
    reason = None
    try:
        if not ag.cuda.is_available():
            reason = "CuPy or a CUDA GPU is missing"
    except Exception as e:  # a broken CUDA install must skip, not error
        reason = f"CUDA unusable: {e}"
    marks = [pytest.mark.gpu] + ([pytest.mark.skip(reason=reason)] if reason else [])
    return pytest.param(_CUDA_DEVICE, marks=marks, id="cuda")


DEVICES = [pytest.param("cpu", id="cpu"), _cuda_param()]


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param.startswith("cuda:"):      # AG_CUDA_DEVICE=cuda:1: the same tests on another GPU
        ag.cuda.set_device(request.param)
    return request.param


@pytest.fixture(autouse=True)
def _restore_global_state():
    yield
    ag.set_default_dtype(ag.float32)
    ag.set_default_device("cpu")
    ag.cuda.set_sync_debug_mode("default")
    if _CUDA_DEVICE.startswith("cuda:"):
        ag.cuda.set_device(0)
    from autograd_gpu.backends import _backends
    for b in _backends.values():        # a failed device-side check must not surface in the next test
        b.discard_checks()
