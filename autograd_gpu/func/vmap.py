"""vmap: run a function written for one example on a whole batch at once, with batching rules.

Design. Inside ``vmap`` a mapped argument becomes a ``BatchedTensor``: a Tensor whose logical shape
(what the user's code sees: ``shape``, ``ndim``, ``len``) leaves the batch dim out, and which holds a
plain *physical* Tensor whose leading dims are the batch dims of each vmap level it is batched at (in
level order), then the logical dims. Nested vmaps add levels; there is no nesting of wrappers.

Every op goes through ``Function.apply``; while a vmap is active (one list check otherwise) a call
with a BatchedTensor argument is sent to ``batched_apply``, which looks up the Function's batching
rule: the rule rewrites the call into one call of the same Function on the physical tensors (axis
arguments shifted past the batch dims, operands aligned so that broadcasting lines up logical dims
and batch dims), and the result is wrapped again. Ops without a rule fall back to a Python loop over
the batch with a one-time warning naming the op.

Autograd stays on the physical tensors: a rule's physical call is recorded like any other op, so
``grad(vmap(f))`` differentiates the batched computation. For ``vmap(grad(f))`` the transforms lift
each differentiated argument to every active level first (a broadcast, no copy), so every example
gets its own copy to differentiate against and the physical gradient is exactly the per-example one.
Cotangents batched at levels the outputs are not (``vmap(vjp_fn)``) run the backward pass itself on
BatchedTensors, through the same rules.
"""
import itertools
import warnings

from ..autograd import function as _function
from ..tensor import Tensor

__all__ = ["vmap"]

_new = object.__new__
_sizes = []            # batch size of each active level; level k (1-based) is _sizes[k - 1]
_warned = set()        # ops whose fallback warning was shown


# --------------------------------------------------------------------------- BatchedTensor
class _LogicalArray:
    """What ``BatchedTensor.data`` gives: the logical metadata of the array (shape, dtype, size, ndim),
    so wrappers that read ``x.data.shape`` keep working; reading values raises a clear error."""
    __slots__ = ("shape", "dtype", "_phys")

    def __init__(self, shape, dtype, phys):
        self.shape, self.dtype, self._phys = shape, dtype, phys

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: _prod(self.shape))
    itemsize = property(lambda self: self.dtype.itemsize)
    nbytes = property(lambda self: self.size * self.dtype.itemsize)
    base = property(lambda self: self._phys)     # treated as a view: whoever needs its own copy clones
    flags = property(lambda self: self._phys.flags)

    def _refuse(self, *args, **kwargs):
        raise RuntimeError("vmap: an operation read or wrote the values of a batched tensor directly (its .data: "
                           "in-place ops and some helpers do), which vmap cannot batch; use out-of-place Tensor "
                           "ops, or move that step outside vmap")

    __getattr__ = __array__ = __getitem__ = __setitem__ = __iter__ = __len__ = __bool__ = _refuse
    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __add__ = __sub__ = __mul__ = __truediv__ = _refuse
    __radd__ = __rsub__ = __rmul__ = __rtruediv__ = __neg__ = __pow__ = __matmul__ = __and__ = __or__ = _refuse
    __hash__ = None


class BatchedTensor(Tensor):
    """A Tensor inside vmap: logical shape without the batch dims; the physical tensor ``_bbase`` has one
    leading dim per level in ``_blevels`` (sorted). Autograd state lives on the physical tensor."""

    @property
    def data(self):
        b = self._bbase.data
        return _LogicalArray(b.shape[len(self._blevels):], b.dtype, b)

    @data.setter
    def data(self, value):
        raise RuntimeError("vmap: in-place operations on a batched tensor are not supported inside vmap; "
                           "use the out-of-place op (x = x + y rather than x += y)")

    shape = property(lambda self: self._bbase.data.shape[len(self._blevels):])
    ndim = property(lambda self: self._bbase.data.ndim - len(self._blevels))
    dtype = property(lambda self: self._bbase.data.dtype)

    @property
    def requires_grad(self):
        return self._bbase.requires_grad

    @requires_grad.setter
    def requires_grad(self, value):
        self._bbase.requires_grad = value

    @property
    def grad_fn(self):
        return self._bbase.grad_fn

    @grad_fn.setter
    def grad_fn(self, value):
        self._bbase.grad_fn = value

    @property
    def grad(self):
        g = self._bbase.grad
        return None if g is None else _wrap(g, self._blevels)

    def requires_grad_(self, requires_grad=True):
        self._bbase.requires_grad_(requires_grad)
        return self

    def detach(self):
        return _wrap(self._bbase.detach(), self._blevels)

    def _copy(self):
        return _wrap(self._bbase._copy(), self._blevels)

    def _ones_like(self):
        return _wrap(self._bbase._ones_like(), self._blevels)

    def version_counter(self):
        return self._bbase.version_counter()

    def _refuse(self, *args, **kwargs):
        raise RuntimeError(f"vmap: cannot read the values of a batched tensor (logical shape {self.shape}) inside "
                           "vmap (.item(), .numpy(), bool(), float(), printing); each example has its own "
                           "value. Return it from the vmapped function instead")

    item = numpy = tolist = __array__ = __bool__ = __float__ = __int__ = __index__ = _refuse

    def __repr__(self):
        return f"BatchedTensor(shape={self.shape}, dtype={self.dtype}, levels={self._blevels}, device={self.device})"


