"""Special functions for NumPy arrays: erfc, erfinv, lgamma, digamma, polygamma.

SciPy's ``scipy.special`` where it is installed (imported on the first call: SciPy's import costs
~0.2 s), else the vectorised NumPy ports below, so the package does not depend on SciPy (as erf:
_erf.py). The CUDA backend calls ``cupyx.scipy.special`` instead. Results keep x's float dtype
(float64 for integers); bfloat16 and float16 are computed in float32 and rounded once.

The ports (double precision, checked against SciPy in tests/test_breadth_math.py):
- lgamma: Lanczos (g = 7, 9 terms; Numerical Recipes' coefficients, ~1e-15 relative) for x >= 0.5,
  the reflection formula log(pi / |sin(pi x)|) - lgamma(1 - x) below; +inf at the poles 0, -1, ...
- digamma: the reflection psi(1 - x) - pi / tan(pi x) for x < 0.5, the recurrence
  psi(x) = psi(x + 1) - 1 / x up to x >= 10, then the asymptotic series in 1 / x^2 (Bernoulli numbers).
- polygamma(n, x), n >= 1: the recurrence psi_n(x) = psi_n(x + 1) + (-1)^(n+1) n! / x^(n+1) up to
  x >= 20, then the asymptotic series; at the poles 0, -1, ... +inf for odd n, -inf for even n (PyTorch's
  value at 0).
- erfinv: Giles' single-precision approximation ("Approximating the erfinv function", 2010), refined
  by two Newton steps on erf (the fdlibm port or SciPy's), within a few ulp in float64.
"""
import math

import numpy as np

from ._erf import erf as _erf_port

__all__ = ["erfc", "erfinv", "lgamma", "digamma", "polygamma"]

_impl = {}


def _scipy(name):
    """scipy.special.<name>, or None without SciPy (looked up once per name)."""
    if name not in _impl:
        try:
            import scipy.special as sp
            _impl[name] = getattr(sp, name)
        except ImportError:
            _impl[name] = None
    return _impl[name]


def _float(x):
    """(x as a float array the computation takes, the dtype of the result)."""
    x = np.asarray(x)
    if x.dtype.kind in "biu":
        return x.astype(np.float64), np.dtype(np.float64)
    if x.dtype.itemsize < 4:                   # float16, bfloat16: float32 inside, one rounding
        return x.astype(np.float32), x.dtype
    return x, x.dtype


def _call(name, port, x, *args):
    a, dt = _float(x)
    f = _scipy(name)
    with np.errstate(all="ignore"):
        y = f(*args, a) if f is not None else port(*args, a.astype(np.float64))
    return np.asarray(y).astype(dt, copy=False)


# --------------------------------------------------------------------------- erfc
def _erfc_port(x):
    # 1 - erf(x) loses every digit once erf(x) rounds to 1 (x > ~6); from x >= 3 on, the continued
    # fraction of erfc (60 terms, evaluated from the tail) keeps the relative precision
    out = 1.0 - _erf_port(x)
    big = x >= 3.0
    if big.any():
        z = x[big]
        f = np.zeros_like(z)
        for k in range(60, 0, -1):     # erfc(z) = exp(-z^2)/sqrt(pi) / (z + (1/2)/(z + 1/(z + (3/2)/(z + ...))))
            f = (k / 2.0) / (z + f)
        out[big] = np.exp(-z * z) / math.sqrt(math.pi) / (z + f)
    return out


def erfc(x):
    """1 - erf(x), accurate where erf(x) is near 1."""
    return _call("erfc", _erfc_port, x)


# --------------------------------------------------------------------------- erfinv
_A = (0.99999999999999989, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
      12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)


def _erfinv_port(y):
    y = np.asarray(y, dtype=np.float64)
    w = -np.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws = w - 2.5
    p = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        p = c + p * ws
    wb = np.sqrt(np.where(small, 5.0, w)) - 3.0
    q = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        q = c + q * wb
    x = np.where(small, p, q) * y
    for _ in range(2):                         # Newton on erf(x) = y: the float32 guess to double precision
        err = _erf_port(x) - y
        x = x - err / (2.0 / math.sqrt(math.pi) * np.exp(-x * x))
    x = np.where(np.abs(y) == 1.0, np.copysign(np.inf, y), x)
    return np.where(np.abs(y) > 1.0, np.nan, x)


