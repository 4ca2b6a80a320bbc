"""More elementwise maths, as PyTorch names it: inverse trigonometric and hyperbolic functions, log2/log10/
exp2, the special functions (erfc, erfinv, lgamma, digamma, polygamma: backend methods, SciPy's or a
NumPy port on the CPU, cupyx.scipy.special on CUDA), the differentiable ``fmod`` and ``remainder``
(``%``), and composed ones (hypot, lerp, logaddexp, logit, xlogy, sinc, copysign, nan_to_num, ...).

Primitives are Functions whose backward is in Tensor ops (any order of derivative); the rest is composed
from existing ops and needs no backward of its own. Integer and bool inputs of the float functions are
cast to the default float dtype first, as in PyTorch.
"""
import math
from typing import Callable

from ..autograd.function import Function
from ..autograd.grad_mode import no_grad, is_grad_enabled as grad_enabled
from ..tensor import Tensor
from ..dtypes import get_default_dtype, bfloat16
from ._util import as_tensor
from . import batching
from .registry import register, OpTest, OpTestOptions, UNARY, BINARY, NO_GRAD as _NO_GRAD
from .elementwise import (exp, log, log1p, rsqrt, sin, sinh, where, maximum, isnan, isinf, isfinite,
                          clamp, equal, logical_and, _number, _scalar_operand, _tensor_pair, _constant,
                          _unary_constant)

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_2_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_2 = math.sqrt(math.pi) / 2.0
_BF16_MAX = 3.3895313892515355e38          # the largest finite bfloat16 (NumPy's finfo does not know it)


def _floating(x, op):
    """x as a real floating Tensor: ints and bools become the default float dtype (PyTorch's promotion)."""
    x = as_tensor(x, op)
    k = x.dtype.kind
    if k == "c":
        raise TypeError(f"{op}: expected a real tensor, got {x.dtype}")
    if k in "biu":
        x = x.to(dtype=get_default_dtype())
    return x


def _pair(a, b, op, floating=False):
    """Two Tensors on one device for a binary Function, broadcast and cast where the graph is recorded:
    a Python number takes the tensor's dtype (a float number with an int tensor: the default float dtype)."""
    if isinstance(a, Tensor) and not isinstance(b, Tensor):
        b = _operand(a, b, op)
        a = a if a.dtype == b.dtype or a.dtype.kind == b.dtype.kind else a.to(dtype=b.dtype)
    elif isinstance(b, Tensor) and not isinstance(a, Tensor):
        a = _operand(b, a, op)
        b = b if a.dtype == b.dtype or a.dtype.kind == b.dtype.kind else b.to(dtype=a.dtype)
    elif not isinstance(a, Tensor):
        raise TypeError(f"{op}: expected at least one Tensor, got {type(a).__name__} and {type(b).__name__}")
    if floating:
        a, b = _floating(a, op), _floating(b, op)
    return _tensor_pair(a, b, op)


def _operand(t, v, op):
    n = _number(v)
    if n is None:
        return as_tensor(v, op, like=t)
    t, c = _scalar_operand(t, n, op)
    return Tensor._make(t.device.backend.xp.asarray(c, dtype=t.dtype), t.device)


def _grads(ctx, ga, gb):
    return (ga() if ctx.needs_input_grad[0] else None), (gb() if ctx.needs_input_grad[1] else None)


