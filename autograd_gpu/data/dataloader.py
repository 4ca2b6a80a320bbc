"""DataLoader: batches of a dataset's samples, in order or shuffled with a seeded generator, made in the
main process or in worker processes (num_workers); default_collate stacks a list of samples into
batched Tensors."""
import itertools
from typing import Any, Callable, Iterator, Optional, Union

from ..backends import get_backend
from ..generator import Generator
from .collate import default_collate
from .dataset import IterableDataset
from ._fetch import make_fetcher, Exhausted
from ._pin import make_pinner
from ._multiprocess import MultiProcessIter, get_context

__all__ = ["DataLoader", "default_collate"]


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size`` samples.

    ``shuffle`` draws a new order every epoch from ``generator``: an ag.Generator (on the CPU), an int
    seed, a NumPy Generator (or anything with ``.permutation(n)``), or None for the CPU backend's generator, so that
    ``ag.manual_seed`` makes the order reproducible. ``collate_fn`` turns a list of samples into a
    batch (``default_collate`` when None). ``sampler`` (e.g. a DistributedSampler) gives the indices
    instead, in its order; it excludes ``shuffle``. Datasets with a ``get_batch`` method (TensorDataset, the
    built-in data sets) are batched with one gather per tensor instead of one call per sample. An
    IterableDataset is batched in the order its stream comes (no sampler, no shuffle).

    ``num_workers=N > 0`` makes the batches in N worker processes (``multiprocessing``; the start
    method is ``multiprocessing_context``: None for the platform's default, 'fork', 'spawn' or
    'forkserver'). They arrive in the same order and with the same contents as with
    ``num_workers=0``. Each epoch draws ``base_seed`` from ``generator`` (with or without workers, so
    the generator advances alike); worker k seeds Python's ``random`` and ag's generators with
    ``base_seed + k`` and NumPy's global generator from (k, base_seed), then calls
    ``worker_init_fn(k)``; ``ag.data.get_worker_info()`` tells the dataset which worker it runs in.
    ``prefetch_factor`` batches per worker are requested ahead (2 when None); ``persistent_workers``
    keeps the workers between epochs; ``timeout`` > 0 raises RuntimeError, naming the worker, when a
    batch takes longer than that many seconds. An exception in a worker is raised in the main process
    with the worker's traceback in its message, and the workers are shut down. ``pin_memory=True``
    puts CPU batches in page-locked host memory when CUDA is in use (a no-op otherwise).
    """

    def __init__(self, dataset: Any, batch_size: int = 1, shuffle: bool = False, drop_last: bool = False,
                 collate_fn: Optional[Callable[[list], Any]] = None, generator: Any = None, sampler: Any = None, *,
                 num_workers: int = 0, worker_init_fn: Optional[Callable[[int], None]] = None,
                 persistent_workers: bool = False, prefetch_factor: Optional[int] = None, pin_memory: bool = False,
                 timeout: Union[int, float] = 0, multiprocessing_context: Any = None) -> None:
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, "
                                 f"but got shuffle={shuffle!r}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, "
                                 f"but got sampler={sampler!r}")
        elif not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise TypeError(f"DataLoader: expected a dataset with __getitem__ and __len__ (or an IterableDataset), "
                            f"got {type(dataset).__name__}")
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
        _check_worker_options(num_workers, worker_init_fn, persistent_workers, prefetch_factor, timeout,
                              multiprocessing_context)
        self.sampler = sampler
        self.dataset = dataset
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.collate_fn = collate_fn
        self.generator = _make_generator(generator)
        self.num_workers = num_workers
        self.worker_init_fn = worker_init_fn
        self.persistent_workers = bool(persistent_workers)
        self.prefetch_factor = prefetch_factor
        self.pin_memory = bool(pin_memory)
        self.timeout = timeout
        self.multiprocessing_context = multiprocessing_context
        self._iterator: Optional[MultiProcessIter] = None     # the persistent workers' iterator

    def __len__(self) -> int:
        """Batches per epoch: the last, partial batch counts unless drop_last."""
        if self._iterable and not hasattr(self.dataset, "__len__"):
            raise TypeError(f"DataLoader: the length of a loader over an IterableDataset is unknown unless the "
                            f"dataset defines __len__ ({type(self.dataset).__name__} does not)")
        n, bs = len(self.dataset if self.sampler is None else self.sampler), self.batch_size
        return n // bs if self.drop_last else -(-n // bs)

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 0:
            return self._single_process()
        if not self.persistent_workers:
            return MultiProcessIter(self)
        it = self._iterator
        if it is None or it._shut:
            self._iterator = it = MultiProcessIter(self)
        else:
            it._reset(self)
        return it

    def _single_process(self):
        tasks, _ = self._epoch_plan()
        fetcher = make_fetcher(self.dataset, self._iterable, self.collate_fn, self.batch_size, self.drop_last)
        pin = self._pinner()
        for index in tasks:
            try:
                batch = fetcher.fetch(index)
            except Exhausted:
                return
            yield batch if pin is None else pin(batch)

    def _epoch_plan(self):
        """This epoch's batch indices (slices or host int64 arrays; Nones for an IterableDataset) and its
        base seed, in this order of draws from the generator."""
        if self._iterable:
            return itertools.repeat(None), self._base_seed()
        ds, bs = self.dataset, self.batch_size
        if self.sampler is not None:
            order = get_backend("cpu").xp.asarray(list(self.sampler), dtype="int64")
            n = len(order)
        else:
            n = len(ds)
            order = self._order(n) if self.shuffle else None
        stop = n - n % bs if self.drop_last else n
        tasks = [slice(start, min(start + bs, n)) if order is None else order[start:start + bs]
                 for start in range(0, stop, bs)]
        return tasks, self._base_seed()

    def _order(self, n):
        """A random permutation of range(n) as a host int64 array."""
        g = self.generator
        return get_backend("cpu").permutation(n) if g is None else g.permutation(n)

    def _base_seed(self):
        """A seed in [0, 2**63) from the loader's generator (the CPU backend's when it is None or cannot
        draw integers), drawn every epoch as PyTorch does."""
        g = self.generator
        if g is not None and hasattr(g, "integers"):
            return int(g.integers(0, 2 ** 63 - 1))
        if g is not None and hasattr(g, "randint"):            # a legacy numpy.random.RandomState
            return int(g.randint(0, 2 ** 63 - 1, dtype="int64"))
        return int(get_backend("cpu").randint(0, 2 ** 63 - 1, (), "int64"))

    def _pinner(self):
        return make_pinner() if self.pin_memory else None

    def _mp_context(self):
        return get_context(self.multiprocessing_context)


def _check_worker_options(num_workers, worker_init_fn, persistent_workers, prefetch_factor, timeout, mp_context):
    """The worker options' errors, in PyTorch's words."""
    if isinstance(num_workers, bool) or not isinstance(num_workers, int):
        raise TypeError(f"DataLoader: num_workers must be an int, got {type(num_workers).__name__}")
    if num_workers < 0:
        raise ValueError(f"DataLoader: num_workers option should be non-negative; use num_workers=0 to disable "
                         f"multiprocessing (got num_workers={num_workers})")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"DataLoader: timeout must be a number of seconds, got {type(timeout).__name__}")
    if timeout < 0:
        raise ValueError(f"DataLoader: timeout option should be non-negative (got timeout={timeout})")
    if worker_init_fn is not None and not callable(worker_init_fn):
        raise TypeError(f"DataLoader: worker_init_fn must be callable, got {type(worker_init_fn).__name__}")
    if prefetch_factor is not None:
        if num_workers == 0:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing. "
                             "Let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None "
                             f"(got prefetch_factor={prefetch_factor!r} with num_workers=0)")
        if isinstance(prefetch_factor, bool) or not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ValueError(f"DataLoader: prefetch_factor option should be a positive int, got {prefetch_factor!r}")
    if persistent_workers and num_workers == 0:
        raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
    if mp_context is not None:
        if num_workers == 0:
            raise ValueError(f"DataLoader: multiprocessing_context can only be used with multi-process loading "
                             f"(num_workers > 0), but got num_workers={num_workers}")
        get_context(mp_context)


def _make_generator(generator):
    if isinstance(generator, Generator):
        # PyTorch's loaders take a CPU generator; its NumPy generator draws the orders (and follows a later
        # manual_seed or set_state of the ag.Generator, which reseed it in place)
        if generator.device.type != "cpu":
            raise ValueError(f"DataLoader: expected a CPU generator (the orders are drawn on the host), "
                             f"got one on {generator.device}")
        return generator._rng
    if generator is None or hasattr(generator, "permutation"):
        return generator
    if isinstance(generator, int) and not isinstance(generator, bool):
        # a host-side generator for index permutations (the CPU backend's namespace is NumPy)
        return get_backend("cpu").xp.random.default_rng(generator)
    raise TypeError(f"DataLoader: generator must be an ag.Generator, an int seed, a NumPy Generator or None, "
                    f"got {type(generator).__name__}")
