"""OP_DB: one entry per op, driving the forward, gradcheck, gradgradcheck and cross-device tests.

Each entry names the op (a call on Tensors), its NumPy reference (the same call on arrays), input
shapes (incl. broadcasting, 0-d and size-0 cases), the domain inputs are drawn from and points to
keep away from (kinks, poles). Keyword arguments go in a lambda so ``op`` and ``ref`` stay plain calls.
"""
import functools
import math
import operator
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import autograd_gpu as ag
from autograd_gpu.ops import registry
from autograd_gpu.testing import refs


@dataclass(frozen=True)
class OpInfo:
    name: str                            # test id
    op: Callable                         # Tensors -> Tensor: ag function, method or operator
    ref: Callable | None                 # the same call on NumPy arrays; None = no forward check
    samples: tuple                       # each sample is a tuple of input shapes
    domain: tuple = (-2.0, 2.0)          # inputs are drawn from here...
    avoid: tuple = ()                    # ...and kept away from these points (kinks, poles)
    dtypes: tuple = (ag.float32, ag.float64)
    grad: bool = True                    # gradcheck
    gradgrad: bool = True                # gradgradcheck
    tol: dict = field(default_factory=dict)   # {dtype: {"rtol": .., "atol": ..}} if defaults are too tight
    kinds: tuple | None = None           # per input: None (float), "int", "bool", "index:N" (ints in [0, N));
    #                                      "real" with complex dtypes: a real input of their precision


def _erf_ref(a):
    return np.vectorize(math.erf, otypes=[a.dtype])(a) if a.size else a.copy()


def _gelu_ref(a):
    return (a * (1 + _erf_ref(a / np.sqrt(2).astype(a.dtype))) / 2).astype(a.dtype)


def _sigmoid_ref(a):
    return (1 / (1 + np.exp(-a))).astype(a.dtype)


def _softplus_ref(a):
    return np.logaddexp(0, a).astype(a.dtype)


def _lse_ref(a, axis=None, keepdims=False):
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


UNARY_SHAPES = (((3, 4),), ((),), ((0, 3),), ((2, 1, 3),))
BINARY_SHAPES = (((2, 3), (2, 3)), ((2, 3), (3,)), ((), (4,)), ((3, 1), (1, 4)), ((2, 0), (2, 1)))
F = np.float32