def erfinv(x):
    """The inverse of erf on [-1, 1] (+-inf at +-1, NaN outside)."""
    return _call("erfinv", _erfinv_port, x)


# --------------------------------------------------------------------------- lgamma
def _lgamma_port(x):
    x = np.asarray(x, dtype=np.float64)
    refl = x < 0.5
    z = np.where(refl, 1.0 - x, x) - 1.0
    s = np.full_like(z, _A[0])
    for i in range(1, 9):
        s = s + _A[i] / (z + i)
    t = z + 7.5
    lg = 0.5 * math.log(2 * math.pi) + (z + 0.5) * np.log(t) - t + np.log(s)
    sinpx = np.abs(np.sin(math.pi * np.where(refl, x, 0.5)))
    out = np.where(refl, math.log(math.pi) - np.log(sinpx) - lg, lg)
    out = np.where((x <= 0) & (x == np.floor(x)), np.inf, out)      # the poles
    out = np.where((x == 1.0) | (x == 2.0), 0.0, out)                 # exact zeros (Lanczos leaves ~1e-15)
    return np.where(np.isinf(x), np.inf, out)


def lgamma(x):
    """log |Gamma(x)|."""
    return _call("gammaln", _lgamma_port, x)


# --------------------------------------------------------------------------- digamma, polygamma
# Bernoulli numbers B_2k, k = 1..10, for the asymptotic series
_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330)


def _shift_count(x, target):
    """How many recurrence steps take every finite x to at least ``target`` (host arrays: free)."""
    finite = x[np.isfinite(x)]
    return int(max(0.0, math.ceil(target - finite.min()))) if finite.size else 0


def _digamma_port(x):
    x = np.asarray(x, dtype=np.float64)
    refl = x < 0.5
    z = np.where(refl, 1.0 - x, x)
    acc = np.zeros_like(z)
    for _ in range(_shift_count(z, 10.0)):
        small = z < 10.0
        acc = acc - np.where(small, 1.0 / z, 0.0)
        z = np.where(small, z + 1.0, z)
    z2 = 1.0 / (z * z)
    series = np.zeros_like(z)
    p = np.ones_like(z)
    for k, b in enumerate(_B2K[:8], start=1):
        p = p * z2
        series = series + b / (2 * k) * p
    out = acc + np.log(z) - 0.5 / z - series
    tanpx = np.tan(math.pi * np.where(refl, x, 0.25))
    out = np.where(refl, out - math.pi / tanpx, out)
    out = np.where((x <= 0) & (x == np.floor(x)), np.nan, out)      # poles: NaN (SciPy returns -inf at 0)
    out = np.where(x == 0, -np.copysign(np.inf, x), out)
    return np.where(x == np.inf, np.inf, out)


def _polygamma_port(n, x):
    n = int(n)
    x = np.asarray(x, dtype=np.float64)
    sign = 1.0 if n % 2 == 1 else -1.0                     # (-1)^(n+1)
    nfact = math.factorial(n)
    acc = np.zeros_like(x)
    z = x.copy()
    for _ in range(_shift_count(z, 20.0)):
        small = z < 20.0
        acc = acc + np.where(small, sign * nfact / z ** (n + 1), 0.0)
        z = np.where(small, z + 1.0, z)
    # psi_n(z) ~ (-1)^(n+1) [ (n-1)!/z^n + n!/(2 z^(n+1)) + sum_k B_2k (2k+n-1)!/((2k)! z^(2k+n)) ]
    s = math.factorial(n - 1) / z ** n + nfact / (2.0 * z ** (n + 1))
    for k, b in enumerate(_B2K, start=1):
        s = s + b * math.factorial(2 * k + n - 1) / math.factorial(2 * k) / z ** (2 * k + n)
    out = acc + sign * s
    return np.where((x <= 0) & (x == np.floor(x)), np.inf if n % 2 == 1 else -np.inf, out)


def digamma(x):
    """The logarithmic derivative of Gamma."""
    return _call("digamma", _digamma_port, x)


def polygamma(n, x):
    """The n-th derivative of digamma (n >= 0: n = 0 is digamma)."""
    if n == 0:
        return digamma(x)
    return _call("polygamma", _polygamma_port, x, n)
