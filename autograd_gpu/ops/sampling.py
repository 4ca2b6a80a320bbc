"""Sampling: multinomial from weights; normal and bernoulli from per-element parameters; the Tensor methods
that fill a tensor in place with draws (uniform_, normal_, random_, bernoulli_, exponential_).

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
from ..dtypes import is_floating, float32, float64, result_type, get_default_dtype, _dtype
from ..device import device as _parse_device, get_default_device
from ..generator import rng_for
from ..tensor import Tensor
from ._util import as_tensor
from . import batching
from .inplace import apply_inplace, Overwrite
from .shape import broadcast_shapes
from .batching import _wrap_out
from .registry import register, OpTest, NO_GRAD, UNARY
from ..creation import zeros
from .sorting import _topk_index

__all__ = ["multinomial", "normal", "bernoulli", "uniform_", "normal_", "random_", "bernoulli_", "exponential_"]

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


# --------------------------------------------------------------------------- normal, bernoulli
def _number(v, op, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{op}: expected a number as {what}, got {type(v).__name__}")
    return float(v)


class _Draw(Function):
    """Samples from per-element parameters (broadcast): ``draw(backend, rng, shape, dtype, *arrays)``. The
    gradient is 0 for every parameter, as PyTorch's normal and bernoulli define it (the draw is not
    reparameterised: write ``mean + std * ag.randn_like(std)`` for a gradient)."""
    batch_rule = batching.elementwise        # one draw per element of the broadcast physical shape

    @staticmethod
    def forward(ctx, draw, rng, *params):
        b = params[0].device.backend
        ctx.shapes = [p.shape for p in params]
        shape = broadcast_shapes(*ctx.shapes)
        dt = result_type(*(p.dtype for p in params))
        return ctx.wrap(b.call(draw, b, rng, shape, dt, *(p.data for p in params)))

    @staticmethod
    def backward(ctx, grad):
        return (None, None) + tuple(zeros(sh, dtype=grad.dtype, device=grad.device) for sh in ctx.shapes)


def _normal_draw(b, rng, shape, dt, mean, std):
    b.assert_all(b.xp.all(std >= 0), RuntimeError, "normal: expected std >= 0.0, got a negative std")
    return (b.randn(shape, dt, rng) * std + mean).astype(dt, copy=False)


def _bernoulli_draw(b, rng, shape, dt, p):
    b.assert_all(b.xp.all((p >= 0) & (p <= 1)), RuntimeError, "bernoulli: expected every p in [0, 1]")
    return (b.rand(shape, float64, rng) < p).astype(dt)


def _param(v, op, what, like):
    """A parameter tensor: a Tensor as it is (floating), a number as a 0-d tensor on like's device and dtype."""
    if isinstance(v, Tensor):
        if not is_floating(v.dtype):
            raise RuntimeError(f"{op}: expected a floating-point {what}, got {v.dtype}")
        return v
    return as_tensor(_number(v, op, what), op, like=like).to(like.dtype)


@register(tests=(
    OpTest((((3, 4),), ((),), ((0, 2),)), ref=lambda np, a: a, op=lambda m: normal(m, 0.0), name="normal_std0",
           **NO_GRAD),
    OpTest((((2, 3), (3,)),), ref=lambda np, a, s: np.broadcast_to(a, (2, 3)),
           op=lambda m, s: normal(m, s * 0.0), name="normal_tensors_std0", **NO_GRAD)),
    doc="Normal samples with per-element mean and std (tensors broadcast, or numbers with size=); gradient 0.")
def normal(mean, std=1.0, size=None, *, generator=None, dtype=None, device=None):
    """Samples from N(mean, std**2), PyTorch's forms: ``normal(mean_tensor, std_tensor)`` (broadcast),
    ``normal(mean_tensor, std=1.0)``, ``normal(mean, std_tensor)``, ``normal(mean, std, size)`` (numbers;
    ``dtype``/``device`` as the factories'). From ``generator`` or the device's global generator. As in
    PyTorch, the gradient with respect to mean and std is 0 (write ``mean + std * ag.randn_like(std)`` to
    differentiate through the draw). A negative std raises (a tensor's: on a GPU at the next read)."""
    if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
        m, sd = _number(mean, "normal", "mean"), _number(std, "normal", "std")
        if size is None:
            raise TypeError("normal: with a number mean and std, expected size= (the shape of the result)")
        if sd < 0:
            raise RuntimeError(f"normal: expected std >= 0.0, got {sd}")
        dev = _parse_device(device) if device is not None else get_default_device()
        dt = _dtype(dtype) if dtype is not None else get_default_dtype()
        if not is_floating(dt):
            raise TypeError(f"normal: expected a floating dtype, got {dt}")
        shape = (size,) if isinstance(size, int) else tuple(size)
        b = dev.backend
        r = b.randn(shape, dt, rng_for(generator, dev, "normal"))
        return Tensor._make(b.call(lambda: (r * sd + m).astype(dt, copy=False)), dev)
    if size is not None:
        raise TypeError("normal: size= is only for a number mean and std (a tensor gives the shape)")
    like = mean if isinstance(mean, Tensor) else std
    m, sd = _param(mean, "normal", "mean", like), _param(std, "normal", "std", like)
    if m.device is not sd.device:
        raise RuntimeError(f"normal: expected mean and std on one device, got {m.device} and {sd.device}")
    if not isinstance(std, Tensor) and float(std) < 0:
        raise RuntimeError(f"normal: expected std >= 0.0, got {float(std)}")
    return _Draw.apply(_normal_draw, rng_for(generator, like.device, "normal"), m, sd)