ELEMENTWISE = [
    OpInfo("add", operator.add, np.add, BINARY_SHAPES),
    OpInfo("sub", operator.sub, np.subtract, BINARY_SHAPES),
    OpInfo("mul", operator.mul, np.multiply, BINARY_SHAPES),
    OpInfo("div", operator.truediv, np.divide, BINARY_SHAPES, avoid=(0.0,)),
    OpInfo("pow", operator.pow, np.power, (((2, 3), (2, 3)), ((3,), ())), domain=(0.5, 2.0)),
    OpInfo("add_scalar", lambda x: x + 1.5, lambda a: a + a.dtype.type(1.5), UNARY_SHAPES),
    OpInfo("radd_scalar", lambda x: 2 + x, lambda a: 2 + a, UNARY_SHAPES),
    OpInfo("rsub_scalar", lambda x: 2.5 - x, lambda a: a.dtype.type(2.5) - a, UNARY_SHAPES),
    OpInfo("mul_scalar", lambda x: x * 3, lambda a: a * 3, UNARY_SHAPES),
    OpInfo("rdiv_scalar", lambda x: 1.0 / x, lambda a: a.dtype.type(1.0) / a, UNARY_SHAPES, avoid=(0.0,)),
    OpInfo("div_scalar", lambda x: x / 4, lambda a: a / 4, UNARY_SHAPES),
    OpInfo("pow_scalar", lambda x: x ** 3, lambda a: a ** 3, UNARY_SHAPES),
    OpInfo("pow_half", lambda x: x ** 0.5, lambda a: a ** a.dtype.type(0.5), UNARY_SHAPES, domain=(0.2, 3.0)),
    OpInfo("pow_neg", lambda x: x ** -2, lambda a: a ** a.dtype.type(-2.0), UNARY_SHAPES, domain=(0.3, 3.0)),
    OpInfo("rpow_scalar", lambda x: 2.0 ** x, lambda a: a.dtype.type(2.0) ** a, UNARY_SHAPES),
    OpInfo("neg", operator.neg, np.negative, UNARY_SHAPES),
    OpInfo("abs", ag.abs, np.abs, UNARY_SHAPES, avoid=(0.0,)),
    OpInfo("expm1", ag.expm1, np.expm1, UNARY_SHAPES),
    OpInfo("log", ag.log, np.log, UNARY_SHAPES, domain=(0.1, 4.0)),
    OpInfo("log1p", ag.log1p, np.log1p, UNARY_SHAPES, domain=(-0.5, 3.0)),
    OpInfo("sqrt", ag.sqrt, np.sqrt, UNARY_SHAPES, domain=(0.1, 4.0)),
    OpInfo("rsqrt", ag.rsqrt, lambda a: 1 / np.sqrt(a), UNARY_SHAPES, domain=(0.2, 4.0)),
    OpInfo("square", ag.square, np.square, UNARY_SHAPES),
    OpInfo("sin", ag.sin, np.sin, UNARY_SHAPES),
    OpInfo("cos", ag.cos, np.cos, UNARY_SHAPES),
    OpInfo("tan", ag.tan, np.tan, UNARY_SHAPES, domain=(-1.2, 1.2)),
    OpInfo("tanh", ag.tanh, np.tanh, UNARY_SHAPES),
    OpInfo("sigmoid", ag.sigmoid, _sigmoid_ref, UNARY_SHAPES, domain=(-6.0, 6.0)),
    OpInfo("relu", ag.relu, lambda a: np.maximum(a, 0), UNARY_SHAPES, avoid=(0.0,)),
    OpInfo("leaky_relu", ag.leaky_relu, lambda a: np.where(a > 0, a, a * a.dtype.type(0.01)), UNARY_SHAPES, avoid=(0.0,)),
    OpInfo("leaky_relu_slope", lambda x: ag.leaky_relu(x, 0.2), lambda a: np.where(a > 0, a, a * a.dtype.type(0.2)),
           UNARY_SHAPES, avoid=(0.0,)),
    OpInfo("elu", ag.elu, lambda a: np.where(a > 0, a, np.expm1(a)), UNARY_SHAPES, avoid=(0.0,)),
    OpInfo("gelu", ag.gelu, _gelu_ref, UNARY_SHAPES, domain=(-4.0, 4.0)),
    OpInfo("gelu_tanh", lambda x: ag.gelu(x, approximate="tanh"),
           lambda a: (0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))).astype(a.dtype), UNARY_SHAPES),
    OpInfo("silu", ag.silu, lambda a: a * _sigmoid_ref(a), UNARY_SHAPES),
    OpInfo("softplus", ag.softplus, _softplus_ref, UNARY_SHAPES, domain=(-5.0, 5.0)),
    OpInfo("softplus_beta", lambda x: ag.softplus(x, beta=2.0, threshold=3.0),
           lambda a: np.where(2 * a > 3, a, np.logaddexp(0, 2 * a) / 2).astype(a.dtype), UNARY_SHAPES, avoid=(1.5,)),
    OpInfo("erf", ag.erf, _erf_ref, UNARY_SHAPES),
    OpInfo("sign", ag.sign, np.sign, UNARY_SHAPES, grad=False, gradgrad=False),   # constant: no gradient
    OpInfo("clamp", lambda x: ag.clamp(x, -0.5, 1.0), lambda a: np.clip(a, -0.5, 1.0), UNARY_SHAPES, avoid=(-0.5, 1.0)),
    OpInfo("clamp_min", lambda x: x.clamp(min=0.1), lambda a: np.maximum(a, a.dtype.type(0.1)), UNARY_SHAPES, avoid=(0.1,)),
    OpInfo("clamp_tensor", lambda x, lo: ag.clamp(x, lo), np.maximum, BINARY_SHAPES[:2], avoid=(0.0,)),
    OpInfo("maximum", ag.maximum, np.maximum, BINARY_SHAPES),
    OpInfo("minimum", ag.minimum, np.minimum, BINARY_SHAPES),
    OpInfo("where", lambda c, a, b: ag.where(c, a, b), np.where, (((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (2,), ())),
           kinds=("bool", None, None)),
    OpInfo("where_scalar", lambda c, a: ag.where(c, a, 0.0), lambda c, a: np.where(c, a, a.dtype.type(0)),
           (((2, 3), (2, 3)), ((3,), ())), kinds=("bool", None)),
    OpInfo("floordiv", operator.floordiv, np.floor_divide, (((4,), (4,)),),
           domain=(1.0, 5.0), grad=False, gradgrad=False),   # piecewise constant: no gradient
    OpInfo("mod", operator.mod, np.remainder, (((4,), (4,)),), domain=(1.0, 5.0), grad=False, gradgrad=False),
    OpInfo("lt", operator.lt, np.less, BINARY_SHAPES, grad=False, gradgrad=False),
    OpInfo("ge", operator.ge, np.greater_equal, BINARY_SHAPES, grad=False, gradgrad=False),
    OpInfo("eq", operator.eq, np.equal, BINARY_SHAPES[:2], grad=False, gradgrad=False),
]