# --------------------------------------------------------------------------- unary primitives
def _unary_function(name, forward, derivative):
    """A unary Function: ``forward(ctx, array)`` computes, ``grad * derivative(x)`` (Tensor ops) is its
    backward, and vmap applies it once to the batched operand (batching.elementwise)."""
    def fwd(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(forward(ctx, x.data))

    def bwd(ctx, grad):
        x, = ctx.saved_tensors
        return grad * derivative(x)
    return type(name, (Function,), {"batch_rule": batching.elementwise, "forward": staticmethod(fwd),
                                    "backward": staticmethod(bwd), "__doc__": f"{name}: forward and backward."})


def _xp(fn):
    return lambda ctx, a: getattr(ctx.xp, fn)(a)


def _backend(fn):
    return lambda ctx, a: getattr(ctx.device.backend, fn)(a)


Asin = _unary_function("Asin", _xp("arcsin"), lambda x: rsqrt(1 - x * x))
Acos = _unary_function("Acos", _xp("arccos"), lambda x: -rsqrt(1 - x * x))
Atan = _unary_function("Atan", _xp("arctan"), lambda x: 1 / (1 + x * x))
Cosh = _unary_function("Cosh", _xp("cosh"), lambda x: sinh(x))
Asinh = _unary_function("Asinh", _xp("arcsinh"), lambda x: rsqrt(x * x + 1))
Acosh = _unary_function("Acosh", _xp("arccosh"), lambda x: rsqrt(x * x - 1))
Atanh = _unary_function("Atanh", _xp("arctanh"), lambda x: 1 / (1 - x * x))
Log2 = _unary_function("Log2", _xp("log2"), lambda x: 1 / (x * _LN2))
Log10 = _unary_function("Log10", _xp("log10"), lambda x: 1 / (x * _LN10))
Exp2 = _unary_function("Exp2", _xp("exp2"), lambda x: exp2(x) * _LN2)
Erfc = _unary_function("Erfc", _backend("erfc"), lambda x: exp(-(x * x)) * -_2_OVER_SQRT_PI)
Erfinv = _unary_function("Erfinv", _backend("erfinv"), lambda x: exp(erfinv(x) ** 2) * _SQRT_PI_OVER_2)
Lgamma = _unary_function("Lgamma", _backend("lgamma"), lambda x: digamma(x))
Digamma = _unary_function("Digamma", _backend("digamma"), lambda x: polygamma(1, x))


class Polygamma(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, n):
        ctx.save_for_backward(x)
        ctx.n = n
        return ctx.wrap(ctx.device.backend.polygamma(n, x.data))

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * polygamma(ctx.n + 1, x), None


def _public(cls, name, doc):
    def f(x):
        return cls.apply(_floating(x, name))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


_INV = OpTestOptions(domain=(-0.9, 0.9))
_POS = OpTestOptions(domain=(0.2, 4.0))
asin = register(method=("asin", "arcsin"), aliases=("arcsin",), tests=OpTest(UNARY, ref="np.arcsin", **_INV))(
    _public(Asin, "asin", "Inverse sine, elementwise (NaN outside [-1, 1])."))
acos = register(method=("acos", "arccos"), aliases=("arccos",), tests=OpTest(UNARY, ref="np.arccos", **_INV))(
    _public(Acos, "acos", "Inverse cosine, elementwise (NaN outside [-1, 1])."))
atan = register(method=("atan", "arctan"), aliases=("arctan",), tests=OpTest(UNARY, ref="np.arctan"))(
    _public(Atan, "atan", "Inverse tangent, elementwise."))
cosh = register(method=True, tests=OpTest(UNARY, ref="np.cosh"))(
    _public(Cosh, "cosh", "Hyperbolic cosine, elementwise."))
asinh = register(method=("asinh", "arcsinh"), aliases=("arcsinh",), tests=OpTest(UNARY, ref="np.arcsinh"))(
    _public(Asinh, "asinh", "Inverse hyperbolic sine, elementwise."))
acosh = register(method=("acosh", "arccosh"), aliases=("arccosh",),
                 tests=OpTest(UNARY, ref="np.arccosh", domain=(1.2, 3.0)))(
    _public(Acosh, "acosh", "Inverse hyperbolic cosine, elementwise (NaN below 1)."))
atanh = register(method=("atanh", "arctanh"), aliases=("arctanh",), tests=OpTest(UNARY, ref="np.arctanh", **_INV))(
    _public(Atanh, "atanh", "Inverse hyperbolic tangent, elementwise (+-inf at +-1)."))
log2 = register(method=True, tests=OpTest(UNARY, ref="np.log2", **_POS))(
    _public(Log2, "log2", "Base-2 logarithm, elementwise."))
log10 = register(method=True, tests=OpTest(UNARY, ref="np.log10", **_POS))(
    _public(Log10, "log10", "Base-10 logarithm, elementwise."))
# exp2, erfinv and digamma are named by the derivatives above: declared, as mypy cannot infer a module-level
# name used above its definition
exp2: Callable[..., Tensor] = register(method=True, tests=OpTest(UNARY, ref="np.exp2"))(
    _public(Exp2, "exp2", "2 ** x, elementwise."))
erfc = register(method=True, tests=OpTest(UNARY, ref="refs.erfc"))(
    _public(Erfc, "erfc", "The complementary error function 1 - erf(x), accurate where erf(x) is near 1."))
erfinv: Callable[..., Tensor] = register(method=True, tests=OpTest(UNARY, ref="refs.erfinv", **_INV))(
    _public(Erfinv, "erfinv", "The inverse error function on [-1, 1] (+-inf at +-1, NaN outside)."))
lgamma = register(method=True, tests=(
    OpTest(UNARY, ref="refs.lgamma", **_POS),
    OpTest((((2, 3),),), ref="refs.lgamma", domain=(-2.9, -0.1), avoid=(-2.0, -1.0), name="lgamma_negative")))(
    _public(Lgamma, "lgamma", "log |Gamma(x)|, elementwise (+inf at the poles 0, -1, -2, ...)."))
digamma: Callable[..., Tensor] = register(method=True, tests=OpTest(UNARY, ref="refs.digamma", **_POS))(
    _public(Digamma, "digamma", "The digamma function d/dx lgamma(x), elementwise (-inf at 0, NaN at -1, -2, ...)."))


def _polygamma_method(self, n):
    """x.polygamma(n): the n-th derivative of digamma, elementwise."""
    return polygamma(n, self)


@register(methods={"polygamma": _polygamma_method}, tests=(
    OpTest((((3, 4),), ((),)), op=lambda x: polygamma(1, x), ref="refs.polygamma_1", name="polygamma_1", **_POS),
    OpTest((((2, 3),),), op=lambda x: x.polygamma(2), ref="refs.polygamma_2", name="polygamma_2", **_POS)))
def polygamma(n, x):
    """The n-th derivative of digamma, elementwise (``polygamma(0, x)`` is digamma); n a non-negative int."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"polygamma: expected n as a non-negative int, got {n!r}")
    x = _floating(x, "polygamma")
    return Polygamma.apply(x, n) if n else Digamma.apply(x)


# --------------------------------------------------------------------------- binary primitives
class Atan2(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, y, x):
        ctx.save_for_backward(y, x)
        return ctx.wrap(ctx.xp.arctan2(y.data, x.data))

    @staticmethod
    def backward(ctx, grad):
        y, x = ctx.saved_tensors
        den = x * x + y * y
        zero = equal(den, 0)                       # at the origin PyTorch's gradients are 0 (not 0 / 0)
        r = where(zero, 0.0, grad / where(zero, 1.0, den))
        return _grads(ctx, lambda: r * x, lambda: -r * y)


class Hypot(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, a, b):
        out = ctx.wrap(ctx.xp.hypot(a.data, b.data))
        ctx.save_for_backward(a, b, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        return _grads(ctx, lambda: grad * a / out, lambda: grad * b / out)


class Fmod(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.xp.fmod(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        # a - trunc(a / b) * b: the quotient is piecewise constant, so d/da = 1 and d/db = -trunc(a / b)
        a, b = ctx.saved_tensors
        return _grads(ctx, lambda: grad, lambda: -grad * trunc(a / b))


class Remainder(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.xp.remainder(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        # a - floor(a / b) * b: d/da = 1 and d/db = -floor(a / b), as PyTorch's
        a, b = ctx.saved_tensors
        return _grads(ctx, lambda: grad, lambda: -grad * _unary_constant("floor", a / b, "remainder"))


@register(method=("atan2", "arctan2"), aliases=("arctan2",), tests=OpTest(BINARY, ref="np.arctan2", avoid=(0.0,)))
def atan2(input, other):
    """The angle of the point (other, input), elementwise: atan(input / other) in the right quadrant."""
    return Atan2.apply(*_pair(input, other, "atan2", floating=True))


@register(method=True, tests=OpTest(BINARY, ref="np.hypot", avoid=(0.0,)))
def hypot(input, other):
    """sqrt(input**2 + other**2), elementwise, without overflow."""
    return Hypot.apply(*_pair(input, other, "hypot", floating=True))


def _division_like(cls, a, b, op):
    a, b = _pair(a, b, op)
    if a.dtype.kind == "c" or b.dtype.kind == "c":
        raise TypeError(f"{op}: expected real tensors, got {a.dtype} and {b.dtype}")
    return cls.apply(a, b)


# operands kept apart from the jumps at multiples of b: finite differences stay on one branch
_MOD = OpTestOptions(domain=(0.6, 3.3), avoid=(1.0, 1.2, 1.5, 1.8, 2.0, 2.4, 2.5, 3.0))


@register(method=True, tests=(
    OpTest((((3, 4), (3, 4)), ((2, 3), (3,))), ref="np.fmod", **_MOD),
    OpTest((((4,), (4,)),), ref=lambda np, a, b: np.fmod(-a, b), op=lambda a, b: fmod(-a, b), name="fmod_negative",
           **_MOD),
    OpTest((((4,), (4,)),), ref="np.fmod", kinds=("int", "int"), name="fmod_int", domain=(1.0, 9.0), grad=False,
           gradgrad=False)))      # integer operands: nothing to differentiate (the float entries check both)
def fmod(input, other):
    """C's fmod: input - trunc(input / other) * other, the sign of input; differentiable in both operands."""
    return _division_like(Fmod, input, other, "fmod")


def _rmod(a, b):
    return remainder(b, a)


@register(method=("remainder", "__mod__"), methods={"__rmod__": _rmod}, tests=(
    OpTest((((4,), (4,)),), ref="np.remainder", op=lambda a, b: a % b, name="mod", **_MOD),
    OpTest((((3, 4), (3, 4)), ((2, 3), (3,))), ref=lambda np, a, b: np.remainder(-a, b),
           op=lambda a, b: remainder(-a, b), name="remainder_negative", **_MOD),
    OpTest((((4,), (4,)),), ref="np.remainder", kinds=("int", "int"), op=lambda a, b: a % b, name="mod_int",
           domain=(1.0, 9.0), grad=False, gradgrad=False)))   # integer operands: nothing to differentiate
def remainder(input, other):
    """input % other with the sign of other (Python's, NumPy's and PyTorch's convention): input -
    floor(input / other) * other; differentiable in both operands (1 and -floor(input / other))."""
    return _division_like(Remainder, input, other, "remainder")


# --------------------------------------------------------------------------- constants of the graph


class Trunc(Function):
    """trunc with PyTorch's derivative: a zero gradient (the result stays in the graph, unlike a constant)."""
    _array_forward = True
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x):
        return ctx.wrap(ctx.xp.trunc(x.data))

    @staticmethod
    def backward(ctx, grad):
        return _zeros(grad)


