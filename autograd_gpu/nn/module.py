"""Module: the base class of layers and models; registers parameters, buffers and submodules by
attribute assignment and walks them for parameters(), state_dict(), to(), train()/eval().

Registered parameters, buffers and submodules live in ``_parameters``/``_buffers``/``_modules``
(which keep the order) and are mirrored in the instance ``__dict__``, so ``self.weight`` in a
forward is a plain attribute lookup; ``__setattr__``/``__delattr__`` keep the two in step.
"""
import copy as _copy
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ..device import Device
from ..tensor import Tensor, parse_to_args
from .. import dtypes as _dtypes
from .parameter import Parameter
from .utils import zero_grads
from . import hooks as _hooks
from .hooks import (RemovableHandle, register_module_forward_pre_hook, register_module_forward_hook,  # noqa: F401
                    register_module_full_backward_hook, register_module_full_backward_pre_hook)

__all__ = ["Module"]

IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])   # load_state_dict's result
_M = TypeVar("_M", bound="Module")      # the methods that return self return the caller's own class


def _addindent(text, n):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * n + line for line in lines[1:])


def _parse_to_args(args, kwargs):
    """(device, dtype) from Module.to's arguments: a device, a dtype, a Tensor, or keywords."""
    device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"Module.to: unexpected keyword argument(s) {sorted(kwargs)}")
    device, dtype = parse_to_args(args, device, dtype)
    if dtype is not None:
        if not _dtypes.is_inexact(dtype):
            raise TypeError(f"Module.to: only floating-point dtypes can be given, got {dtype}")
    return device, dtype


def _move(t, device, dtype):
    """Move/cast tensor ``t`` in place (its .data and .device are replaced; the object is kept)."""
    if t is None:
        return
    dt = dtype if dtype is not None and _dtypes.is_inexact(t.dtype) else None
    new = t.detach().to(device=device, dtype=dt)
    if new.data is not t.data:
        t.data, t.device = new.data, new.device
        t._bump_version()          # graphs that saved the old value must not silently use the new one


# bumped whenever Module's own methods change a module's attributes, registries, hooks or train/eval flags:
# ag.compile's fast path (compile/state.py, Watch) rechecks module attributes through it
state_version = [0]
# Module.compile's implementation, registered by autograd_gpu.compile (a layer above nn) when it is imported
compile_in_place: list[Any] = [None]


