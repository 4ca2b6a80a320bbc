"""``ag.compile(module)`` and ``Module.compile()``: a module whose calls are compiled.

``ag.compile(model)`` returns a ``CompiledModule``: calling it runs the module's ``__call__`` (hooks
included) through a CompiledFunction; everything else (``parameters()``, ``state_dict()``,
``named_modules()``, attributes, hooks registered on it) is the module's own, read and written through
the wrapper. ``train()``/``eval()``/``to()`` return the wrapper, so ``model = ag.compile(model).eval()``
keeps it. ``model.compile()`` (PyTorch's ``nn.Module.compile``) compiles in place instead: the module's
``forward`` becomes a CompiledFunction of itself, so ``model(x)`` replays while hooks run around it.
"""
from .replay import CompiledFunction

__all__ = ["CompiledModule", "compile_in_place"]

_OWN = frozenset({"_orig_mod", "_compiled"})
_RETURNS_SELF = frozenset({"train", "eval", "to", "cpu", "cuda", "float", "double", "half", "bfloat16",
                           "requires_grad_", "zero_grad", "apply", "type"})


class CompiledModule:
    """The module ``_orig_mod`` with a compiled ``__call__``. ``stats`` and ``programs()`` are the compiled
    function's."""

    def __init__(self, module, **options):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled", CompiledFunction(module, **options))

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    @property
    def stats(self):
        return self._compiled.stats

    def programs(self):
        return self._compiled.programs()

    def cuda_stats(self):
        return self._compiled.cuda_stats()

    def __getattr__(self, name):
        attr = getattr(object.__getattribute__(self, "_orig_mod"), name)
        if name in _RETURNS_SELF and callable(attr):
            mod = self._orig_mod

            def method(*args, **kwargs):
                r = attr(*args, **kwargs)
                return self if r is mod else r
            method.__name__ = name
            return method
        return attr

    def __setattr__(self, name, value):
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | {"stats", "programs", "cuda_stats", "_orig_mod"})

    def __repr__(self):
        return f"CompiledModule({self._orig_mod!r})"

    # the protocols __getattr__ does not reach
    def __iter__(self):
        return iter(self._orig_mod)

    def __len__(self):
        return len(self._orig_mod)

    def __getitem__(self, i):
        return self._orig_mod[i]

    def __getstate__(self):
        return {"_orig_mod": self._orig_mod}

    def __setstate__(self, state):
        object.__setattr__(self, "_orig_mod", state["_orig_mod"])
        object.__setattr__(self, "_compiled", CompiledFunction(state["_orig_mod"]))


def compile_in_place(module, **options):
    """``Module.compile()``: ``module.forward`` becomes a CompiledFunction of the class's forward bound to
    the module (an instance attribute, so __call__ and hooks stay as they are). Compiling again replaces it."""
    fwd = type(module).forward.__get__(module, type(module))
    module.__dict__["forward"] = CompiledFunction(fwd, **options)
