"""What every backend provides beyond its array namespace ``xp``."""


class Backend:
    """One device's array namespace plus the kernels where NumPy and CuPy differ.

    Subclasses define: asarray, to_host, from_dlpack, scalar, synchronize, format, scatter_add, erf, sigmoid, matmul,
    seed, rand, randn, randint, permutation.
    """

    xp = None
    context = None   # a context manager factory that makes this device current, or None

    def __init__(self, device):
        self.device = device

    def __repr__(self):
        return f"<{type(self).__name__} {self.device}>"

    def check_indices(self, idx, n, what):
        """Raise IndexError when an integer index array has an entry outside [-n, n)."""
        xp = self.xp
        if idx.size and bool(xp.logical_or(idx < -n, idx >= n).any()):
            lo, hi = int(idx.min()), int(idx.max())
            bad = lo if lo < -n else hi
            raise IndexError(f"{what}: index {bad} is out of bounds for a dimension of size {n}")