def _wrap(base, levels):
    if not levels:
        return base
    t = _new(BatchedTensor)
    t._bbase = base
    t._blevels = levels
    t.device = base.device
    return t


def _levels(t):
    return t._blevels if t.__class__ is BatchedTensor else ()


def _phys(t):
    return t._bbase if t.__class__ is BatchedTensor else t


def physical(t):
    """The physical tensor behind a BatchedTensor (t itself otherwise)."""
    return _phys(t)


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _union(ts):
    s = set()
    for t in ts:
        if t.__class__ is BatchedTensor:
            s.update(t._blevels)
    return tuple(sorted(s))


def _align(t, levels, nd):
    """t's physical tensor with one leading dim per level in ``levels`` (size 1 where t is not batched
    there) and its logical dims right-aligned to ``nd`` dims (leading 1s): ready to broadcast."""
    from ..ops.shape import reshape
    own, base = _levels(t), _phys(t)
    logical = base.shape[len(own):]
    shape = tuple(_sizes[lv - 1] if lv in own else 1 for lv in levels) + (1,) * (nd - len(logical)) + logical
    return base if shape == base.shape else reshape(base, shape)


def _expand(t, levels, shape):
    """t aligned to ``levels`` and broadcast to the batch sizes + logical ``shape``."""
    from ..ops.shape import broadcast_to
    p = _align(t, levels, len(shape))
    full = tuple(_sizes[lv - 1] for lv in levels) + tuple(shape)
    return p if p.shape == full else broadcast_to(p, full)


def _bsizes(levels):
    return tuple(_sizes[lv - 1] for lv in levels)


def _wrap_out(out, levels):
    if isinstance(out, tuple):
        return tuple(_wrap(o, levels) for o in out)
    return _wrap(out, levels)


# --------------------------------------------------------------------------- dispatch
def has_batched(args, kwargs):
    for a in args:
        if a.__class__ is BatchedTensor:
            return True
    if kwargs:
        for a in kwargs.values():
            if a.__class__ is BatchedTensor:
                return True
    return False


def batched_apply(cls, args, kwargs):
    """Function.apply for a call with BatchedTensor arguments: the op's rule, else the loop fallback."""
    for k in cls.__mro__:
        rule = _RULES.get(k)
        if rule is not None:
            out = rule(cls, args, kwargs)
            if out is not NotImplemented:
                return out
            break
    return _loop(cls, args, kwargs)


def batched_constant(fn, args):
    """A graph constant computed on arrays (comparisons, floor, sign...: ops/elementwise.py) with batched
    operands: fn on the physical arrays, aligned like an elementwise op's."""
    from ..ops.shape import broadcast_shapes
    ts = _tensors(args)
    levels = _union(ts)
    shape = broadcast_shapes(*(t.shape for t in ts)) if len(ts) > 1 else ts[0].shape
    arrays = []
    for a in args:
        if isinstance(a, Tensor):
            p = _align(a.detach(), levels, len(shape)).data
            a = a.device.backend.xp.broadcast_to(p, _bsizes(levels) + tuple(shape))
        arrays.append(a)
    return _wrap(Tensor._make(fn(*arrays), ts[0].device), levels)


