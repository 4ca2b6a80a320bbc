"""Subset, random_split and RandomSampler: a dataset's indices drawn from an ag.Generator (on the CPU) or the
CPU's global generator (``ag.manual_seed``), as PyTorch's."""
import math
import warnings
from typing import Any, Iterator, Optional, Sequence

from ..backends import get_backend
from ..creation import randperm, randint
from ..generator import Generator
from .dataset import Dataset

__all__ = ["Subset", "random_split", "RandomSampler"]


def _check_generator(generator, op):
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{op}: expected generator to be an ag.Generator or None, got {type(generator).__name__}")
    if generator is not None and generator.device.type != "cpu":
        raise ValueError(f"{op}: expected a CPU generator (the indices are drawn on the host), got one on "
                         f"{generator.device}")


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order: ``subset[i]`` is ``dataset[indices[i]]``."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return [self.dataset[self.indices[i]] for i in idx]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)

    def get_batch(self, index):
        """The underlying dataset's whole batch for these positions, where it can batch (see Dataset)."""
        get = getattr(self.dataset, "get_batch", None)
        if get is None:
            return None
        return get(get_backend("cpu").xp.asarray(self.indices, dtype="int64")[index])


def random_split(dataset: Any, lengths: Sequence[float], generator: Optional[Generator] = None) -> list:
    """Split ``dataset`` into non-overlapping Subsets of the given ``lengths`` (ints summing to
    ``len(dataset)``, or fractions summing to 1: each gets ``floor(frac * n)`` and the remainder goes one by
    one to the first subsets, as PyTorch's), from one random permutation drawn from ``generator`` (a CPU
    ag.Generator) or the CPU's global generator."""
    _check_generator(generator, "random_split")
    n = len(dataset)
    lengths = list(lengths)
    if lengths and math.isclose(sum(lengths), 1) and sum(lengths) <= 1:      # fractions (PyTorch's test)
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split: fraction at index {i} is not between 0 and 1, got {frac}")
        sizes = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"random_split: length of split at index {i} is 0; this results in an empty dataset",
                              stacklevel=2)
        lengths = sizes
    for v in lengths:
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ValueError(f"random_split: expected non-negative int lengths or fractions summing to 1, "
                             f"got {lengths!r}")
    if sum(lengths) != n:
        raise ValueError(f"random_split: sum of input lengths ({sum(lengths)}) does not equal the length of the "
                         f"input dataset ({n})")
    order = randperm(n, generator=generator).tolist()
    out, start = [], 0
    for length in lengths:
        stop = start + int(length)
        out.append(Subset(dataset, order[start:stop]))
        start = stop
    return out


class RandomSampler:
    """Indices of ``data_source`` in random order: without replacement a fresh permutation each pass
    (``num_samples`` beyond ``len(data_source)`` chains permutations), with replacement ``num_samples`` draws
    (``len(data_source)`` by default); from ``generator`` (a CPU ag.Generator) or the CPU's global generator.
    Pass it as a DataLoader's ``sampler=``."""

    def __init__(self, data_source: Any, replacement: bool = False, num_samples: Optional[int] = None,
                 generator: Optional[Generator] = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement should be a boolean value, but got "
                            f"replacement={replacement!r}")
        if num_samples is not None and (isinstance(num_samples, bool) or not isinstance(num_samples, int)
                                        or num_samples <= 0):
            raise ValueError(f"RandomSampler: num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples!r}")
        _check_generator(generator, "RandomSampler")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator

    @property
    def num_samples(self) -> int:
        """How many indices one pass yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __len__(self) -> int:
        return self.num_samples

    def __iter__(self) -> Iterator[int]:
        n, g = len(self.data_source), self.generator
        if self.replacement:
            if n == 0:
                raise ValueError("RandomSampler: cannot draw with replacement from an empty data source")
            yield from randint(0, n, (self.num_samples,), generator=g).tolist()
            return
        for _ in range(self.num_samples // n if n else 0):
            yield from randperm(n, generator=g).tolist()
        if n:
            yield from randperm(n, generator=g).tolist()[:self.num_samples % n]
