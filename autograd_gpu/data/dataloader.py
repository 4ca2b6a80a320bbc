"""DataLoader: batches of a dataset's samples, in order or shuffled with a seeded generator, and
default_collate, which stacks a list of samples into batched Tensors."""
from collections.abc import Mapping

from ..tensor import Tensor
from ..backends import backend_of_array, get_backend
from ..creation import tensor as _tensor
from ..ops.shape import stack as _stack

__all__ = ["DataLoader", "default_collate"]


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` samples.

    ``shuffle`` draws a new order every epoch from ``generator``: an int seed, a NumPy Generator (or
    anything with ``.permutation(n)``), or None for the CPU backend's generator, so that
    ``ag.manual_seed`` makes the order reproducible. ``collate_fn`` turns a list of samples into a
    batch (``default_collate`` when None). ``sampler`` (e.g. a DistributedSampler) gives the indices
    instead, in its order; it excludes ``shuffle``. Datasets with a ``get_batch`` method (TensorDataset, the
    built-in data sets) are batched with one gather per tensor instead of one call per sample.
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, collate_fn=None,
                 generator=None, sampler=None):
        if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise TypeError(f"DataLoader: expected a dataset with __getitem__ and __len__, got {type(dataset).__name__}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"DataLoader: batch_size must be a positive int, got {batch_size!r}")
        if collate_fn is not None and not callable(collate_fn):
            raise TypeError(f"DataLoader: collate_fn must be callable, got {type(collate_fn).__name__}")
        if sampler is not None:
            if shuffle:
                raise ValueError("DataLoader: sampler and shuffle=True cannot be combined; the sampler decides "
                                 "the order (DistributedSampler shuffles itself)")
            if not (hasattr(sampler, "__iter__") and hasattr(sampler, "__len__")):
                raise TypeError(f"DataLoader: sampler must be iterable with a length, got {type(sampler).__name__}")
        self.sampler = sampler
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.generator = _make_generator(generator)

    def __len__(self):
        """Batches per epoch: the last, partial batch counts unless drop_last."""
        n, bs = len(self.dataset if self.sampler is None else self.sampler), self.batch_size
        return n // bs if self.drop_last else -(-n // bs)

    def __iter__(self):
        ds, bs = self.dataset, self.batch_size
        if self.sampler is not None:
            order = get_backend("cpu").xp.asarray(list(self.sampler), dtype="int64")
            n = len(order)
        else:
            n = len(ds)
            order = self._order(n) if self.shuffle else None
        stop = n - n % bs if self.drop_last else n
        fast = self.collate_fn is None and _has_get_batch(ds)
        collate = self.collate_fn or default_collate
        for start in range(0, stop, bs):
            end = min(start + bs, n)
            index = slice(start, end) if order is None else order[start:end]
            if fast:
                batch = ds.get_batch(index)
                if batch is not None:
                    yield batch
                    continue
                fast = False                        # the dataset declined (e.g. it has a transform)
            positions = range(start, end) if order is None else index.tolist()
            yield collate([ds[i] for i in positions])

    def _order(self, n):
        """A random permutation of range(n) as a host int64 array."""
        g = self.generator
        return get_backend("cpu").permutation(n) if g is None else g.permutation(n)


def _make_generator(generator):
    if generator is None or hasattr(generator, "permutation"):
        return generator
    if isinstance(generator, int) and not isinstance(generator, bool):
        # a host-side generator for index permutations (the CPU backend's namespace is NumPy)
        return get_backend("cpu").xp.random.default_rng(generator)
    raise TypeError(f"DataLoader: generator must be an int seed, a NumPy Generator or None, "
                    f"got {type(generator).__name__}")


def _definer(cls, name):
    return next((k for k in cls.__mro__ if name in k.__dict__), None)


def _has_get_batch(dataset):
    """Whether the dataset's get_batch can be trusted: defined at or below its __getitem__ in the MRO
    (a subclass that overrides __getitem__ alone must get one __getitem__ call per sample)."""
    cls = type(dataset)
    gb, gi = _definer(cls, "get_batch"), _definer(cls, "__getitem__")
    return gb is not None and gi is not None and cls.__mro__.index(gb) <= cls.__mro__.index(gi)


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
