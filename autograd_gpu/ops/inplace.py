"""In-place ops: the result is computed out of place, then written into the tensor's own memory,
and the tensor takes the result's place in the graph. Each write bumps the version counter that
saved tensors are checked against, so backward through a stale saved value raises."""
from ..autograd.function import Function
from ..autograd.grad_mode import state
from ..tensor import Tensor
from ..dtypes import result_type
from ..dtypes import is_inexact
from .shape import broadcast_to, broadcast_shapes
from ._util import as_tensor
from . import batching
from .registry import register, OpTest

__all__ = ["apply_inplace", "add_", "sub_", "mul_", "div_", "pow_", "fill_", "zero_", "copy_", "clamp_"]


def check_inplace(x, recording, op):
    """Refuse the in-place edits that would make gradients wrong."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor to modify, got {type(x).__name__}")
    if recording and x.requires_grad and x.grad_fn is None:
        raise RuntimeError(f"{op}: a leaf tensor that requires grad cannot be modified in place while "
                           "gradients are recorded; do it under ag.no_grad() or use an out-of-place op")
    if recording and x._base is not None:
        raise RuntimeError(f"{op}: in-place modification of a view while gradients are recorded is not "
                           "supported (the base's gradient would be wrong); modify the base itself, or use "
                           "out-of-place ops")
    if not getattr(x.data.flags, "writeable", True):
        raise RuntimeError(f"{op}: the tensor's memory is read-only (it is a broadcast view, e.g. from "
                           "expand/broadcast_to); call .clone() first")


def snapshot(x):
    """A copy of x's data that stands where x stands in the graph (the value before the edit)."""
    s = Tensor._make(x.device.backend.call(x.data.copy), x.device)    # on x's GPU, whichever is current
    s.requires_grad = x.requires_grad
    s.grad_fn = x.grad_fn
    if x.grad_fn is not None:
        s._output_nr = x._output_nr
    return s


def write_result(x, r, recording, op):
    """Copy r into x's memory (same shape; dtype cast within its kind) and move x in the graph."""
    if r.shape != x.shape:
        raise RuntimeError(f"{op}: the result has shape {r.shape} but the tensor modified in place has shape "
                           f"{x.shape}; in-place ops cannot change the shape")
    if r.dtype != x.dtype:
        if is_inexact(r.dtype) and x.dtype.kind in "biu" or r.dtype.kind == "c" and x.dtype.kind != "c":
            raise TypeError(f"{op}: the result has dtype {r.dtype}, which cannot be stored in place in a "
                            f"tensor of dtype {x.dtype}")
        r = r.to(dtype=x.dtype)
    backend = x.device.backend
    backend.call(backend.xp.copyto, x.data, r.data)          # on x's GPU, whichever is current
    counter = x.version_counter()
    counter[0] += 1
    if recording:
        counter[1] += 1                    # the views of x now show values their graphs did not make
    if recording and r.requires_grad:
        if r.grad_fn is None:           # r is a leaf (e.g. copy_ from a parameter): x must not become one
            from .misc import clone
            r = clone(r)
        x.grad_fn = r.grad_fn
        x._output_nr = r._output_nr
        x.requires_grad = True
    return x


def _recording(x, args):
    return state.enabled and ((isinstance(x, Tensor) and x.requires_grad)
                              or any(isinstance(a, Tensor) and a.requires_grad for a in args))


def apply_inplace(x, fn, op, *args):
    """x <- fn(x, *args) in x's own memory; differentiable when recording."""
    recording = _recording(x, args)
    check_inplace(x, recording, op)
    r = fn(snapshot(x) if recording else x, *args)
    return write_result(x, r, recording, op)


# -- the direct path: when no graph needs the old value (an optimizer step, anything under no_grad), an
# arithmetic update is one backend call writing into x's memory, as numpy.subtract(p, g, out=p) is: no
# result array, no copy back, no graph node. Anything unusual (a dtype x cannot hold, a shape that would
# grow x, an operand that is not a Tensor or a number, memory shared with x through a view) takes the
# general path above, which also gives the errors.
_DIRECT = {"add_": "add", "sub_": "subtract", "mul_": "multiply", "div_": "true_divide"}
# the classes whose .data is the tensor's own array, for the one-call path below: nn.Parameter (an
# optimizer's p.sub_(...)) adds itself; a vmap BatchedTensor holds a batch and takes the general path
PLAIN_CLASSES: set[type] = {Tensor}
_SCALARS = {"f": (bool, int, float), "c": (bool, int, float, complex)}


