"""Batching for vmap: BatchedTensor, the helpers a batching rule is written with, and the generic rules.

An op declares its rule on its Function class (``batch_rule = batching.elementwise``, or a rule written
beside the op with the helpers below); ``func/vmap.py`` (the transform) sends a call with a BatchedTensor
argument to ``batched_apply``, which runs the class's rule. How the rules see tensors is explained in
func/vmap.py's docstring. This module is in the ops layer because the rules call ops (reshape,
broadcast_to, stack); it imports the shape ops inside functions because ops/shape.py declares its rules here.
"""
import itertools
import warnings

from ..tensor import Tensor

_new = object.__new__
_sizes: list[int] = []  # batch size of each active level; level k (1-based) is _sizes[k - 1]
_warned: set = set()    # ops whose fallback warning was shown


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
    __hash__ = None    # type: ignore[assignment]  # unhashable (typeshed types object.__hash__ as a method)


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

    @property     # type: ignore[misc]  # read-only here: a batched tensor's .grad is a view of the physical one's
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
    """Function.apply for a call with BatchedTensor arguments: the class's ``batch_rule``; a rule may
    answer NotImplemented for a call it cannot batch (then, as for a Function without a rule, such as a
    user's own, the op runs once per example with a one-time warning)."""
    rule = cls.batch_rule
    if rule is not None:
        out = rule(cls, args, kwargs)
        if out is not NotImplemented:
            return out
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


def _loop(cls, args, kwargs, warn=True):
    """The fallback: the op once per example (a Python loop), results stacked along the batch dims."""
    from ..ops.shape import stack, reshape
    name = cls.__name__
    if warn and name not in _warned:
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
        return tuple(None if first[i] is None else       # (a gradient not wanted: None in every result)
                     _wrap(reshape(stack([r[i] for r in results]), sizes + first[i].shape), levels)
                     for i in range(len(first)))
    return _wrap(reshape(stack(results), sizes + first.shape), levels)


# --------------------------------------------------------------------------- rules
def _tensors(args):
    return [a for a in args if isinstance(a, Tensor)]


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


def _stacked_matrices(cls, args, kwargs):
    """ag.linalg ops on the last two dims of a stack of matrices: the batch dims are more stack dims."""
    a = args[0]
    if a.__class__ is not BatchedTensor or any(x.__class__ is BatchedTensor for x in args[1:]):
        return NotImplemented
    return _wrap_out(cls.apply(a._bbase, *args[1:], **kwargs), a._blevels)


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




# --------------------------------------------------------------------------- the rules ops declare
def loop(cls, args, kwargs):
    """The declared fallback for an op with no sensible batching rule: once per example, no warning."""
    return _loop(cls, args, kwargs, warn=False)


def unary_axis(pos):
    """The rule of an op on one tensor whose axis argument sits at position ``pos`` of the call."""
    def rule(cls, args, kwargs):
        return _unary_axis(cls, args, kwargs, pos)
    rule.__name__ = f"unary_axis_{pos}"
    return rule


elementwise = _elementwise
reduction = _reduction
fold_batch = _fold_batch
stacked_matrices = _stacked_matrices
