"""MNIST: the IDX file reader and the downloader (mirrors tried in turn, MD5 verified).

Files live in ``root/MNIST/raw`` (torchvision's layout), gzipped as published or uncompressed.
Both halves are written for hostile input: the reader streams the file and checks its header before
reading the data, never reading more than the header declares plus one byte, and every damaged file is
a ValueError naming it; the downloader bounds the size of a download, fails over to the next mirror on
any network, protocol or checksum error, and renames a file into place only once it is verified.
"""
import gzip
import hashlib
import http.client
import math
import os
import secrets
import struct
import urllib.request
import zlib

import numpy as np   # host-only: IDX files are parsed on the host, then moved once to the device

from ...tensor import Tensor
from ...device import device as _parse_device, get_default_device
from ..dataset import Dataset, take_rows

__all__ = ["MNIST", "read_idx", "download_mnist"]

# IDX type codes (third byte of the magic number) -> big-endian NumPy dtype
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
# the largest array read_idx reads by default: 2.7x MNIST's largest file (47 MB), enough for EMNIST's
# letters and balanced sets; a tiny .gz can never make the reader hold more than this (the memory
# promise: no input file makes the reader use more than 200 MB)
MAX_IDX_BYTES = 128 << 20
MAX_DOWNLOAD_BYTES = 100 << 20     # MNIST's largest .gz is 9.9 MB
_CHUNK = 1 << 20
# what a damaged gzip stream raises while it is read (BadGzipFile is an OSError)
_GZIP_ERRORS = (OSError, EOFError, zlib.error, struct.error)
# what one mirror can raise: URLError, timeouts and ssl errors are OSErrors; IncompleteRead, BadStatusLine
# and RemoteDisconnected are HTTPExceptions; a bad URL, a bad size or checksum are ValueErrors
_MIRROR_ERRORS = (OSError, http.client.HTTPException, ValueError)


def read_idx(path, max_bytes=MAX_IDX_BYTES):
    """The array stored in an IDX file (gzipped or raw), in native byte order. ValueError naming the file
    when it is not a well-formed IDX file whose data is at most max_bytes long."""
    path = os.fspath(path)
    with open(path, "rb") as f:                      # a path that cannot be opened keeps its OSError
        gzipped = False
        try:
            gzipped = f.peek(2)[:2] == b"\x1f\x8b"   # gzip magic: decompress whatever the file is called
            if gzipped:
                with gzip.GzipFile(fileobj=f, mode="rb") as stream:
                    return _read_idx_stream(stream, path, max_bytes)
            return _read_idx_stream(f, path, max_bytes)
        except _GZIP_ERRORS as e:
            what = "is a damaged gzip file" if gzipped else "could not be read"
            raise ValueError(f"read_idx: {path} {what} ({type(e).__name__}: {e})") from None


