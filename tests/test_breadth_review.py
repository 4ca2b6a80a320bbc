"""Review of issue 26's breadth fixes against PyTorch: the norm layers' bias= shows in their repr as
PyTorch's does."""
import pytest

import autograd_gpu.nn as nn

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name, args, kw", [
    ("BatchNorm1d", (4,), {}), ("BatchNorm2d", (3,), {"momentum": None}), ("InstanceNorm1d", (4,), {"affine": True}),
    ("InstanceNorm2d", (2,), {"affine": True, "track_running_stats": True}), ("GroupNorm", (2, 4), {}),
    ("GroupNorm", (1, 3), {"affine": False}), ("InstanceNorm2d", (2,), {})])
@pytest.mark.parametrize("bias", [True, False])
def test_norm_repr_names_bias_false_as_pytorch(name, args, kw, bias):
    assert repr(getattr(nn, name)(*args, bias=bias, **kw)) == repr(getattr(torch.nn, name)(*args, bias=bias, **kw))