def _loop(cls, args, kwargs):
    """The fallback: the op once per example (a Python loop), results stacked along the batch dims."""
    from ..ops.shape import stack, reshape
    name = cls.__name__
    if name not in _warned:
        _warned.add(name)
        warnings.warn(f"vmap: no batching rule for {name}; running it once per example in a Python loop "
                      "(correct, but slow)", stacklevel=4)
    levels = _union(list(args) + list(kwargs.values()))
    sizes = _bsizes(levels)

    def pick(a, idx):
        if a.__class__ is not BatchedTensor:
            return a
        own = a._blevels
        return a._bbase[tuple(i for lv, i in zip(levels, idx) if lv in own)]

    results = []
    for idx in itertools.product(*(range(s) for s in sizes)):
        results.append(cls.apply(*(pick(a, idx) for a in args), **{k: pick(v, idx) for k, v in kwargs.items()}))
    first = results[0]
    if isinstance(first, tuple):
        return tuple(_wrap(reshape(stack([r[i] for r in results]), sizes + first[i].shape), levels)
                     for i in range(len(first)))
    return _wrap(reshape(stack(results), sizes + first.shape), levels)


# --------------------------------------------------------------------------- rules
_RULES = {}


def _rule(*names):
    """Register a rule for the Functions named ``module:Class`` (imported lazily, so that ops modules
    never import this one)."""
    def deco(fn):
        _PENDING.append((names, fn))
        return fn
    return deco


_PENDING = []


def _load_rules():
    import importlib
    for names, fn in _PENDING:
        for n in names:
            mod, cls = n.split(":")
            try:
                _RULES[getattr(importlib.import_module("autograd_gpu." + mod), cls)] = fn
            except (ImportError, AttributeError):       # an op renamed or not present: it falls back
                pass
    _PENDING.clear()


def _tensors(args):
    return [a for a in args if isinstance(a, Tensor)]


@_rule(*("ops.elementwise:" + n for n in (
    "Abs Add AddScalar Clamp ClampTensor Cos Div DivScalar Elu Erf Exp Expm1 LeakyRelu Log Log1p Maximum Minimum "
    "Mul MulScalar Neg Pow PowScalar RDivScalar RPowScalar RSubScalar Relu ReluBackward Rsqrt Sigmoid "
    "SigmoidBackward Sin Softplus Sqrt Square Sub Tan Tanh TanhBackward Where Conj Real Imag Angle Complex").split()),
       "ops.misc:Alias", "ops.misc:Cast", "ops.misc:Clone", "ops.misc:ToDevice", "ops.shape:Contiguous",
       "nn.functional:BinaryCrossEntropy")
def _elementwise(cls, args, kwargs):
    """Elementwise ops that broadcast: every tensor operand expanded to the batch dims + the broadcast
    logical shape (their backwards return grad as is, so operands must match exactly)."""
    from ..ops.shape import broadcast_shapes
    ts = _tensors(args)
    levels = _union(ts)
    shape = broadcast_shapes(*(t.shape for t in ts)) if len(ts) > 1 else ts[0].shape
    phys = [_expand(a, levels, shape) if isinstance(a, Tensor) else a for a in args]
    return _wrap_out(cls.apply(*phys, **kwargs), levels)


def _shift(axes, nb):
    """Axis arguments past the batch dims (negative ones count from the end: unchanged)."""
    if axes is None:
        return None
    if isinstance(axes, int):
        return axes + nb if axes >= 0 else axes
    return tuple(a + nb if a >= 0 else a for a in axes)


@_rule("ops.reduction:Sum", "ops.reduction:_MaxMin", "ops.reduction:LogSumExp", "ops.reduction:Prod",
       "ops.reduction:_Norm2")
def _reduction(cls, args, kwargs):
    x, axes, keep = args
    nb = len(x._blevels)
    if axes is None:
        axes = tuple(range(x.ndim))
    return _wrap_out(cls.apply(x._bbase, _shift(axes, nb), keep), x._blevels)


def _unary_axis(cls, args, kwargs, pos):
    """Ops (x, ..., axis at ``pos``, ...) whose only tensor is x and whose axis argument is shifted."""
    x = args[0]
    a = list(args)
    a[0] = x._bbase
    a[pos] = _shift(a[pos], len(x._blevels))
    return _wrap_out(cls.apply(*a), x._blevels)


_rule("ops.reduction:CumSum", "nn.functional:Softmax", "nn.functional:LogSoftmax")(
    lambda cls, args, kwargs: _unary_axis(cls, args, kwargs, 1))
