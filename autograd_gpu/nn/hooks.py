"""Module hooks: forward pre/post hooks (with or without kwargs), full backward and backward pre hooks,
per module and global (``register_module_*``), each registration returning a RemovableHandle.

A module call runs them in PyTorch's order (``call_with_hooks``): global then the module's forward
pre hooks (each may replace the arguments), the backward-hook wrapper on the inputs, ``forward``,
global then the module's forward hooks (each may replace the result), the wrapper on the outputs.
The backward hooks work through two identity nodes (_BackwardHookFn): the one on the outputs
receives the gradients of the outputs first, runs the backward pre hooks on them (each may replace
them) and keeps them; the one on the inputs receives the gradients of the inputs and runs the full
backward hooks with (grad_input, grad_output) (each may replace grad_input). Gradients of
positional arguments that are not tensors, or need no gradient, are None.

Nothing here runs until the first hook is registered: ``Module.__call__`` is just ``forward``. The
first registration swaps it (``activate``) for one that looks for ``_hooks`` in the module's
``__dict__`` and for global hooks, and calls ``call_with_hooks`` when there are some. Under ag.compile the hooks run while tracing, so
the array work of a hook that changes a value is part of the program; which hooks a module has is
part of the call's signature (``Module._hooks_key``, and ``global_key`` for the global ones), so
adding or removing one traces again.
"""
import itertools
from collections import OrderedDict

from ..autograd.function import Function
from ..autograd.grad_mode import state as _grad_state
from ..creation import zeros_like as _zeros_like
from ..ops import batching as _batching
from ..tensor import Tensor

__all__ = ["RemovableHandle", "register_module_forward_pre_hook", "register_module_forward_hook",
           "register_module_full_backward_hook", "register_module_full_backward_pre_hook"]

_ids = itertools.count()

# 0 until some hook is registered (module or global); then 1, and the callbacks registered in
# on_first_hook run once (Module swaps its __call__ for the one that looks for hooks)
active = [0]
on_first_hook: list = []      # callables, called with no arguments


def activate():
    if not active[0]:
        active[0] = 1
        for fn in on_first_hook:
            fn()
# which global hooks exist, as a tuple of ids (ag.compile's signature reads it)
global_key = [()]


class ModuleHooks:
    """One module's hooks: id -> (hook, with_kwargs or always_call) per kind, in calling order."""

    def __init__(self):
        self.forward_pre = OrderedDict()
        self.forward = OrderedDict()
        self.backward = OrderedDict()
        self.backward_pre = OrderedDict()

    def key(self):
        """The ids of the hooks, kind by kind (a tuple of ints: ag.compile keys its programs by it)."""
        return (*self.forward_pre, -1, *self.forward, -1, *self.backward, -1, *self.backward_pre)

    def empty(self):
        return not (self.forward_pre or self.forward or self.backward or self.backward_pre)


_global = ModuleHooks()


class RemovableHandle:
    """What a hook registration returns: ``handle.remove()`` takes the hook out (again: no effect); also a
    context manager that removes it on exit."""

    def __init__(self, table, on_change):
        self.id = next(_ids)
        self._table, self._on_change = table, on_change

    def remove(self):
        """Take the hook out; later calls do not run it."""
        if self._table is not None and self._table.pop(self.id, None) is not None:
            self._on_change()
        self._table = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def add_hook(table, hook, extra, prepend, on_change, what):
    """Put ``hook`` (with its flag) into ``table`` (first with ``prepend``); its handle."""
    if not callable(hook):
        raise TypeError(f"{what}: expected a callable hook, got {type(hook).__name__}")
    handle = RemovableHandle(table, on_change)
    table[handle.id] = (hook, extra)
    if prepend:
        table.move_to_end(handle.id, last=False)
    on_change()
    return handle


def _global_changed():
    global_key[0] = _global.key() if not _global.empty() else ()
    activate()
    from . import module as _module                   # (module imports this file)
    _module.state_version[0] += 1


def register_module_forward_pre_hook(hook, *, prepend=False, with_kwargs=False):
    """A forward pre hook for every module: ``hook(module, args)`` (or ``hook(module, args, kwargs)`` with
    ``with_kwargs``) before each forward, before the modules' own. Returns a RemovableHandle."""
    return add_hook(_global.forward_pre, hook, with_kwargs, prepend, _global_changed, "register_module_forward_pre_hook")


def register_module_forward_hook(hook, *, prepend=False, with_kwargs=False, always_call=False):
    """A forward hook for every module: ``hook(module, args, output)`` (``hook(module, args, kwargs, output)``
    with ``with_kwargs``) after each forward, before the modules' own. Returns a RemovableHandle."""
    return add_hook(_global.forward, hook, (with_kwargs, always_call), prepend, _global_changed,
                    "register_module_forward_hook")


def register_module_full_backward_hook(hook, *, prepend=False):
    """A full backward hook for every module (see Module.register_full_backward_hook)."""
    return add_hook(_global.backward, hook, None, prepend, _global_changed, "register_module_full_backward_hook")


def register_module_full_backward_pre_hook(hook, *, prepend=False):
    """A backward pre hook for every module (see Module.register_full_backward_pre_hook)."""
    return add_hook(_global.backward_pre, hook, None, prepend, _global_changed,
                    "register_module_full_backward_pre_hook")