REDUCTIONS = [
    OpInfo("sum", ag.sum, np.sum, UNARY_SHAPES),
    OpInfo("sum_dim", lambda x: x.sum(dim=1), lambda a: a.sum(axis=1), (((2, 3, 4),), ((2, 0),))),
    OpInfo("sum_keepdim", lambda x: x.sum(dim=1, keepdim=True), lambda a: a.sum(axis=1, keepdims=True), (((2, 3, 4),),)),
    OpInfo("sum_axes", lambda x: ag.sum(x, axis=(0, -1)), lambda a: a.sum(axis=(0, -1)), (((2, 3, 4),),)),
    OpInfo("mean", ag.mean, np.mean, UNARY_SHAPES[:2] + UNARY_SHAPES[3:]),
    OpInfo("mean_dim", lambda x: x.mean(-1, keepdims=True), lambda a: a.mean(-1, keepdims=True), (((2, 3, 4),),)),
    OpInfo("var", ag.var, np.var, (((3, 4),), ((2, 1, 3),))),
    OpInfo("var_ddof", lambda x: x.var(dim=0, correction=1), lambda a: a.var(axis=0, ddof=1), (((4, 3),),)),
    OpInfo("std", lambda x: ag.std(x, axis=1, keepdims=True), lambda a: a.std(axis=1, keepdims=True), (((3, 4),),)),
    OpInfo("max", ag.max, np.max, (((3, 4),), ((),))),
    OpInfo("max_dim", lambda x: x.max(dim=1), lambda a: a.max(axis=1), (((3, 4),), ((2, 3, 4),))),
    OpInfo("min_keepdim", lambda x: x.min(axis=0, keepdims=True), lambda a: a.min(axis=0, keepdims=True), (((3, 4),),)),
    OpInfo("prod", ag.prod, np.prod, (((3, 4),), ((),), ((0,),)), domain=(0.5, 1.5)),
    OpInfo("prod_dim", lambda x: x.prod(dim=1), lambda a: a.prod(axis=1), (((3, 4),),), domain=(-1.5, 1.5)),
    OpInfo("logsumexp", ag.logsumexp, _lse_ref, (((3, 4),), ((),))),
    OpInfo("logsumexp_dim", lambda x: x.logsumexp(dim=1), lambda a: _lse_ref(a, axis=1), (((3, 4),), ((2, 3, 4),))),
    OpInfo("norm", ag.norm, lambda a: np.linalg.norm(a.reshape(-1)), (((3, 4),), ((5,),))),
    OpInfo("norm_dim", lambda x: x.norm(dim=1, keepdim=True), lambda a: np.linalg.norm(a, axis=1, keepdims=True), (((3, 4),),)),
    OpInfo("norm_p1", lambda x: ag.norm(x, 1), lambda a: np.abs(a).sum(), (((3, 4),),), avoid=(0.0,)),
    OpInfo("norm_p3", lambda x: ag.norm(x, p=3, dim=0), lambda a: (np.abs(a) ** 3).sum(0) ** (1 / 3), (((3, 4),),), avoid=(0.0,)),
    OpInfo("norm_inf", lambda x: ag.norm(x, math.inf), lambda a: np.abs(a).max(), (((3, 4),),), avoid=(0.0,)),
    OpInfo("cumsum", lambda x: x.cumsum(dim=1), lambda a: a.cumsum(axis=1), (((3, 4),),)),
    OpInfo("argmax", lambda x: x.argmax(dim=1), lambda a: a.argmax(axis=1), (((3, 4),),), grad=False, gradgrad=False),
    OpInfo("argmin", ag.argmin, np.argmin, (((3, 4),),), grad=False, gradgrad=False),
]

