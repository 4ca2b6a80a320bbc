"""The 8x8 handwritten digits shipped with the package (digits.npz, 46 kB), so examples run offline.

Source: the UCI ML "Optical Recognition of Handwritten Digits" data set (E. Alpaydin, C. Kaynak, 1998;
https://archive.ics.uci.edu/dataset/80, licensed CC BY 4.0), the 1,797-image copy that scikit-learn ships
for load_digits. Pixels count "on" pixels in 4x4 blocks of a 32x32 bitmap: integers 0..16. The file
also fixes a train/test split (1,437 / 360 images); tools/make_digits.py regenerates it.
"""
import os

import numpy as np   # host-only: reads the shipped .npz (allow_pickle=False), then moves it to the device

from ...tensor import Tensor
from ...device import device as _parse_device, get_default_device
from ..dataset import Dataset, take_rows

__all__ = ["Digits", "load_digits", "DIGITS_PATH"]

DIGITS_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.npz")
_SPLITS = (None, "train", "test")


def _read(split):
    """(images uint8 (N, 8, 8), labels int64 (N,)) of one split (all 1,797 images for None)."""
    if split not in _SPLITS:
        raise ValueError(f"digits: expected split to be None, 'train' or 'test', got {split!r}")
    with np.load(DIGITS_PATH, allow_pickle=False) as f:
        images, labels, is_test = f["images"], f["labels"].astype(np.int64), f["is_test"]
    if split is not None:
        keep = is_test if split == "test" else ~is_test
        images, labels = images[keep], labels[keep]
    return images, labels


def _device(device):
    return _parse_device(device) if device is not None else get_default_device()


def load_digits(device=None, split=None, flatten=True):
    """(X, y): float32 images scaled to [0, 1], of shape (N, 64) (or (N, 8, 8) with flatten=False), and
    int64 labels 0..9; split None gives all 1,797, "train" 1,437, "test" 360."""
    images, labels = _read(split)
    x = images.astype(np.float32) / np.float32(16.0)
    x = x.reshape(len(x), 64) if flatten else x
    dev = _device(device)
    return Tensor._make(dev.backend.asarray(x), dev), Tensor._make(dev.backend.asarray(labels), dev)


class Digits(Dataset):
    """The shipped digits as a Dataset: ``data`` uint8 (N, 8, 8) with values 0..16, ``targets`` int64;
    sample i is (float32 image in [0, 1] of shape (1, 8, 8), or (64,) with flatten=True, or
    ``transform(image)``, 0-d int64 label). train=True: 1,437 images; False: 360."""

    def __init__(self, train=True, flatten=False, transform=None, device=None):
        if transform is not None and not callable(transform):
            raise TypeError(f"Digits: transform must be callable, got {type(transform).__name__}")
        images, labels = _read("train" if train else "test")
        dev = _device(device)
        self.train, self.flatten, self.transform = bool(train), bool(flatten), transform
        self.data = Tensor._make(dev.backend.asarray(images), dev)
        self.targets = Tensor._make(dev.backend.asarray(labels), dev)

    def __len__(self):
        return self.data.shape[0]

    def _images(self, x):
        """uint8 pixel counts (..., 8, 8) -> float32 in [0, 1], shaped (..., 1, 8, 8) or (..., 64)."""
        x = x.astype("float32") / 16.0
        lead = x.shape[:-2]
        return x.reshape(lead + ((64,) if self.flatten else (1, 8, 8)))

    def __getitem__(self, index):
        image = Tensor._make(self._images(self.data.data[index]), self.data.device)
        label = Tensor._make(self.targets.data[index], self.targets.device)
        return (image if self.transform is None else self.transform(image)), label

    def get_batch(self, index):
        """(images (B, 1, 8, 8) or (B, 64), labels (B,)) in one gather each."""
        if self.transform is not None:
            return None
        images = take_rows(self.data, index)
        return Tensor._make(self._images(images.data), images.device), take_rows(self.targets, index)
