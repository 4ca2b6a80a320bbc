"""vmap: run a function written for one example on a whole batch at once, with batching rules.

Design. Inside ``vmap`` a mapped argument becomes a ``BatchedTensor``: a Tensor whose logical shape
(what the user's code sees: ``shape``, ``ndim``, ``len``) leaves the batch dim out, and which holds a
plain *physical* Tensor whose leading dims are the batch dims of each vmap level it is batched at (in
level order), then the logical dims. Nested vmaps add levels; there is no nesting of wrappers.

Every op goes through ``Function.apply``; while a vmap is active (one list check otherwise) a call
with a BatchedTensor argument is sent to ``batched_apply`` (ops/batching.py), which runs the Function's
``batch_rule`` (declared on the op's class, beside its forward and backward): the rule rewrites the call into one call of the same Function on the physical tensors (axis
arguments shifted past the batch dims, operands aligned so that broadcasting lines up logical dims
and batch dims), and the result is wrapped again. A user's Function without a rule falls back to a Python
loop over the batch with a one-time warning naming the op.

Autograd stays on the physical tensors: a rule's physical call is recorded like any other op, so
``grad(vmap(f))`` differentiates the batched computation. For ``vmap(grad(f))`` the transforms lift
each differentiated argument to every active level first (a broadcast, no copy), so every example
gets its own copy to differentiate against and the physical gradient is exactly the per-example one.
Cotangents batched at levels the outputs are not (``vmap(vjp_fn)``) run the backward pass itself on
BatchedTensors, through the same rules.
"""
from ..autograd import function as _function
from ..tensor import Tensor
# BatchedTensor, the rule helpers and batched_apply live in ops/batching.py, beside the rules ops declare
from ..ops.batching import (_wrap, _levels, _phys, physical, _expand, has_batched, batched_apply,  # noqa: F401
                            batched_constant, _sizes)

__all__ = ["vmap"]


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