SHAPE = [
    OpInfo("reshape", lambda x: x.reshape(4, -1), lambda a: a.reshape(4, -1), (((2, 6),), ((4, 0),))),
    OpInfo("view_tuple", lambda x: x.view((3, 4)), lambda a: a.reshape(3, 4), (((12,),),)),
    OpInfo("flatten", ag.flatten, lambda a: a.reshape(-1), (((2, 3, 4),), ((),))),
    OpInfo("contiguous_of_transpose", lambda x: x.T.contiguous(), lambda a: a.T.copy(order="C"),
           (((2, 3),), ((4,),), ((),), ((0, 3),))),
    OpInfo("flatten_mid", lambda x: x.flatten(1, 2), lambda a: a.reshape(2, 12, 5), (((2, 3, 4, 5),),)),
    OpInfo("permute", lambda x: x.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1), (((2, 3, 4),),)),
    OpInfo("transpose", lambda x: x.T, lambda a: a.T, (((2, 3),), ((2, 3, 4),))),
    OpInfo("transpose_swap", lambda x: x.transpose(0, 2), lambda a: a.swapaxes(0, 2), (((2, 3, 4),),)),
    OpInfo("swapaxes", lambda x: ag.swapaxes(x, -1, -2), lambda a: a.swapaxes(-1, -2), (((2, 3, 4),),)),
    OpInfo("squeeze", ag.squeeze, np.squeeze, (((2, 1, 3, 1),),)),
    OpInfo("squeeze_dim", lambda x: x.squeeze(1), lambda a: a.squeeze(1), (((2, 1, 3),),)),
    OpInfo("unsqueeze", lambda x: x.unsqueeze(-1), lambda a: a[..., None], (((2, 3),), ((),))),
    OpInfo("expand_dims", lambda x: ag.expand_dims(x, 0), lambda a: a[None], (((2, 3),),)),
    OpInfo("expand", lambda x: x.expand(4, -1, 3), lambda a: np.broadcast_to(a, (4, 2, 3)), (((2, 1),),)),
    OpInfo("broadcast_to", lambda x: ag.broadcast_to(x, (2, 3, 4)), lambda a: np.broadcast_to(a, (2, 3, 4)),
           (((3, 1),), ((),))),
    OpInfo("sum_to", lambda x: ag.sum_to(x, (3, 1)), lambda a: a.sum(0).sum(-1, keepdims=True), (((2, 3, 4),),)),
    OpInfo("cat", lambda a, b: ag.cat([a, b], dim=1), lambda a, b: np.concatenate([a, b], axis=1),
           (((2, 3), (2, 2)), ((2, 0), (2, 4)))),
    OpInfo("concatenate3", lambda a, b, c: ag.concatenate((a, b, c)), lambda a, b, c: np.concatenate((a, b, c)),
           (((1, 3), (2, 3), (3, 3)),)),
    OpInfo("stack", lambda a, b: ag.stack([a, b], axis=-1), lambda a, b: np.stack([a, b], axis=-1), (((2, 3), (2, 3)), ((), ()))),
    OpInfo("split", lambda x: ag.split(x, 2, dim=1), lambda a: tuple(np.split(a, [2, 4], axis=1)), (((3, 5),),)),
    OpInfo("split_sizes", lambda x: x.split([1, 3]), lambda a: tuple(np.split(a, [1])), (((4, 2),),)),
    OpInfo("chunk", lambda x: ag.chunk(x, 3, dim=0), lambda a: tuple(np.split(a, [2, 4])), (((6, 2),),)),
    OpInfo("unbind", lambda x: ag.unbind(x, 1), lambda a: tuple(a[:, i] for i in range(3)), (((2, 3),),)),
    OpInfo("pad", lambda x: ag.pad(x, ((1, 0), (2, 1))), lambda a: np.pad(a, ((1, 0), (2, 1))), (((2, 3),),)),
    OpInfo("pad_value", lambda x: ag.pad(x, 1, value=0.5), lambda a: np.pad(a, 1, constant_values=0.5), (((2, 3),), ((3,),))),
    OpInfo("flip", lambda x: x.flip(0), lambda a: np.flip(a, 0), (((3, 4),),)),
    OpInfo("flip_all", ag.flip, np.flip, (((3, 4),),)),
    OpInfo("roll", lambda x: x.roll(1, dims=1), lambda a: np.roll(a, 1, axis=1), (((3, 4),),)),
    OpInfo("roll_flat", lambda x: ag.roll(x, -2), lambda a: np.roll(a, -2), (((3, 4),),)),
    OpInfo("roll_multi", lambda x: ag.roll(x, (1, 2), (0, 1)), lambda a: np.roll(a, (1, 2), (0, 1)), (((3, 4),),)),
    OpInfo("repeat", lambda x: x.repeat(2, 1, 3), lambda a: np.tile(a, (2, 1, 3)), (((2, 3),),)),
    OpInfo("tile", lambda x: ag.tile(x, (2, 2)), lambda a: np.tile(a, (2, 2)), (((2, 3),), ((3,),))),
    OpInfo("repeat_interleave", lambda x: ag.repeat_interleave(x, 2, dim=1), lambda a: np.repeat(a, 2, axis=1),
           (((2, 3),),)),
    OpInfo("moveaxis", lambda x: ag.moveaxis(x, 0, -1), lambda a: np.moveaxis(a, 0, -1), (((2, 3, 4),),)),
    OpInfo("clone", ag.clone, np.copy, UNARY_SHAPES),
    OpInfo("to_float64", lambda x: x.to(ag.float64), lambda a: a.astype(np.float64), UNARY_SHAPES[:1]),
]