def _direct_operand(x, other):
    """other's array or number when x <- x (op) other can be written straight into x's memory, else None."""
    kind = x.dtype.kind
    if kind not in "fc" or not getattr(x.data.flags, "writeable", True):
        return None
    if isinstance(other, Tensor):
        if other.device is not x.device or other.dtype != x.dtype and result_type(x.dtype, other.dtype) != x.dtype:
            return None
        if other.shape != x.shape and broadcast_shapes(x.shape, other.shape, op="in-place") != x.shape:
            return None
        a = other.data
        if (a.base is not None or x.data.base is not None) and a is not x.data and \
                x.device.backend.xp.may_share_memory(a, x.data):
            return None                     # a shifted view of x: the general path computes from a copy
        return a
    return other if type(other) in _SCALARS[kind] else None


def _update(xp, ufunc, x, a, alpha, array):
    if alpha != 1:
        a = xp.multiply(a, alpha, dtype=x.dtype) if array else a * alpha
    getattr(xp, ufunc)(x, a, out=x)


def _direct(x, other, op, alpha=1):
    """x (op)= alpha * other in x's memory, or False when the general path must do it."""
    if x.__class__ in PLAIN_CLASSES and other.__class__ in PLAIN_CLASSES and alpha == 1 and not state.enabled:
        # the optimizer-step case (p.sub_(g * lr) under no_grad): two plain tensors of one device,
        # dtype and shape, neither a view -> one ufunc call; anything else takes the checks below
        a, xd = other.data, x.data
        if a.__class__ is xd.__class__ and other.device is x.device and a.dtype == xd.dtype and \
                a.shape == xd.shape and a.base is None and xd.base is None and xd.dtype.kind in "fc" and \
                getattr(xd.flags, "writeable", True):
            backend = x.device.backend
            if backend.context is None:
                getattr(backend.xp, _DIRECT[op])(xd, a, out=xd)
            else:
                backend.call(getattr(backend.xp, _DIRECT[op]), xd, a, out=xd)    # on x's GPU
            x.version_counter()[0] += 1
            return True
    if not isinstance(x, Tensor) or _recording(x, (other,)):
        return False
    try:
        a = _direct_operand(x, other)
    except ValueError:                      # shapes that do not broadcast: the general path says so
        return False
    if a is None:
        return False
    if alpha != 1 and type(alpha) not in _SCALARS[x.dtype.kind]:
        return False
    backend = x.device.backend
    backend.call(_update, backend.xp, _DIRECT[op], x.data, a, alpha, isinstance(other, Tensor))
    x.version_counter()[0] += 1
    return True


# the op-table entries of the in-place ops edit a clone (a leaf that requires grad cannot be edited)
_INTO = (((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 4), ()))      # the operand broadcasts to x's shape


@register(method=("add_", "__iadd__"), tests=OpTest(_INTO, ref="np.add", op=lambda x, y: x.clone().add_(y)))
def add_(x, other, alpha=1):
    """x += alpha * other, in place."""
    if _direct(x, other, "add_", alpha):
        return x
    from .elementwise import add
    return apply_inplace(x, lambda a, b: add(a, _scaled(b, alpha)), "add_", other)


@register(method=("sub_", "__isub__"),
          tests=OpTest(_INTO, ref=lambda np, a, b: a - 2 * b, op=lambda x, y: x.clone().sub_(y, alpha=2)))
def sub_(x, other, alpha=1):
    """x -= alpha * other, in place."""
    if _direct(x, other, "sub_", alpha):
        return x
    from .elementwise import sub
    return apply_inplace(x, lambda a, b: sub(a, _scaled(b, alpha)), "sub_", other)


def _scaled(b, alpha):
    """alpha * b for add_/sub_; a number operand is scaled as a number (mul needs a Tensor)."""
    if alpha == 1:
        return b
    if not isinstance(b, Tensor):
        return b * alpha
    from .elementwise import mul
    return mul(b, alpha)


