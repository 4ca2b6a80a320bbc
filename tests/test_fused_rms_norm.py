"""F.rms_norm's fused node (RmsNorm: backend.rms_norm / rms_norm_backward) equals the composed ops it replaces,
x * rsqrt(mean(x^2) + eps) * w, in values and gradients (float32 and float64, both devices, odd shapes), differentiates
again through its recorded backward, and on CUDA makes two launches forward and three backward."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu.autograd import gradcheck, gradgradcheck

SHAPES = [((4, 6), (6,)), ((2, 3, 5), (5,)), ((2, 3, 4), (3, 4)), ((1, 7), (7,)), ((0, 4), (4,))]


def _composed(x, w, axes, eps):
    y = x * ag.rsqrt((x * x).mean(axes, keepdims=True) + eps)
    return y if w is None else y * w


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape, ns", SHAPES)
@pytest.mark.parametrize("weighted", [True, False])
def test_fused_rms_norm_equals_the_composed_ops(device, dtype, shape, ns, weighted):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape).astype(dtype)
    wa = rng.standard_normal(ns).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    axes = tuple(range(len(shape) - len(ns), len(shape)))
    got, want = [], []
    for fn, out in ((lambda x, w: F.rms_norm(x, ns, w, eps=1e-5), got), (lambda x, w: _composed(x, w, axes, 1e-5), want)):
        x = ag.tensor(a, device=device, requires_grad=True)
        w = ag.tensor(wa, device=device, requires_grad=True) if weighted else None
        y = fn(x, w)
        y.backward(ag.tensor(g, device=device))
        out += [y.numpy(), x.grad.numpy()] + ([w.grad.numpy()] if weighted else [])
    tol = 2e-5 if dtype == "float32" else 1e-12
    for u, v in zip(got, want):
        assert u.dtype == v.dtype and u.shape == v.shape
        np.testing.assert_allclose(u, v, rtol=tol, atol=tol)


@pytest.mark.gpu
def test_fused_rms_norm_on_a_non_contiguous_input(device):
    a = np.random.default_rng(1).standard_normal((6, 8))
    x = ag.tensor(a, device=device, requires_grad=True)
    xt = x.T                                          # (8, 6), strided
    F.rms_norm(xt, (6,)).sum().backward()
    x2 = ag.tensor(a, device=device, requires_grad=True)
    _composed(x2.T, None, (1,), float(np.finfo(np.float64).eps)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), x2.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_fused_rms_norm_differentiates_twice():
    rng = np.random.default_rng(2)
    x = ag.tensor(rng.standard_normal((3, 5)), requires_grad=True)
    w = ag.tensor(rng.standard_normal(5), requires_grad=True)
    f = lambda x, w: F.rms_norm(x, (5,), w, eps=1e-3)
    assert gradcheck(f, (x, w)) and gradgradcheck(f, (x, w))


def test_fused_rms_norm_under_vmap_equals_a_loop():
    from autograd_gpu import func
    rng = np.random.default_rng(3)
    xs = ag.tensor(rng.standard_normal((4, 3, 5)))
    ws = ag.tensor(rng.standard_normal((4, 5)))
    got = func.vmap(lambda x, w: F.rms_norm(x, (5,), w))(xs, ws)
    want = np.stack([F.rms_norm(xs[i], (5,), ws[i]).numpy() for i in range(4)])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12)


@pytest.mark.gpu
def test_fused_rms_norm_launches(device):
    from autograd_gpu.backends import cupy_backend
    if not device.startswith("cuda") or not cupy_backend.simulated():
        pytest.skip("launches are counted on the CuPy stand-in (AG_CUDA=standin)")
    if ag.device(device).index != 0:
        pytest.skip("the fused backwards run on GPU 0 only (a GPU other than 0 takes the apply path)")
    from autograd_gpu.testing.cupy_standin import count_launches
    rng = np.random.default_rng(4)
    x = ag.tensor(rng.standard_normal((16, 32)).astype("float32"), device=device, requires_grad=True)
    w = ag.tensor(np.ones(32, "float32"), device=device, requires_grad=True)
    g = ag.tensor(rng.standard_normal((16, 32)).astype("float32"), device=device)
    for _ in range(2):                                 # kernels built in the first round
        x.grad = w.grad = None
        with count_launches() as fwd:
            y = F.rms_norm(x, (32,), w)
        with count_launches() as bwd:
            y.backward(g)
    assert fwd.launches == 2 and bwd.launches == 3, (fwd.names(), bwd.names())
