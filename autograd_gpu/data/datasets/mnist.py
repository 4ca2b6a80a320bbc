"""MNIST: the IDX file reader and the downloader (mirrors tried in turn, MD5 verified).

Files live in ``root/MNIST/raw`` (torchvision's layout), gzipped as published or uncompressed.
"""
import gzip
import hashlib
import os
import shutil
import urllib.error
import urllib.request

import numpy as np   # host-only: IDX files are parsed on the host, then moved once to the device

from ...tensor import Tensor
from ...device import device as _parse_device, get_default_device
from ..dataset import Dataset, take_rows

__all__ = ["MNIST", "read_idx", "download_mnist"]

# IDX type codes (third byte of the magic number) -> big-endian NumPy dtype
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    """The array stored in an IDX file (gzipped or raw), in native byte order; ValueError naming the
    file when it is not a well-formed IDX file."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":                      # gzip magic: decompress whatever the file is called
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, ValueError) as e:
            raise ValueError(f"read_idx: {path} is a damaged gzip file ({e})") from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"read_idx: {path} is not an IDX file: expected a magic number starting with two "
                         f"zero bytes, got {raw[:4].hex() or 'an empty file'}")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"read_idx: {path} has unknown IDX type code 0x{code:02x}; expected one of "
                         + ", ".join(f"0x{c:02x}" for c in _IDX_DTYPES))
    if ndim == 0:
        raise ValueError(f"read_idx: {path} declares 0 dimensions; expected at least 1")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"read_idx: {path} is truncated: its header needs {header} bytes, the file has {len(raw)}")
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[code])
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(raw) != expected:
        state = "truncated" if len(raw) < expected else "longer than its header says"
        raise ValueError(f"read_idx: {path} is {state}: shape {shape} of {dtype.name} needs {expected} bytes, "
                         f"the file has {len(raw)}")
    return np.frombuffer(raw, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fetch(url, dest, md5, timeout):
    """Download url to dest through a temporary file; raise ValueError when the MD5 differs."""
    tmp = dest + ".part"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as f:
            shutil.copyfileobj(response, f)
        got = _md5(tmp)
        if got != md5:
            raise ValueError(f"MD5 checksum mismatch: expected {md5}, got {got}")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def download_mnist(raw_dir, resources, mirrors, timeout=30.0):
    """Put every (filename, md5) of ``resources`` in raw_dir, trying each mirror in turn; files already
    there with the right MD5 are kept. RuntimeError listing every failure when a file cannot be had."""
    os.makedirs(raw_dir, exist_ok=True)
    for name, md5 in resources:
        dest = os.path.join(raw_dir, name)
        if os.path.exists(dest) and _md5(dest) == md5:
            continue
        errors = []
        for mirror in mirrors:
            url = mirror.rstrip("/") + "/" + name
            try:
                _fetch(url, dest, md5, timeout)
                break
            except (urllib.error.URLError, OSError, ValueError) as e:
                errors.append(f"{url}: {e}")
        else:
            raise RuntimeError(f"MNIST: could not download {name} from any mirror ("
                               + "; ".join(errors) + "). If this machine is offline, copy the four MNIST files "
                               f"into {raw_dir} yourself and use download=False")


class MNIST(Dataset):
    """The MNIST handwritten digits: ``data`` is a uint8 Tensor (N, 28, 28), ``targets`` int64 (N,);
    sample i is (float32 image of shape (1, 28, 28) scaled to [0, 1], or ``transform(image)``,
    0-d int64 label), on ``device``. 60,000 training and 10,000 test images."""

    mirrors = ["https://ossci-datasets.s3.amazonaws.com/mnist/", "http://yann.lecun.com/exdb/mnist/"]
    resources = [("train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
                 ("train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432"),
                 ("t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3"),
                 ("t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c")]

    def __init__(self, root, train=True, download=False, transform=None, device=None):
        if transform is not None and not callable(transform):
            raise TypeError(f"MNIST: transform must be callable, got {type(transform).__name__}")
        self.root = os.fspath(root)
        self.train = bool(train)
        self.transform = transform
        self.raw_dir = os.path.join(self.root, "MNIST", "raw")
        if download:
            download_mnist(self.raw_dir, self.resources, self.mirrors)
        prefix = "train" if self.train else "t10k"
        images = read_idx(self._find(f"{prefix}-images-idx3-ubyte"))
        labels = read_idx(self._find(f"{prefix}-labels-idx1-ubyte"))
        self._check(images, labels, prefix)
        dev = _parse_device(device) if device is not None else get_default_device()
        self.data = Tensor._make(dev.backend.asarray(images), dev)
        self.targets = Tensor._make(dev.backend.asarray(labels.astype(np.int64)), dev)

    def _find(self, stem):
        for name in (stem + ".gz", stem):
            path = os.path.join(self.raw_dir, name)
            if os.path.exists(path):
                return path
        raise RuntimeError(f"MNIST: {stem}[.gz] not found in {self.raw_dir}; pass download=True to fetch it, "
                           "or copy the MNIST files there")

    def _check(self, images, labels, prefix):
        if images.ndim != 3 or images.dtype != np.uint8:
            raise ValueError(f"MNIST: expected {prefix} images of uint8 with shape (N, rows, cols), got "
                             f"{images.dtype} with shape {images.shape}")
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
            raise ValueError(f"MNIST: expected {images.shape[0]} {prefix} labels to match the images, got "
                             f"shape {labels.shape}")
        if labels.size and labels.max() > 9:
            raise ValueError(f"MNIST: expected {prefix} labels in 0..9, got {int(labels.max())}")

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, index):
        x = self.data.data[index]
        image = Tensor._make((x.astype("float32") / 255.0).reshape((1,) + x.shape), self.data.device)
        label = Tensor._make(self.targets.data[index], self.targets.device)
        return (image if self.transform is None else self.transform(image)), label

    def get_batch(self, index):
        """(images (B, 1, 28, 28) float32 in [0, 1], labels (B,) int64) in one gather each."""
        if self.transform is not None:
            return None
        images = take_rows(self.data, index)
        x = images.data.astype("float32") / 255.0
        return Tensor._make(x.reshape((x.shape[0], 1) + x.shape[1:]), images.device), take_rows(self.targets, index)