_rule("ops.shape:Split")(lambda cls, args, kwargs: _unary_axis(cls, args, kwargs, 2))
_rule("ops.shape:Flip")(lambda cls, args, kwargs: _unary_axis(cls, args, kwargs, 1))


@_rule("ops.shape:Roll")
def _roll(cls, args, kwargs):
    x, shifts, dims = args
    if dims is None:
        if x.ndim != 1:
            return NotImplemented
        dims = 0
    return _unary_axis(cls, (x, shifts, dims), kwargs, 2)


@_rule("ops.shape:Reshape")
def _reshape(cls, args, kwargs):
    x, shape = args
    return _wrap(cls.apply(x._bbase, _bsizes(x._blevels) + tuple(shape)), x._blevels)


@_rule("ops.shape:Permute")
def _permute(cls, args, kwargs):
    x, axes = args
    nb = len(x._blevels)
    return _wrap(cls.apply(x._bbase, tuple(range(nb)) + _shift(axes, nb)), x._blevels)


@_rule("ops.shape:BroadcastTo")
def _broadcast_to(cls, args, kwargs):
    x, shape = args
    p = _align(x, x._blevels, len(shape))
    return _wrap(cls.apply(p, _bsizes(x._blevels) + tuple(shape)), x._blevels)


@_rule("ops.shape:SumTo")
def _sum_to(cls, args, kwargs):
    from ..ops.shape import reshape
    x, shape = args
    b = _bsizes(x._blevels)
    padded = (1,) * (x.ndim - len(shape)) + tuple(shape)     # the batch dims must not count as leading
    out = cls.apply(x._bbase, b + padded)
    return _wrap(reshape(out, b + tuple(shape)), x._blevels)


@_rule("ops.shape:Pad")
def _pad(cls, args, kwargs):
    x, widths, value = args
    return _wrap(cls.apply(x._bbase, ((0, 0),) * len(x._blevels) + tuple(widths), value), x._blevels)


@_rule("ops.shape:Tile")
def _tile(cls, args, kwargs):
    x, reps = args
    nd = max(x.ndim, len(reps))
    reps = (1,) * (len(x._blevels) + nd - len(reps)) + tuple(reps)
    return _wrap(cls.apply(_align(x, x._blevels, nd), reps), x._blevels)


@_rule("ops.shape:Concatenate")
def _concatenate(cls, args, kwargs):
    axis, xs = args[0], args[1:]
    levels = _union(xs)
    return _wrap(cls.apply(axis + len(levels), *(_expand(x, levels, x.shape) for x in xs)), levels)


@_rule("ops.indexing:GetItem")
def _getitem(cls, args, kwargs):
    x, idx, basic = args
    if not basic:
        # NumPy moves advanced indices that are not next to each other to the front; keep it simple
        adv = [k for k, i in enumerate(idx) if not (i is None or i is Ellipsis or isinstance(i, (slice, int)))]
        if adv and adv != list(range(adv[0], adv[0] + len(adv))):
            return NotImplemented
    nb = len(x._blevels)
    return _wrap(cls.apply(x._bbase, (slice(None),) * nb + tuple(idx), basic), x._blevels)


@_rule("ops.indexing:IndexAddInto")
def _index_add_into(cls, args, kwargs):
    """getitem's backward, reached when a batched cotangent runs the backward (vmap of a vjp)."""
    grad, shape, idx, basic = args
    if not basic:
        adv = [k for k, i in enumerate(idx) if not (i is None or i is Ellipsis or isinstance(i, (slice, int)))]
        if adv and adv != list(range(adv[0], adv[0] + len(adv))):
            return NotImplemented
    b = _bsizes(grad._blevels)
    return _wrap(cls.apply(grad._bbase, b + tuple(shape), (slice(None),) * len(b) + tuple(idx), basic),
                 grad._blevels)


@_rule("nn.functional:LogSoftmaxBackward")
def _log_softmax_backward(cls, args, kwargs):
    grad, y, dim = args
    levels = _union((grad, y))
    return _wrap(cls.apply(_expand(grad, levels, grad.shape), _expand(y, levels, y.shape), dim + len(levels)),
                 levels)


@_rule("ops.indexing:Gather")
def _gather(cls, args, kwargs):
    x, index, dim = args
    if isinstance(index, Tensor):
        return NotImplemented
    b = _bsizes(x._blevels)
    xp = x.device.backend.xp
    return _wrap(cls.apply(x._bbase, xp.broadcast_to(index, b + index.shape), dim + len(b)), x._blevels)


