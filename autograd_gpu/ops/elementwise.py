"""Elementwise ops: arithmetic (Tensor or Python number on either side), unary maths, activations,
comparisons and other constants of the graph, where, clamp.

Binary wrappers keep the Functions simple: when the graph is recorded, an operand that needs a
gradient is broadcast (``broadcast_to``, whose backward is ``sum_to``) and cast to the result dtype
explicitly, so every backward here returns gradients already shaped like its inputs.
"""
import cmath
import math
import operator as _operator

from ..autograd.function import Function
from ..autograd import function as _function
from ..autograd.grad_mode import state
from ..tensor import Tensor
from ..dtypes import scalar_result_dtype, result_type, get_default_dtype, complex_dtype
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
    backend = t.device._backend or t.device.backend
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
                if ad.shape != bd.shape or (a.requires_grad or b.requires_grad) and ad.dtype != bd.dtype:
                    a, b = _tensor_pair(a, b, op)      # align for the graph, or a clear shape error
                return tensor_fn(a, b)
            c = b.__class__
            if (c is float or c is int) and a.data.dtype.kind == "f":
                backend = a.device._backend or a.device.backend
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
_consts = {}             # (number, dtype) -> 0-d host array of that dtype


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
    _array_forward = True

    @staticmethod
    def forward(ctx, a, b):
        return ctx.wrap(a.data + b.data)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class AddScalar(Function):
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
    _array_forward = True

    @staticmethod
    def forward(ctx, a, b):
        return ctx.wrap(a.data - b.data)

    @staticmethod
    def backward(ctx, grad):
        if not ctx.needs_input_grad[1]:
            return grad, None
        return grad, (ctx.wrap(-grad.data) if ctx._direct() else -grad)


class RSubScalar(Function):
    _array_forward = True
    display_name = "Sub"

    @staticmethod
    def forward(ctx, x, c):
        return ctx.wrap(c - x.data)

    @staticmethod
    def backward(ctx, grad):
        return -grad, None


class Mul(Function):
    _array_forward = True

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(a.data * b.data)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        need_a, need_b = ctx.needs_input_grad
        ad, bd = a.data, b.data
        if ad.dtype.kind == "c" or bd.dtype.kind == "c":    # d(ab)/da = b: grad * conj(b)
            a, b = _cj(a), _cj(b)
        elif ctx._direct():
            g = grad.data
            return (ctx.wrap(g * bd) if need_a else None), (ctx.wrap(g * ad) if need_b else None)
        # Mul.apply directly: the operands were aligned in forward, so the wrapper has nothing to do
        return (Mul.apply(grad, b) if need_a else None), (Mul.apply(grad, a) if need_b else None)


class MulScalar(Function):
    _array_forward = True
    __slots__ = ("c",)
    display_name = "Mul"

    @staticmethod
    def forward(ctx, x, c):
        ctx.c = c
        a = x.data
        return ctx.wrap(a * _host_const(a, c))

    @staticmethod
    def backward(ctx, grad):
        c = ctx.c
        if c.__class__ is not float and c.__class__ is not int:    # complex (maybe a typed NumPy scalar)
            c = c.conjugate()
        elif ctx._direct():
            g = grad.data
            return ctx.wrap(g * _host_const(g, c)), None
        return MulScalar.apply(grad, c), None


