import pytest

import autograd_gpu as ag


def _cuda_param():
    reason = None
    try:
        if not ag.cuda.is_available():
            reason = "CuPy or a CUDA GPU is missing"
    except Exception as e:  # a broken CUDA install must skip, not error
        reason = f"CUDA unusable: {e}"
    marks = [pytest.mark.gpu] + ([pytest.mark.skip(reason=reason)] if reason else [])
    return pytest.param("cuda", marks=marks, id="cuda")


DEVICES = [pytest.param("cpu", id="cpu"), _cuda_param()]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture(autouse=True)
def _restore_global_state():
    yield
    ag.set_default_dtype(ag.float32)
    ag.set_default_device("cpu")