def resolve_ref(ref, where):
    """An OpTest's reference as a call on arrays: "np.exp" and "refs.conv2d" name a function (in NumPy or
    autograd_gpu/testing/refs.py), a callable is f(np, *arrays). A name that does not resolve is an error."""
    if ref is None:
        return None
    if callable(ref):
        return functools.partial(ref, np)
    root, _, path = ref.partition(".")
    spaces = {"np": np, "refs": refs}
    if root not in spaces or not path:
        raise ValueError(f"{where}: ref {ref!r} must start with 'np.' or 'refs.'")
    try:
        return functools.reduce(getattr, path.split("."), spaces[root])
    except AttributeError:
        raise ValueError(f"{where}: ref {ref!r} names nothing") from None


def registered():
    """The op-table entries declared with the ops (``register(tests=OpTest(...))``)."""
    out = []
    for d in registry.ops():
        for t in d.tests:
            name = t.name or (d.name if d.namespace == "" else f"{d.namespace.split('.')[-1]}.{d.name}")
            out.append(OpInfo(name, t.op or d.fn, resolve_ref(t.ref, f"{d.qualname} ({name})"), tuple(t.samples),
                              t.domain, t.avoid, t.dtypes, t.grad, t.gradgrad, t.tol, t.kinds))
    return out


def _unique(entries):
    seen = {}
    for e in entries:
        if e.name in seen:
            raise ValueError(f"op table: two entries named {e.name!r}; give one OpTest a name=")
        seen[e.name] = e
    return entries


def _extra(module):
    try:
        mod = __import__(f"autograd_gpu.testing.{module}", fromlist=["OPS"])
    except ModuleNotFoundError as e:
        if e.name != f"autograd_gpu.testing.{module}":
            raise
        return []
    return mod.OPS


OP_DB = _unique(registered() + ELEMENTWISE + REDUCTIONS + SHAPE + _extra("op_db_indexing") + _extra("op_db_linalg") + _extra("op_db_linalg_ext") + _extra("op_db_nn") + _extra("op_db_complex"))
