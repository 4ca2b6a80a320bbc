"""Containers: Sequential (chains its children), ModuleList and ModuleDict (hold children)."""
from collections import OrderedDict

from ..module import Module
from ..hooks import global_key as _global_hooks
from .linear import Linear
from .activation import ReLU
from .. import functional as F
from ...ops.nn.linear import _linear_relu
from ...autograd import function as _function

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _index(i, n, what):
    if not isinstance(i, int) or isinstance(i, bool):
        raise TypeError(f"{what} indices must be integers or slices, got {type(i).__name__}")
    if not -n <= i < n:
        raise IndexError(f"{what} index {i} is out of range for {n} modules")
    return i % n


class _ListLike(Module):
    """Children stored under "0", "1", ...; renumbered after deletions and insertions."""

    def _renumber(self, modules):
        for name in list(self._modules):
            delattr(self, name)
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return type(self)(*mods[idx]) if isinstance(self, Sequential) else type(self)(mods[idx])
        return mods[_index(idx, len(mods), type(self).__name__)]

    def __setitem__(self, idx, module):
        i = _index(idx, len(self), type(self).__name__)
        setattr(self, list(self._modules)[i], module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(idx, len(mods), type(self).__name__)]
        self._renumber(mods)

    def append(self, module):
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._renumber(mods)

    def pop(self, idx=-1):
        """Remove and return the module at ``idx`` (the last by default)."""
        m = self[idx]
        del self[idx]
        return m

    def __iadd__(self, modules):
        return self.extend(modules)


class Sequential(_ListLike):
    """Calls its children in order, each on the previous one's output: Sequential(Linear(2, 8), ReLU())."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (dict, OrderedDict)):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return super().__getitem__(idx)

    def forward(self, x):
        """Feed ``x`` through each module in order."""
        if _global_hooks[0]:        # global module hooks: each child through its __call__, so they run
            for m in self._modules.values():
                x = m(x)
            return x
        lin = None                  # a Linear waiting to see whether a ReLU follows
        for m in self._modules.values():
            if lin is not None:
                if m.__class__ is ReLU and "forward" not in (d := m.__dict__) and "_hooks" not in d and \
                        not _function._vmap:
                    # Linear then ReLU as one node (_linear_relu, as the transformer layers use): the
                    # same values and gradients, with one op call, one graph node and one array fewer
                    x, lin = _linear_relu(x, lin.weight, lin.bias), None
                    continue
                x, lin = F.linear(x, lin.weight, lin.bias), None     # (what lin(x) does)
            if m.__class__ is Linear and "forward" not in (d := m.__dict__) and "_hooks" not in d:   # (no hooks)
                lin = m
                continue
            x = m(x)
        return x if lin is None else F.linear(x, lin.weight, lin.bias)


class ModuleList(_ListLike):
    """A list of modules whose parameters the parent sees; index, iterate and append like a list."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))


class ModuleDict(Module):
    """A dict of modules (insertion-ordered) whose parameters the parent sees."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        delattr(self, key)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        """The names of the modules, in insertion order."""
        return self._modules.keys()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def items(self):
        """``(name, module)`` pairs, in insertion order."""
        return self._modules.items()

    def pop(self, key):
        """Remove and return the module named ``key``."""
        m = self._modules[key]
        del self[key]
        return m

    def clear(self):
        """Remove every module."""
        for k in list(self._modules):
            del self[k]

    def update(self, modules):
        """Add the (name, module) pairs of a dict or an iterable of pairs."""
        items = modules.items() if hasattr(modules, "items") else modules
        for pair in items:
            if len(pair) != 2:
                raise ValueError(f"ModuleDict.update: expected (name, module) pairs, got {pair!r}")
            self[pair[0]] = pair[1]
