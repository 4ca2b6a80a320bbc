"""Elementwise ops: arithmetic (Tensor or Python number on either side), unary maths, activations,
comparisons and other constants of the graph, where, clamp.

Binary wrappers keep the Functions simple: when the graph is recorded, an operand that needs a
gradient is broadcast (``broadcast_to``, whose backward is ``sum_to``) and cast to the result dtype
explicitly, so every backward here returns gradients already shaped like its inputs.
"""
import cmath
import math
import operator as _operator
from typing import TypedDict

from ..autograd.function import Function
from ..autograd import function as _function
from ..autograd import engine as _engine
from ..autograd.grad_mode import state
from ..tensor import Tensor
from ..dtypes import scalar_result_dtype, result_type, get_default_dtype, complex_dtype, complex64, complex128
from ..dtypes import is_inexact, bfloat16, float32
from .shape import broadcast_shapes, broadcast_to, sum_to
from ._util import as_tensor
from ..backends import get_backend as _get_backend
from . import batching
from .registry import register, OpTest, UNARY, BINARY

_pycomplex = complex        # the builtin: this module defines complex(real, imag)
_SQRT_2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_2_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


# --------------------------------------------------------------------------- operand preparation
def _number(v):
    """A Python scalar for v (Python numbers, NumPy scalars and 0-d host arrays), else None. NumPy
    scalars become Python numbers so that they promote weakly (np.float64(2) * float32 stays float32)."""
    c = v.__class__
    if c is float or c is int or c is bool or c is _pycomplex:
        return v
    if getattr(v, "ndim", None) == 0 and type(v).__module__ == "numpy":
        return v.item()
    if isinstance(v, (int, float, _pycomplex)):     # other subclasses of int, float and complex
        return float(v) if isinstance(v, float) else _pycomplex(v) if isinstance(v, _pycomplex) else int(v)
    return None


def _scalar_operand(t, v, op):
    """(t, c) ready for ``t <op> c`` with a Python scalar c: t cast when the scalar promotes it (an
    int tensor times 0.5 gives the default float dtype), c typed for backends without weak scalars."""
    dt = t.data.dtype
    if dt.kind != "f" or v.__class__ is not float and v.__class__ is not int:
        rd = scalar_result_dtype(dt, v, op)
        if rd != dt:
            t = t.to(dtype=rd)
            dt = rd
    backend = t.device.backend
    if dt is bfloat16:                 # NumPy promotes bfloat16 with a Python float to float32: type it
        return t, dt.type(v)
    return t, (v if backend.weak_scalars else backend.scalar(v, dt))


def _align(a, b, op):
    """Broadcast and cast the operands that need a gradient, so backward needs no un-broadcasting."""
    sa, sb = a.data.shape, b.data.shape
    if sa != sb:
        shape = broadcast_shapes(sa, sb, op=op)
        if sa != shape and a.requires_grad:
            a = broadcast_to(a, shape)
        if sb != shape and b.requires_grad:
            b = broadcast_to(b, shape)
    da, db = a.data.dtype, b.data.dtype
    if da is not db and da != db:
        rd = result_type(da, db)
        if da != rd and a.requires_grad:
            a = a.to(dtype=rd)
        if db != rd and b.requires_grad:
            b = b.to(dtype=rd)
    return a, b


def _tensor_pair(a, b, op):
    """Two Tensors on one device, aligned when the graph is recorded."""
    if a.device is not b.device:
        raise RuntimeError(f"{op}: expected all tensors on one device, got {a.device} and {b.device}; "
                           "move one with .to()")
    da, db = a.data.dtype, b.data.dtype
    if (da is bfloat16 or db is bfloat16) and da is not db:   # NumPy cannot promote bfloat16: cast first
        rd = result_type(da, db)
        a, b = a.to(dtype=rd), b.to(dtype=rd)
    if (a.requires_grad or b.requires_grad) and state.enabled and (
            a.data.shape != b.data.shape or a.data.dtype != b.data.dtype):
        return _align(a, b, op)
    if a.data.shape != b.data.shape:
        broadcast_shapes(a.data.shape, b.data.shape, op=op)   # a clear error rather than NumPy's
    return a, b