@register(method=("mul_", "__imul__"), tests=OpTest(_INTO, ref="np.multiply", op=lambda x, y: x.clone().mul_(y)))
def mul_(x, other):
    """x *= other, in place."""
    if _direct(x, other, "mul_"):
        return x
    from .elementwise import mul
    return apply_inplace(x, mul, "mul_", other)


@register(method=("div_", "__itruediv__"),
          tests=OpTest(_INTO, ref="np.divide", op=lambda x, y: x.clone().div_(y), avoid=(0.0,)))
def div_(x, other):
    """x /= other, in place."""
    if _direct(x, other, "div_"):
        return x
    from .elementwise import div
    return apply_inplace(x, div, "div_", other)


@register(method=True, tests=OpTest((((3, 4),), ((),)), ref=lambda np, a: a ** 3, op=lambda x: x.clone().pow_(3)))
def pow_(x, other):
    """x **= other, in place."""
    from .elementwise import pow
    return apply_inplace(x, pow, "pow_", other)


@register(method=("clamp_", "clip_"), tests=OpTest((((3, 4),), ((),)), ref=lambda np, a: np.clip(a, -0.5, 1.0),
                                                 op=lambda x: x.clone().clamp_(-0.5, 1.0), avoid=(-0.5, 1.0)))
def clamp_(x, min=None, max=None):
    """x limited to [min, max], in place."""
    from .elementwise import clamp
    return apply_inplace(x, lambda a: clamp(a, min, max), "clamp_")


class Overwrite(Function):
    """x's new values ``values`` (already x's shape): the node of an in-place write whose result does not
    depend on x's old value (copy_, the random fills). The old value's gradient is 0, as PyTorch's
    CopyBackwards gives; ``values``' is the gradient itself (cast back to its dtype)."""
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, values):
        v = values.data
        ctx.values_dtype = v.dtype
        return ctx.wrap(v if v.dtype == x.data.dtype else v.astype(x.data.dtype))

    @staticmethod
    def backward(ctx, grad):
        need_x, need_v = ctx.needs_input_grad
        gv = None
        if need_v:
            gv = grad if grad.dtype == ctx.values_dtype else grad.to(dtype=ctx.values_dtype)
        return (grad * 0.0 if need_x else None), gv


class Fill(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, value):
        return ctx.wrap(ctx.xp.full(x.data.shape, value, dtype=x.data.dtype))

    @staticmethod
    def backward(ctx, grad):
        return grad * 0.0, None          # the old values no longer matter


@register(method=True, tests=OpTest((((3, 4),), ((),)), ref=lambda np, a: np.full_like(a, 0.5),
                                    op=lambda x: x.clone().fill_(0.5)))
def fill_(x, value):
    """Set every element to ``value``, in place."""
    if not isinstance(value, (Tensor, bool, int, float)) and not (
            getattr(value, "ndim", None) == 0 and getattr(value, "dtype", None) is not None):
        raise TypeError(f"fill_: expected a number or a one-element tensor, got {type(value).__name__}")
    if isinstance(value, Tensor):
        if value.data.size != 1:
            raise ValueError(f"fill_: expected a number or a one-element tensor, got shape {value.shape}")
        return copy_(x, value.reshape(()))
    return apply_inplace(x, lambda a: Fill.apply(a, value), "fill_")


@register(method=True, tests=OpTest((((3, 4),),), ref="np.zeros_like", op=lambda x: x.clone().zero_()))
def zero_(x):
    """Set every element to 0, in place."""
    return fill_(x, 0)


@register(method=True, tests=OpTest((((2, 3), (2, 3)), ((2, 3), (3,))), ref=lambda np, a, b: np.broadcast_to(b, a.shape),
                                    op=lambda x, y: x.clone().copy_(y)))
def copy_(x, src):
    """Copy ``src`` (broadcast to x's shape, cast to x's dtype) into x, in place."""
    def fn(a, s):
        s = as_tensor(s, "copy_", like=a)
        if s.device is not a.device:
            s = s.to(a.device)
        if s.dtype != a.dtype:
            s = s.to(dtype=a.dtype)
        s = broadcast_to(s, a.shape) if s.shape != a.shape else s
        # in a graph, x's old value gets gradient 0 (src alone is x's value now), as PyTorch's copy_
        return Overwrite.apply(a, s) if a.requires_grad and state.enabled else s
    return apply_inplace(x, fn, "copy_", src)
