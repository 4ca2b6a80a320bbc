"""ag.data: Dataset, IterableDataset, TensorDataset, DataLoader (with worker processes: get_worker_info),
default_collate, DistributedSampler, Subset, random_split, RandomSampler, and the datasets subpackage."""
from .dataset import Dataset, IterableDataset, TensorDataset
from .dataloader import DataLoader, default_collate
from ._worker import get_worker_info, WorkerInfo
from .sampler import DistributedSampler
from .subsets import Subset, random_split, RandomSampler
from . import datasets

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "DataLoader", "default_collate", "get_worker_info",
           "WorkerInfo", "DistributedSampler", "Subset", "random_split", "RandomSampler", "datasets"]
