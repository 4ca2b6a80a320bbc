"""The convolution and pooling kernels (backends/kernels/conv.py) and the fused product backward
(backends/kernels/grads.py) give what the unfused ops give: max pooling's values, first-max indices and
gradients (ties, NaN, -inf, tiled and untiled windows, strides, dilation), convolutions with the bias after
the product and the stride-1 input gradient as one convolution (CUDA's ``conv_lean`` formulation, also run
on the CPU), and x * w's two gradients with w's total summed in place; float32 and float64, both devices,
empty, one-row and non-contiguous inputs. On the stand-in: one launch per pooling layer each way, one per
x * w backward."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu.backends.kernels.conv import NumpyConv

DTYPES = ["float32", "float64"]
POOLS = {"k2": ((2, 3, 6, 8), dict(kernel_size=2)),
         "k2-untiled": ((2, 2, 7, 5), dict(kernel_size=2)),
         "k3-s3": ((1, 2, 9, 7), dict(kernel_size=3, stride=3)),
         "k3-s1-overlap": ((1, 2, 5, 6), dict(kernel_size=3, stride=1)),
         "dilated": ((1, 2, 7, 8), dict(kernel_size=(2, 2), stride=(3, 4), dilation=2)),
         "padded": ((1, 2, 5, 5), dict(kernel_size=3, stride=2, padding=1)),
         "one-row": ((1, 1, 2, 6), dict(kernel_size=2)),
         "empty": ((0, 2, 4, 4), dict(kernel_size=2))}


def _pool_case(shape, kw, dtype, device, special):
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 3, shape).astype(dtype)          # small integers: many ties
    if special and a.size:
        flat = a.reshape(-1)
        flat[::7] = np.nan
        flat[3::11] = -np.inf
    x = ag.tensor(a, device=device, requires_grad=True)
    y = F.max_pool2d(x, **kw)
    g = rng.standard_normal(y.shape).astype(dtype)
    y.backward(ag.tensor(g, device=device))
    _, idx = F.max_pool2d(ag.tensor(a, device=device), return_indices=True, **kw)
    return y.numpy(), x.grad.numpy(), idx.numpy()


@pytest.mark.parametrize("special", [False, True], ids=["ties", "nan-inf"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(POOLS))
def test_max_pool_matches_cpu(case, dtype, special, device):
    shape, kw = POOLS[case]
    want = _pool_case(shape, kw, dtype, "cpu", special)
    got = _pool_case(shape, kw, dtype, device, special)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)


def test_max_pool_non_contiguous(device):
    a = np.random.default_rng(0).standard_normal((2, 6, 3, 8)).astype("float32")
    out = []
    for dev in ("cpu", device):
        x = ag.tensor(a, device=dev, requires_grad=True)
        y = F.max_pool2d(x.transpose(1, 2), 2)
        (y * y).sum().backward()
        out.append((y.numpy(), x.grad.numpy()))
    np.testing.assert_array_equal(out[1][0], out[0][0])
    np.testing.assert_array_equal(out[1][1], out[0][1])


CONVS = {"plain": ((2, 3, 7, 6), (4, 3, 3, 3), {}),
         "pad": ((2, 3, 6, 6), (4, 3, 3, 3), dict(padding=1)),
         "same-dilated": ((1, 2, 7, 8), (3, 2, 3, 2), dict(padding="same", dilation=2)),
         "groups": ((2, 4, 5, 5), (6, 2, 3, 3), dict(padding=(1, 0), groups=2)),
         "stride2": ((1, 3, 7, 7), (2, 3, 3, 3), dict(stride=2, padding=1)),
         "one-row": ((1, 2, 1, 5), (3, 2, 1, 3), {}),
         "empty": ((0, 2, 4, 4), (3, 2, 3, 3), {})}
TOL = {"float32": dict(rtol=1e-5, atol=1e-5), "float64": dict(rtol=1e-12, atol=1e-12)}


def _conv_case(xs, ws, kw, dtype, device):
    rng = np.random.default_rng(5)
    a, w, b = (rng.standard_normal(s).astype(dtype) for s in (xs, ws, ws[:1]))
    x, wt, bt = (ag.tensor(v, device=device, requires_grad=True) for v in (a, w, b))
    y = F.conv2d(x, wt, bt, **kw)
    y.backward(ag.tensor(rng.standard_normal(y.shape).astype(dtype), device=device))
    return y.numpy(), x.grad.numpy(), wt.grad.numpy(), bt.grad.numpy()


@pytest.mark.parametrize("lean", [False, True], ids=["cpu-form", "lean-form"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", list(CONVS))
def test_conv_matches_cpu(case, dtype, lean, device, monkeypatch):
    xs, ws, kw = CONVS[case]
    want = _conv_case(xs, ws, kw, dtype, "cpu")
    monkeypatch.setattr(NumpyConv, "conv_lean", lean)      # the CUDA formulation on the CPU too
    got = _conv_case(xs, ws, kw, dtype, device)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, **TOL[dtype])


def test_conv_lean_gradgrad(monkeypatch):
    monkeypatch.setattr(NumpyConv, "conv_lean", True)
    rng = np.random.default_rng(1)
    x = ag.tensor(rng.standard_normal((1, 2, 5, 5)), requires_grad=True)
    w = ag.tensor(rng.standard_normal((3, 2, 3, 3)), requires_grad=True)
    b = ag.tensor(rng.standard_normal(3), requires_grad=True)
    assert ag.autograd.gradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1), (x, w, b))
    assert ag.autograd.gradgradcheck(lambda x, w: F.conv2d(x, w, padding=1), (x, w))


@pytest.mark.parametrize("dtype", DTYPES)
def test_mul_grads_chain(dtype, device):
    """x * w with w used at every step (its total summed in place), w on either side, and an x of one row."""
    rng = np.random.default_rng(2)
    a, c = rng.standard_normal((2, 1, 5)).astype(dtype)
    out = []
    for dev in ("cpu", device):
        x, w = (ag.tensor(v, device=dev, requires_grad=True) for v in (a, c))
        h = x
        for i in range(6):
            h = ag.tanh(h * w if i % 2 else w * h)
        h.sum().backward()
        out.append((x.grad.numpy(), w.grad.numpy()))
    for got, want in zip(out[1], out[0]):
        np.testing.assert_allclose(got, want, **TOL[dtype])


def test_mul_grads_create_graph(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    w = ag.tensor([3.0, -1.0], device=device, requires_grad=True)
    y = (x * w * w).sum()
    gw, = ag.autograd.grad(y, (w,), create_graph=True)
    np.testing.assert_allclose(gw.numpy(), [6.0, -4.0])
    gw.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 4.0])
    x.grad = w.grad = None
    (x * w * w).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [6.0, -4.0])
    np.testing.assert_allclose(x.grad.numpy(), [9.0, 1.0])


@pytest.mark.gpu
def test_launches(device):
    if device == "cpu":
        pytest.skip("launches are counted on CUDA")
    if ag.device(device).index != 0:
        # on another GPU every backward goes through Function.apply, which makes that GPU current (the
        # array fast path needs no context switch): its fused backwards are not used there yet
        pytest.skip("the fused backwards run on GPU 0 only (a GPU other than 0 takes the apply path)")
    from autograd_gpu.backends import cupy_backend
    if not cupy_backend.simulated():
        pytest.skip("launches are counted on the CuPy stand-in (AG_CUDA=standin); real CuPy has no counter")
    from autograd_gpu.testing.cupy_standin import count_launches
    a = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype("float32")
    x = ag.tensor(a, device=device, requires_grad=True)
    for _ in range(2):
        x.grad = None
        with count_launches() as fwd:
            y = F.max_pool2d(x, 2)
        g = ag.ones_like(y)
        with count_launches() as bwd:
            y.backward(g)
    assert fwd.launches == 1 and bwd.launches == 1, (fwd.events, bwd.events)
    w = ag.tensor(a[0, 0], device=device, requires_grad=True)
    h = ag.tensor(a[1, 0], device=device, requires_grad=True)
    for _ in range(2):
        w.grad = h.grad = None
        y = ((h * w) * w).sum()
        with count_launches() as bwd:
            y.backward()
    # ones, Sum's broadcast (a view), two Mul backwards (one kernel each: the second sums into w's total
    # only when it already owns one, so here 2 kernels + the engine's add)
    assert bwd.launches <= 4, bwd.events
