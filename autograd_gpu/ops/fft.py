"""Discrete Fourier transforms (NumPy's ``numpy.fft`` names and ``norm=`` conventions), differentiable.

Three primitives do the work, the rest is argument handling and composition:

- ``FFT``: a complex-to-complex transform over some axes (fftn or ifftn). Its adjoint is the
  opposite transform with the dual norm ("backward" <-> "forward", "ortho" <-> "ortho"), which is
  the backward under PyTorch's convention (the gradient of y = A x is A^H grad).
- ``RFFT``: real-to-half-spectrum along one axis. Backward: the half-spectrum gradient zero-padded to
  the full length, the adjoint complex transform, and the real part (the input is real).
- ``IRFFT``: half-spectrum-to-real along one axis with output length n. Backward: rfft of the
  gradient with the dual norm, with the bins whose mirror image lies outside the half spectrum
  doubled (bins 1 .. n - n//2 - 1), as PyTorch's fft_c2r_backward does. The imaginary parts of the
  DC bin (and of the Nyquist bin for even n) do not reach the output, so their gradient is 0.

The backward passes are written with these Functions and Tensor ops, so second derivatives work.
``n``/``s`` crop or zero-pad the input first (a differentiable slice or pad). Float32 input stays
in single precision (complex64), as in PyTorch and CuPy; NumPy 2 does the same.
"""
from ..autograd.function import Function
from ..tensor import Tensor
from ..dtypes import complex_dtype, real_dtype, get_default_dtype, bfloat16
from .shape import pad, roll
from .elementwise import real
from ._util import as_tensor, normalize_dim
from ..dtypes import float32, float64, complex64, complex128
from . import batching
from .registry import register, OpTest

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn", "rfftn",
           "irfftn", "fftshift", "ifftshift", "fftfreq", "rfftfreq"]

_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}

# --------------------------------------------------------------------------- op-table entries
# Entries with complex64/complex128 dtypes get complex inputs; gradients are checked in complex128 with
# PyTorch's convention (autograd.gradcheck perturbs real and imaginary parts separately).
C = (complex64, complex128)
R = (float32, float64)
_NO_BF16 = "NumPy's and CuPy's FFTs have no bfloat16 transforms (PyTorch refuses them too)"
_FTOL = {float32: {"rtol": 1e-4, "atol": 1e-5}, complex64: {"rtol": 1e-4, "atol": 1e-5}}
_NORMS = [("", {}), ("_ortho", {"norm": "ortho"}), ("_forward", {"norm": "forward"})]


def _out_dtype(np, fn, a):
    """PyTorch's dtypes (NumPy 2 agrees): single precision stays single."""
    single = a.dtype in (np.float32, np.complex64)
    if fn.startswith("irfft"):
        return np.float32 if single else np.float64
    return np.complex64 if single else np.complex128


def _tests(fn, samples, dtypes, variants):
    """The op-table entries of transform ``fn``: one per (id suffix, keyword arguments), against numpy.fft."""
    out = []
    for suffix, kw in variants:
        ref_kw = dict(kw)
        if "s" in kw and kw.get("axes") is None and not fn.endswith("2"):
            # NumPy 2 deprecates s without axes; ag.fft keeps the old default (the last len(s) axes)
            ref_kw["axes"] = tuple(range(-len(kw["s"]), 0))
        out.append(OpTest(samples, ref=lambda np, a, rk=ref_kw: getattr(np.fft, fn)(a, **rk).astype(
                               _out_dtype(np, fn, a)),
                          op=(lambda x, k=kw: globals()[fn](x, **k)) if kw else None,
                          name=f"fft.{fn}{suffix}", dtypes=dtypes, tol=_FTOL, no_bfloat16=_NO_BF16))
    return tuple(out)