def _zeros(like):
    """A zero gradient of like's shape and dtype (PyTorch's zeros_like: 0 even where like is NaN)."""
    return Tensor._make(like.device.backend.xp.zeros(like.data.shape, dtype=like.data.dtype), like.device)


@register(method=("trunc", "fix"), aliases=("fix",), tests=OpTest(
    UNARY, ref="np.trunc", domain=(-4.0, 4.0), avoid=(-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)))
def trunc(x):
    """x rounded toward zero, elementwise (x's dtype); its gradient is 0, as PyTorch's."""
    x = as_tensor(x, "trunc")
    if x.dtype.kind == "c":
        raise TypeError(f"trunc: expected a real tensor, got {x.dtype}")
    if x.dtype.kind != "f" and x.dtype is not bfloat16:
        return _unary_constant("trunc", x, "trunc")
    return Trunc.apply(x)


class Heaviside(Function):
    """heaviside while gradients are recorded: the result is in the graph, and backward through it raises,
    as PyTorch's (whose derivative is not implemented) does, rather than treating it as a constant."""
    _array_forward = True
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, v):
        return ctx.wrap(ctx.xp.heaviside(x.data, v.data))

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("heaviside: the derivative of heaviside is not implemented (PyTorch's is not either); "
                           "use a smooth step such as sigmoid(k * x) to differentiate through a step")


