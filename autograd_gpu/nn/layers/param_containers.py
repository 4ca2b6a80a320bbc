"""ParameterList and ParameterDict: modules that hold parameters under "0", "1", ... or under string keys,
so that parameters(), state_dict() and .to() see them (a plain Tensor is wrapped in a Parameter on insertion,
as PyTorch's)."""
from collections import OrderedDict

from ...tensor import Tensor
from ..module import Module
from ..parameter import Parameter

__all__ = ["ParameterList", "ParameterDict"]


def _as_parameter(value):
    return Parameter(value) if isinstance(value, Tensor) and not isinstance(value, Parameter) else value


class ParameterList(Module):
    """A list of parameters: index, slice, iterate, ``len``, ``append``, ``extend``, ``+=``."""

    def __init__(self, values=None):
        super().__init__()
        self.__dict__["_size"] = 0
        if values is not None:
            self.extend(values)

    def _index(self, idx):
        if not isinstance(idx, int) or isinstance(idx, bool):
            raise TypeError(f"ParameterList indices must be integers or slices, got {type(idx).__name__}")
        if not -self._size <= idx < self._size:
            raise IndexError(f"ParameterList index {idx} is out of range for {self._size} parameters")
        return idx % self._size

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)([self[i] for i in range(self._size)[idx]])
        return getattr(self, str(self._index(idx)))

    def __setitem__(self, idx, value):
        setattr(self, str(self._index(idx)), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return iter(self[i] for i in range(self._size))

    def __iadd__(self, values):
        return self.extend(values)

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]

    def append(self, value):
        """Add one parameter (a Tensor becomes a Parameter) at the end."""
        n = self._size
        self.__dict__["_size"] = n + 1
        setattr(self, str(n), _as_parameter(value))
        return self

    def extend(self, values):
        """Append each of an iterable of parameters."""
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise TypeError(f"ParameterList.extend should be called with an iterable, got {type(values).__name__}")
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        lines = []
        for i, p in enumerate(self):
            if isinstance(p, Tensor):
                lines.append(f"({i}): Parameter containing: [{type(p).__name__} of size {'x'.join(map(str, p.shape))}"
                             f" ({p.dtype})]")
            else:
                lines.append(f"({i}): Object of type: {type(p).__name__}")
        return "\n".join(lines)


class ParameterDict(Module):
    """A dict of parameters by string key, in insertion order (a plain dict given: sorted): ``[]``, ``in``, ``keys``, ``values``, ``items``,
    ``get``, ``pop``, ``popitem``, ``setdefault``, ``update``, ``clear``, ``copy``, ``fromkeys``, ``len``."""

    def __init__(self, parameters=None):
        super().__init__()
        self.__dict__["_keys"] = {}
        if parameters is not None:
            self.update(parameters)

    def _key(self, key):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict keys must be strings, got {type(key).__name__}")
        return key

    def __getitem__(self, key):
        if key not in self._keys:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[self._key(key)] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(list(self._keys))

    def __reversed__(self):
        return reversed(list(self._keys))

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        """The parameters' names, in insertion order."""
        return list(self._keys)

    def values(self):
        """The parameters, in insertion order."""
        return [self[k] for k in self._keys]

    def items(self):
        """(name, parameter) pairs, in insertion order."""
        return [(k, self[k]) for k in self._keys]

    def get(self, key, default=None):
        """The parameter named ``key``, or ``default``."""
        return self[key] if key in self else default

    def pop(self, key):
        """Remove the parameter named ``key`` and return it."""
        value = self[key]
        del self[key]
        return value

    def popitem(self):
        """Remove and return the last (name, parameter) pair."""
        if not self._keys:
            raise KeyError("popitem(): ParameterDict is empty")
        key = list(self._keys)[-1]
        return key, self.pop(key)

    def setdefault(self, key, default=None):
        """The parameter named ``key``; if there is none, ``default`` set under that name first."""
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        """Remove every parameter."""
        for k in list(self._keys):
            del self[k]

    def copy(self):
        """A new ParameterDict holding the same parameters."""
        return ParameterDict(self.items())

    def fromkeys(self, keys, default=None):
        """A new ParameterDict with each of ``keys`` set to ``default``."""
        return ParameterDict((k, default) for k in keys)

    def update(self, parameters):
        """Add or replace from a mapping or an iterable of (key, parameter) pairs; a plain dict's items in sorted
        key order, an OrderedDict's, a ParameterDict's and the pairs' in theirs (as PyTorch)."""
        if isinstance(parameters, (OrderedDict, ParameterDict)):
            items = parameters.items()
        elif hasattr(parameters, "items"):
            items = sorted(parameters.items())
        else:
            items = parameters
        for pair in items:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"ParameterDict.update expects (key, parameter) pairs, got {pair!r}")
            self[pair[0]] = pair[1]

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter containing: [{type(v).__name__} of size {'x'.join(map(str, v.shape))}]"
                         if isinstance(v, Tensor) else f"({k}): Object of type: {type(v).__name__}"
                         for k, v in self.items())
