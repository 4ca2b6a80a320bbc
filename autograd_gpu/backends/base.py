"""What every backend provides beyond its array namespace ``xp``."""
from contextlib import contextmanager

from . import sync as _sync


class Backend:
    """One device's array namespace plus the kernels where NumPy and CuPy differ.

    Subclasses define: asarray, to_host, from_dlpack, scalar, synchronize, format, scatter_add, erf, sigmoid, matmul,
    seed, rand, randn, randint, permutation.
    """

    xp = None
    context = None   # a context manager factory that makes this device current, or None
    label = None     # how the device prints, when it differs from str(device)

    def __init__(self, device):
        self.device = device

    def __repr__(self):
        return f"<{type(self).__name__} {self.device}>"

    def call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` with this device current (CuPy allocates on the current GPU), for array
        work outside Function.apply, which enters the device itself."""
        if self.context is None:
            return fn(*args, **kwargs)
        with self.context():
            return fn(*args, **kwargs)

    # -- reading back: explicit reads, declared implicit syncs ----------------------------------------
    def item(self, a):
        """The one element of ``a`` as a Python number (an explicit read)."""
        return self.to_host(a).item()

    def read_back(self, a, what):
        """``a`` on the host, for library code that cannot go on without its value (``what`` names the
        op): an implicit sync, reported by the sync debug mode."""
        _sync.implicit(what)
        return self.to_host(a)

    @contextmanager
    def sync_point(self, what):
        """Around a backend call that reads back by itself (CuPy's nonzero sizes its result so)."""
        _sync.implicit(what)
        with _sync.allowed():
            yield

    # -- checks on values: now on the CPU, at the next synchronisation on a GPU --------------------------
    def assert_all(self, ok, exc_type, message, value=None):
        """Raise ``exc_type(message)`` unless the 0-d bool array ``ok`` is true; "{value}" in the message
        becomes the 0-d integer array ``value`` (the offending entry). The CPU checks now."""
        if not bool(ok):
            raise exc_type(message.replace("{value}", str(None if value is None else value.item())))

    def check_range(self, a, low, high, exc_type, message):
        """``exc_type(message)`` unless every entry of the integer array ``a`` is in [low, high); "{value}"
        in the message becomes the offending entry (see assert_all for when it is raised)."""
        if a.size:
            lo, hi = a.min(), a.max()
            self.assert_all((lo >= low) & (hi < high), exc_type, message, self.xp.where(lo < low, lo, hi))

    def check_indices(self, idx, n, what):
        """IndexError when an integer index array has an entry outside [-n, n)."""
        self.check_range(idx, -n, n, IndexError, f"{what}: index {{value}} is out of bounds for a dimension of size {n}")
