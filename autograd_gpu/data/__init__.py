"""ag.data: Dataset, TensorDataset, DataLoader, default_collate, DistributedSampler, and the datasets
subpackage."""
from .dataset import Dataset, TensorDataset
from .dataloader import DataLoader, default_collate
from .sampler import DistributedSampler
from . import datasets

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate", "DistributedSampler", "datasets"]
