"""ag.data: Dataset, TensorDataset, DataLoader, default_collate, and the datasets subpackage."""
from .dataset import Dataset, TensorDataset
from .dataloader import DataLoader, default_collate
from . import datasets

__all__ = ["Dataset", "TensorDataset", "DataLoader", "default_collate", "datasets"]