# --------------------------------------------------------------------------- primitives
class FFT(Function):
    """fftn (inverse=False) or ifftn (inverse=True) of a complex tensor over ``axes``."""
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, axes, norm, inverse):
        ctx.axes, ctx.norm, ctx.inverse = axes, norm, inverse
        f = ctx.xp.fft.ifftn if inverse else ctx.xp.fft.fftn
        return ctx.wrap(f(x.data, axes=axes, norm=norm).astype(x.data.dtype, copy=False))

    @staticmethod
    def backward(ctx, grad):
        return FFT.apply(grad, ctx.axes, _DUAL[ctx.norm], not ctx.inverse), None, None, None


class RFFT(Function):
    """rfft of a real tensor along ``axis``: the n // 2 + 1 non-negative frequencies."""
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, axis, norm):
        ctx.axis, ctx.norm, ctx.n = axis, norm, x.data.shape[axis]
        y = ctx.xp.fft.rfft(x.data, axis=axis, norm=norm)
        return ctx.wrap(y.astype(complex_dtype(x.data.dtype), copy=False))

    @staticmethod
    def backward(ctx, grad):
        axis, n = ctx.axis, ctx.n
        widths = [(0, 0)] * grad.ndim
        widths[axis] = (0, n - grad.shape[axis])           # the negative frequencies got no gradient
        full = pad(grad, widths)
        return real(FFT.apply(full, (axis,), _DUAL[ctx.norm], True)), None, None


class IRFFT(Function):
    """irfft along ``axis`` of a half spectrum of n // 2 + 1 bins, giving n real values."""
    batch_rule = batching.unary_axis(1)

    @staticmethod
    def forward(ctx, x, axis, n, norm):
        ctx.axis, ctx.n, ctx.norm = axis, n, norm
        y = ctx.xp.fft.irfft(x.data, n=n, axis=axis, norm=norm)
        return ctx.wrap(y.astype(real_dtype(x.data.dtype), copy=False))

    @staticmethod
    def backward(ctx, grad):
        axis, n = ctx.axis, ctx.n
        g = RFFT.apply(grad, axis, _DUAL[ctx.norm])
        m = g.shape[axis]
        doubled = n - m                     # bins 1 .. n - m stand for themselves and their mirror image
        if doubled > 0:
            xp = g.device.backend.xp
            w = [1.0] + [2.0] * doubled + [1.0] * (m - 1 - doubled)
            shape = [1] * g.ndim
            shape[axis] = m
            g = g * Tensor._make(xp.asarray(w, dtype=real_dtype(g.dtype)).reshape(shape), g.device)
        return g, None, None, None


# --------------------------------------------------------------------------- argument handling
def _norm(norm, op):
    if norm is None:
        return "backward"
    if norm not in _DUAL:
        raise ValueError(f"{op}: norm must be 'backward', 'ortho' or 'forward' (or None), got {norm!r}")
    return norm


def _input(x, op, want_real=False):
    """x as a Tensor of the transform's input kind: complex (real input becomes complex of its
    precision; integers the default complex) or, for rfft, real (complex input is a TypeError)."""
    x = as_tensor(x, op)
    k = x.data.dtype.kind
    if x.data.dtype is bfloat16:
        raise TypeError(f"{op}: bfloat16 input is not supported (NumPy's and CuPy's FFTs have no bfloat16 "
                        "transforms, and there is no bfloat16 complex dtype); convert it with .float()")
    if want_real:
        if k == "c":
            raise TypeError(f"{op}: expected a real input tensor, got {x.dtype}; use fft for complex input")
        return x if k == "f" else x.to(dtype=get_default_dtype())
    return x if k == "c" else x.to(dtype=complex_dtype(x.dtype))


def _resize(x, axis, n, op):
    """x cropped or zero-padded along ``axis`` to length n (NumPy's ``n``/``s``)."""
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"{op}: expected an int number of points, got {type(n).__name__}")
    n = n.__index__()
    if n < 1:
        raise ValueError(f"{op}: invalid number of data points ({n}); expected at least 1")
    m = x.shape[axis]
    if n == m:
        return x
    if n < m:
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(0, n)
        return x[tuple(idx)]
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, n - m)
    return pad(x, widths)


