"""Tensor's operators and methods, each a thin call into the op functions (no math here)."""
from .tensor import Tensor
from .ops import elementwise as _e, reduction as _r, shape as _s, indexing as _ix, linalg as _la, inplace as _ip
from .ops._util import shape_arg


def _swap(f):
    def g(a, b):
        return f(b, a)
    g.__name__ = f"r{f.__name__}"
    return g


def _cmp(f):
    """Comparison operators answer NotImplemented for None and other non-array objects, so that
    ``t == None`` is False (as in PyTorch) and ``in`` tests on lists of tensors work."""
    def g(a, b):
        if b is None or isinstance(b, (str, dict, set)):
            return NotImplemented
        return f(a, b)
    g.__name__ = f.__name__
    return g


_OPERATORS = {
    "__add__": _e.add, "__radd__": _e.add, "__sub__": _e.sub, "__rsub__": _e.rsub,
    "__mul__": _e.mul, "__rmul__": _e.mul, "__truediv__": _e.div, "__rtruediv__": _e.rdiv,
    "__pow__": _e.pow, "__rpow__": _e.rpow, "__matmul__": _la.matmul, "__rmatmul__": _swap(_la.matmul),
    "__floordiv__": _e.floor_divide, "__rfloordiv__": _swap(_e.floor_divide),
    "__mod__": _e.remainder, "__rmod__": _swap(_e.remainder),
    "__neg__": _e.neg, "__abs__": _e.abs, "__pos__": lambda x: x,
    "__eq__": _cmp(_e.equal), "__ne__": _cmp(_e.not_equal), "__lt__": _e.less, "__le__": _e.less_equal,
    "__gt__": _e.greater, "__ge__": _e.greater_equal,
    "__and__": _e.bitwise_and, "__rand__": _e.bitwise_and, "__or__": _e.bitwise_or, "__ror__": _e.bitwise_or,
    "__xor__": _e.bitwise_xor, "__rxor__": _e.bitwise_xor, "__invert__": _e.bitwise_not,
    "__getitem__": lambda x, idx: _ix.getitem(x, idx),
    "__setitem__": lambda x, idx, v: _ix.setitem(x, idx, v),
    "__iadd__": _ip.add_, "__isub__": _ip.sub_, "__imul__": _ip.mul_, "__itruediv__": _ip.div_,
}

# methods whose signature is the function's with the tensor first
_SAME = {
    _e: "add sub mul div pow maximum minimum exp expm1 log log1p sqrt rsqrt square sin cos tan tanh sigmoid "
        "relu leaky_relu elu gelu silu softplus erf sign floor ceil round clamp clip abs neg isnan isinf "
        "isfinite eq ne lt le gt ge logical_and logical_or logical_not logical_xor",
    _r: "sum mean var std max min amax amin prod logsumexp norm argmax argmin any all cumsum",
    _s: "flatten swapaxes moveaxis squeeze unsqueeze expand_dims broadcast_to flip roll tile split chunk "
        "pad repeat_interleave unbind",
    _ip: "add_ sub_ mul_ div_ pow_ clamp_ fill_ zero_ copy_",
}
for _mod, _names in _SAME.items():
    for _name in _names.split():
        setattr(Tensor, _name, getattr(_mod, _name))
Tensor.swapdims = Tensor.swapaxes
Tensor.subtract, Tensor.multiply, Tensor.divide = Tensor.sub, Tensor.mul, Tensor.div
Tensor.clip_ = Tensor.clamp_

for _k, _f in _OPERATORS.items():
    setattr(Tensor, _k, _f)


# methods that take varargs shapes (x.reshape(2, 3) as well as x.reshape((2, 3)))
def reshape(self, *shape):
    return _s.reshape(self, shape_arg(shape, "reshape"))


def view(self, *shape):
    return _s.view(self, shape_arg(shape, "view"))


def permute(self, *dims):
    return _s.permute(self, shape_arg(dims, "permute"))


def transpose(self, *axes):
    return _s.transpose(self, *axes)


def expand(self, *sizes):
    return _s.expand(self, *sizes)


def repeat(self, *sizes):
    return _s.repeat(self, *sizes)


def view_as(self, other):
    return _s.view(self, other.shape)


def contiguous(self):
    return _s.contiguous(self)


def expand_as(self, other):
    return _s.broadcast_to(self, other.shape)


def where(self, condition, other):
    """PyTorch's x.where(cond, y): x where cond holds, else y."""
    return _e.where(condition, self, other)


def masked_fill(self, mask, value):
    """self with ``value`` where ``mask`` is true."""
    return _e.where(mask, value, self)


def matmul(self, other):
    return _la.matmul(self, other)


def dot(self, other):
    return _la.dot(self, other)


def outer(self, other):
    return _la.outer(self, other)


def gather(self, dim, index):
    return _ix.gather(self, dim, index)


def index_select(self, dim, index):
    return _ix.index_select(self, dim, index)


def scatter_add(self, dim, index, src):
    return _ix.scatter_add(self, dim, index, src)


def take_along_axis(self, indices, axis):
    return _ix.take_along_axis(self, indices, axis)


def is_complex(self):
    return self.data.dtype.kind == "c"


# complex parts: .real and .imag are properties (as in PyTorch), conj/angle/sgn methods
Tensor.real = property(_e.real, doc="The real part (the tensor itself when it is real).")
Tensor.imag = property(_e.imag, doc="The imaginary part (complex tensors only).")
Tensor.conj, Tensor.angle, Tensor.sgn = _e.conj, _e.angle, _e.sgn

for _f in (is_complex, reshape, view, contiguous, permute, transpose, expand, repeat, view_as, expand_as, where, masked_fill, matmul,
           dot, outer, gather, index_select, scatter_add, take_along_axis):
    setattr(Tensor, _f.__name__, _f)
