"""Dataset (the indexable-collection protocol), IterableDataset (a stream of samples) and TensorDataset
(samples are rows of tensors)."""
from ..tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset"]


class Dataset:
    """A collection of samples: subclasses define ``__getitem__(i)`` and ``__len__()``.

    A subclass may also define ``get_batch(index)``: the whole collated batch for ``index`` (a slice,
    or a host int64 array of sample positions), or None when it cannot batch (then the DataLoader
    falls back to one ``__getitem__`` per sample and ``default_collate``).
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} must define __getitem__(index)")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __len__()")


class IterableDataset:
    """A stream of samples: subclasses define ``__iter__()``. The DataLoader batches the stream in
    the order it comes (no sampler, no shuffle). With ``num_workers=N`` every worker process iterates
    its own copy of the dataset, so a dataset that does not split itself yields each sample N times:
    shard it in ``__iter__`` with ``ag.data.get_worker_info()`` (its ``id`` and ``num_workers``; None
    in the main process), e.g. ``itertools.islice(stream, info.id, None, info.num_workers)``.
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__()")


class TensorDataset(Dataset):
    """Sample i is ``tuple(t[i] for t in tensors)``; all tensors share their first dim."""

    def __init__(self, *tensors):
        if not tensors:
            raise ValueError("TensorDataset: expected at least one tensor, got none")
        for k, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: expected Tensors, got {type(t).__name__} at position {k}")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset: tensor {k} is 0-d; every tensor needs a first (sample) dim")
        sizes = [t.shape[0] for t in tensors]
        if len(set(sizes)) > 1:
            shapes = ", ".join(str(t.shape) for t in tensors)
            raise ValueError(f"TensorDataset: expected tensors with the same first dim (the number of samples), "
                             f"got shapes {shapes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]

    def get_batch(self, index):
        """The rows ``index`` of every tensor, one gather per tensor (a copy, never a view)."""
        return tuple(take_rows(t, index) for t in self.tensors)


def take_rows(t, index):
    """Rows ``index`` (a slice or a host int64 array) of tensor t as a new tensor on t's device."""
    if isinstance(index, slice):
        if t.requires_grad:
            return t[index]
        return Tensor._make(t.data[index].copy(), t.device)
    idx = t.device.backend.asarray(index)           # one small host-to-device copy on a GPU
    if t.requires_grad:
        return t[Tensor._make(idx, t.device)]      # differentiable gather
    return Tensor._make(t.data[idx], t.device)
