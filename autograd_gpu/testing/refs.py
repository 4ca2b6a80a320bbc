"""NumPy references too long to write inline in an op's OpTest: named there as ``ref="refs.<name>"``.

Each takes and returns NumPy arrays (host), computing what the op computes, the plain way."""
import math

import numpy as np


def erf(a):
    return np.vectorize(math.erf, otypes=[a.dtype])(a) if a.size else a.copy()


def gelu(a):
    return (a * (1 + erf(a / np.sqrt(2).astype(a.dtype))) / 2).astype(a.dtype)


def sigmoid(a):
    return (1 / (1 + np.exp(-a))).astype(a.dtype)


def softplus(a):
    return np.logaddexp(0, a).astype(a.dtype)