def _read_exact(stream, n):
    """Up to n bytes from stream: fewer only at its end."""
    parts, got = [], 0
    while got < n:
        part = stream.read(min(n - got, _CHUNK))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _read_idx_stream(stream, path, max_bytes):
    magic = _read_exact(stream, 4)
    if not magic:
        raise ValueError(f"read_idx: {path} is not an IDX file: it is empty")
    if any(magic[:2]):
        raise ValueError(f"read_idx: {path} is not an IDX file: expected a magic number starting with two "
                         f"zero bytes, got {magic.hex()}")
    if len(magic) < 4:
        raise ValueError(f"read_idx: {path} is truncated: its header needs at least 4 bytes, the file has "
                         f"{len(magic)}")
    code, ndim = magic[2], magic[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"read_idx: {path} has unknown IDX type code 0x{code:02x}; expected one of "
                         + ", ".join(f"0x{c:02x}" for c in _IDX_DTYPES))
    if ndim == 0:
        raise ValueError(f"read_idx: {path} declares 0 dimensions; expected at least 1")
    header = 4 + 4 * ndim
    dims = _read_exact(stream, 4 * ndim)
    if len(dims) < 4 * ndim:
        raise ValueError(f"read_idx: {path} is truncated: its header needs {header} bytes, the file has "
                         f"{4 + len(dims)}")
    shape = tuple(int.from_bytes(dims[4 * i:4 * i + 4], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[code])
    nbytes = math.prod(shape) * dtype.itemsize       # Python ints: 255 dims of 2**32 - 1 cannot overflow
    if nbytes > max_bytes:
        raise ValueError(f"read_idx: {path} declares shape {shape} of {dtype.name}, {nbytes} bytes, more than "
                         f"the limit of {max_bytes}; pass max_bytes= to read larger files")
    # grow with what the stream really holds, so a header that lies costs nothing
    data = bytearray()
    while len(data) < nbytes:
        part = stream.read(min(nbytes - len(data), _CHUNK))
        if not part:
            raise ValueError(f"read_idx: {path} is truncated: shape {shape} of {dtype.name} needs {nbytes} "
                             f"bytes of data after the {header}-byte header, the file holds {len(data)}")
        data += part
    if stream.read(1):
        raise ValueError(f"read_idx: {path} has trailing data: shape {shape} of {dtype.name} needs {nbytes} "
                         f"bytes of data after the {header}-byte header, the file holds more")
    array = np.frombuffer(data, dtype=dtype)
    if not dtype.isnative:                           # swap in place: no second copy of the data
        array = array.byteswap(inplace=True).view(dtype.newbyteorder())
    try:
        return array.reshape(shape)
    except ValueError as e:                          # more dims than NumPy allows, or (0, 2**32 - 1, 2**32 - 1)
        raise ValueError(f"read_idx: {path} declares shape {shape}, which NumPy cannot hold ({e})") from None


def _md5(path):
    h = hashlib.md5()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _content_length(response):
    value = response.headers.get("Content-Length")
    if value is None:
        return None
    if not (value.strip().isascii() and value.strip().isdigit()):
        raise ValueError(f"bad Content-Length header {value!r}")
    return int(value)


def _fetch(url, dest, md5, timeout, max_bytes):
    """Download url into a temporary file next to dest, renamed to dest only once its size and MD5 check out;
    ValueError for a bad size or checksum."""
    tmp = f"{dest}.{os.getpid()}.{secrets.token_hex(4)}.part"    # same directory, so the rename is atomic
    try:
        with open(tmp, "xb") as f, urllib.request.urlopen(url, timeout=timeout) as response:
            declared = _content_length(response)
            if declared is not None and declared > max_bytes:
                raise ValueError(f"the server announces {declared} bytes, more than the limit of {max_bytes}")
            h, received = hashlib.md5(), 0
            while True:
                chunk = response.read(min(_CHUNK, max_bytes + 1 - received))
                if not chunk:
                    break
                received += len(chunk)
                if received > max_bytes:
                    raise ValueError(f"the download is longer than the limit of {max_bytes} bytes")
                h.update(chunk)
                f.write(chunk)
            # http.client's read(n) returns b"" when the connection closes early instead of raising
            if declared is not None and received != declared:
                raise ValueError(f"incomplete download: the connection closed after {received} of the "
                                 f"{declared} bytes announced")
            if h.hexdigest() != md5:
                raise ValueError(f"MD5 checksum mismatch: expected {md5}, got {h.hexdigest()}")
        os.replace(tmp, dest)                        # dest is absent, the old file, or the verified new one
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def download_mnist(raw_dir, resources, mirrors, timeout=30.0, max_bytes=MAX_DOWNLOAD_BYTES):
    """Put every (filename, md5) of ``resources`` in raw_dir, trying each mirror in turn; files already
    there with the right MD5 are kept. RuntimeError listing every mirror and its failure when a file cannot
    be had; ``timeout`` is per socket operation, ``max_bytes`` bounds each download."""
    os.makedirs(raw_dir, exist_ok=True)
    for name, md5 in resources:
        dest = os.path.join(raw_dir, name)
        if os.path.exists(dest) and _md5(dest) == md5:
            continue
        errors = []
        for mirror in mirrors:
            url = mirror.rstrip("/") + "/" + name
            try:
                _fetch(url, dest, md5, timeout, max_bytes)
                break
            except _MIRROR_ERRORS as e:
                detail = str(e).strip()          # BadStatusLine's text is the raw line, newline included
                errors.append(f"{url}: {type(e).__name__}" + (f": {detail}" if detail else ""))
        else:
            tried = "; ".join(errors) if errors else "no mirrors given"
            raise RuntimeError(f"MNIST: could not download {name} from any mirror ({tried}). If this machine is "
                               f"offline, copy the four MNIST files into {raw_dir} yourself and use download=False")


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
        images_path = self._find(f"{prefix}-images-idx3-ubyte")
        images = read_idx(images_path)
        labels_path = self._find(f"{prefix}-labels-idx1-ubyte")
        labels = read_idx(labels_path)
        self._check(images, images_path, labels, labels_path, prefix)
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

    @staticmethod
    def _check(images, images_path, labels, labels_path, prefix):
        if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
            raise ValueError(f"MNIST: expected {prefix} images of uint8 with shape (N, 28, 28) in {images_path}, "
                             f"got {images.dtype} with shape {images.shape}")
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
            raise ValueError(f"MNIST: expected {images.shape[0]} {prefix} labels to match the images, got shape "
                             f"{labels.shape} in {labels_path}")
        if labels.dtype.kind in "iu":
            bad = (labels < 0) | (labels > 9)
        else:                                   # float labels: whole numbers only; NaN fails every comparison
            bad = ~((labels >= 0) & (labels <= 9) & (labels == np.round(labels)))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"MNIST: expected {prefix} labels to be integers in 0..9, got {labels[i]!s} (label {i}; "
                             f"{int(bad.sum())} bad in all) in {labels_path}")

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
