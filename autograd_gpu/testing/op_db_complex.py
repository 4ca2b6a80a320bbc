"""OP_DB entries for complex tensors (elementwise maths, reductions, matmul, the complex parts) and
for every ag.fft function. Entries with complex64/complex128 dtypes get complex inputs (kind "real"
marks a real input of the same precision); gradients are checked in complex128 with PyTorch's
convention (autograd.gradcheck perturbs real and imaginary parts separately)."""
import operator

import numpy as np

import autograd_gpu as ag
from .op_db import OpInfo

C = (ag.complex64, ag.complex128)
R = (ag.float32, ag.float64)
UNARY = (((3, 4),), ((),), ((0, 3),))
BINARY = (((2, 3), (2, 3)), ((2, 3), (3,)), ((), (4,)))
_TOL = {ag.complex64: {"rtol": 1e-4, "atol": 1e-5}}     # complex64 transcendental functions and sums
_FTOL = {ag.float32: {"rtol": 1e-4, "atol": 1e-5}, ag.complex64: {"rtol": 1e-4, "atol": 1e-5}}


def _c(name, op, ref, samples=UNARY, **kw):
    kw.setdefault("tol", _TOL)
    return OpInfo(name, op, ref, samples, dtypes=C, **kw)


def _sigmoid_ref(a):
    return (1 / (1 + np.exp(-a))).astype(a.dtype)


def _rdt(a):
    return np.float64 if a.dtype == np.complex128 else np.float32


COMPLEX = [
    _c("complex_add", operator.add, np.add, BINARY),
    _c("complex_sub", operator.sub, np.subtract, BINARY),
    _c("complex_mul", operator.mul, np.multiply, BINARY),
    _c("complex_div", operator.truediv, np.divide, BINARY, domain=(0.5, 2.0)),
    _c("complex_mul_real", operator.mul, np.multiply, (((2, 3), (2, 3)), ((2, 3), (3,))), kinds=(None, "real")),
    _c("complex_real_div", operator.truediv, np.divide, (((2, 3), (2, 3)),), kinds=("real", None), domain=(0.5, 2.0)),
    _c("complex_mul_scalar", lambda x: x * (2 - 1j), lambda a: a * (2 - 1j)),
    _c("complex_rdiv_scalar", lambda x: (1 + 2j) / x, lambda a: (1 + 2j) / a, domain=(0.5, 2.0)),
    _c("complex_neg", operator.neg, np.negative),
    _c("complex_pow_scalar", lambda x: x ** 2.5, lambda a: a ** 2.5, domain=(0.5, 2.0)),
    _c("complex_pow_2", lambda x: x ** 2, lambda a: a ** 2),
    _c("complex_pow", operator.pow, np.power, (((2, 3), (2, 3)),), domain=(0.5, 1.5)),
    _c("complex_exp", ag.exp, np.exp),
    _c("complex_log", ag.log, np.log, domain=(0.5, 2.0)),
    _c("complex_sqrt", ag.sqrt, np.sqrt, domain=(0.5, 2.0)),
    _c("complex_square", ag.square, np.square),
    _c("complex_sin", ag.sin, np.sin),
    _c("complex_cos", ag.cos, np.cos),
    _c("complex_tanh", ag.tanh, np.tanh, domain=(-1.0, 1.0)),
    _c("complex_sigmoid", ag.sigmoid, _sigmoid_ref, domain=(-1.0, 1.0)),
    _c("complex_abs", ag.abs, np.abs, avoid=(0.0,)),
    _c("complex_angle", ag.angle, np.angle, avoid=(0.0,)),
    _c("complex_conj", ag.conj, np.conj),
    _c("complex_real", lambda x: x.real, np.real),
    _c("complex_imag", lambda x: x.imag, np.imag),
    _c("complex_sgn", ag.sgn, lambda a: np.where(a == 0, 0, a / np.where(a == 0, 1, np.abs(a))), avoid=(0.0,)),
    _c("complex_from_parts", ag.complex, lambda a, b: (a + 1j * b).astype(np.result_type(a, np.complex64)),
       (((2, 3), (2, 3)), ((3,), (2, 3))), kinds=("real", "real")),
    _c("view_as_real", ag.view_as_real, lambda a: np.stack([a.real, a.imag], -1)),
    _c("view_as_complex", ag.view_as_complex, lambda a: a[..., 0] + 1j * a[..., 1], (((3, 2),),), kinds=("real",)),
    _c("complex_sum", lambda x: x.sum(1), lambda a: a.sum(1), (((3, 4),),)),
    _c("complex_mean", ag.mean, np.mean),
    _c("complex_prod", lambda x: x.prod(1), lambda a: a.prod(1), (((3, 4),),)),
    _c("complex_var", lambda x: x.var(1), lambda a: a.var(1), (((3, 4),),)),
    _c("complex_norm", ag.norm, lambda a: np.linalg.norm(a.ravel()).astype(_rdt(a)), (((3, 4),),), avoid=(0.0,)),
    _c("complex_matmul", ag.matmul, np.matmul, (((2, 3), (3, 4)), ((2, 2, 3), (3,)))),
    _c("complex_matmul_real", ag.matmul, np.matmul, (((2, 3), (3, 4)),), kinds=(None, "real")),
    _c("complex_dot", ag.dot, np.dot, (((4,), (4,)),)),
    _c("complex_einsum", lambda a, b: ag.einsum("ij,jk->ik", a, b), lambda a, b: np.einsum("ij,jk->ik", a, b),
       (((2, 3), (3, 4)),)),
    _c("complex_getitem", lambda x: x[1:, ::2], lambda a: a[1:, ::2], (((3, 4),),)),
    _c("complex_reshape_T", lambda x: x.reshape(4, 3).T, lambda a: a.reshape(4, 3).T, (((3, 4),),)),
    _c("complex_where", lambda x, y: ag.where(x.real > 0, x, y), lambda a, b: np.where(a.real > 0, a, b),
       (((2, 3), (2, 3)),)),
]


