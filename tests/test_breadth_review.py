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


@pytest.mark.parametrize("name, n", [("Conv1d", 1), ("Conv2d", 2), ("Conv3d", 3)])
@pytest.mark.parametrize("padding_mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv_repr_with_padding_mode_as_pytorch(name, n, padding_mode):
    """PyTorch prints padding_mode=reflect, unquoted."""
    kw = {"padding": 1, "padding_mode": padding_mode, "bias": False}
    assert repr(getattr(nn, name)(2, 3, 3, **kw)) == repr(getattr(torch.nn, name)(2, 3, 3, **kw))
