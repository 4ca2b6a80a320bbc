"""DistributedSampler: each rank's share of a dataset's indices, as PyTorch's DistributedSampler.

Every rank draws the same permutation (seeded with seed + epoch), pads it by repeating from its start
to a multiple of num_replicas (or, with drop_last, cuts it down to one), and takes every
num_replicas-th index from position ``rank``: disjoint shards of equal length."""
from ..backends import get_backend

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """Indices of ``dataset`` for one rank; pass it as ``DataLoader(dataset, sampler=...)`` and call
    ``set_epoch(e)`` before each epoch for a new shuffle that all ranks agree on. ``num_replicas``
    and ``rank`` default to the process group's world size and rank."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False):
        if num_replicas is None or rank is None:
            from ..distributed import get_rank, get_world_size
            num_replicas = get_world_size() if num_replicas is None else num_replicas
            rank = get_rank() if rank is None else rank
        for name, v in (("num_replicas", num_replicas), ("rank", rank), ("seed", seed)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"DistributedSampler: {name} must be an int, got {type(v).__name__}")
        if num_replicas < 1:
            raise ValueError(f"DistributedSampler: num_replicas must be at least 1, got {num_replicas}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"DistributedSampler: rank must be in 0..{num_replicas - 1}, got {rank}")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.shuffle, self.seed, self.drop_last = bool(shuffle), seed, bool(drop_last)
        self.epoch = 0
        n = len(dataset)
        if self.drop_last and n % num_replicas:
            self.num_samples = max(-(-(n - num_replicas) // num_replicas), 0)   # ceil((n - R) / R)
        else:
            self.num_samples = -(-n // num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        """The epoch the next iteration shuffles for (the permutation's seed is seed + epoch)."""
        self.epoch = epoch

    def __len__(self):
        return self.num_samples

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            rng = get_backend("cpu").xp.random.default_rng(self.seed + self.epoch)
            indices = rng.permutation(n).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            pad = self.total_size - n
            if pad and indices:
                indices += (indices * -(-pad // len(indices)))[:pad]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])
