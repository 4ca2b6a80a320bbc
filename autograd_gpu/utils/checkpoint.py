"""Activation checkpointing: run a block without keeping its intermediate tensors and recompute them
during backward, trading one extra forward of the block for its activations' memory.

``_Checkpoint`` is one node in the graph whose inputs are the block's tensor arguments: its forward
runs the block with recording off (so nothing inside is kept but the inputs, saved as usual), its
backward runs the block again with recording on and backpropagates through that fresh graph. The
random generators of the devices involved are snapshot before the first run and restored around the
recomputation, so dropout masks and other draws come out the same both times.
"""
import threading
import types

from ..autograd.function import Function
from ..autograd.engine import backward as _backward, current_backward, grad as _grad
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..backends import get_backend
from ..device import device as _device, get_default_device
from ..tensor import Tensor
from ..ops import batching

__all__ = ["checkpoint"]

# for each checkpoint's backward now differentiating its recomputation in this thread: whether the
# backward() that runs it writes .grad (a checkpoint nested inside runs under that grad() call)
_writing = threading.local()


def _backends(tensors):
    """The backends whose generators the block may draw from: the CPU, the default device, the inputs'."""
    bs = {}
    for dev in [_device("cpu"), get_default_device()] + [t.device for t in tensors]:
        b = get_backend(dev)
        bs.setdefault(id(b), b)
    return list(bs.values())


