"""Fused kernels: the two gradients of a product, ``a * b``, in one pass, one of them optionally summed into
the gradient total that backward already holds for a leaf. See backends/kernels/__init__.py for the contract.

Launches on CUDA per backward of ``a * b`` (both operands needing a gradient, same shape and dtype): 1 [2
products, and 1 more add when the leaf's gradient is being summed, as a weight used at every step of a
chain]. ``fused_mul_grads`` (a flag): whether Mul's backward asks for it; on the CPU the two products are
the fastest form already, and it skips the look-up.
"""


class NumpyGrads:
    """NumPy implementations (mixed into NumpyBackend): the unfused ops."""

    fused_mul_grads = False

    def mul_grads(self, g, a, b, acc=None):
        """(g * b, g * a) for same-shaped arrays of one dtype; with ``acc`` (an array of that shape and dtype
        that the caller owns) the second is added into acc in place instead, and acc is returned for it."""
        if acc is None:
            return g * b, g * a
        acc += g * a
        return g * b, acc


_built = {}


def _kernel(xp, acc):
    key = (xp, acc)
    k = _built.get(key)
    if k is None:
        if acc:
            k = xp.ElementwiseKernel("T g, T a, T b", "T ga, T gb", "ga = g * b;\ngb += g * a;", "ag_mul_grads_acc")
        else:
            k = xp.ElementwiseKernel("T g, T a, T b", "T ga, T gb", "ga = g * b;\ngb = g * a;", "ag_mul_grads")
        _built[key] = k
    return k


class CupyGrads:
    """CuPy implementations (mixed into CupyBackend): one kernel, built once per namespace (T generic)."""

    fused_mul_grads = True

    def mul_grads(self, g, a, b, acc=None):
        """(g * b, g * a), or (g * b, acc += g * a) (see NumpyGrads): one kernel."""
        with self._cuda_device:
            if acc is None:
                return (_built.get((self.xp, False)) or _kernel(self.xp, False))(g, a, b)
            ga = self.xp.empty(g.shape, dtype=g.dtype)
            (_built.get((self.xp, True)) or _kernel(self.xp, True))(g, a, b, ga, acc)
            return ga, acc
