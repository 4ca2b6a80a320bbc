"""Sampling from weights: multinomial.

The draws are on the input's device, from ``generator=`` (an ag.Generator) or the device's global
generator, vectorised over the rows (no Python loop, no read back to the host):

- with replacement, by the inverse CDF: each row's cumulative sums, normalised to end at 1, are shifted by
  the row's number so that all rows make one ascending array, and one ``searchsorted`` finds every
  sample's category at once;
- without replacement, by the exponential race (Gumbel top-k): category j of weight w_j gets the key
  E_j / w_j with E_j ~ Exp(1); the num_samples smallest keys, in ascending order, are a draw without
  replacement in the order sequential draws would give.

The checks on the weights' values (no negative, inf or NaN weight, no row summing to 0) are the backend's
``assert_all``: at once on the CPU, at the next synchronisation on a GPU.
"""
from ..autograd.function import Function
from ..dtypes import is_floating, float64
from ..generator import rng_for
from ..tensor import Tensor
from ._util import as_tensor
from .batching import _wrap_out
from .registry import register, OpTest, NO_GRAD
from .sorting import _topk_index

__all__ = ["multinomial"]

_BAD_VALUE = "multinomial: probability tensor contains either `inf`, `nan` or element < 0"
_ZERO_ROW = "multinomial: invalid multinomial distribution (sum of probabilities <= 0)"


def _draw(backend, w, num_samples, replacement, rng):
    """int64 indices of shape (rows, num_samples) for the float64 weights w of shape (rows, k)."""
    xp = backend.xp
    rows, k = w.shape
    positive = w > 0
    backend.assert_all(xp.all(xp.isfinite(w) & (w >= 0)), RuntimeError, _BAD_VALUE)
    backend.assert_all(xp.all(xp.any(positive, axis=1)), RuntimeError, _ZERO_ROW)
    if not replacement:
        e = -xp.log1p(-backend.rand((rows, k), float64, rng))                 # Exp(1), from u in [0, 1)
        keys = xp.where(positive, e / xp.where(positive, w, 1.0), xp.inf)     # zero weights come last
        return _topk_index(xp, keys, num_samples, 1, False, True).astype("int64", copy=False)
    cdf = xp.cumsum(w, axis=1)
    cdf /= cdf[:, -1:]                                  # ends at exactly 1.0 (x / x)
    off = xp.arange(rows, dtype=float64)[:, None]
    u = backend.rand((rows, num_samples), float64, rng)
    idx = xp.searchsorted((cdf + off).ravel(), (u + off).ravel(), side="right").reshape(rows, num_samples)
    idx = idx - (xp.arange(rows) * k)[:, None]
    # u + row rounds up to row + 1 once in ~2**32 draws on wide batches: the row's last positive category then
    last = (k - 1) - xp.argmax(xp.flip(positive, axis=1), axis=1)
    return xp.minimum(xp.maximum(idx, 0), last[:, None]).astype("int64", copy=False)


class Multinomial(Function):
    """Category indices drawn from the rows of x (..., k): (..., num_samples), int64; not differentiable
    (a draw of indices has no gradient: applied to x detached)."""

    @staticmethod
    def batch_rule(cls, args, kwargs):
        # the op samples every row of its (..., k) input alike: the vmap dims are more rows
        x = args[0]
        return _wrap_out(cls.apply(x._bbase, *args[1:]), x._blevels)

    @staticmethod
    def forward(ctx, x, num_samples, replacement, rng):
        b = x.device.backend
        a = x.data
        lead, k = a.shape[:-1], a.shape[-1]
        w = a.reshape(-1, k).astype(float64)
        return ctx.wrap(_draw(b, w, num_samples, replacement, rng).reshape(lead + (num_samples,)))


def _ref_onehot(np, a):
    return np.argmax(a, axis=-1)[..., None]


def _onehot(x):
    """Weights with one positive category per row (x's largest): every draw is that category."""
    return (x == x.amax(dim=-1, keepdim=True)).to(x.dtype) * 3.0


@register(method=True, tests=(
    # draws are random: the table checks weights whose draws are certain (one positive category per row, and
    # all categories without replacement, sorted); the distribution is checked in tests/test_random.py
    OpTest((((4, 5),), ((6,),), ((0, 3),)), ref=_ref_onehot,
           op=lambda x: multinomial(_onehot(x), 1), name="multinomial_onehot", **NO_GRAD),
    OpTest((((3, 4),), ((5,),)), ref=_ref_onehot,
           op=lambda x: multinomial(_onehot(x), 4, replacement=True)[..., :1], name="multinomial_onehot_repl",
           **NO_GRAD),
    OpTest((((3, 4),),), ref=lambda np, a: np.broadcast_to(np.arange(4), a.shape),
           op=lambda x: multinomial(x.abs() + 0.5, 4).sort(dim=-1).values, name="multinomial_all", **NO_GRAD)),
    doc="Category indices drawn from each row of non-negative weights (with or without replacement); int64.")
def multinomial(input, num_samples, replacement=False, *, generator=None):
    """``num_samples`` category indices drawn from each row of ``input`` (1-D: (k,), 2-D: (rows, k)), whose
    non-negative weights need not sum to 1; int64 of shape (num_samples,) or (rows, num_samples). Without
    replacement each row's indices are distinct (zero-weight categories come only after the others). From
    ``generator`` (an ag.Generator on input's device) or the device's global generator. Not differentiable.

    >>> g = ag.Generator().manual_seed(0)
    >>> ag.multinomial(ag.tensor([0.0, 1.0, 0.0]), 2, replacement=True, generator=g)
    Tensor([1, 1])
    """
    x = as_tensor(input, "multinomial")
    if x.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim, got shape {tuple(x.shape)}")
    if not is_floating(x.dtype):
        raise RuntimeError(f"multinomial: only supports floating-point dtypes for input, got {x.dtype}")
    if isinstance(num_samples, bool) or not hasattr(num_samples, "__index__"):
        raise TypeError(f"multinomial: expected an int num_samples, got {type(num_samples).__name__}")
    num_samples = int(num_samples)
    if num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (got num_samples={num_samples})")
    k = x.shape[-1]
    if not replacement and num_samples > k:
        raise RuntimeError(f"multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
                           f"(got num_samples={num_samples}, {k} categories)")
    if k == 0:
        raise RuntimeError("multinomial: expected at least one category (prob_dist.size(-1) > 0), got 0")
    rng = rng_for(generator, x.device, "multinomial")
    if x.numel() == 0:          # no rows: nothing to draw
        return Tensor._make(x.device.backend.call(x.device.backend.xp.zeros, x.shape[:-1] + (num_samples,),
                                                  dtype="int64"), x.device)
    return Multinomial.apply(x.detach(), num_samples, bool(replacement), rng)