class Div(Function):
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
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.xp.maximum(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        return _minmax_grads(ctx, grad, greater)


class Minimum(Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.xp.minimum(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        return _minmax_grads(ctx, grad, less)


def _minmax_grads(ctx, grad, wins):
    """The gradient goes to the operand that was picked; a tie splits it evenly, as in PyTorch."""
    a, b = ctx.saved_tensors
    need_a, need_b = ctx.needs_input_grad
    tie = equal(a, b)
    half = grad * 0.5
    ga = where(wins(a, b), grad, where(tie, half, 0.0)) if need_a else None
    gb = where(wins(b, a), grad, where(tie, half, 0.0)) if need_b else None
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


add = _binary("add", Add.apply, AddScalar.apply, AddScalar.apply, "a + b with broadcasting; either may be a Python number.",
              _operator.add)
sub = _binary("sub", Sub.apply, _sub_scalar, RSubScalar.apply, "a - b with broadcasting; either may be a Python number.")
mul = _binary("mul", Mul.apply, MulScalar.apply, MulScalar.apply, "a * b with broadcasting; either may be a Python number.",
              _operator.mul)
_div = _binary("div", Div.apply, DivScalar.apply, RDivScalar.apply, "")
pow = _binary("pow", Pow.apply, PowScalar.apply, RPowScalar.apply, "a ** b; either may be a Python number.")
maximum = _binary("maximum", _ordered_fn(Maximum.apply, "maximum"), lambda t, c: Maximum.apply(*_as_pair("")(t, c)),
                  _swapped(Maximum.apply), "Elementwise max; at ties each operand gets half the gradient.")
minimum = _binary("minimum", _ordered_fn(Minimum.apply, "minimum"), lambda t, c: Minimum.apply(*_as_pair("")(t, c)),
                  _swapped(Minimum.apply), "Elementwise min; at ties each operand gets half the gradient.")


def rsub(a, b):
    return sub(b, a)


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


def rdiv(a, b):
    return div(b, a)


def rpow(a, b):
    return pow(b, a)


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
    backend = t.device._backend or t.device.backend
    if _function._vmap and _function._vmap[0]((a, b), None):     # inside vmap: see func/vmap.py
        return _function._vmap[2](getattr(backend.xp, name), (a, b))
    return Tensor._make(getattr(backend.xp, name)(_data(a), _data(b)), t.device)


def equal(a, b):
    return _constant("equal", a, b, "eq")


def not_equal(a, b):
    return _constant("not_equal", a, b, "ne")


def _ordered(name, a, b, op):
    """A comparison that needs an order: complex operands are a TypeError, as in PyTorch."""
    for v in (a, b):
        if isinstance(v, Tensor) and v.data.dtype.kind == "c":
            _no_complex(v, op)
    return _constant(name, a, b, op)


def less(a, b):
    return _ordered("less", a, b, "lt")


def less_equal(a, b):
    return _ordered("less_equal", a, b, "le")


def greater(a, b):
    return _ordered("greater", a, b, "gt")


def greater_equal(a, b):
    return _ordered("greater_equal", a, b, "ge")


eq, ne, lt, le, gt, ge = equal, not_equal, less, less_equal, greater, greater_equal


def floor_divide(a, b):
    """a // b, rounded toward minus infinity; a constant to the graph."""
    return _ordered("floor_divide", a, b, "floor_divide")


def remainder(a, b):
    """a % b with the sign of b (Python's and NumPy's convention); a constant to the graph."""
    return _ordered("remainder", a, b, "remainder")


def logical_and(a, b):
    return _constant("logical_and", a, b, "logical_and")


def logical_or(a, b):
    return _constant("logical_or", a, b, "logical_or")


def logical_xor(a, b):
    return _constant("logical_xor", a, b, "logical_xor")


def _bitwise(name, a, b, op):
    t = a if isinstance(a, Tensor) else b
    if isinstance(t, Tensor) and t.dtype.kind not in "biu":
        raise TypeError(f"{op}: expected bool or integer tensors, got {t.dtype}")
    return _constant(name, a, b, op)


def bitwise_and(a, b):
    return _bitwise("bitwise_and", a, b, "and")


def bitwise_or(a, b):
    return _bitwise("bitwise_or", a, b, "or")


def bitwise_xor(a, b):
    return _bitwise("bitwise_xor", a, b, "xor")


def _unary_constant(name, x, op):
    x = as_tensor(x, op)
    if x.data.dtype.kind == "c" and name in ("sign", "floor", "ceil", "round"):
        _no_complex(x, op)
    if _function._vmap and _function._vmap[0]((x,), None):         # inside vmap: see func/vmap.py
        return _function._vmap[2](getattr(x.device.backend.xp, name), (x,))
    return Tensor._make(getattr(x.device.backend.xp, name)(x.data), x.device)


def sign(x):
    """-1, 0 or 1 by the sign of x; a constant to the graph (its derivative is 0 almost everywhere)."""
    return _unary_constant("sign", x, "sign")


def floor(x):
    return _unary_constant("floor", x, "floor")


def ceil(x):
    return _unary_constant("ceil", x, "ceil")


def round(x):
    return _unary_constant("round", x, "round")


def logical_not(x):
    return _unary_constant("logical_not", x, "logical_not")


def bitwise_not(x):
    x = as_tensor(x, "invert")
    if x.dtype.kind not in "biu":
        raise TypeError(f"invert (~): expected a bool or integer tensor, got {x.dtype}")
    return _unary_constant("invert", x, "invert")


def isnan(x):
    return _unary_constant("isnan", x, "isnan")


def isinf(x):
    return _unary_constant("isinf", x, "isinf")


def isfinite(x):
    return _unary_constant("isfinite", x, "isfinite")


# --------------------------------------------------------------------------- unary maths
class Neg(Function):
    _array_forward = True

    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(-x.data)

    @staticmethod
    def backward(ctx, grad):
        if ctx._direct():
            return ctx.wrap(-grad.data)
        return -grad


class Abs(Function):
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
        if ctx._direct():
            yd, = ctx._saved_arrays()
            if yd.dtype.kind != "c":
                return ctx.wrap(grad.data * yd)
        y, = ctx.saved_tensors
        return Mul.apply(grad, _cj(y))    # same shape and dtype: no wrapper needed


class Expm1(Function):
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
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.log1p(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad / _cj(x + 1.0)


class Sqrt(Function):
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
    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(1.0 / ctx.xp.sqrt(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        y, = ctx.saved_tensors
        return grad * _cj(y * y * y) * -0.5


class Square(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.square(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * _cj(x * 2.0)


class Sin(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.sin(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return Mul.apply(grad, _cj(Cos.apply(x)))


class Cos(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.cos(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return Mul.apply(grad, _cj(Neg.apply(Sin.apply(x))))


class Tan(Function):
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
    _array_forward = True

    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap(ctx.xp.tanh(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if ctx._direct():
            yd, = ctx._saved_arrays()
            if yd.dtype.kind != "c":
                return ctx.wrap(_times_grad(_host_const(yd, 1) - yd * yd, grad.data))
        y, = ctx.saved_tensors
        if y.data.dtype.kind == "c":             # composed: TanhBackward's own backward is for real y
            return grad * conj(1.0 - y * y)
        return TanhBackward.apply(grad, y)


def _times_grad(t, g):
    """t * g, into t when it is a fresh array of the result's shape and dtype (big arrays: one
    allocation less, and no page faults for a second temporary)."""
    if t.shape == g.shape and t.dtype == g.dtype and t.ndim:
        t *= g
        return t
    return t * g


class TanhBackward(Function):
    """grad * (1 - y**2) as one op (PyTorch's tanh_backward): one node in backward instead of three,
    itself differentiable so create_graph works."""
    _array_forward = True

    @staticmethod
    def forward(ctx, grad, y):
        ctx.save_for_backward(grad, y)
        return ctx.wrap(_times_grad(1 - y.data * y.data, grad.data))

    @staticmethod
    def backward(ctx, gg):
        grad, y = ctx.saved_tensors
        need_g, need_y = ctx.needs_input_grad
        return (TanhBackward.apply(gg, y) if need_g else None), (gg * grad * y * -2.0 if need_y else None)


class Sigmoid(Function):
    _array_forward = True
    # fused: the backward from the saved output, y * (1 - y), stays finite where the composed
    # 1 / (1 + exp(-x)) would give inf * 0; the forward is a backend kernel (overflow-safe there)
    @staticmethod
    def forward(ctx, x):
        y = ctx.wrap((ctx.device._backend or ctx.device.backend).sigmoid(x.data))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if ctx._direct():
            yd, = ctx._saved_arrays()
            if yd.dtype.kind != "c":
                return ctx.wrap(_times_grad((_host_const(yd, 1) - yd) * yd, grad.data))
        y, = ctx.saved_tensors
        if y.data.dtype.kind == "c":             # composed, as Tanh's
            return grad * conj(y * (1.0 - y))
        return SigmoidBackward.apply(grad, y)


class SigmoidBackward(Function):
    """grad * y * (1 - y) as one differentiable op (PyTorch's sigmoid_backward)."""
    _array_forward = True

    @staticmethod
    def forward(ctx, grad, y):
        ctx.save_for_backward(grad, y)
        yd = y.data
        return ctx.wrap(_times_grad((1 - yd) * yd, grad.data))

    @staticmethod
    def backward(ctx, gg):
        grad, y = ctx.saved_tensors
        need_g, need_y = ctx.needs_input_grad
        return (SigmoidBackward.apply(gg, y) if need_g else None), (gg * grad * (1.0 - y * 2.0) if need_y else None)


class Relu(Function):
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
        if ctx._direct():
            yd, = ctx._saved_arrays()
            return ctx.wrap(grad.data * (yd > 0))
        y, = ctx.saved_tensors
        return ReluBackward.apply(grad, y)


class ReluBackward(Function):
    """grad where x > 0, else 0, as one op; linear in grad, so its own backward is itself."""
    _array_forward = True

    @staticmethod
    def forward(ctx, grad, x):
        ctx.save_for_backward(x)
        return ctx.wrap(grad.data * (x.data > 0))

    @staticmethod
    def backward(ctx, gg):
        x, = ctx.saved_tensors
        return ReluBackward.apply(gg, x), None


class LeakyRelu(Function):
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
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap((ctx.device._backend or ctx.device.backend).erf(x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * (exp(-(x * x)) * _2_OVER_SQRT_PI)


class Softplus(Function):
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


neg = _unary(Neg, "neg")
abs = _unary(Abs, "abs")
exp = register(method=True, tests=OpTest(UNARY, ref="np.exp"))(_unary(Exp, "exp", "e ** x, elementwise."))
expm1 = _unary(Expm1, "expm1")
log = _unary(Log, "log")
log1p = _unary(Log1p, "log1p")
sqrt = _unary(Sqrt, "sqrt")
rsqrt = _unary(Rsqrt, "rsqrt")
square = _unary(Square, "square")
sin = _unary(Sin, "sin")
cos = _unary(Cos, "cos")
tan = _unary(Tan, "tan")
tanh = _unary(Tanh, "tanh")
sigmoid = _unary(Sigmoid, "sigmoid")
relu = _unary(Relu, "relu", real_only=True)
erf = _unary(Erf, "erf", real_only=True)
for _f, _doc in [(neg, "-x"), (abs, "|x|; the gradient at 0 is 0"), (expm1, "e ** x - 1, exact near 0"),
                 (log, "Natural logarithm"), (log1p, "log(1 + x), exact near 0"), (sqrt, "Square root"),
                 (rsqrt, "1 / sqrt(x)"), (square, "x * x"), (sin, "Sine"), (cos, "Cosine"), (tan, "Tangent"),
                 (tanh, "Hyperbolic tangent"), (sigmoid, "1 / (1 + exp(-x)), computed without overflow"),
                 (relu, "max(x, 0); the gradient at 0 is 0"), (erf, "The error function")]:
    _f.__doc__ = _doc + ", elementwise."
negative = neg


def _real(v, op, what):
    """v as a float, or a TypeError naming the op and argument."""
    n = _number(v)
    if n is None or isinstance(n, bool):
        raise TypeError(f"{op}: expected a number as {what}, got {type(v).__name__}")
    return float(n)


def leaky_relu(x, negative_slope=0.01):
    """x where x > 0, else negative_slope * x."""
    x = as_tensor(x, "leaky_relu")
    if x.data.dtype.kind == "c":
        _no_complex(x, "leaky_relu")
    return LeakyRelu.apply(x, _real(negative_slope, "leaky_relu", "negative_slope"))


def elu(x, alpha=1.0):
    """x where x > 0, else alpha * (exp(x) - 1)."""
    x = as_tensor(x, "elu")
    if x.data.dtype.kind == "c":
        _no_complex(x, "elu")
    return Elu.apply(x, _real(alpha, "elu", "alpha"))


def gelu(x, approximate="none"):
    """x * Phi(x) with the exact erf form (PyTorch's default), or the tanh approximation."""
    x = as_tensor(x, "gelu")
    if approximate == "none":
        return x * (erf(x * (1.0 / _SQRT_2)) + 1.0) * 0.5
    if approximate == "tanh":
        return x * (tanh((x + x * x * x * 0.044715) * _SQRT_2_OVER_PI) + 1.0) * 0.5
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x):
    """x * sigmoid(x) (also called swish)."""
    x = as_tensor(x, "silu")
    return x * sigmoid(x)


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
    @staticmethod
    def forward(ctx, x, lo, hi):
        ctx.save_for_backward(x)
        ctx.lo, ctx.hi = lo, hi
        return ctx.wrap(ctx.xp.clip(x.data, lo, hi))

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
    backend = x.device._backend or x.device.backend
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


def clip(x, a_min=None, a_max=None):
    return clamp(x, a_min, a_max)


# --------------------------------------------------------------------------- complex numbers
# Gradients follow PyTorch's convention: for a real loss L of complex z, z.grad = dL/dRe z + i dL/dIm z,
# so a holomorphic y = f(z) passes grad * conj(f'(z)) back, and a real input of a complex op gets the
# real part of its gradient (Cast's backward). On real tensors conj is the tensor itself: no op.
class Conj(Function):
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
    @staticmethod
    def forward(ctx, x):
        ctx.src = x.data.dtype
        return ctx.wrap(ctx.xp.real(x.data).copy())      # a copy: PyTorch's view would share memory

    @staticmethod
    def backward(ctx, grad):
        return grad.to(dtype=ctx.src)                     # grad + 0i


class Imag(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.src = x.data.dtype
        return ctx.wrap(ctx.xp.imag(x.data).copy())

    @staticmethod
    def backward(ctx, grad):
        return MulScalar.apply(grad.to(dtype=ctx.src), 1j)   # 0 + i grad


class Complex(Function):
    @staticmethod
    def forward(ctx, re, im):
        b = ctx.device._backend or ctx.device.backend
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


def conj(x):
    """Complex conjugate, elementwise; a real tensor is returned as it is (no op, as in PyTorch)."""
    x = as_tensor(x, "conj")
    return Conj.apply(x) if x.data.dtype.kind == "c" else x


def real(x):
    """The real part (a float tensor of the same precision); a real tensor is returned as it is."""
    x = as_tensor(x, "real")
    return Real.apply(x) if x.data.dtype.kind == "c" else x


def imag(x):
    """The imaginary part (a float tensor of the same precision); complex tensors only, as in PyTorch."""
    return Imag.apply(_complex_arg(x, "imag"))


def sgn(x):
    """z / |z| for complex z (0 at 0); sign(x) for real x. Differentiable for complex z != 0."""
    x = as_tensor(x, "sgn")
    if x.data.dtype.kind != "c":
        return sign(x)
    r = abs(x)
    zero = equal(r, 0)
    return where(zero, 0.0, x / where(zero, 1.0, r))


def angle(x):
    """The argument atan2(imag, real) in (-pi, pi]; for a real tensor 0 or pi (no gradient there)."""
    x = as_tensor(x, "angle")
    if x.data.dtype.kind not in "fc":
        x = x.to(dtype=get_default_dtype())
    return Angle.apply(x)


class Angle(Function):
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


def view_as_real(x):
    """A complex tensor as a float tensor with a last dimension of 2 (real, imag); a copy here."""
    from .shape import stack
    x = _complex_arg(x, "view_as_real")
    return stack([real(x), imag(x)], -1)


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
