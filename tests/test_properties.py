"""Property-based checks (hypothesis) over the op table: random shapes (broadcastable pairs, 0-d,
size 0), axes and values, every op gradchecked in float64.

Shape-agnostic ops (elementwise unary, broadcasting binary) draw their shapes; reductions draw an
axis and keepdims; every other op keeps its table shapes and draws its values. The example count per
op is AG_FUZZ_EXAMPLES (default small, for CI); run with AG_FUZZ_EXAMPLES=200 to fuzz for real."""
import os

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st

import autograd_gpu as ag
from autograd_gpu.testing.helpers import make_arrays, assert_close
from autograd_gpu.ops.registry import UNARY as UNARY_SHAPES, BINARY as BINARY_SHAPES
from autograd_gpu.testing.op_db import OP_DB

EXAMPLES = int(os.environ.get("AG_FUZZ_EXAMPLES", "4"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 10,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

dims = st.integers(0, 3)
sizes = st.integers(0, 4)


@st.composite
def shapes(draw, min_dims=0):
    return tuple(draw(st.lists(sizes, min_size=min_dims, max_size=3)))


@st.composite
def broadcastable_pair(draw):
    """Two shapes NumPy can broadcast: a base shape, then each side drops leading dims and turns
    some dims into 1."""
    base = draw(shapes())
    out = []
    for _ in range(2):
        k = draw(st.integers(0, len(base)))
        s = [1 if draw(st.booleans()) else d for d in base[k:]]
        out.append(tuple(s))
    return tuple(out)


def _inputs(info, shapes_, seed, device="cpu"):
    dtype = np.complex128 if info.dtypes[0].kind == "c" else np.float64      # complex entries: complex inputs
    arrays = make_arrays(shapes_, dtype, info.domain, info.avoid, seed=seed, kinds=info.kinds)
    xs = [ag.tensor(a, device=device, requires_grad=a.dtype.kind in "fc") for a in arrays]
    return arrays, xs


# gradients that jump where a / b is a whole number (fmod, remainder: -trunc(a / b), -floor(a / b) for b): random
# values land next to a jump, where finite differences mean nothing; the op table's fixed samples check them
_JUMPS_IN_A_RATIO = frozenset({"fmod", "fmod_negative", "mod", "remainder_negative"})


def _check(info, shapes_, seed):
    arrays, xs = _inputs(info, shapes_, seed)
    if info.ref is not None:
        assert_close(info.op(*xs), info.ref(*arrays))
    if info.grad and info.name not in _JUMPS_IN_A_RATIO and any(x.requires_grad and x.numel() for x in xs):
        assert ag.autograd.gradcheck(info.op, xs)


UNARY = [pytest.param(i, id=i.name) for i in OP_DB if i.samples == UNARY_SHAPES and i.kinds is None]
BINARY = [pytest.param(i, id=i.name) for i in OP_DB if i.samples == BINARY_SHAPES and i.kinds is None]
OTHER = [pytest.param(i, id=i.name) for i in OP_DB if i.samples not in (UNARY_SHAPES, BINARY_SHAPES) or i.kinds]


@pytest.mark.parametrize("info", UNARY)
@SETTINGS
@given(shape=shapes(), seed=st.integers(0, 2**16))
def test_unary_ops_on_random_shapes(info, shape, seed):
    _check(info, (shape,), seed)


@pytest.mark.parametrize("info", BINARY)
@SETTINGS
@given(pair=broadcastable_pair(), seed=st.integers(0, 2**16))
def test_binary_ops_on_random_broadcastable_shapes(info, pair, seed):
    _check(info, pair, seed)


@pytest.mark.parametrize("info", OTHER)
@SETTINGS
@given(seed=st.integers(0, 2**16))
def test_every_other_op_on_random_values(info, seed):
    for s in info.samples:
        _check(info, s, seed)


REDUCTIONS = {
    "sum": (ag.sum, np.sum),
    "mean": (ag.mean, np.mean),
    "max": (ag.max, np.max),
    "min": (ag.min, np.min),
    "prod": (ag.prod, np.prod),
    "var": (ag.var, np.var),
    "std": (ag.std, np.std),
    "logsumexp": (ag.logsumexp, lambda a, axis, keepdims: np.log(np.sum(np.exp(a), axis=axis, keepdims=keepdims))),
    "norm": (lambda x, axis, keepdims: ag.norm(x, axis=axis, keepdims=keepdims),
             lambda a, axis, keepdims: np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))),
}


@pytest.mark.parametrize("name", list(REDUCTIONS))
@SETTINGS
@given(shape=shapes(min_dims=1), data=st.data(), keepdims=st.booleans(), seed=st.integers(0, 2**16))
def test_reductions_over_random_axes(name, shape, data, keepdims, seed):
    op, ref = REDUCTIONS[name]
    nd = len(shape)
    axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                               st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True).map(tuple)))
    reduced = range(nd) if axis is None else ([axis % nd] if isinstance(axis, int) else axis)
    n = int(np.prod([shape[d] for d in reduced]))
    if n == 0 and name in ("max", "min", "var", "std", "mean"):
        return                                             # empty reductions have no value (NumPy warns or raises)
    a = make_arrays([shape], np.float64, (0.5, 1.5) if name == "prod" else (-2, 2), seed=seed)[0]
    x = ag.tensor(a, requires_grad=True)
    assert_close(op(x, axis=axis, keepdims=keepdims), ref(a, axis=axis, keepdims=keepdims))
    if a.size and name != "norm" or a.size and np.any(a):
        assert ag.autograd.gradcheck(lambda t: op(t, axis=axis, keepdims=keepdims), [x])
