"""The op table (autograd_gpu.testing.op_db) run on every device: forward against NumPy, gradients
against finite differences (first and second order), CUDA against CPU."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.testing.helpers import make_arrays, assert_close, to_numpy
from autograd_gpu.testing.op_db import OP_DB

CASES = [pytest.param(i, d, id=f"{i.name}-{d}") for i in OP_DB for d in i.dtypes]
GRAD = [pytest.param(i, id=i.name) for i in OP_DB if i.grad]
GRADGRAD = [pytest.param(i, id=i.name) for i in OP_DB if i.gradgrad]


def _complex(info):
    return info.dtypes[0].kind == "c"


def _double(info):
    """The dtype finite differences run in: complex128 for complex entries, else float64."""
    return ag.complex128 if _complex(info) else ag.float64


def _single(info):
    return ag.complex64 if _complex(info) else ag.float32


def _loss(o):
    """A real scalar of an output (real and imaginary parts both count), for backward()."""
    return (o.real + o.imag).sum() if o.dtype.kind == "c" else o.sum()


def _inputs(info, shapes, dtype, device, requires_grad=False, seed=0):
    arrays = make_arrays(shapes, dtype, info.domain, info.avoid, seed=seed, kinds=info.kinds)
    tensors = []
    for a in arrays:
        rg = requires_grad and a.dtype.kind in "fc"
        tensors.append(ag.tensor(a, device=device, requires_grad=rg))
    return arrays, tensors


@pytest.mark.parametrize("info,dtype", CASES)
def test_forward_matches_numpy(info, dtype, device):
    for shapes in info.samples:
        arrays, tensors = _inputs(info, shapes, dtype, device)
        got = info.op(*tensors)
        if info.ref is not None:
            assert_close(got, info.ref(*arrays), **info.tol.get(dtype, {}))


@pytest.mark.parametrize("info", GRAD)
def test_gradcheck(info, device):
    for shapes in info.samples:
        _, xs = _inputs(info, shapes, _double(info), device, requires_grad=True)
        assert ag.autograd.gradcheck(info.op, xs)


@pytest.mark.parametrize("info", GRADGRAD)
def test_gradgradcheck(info, device):
    for shapes in info.samples:
        _, xs = _inputs(info, shapes, _double(info), device, requires_grad=True)
        if not any(x.requires_grad and x.numel() for x in xs):
            continue
        assert ag.autograd.gradgradcheck(info.op, xs)


@pytest.mark.gpu
@pytest.mark.parametrize("info", [pytest.param(i, id=i.name) for i in OP_DB])
def test_cuda_matches_cpu(info):
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing")
    for shapes in info.samples:
        _, cpu = _inputs(info, shapes, _single(info), "cpu", requires_grad=info.grad)
        _, gpu = _inputs(info, shapes, _single(info), "cuda", requires_grad=info.grad)
        out_c, out_g = info.op(*cpu), info.op(*gpu)
        outs_c = out_c if isinstance(out_c, tuple) else (out_c,)
        outs_g = out_g if isinstance(out_g, tuple) else (out_g,)
        assert len(outs_g) == len(outs_c) and all(o.device == "cuda:0" for o in outs_g)
        for g, c in zip(outs_g, outs_c):           # outputs may differ in shape (split)
            np.testing.assert_allclose(to_numpy(g), to_numpy(c), rtol=1e-4, atol=1e-5)
        if info.grad:
            ag.autograd.backward([_loss(o) for o in outs_c])
            ag.autograd.backward([_loss(o) for o in outs_g])
            for c, g in zip(cpu, gpu):
                if c.requires_grad and c.grad is not None:
                    np.testing.assert_allclose(g.grad.numpy(), c.grad.numpy(), rtol=1e-4, atol=1e-5)
