"""Ops that move or copy data without changing values: Tensor.to (casts and device moves), clone."""
from ..autograd.function import Function
from ..tensor import Tensor, parse_to_args
from ..dtypes import float64
from ..dtypes import is_inexact
from . import batching
from .registry import register, OpTest, UNARY


class Cast(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, dtype):
        ctx.src = x.data.dtype
        return ctx.wrap(x.data.astype(dtype))

    @staticmethod
    def backward(ctx, grad):
        src = ctx.src
        if not is_inexact(src):
            return None, None
        if src.kind == "f" and grad.data.dtype.kind == "c":    # a real input gets the real part
            from .elementwise import real
            grad = real(grad)
        return grad.to(dtype=src), None




class ToDevice(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, dev):
        ctx.src = src = x.device
        a = x.data
        if dev.type == "cpu" and src.type != "cpu":
            a = src.backend.to_host(a)     # an explicit read, as .numpy(): pending device-side checks raise here
        return Tensor._make(dev.backend.asarray(a), dev)

    @staticmethod
    def backward(ctx, grad):
        return grad.to(ctx.src), None


# the device half of .to() needs two devices: tests/test_tensor.py::test_cuda_tensor_round_trip_and_repr
@register(namespace="Tensor", method=True,
          tests=OpTest(UNARY[:1], ref=lambda np, a: a.astype(np.float64), op=lambda x: x.to(float64), name="to_float64"))
def to(self, *args, device=None, dtype=None, copy=False):
    """Move and/or cast: ``t.to("cuda")``, ``t.to(ag.float64)``, ``t.to("cpu", ag.float32)``; ``self`` when
    nothing changes, differentiable otherwise."""
    device, dtype = parse_to_args(args, device, dtype)
    out = self
    if dtype is not None and dtype != out.dtype:
        out = Cast.apply(out, dtype)
    if device is not None and device is not out.device:
        out = ToDevice.apply(out, device)
    if copy and out is self:
        out = clone(self)
    return out


class Alias(Function):
    """The same values and memory as x under a new identity: d(alias)/dx = 1. ag.func uses it to give
    each transform its own variable (so nested transforms do not confuse their perturbations)."""
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(x.data, base=x)

    @staticmethod
    def backward(ctx, grad):
        return grad


class Clone(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(x.data.copy())

    @staticmethod
    def backward(ctx, grad):
        return grad


@register(method=True, tests=OpTest(UNARY, ref="np.copy"))
def clone(x):
    """A copy with its own memory; the gradient passes straight through."""
    if not isinstance(x, Tensor):
        from ._util import as_tensor
        x = as_tensor(x, "clone")
    return Clone.apply(x)