@register(method=True, tests=(
    OpTest((((3, 4),), ((),), ((0, 2),)), ref=lambda np, a: (a > 0).astype(a.dtype),
           op=lambda x: bernoulli((x > 0).to(x.dtype)), name="bernoulli_01", **NO_GRAD),),
    doc="0/1 samples, 1 with probability input (or p), in input's dtype; gradient 0.")
def bernoulli(input, p=None, *, generator=None):
    """Bernoulli draws: 1 with probability ``input`` (each element in [0, 1]), or with probability ``p`` (a
    number) for every element of ``input``'s shape; input's dtype and shape. From ``generator`` or the
    device's global generator. Gradient 0, as PyTorch's."""
    x = as_tensor(input, "bernoulli")
    if not is_floating(x.dtype):
        raise RuntimeError(f"bernoulli: expected a floating-point input, got {x.dtype}")
    rng = rng_for(generator, x.device, "bernoulli")
    if p is not None:
        pv = _number(p, "bernoulli", "p")
        if not 0 <= pv <= 1:
            raise RuntimeError(f"bernoulli: expected p in [0, 1], got {pv}")
        b = x.device.backend
        u = b.rand(x.shape, float64, rng)
        return Tensor._make(b.call(lambda: (u < pv).astype(x.dtype)), x.device)
    return _Draw.apply(_bernoulli_draw, rng, x)


# --------------------------------------------------------------------------- in-place fills (Tensor methods)
def _fill(x, values, op):
    """x <- values (an array of x's shape, cast to x's dtype) in place (apply_inplace: the checks of in-place
    edits, the version bump, and in a graph the old value's gradient 0)."""
    return apply_inplace(x, lambda a: Overwrite.apply(a, Tensor._make(values, x.device)), op)


def _self(x, op, floating=True):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor to fill, got {type(x).__name__}")
    if floating and not is_floating(x.dtype):
        raise TypeError(f"{op}: expected a floating-point tensor, got {x.dtype}")
    return x.device.backend


def _draw_dtype(x):
    """The dtype draws are made in: x's own for float32/float64, float32 for float16/bfloat16."""
    return x.dtype if x.dtype in (float64, float32) else float32


def _from(from_, kw, op):
    """PyTorch's ``from`` (a Python keyword): by position, as ``from_=`` or as ``**{"from": ...}``."""
    from_ = kw.pop("from", from_)
    if kw:
        raise TypeError(f"{op}: unexpected keyword arguments {sorted(kw)}")
    return from_


@register(namespace="Tensor", method=True, tests=OpTest(UNARY[:3], ref=lambda np, a: np.full_like(a, 1.5),
                                                        op=lambda x: x.clone().uniform_(1.5, 1.5), **NO_GRAD),
          doc="Fill in place with samples from U(from, to).")
def uniform_(self, from_=0.0, to=1.0, *, generator=None, **kw):
    """Fill in place with samples from U(from, to); returns the tensor."""
    b = _self(self, "uniform_")
    a, c = _number(_from(from_, kw, "uniform_"), "uniform_", "from"), _number(to, "uniform_", "to")
    if a > c:
        raise RuntimeError(f"uniform_: expected a [from, to) range, got from={a} > to={c}")
    r = b.rand(self.shape, _draw_dtype(self), rng_for(generator, self.device, "uniform_"))
    return _fill(self, b.call(lambda: r * (c - a) + a), "uniform_")


@register(namespace="Tensor", method=True, tests=OpTest(UNARY[:3], ref=lambda np, a: np.full_like(a, -0.5),
                                                        op=lambda x: x.clone().normal_(-0.5, 0.0), **NO_GRAD),
          doc="Fill in place with samples from N(mean, std**2).")