@register(method=True, tests=OpTest(
    (((2, 3), (2, 3)), ((3,), (1,))), ref=lambda np, x, v: np.heaviside(np.round(x), v),
    op=lambda x, v: heaviside(x.round(), v),
    **_NO_GRAD))     # backward raises, as PyTorch's: tests/test_grad_audit.py checks the error
def heaviside(input, values):
    """0 where input < 0, 1 where input > 0, ``values`` where input == 0 (backward raises, as PyTorch's).
    Its derivative is not implemented (PyTorch's is not either): a recorded result raises in backward."""
    for v in (input, values):
        if isinstance(v, Tensor) and v.dtype.kind == "c":
            raise TypeError(f"heaviside: expected real tensors, got {v.dtype}")
    if not isinstance(values, Tensor):
        raise TypeError(f"heaviside: expected values as a Tensor, got {type(values).__name__}")
    if isinstance(input, Tensor) and (input.requires_grad or values.requires_grad) and grad_enabled():
        a, b = _tensor_pair(input, values, "heaviside")
        if a.dtype == b.dtype:
            return Heaviside.apply(a, b)
    return _constant("heaviside", input, values, "heaviside")


# --------------------------------------------------------------------------- composed
@register(method=True, tests=OpTest(UNARY, ref=lambda np, a: a - np.trunc(a), domain=(-4.0, 4.0),
                                    avoid=(-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0)))
