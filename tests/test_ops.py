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
BF16 = [pytest.param(i, id=f"{i.name}-bfloat16") for i in OP_DB if i.bfloat16]
NO_BF16 = [pytest.param(i, id=i.name) for i in OP_DB if i.no_bfloat16 is not None]
# bfloat16 keeps 8 significant bits (eps 2**-7): two eps, relative and absolute (inputs are of order 1),
# the tolerance PyTorch's own op tests give bfloat16
BF16_TOL = {"rtol": 1.6e-2, "atol": 1.6e-2}


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


def _widened(arrays):
    """The bfloat16 inputs as float32 arrays of the same values (the reference computes on these)."""
    return [a.astype(np.float32) if a.dtype == ag.bfloat16 else a for a in arrays]


def _outputs(o):
    return o if isinstance(o, tuple) else (o,)


@pytest.mark.parametrize("info", BF16)
def test_forward_bfloat16(info, device):
    """Every float op in bfloat16: float results are bfloat16 and match the float32 reference on the
    same (bfloat16) inputs within bfloat16's tolerance; other results (indices, bools) keep their dtype."""
    for shapes in info.samples:
        arrays, tensors = _inputs(info, shapes, ag.bfloat16, device)
        got = _outputs(info.op(*tensors))
        if info.ref is None:
            assert all(g.dtype in (ag.bfloat16, ag.int64, ag.bool_) for g in got), [g.dtype for g in got]
            continue
        for g, e in zip(got, _outputs(info.ref(*_widened(arrays)))):
            e = np.asarray(e)
            assert g.dtype == (ag.bfloat16 if e.dtype == np.float32 else e.dtype), f"dtype {g.dtype} for {e.dtype}"
            assert_close(g.float() if g.dtype == ag.bfloat16 else g, e.astype(g.dtype if g.dtype != ag.bfloat16 else
                         np.float32), **info.tol.get(ag.bfloat16, BF16_TOL))


@pytest.mark.parametrize("info", [p for p in BF16 if p.values[0].grad])
def test_backward_bfloat16(info, device):
    """Gradients of bfloat16 inputs are bfloat16 and match float32's on the same values."""
    for shapes in info.samples:
        arrays, low = _inputs(info, shapes, ag.bfloat16, device, requires_grad=True)
        wide = [ag.tensor(a, device=device, requires_grad=t.requires_grad) for a, t in zip(_widened(arrays), low)]
        for xs in (low, wide):
            outs = [o for o in _outputs(info.op(*xs)) if o.requires_grad]
            if outs:
                ag.autograd.backward([o.float().sum() for o in outs])
        for lo, wi in zip(low, wide):
            if lo.requires_grad and wi.grad is not None:
                assert lo.grad.dtype == ag.bfloat16
                assert_close(lo.grad.float(), wi.grad.numpy(), **info.tol.get(ag.bfloat16, BF16_TOL))


@pytest.mark.parametrize("info", NO_BF16)
def test_bfloat16_refused_with_a_type_error(info, device):
    """Ops that cannot take bfloat16 say so (the entry's no_bfloat16 gives the reason) instead of
    computing in another dtype."""
    shapes = info.samples[0]
    _, tensors = _inputs(info, shapes, ag.bfloat16, device)
    with pytest.raises(TypeError, match="bfloat16"):
        info.op(*tensors)


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