def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill in place with samples from N(mean, std**2); returns the tensor."""
    b = _self(self, "normal_")
    m, sd = _number(mean, "normal_", "mean"), _number(std, "normal_", "std")
    if sd < 0:
        raise RuntimeError(f"normal_: expected std >= 0.0, got {sd}")
    r = b.randn(self.shape, _draw_dtype(self), rng_for(generator, self.device, "normal_"))
    return _fill(self, b.call(lambda: r * sd + m), "normal_")


@register(namespace="Tensor", method=True, tests=OpTest(UNARY[:3], ref="np.zeros_like",
                                                        op=lambda x: x.clone().random_(0, 1), **NO_GRAD),
          doc="Fill in place with integers drawn uniformly from [from, to) (PyTorch's range without to).")
def random_(self, from_=0, to=None, *, generator=None, **kw):
    """Fill in place with integers drawn uniformly from [from, to); ``random_(to)`` is [0, to). With no bound:
    [0, 2**digits] for a float tensor (2**24 float32, 2**53 float64, 2**11 float16, 2**8 bfloat16), [0, max]
    for an integer one, {False, True} for bool, as PyTorch's. Returns the tensor."""
    b = _self(self, "random_", floating=False)
    from_ = _from(from_, kw, "random_")
    for v, what in ((from_, "from"), (to, "to")):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise TypeError(f"random_: expected an int {what}, got {type(v).__name__}")
    dt = self.dtype
    if to is not None:
        lo, hi = from_, to
    elif from_ != 0:
        lo, hi = 0, from_                                # random_(to)
    elif dt.kind == "b":
        lo, hi = 0, 2
    elif dt.kind in "iu":
        lo, hi = 0, int(b.xp.iinfo(dt).max) + 1
    else:
        lo, hi = 0, 2 ** ({2: 11, 4: 24, 8: 53}[dt.itemsize] if dt.kind == "f" else 8) + 1
    if lo >= hi:
        raise RuntimeError(f"random_: expected 'from' to be less than 'to', got from={lo} >= to={hi}")
    return _fill(self, b.randint(lo, hi, self.shape, "int64", rng_for(generator, self.device, "random_")), "random_")


@register(namespace="Tensor", method=True, tests=OpTest(UNARY[:3], ref="np.ones_like",
                                                        op=lambda x: x.clone().bernoulli_(1.0), **NO_GRAD),
          doc="Fill in place with 0/1 draws, 1 with probability p (a number, or a tensor broadcast to self).")
def bernoulli_(self, p=0.5, *, generator=None):
    """Fill in place with Bernoulli draws: 1 with probability ``p`` (a number, or a tensor of probabilities
    broadcast to self's shape); returns the tensor."""
    b = _self(self, "bernoulli_", floating=False)
    rng = rng_for(generator, self.device, "bernoulli_")
    if isinstance(p, Tensor):
        if p.device is not self.device:
            raise RuntimeError(f"bernoulli_: expected p on {self.device}, got {p.device}")
        pa = b.call(b.xp.broadcast_to, p.data, self.shape)
        b.assert_all(b.xp.all((pa >= 0) & (pa <= 1)), RuntimeError, "bernoulli_: expected every p in [0, 1]")
    else:
        pa = _number(p, "bernoulli_", "p")
        if not 0 <= pa <= 1:
            raise RuntimeError(f"bernoulli_: expected p to be in [0, 1], got p={pa}")
    u = b.rand(self.shape, float64, rng)
    return _fill(self, b.call(lambda: u < pa), "bernoulli_")


@register(namespace="Tensor", method=True, tests=OpTest(UNARY[:3], ref="np.ones_like",
                                                        op=lambda x: (x.clone().exponential_(2.0) >= 0).to(x.dtype),
                                                        **NO_GRAD),
          doc="Fill in place with samples from the exponential distribution of rate lambd.")
def exponential_(self, lambd=1.0, *, generator=None):
    """Fill in place with samples from Exp(lambd) (density lambd exp(-lambd x), x >= 0); returns the tensor."""
    b = _self(self, "exponential_")
    rate = _number(lambd, "exponential_", "lambd")
    if not rate > 0:
        raise RuntimeError(f"exponential_: expected lambda > 0.0, got lambda={rate}")
    u = b.rand(self.shape, float64, rng_for(generator, self.device, "exponential_"))
    return _fill(self, b.call(lambda: -b.xp.log1p(-u) / rate), "exponential_")