def _axes_and_sizes(x, s, axes, op):
    """NumPy's (s, axes) rules for the n-dimensional transforms: axes default to the last len(s)
    dims (all dims without s); sizes default to the input's."""
    if axes is None:
        axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    axes = tuple(normalize_dim(a, x.ndim, op) for a in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: axes {axes} name a dimension twice")
    if s is None:
        s = tuple(x.shape[a] for a in axes)
    elif isinstance(s, int):
        s = (s,)
    s = tuple(s)
    if len(s) != len(axes):
        raise ValueError(f"{op}: s and axes must have the same length, got s={s} and axes={axes}")
    if x.ndim == 0:
        raise ValueError(f"{op}: expected a tensor with at least 1 dimension, got a 0-d tensor")
    return s, axes


def _c2c(x, s, axes, norm, inverse, op):
    x = _input(x, op)
    s, axes = _axes_and_sizes(x, s, axes, op)
    for a, n in zip(axes, s):
        x = _resize(x, a, n, op)
    if not axes:
        return x
    return FFT.apply(x, axes, _norm(norm, op), inverse)


def _dim(axis, dim, default, op):
    """NumPy's axis/axes, or PyTorch's dim (not both)."""
    if dim is None:
        return axis
    if axis != default:
        raise TypeError(f"{op}: got both an axis and dim=; pass one")
    return dim


def _axis(x, axis, op):
    if x.ndim == 0:
        raise ValueError(f"{op}: expected a tensor with at least 1 dimension, got a 0-d tensor")
    return normalize_dim(axis, x.ndim, op)


# --------------------------------------------------------------------------- public functions
@register(namespace="fft", tests=_tests("fft", (((5,),), ((2, 4),)), C, _NORMS + [("_n3", {"n": 3}), ("_n7_axis0", {"n": 7, "axis": 0})])
         + _tests("fft", (((2, 5),),), R, [("_real_input", {})]))
def fft(x, n=None, axis=-1, norm=None, *, dim=None):
    """One-dimensional discrete Fourier transform along ``axis`` (input cropped/zero-padded to n)."""
    x = _input(x, "fft")
    return _c2c(x, None if n is None else (n,), (_axis(x, _dim(axis, dim, -1, "fft"), "fft"),), norm, False, "fft")


@register(namespace="fft", tests=_tests("ifft", (((5,),), ((2, 4),)), C, _NORMS + [("_n6", {"n": 6})]) + (
    OpTest((((6,),),), ref=lambda np, a: a, op=lambda z: ifft(fft(z)), name="fft.roundtrip", dtypes=C, tol=_FTOL),))
def ifft(x, n=None, axis=-1, norm=None, *, dim=None):
    """Inverse of fft: 1/n scaling with the default norm="backward"."""
    x = _input(x, "ifft")
    return _c2c(x, None if n is None else (n,), (_axis(x, _dim(axis, dim, -1, "ifft"), "ifft"),), norm, True,
                "ifft")


@register(namespace="fft", tests=_tests("fftn", (((2, 3, 4),),), C, _NORMS[:2] + [("_s_axes", {"s": (3, 3), "axes": (0, 2)})]))
def fftn(x, s=None, axes=None, norm=None, *, dim=None):
    """n-dimensional transform over ``axes`` (all dims, or the last len(s)), sizes ``s``."""
    return _c2c(x, s, _dim(axes, dim, None, "fftn"), norm, False, "fftn")


@register(namespace="fft", tests=_tests("ifftn", (((2, 3, 4),),), C, _NORMS[:2] + [("_s", {"s": (2, 5)})]))
def ifftn(x, s=None, axes=None, norm=None, *, dim=None):
    """Inverse of fftn."""
    return _c2c(x, s, _dim(axes, dim, None, "ifftn"), norm, True, "ifftn")


@register(namespace="fft", tests=_tests("fft2", (((2, 3, 4),),), C, _NORMS[:2] + [("_s", {"s": (2, 5)})]))
def fft2(x, s=None, axes=(-2, -1), norm=None, *, dim=None):
    """fftn over the last two dims."""
    return _c2c(x, s, _dim(axes, dim, (-2, -1), "fft2"), norm, False, "fft2")


@register(namespace="fft", tests=_tests("ifft2", (((3, 4),),), C, _NORMS[:2] + [("_s", {"s": (4, 3)})]))
def ifft2(x, s=None, axes=(-2, -1), norm=None, *, dim=None):
    """ifftn over the last two dims."""
    return _c2c(x, s, _dim(axes, dim, (-2, -1), "ifft2"), norm, True, "ifft2")


@register(namespace="fft", tests=_tests("rfft", (((6,),), ((2, 5),)), R, _NORMS + [("_n4", {"n": 4}), ("_n7", {"n": 7}),
                                                                                ("_axis0", {"axis": 0})]) + (
    # a power spectrum: a real loss of a complex transform, the case the docs' example fits
    OpTest((((8,),),), ref=lambda np, a: (np.abs(np.fft.rfft(a)) ** 2).astype(a.dtype), op=lambda x: rfft(x).abs() ** 2,
           name="fft.power_spectrum", dtypes=R, tol=_FTOL, no_bfloat16=_NO_BF16),))
def rfft(x, n=None, axis=-1, norm=None, *, dim=None):
    """Transform of a real signal: the n // 2 + 1 non-negative frequency terms along ``axis``."""
    x = _input(x, "rfft", want_real=True)
    a = _axis(x, _dim(axis, dim, -1, "rfft"), "rfft")
    x = _resize(x, a, x.shape[a] if n is None else n, "rfft")
    return RFFT.apply(x, a, _norm(norm, "rfft"))


def _irfft_last(x, a, n, norm, op):
    """irfft of x along a into n points: the spectrum is cropped/zero-padded to n // 2 + 1 bins."""
    if isinstance(n, bool) or not hasattr(n, "__index__") or n.__index__() < 1:
        raise ValueError(f"{op}: invalid number of data points ({n!r}); expected an int of at least 1")
    n = n.__index__()
    x = _resize(x, a, n // 2 + 1, op)
    return IRFFT.apply(x, a, n, _norm(norm, op))


@register(namespace="fft", tests=_tests("irfft", (((4,),), ((2, 3),)), C, _NORMS + [("_n5", {"n": 5}), ("_n6", {"n": 6}),
                                                                                  ("_n3_axis0", {"n": 3, "axis": 0})]))
def irfft(x, n=None, axis=-1, norm=None, *, dim=None):
    """Inverse of rfft: n real points (default 2 * (m - 1) for m input bins) along ``axis``."""
    x = _input(x, "irfft")
    a = _axis(x, _dim(axis, dim, -1, "irfft"), "irfft")
    return _irfft_last(x, a, 2 * (x.shape[a] - 1) if n is None else n, norm, "irfft")


@register(namespace="fft", tests=_tests("rfftn", (((2, 3, 4),),), R, _NORMS[:2] + [("_s_axes", {"s": (3, 5), "axes": (2, 0)})]))
def rfftn(x, s=None, axes=None, norm=None, *, dim=None):
    """n-dimensional transform of a real tensor: rfft over the last of ``axes``, fft over the others."""
    x = _input(x, "rfftn", want_real=True)
    axes = _dim(axes, dim, None, "rfftn")
    s, axes = _axes_and_sizes(x, s, axes, "rfftn")
    if not axes:
        raise ValueError("rfftn: expected at least one axis")
    norm = _norm(norm, "rfftn")
    for a, n in zip(axes, s):
        x = _resize(x, a, n, "rfftn")
    y = RFFT.apply(x, axes[-1], norm)
    return FFT.apply(y, axes[:-1], norm, False) if len(axes) > 1 else y


@register(namespace="fft", tests=_tests("irfftn", (((2, 3, 4),),), C, _NORMS[:2] + [("_s", {"s": (3, 5)}),
                                                                                 ("_axes", {"axes": (0, 1)})]))
def irfftn(x, s=None, axes=None, norm=None, *, dim=None):
    """Inverse of rfftn: ifft over all but the last of ``axes``, then irfft over the last.

    The last axis's size defaults to 2 * (m - 1) for m input bins."""
    x = _input(x, "irfftn")
    axes = _dim(axes, dim, None, "irfftn")
    given = s is not None
    s, axes = _axes_and_sizes(x, s, axes, "irfftn")
    if not axes:
        raise ValueError("irfftn: expected at least one axis")
    norm = _norm(norm, "irfftn")
    if not given:
        s = s[:-1] + (2 * (x.shape[axes[-1]] - 1),)
    for a, n in zip(axes[:-1], s[:-1]):
        x = _resize(x, a, n, "irfftn")
    if len(axes) > 1:
        x = FFT.apply(x, axes[:-1], norm, True)
    return _irfft_last(x, axes[-1], s[-1], norm, "irfftn")


@register(namespace="fft", tests=_tests("rfft2", (((3, 4),), ((2, 3, 5),)), R, _NORMS[:2] + [("_s", {"s": (4, 3)})]))
def rfft2(x, s=None, axes=(-2, -1), norm=None, *, dim=None):
    """rfftn over the last two dims."""
    return rfftn(x, s, _dim(axes, dim, (-2, -1), "rfft2"), norm)


@register(namespace="fft", tests=_tests("irfft2", (((3, 4),),), C, _NORMS[:2] + [("_s", {"s": (4, 5)})]))
def irfft2(x, s=None, axes=(-2, -1), norm=None, *, dim=None):
    """irfftn over the last two dims."""
    return irfftn(x, s, _dim(axes, dim, (-2, -1), "irfft2"), norm)


def _shift(x, axes, sign, op):
    x = as_tensor(x, op)
    if axes is None:
        axes = tuple(range(x.ndim))
    elif isinstance(axes, int):
        axes = (axes,)
    axes = tuple(normalize_dim(a, x.ndim, op) for a in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (x.shape[a] // 2) for a in axes), dims=axes)


@register(namespace="fft", tests=(
    OpTest((((3, 4),), ((5,),)), ref="np.fft.fftshift", dtypes=R, tol=_FTOL),
    OpTest((((3, 5),),), ref=lambda np, a: np.fft.fftshift(a, axes=1), op=lambda x: fftshift(x, axes=1),
           name="fft.fftshift_complex_axis", dtypes=C, tol=_FTOL),
))
def fftshift(x, axes=None, *, dim=None):
    """Move the zero-frequency term to the centre (a roll by n // 2 over ``axes``, all by default)."""
    return _shift(x, _dim(axes, dim, None, "fftshift"), 1, "fftshift")


@register(namespace="fft", tests=OpTest((((3, 5),),), ref="np.fft.ifftshift", dtypes=R, tol=_FTOL))
def ifftshift(x, axes=None, *, dim=None):
    """Inverse of fftshift (a roll by -(n // 2))."""
    return _shift(x, _dim(axes, dim, None, "ifftshift"), -1, "ifftshift")


def _freq(name, n, d, dtype, device, requires_grad):
    from ..creation import _setup, _out
    if isinstance(n, bool) or not hasattr(n, "__index__") or n.__index__() < 1:
        raise ValueError(f"{name}: expected a positive int n, got {n!r}")
    if isinstance(d, bool) or not isinstance(d, (int, float)):
        raise TypeError(f"{name}: expected a number as d, got {type(d).__name__}")
    _, dt, dev, b = _setup((), dtype, device, name)
    if dt.kind != "f":
        raise TypeError(f"{name}: expected a floating dtype, got {dt}")
    f = getattr(b.xp.fft, name)
    return _out(b.call(lambda: f(n.__index__(), d).astype(dt)), dev, requires_grad)


@register(namespace="fft", untested="no tensor input (a creation function): tests/test_complex_fft.py::test_freq_helpers")
def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an n-point fft with sample spacing d: [0, 1, ..., -1] / (d * n)."""
    return _freq("fftfreq", n, d, dtype, device, requires_grad)


@register(namespace="fft", untested="no tensor input (a creation function): tests/test_complex_fft.py::test_freq_helpers")
def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The n // 2 + 1 non-negative sample frequencies of an n-point rfft."""
    return _freq("rfftfreq", n, d, dtype, device, requires_grad)