@_rule("ops.indexing:ScatterAddInto")
def _scatter_add_into(cls, args, kwargs):
    src, index, dim, shape = args
    if isinstance(index, Tensor):
        return NotImplemented
    b = _bsizes(src._blevels)
    xp = src.device.backend.xp
    return _wrap(cls.apply(src._bbase, xp.broadcast_to(index, b + index.shape), dim + len(b), b + tuple(shape)),
                 src._blevels)


@_rule("ops.linalg:MatMul")
def _matmul(cls, args, kwargs):
    a, b = args
    levels = _union(args)
    nd = max(a.ndim, b.ndim)
    if a.__class__ is BatchedTensor and b.__class__ is not BatchedTensor and a.ndim == 2:
        # (batch..., n, k) @ (k, m): one GEMM over all rows instead of one per example
        from ..ops.shape import reshape
        pa = a._bbase
        out = cls.apply(reshape(pa, (-1, pa.shape[-1])), b)
        return _wrap(reshape(out, pa.shape[:-1] + (b.shape[-1],)), levels)
    return _wrap(cls.apply(_align(a, levels, nd), _align(b, levels, nd)), levels)


@_rule("nn.functional:ScaledDotProductAttention")
def _sdpa(cls, args, kwargs):
    """Attention broadcasts over leading dims: the vmapped dims go in front of every operand; q takes
    them all, so the scores have every batch dim the mask may add in place."""
    q, k, v, mask, scale, keep = args
    ops = [t for t in (q, k, v, mask) if t is not None]
    levels = _union(ops)
    nd = max(t.ndim for t in ops)
    q = _expand(q, levels, (1,) * (nd - q.ndim) + tuple(q.shape))
    k, v = _align(k, levels, nd), _align(v, levels, nd)
    mask = None if mask is None else _align(mask, levels, nd)
    return _wrap(cls.apply(q, k, v, mask, scale, keep), levels)


@_rule("ops.linalg:Einsum")
def _einsum(cls, args, kwargs):
    (ins, out), xs = args[0], args[1:]
    levels = _union(xs)
    used = set(out).union(*ins)
    free = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in used)
    letter = {lv: next(free) for lv in levels}
    terms = tuple("".join(letter[lv] for lv in _levels(x)) + t for t, x in zip(ins, xs))
    target = "".join(letter[lv] for lv in levels) + out
    return _wrap(cls.apply((terms, target), *(_phys(x) for x in xs)), levels)


@_rule("nn.functional:Linear")
def _linear(cls, args, kwargs):
    x, w, b = args
    if w.__class__ is BatchedTensor or b.__class__ is BatchedTensor:
        from ..ops.linalg import matmul          # per-example weights: batched matmul + add
        y = matmul(x, w.mT)
        return y if b is None else y + b
    return _wrap(cls.apply(x._bbase, w, b), x._blevels)


@_rule("nn.functional:NllLoss")
def _nll_loss(cls, args, kwargs):
    """-coef * logp[i, idx_i], reduced: the column picked with Gather on the physical tensor."""
    from ..ops.indexing import Gather
    from ..ops.shape import reshape
    from ..ops.reduction import sum as _sum
    logp, idx, coef, reduction = args
    if isinstance(idx, Tensor) or isinstance(coef, Tensor):
        return NotImplemented
    b = _bsizes(logp._blevels)
    xp = logp.device.backend.xp
    picked = Gather.apply(logp._bbase, xp.broadcast_to(idx, b + idx.shape), 1 + len(b))
    neg = Tensor._make(-coef, logp.device)
    losses = reshape(picked, b + coef.shape) * neg
    if reduction != "none":
        losses = _sum(losses, tuple(range(len(b), len(b) + coef.ndim)))
        if reduction == "mean":
            losses = losses / Tensor._make(coef.sum(), logp.device)
    return _wrap(losses, logp._blevels)


@_rule("ops.solvers:Inv", "ops.solvers:Det", "ops.solvers:LogAbsDet", "ops.solvers:Cholesky", "ops.solvers:Pinv",
       "ops.decompositions:Qr", "ops.decompositions:Eigh", "ops.decompositions:Svd",
       "ops.decompositions:_Svdvals")