def _binary(op, tensor_fn, scalar_fn, rscalar_fn, doc, array_fn=None):
    """The public wrapper of a binary op: Tensor <op> Tensor -> tensor_fn(a, b); Tensor <op> number
    -> scalar_fn(t, c); number <op> Tensor -> rscalar_fn(t, c). Arrays are wrapped on the tensor's device.
    ``array_fn(array, number)``: what scalar_fn's forward computes, run directly when nothing records
    (no_grad, e.g. an optimizer's ``p.grad * lr``): no Function object for a result no graph keeps."""
    def f(a, b):
        if isinstance(a, Tensor):
            if isinstance(b, Tensor):
                ad, bd = a.data, b.data
                if ad.shape != bd.shape or ad.dtype is not bd.dtype and (
                        a.requires_grad or b.requires_grad or ad.dtype is bfloat16 or bd.dtype is bfloat16):
                    a, b = _tensor_pair(a, b, op)      # align for the graph, or a clear shape error
                return tensor_fn(a, b)
            c = b.__class__
            if (c is float or c is int) and a.data.dtype.kind == "f":
                backend = a.device.backend
                if backend.weak_scalars:               # the common case: float tensor, Python number
                    if array_fn is not None and not state.enabled and not _function._vmap and backend.context is None:
                        ad = a.data
                        return Tensor._make(array_fn(ad, _host_const(ad, b)), a.device)
                    return scalar_fn(a, b)
            v = _number(b)
            if v is None:
                return f(a, as_tensor(b, op, like=a))
            return scalar_fn(*_scalar_operand(a, v, op))
        if isinstance(b, Tensor):
            v = _number(a)
            if v is None:
                return f(as_tensor(a, op, like=b), b)
            return rscalar_fn(*_scalar_operand(b, v, op))
        raise TypeError(f"{op}: expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
    f.__name__ = op
    f.__doc__ = doc
    return f


def _data(v):
    return v.data if isinstance(v, Tensor) else v


def _as_pair(op):
    """For ops without scalar Functions: the number becomes a 0-d constant tensor of a's dtype."""
    def scalar(t, c):
        return t, Tensor._make(t.device.backend.xp.asarray(c, dtype=t.dtype), t.device)
    return scalar


# --------------------------------------------------------------------------- Python-number operands
_HOST = _get_backend("cpu").xp.ndarray
_consts: dict = {}       # (number, dtype) -> 0-d host array of that dtype


def _host_const(a, c):
    """c as an operand for the host float array ``a``: a cached 0-d array of a's dtype when c is a
    nonzero Python float or int, else c itself. Same values (NumPy converts a weak Python number to
    the array's dtype anyway), but a 0-d array operand costs NumPy half what a Python float does
    (0.28 against 0.55 us on 16 elements), and the tiny ops of small models pay that on every call.
    Zero is left out because 0.0 and -0.0 are one dict key; so are values beyond float16's range
    (no dtype overflows in the conversion) and NaN."""
    if a.__class__ is not _HOST or c.__class__ is not float and c.__class__ is not int or not c:
        return c
    dt = a.dtype
    k = _consts.get((c, dt))
    if k is None:
        if dt.kind != "f" or not -65504.0 <= c <= 65504.0 or len(_consts) > 1024:
            return c
        k = _HOST((), dt)
        k[()] = c
        _consts[(c, dt)] = k
    return k


# --------------------------------------------------------------------------- binary arithmetic
class Add(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def forward(ctx, a, b):
        return ctx.wrap(a.data + b.data)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class AddScalar(Function):
    batch_rule = batching.elementwise
    _array_forward = True
    display_name = "Add"

    @staticmethod
    def forward(ctx, x, c):
        a = x.data
        return ctx.wrap(a + _host_const(a, c))

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class Sub(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def forward(ctx, a, b):
        return ctx.wrap(a.data - b.data)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[1]:
            return grad, None
        return grad, Neg.of(ctx, grad)


class RSubScalar(Function):
    batch_rule = batching.elementwise
    _array_forward = True
    display_name = "Sub"

    @staticmethod
    def forward(ctx, x, c):
        return ctx.wrap(c - x.data)

    @staticmethod
    def backward(ctx, grad):
        return -grad, None


class Mul(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def arrays(ctx, a, b):
        return a * b

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(a.data * b.data)

    @staticmethod
    def backward(ctx, grad):
        if grad.data.dtype.kind == "c":         # d(ab)/da = b: grad * conj(b)
            a, b = ctx.saved_tensors
            need_a, need_b = ctx.needs_input_grad
            a, b = _cj(a), _cj(b)
            return (Mul.apply(grad, b) if need_a else None), (Mul.apply(grad, a) if need_b else None)
        return MulBackward.of(ctx, grad, ctx)


def _mul_backward_rule(cls, args, kwargs):
    grad, a, b, node = args
    need_a, need_b = node.needs_input_grad
    return (Mul.apply(grad, b) if need_a else None), (Mul.apply(grad, a) if need_b else None)


class MulBackward(Function):
    """Mul's two gradients (grad * b, grad * a) as one op: on CUDA one kernel for both products, the one for a
    leaf (w of x * w, used at every step) added into the gradient total the engine already holds for it
    (``node``: the Mul node whose backward this is: which gradients it needs). Differentiable again (create_graph):
    its own backward is two products per output gradient. Real operands only (Mul conjugates complex ones).
    Under vmap: the two products, as Mul's rule batches them."""
    batch_rule = _mul_backward_rule
    materialize_grads = False     # a gradient not wanted is None (and so is its gradient's gradient)

    @staticmethod
    def arrays(ctx, g, a, b, node, into_leaf=True):
        need_a, need_b = node.needs_input_grad
        if need_a and need_b and g.__class__ is not _HOST:      # (the CPU skips the look-ups)
            be = ctx.device.backend
            if be.fused_mul_grads and g.shape == a.shape == b.shape and g.dtype == a.dtype == b.dtype \
                    and g.dtype is not bfloat16:       # (no bfloat16 kernels: the ufuncs below)
                if into_leaf:                  # (not when recorded: the engine's total is then a recorded sum)
                    acc = _engine.leaf_sum(node, 1, g.shape, g.dtype)
                    if acc is not None:
                        return be.mul_grads(g, a, b, acc)[0], None
                    acc = _engine.leaf_sum(node, 0, g.shape, g.dtype)
                    if acc is not None:
                        return None, be.mul_grads(g, b, a, acc)[0]
                return be.mul_grads(g, a, b)
        return (g * b if need_a else None), (g * a if need_b else None)

    @staticmethod
    def forward(ctx, grad, a, b, node):
        ctx.save_for_backward(grad, a, b)
        ga, gb = MulBackward.arrays(ctx, grad.data, a.data, b.data, node, False)
        return (None if ga is None else ctx.wrap(ga)), (None if gb is None else ctx.wrap(gb))

    @staticmethod
    def backward(ctx, gga, ggb):
        # ga = grad * b, gb = grad * a: d/dgrad = gga * b + ggb * a, d/da = ggb * grad, d/db = gga * grad
        grad, a, b = ctx.saved_tensors
        need_g, need_a, need_b = ctx.needs_input_grad[:3]
        d_grad = None
        if need_g:
            d_grad = Mul.apply(gga, b) if gga is not None else None
            if ggb is not None:
                d_grad = Mul.apply(ggb, a) if d_grad is None else d_grad + Mul.apply(ggb, a)
        d_a = Mul.apply(ggb, grad) if need_a and ggb is not None else None
        d_b = Mul.apply(gga, grad) if need_b and gga is not None else None
        return d_grad, d_a, d_b, None


class MulScalar(Function):
    batch_rule = batching.elementwise
    _array_forward = True
    __slots__ = ("c",)
    display_name = "Mul"

    @staticmethod
    def arrays(ctx, a, c):
        return a * _host_const(a, c)

    @staticmethod
    def forward(ctx, x, c):
        ctx.c = c
        a = x.data
        return ctx.wrap(a * _host_const(a, c))

    @staticmethod
    def backward(ctx, grad):
        c = ctx.c
        if c.__class__ is not float and c.__class__ is not int:    # complex (maybe a typed NumPy scalar)
            return MulScalar.apply(grad, c.conjugate()), None
        return MulScalar.of(ctx, grad, c), None


class Div(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def forward(ctx, a, b):
        y = ctx.wrap(a.data / b.data)
        ctx.save_for_backward(b, y if ctx.needs_input_grad[1] else None)
        return y

    @staticmethod
    def backward(ctx, grad):
        b, y = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        if b.data.dtype.kind == "c":
            b, y = Conj.apply(b), (_cj(y) if y is not None else None)
        return (grad / b if need_a else None), (-grad * y / b if need_b else None)


class DivScalar(Function):
    batch_rule = batching.elementwise
    _array_forward = True
    __slots__ = ("c",)
    display_name = "Div"

    @staticmethod
    def forward(ctx, x, c):
        ctx.c = c
        return ctx.wrap(x.data / c)

    @staticmethod
    def backward(ctx, grad):
        c = ctx.c
        if c.__class__ is not float and c.__class__ is not int:
            c = c.conjugate()
        return grad / c, None


class RDivScalar(Function):
    batch_rule = batching.elementwise
    display_name = "Div"

    @staticmethod
    def forward(ctx, x, c):
        y = ctx.wrap(c / x.data)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return -grad * conj(y / x), None


class Pow(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, a, b):
        y = ctx.wrap(a.data ** b.data)
        ctx.save_for_backward(a, b, y if ctx.needs_input_grad[1] else None)
        return y

    @staticmethod
    def backward(ctx, grad):
        a, b, y = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        # at b == 0 the derivative in a is 0 (a ** (b - 1) would give 0 * inf = nan at a == 0)
        ga = where(b == 0, 0.0, grad * conj(b * a ** (b - 1.0))) if need_a else None
        # 0 ** b has derivative 0 in b for b > 0 (log(0) would give 0 * -inf = nan)
        gb = where(a == 0, 0.0, grad * conj(y * log(where(a == 0, 1.0, a)))) if need_b else None
        return ga, gb


class PowScalar(Function):
    batch_rule = batching.elementwise
    __slots__ = ("c",)
    display_name = "Pow"

    @staticmethod
    def forward(ctx, x, c):
        ctx.save_for_backward(x)
        ctx.c = c
        return ctx.wrap(x.data ** c)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        c = ctx.c
        if c == 0:
            return grad * 0.0, None
        if x.data.dtype.kind == "c":                 # grad * conj(d(x ** c)/dx)
            x = Conj.apply(x)
            c = c.conjugate()
        if c == 2:                                   # the common square: 2 * x * grad, no x ** 1 copy
            return MulScalar.apply(Mul.apply(grad, x), 2.0), None
        return (grad * c if c == 1 else grad * (x ** (c - 1) * c)), None


class RPowScalar(Function):
    batch_rule = batching.elementwise
    __slots__ = ("log_c",)
    display_name = "Pow"

    @staticmethod
    def forward(ctx, x, c):
        y = ctx.wrap(c ** x.data)
        ctx.save_for_backward(y)
        try:
            ctx.log_c = math.log(c) if c > 0 else math.nan
        except TypeError:                  # a complex base: conj(log c), for grad * conj(y * log c)
            ctx.log_c = cmath.log(c).conjugate()
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * conj(y) * ctx.log_c, None


class Maximum(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.xp.maximum(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        return _minmax_grads(ctx, grad, greater)


class Minimum(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.xp.minimum(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        return _minmax_grads(ctx, grad, less)


def _minmax_grads(ctx, grad, wins):
    """The gradient goes to the operand that was picked; a tie splits it evenly, as in PyTorch. Where
    either operand is NaN (so is the result) neither lost: both get the gradient, as in PyTorch."""
    a, b = ctx.saved_tensors
    need_a, need_b = ctx.needs_input_grad
    tie = equal(a, b)
    half = grad * 0.5
    ga = where(wins(b, a), 0.0, where(tie, half, grad)) if need_a else None
    gb = where(wins(a, b), 0.0, where(tie, half, grad)) if need_b else None
    return ga, gb


def _ordered_fn(fn, op):
    """fn(a, b) for two Tensors, refusing complex ones (max and min need an order)."""
    def g(a, b):
        for v in (a, b):
            if v.data.dtype.kind == "c":
                _no_complex(v, op)
        return fn(a, b)
    return g


def _sub_scalar(t, c):
    return AddScalar.apply(t, -c)


def _swapped(fn):
    def g(t, c):
        return fn(*_as_pair("")(t, c)[::-1])
    return g


# op-table samples and settings of the complex entries (complex inputs; "real" marks a real input of their
# precision; gradients in complex128 with PyTorch's convention)
_C = (complex64, complex128)
_CUNARY, _CBINARY = UNARY[:3], BINARY[:3]
_CTOL = {complex64: {"rtol": 1e-4, "atol": 1e-5}}     # complex64 transcendental functions


def _ctest(samples, ref, op=None, name=None, **kw):
    """An op-table entry on complex64/complex128 inputs."""
    kw.setdefault("tol", _CTOL)
    return OpTest(samples, ref=ref, op=op, name=name, dtypes=_C, **kw)


def _rsub(a, b):
    return sub(b, a)


def _rdiv(a, b):
    return div(b, a)


def _rpow(a, b):
    return pow(b, a)


add = register(method=("add", "__add__", "__radd__"), tests=(
    OpTest(BINARY, ref="np.add", op=_operator.add),
    OpTest(UNARY, ref=lambda np, a: a + a.dtype.type(1.5), op=lambda x: x + 1.5, name="add_scalar"),
    OpTest(UNARY, ref=lambda np, a: 2 + a, op=lambda x: 2 + x, name="radd_scalar"),
    _ctest(_CBINARY, "np.add", _operator.add, "complex_add"),
))(_binary("add", Add.apply, AddScalar.apply, AddScalar.apply, "a + b with broadcasting; either may be a Python number.",
           _operator.add))
sub = register(method=("sub", "subtract", "__sub__"), methods={"__rsub__": _rsub}, tests=(
    OpTest(BINARY, ref="np.subtract", op=_operator.sub),
    OpTest(UNARY, ref=lambda np, a: a.dtype.type(2.5) - a, op=lambda x: 2.5 - x, name="rsub_scalar"),
    _ctest(_CBINARY, "np.subtract", _operator.sub, "complex_sub"),
))(_binary("sub", Sub.apply, _sub_scalar, RSubScalar.apply, "a - b with broadcasting; either may be a Python number."))
mul = register(method=("mul", "multiply", "__mul__", "__rmul__"), tests=(
    OpTest(BINARY, ref="np.multiply", op=_operator.mul),
    OpTest(UNARY, ref=lambda np, a: a * 3, op=lambda x: x * 3, name="mul_scalar"),
    _ctest(_CBINARY, "np.multiply", _operator.mul, "complex_mul"),
    _ctest((((2, 3), (2, 3)), ((2, 3), (3,))), "np.multiply", _operator.mul, "complex_mul_real", kinds=(None, "real")),
    _ctest(_CUNARY, lambda np, a: a * (2 - 1j), lambda x: x * (2 - 1j), "complex_mul_scalar"),
))(_binary("mul", Mul.apply, MulScalar.apply, MulScalar.apply, "a * b with broadcasting; either may be a Python number.",
           _operator.mul))
_div = _binary("div", Div.apply, DivScalar.apply, RDivScalar.apply, "")
pow = register(method=("pow", "__pow__"), methods={"__rpow__": _rpow}, tests=(
    OpTest((((2, 3), (2, 3)), ((3,), ())), ref="np.power", op=_operator.pow, domain=(0.5, 2.0)),
    OpTest(UNARY, ref=lambda np, a: a ** 3, op=lambda x: x ** 3, name="pow_scalar"),
    OpTest(UNARY, ref=lambda np, a: a ** a.dtype.type(0.5), op=lambda x: x ** 0.5, name="pow_half", domain=(0.2, 3.0)),
    OpTest(UNARY, ref=lambda np, a: a ** a.dtype.type(-2.0), op=lambda x: x ** -2, name="pow_neg", domain=(0.3, 3.0)),
    OpTest(UNARY, ref=lambda np, a: a.dtype.type(2.0) ** a, op=lambda x: 2.0 ** x, name="rpow_scalar"),
    _ctest(_CUNARY, lambda np, a: a ** 2.5, lambda x: x ** 2.5, "complex_pow_scalar", domain=(0.5, 2.0)),
    _ctest(_CUNARY, lambda np, a: a ** 2, lambda x: x ** 2, "complex_pow_2"),
    _ctest((((2, 3), (2, 3)),), "np.power", _operator.pow, "complex_pow", domain=(0.5, 1.5)),
))(_binary("pow", Pow.apply, PowScalar.apply, RPowScalar.apply, "a ** b; either may be a Python number."))
maximum = register(method=True, tests=OpTest(BINARY, ref="np.maximum"))(
    _binary("maximum", _ordered_fn(Maximum.apply, "maximum"), lambda t, c: Maximum.apply(*_as_pair("")(t, c)),
            _swapped(Maximum.apply), "Elementwise max; at ties each operand gets half the gradient."))
minimum = register(method=True, tests=OpTest(BINARY, ref="np.minimum"))(
    _binary("minimum", _ordered_fn(Minimum.apply, "minimum"), lambda t, c: Minimum.apply(*_as_pair("")(t, c)),
            _swapped(Minimum.apply), "Elementwise min; at ties each operand gets half the gradient."))


@register(method=("div", "divide", "__truediv__"), methods={"__rtruediv__": _rdiv}, aliases=("true_divide", "divide"),
          tests=(OpTest(BINARY, ref="np.divide", op=_operator.truediv, avoid=(0.0,)),
                 OpTest(UNARY, ref=lambda np, a: a.dtype.type(1.0) / a, op=lambda x: 1.0 / x, name="rdiv_scalar",
                        avoid=(0.0,)),
                 OpTest(UNARY, ref=lambda np, a: a / 4, op=lambda x: x / 4, name="div_scalar"),
                 _ctest(_CBINARY, "np.divide", _operator.truediv, "complex_div", domain=(0.5, 2.0)),
                 _ctest((((2, 3), (2, 3)),), "np.divide", _operator.truediv, "complex_real_div", kinds=("real", None),
                        domain=(0.5, 2.0)),
                 _ctest(_CUNARY, lambda np, a: (1 + 2j) / a, lambda x: (1 + 2j) / x, "complex_rdiv_scalar",
                        domain=(0.5, 2.0))))
def div(a, b):
    """a / b (true division); integer / integer gives the default float dtype, as in PyTorch."""
    if _is_integral(a) and _is_integral(b):
        d = get_default_dtype()
        a = a.to(dtype=d) if isinstance(a, Tensor) else a
        b = b.to(dtype=d) if isinstance(b, Tensor) else b
        if not isinstance(a, Tensor) and not isinstance(b, Tensor):
            raise TypeError(f"div: expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
    return _div(a, b)


def _is_integral(v):
    if isinstance(v, Tensor):
        return v.data.dtype.kind in "biu"
    return isinstance(v, int) or getattr(v, "dtype", None) is not None and v.dtype.kind in "biu"


true_divide = divide = div


# --------------------------------------------------------------------------- constants of the graph
def _constant(name, a, b, op):
    """A binary op whose result takes no part in differentiation (comparisons, //, %)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor):
        if a.device is not b.device:
            raise RuntimeError(f"{op}: expected all tensors on one device, got {a.device} and {b.device}; "
                               "move one with .to()")
        if a.data.shape != b.data.shape:
            broadcast_shapes(a.data.shape, b.data.shape, op=op)
    elif isinstance(a, Tensor):
        v = _number(b)
        a, b = _scalar_operand(a, v, op) if v is not None else (a, as_tensor(b, op, like=a))
    elif isinstance(b, Tensor):
        v = _number(a)
        b, a = _scalar_operand(b, v, op) if v is not None else (b, as_tensor(a, op, like=b))
    else:
        raise TypeError(f"{op}: expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
    t = a if isinstance(a, Tensor) else b
    backend = t.device.backend
    if _function._vmap and _function._vmap[0]((a, b), None):     # inside vmap: see func/vmap.py
        return _function._vmap[2](getattr(backend.xp, name), (a, b))
    return Tensor._make(getattr(backend.xp, name)(_data(a), _data(b)), t.device)


# == and != answer NotImplemented for None and other non-array objects, so that ``t == None`` is False
# (as in PyTorch) and ``in`` tests on lists of tensors work
def _eq_operator(a, b):
    if b is None or isinstance(b, (str, dict, set)):
        return NotImplemented
    return equal(a, b)


def _ne_operator(a, b):
    if b is None or isinstance(b, (str, dict, set)):
        return NotImplemented
    return not_equal(a, b)


def _rfloordiv(a, b):
    return floor_divide(b, a)


class _NoGrad(TypedDict):       # OpTest keywords shared by entries, typed so that OpTest(..., **_NO_GRAD) is checked
    grad: bool
    gradgrad: bool


class _KindsNoGrad(_NoGrad):
    kinds: tuple


_NO_GRAD = _NoGrad(grad=False, gradgrad=False)      # graph constants: no gradient to check


@register(aliases=("eq",), method="eq", methods={"__eq__": _eq_operator},
          tests=OpTest(BINARY[:2], ref="np.equal", op=_operator.eq, name="eq", **_NO_GRAD))
def equal(a, b):
    """a == b, elementwise (a bool tensor; a constant to the graph)."""
    return _constant("equal", a, b, "eq")


@register(aliases=("ne",), method="ne", methods={"__ne__": _ne_operator},
          tests=OpTest(BINARY[:2], ref="np.not_equal", op=_operator.ne, name="ne", **_NO_GRAD))
def not_equal(a, b):
    """a != b, elementwise (a bool tensor; a constant to the graph)."""
    return _constant("not_equal", a, b, "ne")


def _ordered(name, a, b, op):
    """A comparison that needs an order: complex operands are a TypeError, as in PyTorch."""
    for v in (a, b):
        if isinstance(v, Tensor) and v.data.dtype.kind == "c":
            _no_complex(v, op)
    return _constant(name, a, b, op)


@register(aliases=("lt",), method=("lt", "__lt__"),
          tests=OpTest(BINARY, ref="np.less", op=_operator.lt, name="lt", **_NO_GRAD))
def less(a, b):
    """a < b, elementwise (a bool tensor; a constant to the graph)."""
    return _ordered("less", a, b, "lt")


@register(aliases=("le",), method=("le", "__le__"),
          tests=OpTest(BINARY[:2], ref="np.less_equal", op=_operator.le, name="le", **_NO_GRAD))
def less_equal(a, b):
    """a <= b, elementwise (a bool tensor; a constant to the graph)."""
    return _ordered("less_equal", a, b, "le")


@register(aliases=("gt",), method=("gt", "__gt__"),
          tests=OpTest(BINARY[:2], ref="np.greater", op=_operator.gt, name="gt", **_NO_GRAD))
def greater(a, b):
    """a > b, elementwise (a bool tensor; a constant to the graph)."""
    return _ordered("greater", a, b, "gt")


@register(aliases=("ge",), method=("ge", "__ge__"),
          tests=OpTest(BINARY, ref="np.greater_equal", op=_operator.ge, name="ge", **_NO_GRAD))
def greater_equal(a, b):
    """a >= b, elementwise (a bool tensor; a constant to the graph)."""
    return _ordered("greater_equal", a, b, "ge")


@register(method="__floordiv__", methods={"__rfloordiv__": _rfloordiv},
          tests=OpTest((((4,), (4,)),), ref="np.floor_divide", op=_operator.floordiv, name="floordiv",
                       domain=(1.0, 5.0), **_NO_GRAD))    # piecewise constant: no gradient
def floor_divide(a, b):
    """a // b, rounded toward minus infinity; a constant to the graph."""
    return _ordered("floor_divide", a, b, "floor_divide")


# remainder (%) and fmod are differentiable: ops/special.py


_BOOLS = _KindsNoGrad(kinds=("bool", "bool"), **_NO_GRAD)


@register(method=True, tests=OpTest(BINARY[:2], ref="np.logical_and", **_BOOLS))
def logical_and(a, b):
    """a and b, elementwise (a bool tensor; nonzero is true)."""
    return _constant("logical_and", a, b, "logical_and")


@register(method=True, tests=OpTest(BINARY[:2], ref="np.logical_or", **_BOOLS))
def logical_or(a, b):
    """a or b, elementwise (a bool tensor; nonzero is true)."""
    return _constant("logical_or", a, b, "logical_or")


@register(method=True, tests=OpTest(BINARY[:2], ref="np.logical_xor", **_BOOLS))
def logical_xor(a, b):
    """a xor b, elementwise (a bool tensor; nonzero is true)."""
    return _constant("logical_xor", a, b, "logical_xor")


def _bitwise(name, a, b, op):
    t = a if isinstance(a, Tensor) else b
    if isinstance(t, Tensor) and t.dtype.kind not in "biu":
        raise TypeError(f"{op}: expected bool or integer tensors, got {t.dtype}")
    return _constant(name, a, b, op)


_INTS = _KindsNoGrad(kinds=("int", "int"), **_NO_GRAD)


@register(method=("__and__", "__rand__"), tests=OpTest(BINARY[:2], ref="np.bitwise_and", op=_operator.and_, **_INTS))
def bitwise_and(a, b):
    """a & b on bool or integer tensors, elementwise."""
    return _bitwise("bitwise_and", a, b, "and")


@register(method=("__or__", "__ror__"), tests=OpTest(BINARY[:2], ref="np.bitwise_or", op=_operator.or_, **_INTS))
def bitwise_or(a, b):
    """a | b on bool or integer tensors, elementwise."""
    return _bitwise("bitwise_or", a, b, "or")


@register(method=("__xor__", "__rxor__"), tests=OpTest(BINARY[:2], ref="np.bitwise_xor", op=_operator.xor, **_INTS))
def bitwise_xor(a, b):
    """a ^ b on bool or integer tensors, elementwise."""
    return _bitwise("bitwise_xor", a, b, "xor")


def _unary_constant(name, x, op):
    x = as_tensor(x, op)
    if x.data.dtype.kind == "c" and name in ("sign", "floor", "ceil", "round"):
        _no_complex(x, op)
    if _function._vmap and _function._vmap[0]((x,), None):         # inside vmap: see func/vmap.py
        return _function._vmap[2](getattr(x.device.backend.xp, name), (x,))
    return Tensor._make(getattr(x.device.backend.xp, name)(x.data), x.device)


@register(method=True, tests=OpTest(UNARY, ref="np.sign", **_NO_GRAD))   # constant: no gradient
def sign(x):
    """-1, 0 or 1 by the sign of x; a constant to the graph (its derivative is 0 almost everywhere)."""
    return _unary_constant("sign", x, "sign")


@register(method=True, tests=OpTest(UNARY, ref="np.floor", **_NO_GRAD))
def floor(x):
    """The largest integer <= x, elementwise (x's dtype; a constant to the graph)."""
    return _unary_constant("floor", x, "floor")


@register(method=True, tests=OpTest(UNARY, ref="np.ceil", **_NO_GRAD))
def ceil(x):
    """The smallest integer >= x, elementwise (x's dtype; a constant to the graph)."""
    return _unary_constant("ceil", x, "ceil")


@register(method=True, tests=OpTest(UNARY, ref="np.round", domain=(-4.0, 4.0), **_NO_GRAD))
def round(x):
    """x rounded to the nearest integer, halves to even (x's dtype; a constant to the graph)."""
    return _unary_constant("round", x, "round")


@register(method=True, tests=OpTest(UNARY[:2], ref="np.logical_not", kinds=("bool",), **_NO_GRAD))
def logical_not(x):
    """not x, elementwise (a bool tensor; nonzero is true)."""
    return _unary_constant("logical_not", x, "logical_not")


@register(method="__invert__", tests=OpTest(UNARY[:2], ref="np.invert", op=_operator.invert, kinds=("int",),
                                            **_NO_GRAD))
def bitwise_not(x):
    """~x on a bool or integer tensor (logical not for bool), elementwise."""
    x = as_tensor(x, "invert")
    if x.dtype.kind not in "biu":
        raise TypeError(f"invert (~): expected a bool or integer tensor, got {x.dtype}")
    return _unary_constant("invert", x, "invert")


@register(method=True, tests=OpTest(UNARY[:2], ref="np.isnan", **_NO_GRAD))
def isnan(x):
    """True where x is NaN, elementwise."""
    return _unary_constant("isnan", x, "isnan")


@register(method=True, tests=OpTest(UNARY[:2], ref="np.isinf", **_NO_GRAD))
def isinf(x):
    """True where x is +-inf, elementwise."""
    return _unary_constant("isinf", x, "isinf")


@register(method=True, tests=OpTest(UNARY[:2], ref="np.isfinite", **_NO_GRAD))
def isfinite(x):
    """True where x is neither NaN nor +-inf, elementwise."""
    return _unary_constant("isfinite", x, "isfinite")


eq, ne, lt, le, gt, ge = equal, not_equal, less, less_equal, greater, greater_equal    # registered as aliases


# --------------------------------------------------------------------------- unary maths
class Neg(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def arrays(ctx, a):
        return -a

    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(-x.data)

    @staticmethod
    def backward(ctx, grad):
        return Neg.of(ctx, grad)


class Abs(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.abs(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        if x.data.dtype.kind == "c":                 # d|z| is z / |z| (PyTorch's sgn; 0 at z == 0)
            return grad * sgn(x)
        return grad * sign(x)


class Exp(Function):
    _array_forward = True
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.exp(x.data))
        ctx.save_for_backward(y)          # the output is cheaper to reuse than to recompute
        return y

    @staticmethod
    def backward(ctx, grad):
        if grad.data.dtype.kind == "c":         # d exp(x) = exp(x): grad * conj(y)
            y, = ctx.saved_tensors
            return Mul.apply(grad, _cj(y))     # same shape and dtype: no wrapper needed
        return Mul.of(ctx, grad)


class Expm1(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.expm1(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * _cj(y + 1.0)


class Log(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.log(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return Div.apply(grad, _cj(x))


class Log1p(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.log1p(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad / _cj(x + 1.0)


class Sqrt(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.sqrt(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad / _cj(y * 2.0)


class Rsqrt(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.reciprocal(ctx.xp.sqrt(x.data)))   # (1.0 / would make bfloat16 float32)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * _cj(y * y * y) * -0.5


class Square(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.square(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * _cj(x * 2.0)


class Sin(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.sin(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return Mul.apply(grad, _cj(Cos.apply(x)))


class Cos(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.cos(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return Mul.apply(grad, _cj(Neg.apply(Sin.apply(x))))


class Tan(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.tan(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * _cj(y * y + 1.0)


class Tanh(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.tanh(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if grad.data.dtype.kind == "c":         # composed: TanhBackward's own backward is for real y
            y, = ctx.saved_tensors
            return grad * conj(1.0 - y * y)
        return TanhBackward.of(ctx, grad)


class TanhBackward(Function):
    """grad * (1 - y**2) as one op (PyTorch's tanh_backward): one node in backward instead of three,
    itself differentiable so create_graph works."""
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def arrays(ctx, g, y):
        if y.dtype is bfloat16:                # ufuncs: the CUDA kernel takes no bfloat16
            return g * (1 - y * y)
        return ctx.device.backend.tanh_backward(g, y)          # one kernel on CUDA

    @staticmethod
    def forward(ctx, grad, y):
        ctx.save_for_backward(grad, y)
        return ctx.wrap(TanhBackward.arrays(ctx, grad.data, y.data))

    @staticmethod
    def backward(ctx, gg):
        grad, y = ctx.saved_tensors
        need_g, need_y = ctx.needs_input_grad
        return (TanhBackward.apply(gg, y) if need_g else None), (gg * grad * y * -2.0 if need_y else None)


class Sinh(Function):
    batch_rule = batching.elementwise      # vmap: operands aligned on the batch dims, one call

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.sinh(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * _cj((exp(x) + exp(-x)) * 0.5)     # cosh, in Tensor ops: create_graph=True works


class Sigmoid(Function):
    batch_rule = batching.elementwise
    _array_forward = True
    # fused: the backward from the saved output, y * (1 - y), stays finite where the composed
    # 1 / (1 + exp(-x)) would give inf * 0; the forward is a backend kernel (overflow-safe there)
    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.device.backend.sigmoid(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if grad.data.dtype.kind == "c":         # composed, as Tanh's
            y, = ctx.saved_tensors
            return grad * conj(y * (1.0 - y))
        return SigmoidBackward.of(ctx, grad)


class SigmoidBackward(Function):
    """grad * y * (1 - y) as one differentiable op (PyTorch's sigmoid_backward)."""
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def arrays(ctx, g, y):
        if y.dtype is bfloat16:                # ufuncs: the CUDA kernel takes no bfloat16
            return g * (y * (1 - y))
        return ctx.device.backend.sigmoid_backward(g, y)       # one kernel on CUDA

    @staticmethod
    def forward(ctx, grad, y):
        ctx.save_for_backward(grad, y)
        return ctx.wrap(SigmoidBackward.arrays(ctx, grad.data, y.data))

    @staticmethod
    def backward(ctx, gg):
        grad, y = ctx.saved_tensors
        need_g, need_y = ctx.needs_input_grad
        return (SigmoidBackward.apply(gg, y) if need_g else None), (gg * grad * (1.0 - y * 2.0) if need_y else None)


class Relu(Function):
    batch_rule = batching.elementwise
    _array_forward = True

    # the output is saved, not the input (as PyTorch does): y > 0 exactly where x > 0, and the input of
    # a layer's relu can then be freed at once (the next layer keeps y anyway)
    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.maximum(x.data, x.data.dtype.type(0)))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        return ReluBackward.of(ctx, grad)


class ReluBackward(Function):
    """grad where x > 0, else 0, as one op; linear in grad, so its own backward is itself."""
    batch_rule = batching.elementwise
    _array_forward = True

    @staticmethod
    def arrays(ctx, g, x):
        if x.dtype is bfloat16:                # ufuncs: the CUDA kernel takes no bfloat16
            return g * (x > 0)
        return ctx.device.backend.relu_backward(g, x)          # one kernel on CUDA

    @staticmethod
    def forward(ctx, grad, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ReluBackward.arrays(ctx, grad.data, x.data))

    @staticmethod
    def backward(ctx, gg):
        x, = ctx.saved_tensors
        return ReluBackward.apply(gg, x), None


class Gelu(Function):
    """x * Phi(x) (approximate "none", Phi by erf) or its tanh form, fused: one kernel each way on CUDA where
    the composed form launches five forward and their backwards; the NumPy forward keeps Phi (or the tanh
    term), so its backward computes no erf. The backward runs on arrays when nothing is recorded, else as
    recorded ops (differentiable again)."""
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, approximate):
        y, ctx.aux = ctx.device.backend.gelu(x.data, approximate)
        ctx.approximate = approximate
        ctx.save_for_backward(x)
        return ctx.wrap(y)

    @staticmethod
    def backward(ctx, grad):
        # aux matches x's array as the forward saw it; under vmap the rule may lay x out anew: recomputed
        return GeluBackward.of(ctx, grad, None if _function._vmap else ctx.aux, ctx.approximate), None


class GeluBackward(Function):
    """grad * gelu'(x) as one op (the backend's kernel; ``aux``: what the forward kept, or None to recompute
    it), differentiable again: its own backward is this op of gg and grad * gelu''(x) composed."""
    batch_rule = batching.elementwise

    @staticmethod
    def arrays(ctx, g, x, aux, approximate):
        return ctx.device.backend.gelu_backward(g, x, aux, approximate)

    @staticmethod
    def forward(ctx, grad, x, aux, approximate):
        ctx.approximate = approximate
        ctx.save_for_backward(grad, x)
        return ctx.wrap(GeluBackward.arrays(ctx, grad.data, x.data, aux, approximate))

    @staticmethod
    def backward(ctx, gg):
        grad, x = ctx.saved_tensors
        need_g, need_x = ctx.needs_input_grad[:2]
        d_grad = GeluBackward.apply(gg, x, None, ctx.approximate) if need_g else None
        if not need_x:
            return d_grad, None, None, None
        if ctx.approximate == "tanh":          # d' = (1 - t^2) (u' + x/2 (u'' - 2 t u'^2)), u = c (x + 0.044715 x^3)
            c = _SQRT_2_OVER_PI
            t = tanh((x + x * x * x * 0.044715) * c)
            u1 = (x * x * (3 * 0.044715) + 1.0) * c
            d2 = (1.0 - t * t) * (u1 + x * 0.5 * (x * (6 * 0.044715 * c) - t * u1 * u1 * 2.0))
        else:                                  # d' = phi(x) (2 - x^2)
            d2 = exp(x * x * -0.5) * (1.0 / math.sqrt(2.0 * math.pi)) * (2.0 - x * x)
        return d_grad, gg * grad * d2, None, None


class Silu(Function):
    """x * sigmoid(x), fused: one kernel each way on CUDA (the composed form: five forward, more backward);
    the NumPy forward keeps sigmoid(x) for the backward grad * s * (1 + x (1 - s)), recorded ops when a
    graph of the gradient is wanted."""
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        y, ctx.aux = ctx.device.backend.silu(x.data)
        ctx.save_for_backward(x)
        return ctx.wrap(y)

    @staticmethod
    def backward(ctx, grad):
        return SiluBackward.of(ctx, grad, None if _function._vmap else ctx.aux)      # (as Gelu's)


class SiluBackward(Function):
    """grad * s (1 + x (1 - s)), s = sigmoid(x), as one op (the backend's kernel; ``aux``: s as the forward
    kept it, or None to recompute it), differentiable again: d/dx is grad * s (1 - s) (2 + x (1 - 2 s))."""
    batch_rule = batching.elementwise

    @staticmethod
    def arrays(ctx, g, x, aux):
        return ctx.device.backend.silu_backward(g, x, aux)

    @staticmethod
    def forward(ctx, grad, x, aux):
        ctx.save_for_backward(grad, x)
        return ctx.wrap(SiluBackward.arrays(ctx, grad.data, x.data, aux))

    @staticmethod
    def backward(ctx, gg):
        grad, x = ctx.saved_tensors
        need_g, need_x = ctx.needs_input_grad[:2]
        d_grad = SiluBackward.apply(gg, x, None) if need_g else None
        if not need_x:
            return d_grad, None, None
        s = sigmoid(x)
        return d_grad, gg * grad * (s * (1.0 - s) * (x * (1.0 - s * 2.0) + 2.0)), None


class LeakyRelu(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, slope):
        ctx.save_for_backward(x)
        ctx.slope = slope
        a = x.data
        return ctx.wrap(ctx.xp.where(a > 0, a, a * a.dtype.type(slope)))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return where(greater(x, 0), grad, grad * ctx.slope), None


class Elu(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, alpha):
        xp = ctx.xp
        a = x.data
        y = ctx.wrap(xp.where(a > 0, a, xp.expm1(xp.minimum(a, 0)) * a.dtype.type(alpha)))
        ctx.save_for_backward(x, y)
        ctx.alpha = alpha
        return y

    @staticmethod
    def backward(ctx, grad):
        x, y = ctx.saved_tensors
        return where(greater(x, 0), grad, grad * (y + ctx.alpha)), None


class Erf(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        if x.data.dtype is bfloat16:         # erf in float32, rounded once
            return ctx.wrap(ctx.device.backend.erf(x.data.astype(float32)).astype(bfloat16))
        return ctx.wrap(ctx.device.backend.erf(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * (exp(-(x * x)) * _2_OVER_SQRT_PI)


class Softplus(Function):
    batch_rule = batching.elementwise
    # fused for stability: log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)) never overflows
    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        a = x.data
        ctx.save_for_backward(x)
        return ctx.wrap(xp.maximum(a, 0) + xp.log1p(xp.exp(-xp.abs(a))))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * sigmoid(x)


def _unary(cls, op, doc=None, real_only=False):
    """The public function of a unary op: a number or array becomes a tensor first."""
    def f(x):
        if not isinstance(x, Tensor):
            x = as_tensor(x, op)
        return cls.apply(x)

    def g(x):
        if not isinstance(x, Tensor):
            x = as_tensor(x, op)
        if x.data.dtype.kind == "c":
            _no_complex(x, op)
        return cls.apply(x)
    g.__name__ = f.__name__ = g.__qualname__ = f.__qualname__ = op
    if doc:
        g.__doc__ = f.__doc__ = doc
    return g if real_only else f


neg = register(method=("neg", "__neg__"), aliases=("negative",), tests=(
    OpTest(UNARY, ref="np.negative", op=_operator.neg),
    _ctest(_CUNARY, "np.negative", _operator.neg, "complex_neg"),
))(_unary(Neg, "neg", "-x, elementwise."))
abs = register(method=("abs", "__abs__"), tests=(
    OpTest(UNARY, ref="np.abs", avoid=(0.0,)),
    _ctest(_CUNARY, "np.abs", name="complex_abs", avoid=(0.0,)),
))(_unary(Abs, "abs", "|x|, elementwise; the gradient at 0 is 0."))
exp = register(method=True, tests=(OpTest(UNARY, ref="np.exp"), _ctest(_CUNARY, "np.exp", name="complex_exp")))(
    _unary(Exp, "exp", "e ** x, elementwise."))
expm1 = register(method=True, tests=OpTest(UNARY, ref="np.expm1"))(
    _unary(Expm1, "expm1", "e ** x - 1, elementwise, exact near 0."))
log = register(method=True, tests=(OpTest(UNARY, ref="np.log", domain=(0.1, 4.0)),
                                   _ctest(_CUNARY, "np.log", name="complex_log", domain=(0.5, 2.0))))(
    _unary(Log, "log", "Natural logarithm, elementwise."))
log1p = register(method=True, tests=OpTest(UNARY, ref="np.log1p", domain=(-0.5, 3.0)))(
    _unary(Log1p, "log1p", "log(1 + x), elementwise, exact near 0."))
sqrt = register(method=True, tests=(OpTest(UNARY, ref="np.sqrt", domain=(0.1, 4.0)),
                                    _ctest(_CUNARY, "np.sqrt", name="complex_sqrt", domain=(0.5, 2.0))))(
    _unary(Sqrt, "sqrt", "Square root, elementwise."))
rsqrt = register(method=True, tests=OpTest(UNARY, ref=lambda np, a: 1 / np.sqrt(a), domain=(0.2, 4.0)))(
    _unary(Rsqrt, "rsqrt", "1 / sqrt(x), elementwise."))
square = register(method=True, tests=(OpTest(UNARY, ref="np.square"),
                                      _ctest(_CUNARY, "np.square", name="complex_square")))(
    _unary(Square, "square", "x * x, elementwise."))
sin = register(method=True, tests=(OpTest(UNARY, ref="np.sin"), _ctest(_CUNARY, "np.sin", name="complex_sin")))(
    _unary(Sin, "sin", "Sine, elementwise."))
cos = register(method=True, tests=(OpTest(UNARY, ref="np.cos"), _ctest(_CUNARY, "np.cos", name="complex_cos")))(
    _unary(Cos, "cos", "Cosine, elementwise."))
tan = register(method=True, tests=OpTest(UNARY, ref="np.tan", domain=(-1.2, 1.2)))(
    _unary(Tan, "tan", "Tangent, elementwise."))
tanh = register(method=True, tests=(OpTest(UNARY, ref="np.tanh"),
                                    _ctest(_CUNARY, "np.tanh", name="complex_tanh", domain=(-1.0, 1.0))))(
    _unary(Tanh, "tanh", "Hyperbolic tangent, elementwise."))
sigmoid = register(method=True, tests=(OpTest(UNARY, ref="refs.sigmoid", domain=(-6.0, 6.0)),
                                       _ctest(_CUNARY, "refs.sigmoid", name="complex_sigmoid", domain=(-1.0, 1.0))))(
    _unary(Sigmoid, "sigmoid", "1 / (1 + exp(-x)), elementwise, computed without overflow."))
relu = register(method=True, tests=OpTest(UNARY, ref=lambda np, a: np.maximum(a, 0), avoid=(0.0,)))(
    _unary(Relu, "relu", "max(x, 0), elementwise; the gradient at 0 is 0.", real_only=True))
erf = register(method=True, tests=OpTest(UNARY, ref="refs.erf"))(
    _unary(Erf, "erf", "The error function, elementwise.", real_only=True))
negative = neg


@register(method="__pos__", tests=OpTest(UNARY, ref="np.positive", op=_operator.pos))
def positive(x):
    """+x: the tensor itself, as PyTorch's (no copy, no graph node)."""
    return as_tensor(x, "positive")


@register(method=True, tests=OpTest(UNARY, ref="np.sinh"))
def sinh(x):
    """Hyperbolic sine, elementwise."""
    return Sinh.apply(as_tensor(x, "sinh"))


def _real(v, op, what):
    """v as a float, or a TypeError naming the op and argument."""
    n = _number(v)
    if n is None or isinstance(n, bool):
        raise TypeError(f"{op}: expected a number as {what}, got {type(v).__name__}")
    return float(n)


@register(method=True, tests=(
    OpTest(UNARY, ref=lambda np, a: np.where(a > 0, a, a * a.dtype.type(0.01)), avoid=(0.0,)),
    OpTest(UNARY, ref=lambda np, a: np.where(a > 0, a, a * a.dtype.type(0.2)), op=lambda x: leaky_relu(x, 0.2),
           name="leaky_relu_slope", avoid=(0.0,))))
def leaky_relu(x, negative_slope=0.01):
    """x where x > 0, else negative_slope * x."""
    x = as_tensor(x, "leaky_relu")
    if x.data.dtype.kind == "c":
        _no_complex(x, "leaky_relu")
    return LeakyRelu.apply(x, _real(negative_slope, "leaky_relu", "negative_slope"))


@register(method=True, tests=OpTest(UNARY, ref=lambda np, a: np.where(a > 0, a, np.expm1(a)), avoid=(0.0,)))
def elu(x, alpha=1.0):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    x = as_tensor(x, "elu")
    if x.data.dtype.kind == "c":
        _no_complex(x, "elu")
    return Elu.apply(x, _real(alpha, "elu", "alpha"))


@register(method=True, tests=(
    OpTest(UNARY, ref="refs.gelu", domain=(-4.0, 4.0)),
    OpTest(UNARY, ref=lambda np, a: (0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a ** 3)))).astype(a.dtype),
           op=lambda x: gelu(x, approximate="tanh"), name="gelu_tanh")))
def gelu(x, approximate="none"):
    """x * Phi(x) with the exact erf form (PyTorch's default), or the tanh approximation."""
    x = as_tensor(x, "gelu")
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if x.data.dtype.kind == "f":                 # the fused Function; other dtypes (bfloat16) as composed ops
        return Gelu.apply(x, approximate)
    if approximate == "none":
        return x * (erf(x * (1.0 / _SQRT_2)) + 1.0) * 0.5
    return x * (tanh((x + x * x * x * 0.044715) * _SQRT_2_OVER_PI) + 1.0) * 0.5


@register(method=True, tests=OpTest(UNARY, ref=lambda np, a: a * (1 / (1 + np.exp(-a))).astype(a.dtype)))
def silu(x):
    """x * sigmoid(x) (also called swish)."""
    x = as_tensor(x, "silu")
    if x.data.dtype.kind == "f":                 # the fused Function; other dtypes (complex, bfloat16) as composed ops
        return Silu.apply(x)
    return x * sigmoid(x)


@register(method=True, tests=(
    OpTest(UNARY, ref="refs.softplus", domain=(-5.0, 5.0)),
    OpTest(UNARY, ref=lambda np, a: np.where(2 * a > 3, a, np.logaddexp(0, 2 * a) / 2).astype(a.dtype),
           op=lambda x: softplus(x, beta=2.0, threshold=3.0), name="softplus_beta", avoid=(1.5,))))
def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, computed stably; linear where beta * x > threshold (as in PyTorch)."""
    x = as_tensor(x, "softplus")
    if x.data.dtype.kind == "c":
        _no_complex(x, "softplus")
    beta, threshold = _real(beta, "softplus", "beta"), _real(threshold, "softplus", "threshold")
    bx = x * beta if beta != 1 else x
    y = Softplus.apply(bx)
    if beta != 1:
        y = y / beta
    return where(greater(bx, threshold), x, y)


# --------------------------------------------------------------------------- where, clamp
class Where(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, cond, a, b):
        ctx.cond = cond
        return ctx.wrap(ctx.xp.where(cond.data, _data(a), _data(b)))

    @staticmethod
    def backward(ctx, grad):
        c = ctx.cond
        ga = where(c, grad, 0.0) if ctx.needs_input_grad[1] else None
        gb = where(c, 0.0, grad) if ctx.needs_input_grad[2] else None
        return None, ga, gb


def _where_method(self, condition, other):
    """PyTorch's x.where(cond, y): x where cond holds, else y."""
    return where(condition, self, other)


@register(methods={"where": _where_method}, tests=(     # masked_fill: ops/indexed.py
    OpTest((((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (2,), ())), ref="np.where",
           kinds=("bool", None, None)),
    OpTest((((2, 3), (2, 3)), ((3,), ())), ref=lambda np, c, a: np.where(c, a, a.dtype.type(0)),
           op=lambda c, a: where(c, a, 0.0), name="where_scalar", kinds=("bool", None)),
    _ctest((((2, 3), (2, 3)),), lambda np, a, b: np.where(a.real > 0, a, b), lambda x, y: where(x.real > 0, x, y),
           "complex_where")))
def where(cond, a, b):
    """a where cond is true, else b (broadcast together); cond takes no gradient."""
    ref = next((v for v in (a, b, cond) if isinstance(v, Tensor)), None)
    if ref is None:
        raise TypeError("where: expected at least one Tensor among cond, a and b")
    cond = as_tensor(cond, "where", like=ref)
    if cond.dtype.kind != "b":
        cond = Tensor._make(cond.data.astype(bool), cond.device)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = as_tensor(a, "where", like=cond)
    ta = isinstance(a, Tensor)
    if ta and isinstance(b, Tensor):
        for v in (a, b):
            if v.device is not cond.device:
                raise RuntimeError(f"where: expected all tensors on one device, got {cond.device} and {v.device}")
        shape = broadcast_shapes(cond.shape, a.shape, b.shape, op="where")
        if a.dtype != b.dtype:
            rd = result_type(a.dtype, b.dtype)
            a, b = a.to(dtype=rd), b.to(dtype=rd)
    else:
        t, v = (a, b) if ta else (b, a)
        if t.device is not cond.device:
            raise RuntimeError(f"where: expected all tensors on one device, got {cond.device} and {t.device}")
        n = _number(v)
        t, v = _scalar_operand(t, n, "where") if n is not None else _tensor_pair(t, as_tensor(v, "where", like=t), "where")
        a, b = (t, v) if ta else (v, t)
        shape = broadcast_shapes(cond.shape, t.shape, op="where")
    if state.enabled:
        a = broadcast_to(a, shape) if isinstance(a, Tensor) and a.requires_grad and a.shape != shape else a
        b = broadcast_to(b, shape) if isinstance(b, Tensor) and b.requires_grad and b.shape != shape else b
    return Where.apply(cond, a, b)


class Clamp(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        y = ctx.xp.clip(x.data, lo, hi)
        return ctx.wrap(y if x.data.dtype is not bfloat16 else y.astype(bfloat16))   # (NumPy gives float32)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        inside = None
        if ctx.lo is not None:
            inside = greater_equal(x, ctx.lo)
        if ctx.hi is not None:
            m = less_equal(x, ctx.hi)
            inside = m if inside is None else logical_and(inside, m)
        return where(inside, grad, 0.0), None, None


@register(method=True, tests=(
    OpTest(UNARY, ref=lambda np, a: np.clip(a, -0.5, 1.0), op=lambda x: clamp(x, -0.5, 1.0), avoid=(-0.5, 1.0)),
    OpTest(UNARY, ref=lambda np, a: np.maximum(a, a.dtype.type(0.1)), op=lambda x: x.clamp(min=0.1), name="clamp_min",
           avoid=(0.1,)),
    OpTest(BINARY[:2], ref="np.maximum", op=lambda x, lo: clamp(x, lo), name="clamp_tensor", avoid=(0.0,))))
def clamp(x, min=None, max=None):
    """x limited to [min, max] (either may be None); numbers or tensors. The gradient passes where
    x is inside the range, boundaries included."""
    x = as_tensor(x, "clamp")
    if x.data.dtype.kind == "c":
        _no_complex(x, "clamp")
    if min is None and max is None:
        raise ValueError("clamp: expected at least one of min and max")
    for name, v in (("min", min), ("max", max)):
        if v is not None and not isinstance(v, Tensor) and (_number(v) is None or isinstance(v, bool)):
            raise TypeError(f"clamp: expected {name} to be a number or a Tensor, got {type(v).__name__}")
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        lo = None if min is None else as_tensor(min, "clamp", like=x)
        hi = None if max is None else as_tensor(max, "clamp", like=x)
        return ClampTensor.apply(x, lo, hi)
    backend = x.device.backend
    dt = x.data.dtype
    for v in (min, max):
        if v is not None:
            rd = scalar_result_dtype(dt, _number(v), "clamp")
            if rd != dt:                      # an int tensor clamped to 2.5 becomes the default float
                x, dt = x.to(dtype=rd), rd
    lo = None if min is None else backend.scalar(_number(min), scalar_result_dtype(dt, _number(min), "clamp"))
    hi = None if max is None else backend.scalar(_number(max), scalar_result_dtype(dt, _number(max), "clamp"))
    return Clamp.apply(x, lo, hi)


class ClampTensor(Function):
    """clamp with Tensor bounds: x where it is inside [lo, hi] (boundaries included, as the scalar
    form), else the bound; the gradient goes to x inside, to the bound it was clamped to outside."""
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, lo, hi):
        xp = ctx.xp
        y = x.data
        if lo is not None:
            y = xp.maximum(y, lo.data)
        if hi is not None:
            y = xp.minimum(y, hi.data)
        ctx.save_for_backward(x, lo, hi)
        return ctx.wrap(y)

    @staticmethod
    def backward(ctx, grad):
        x, lo, hi = ctx.saved_tensors
        below = less(x, lo) if lo is not None else None
        above = greater(x, hi) if hi is not None else None
        outside = below if above is None else above if below is None else logical_or(below, above)
        gx = where(outside, 0.0, grad)
        glo = sum_to(where(below, grad, 0.0), lo.shape) if lo is not None and ctx.needs_input_grad[1] else None
        ghi = sum_to(where(above, grad, 0.0), hi.shape) if hi is not None and ctx.needs_input_grad[2] else None
        return sum_to(gx, x.shape), glo, ghi


@register(method=True, tests=OpTest(UNARY[:2], ref=lambda np, a: np.clip(a, -0.5, 1.0), op=lambda x: x.clip(-0.5, 1.0),
                                    avoid=(-0.5, 1.0)))
def clip(x, a_min=None, a_max=None):
    """clamp under NumPy's argument names: x limited to [a_min, a_max]."""
    return clamp(x, a_min, a_max)


# --------------------------------------------------------------------------- complex numbers
# Gradients follow PyTorch's convention: for a real loss L of complex z, z.grad = dL/dRe z + i dL/dIm z,
# so a holomorphic y = f(z) passes grad * conj(f'(z)) back, and a real input of a complex op gets the
# real part of its gradient (Cast's backward). On real tensors conj is the tensor itself: no op.
class Conj(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(ctx.xp.conj(x.data))

    @staticmethod
    def backward(ctx, grad):
        return Conj.apply(grad)


def _cj(t):
    """conj(t) for a Tensor t inside a backward: t itself when it is real (the real path pays a test)."""
    return Conj.apply(t) if t.data.dtype.kind == "c" else t


class Real(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.src = x.data.dtype
        return ctx.wrap(ctx.xp.real(x.data).copy())      # a copy: PyTorch's view would share memory

    @staticmethod
    def backward(ctx, grad):
        return grad.to(dtype=ctx.src)                     # grad + 0i


class Imag(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.src = x.data.dtype
        return ctx.wrap(ctx.xp.imag(x.data).copy())

    @staticmethod
    def backward(ctx, grad):
        return MulScalar.apply(grad.to(dtype=ctx.src), 1j)   # 0 + i grad


class Complex(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, re, im):
        b = ctx.device.backend
        cd = complex_dtype(re.data.dtype)
        return ctx.wrap(re.data.astype(cd) + im.data.astype(cd) * b.scalar(1j, cd))

    @staticmethod
    def backward(ctx, grad):
        need_re, need_im = ctx.needs_input_grad
        return (real(grad) if need_re else None), (imag(grad) if need_im else None)


def _complex_arg(x, op):
    x = as_tensor(x, op)
    if x.data.dtype.kind != "c":
        raise TypeError(f"{op}: expected a complex tensor, got {x.dtype}")
    return x


@register(method=True, tests=_ctest(_CUNARY, "np.conj", name="complex_conj"))
def conj(x):
    """Complex conjugate, elementwise; a real tensor is returned as it is (no op, as in PyTorch)."""
    x = as_tensor(x, "conj")
    return Conj.apply(x) if x.data.dtype.kind == "c" else x


def real(x):
    """The real part (a float tensor of the same precision); a real tensor is returned as it is."""
    x = as_tensor(x, "real")
    return Real.apply(x) if x.data.dtype.kind == "c" else x


real = register(methods={"real": property(real, doc="The real part (the tensor itself when it is real).")},
                tests=_ctest(_CUNARY, "np.real", lambda x: x.real, "complex_real"))(real)   # x.real: a property


def imag(x):
    """The imaginary part (a float tensor of the same precision); complex tensors only, as in PyTorch."""
    return Imag.apply(_complex_arg(x, "imag"))


imag = register(methods={"imag": property(imag, doc="The imaginary part (complex tensors only).")},
                tests=_ctest(_CUNARY, "np.imag", lambda x: x.imag, "complex_imag"))(imag)   # x.imag: a property


@register(method=True, tests=_ctest(_CUNARY, lambda np, a: np.where(a == 0, 0, a / np.where(a == 0, 1, np.abs(a))),
                                    name="complex_sgn", avoid=(0.0,)))
def sgn(x):
    """z / |z| for complex z (0 at 0); sign(x) for real x. Differentiable for complex z != 0."""
    x = as_tensor(x, "sgn")
    if x.data.dtype.kind != "c":
        return sign(x)
    r = abs(x)
    zero = equal(r, 0)
    return where(zero, 0.0, x / where(zero, 1.0, r))


@register(method=True, tests=_ctest(_CUNARY, "np.angle", name="complex_angle", avoid=(0.0,)))
def angle(x):
    """The argument atan2(imag, real) in (-pi, pi]; for a real tensor 0 or pi (no gradient there)."""
    x = as_tensor(x, "angle")
    if not is_inexact(x.data.dtype):
        x = x.to(dtype=get_default_dtype())
    return Angle.apply(x)


class Angle(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.angle(x.data))

    @staticmethod
    def backward(ctx, grad):
        z, = ctx.saved_tensors
        if z.data.dtype.kind != "c":
            return grad * 0.0                    # piecewise constant in a real input
        # d angle = (x dy - y dx) / |z|^2, so z.grad = grad * i z / |z|^2 (0 at z == 0, as in PyTorch)
        r2 = square(real(z)) + square(imag(z))
        zero = equal(r2, 0)
        return where(zero, 0.0, grad * (z * 1j) / where(zero, 1.0, r2))


@register(tests=_ctest((((2, 3), (2, 3)), ((3,), (2, 3))),
                       lambda np, a, b: (a + 1j * b).astype(np.result_type(a, np.complex64)),
                       name="complex_from_parts", kinds=("real", "real")))
def complex(real, imag):
    """real + i * imag from two float tensors of one dtype (broadcast together): complex64 from
    float32, complex128 from float64."""
    re, im = as_tensor(real, "complex"), as_tensor(imag, "complex", like=real if isinstance(real, Tensor) else None)
    for t in (re, im):
        if t.data.dtype.kind != "f":
            raise TypeError(f"complex: expected float tensors for real and imag, got {re.dtype} and {im.dtype}")
    if re.dtype != im.dtype:
        raise TypeError(f"complex: expected real and imag of one dtype, got {re.dtype} and {im.dtype}")
    if re.device is not im.device:
        raise RuntimeError(f"complex: expected all tensors on one device, got {re.device} and {im.device}")
    if re.shape != im.shape:
        shape = broadcast_shapes(re.shape, im.shape, op="complex")
        re, im = broadcast_to(re, shape), broadcast_to(im, shape)
    return Complex.apply(re, im)


@register(tests=_ctest(_CUNARY, lambda np, a: np.stack([a.real, a.imag], -1)))
def view_as_real(x):
    """A complex tensor as a float tensor with a last dimension of 2 (real, imag); a copy here."""
    from .shape import stack
    x = _complex_arg(x, "view_as_real")
    return stack([real(x), imag(x)], -1)


@register(tests=_ctest((((3, 2),),), lambda np, a: a[..., 0] + 1j * a[..., 1], kinds=("real",)))
def view_as_complex(x):
    """The inverse of view_as_real: a float tensor whose last dimension is 2 as a complex tensor."""
    x = as_tensor(x, "view_as_complex")
    if x.data.dtype.kind != "f" or x.ndim == 0 or x.shape[-1] != 2:
        raise ValueError(f"view_as_complex: expected a float tensor whose last dimension is 2, got {x.dtype} "
                         f"of shape {x.shape}")
    return complex(x[..., 0], x[..., 1])


def _no_complex(x, op):
    """TypeError for ops that need an order (comparisons, max, clamp, ...) on a complex tensor."""
    raise TypeError(f"{op}: not supported for complex tensors (got {x.dtype}); compare .abs() or .real instead")
