"""Fetchers: how one batch is made from the dataset, the same code in the main process (num_workers=0)
and in each worker process."""
from itertools import islice

from .collate import default_collate

__all__ = ["make_fetcher", "Exhausted"]


class Exhausted(Exception):
    """An IterableDataset's stream has ended (in this process)."""


def make_fetcher(dataset, iterable, collate_fn, batch_size, drop_last):
    if iterable:
        return _IterableFetcher(dataset, collate_fn, batch_size, drop_last)
    return _MapFetcher(dataset, collate_fn)


class _MapFetcher:
    """Batch ``index`` (a slice or a host int64 array of sample positions): one ``get_batch`` call where
    the dataset has a trusted one, else one ``__getitem__`` per sample and the collate function."""

    def __init__(self, dataset, collate_fn):
        self.dataset = dataset
        self.collate = collate_fn or default_collate
        self.fast = collate_fn is None and has_get_batch(dataset)

    def fetch(self, index):
        ds = self.dataset
        if self.fast:
            batch = ds.get_batch(index)
            if batch is not None:
                return batch
            self.fast = False                       # the dataset declined (e.g. it has a transform)
        positions = range(index.start, index.stop) if isinstance(index, slice) else index.tolist()
        return self.collate([ds[i] for i in positions])


class _IterableFetcher:
    """The next ``batch_size`` samples of the dataset's stream, collated; Exhausted at its end (and for a
    last partial batch under drop_last)."""

    def __init__(self, dataset, collate_fn, batch_size, drop_last):
        self.stream = iter(dataset)
        self.collate = collate_fn or default_collate
        self.batch_size, self.drop_last = batch_size, drop_last

    def fetch(self, index=None):
        samples = list(islice(self.stream, self.batch_size))
        if not samples or (self.drop_last and len(samples) < self.batch_size):
            raise Exhausted
        return self.collate(samples)


def _definer(cls, name):
    return next((k for k in cls.__mro__ if name in k.__dict__), None)


def has_get_batch(dataset):
    """Whether the dataset's get_batch can be trusted: defined at or below its __getitem__ in the MRO
    (a subclass that overrides __getitem__ alone must get one __getitem__ call per sample)."""
    cls = type(dataset)
    gb, gi = _definer(cls, "get_batch"), _definer(cls, "__getitem__")
    return gb is not None and gi is not None and cls.__mro__.index(gb) <= cls.__mro__.index(gi)