class _Checkpoint(Function):
    batch_rule = batching.loop      # it runs the user's function: under vmap, once per example

    @staticmethod
    def forward(ctx, run, *args):
        fn, kwargs, preserve, n = run
        tensors = [a for a in args if isinstance(a, Tensor)]
        ctx.run, ctx.args = run, [None if isinstance(a, Tensor) else a for a in args]
        ctx.rng = [(b, b.get_rng_state()) for b in _backends(tensors)] if preserve else None
        ctx.save_for_backward(*tensors)
        out = fn(*args[:n], **kwargs)             # recording is off inside forward: nothing is kept
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            if not isinstance(o, Tensor):
                raise TypeError(f"checkpoint: the function must return a Tensor or a tuple of Tensors, got "
                                f"{type(o).__name__}")
        return out

    @staticmethod
    def backward(ctx, *grads):
        fn, kwargs, _, n = ctx.run
        create = is_grad_enabled()                # on when backward was called with create_graph=True
        saved = iter(ctx.saved_tensors)
        inputs, args = [], []
        for a in ctx.args:
            if a is None:
                t = next(saved)
                if len(args) >= n:                # a tensor the function closes over: used as it is
                    inputs.append(t if t.requires_grad else None)
                    args.append(t)
                    continue
                # create_graph: an identity node keeps the recomputation connected to the real input
                r = (t.clone() if create else t.detach().requires_grad_()) if t.requires_grad else t.detach()
                inputs.append(r if t.requires_grad else None)
                a = r
            args.append(a)
        with enable_grad(), _replayed(ctx.rng):
            out = fn(*args[:n], **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        pairs = [(o, g) for o, g in zip(outs, grads) if g is not None and o.requires_grad]
        wrt = [r for r in inputs if r is not None]
        stack = getattr(_writing, "stack", None) or []
        run = current_backward()
        writes = stack[-1] if stack else run is not None and run.writes_grad
        # leaves the block reached that are not the node's inputs (a parameter used through a global, or
        # found by no introspection): their gradients are accumulated here, as PyTorch's checkpoint does
        missed = _missed_leaves([o for o, _ in pairs], wrt) if writes and pairs else []
        got = [None] * len(wrt)
        if pairs and (wrt or missed):
            _writing.stack = stack + [writes]
            try:
                got = _grad([o for o, _ in pairs], wrt + missed, [g for _, g in pairs], create_graph=create,
                            allow_unused=True)
            finally:
                _writing.stack = stack
            for leaf, g in zip(missed, got[len(wrt):]):
                if g is not None:
                    _backward([leaf], [g], create_graph=create)
        gs = iter(got[:len(wrt)])
        result = [None]
        for a in ctx.args:
            if a is None:
                r = inputs.pop(0)
                result.append(next(gs) if r is not None else None)
            else:
                result.append(None)
        return tuple(result)


def _missed_leaves(outs, wrt):
    """The leaves requiring grad that the recomputed graph of ``outs`` reaches without going through
    ``wrt`` (the node's own inputs, whose gradients it returns)."""
    stop = {id(t) if t.grad_fn is None else (id(t.grad_fn), t._output_nr) for t in wrt}
    found, seen = {}, set()
    todo = [o.grad_fn for o in outs if o.grad_fn is not None and (id(o.grad_fn), o._output_nr) not in stop]
    todo += [o for o in outs if o.grad_fn is None and o.requires_grad and id(o) not in stop]
    while todo:
        node = todo.pop()
        if isinstance(node, Tensor):
            found.setdefault(id(node), node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in node._next:
            if e is None:
                continue
            if isinstance(e, Tensor):
                if e.requires_grad and id(e) not in stop:
                    todo.append(e)
                continue
            n, k = e if isinstance(e, tuple) else (e, 0)
            if (id(n), k) not in stop:
                todo.append(n)
    return list(found.values())


class _replayed:
    """Restore the generators to the snapshot for the block's recomputation, then put them back."""

    def __init__(self, states):
        self.states = states

    def __enter__(self):
        if self.states:
            self.now = [(b, b.get_rng_state()) for b, _ in self.states]
            for b, s in self.states:
                b.set_rng_state(s)

    def __exit__(self, *exc):
        if self.states:
            for b, s in self.now:
                b.set_rng_state(s)


def _closed_over(function):
    """The tensors requiring grad that ``function`` uses without taking them as arguments: a Module's
    parameters (the function itself or the object of a bound method) and Tensors or Modules in its
    closure or functools.partial arguments. The node gets them as inputs so their gradients flow."""
    found = {}

    def visit(obj, depth=0):
        if isinstance(obj, Tensor):
            if obj.requires_grad:
                found.setdefault(id(obj), obj)
        elif callable(getattr(obj, "parameters", None)) and hasattr(obj, "_parameters"):
            for p in obj.parameters():
                if p.requires_grad:
                    found.setdefault(id(p), p)
        elif isinstance(obj, (list, tuple, dict)) and depth < 3:
            for o in (obj.values() if isinstance(obj, dict) else obj):
                visit(o, depth + 1)
        elif isinstance(obj, types.MethodType) and depth < 3:
            visit(obj.__self__, depth + 1)
        elif isinstance(obj, types.FunctionType) and depth < 3:   # a function it calls: a nested block
            for cell in obj.__closure__ or ():
                try:
                    visit(cell.cell_contents, depth + 1)
                except ValueError:                     # a cell not filled yet
                    pass

    visit(function)
    visit(getattr(function, "__self__", None))
    for part in ("func", "args", "keywords"):         # functools.partial
        visit(getattr(function, part, None), 1)
    for cell in getattr(function, "__closure__", None) or ():
        try:
            visit(cell.cell_contents)
        except ValueError:                             # a cell not filled yet
            pass
    return list(found.values())


def checkpoint(function, *args, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)`` without keeping its intermediate tensors: only the inputs are saved,
    and the function runs again during backward to rebuild what the gradient needs. Random ops inside
    replay the same numbers (``preserve_rng_state=False`` skips saving the generators). Non-tensor
    arguments, several outputs (a tuple), inputs that need no gradient and nested checkpoints work;
    backward(create_graph=True) differentiates through the recomputation. Parameters the function uses
    without taking them as arguments are inputs of the node when the function is a Module, a bound method
    of one, or a closure (or functools.partial) over Tensors, Modules or functions that close over them (a
    nested checkpoint's block); any other leaf the block reaches (a parameter used through a global) gets
    its gradient accumulated into .grad during backward(), as PyTorch's checkpoint does, but autograd.grad
    cannot ask for it: pass such a tensor as an argument. Tensors passed as keyword arguments are treated
    as constants."""
    if not callable(function):
        raise TypeError(f"checkpoint: expected a function, got {type(function).__name__}")
    if not is_grad_enabled():
        return function(*args, **kwargs)          # nothing is recorded anyway: a plain call
    ids = {id(a) for a in args}
    hidden = [p for p in _closed_over(function) if id(p) not in ids]
    return _Checkpoint.apply((function, kwargs, bool(preserve_rng_state), len(args)), *args, *hidden)