def frac(x):
    """The fractional part x - trunc(x), elementwise (the sign of x); its gradient is 1."""
    x = as_tensor(x, "frac")
    if x.dtype.kind not in "f" and x.dtype is not bfloat16:
        raise TypeError(f"frac: expected a float tensor, got {x.dtype}")
    return x - trunc(x)


@register(method=True, tests=OpTest(UNARY, ref=lambda np, a: np.sinc(a).astype(a.dtype)))
def sinc(x):
    """sin(pi x) / (pi x), elementwise, 1 at 0 (the normalised sinc)."""
    x = _floating(x, "sinc")
    zero = equal(x, 0)
    px = where(zero, 1.0, x * math.pi)
    return where(zero, 1.0, sin(px) / px)


@register(method=True, tests=OpTest(UNARY, ref="np.deg2rad"))
def deg2rad(x):
    """Degrees to radians, elementwise."""
    return _floating(x, "deg2rad") * (math.pi / 180.0)


@register(method=True, tests=OpTest(UNARY, ref="np.rad2deg"))
def rad2deg(x):
    """Radians to degrees, elementwise."""
    return _floating(x, "rad2deg") * (180.0 / math.pi)


@register(method=True, tests=(
    OpTest((((2, 3), (2, 3), (2, 3)), ((3,), (2, 3), ())), ref=lambda np, a, b, w: a + w * (b - a)),
    OpTest((((2, 3), (2, 3)),), op=lambda a, b: lerp(a, b, 0.3), ref=lambda np, a, b: a + a.dtype.type(0.3) * (b - a),
           name="lerp_scalar")))
def lerp(input, end, weight):
    """input + weight * (end - input): a tensor or number weight, all broadcast together."""
    input = _floating(input, "lerp")
    end = as_tensor(end, "lerp", like=input)
    return input + weight * (end - input)


@register(method=True, tests=OpTest(BINARY, ref="np.logaddexp"))
def logaddexp(input, other):
    """log(exp(input) + exp(other)), elementwise, without overflow."""
    a, b = _pair(input, other, "logaddexp", floating=True)
    with no_grad():
        m = maximum(a, b)
        m = where(isinf(m), 0.0, m)          # -inf and -inf give -inf, inf gives inf, never inf - inf
    return m + log(exp(a - m) + exp(b - m))


@register(method=True, tests=OpTest(BINARY, ref="np.logaddexp2"))
def logaddexp2(input, other):
    """log2(2**input + 2**other), elementwise, without overflow."""
    a, b = _pair(input, other, "logaddexp2", floating=True)
    return logaddexp(a * _LN2, b * _LN2) * (1.0 / _LN2)


@register(method=True, tests=(
    OpTest(UNARY, ref=lambda np, a: np.log(a / (1 - a)), domain=(0.05, 0.95)),
    OpTest((((3, 4),),), op=lambda x: logit(x, eps=0.2), name="logit_eps", domain=(0.05, 0.95), avoid=(0.2, 0.8),
           ref=lambda np, a: (lambda z: np.log(z / (1 - z)))(np.clip(a, 0.2, 0.8)))))
def logit(input, eps=None):
    """log(p / (1 - p)), elementwise; with ``eps``, p is clamped to [eps, 1 - eps] first (gradient 0 outside)."""
    p = _floating(input, "logit")
    if eps is not None:
        p = clamp(p, eps, 1.0 - eps)
    return log(p) - log1p(-p)