class Module:
    """Base class of all layers and models: subclasses set attributes in __init__ and define forward."""

    training = True

    def __init__(self):
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers"] = set()
        d["_modules"] = OrderedDict()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation the module performs; every layer defines it. Call the module (``m(x)``),
        not ``forward``, so forward hooks run.
        """
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # (until a hook is first registered; then _call_looking_for_hooks takes its place)
        return self.forward(*args, **kwargs)

    def _call_looking_for_hooks(self, *args: Any, **kwargs: Any) -> Any:
        if "_hooks" not in self.__dict__ and not _hooks.global_key[0]:
            return self.forward(*args, **kwargs)
        return _hooks.call_with_hooks(self, args, kwargs)

    # -- hooks ------------------------------------------------------------------------------------
    def _hook_table(self, kind):
        h = self.__dict__.get("_hooks")
        if h is None:
            h = self.__dict__["_hooks"] = _hooks.ModuleHooks()
            _hooks.activate()                    # from now on every call looks for hooks (a copy may have some)
        return getattr(h, kind)

    def _hooks_changed(self):
        # the ids of this module's hooks, a tuple of ints among its attributes: ag.compile's signature
        # holds it, so a hook added or removed traces again (and state_version makes the fast path look)
        d = self.__dict__
        h = d.get("_hooks")
        if h is not None and h.empty():
            del d["_hooks"]
            h = None
        if h is None:
            d.pop("_hooks_key", None)
        else:
            d["_hooks_key"] = h.key()
        state_version[0] += 1

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Call ``hook(module, args)`` before each forward; a non-None result replaces the positional
        arguments (a non-tuple is wrapped in one). With ``with_kwargs``, ``hook(module, args, kwargs)``,
        which may return ``(args, kwargs)``. ``prepend`` runs it before the hooks already there. Returns a
        handle whose ``.remove()`` takes it out.

        >>> m = ag.nn.Linear(2, 2)
        >>> h = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
        >>> float(m(ag.ones(1, 2)).sum()) == float(m.bias.sum())
        True
        >>> h.remove()
        """
        return _hooks.add_hook(self._hook_table("forward_pre"), hook, with_kwargs, prepend, self._hooks_changed,
                               "register_forward_pre_hook")

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """Call ``hook(module, args, output)`` after each forward (``hook(module, args, kwargs, output)`` with
        ``with_kwargs``); a non-None result replaces the output. ``always_call`` runs it (with output None)
        even when forward raises. Returns a handle with ``.remove()``."""
        return _hooks.add_hook(self._hook_table("forward"), hook, (with_kwargs, always_call), prepend,
                               self._hooks_changed, "register_forward_hook")

    def register_full_backward_hook(self, hook, *, prepend=False):
        """Call ``hook(module, grad_input, grad_output)`` when the gradients of this module's inputs are
        computed: tuples with one entry per positional argument (None where it is no tensor or needs no
        gradient) and per output. A non-None result (a tuple of the same length) replaces grad_input.
        Returns a handle with ``.remove()``."""
        return _hooks.add_hook(self._hook_table("backward"), hook, None, prepend, self._hooks_changed,
                               "register_full_backward_hook")

    def register_full_backward_pre_hook(self, hook, *, prepend=False):
        """Call ``hook(module, grad_output)`` when the gradients of this module's outputs are computed,
        before those of its inputs; a non-None result (a tuple of the same length) replaces grad_output.
        Returns a handle with ``.remove()``."""
        return _hooks.add_hook(self._hook_table("backward_pre"), hook, None, prepend, self._hooks_changed,
                               "register_full_backward_pre_hook")

    # -- registration ---------------------------------------------------------------------------
    def _registries(self, what):
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call; call super().__init__() "
                                 f"first in {type(self).__name__}.__init__")
        return d["_parameters"], d["_buffers"], d["_modules"]

    def _check_name(self, name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f'{what} name can\'t be empty or contain ".", got {name!r}')

    def __setattr__(self, name, value):
        d = self.__dict__
        if isinstance(value, Parameter):
            params, buffers, modules = self._registries("parameters")
            buffers.pop(name, None)
            modules.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params, buffers, modules = self._registries("child modules")
            params.pop(name, None)
            buffers.pop(name, None)
            modules[name] = value
        elif name in d.get("_parameters", ()):
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as parameter '{name}' (nn.Parameter or "
                                "None expected); wrap it: nn.Parameter(value)")
            d["_parameters"][name] = None
        elif name in d.get("_modules", ()):
            if value is not None:
                raise TypeError(f"cannot assign {type(value).__name__} as child module '{name}' (nn.Module or "
                                "None expected)")
            d["_modules"][name] = None
        elif name in d.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign {type(value).__name__} as buffer '{name}' (Tensor or None expected)")
            d["_buffers"][name] = value
        object.__setattr__(self, name, value)
        state_version[0] += 1

    def __getattr__(self, name):
        # reached only when the name is not in __dict__ (e.g. a registry edited directly)
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                return r[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for reg in ("_parameters", "_buffers", "_modules"):
            r = d.get(reg)
            if r is not None and name in r:
                del r[name]
                d.pop(name, None)
                d["_non_persistent_buffers"].discard(name)
                state_version[0] += 1
                return
        object.__delattr__(self, name)
        state_version[0] += 1

    def register_parameter(self, name, param):
        """Add a Parameter (or None, a placeholder skipped by parameters()) under ``name``."""
        self._registries("parameters")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign {type(param).__name__} as parameter '{name}' (nn.Parameter or None "
                            "expected)")
        if param is not None and param.grad_fn is not None:
            raise ValueError(f"cannot assign a non-leaf tensor as parameter '{name}'; the parameter must be a "
                             "leaf: use .detach() and wrap it in nn.Parameter")
        self._parameters[name] = param
        self.__dict__[name] = param
        state_version[0] += 1

    def register_buffer(self, name, tensor, persistent=True):
        """Add a Tensor that is state but not a parameter (e.g. running means): moved by to(), saved in
        state_dict() unless ``persistent=False``."""
        self._registries("buffers")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign {type(tensor).__name__} as buffer '{name}' (Tensor or None expected)")
        self._buffers[name] = tensor
        self.__dict__[name] = tensor
        state_version[0] += 1
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        """Add a child module (or None) under ``name``."""
        self._registries("child modules")
        self._check_name(name, "module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module
        self.__dict__[name] = module
        state_version[0] += 1

    register_module = add_module

    def get_submodule(self, target):
        """The submodule at dotted path ``target`` ("" is the module itself)."""
        mod = self
        for part in target.split(".") if target else ():
            sub = mod._modules.get(part)
            if sub is None:
                raise AttributeError(f"{type(mod).__name__} has no submodule '{part}' (looking up '{target}')")
            mod = sub
        return mod

    def get_parameter(self, target):
        """The Parameter at dotted path ``target`` ("layer.0.weight")."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}` (looking up '{target}')")
        p = mod._parameters[name]
        if not isinstance(p, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter (looking up '{target}')")
        return p

    def get_buffer(self, target):
        """The buffer at dotted path ``target`` ("bn.running_mean")."""
        path, _, name = target.rpartition(".")
        mod = self.get_submodule(path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}` (looking up '{target}')")
        return mod._buffers[name]

    # -- iteration ----------------------------------------------------------------------------
    def named_modules(self, memo: set[int] | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, "Module"]]:
        """(dotted name, module) for this module and every descendant, each module once."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """Every module in the tree, this one first (depth-first; each module once)."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        """``(name, module)`` for each direct submodule, in registration order."""
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        """The direct submodules, in registration order."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, registry, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, t in getattr(m, registry).items():
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield mprefix + ("." if mprefix else "") + name, t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """(dotted name, Parameter) pairs; a parameter shared by two modules appears once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters of this module (and its submodules when ``recurse``), each once; what an
        optimizer takes.

        >>> model = ag.nn.Linear(3, 2)
        >>> [p.shape for p in model.parameters()]
        [(2, 3), (2,)]
        """
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        """``(dotted name, tensor)`` for each registered buffer (running statistics and the like)."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The registered buffers (tensors saved in the state dict but not trained)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # -- modes and gradients --------------------------------------------------------------------
    def train(self: _M, mode: bool = True) -> _M:
        """Set training mode (Dropout active, BatchNorm on batch statistics) here and in every child."""
        if not isinstance(mode, bool):
            raise ValueError(f"train: mode should be a bool, got {type(mode).__name__}")
        for m in self.modules():
            m.__dict__["training"] = mode
        state_version[0] += 1
        return self

    def eval(self: _M) -> _M:
        """Evaluation mode: the same as train(False)."""
        return self.train(False)

    def requires_grad_(self: _M, requires_grad: bool = True) -> _M:
        """Set ``requires_grad`` on every parameter (freeze with False); returns the module."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset every parameter's gradient: to None (default) or to zeros in place."""
        zero_grads(self._parameter_list(), set_to_none)

    def compile(self, **options: Any) -> None:
        """Compile this module's forward in place with ``ag.compile`` (PyTorch's ``nn.Module.compile``):
        ``self(x)`` then replays a traced program, hooks run around it, and a loss made from the output
        differentiates outside through a compiled backward. ``options`` are ag.compile's (cache_size, fuse,
        cuda_graphs). ``ag.compile(module)`` returns a compiled wrapper instead. See docs/compile.md."""
        if compile_in_place[0] is None:
            raise RuntimeError("Module.compile: autograd_gpu.compile is not imported (import autograd_gpu)")
        compile_in_place[0](self, **options)

    def _parameter_list(self):
        """The parameters of this module and its descendants (each module visited once, in the order of
        parameters(); a shared parameter may repeat), by one explicit walk: no generator per module and
        no dotted names, for zero_grad, which runs every step."""
        params, seen, stack = [], set(), [self]
        while stack:
            m = stack.pop()
            if m is None or id(m) in seen:
                continue
            seen.add(id(m))
            params.extend(m._parameters.values())
            stack.extend(reversed(m._modules.values()))
        return [p for p in params if p is not None]

    def apply(self: _M, fn: Callable[["Module"], object]) -> _M:
        """Call ``fn(module)`` on every child (recursively) and then on this module; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- devices and dtypes ---------------------------------------------------------------------
    def to(self: _M, *args: Any, **kwargs: Any) -> _M:
        """Move/cast parameters, their gradients and buffers in place: ``m.to("cuda")``,
        ``m.to(ag.float64)``; only floating-point tensors change dtype. Returns self."""
        device, dtype = _parse_to_args(args, dict(kwargs))
        seen = set()
        for m in self.modules():
            for t in list(m._parameters.values()) + list(m._buffers.values()):
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                _move(t, device, dtype)
                if t.grad is not None:
                    _move(t.grad, device, dtype)
        return self

    def cuda(self: _M, device: "int | str | Device | None" = None) -> _M:
        """Move every parameter and buffer to a GPU (the current one, or ``device``); returns the module."""
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def cpu(self: _M) -> _M:
        """Move every parameter and buffer to the CPU; returns the module."""
        return self.to("cpu")

    def float(self: _M) -> _M:
        """Cast floating-point parameters and buffers to float32; returns the module."""
        return self.to(_dtypes.float32)

    def double(self: _M) -> _M:
        """Cast floating-point parameters and buffers to float64; returns the module."""
        return self.to(_dtypes.float64)

    def half(self: _M) -> _M:
        """Cast floating-point parameters and buffers to float16; returns the module."""
        return self.to(_dtypes.float16)

    # -- state dict -----------------------------------------------------------------------------
    def _state_items(self):
        """(local name, tensor) for this module's parameters and persistent buffers."""
        for name, p in self._parameters.items():
            if p is not None:
                yield name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                yield name, b

    def state_dict(self, *, destination: Any = None, prefix: str = "", keep_vars: bool = False) -> dict[str, Tensor]:
        """An OrderedDict of dotted name -> tensor for every parameter and persistent buffer (detached,
        sharing memory with the module unless ``keep_vars``)."""
        out = OrderedDict() if destination is None else destination
        for mprefix, m in self.named_modules(prefix=prefix.rstrip(".") if prefix else "", remove_duplicate=False):
            for name, t in m._state_items():
                out[mprefix + ("." if mprefix else "") + name] = t if keep_vars else t.detach()
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> IncompatibleKeys:
        """Copy tensors from ``state_dict`` into this module's parameters and buffers, in place (cast to
        each one's dtype and device). With ``strict`` a missing or unexpected key raises; a shape
        mismatch always raises. Returns (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"load_state_dict: expected a dict (e.g. from state_dict()), got "
                            f"{type(state_dict).__name__}")
        missing, errors, used = [], [], set()
        for mprefix, m in self.named_modules(remove_duplicate=False):
            for name, t in list(m._state_items()):
                key = mprefix + ("." if mprefix else "") + name
                if key not in state_dict:
                    missing.append(key)
                    continue
                used.add(key)
                err = _load_one(m, name, t, state_dict[key], key, assign)
                if err:
                    errors.append(err)
        unexpected = [k for k in state_dict.keys() if k not in used]
        if strict:
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected)
                              + ".")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        return IncompatibleKeys(missing, unexpected)

    # -- copying and printing -------------------------------------------------------------------
    def __deepcopy__(self, memo):
        """A deep copy with fresh parameters and buffers (Tensors do not pickle, so copy them first)."""
        for m in self.modules():
            for t in list(m._parameters.values()) + list(m._buffers.values()):
                if t is not None and id(t) not in memo:
                    memo[id(t)] = _copy.deepcopy(t, memo) if isinstance(t, Parameter) else t.detach()._copy()
        new = object.__new__(type(self))
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            new.__dict__[k] = _copy.deepcopy(v, memo)
        return new

    def extra_repr(self) -> str:
        """The text inside this module's parentheses in repr(); layers override it."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _addindent(repr(m), 2) for name, m in self._modules.items()]
        lines += child_lines
        body = type(self).__name__ + "("
        if lines:
            if len(lines) == 1 and not child_lines:
                body += extra
            else:
                body += "\n  " + "\n  ".join(lines) + "\n"
        return body + ")"


def _load_one(module, name, t, value, key, assign):
    """Copy ``value`` into tensor ``t`` (registered as ``name`` on ``module``); an error text or None."""
    if isinstance(value, Tensor):
        src = value.detach()
    else:
        try:
            src = Tensor(value)
        except TypeError:
            return f"expected a Tensor or an array for {key}, got {type(value).__name__}"
    if tuple(src.shape) != tuple(t.shape):
        return (f"size mismatch for {key}: copying a param with shape {tuple(src.shape)} from checkpoint, "
                f"the shape in current model is {tuple(t.shape)}.")
    if assign:
        src = src.to(device=t.device) if src.device is not t.device else src
        if isinstance(t, Parameter):
            new = Parameter(src, requires_grad=t.requires_grad)
        else:
            new = src
        setattr(module, name, new)
        return None
    src = src.to(device=t.device, dtype=t.dtype)
    xp = t.device.backend.xp
    if src.data is not t.data:
        xp.copyto(t.data, src.data)
    t._bump_version()
    return None


def _look_for_hooks():
    Module.__call__ = Module._call_looking_for_hooks


_hooks.on_first_hook.append(_look_for_hooks)