def _stacked_matrices(cls, args, kwargs):
    """ag.linalg ops on the last two dims of a stack of matrices: the batch dims are more stack dims."""
    a = args[0]
    if a.__class__ is not BatchedTensor or any(x.__class__ is BatchedTensor for x in args[1:]):
        return NotImplemented
    return _wrap_out(cls.apply(a._bbase, *args[1:], **kwargs), a._blevels)


_rule("ops.fft:FFT", "ops.fft:RFFT", "ops.fft:IRFFT")(lambda cls, args, kwargs: _unary_axis(cls, args, kwargs, 1))


@_rule("nn.functional:LayerNorm")
def _layer_norm(cls, args, kwargs):
    """Normalised over trailing axes, shared weight and bias: the axes shifted past the batch dims."""
    x, w, b, axes, eps = args
    if w.__class__ is BatchedTensor or b.__class__ is BatchedTensor:     # per-example affine parameters
        y = cls.apply(x, None, None, axes, eps)
        y = y if w is None else y * w
        return y if b is None else y + b
    return _wrap(cls.apply(x._bbase, w, b, _shift(axes, len(x._blevels)), eps), x._blevels)


def _fold_batch(cls, args, kwargs):
    """Image ops (x of shape (N, C, H, W), unbatched parameters): the batch dims folded into N."""
    from ..ops.shape import reshape
    x = args[0]
    if any(a.__class__ is BatchedTensor for a in args[1:]):
        return NotImplemented
    p = x._bbase
    b = _bsizes(x._blevels)
    out = cls.apply(reshape(p, (-1,) + p.shape[len(b) + 1:]), *args[1:])
    return _wrap(reshape(out, b + (p.shape[len(b)],) + out.shape[1:]), x._blevels)


_rule("ops.conv:Conv2d", "ops.conv:MaxPool2d", "ops.conv:WindowSum")(_fold_batch)


# --------------------------------------------------------------------------- randomness
class _NoRandom:
    """Stands in for a backend's generator inside vmap(randomness='error')."""

    def __init__(self, real):
        self.real = real

    def __getattr__(self, name):
        raise RuntimeError("vmap: a random op (rand, randn, dropout, ...) ran inside vmap with randomness='error'; "
                           "pass randomness='same' to draw once and share the numbers across the batch, or draw "
                           "the random numbers outside vmap and pass them in as a mapped argument")


def _swap_rngs(randomness):
    from .. import backends
    bs = {id(b): b for b in [backends._cpu_backend, *backends._backends.values()]}.values()
    saved = [(b, b.rng) for b in bs]
    for b, rng in saved:
        real = rng.real if isinstance(rng, _NoRandom) else rng
        b.rng = _NoRandom(real) if randomness == "error" else real
    return saved


# --------------------------------------------------------------------------- vmap
def _flat_dims(in_dims, args, where):
    """(tensor, dim) for every tensor argument, walking in_dims alongside the (nested) arguments."""
    if isinstance(args, Tensor):
        if in_dims is None:
            return [(args, None)]
        if isinstance(in_dims, bool) or not isinstance(in_dims, int):
            raise ValueError(f"vmap: in_dims for the tensor at {where} must be an int or None, got {in_dims!r}")
        if not -args.ndim <= in_dims < args.ndim:
            raise ValueError(f"vmap: in_dim {in_dims} is out of range for the argument at {where} of shape "
                             f"{tuple(args.shape)} (expected {-args.ndim} <= in_dim < {args.ndim})")
        return [(args, in_dims % args.ndim)]
    if isinstance(args, (tuple, list)):
        if isinstance(in_dims, (tuple, list)):
            if len(in_dims) != len(args):
                raise ValueError(f"vmap: in_dims at {where} has {len(in_dims)} entries but the argument has "
                                 f"{len(args)}")
            return [p for i, (d, a) in enumerate(zip(in_dims, args)) for p in _flat_dims(d, a, f"{where}[{i}]")]
        return [p for i, a in enumerate(args) for p in _flat_dims(in_dims, a, f"{where}[{i}]")]
    if isinstance(args, dict):
        if isinstance(in_dims, dict):
            return [p for k, a in args.items() for p in _flat_dims(in_dims.get(k), a, f"{where}[{k!r}]")]
        return [p for k, a in args.items() for p in _flat_dims(in_dims, a, f"{where}[{k!r}]")]
    if in_dims is not None and not isinstance(in_dims, int):
        raise ValueError(f"vmap: in_dims at {where} is {in_dims!r} but the argument is a {type(args).__name__}")
    return []