# --------------------------------------------------------------------------- the call
def call_with_hooks(module, args, kwargs):
    """``module(*args, **kwargs)`` with the global hooks and the module's, in PyTorch's order."""
    own = module.__dict__.get("_hooks")
    g = _global
    for table in (g.forward_pre, own.forward_pre if own is not None else None):
        if table:
            for hook, with_kwargs in list(table.values()):
                if with_kwargs:
                    res = hook(module, args, kwargs)
                    if res is not None:
                        if not (isinstance(res, tuple) and len(res) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                               f"but got {res!r}")
                        args, kwargs = res
                        args = tuple(args)
                else:
                    res = hook(module, args)
                    if res is not None:
                        args = res if isinstance(res, tuple) else (res,)
    backward = [h for table in (g.backward, own.backward if own is not None else None) if table
                for h, _ in table.values()]
    backward_pre = [h for table in (g.backward_pre, own.backward_pre if own is not None else None) if table
                    for h, _ in table.values()]
    bw = None
    if backward or backward_pre:
        bw = _BackwardHook(module, backward, backward_pre)
        args = bw.setup_input(args)
    forward_tables = [t for t in (g.forward, own.forward if own is not None else None) if t]
    try:
        result = module.forward(*args, **kwargs)
    except Exception:
        for table in forward_tables:                      # always_call hooks run even when forward raised
            for hook, (with_kwargs, always) in list(table.values()):
                if always:
                    try:
                        hook(module, args, kwargs, None) if with_kwargs else hook(module, args, None)
                    except Exception:
                        pass
        raise
    for table in forward_tables:
        for hook, (with_kwargs, _) in list(table.values()):
            res = hook(module, args, kwargs, result) if with_kwargs else hook(module, args, result)
            if res is not None:
                result = res
    if bw is not None:
        result = bw.setup_output(result)
    return result


class _BackwardHookFn(Function):
    """Identity on the tensors given; its backward hands their gradients to a _BackwardHook (``side``:
    "out" for the module's outputs, "in" for its inputs), which may replace them."""

    materialize_grads = False        # an output no loss reached has no gradient (None), as in PyTorch
    batch_rule = _batching.loop      # hooks see one example at a time under vmap: no batched meaning for them

    @staticmethod
    def forward(ctx, hook, side, *tensors):
        ctx.hook, ctx.side = hook, side
        return tensors if len(tensors) > 1 else tensors[0]       # inputs returned: apply makes them new tensors

    @staticmethod
    def backward(ctx, *grads):
        grads = ctx.hook.output_grads(grads) if ctx.side == "out" else ctx.hook.input_grads(grads)
        return (None, None, *grads)


class _BackwardHook:
    """The backward hooks of one module call (PyTorch's torch.utils.hooks.BackwardHook)."""

    def __init__(self, module, hooks, pre_hooks):
        self.module, self.hooks, self.pre_hooks = module, hooks, pre_hooks
        self.grad_outputs = None
        self.n_inputs = self.n_outputs = 0
        self.input_index = self.output_index = None

    @staticmethod
    def _wrap(hook, side, values):
        """Pass the tensors of ``values`` that require grad through one identity node; (new values,
        their positions) or (values, None) when nothing is recorded."""
        index = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
        if not index or not _grad_state.enabled:
            return values, None
        out = _BackwardHookFn.apply(hook, side, *(values[i] for i in index))
        out = out if isinstance(out, tuple) else (out,)
        values = list(values)
        for i, t in zip(index, out):
            values[i] = t
        return tuple(values), index

    @staticmethod
    def _pack(index, grads, n):
        out = [None] * n
        for i, g in zip(index or (), grads):
            out[i] = g
        return tuple(out)

    def setup_input(self, args):
        self.n_inputs = len(args)
        if not self.hooks:
            return args
        args, self.input_index = self._wrap(self, "in", args)
        # tensors that need no gradient show zeros in grad_input, as in PyTorch (non-tensors show None)
        self.frozen = [(i, a) for i, a in enumerate(args) if isinstance(a, Tensor) and not a.requires_grad]
        return args

    def setup_output(self, result):
        single = not isinstance(result, tuple)
        values = (result,) if single else result
        values, self.output_index = self._wrap(self, "out", values)
        self.n_outputs = len(values)
        return values[0] if single else values

    def output_grads(self, grads):
        """The gradients of the module's outputs: backward pre hooks, then kept for the full hooks."""
        self.grad_outputs = self._pack(self.output_index, grads, self.n_outputs)
        for hook in self.pre_hooks:
            res = hook(self.module, self.grad_outputs)
            if res is None:
                continue
            res = res if isinstance(res, tuple) else (res,)
            if len(res) != len(self.grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of grad_output, got {len(res)}, "
                                   f"but expected {len(self.grad_outputs)}")
            self.grad_outputs = res
        local = self.grad_outputs
        if self.input_index is None and self.hooks:       # no input needs a gradient: the hooks run now
            grad_inputs = (None,) * self.n_inputs
            for hook in self.hooks:
                res = hook(self.module, grad_inputs, self.grad_outputs)
                if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                    raise RuntimeError("Backward hook for Modules where no input requires gradient should always "
                                       "return None or None for all gradients.")
            self.grad_outputs = None
        return tuple(local[i] for i in self.output_index)

    def input_grads(self, grads):
        """The gradients of the module's inputs: the full backward hooks, with the kept output gradients."""
        if self.grad_outputs is None:        # the outputs were not reached through this call (or ran already)
            return grads
        res = self._pack(self.input_index, grads, self.n_inputs)
        if self.frozen:
            res = list(res)
            for i, a in self.frozen:
                res[i] = _zeros_like(a)
            res = tuple(res)
        for hook in self.hooks:
            out = hook(self.module, res, self.grad_outputs)
            if out is None:
                continue
            out = out if isinstance(out, tuple) else (out,)
            if len(out) != len(res):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, got {len(out)}, but "
                                   f"expected {len(res)}")
            res = out
        self.grad_outputs = None
        return tuple(res[i] for i in self.input_index)
