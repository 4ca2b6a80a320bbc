"""What every backend provides beyond its array namespace ``xp``."""
from contextlib import contextmanager

from . import sync as _sync


class Backend:
    """One device's array namespace plus the kernels where NumPy and CuPy differ.

    Subclasses set ``xp`` and:
    - ``name``: "numpy" or "cupy", the key callers choose kernels by (fusers.get_fuser, nn.functional);
    - ``weak_scalars``: True when ``xp`` keeps a Python number weak (float32 array * 2.5 stays float32),
      False when operands must go through ``scalar()`` to keep the array's dtype;
    and define: asarray, to_host, from_dlpack, scalar, synchronize, format, scatter_add, erf, sigmoid, matmul,
    seed, get_rng_state, set_rng_state, make_rng, reseed_rng, generator_state, set_generator_state (an
    ag.Generator's state as bytes), rand, randn, randint, permutation (the draws take ``rng=``: a generator from
    make_rng, an ag.Generator's, instead of the backend's own). ``discard_checks`` is below.
    """

    xp = None
    context = None   # a context manager factory that makes this device current, or None
    label = None     # how the device prints, when it differs from str(device)

    def __init__(self, device):
        self.device = device

    def __repr__(self):
        return f"<{type(self).__name__} {self.device}>"

    def make_current(self):
        """Make this device the current one of this thread (CuPy allocates on the current GPU): what
        ``ag.set_default_device("cuda:1")`` does. Nothing to do on the CPU."""

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

    def discard_checks(self):
        """Forget the device-side checks not yet read (the test suite does so between tests); the CPU
        checks at once, so has none."""

    def sole_view(self, a):
        """True when the view ``a`` is the only way to reach its base's memory (a reshape of a fresh result),
        so it may become a leaf's .grad without a copy. False here: CuPy cannot tell who else holds a base."""
        return False

    def check_range(self, a, low, high, exc_type, message):
        """``exc_type(message)`` unless every entry of the integer array ``a`` is in [low, high); "{value}"
        in the message becomes the offending entry (see assert_all for when it is raised)."""
        if a.size:
            lo, hi = a.min(), a.max()
            self.assert_all((lo >= low) & (hi < high), exc_type, message, self.xp.where(lo < low, lo, hi))

    # -- updates in place ------------------------------------------------------------------------------
    def axpy(self, y, alpha, x):
        """y += alpha * x in place (an optimizer's step: PyTorch's ``p.add_(d, alpha=-lr)``); ``alpha`` a
        number or a 0-d array of y's dtype. Here two passes; the CPU backend has a one-pass BLAS call."""
        y += alpha * x
        return y

    # -- one matrix multiplied at every step (a recurrent layer's weight) ---------------------------------
    def pack_matmul(self, b, rows):
        """``b`` prepared for many products (rows, k) @ b: here b itself; the CPU backend lays it out once
        in MKL's packed format where it can. Use the result only with ``matmul_packed``."""
        return b

    def matmul_packed(self, a, packed, k, n, out=None):
        """a @ b for ``packed = pack_matmul(b, rows)``, b of shape (k, n), a of shape (rows, k)."""
        return self.matmul(a, packed, out=out)

    # -- indexed writes ------------------------------------------------------------------------------------
    _COMBINE = {"prod": "multiply", "amax": "maximum", "amin": "minimum"}

    def scatter_combine(self, out, pos, values, reduce):
        """out[pos] = op(out[pos], values) in place for the 1-d ``out`` and flat positions ``pos``, repeated
        positions combined by op ("prod", "amax", "amin": multiply, maximum, minimum), as NumPy's unbuffered
        ``ufunc.at``. Here without it (CuPy has no multiply.at; its maximum.at refuses float16): a stable
        order of the targets, an inclusive scan within each run of equal targets (Hillis-Steele: log2(n)
        vectorised steps whose count depends on the size only), each run's total written once."""
        xp = self.xp
        fn = getattr(xp, self._COMBINE[reduce])
        m = pos.shape[0]
        if m == 0:
            return
        order = xp.argsort(pos)
        p, v = pos[order], values[order]
        rank = xp.arange(m) - xp.searchsorted(p, p, side="left")       # position within its run
        s = 1
        while s < m:
            v = xp.concatenate([v[:s], xp.where(rank[s:] >= s, fn(v[s:], v[:-s]), v[s:])])
            s *= 2
        total = v[xp.searchsorted(p, p, side="right") - 1]              # each run's last entry: its total
        out[p] = fn(out[p], total)                                      # repeated targets write equal values

    # -- linear algebra: one behaviour for singular input on every backend ------------------------------
    def row_dot(self, a, b):
        """sum(a * b) over the last axis, in one pass with no product array (NumPy's einsum)."""
        return self.xp.einsum("...i,...i->...", a, b)

    def linalg_or_nan(self, name, *arrays):
        """``xp.linalg.<name>(*arrays)`` over a batch of matrices (inv, solve, cholesky), with each batch
        element the library refuses (LinAlgError: singular, not positive definite) set to NaN instead of
        raising. NumPy raises for the whole batch, CuPy raises only under ``cupyx.errstate(linalg='raise')``
        and otherwise returns inf/NaN itself, so the op's one device-side check on the result (assert_all)
        reports the failing element on every backend without a host sync."""
        linalg = self.xp.linalg
        try:
            return self.call(getattr(linalg, name), *arrays)
        except linalg.LinAlgError:
            pass
        return self.call(self._linalg_each, getattr(linalg, name), arrays)     # the error path only

    def _linalg_each(self, fn, arrays):
        xp, batch = self.xp, arrays[0].shape[:-2]
        flat = [a.reshape((-1,) + a.shape[-2:]) for a in arrays]
        outs = []
        for i in range(flat[0].shape[0]):
            try:
                outs.append(fn(*(a[i] for a in flat)))
            except self.xp.linalg.LinAlgError:
                outs.append(None)
        like = next((o for o in outs if o is not None), None)
        shape, dtype = (like.shape, like.dtype) if like is not None else (flat[-1].shape[1:], flat[-1].dtype)
        outs = [xp.full(shape, xp.nan, dtype=dtype) if o is None else o for o in outs]
        return xp.stack(outs).reshape(batch + shape)

    def check_indices(self, idx, n, what):
        """IndexError when an integer index array has an entry outside [-n, n)."""
        self.check_range(idx, -n, n, IndexError, f"{what}: index {{value}} is out of bounds for a dimension of size {n}")