def _rebuild(args, mapping):
    if isinstance(args, Tensor):
        return mapping.get(id(args), args)
    if isinstance(args, (tuple, list)):
        return type(args)(_rebuild(a, mapping) for a in args)
    if isinstance(args, dict):
        return {k: _rebuild(v, mapping) for k, v in args.items()}
    return args


def _movedim(t, src, dst):
    from ..ops.shape import permute
    if src == dst:
        return t
    order = [d for d in range(t.ndim) if d != src]
    order.insert(dst, src)
    return permute(t, *order)


def _map_in(t, dim, level):
    """t with its logical dim ``dim`` made the batch dim of ``level`` (the newest level: last)."""
    own = _levels(t)
    return _wrap(_movedim(_phys(t), len(own) + dim, len(own)), own + (level,))


def _map_out(t, dim, level, size, where):
    """The inverse: the batch dim of ``level`` put at logical position ``dim`` (broadcast when t does not
    depend on the batch)."""
    from ..ops.shape import reshape, broadcast_to
    if not isinstance(t, Tensor):
        raise TypeError(f"vmap: the function must return Tensors (or tuples/lists/dicts of them), got "
                        f"{type(t).__name__} at {where}")
    if dim is None:
        if level in _levels(t):
            raise ValueError(f"vmap: out_dims is None at {where} but that output depends on the mapped inputs")
        return t
    own = _levels(t)
    if not -(t.ndim + 1) <= dim < t.ndim + 1:
        raise ValueError(f"vmap: out_dim {dim} is out of range for the output at {where} of logical shape "
                         f"{tuple(t.shape)}")
    dim %= t.ndim + 1
    base = _phys(t)
    rest = tuple(lv for lv in own if lv != level)
    if level in own:
        return _wrap(_movedim(base, own.index(level), len(rest) + dim), rest)
    pos = len(own) + dim
    shape = base.shape[:pos] + (1,) + base.shape[pos:]
    return _wrap(broadcast_to(reshape(base, shape), shape[:pos] + (size,) + shape[pos + 1:]), rest)


def _unflatten_out(out, out_dims, level, size, where="output"):
    if isinstance(out, (tuple, list)):
        if isinstance(out_dims, (tuple, list)):
            if len(out_dims) != len(out):
                raise ValueError(f"vmap: out_dims has {len(out_dims)} entries but the function returned {len(out)} "
                                 "outputs")
            return type(out)(_unflatten_out(o, d, level, size, f"{where}[{i}]")
                             for i, (o, d) in enumerate(zip(out, out_dims)))
        return type(out)(_unflatten_out(o, out_dims, level, size, f"{where}[{i}]") for i, o in enumerate(out))
    if isinstance(out, dict):
        return {k: _unflatten_out(v, out_dims.get(k, 0) if isinstance(out_dims, dict) else out_dims, level, size,
                                  f"{where}[{k!r}]") for k, v in out.items()}
    if out_dims is not None and (isinstance(out_dims, bool) or not isinstance(out_dims, int)):
        raise ValueError(f"vmap: out_dims at {where} must be an int or None, got {out_dims!r}")
    return _map_out(out, out_dims, level, size, where)