def _fft(name, op, ref, samples, dtypes=C, **kw):
    kw.setdefault("tol", _FTOL)
    return OpInfo(name, op, ref, samples, dtypes=dtypes, **kw)


def _f(fn, **kw):
    ref_kw = dict(kw)
    if "s" in kw and kw.get("axes") is None and not fn.endswith("2"):
        # NumPy 2 deprecates s without axes; ag.fft keeps the old default (the last len(s) axes)
        ref_kw["axes"] = tuple(range(-len(kw["s"]), 0))
    return (lambda x: getattr(ag.fft, fn)(x, **kw)), (lambda a: getattr(np.fft, fn)(a, **ref_kw).astype(
        _out_dtype(fn, a)))


def _out_dtype(fn, a):
    """PyTorch's dtypes (NumPy 2 agrees): single precision stays single."""
    single = a.dtype in (np.float32, np.complex64)
    if fn.startswith("irfft"):
        return np.float32 if single else np.float64
    return np.complex64 if single else np.complex128


def _entries(fn, samples, dtypes, variants):
    out = []
    for suffix, kw in variants:
        op, ref = _f(fn, **kw)
        out.append(_fft(f"fft.{fn}{suffix}", op, ref, samples, dtypes))
    return out


_NORMS = [("", {}), ("_ortho", {"norm": "ortho"}), ("_forward", {"norm": "forward"})]
FFT = (
    _entries("fft", (((5,),), ((2, 4),)), C, _NORMS + [("_n3", {"n": 3}), ("_n7_axis0", {"n": 7, "axis": 0})])
    + _entries("fft", (((2, 5),),), R, [("_real_input", {})])
    + _entries("ifft", (((5,),), ((2, 4),)), C, _NORMS + [("_n6", {"n": 6})])
    + _entries("rfft", (((6,),), ((2, 5),)), R, _NORMS + [("_n4", {"n": 4}), ("_n7", {"n": 7}),
                                                           ("_axis0", {"axis": 0})])
    + _entries("irfft", (((4,),), ((2, 3),)), C, _NORMS + [("_n5", {"n": 5}), ("_n6", {"n": 6}),
                                                            ("_n3_axis0", {"n": 3, "axis": 0})])
    + _entries("fft2", (((2, 3, 4),),), C, _NORMS[:2] + [("_s", {"s": (2, 5)})])
    + _entries("ifft2", (((3, 4),),), C, _NORMS[:2] + [("_s", {"s": (4, 3)})])
    + _entries("fftn", (((2, 3, 4),),), C, _NORMS[:2] + [("_s_axes", {"s": (3, 3), "axes": (0, 2)})])
    + _entries("ifftn", (((2, 3, 4),),), C, _NORMS[:2] + [("_s", {"s": (2, 5)})])
    + _entries("rfft2", (((3, 4),), ((2, 3, 5),)), R, _NORMS[:2] + [("_s", {"s": (4, 3)})])
    + _entries("irfft2", (((3, 4),),), C, _NORMS[:2] + [("_s", {"s": (4, 5)})])
    + _entries("rfftn", (((2, 3, 4),),), R, _NORMS[:2] + [("_s_axes", {"s": (3, 5), "axes": (2, 0)})])
    + _entries("irfftn", (((2, 3, 4),),), C, _NORMS[:2] + [("_s", {"s": (3, 5)}),
                                                            ("_axes", {"axes": (0, 1)})])
    + [_fft("fft.fftshift", ag.fft.fftshift, np.fft.fftshift, (((3, 4),), ((5,),)), R),
       _fft("fft.fftshift_complex_axis", lambda x: ag.fft.fftshift(x, axes=1),
            lambda a: np.fft.fftshift(a, axes=1), (((3, 5),),)),
       _fft("fft.ifftshift", ag.fft.ifftshift, np.fft.ifftshift, (((3, 5),),), R),
       # a power spectrum: a real loss of a complex transform, the case the docs' example fits
       _fft("fft.power_spectrum", lambda x: ag.fft.rfft(x).abs() ** 2,
            lambda a: (np.abs(np.fft.rfft(a)) ** 2).astype(a.dtype), (((8,),),), R),
       _fft("fft.roundtrip", lambda z: ag.fft.ifft(ag.fft.fft(z)), lambda a: a, (((6,),),))]
)


OPS = COMPLEX + FFT