class Xlogy(Function):
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, x, y):
        xp = ctx.xp
        ctx.save_for_backward(x, y)
        a, b = x.data, y.data
        zero = (a == 0) & ~xp.isnan(b)
        return ctx.wrap(xp.where(zero, xp.zeros((), a.dtype), a * xp.log(xp.where(zero, xp.ones((), b.dtype), b))))

    @staticmethod
    def backward(ctx, grad):
        # PyTorch's: d/dx = log(y), but 0 where x == 0 and y <= 0; d/dy = x / y
        x, y = ctx.saved_tensors
        return _grads(ctx, lambda: _xlogy_dx(grad, x, y), lambda: grad * x / y)


def _xlogy_dx(grad, x, y):
    off = logical_and(equal(x, 0), y <= 0)
    return where(off, 0.0, grad * log(where(off, 1.0, y)))


@register(method=True, tests=(
    OpTest((((2, 3), (2, 3)), ((3,), (2, 3))), ref=lambda np, x, y: x * np.log(y), domain=(0.2, 3.0)),
    OpTest((((2, 3), (2, 3)),), op=lambda x, y: xlogy(x * (x > 1.0), y), name="xlogy_zero", domain=(0.2, 3.0),
           avoid=(1.0,), ref=lambda np, x, y: np.where(x > 1, x * np.log(y), 0).astype(x.dtype))))
def xlogy(input, other):
    """input * log(other), 0 where input is 0 (unless other is NaN), elementwise; PyTorch's gradients."""
    return Xlogy.apply(*_pair(input, other, "xlogy", floating=True))


class Copysign(Function):
    """copysign with PyTorch's derivatives: result / input for input (0 where input is 0) and a zero
    gradient for other (in the graph, not None)."""
    batch_rule = batching.elementwise

    @staticmethod
    def forward(ctx, a, b):
        xp = ctx.xp
        out = xp.copysign(a.data, b.data)
        if ctx.needs_input_grad[0]:
            # PyTorch's ratio result / input (a constant of the graph: its derivative in input is 0): +-1 by
            # the two sign bits, 0 where input is 0 and NaN where it is infinite or NaN (inf / inf), without warnings
            ratio = xp.where(xp.signbit(out) == xp.signbit(a.data), xp.ones((), out.dtype), -xp.ones((), out.dtype))
            ratio = xp.where(a.data == 0, xp.zeros((), out.dtype), ratio)
            ctx.ratio = xp.where(~xp.isfinite(a.data), xp.full((), xp.nan, dtype=out.dtype), ratio)
        return ctx.wrap(out)

    @staticmethod
    def backward(ctx, grad):
        return _grads(ctx, lambda: grad * ctx.wrap(ctx.ratio), lambda: _zeros(grad))


@register(method=True, tests=OpTest(BINARY, ref="np.copysign", avoid=(0.0,)))
def copysign(input, other):
    """|input| with the sign of other (its sign bit: -0.0 counts as negative), elementwise; 0 gradient for other.
    The gradient for input is PyTorch's result / input (0 where input is 0)."""
    return Copysign.apply(*_pair(input, other, "copysign", floating=True))


@register(method=True, tests=(     # log of [-2, 2]: NaN below 0, -inf at 0 (kept away: finite differences)
    OpTest(UNARY, ref=lambda np, a: np.nan_to_num(np.log(a)), op=lambda x: nan_to_num(log(x)), avoid=(0.0,)),
    OpTest((((3, 4),),), ref=lambda np, a: np.nan_to_num(np.log(a), nan=1.5, posinf=2.0, neginf=-3.0),
           op=lambda x: nan_to_num(log(x), nan=1.5, posinf=2.0, neginf=-3.0), avoid=(0.0,), name="nan_to_num_values")))
def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced by ``nan``, ``posinf`` and ``neginf`` (the dtype's largest and lowest
    finite values by default); the gradient is 0 at the replaced elements."""
    x = as_tensor(input, "nan_to_num")
    if x.dtype.kind not in "f" and x.dtype is not bfloat16:
        return x
    big = _BF16_MAX if x.dtype is bfloat16 else float(x.device.backend.xp.finfo(x.dtype).max)
    pos = big if posinf is None else posinf
    neg = -big if neginf is None else neginf
    c = [Tensor._make(x.device.backend.xp.asarray(v, dtype=x.dtype), x.device) for v in (nan, pos, neg)]
    fill = where(isnan(x), c[0], where(x > 0, c[1], c[2]))     # constants of x's dtype (float64's max is no float32)
    return where(isfinite(x), x, fill)