def vmap(f, in_dims=0, out_dims=0, randomness="error"):
    """The function that maps ``f`` over a batch dim of its arguments: ``vmap(f)(xs)[i] == f(xs[i])``,
    computed in one batched pass (each op's batching rule), not a loop.

    ``in_dims``: an int (every tensor argument mapped along that dim), None (not mapped), or a tuple with
    one entry per positional argument (nested tuples/lists/dicts for nested arguments). ``out_dims``: where
    the batch dim goes in each output (an int or a tuple per output). ``randomness``: 'error' (random ops
    inside raise, the default) or 'same' (one draw shared by the whole batch). Composes with grad, vjp,
    jacrev, jacfwd, hessian and with itself."""
    if not callable(f):
        raise TypeError(f"vmap: expected a function, got {type(f).__name__}")
    if randomness not in ("error", "same"):
        raise ValueError(f"vmap: randomness must be 'error' or 'same', got {randomness!r}")

    def vmapped(*args, **kwargs):
        if isinstance(in_dims, (tuple, list)):
            if len(in_dims) != len(args):
                raise ValueError(f"vmap: in_dims has {len(in_dims)} entries but the function was called with "
                                 f"{len(args)} positional argument(s)")
            pairs = [p for i, (d, a) in enumerate(zip(in_dims, args)) for p in _flat_dims(d, a, f"args[{i}]")]
        elif in_dims is None or isinstance(in_dims, int):
            pairs = _flat_dims(in_dims, args, "args")
        else:
            raise ValueError(f"vmap: in_dims must be an int, None or a tuple, got {type(in_dims).__name__}")
        mapped = [(t, d) for t, d in pairs if d is not None]
        if not mapped:
            raise ValueError("vmap: no argument is mapped: at least one Tensor argument needs an in_dim that is "
                             "not None")
        sizes = {t.shape[d] for t, d in mapped}
        if len(sizes) != 1:
            desc = ", ".join(f"shape {tuple(t.shape)} at dim {d}" for t, d in mapped)
            raise ValueError(f"vmap: the mapped arguments have different batch sizes {sorted(sizes)} ({desc}); "
                             "every mapped dim must have the same size")
        size = sizes.pop()
        if _PENDING:
            _load_rules()
        level = len(_sizes) + 1
        _sizes.append(size)
        hook = _function._vmap
        if not hook:
            hook[:] = [has_batched, batched_apply, batched_constant]
        saved = _swap_rngs(randomness)
        try:
            mapping = {}
            for t, d in mapped:
                if id(t) not in mapping:
                    mapping[id(t)] = _map_in(t, d, level)
            out = f(*_rebuild(args, mapping), **kwargs)
            return _unflatten_out(out, out_dims, level, size)
        finally:
            for b, rng in saved:
                b.rng = rng
            _sizes.pop()
            if not _sizes:
                hook.clear()
    vmapped.__name__ = f"vmap({getattr(f, '__name__', 'f')})"
    return vmapped


# --------------------------------------------------------------------------- for the transforms
def active():
    return bool(_sizes)


def lift(x):
    """x batched at every active level (a broadcast): what a transform differentiates inside vmap, so that
    every example gets its own gradient."""
    if not _sizes:
        return x
    levels = tuple(range(1, len(_sizes) + 1))
    if _levels(x) == levels:
        return x
    return _wrap(_expand(x, levels, x.shape), levels)


def _to_layout(t, outer, inner):
    """t as a tensor batched at ``outer`` whose logical shape starts with the batch dims of ``inner``."""
    from ..ops.shape import permute
    levels = tuple(sorted(set(outer) | set(inner)))
    p = _expand(t, levels, t.shape)
    order = [levels.index(lv) for lv in outer] + [levels.index(lv) for lv in inner]
    if order != list(range(len(order))):
        p = permute(p, *order, *range(len(levels), p.ndim))
    return _wrap(p, tuple(outer))


def _from_layout(g, inner):
    """The inverse of _to_layout: g's leading logical dims (one per level of ``inner``) made batch dims."""
    from ..ops.shape import permute
    outer = _levels(g)
    levels = tuple(sorted(set(outer) | set(inner)))
    p = _phys(g)
    cur = list(outer) + list(inner)
    order = [cur.index(lv) for lv in levels]
    if order != list(range(len(order))):
        p = permute(p, *order, *range(len(levels), p.ndim))
    return _wrap(p, levels)


def engine_grad(grad_fn, outputs, inputs, grad_outputs=None, **kw):
    """autograd.grad for outputs and inputs that may be BatchedTensors: run on the physical tensors;
    cotangents batched at levels the outputs are not run the backward itself batched."""
    outputs, inputs = list(outputs), list(inputs)
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    phys_out, phys_v, batched_backward = [], [], False
    for o, v in zip(outputs, grad_outputs):
        own = _levels(o)
        phys_out.append(_phys(o))
        if v is None:
            phys_v.append(_phys(o)._ones_like() if own else None)
            continue
        extra = tuple(lv for lv in _levels(v) if lv not in own)
        batched_backward = batched_backward or bool(extra)
        phys_v.append(_to_layout(v, extra, own))
    if batched_backward:
        kw = dict(kw, create_graph=True)          # sums of batched grads must go through ops, not arrays
    gs = grad_fn(phys_out, [_phys(x) for x in inputs], phys_v, **kw)
    return tuple(None if g is None else _from_layout(g, _levels(x)) for g, x in zip(gs, inputs))
