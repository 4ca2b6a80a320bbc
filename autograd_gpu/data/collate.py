"""default_collate: a list of samples stacked into batched Tensors, field by field."""
from collections.abc import Mapping

from ..tensor import Tensor
from ..backends import backend_of_array
from ..creation import tensor as _tensor
from ..ops.shape import stack as _stack

__all__ = ["default_collate"]


def default_collate(batch):
    """Stack a list of samples into a batch: Tensors, NumPy/CuPy arrays and numbers become one Tensor
    with a new first dim (numbers on the default device); tuples, lists and dicts are collated
    field by field; strings and None stay a list."""
    if not isinstance(batch, (list, tuple)) or not batch:
        raise ValueError(f"default_collate: expected a non-empty list of samples, got {batch!r:.80}")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _collate_tensors(batch)
    if backend_of_array(elem) is not None:
        return _collate_arrays(batch)
    if isinstance(elem, (str, bytes)) or elem is None:
        return list(batch)
    if isinstance(elem, (bool, int, float)) or hasattr(elem, "dtype"):   # Python or NumPy scalars
        return _collate_numbers(batch)
    if isinstance(elem, Mapping):
        return _collate_mappings(batch)
    if isinstance(elem, (tuple, list)):
        return _collate_sequences(batch)
    raise TypeError(f"default_collate: cannot batch samples of type {type(elem).__name__}; expected Tensors, "
                    "arrays, numbers, strings or tuples/lists/dicts of them, or pass collate_fn= to the DataLoader")


def _check_same(batch, key, what):
    first = key(batch[0])
    for i, s in enumerate(batch):
        if key(s) != first:
            raise ValueError(f"default_collate: expected every sample to have the same {what}, got {first} "
                             f"for sample 0 and {key(s)} for sample {i}")


def _collate_tensors(batch):
    for i, t in enumerate(batch):
        if not isinstance(t, Tensor):
            raise TypeError(f"default_collate: sample 0 is a Tensor but sample {i} is a {type(t).__name__}")
    _check_same(batch, lambda t: t.device, "device")
    _check_same(batch, lambda t: tuple(t.shape), "shape")
    if any(t.requires_grad for t in batch):
        return _stack(list(batch))                 # keeps the graph
    dev = batch[0].device
    return Tensor._make(dev.backend.xp.stack([t.data for t in batch]), dev)


def _collate_arrays(batch):
    b = backend_of_array(batch[0])
    _check_same(batch, lambda a: backend_of_array(a) is b and getattr(a, "device", None), "array type and device")
    _check_same(batch, lambda a: tuple(a.shape), "shape")
    return Tensor._make(b.xp.stack(batch), b.device)


def _collate_numbers(batch):
    try:
        return _tensor(list(batch))
    except TypeError:
        kinds = sorted({type(x).__name__ for x in batch})
        raise TypeError(f"default_collate: cannot batch numbers of types {', '.join(kinds)}") from None


def _collate_mappings(batch):
    _check_same(batch, lambda d: sorted(map(str, d.keys())) if isinstance(d, Mapping) else type(d).__name__, "keys")
    return {k: default_collate([d[k] for d in batch]) for k in batch[0]}


def _collate_sequences(batch):
    _check_same(batch, lambda s: len(s) if isinstance(s, (tuple, list)) else type(s).__name__, "length")
    fields = [default_collate(list(f)) for f in zip(*batch)]
    elem = batch[0]
    if hasattr(elem, "_fields"):                   # namedtuple
        return type(elem)(*fields)
    return tuple(fields) if isinstance(elem, tuple) else fields
