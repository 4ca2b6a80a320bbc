"""ag.safetensors: read and write the safetensors format (Hugging Face's), through the ``safetensors``
package's NumPy API, so files move between this package, PyTorch, JAX and the Hub.

A file is a flat dict from names to tensors (no nesting, no Python objects) plus an optional dict of
str -> str metadata. Loading never runs code. bfloat16 ("BF16") is stored and loaded as ag.bfloat16.

    ag.safetensors.save_file({"weight": w, "bias": b}, "model.safetensors", metadata={"format": "pt"})
    model.load_state_dict(ag.safetensors.load_file("model.safetensors"))

``ag.load("model.safetensors")`` returns the same dict (it recognises the format by its header).
Install with ``pip install -e ".[safetensors]"`` in a checkout (or ``pip install safetensors``).
"""
import json
import os

from .tensor import Tensor as _Tensor     # (private: the API pages document Tensor once)
from .device import device as _parse_device
from .backends import get_backend

__all__ = ["save_file", "load_file", "save", "load", "load_metadata", "is_safetensors"]

# The file format lives on the host: tensors reach it as host arrays via .numpy(), once each
np = get_backend("cpu").xp

# safetensors' dtype names and the NumPy dtypes they hold (the format's list, less the 8-bit floats)
_DTYPES = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16", "I32": "int32",
           "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16", "BF16": "bfloat16",
           "F32": "float32", "F64": "float64", "C64": "complex64"}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}
_MAX_HEADER = 100 << 20            # the safetensors library's own limit on the JSON header


def _library():
    try:
        import safetensors
        import safetensors.numpy
    except ImportError:
        raise ImportError('ag.safetensors needs the safetensors package; install it with pip install -e '
                          '".[safetensors]" in a checkout of autograd_gpu, or pip install safetensors') from None
    return safetensors


# --------------------------------------------------------------------------- save
def _host_arrays(tensors, op):
    """name -> contiguous host array, each CUDA tensor copied to the host once; a clear error for
    anything that is not a flat dict of str -> Tensor."""
    if not isinstance(tensors, dict):
        raise TypeError(f"{op}: expected a dict of str -> Tensor, got {type(tensors).__name__}")
    arrays, seen = {}, {}
    for name, t in tensors.items():
        if not isinstance(name, str):
            raise TypeError(f"{op}: expected str names, got {type(name).__name__} {name!r:.80}")
        if not isinstance(t, _Tensor):
            raise TypeError(f"{op}: expected a Tensor for {name!r}, got {type(t).__name__}; safetensors files "
                            "hold tensors only (use ag.save for other objects)")
        if t.dtype not in _NAMES:
            raise TypeError(f"{op}: {name!r} has dtype {t.dtype}, which safetensors cannot store; expected one of "
                            f"{', '.join(sorted(str(d) for d in _NAMES))}")
        a = seen.get(id(t))            # a tensor under two names (tied weights) is copied once, stored twice
        if a is None:
            a = t.detach().numpy()
            a = seen[id(t)] = a if a.flags.c_contiguous else a.copy(order="C")   # (ascontiguousarray makes 0-d 1-d)
        arrays[name] = a
    return arrays


def _metadata(metadata, op):
    if metadata is None:
        return None
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in metadata.items()):
        raise TypeError(f"{op}: expected metadata as a dict of str -> str, got {metadata!r:.200}")
    return metadata


def save_file(tensors, filename, metadata=None):
    """Write ``tensors`` (a dict of str -> Tensor, on any device) and optional str -> str ``metadata``
    to ``filename`` in the safetensors format."""
    st = _library()
    arrays = _host_arrays(tensors, "save_file")
    filename = _filename(filename, "save_file")
    st.numpy.save_file(arrays, filename, metadata=_metadata(metadata, "save_file"))


def save(tensors, metadata=None):
    """The safetensors bytes of ``tensors`` (a dict of str -> Tensor) and optional str -> str metadata."""
    st = _library()
    return st.numpy.save(_host_arrays(tensors, "save"), metadata=_metadata(metadata, "save"))


# --------------------------------------------------------------------------- load
def load_file(filename, device="cpu"):
    """The tensors of a safetensors file as a dict of str -> Tensor on ``device``, sorted by name."""
    st = _library()
    filename = _filename(filename, "load_file")
    dev = _parse_device(device)
    _check_header(filename, "load_file")
    try:
        with st.safe_open(filename, framework="np") as f:
            out = {}
            for name in f.keys():
                out[name] = _tensor(f.get_tensor(name), dev)
            return out
    except st.SafetensorError as e:
        raise ValueError(f"load_file: {filename} is not a valid safetensors file: {e}") from None


def load(data, device="cpu"):
    """The tensors of safetensors ``data`` (bytes) as a dict of str -> Tensor on ``device``."""
    st = _library()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"load: expected the bytes of a safetensors file, got {type(data).__name__}; "
                        "for a file name use load_file")
    dev = _parse_device(device)
    try:
        items = st.deserialize(bytes(data))
    except st.SafetensorError as e:
        raise ValueError(f"load: the data are not a valid safetensors file: {e}") from None
    out = {}
    for name, v in sorted(items, key=lambda item: item[0]):     # by name, as load_file gives them
        kind = _DTYPES.get(v["dtype"])
        if kind is None:
            raise ValueError(f"load: tensor {name!r} has dtype {v['dtype']}, which ag.safetensors cannot load; "
                             f"expected one of {', '.join(_DTYPES)}")
        out[name] = _tensor(np.frombuffer(v["data"], dtype=kind).reshape(v["shape"]), dev)
    return out


def load_metadata(source):
    """The str -> str metadata of a safetensors file (a file name, or its bytes); {} when it has none."""
    st = _library()
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
        if not is_safetensors(data[:9], len(data)):
            raise ValueError(f"load_metadata: {_NOT_SAFETENSORS.format(what='the data', size=len(data), head=data[:9])}")
        meta = _json(data[8:8 + int.from_bytes(data[:8], "little")], "load_metadata").get("__metadata__")
        if meta is not None and not isinstance(meta, dict):
            raise ValueError("load_metadata: the data have a damaged safetensors header (__metadata__ is not an object)")
        return dict(meta or {})
    filename = _filename(source, "load_metadata")
    _check_header(filename, "load_metadata")
    try:
        with st.safe_open(filename, framework="np") as f:
            return dict(f.metadata() or {})
    except st.SafetensorError as e:
        raise ValueError(f"load_metadata: {filename} is not a valid safetensors file: {e}") from None


def _tensor(a, dev):
    """A Tensor owning a copy of host array a (the library's arrays may view its memory map)."""
    return _Tensor(a, device=dev)


# --------------------------------------------------------------------------- recognising the format
def is_safetensors(head, size):
    """Whether a file of ``size`` bytes starting with ``head`` (at least 9 bytes) is in the safetensors
    layout: a little-endian u64 header length that fits the file, then the header's JSON object."""
    if len(head) < 9:
        return False
    n = int.from_bytes(head[:8], "little")
    return 2 <= n <= min(size - 8, _MAX_HEADER) and head[8:9] == b"{"


_NOT_SAFETENSORS = ("{what} is not a safetensors file: expected an 8-byte little-endian header length that fits "
                    "its {size} bytes, then a JSON header, got {head!r}")


def _json(raw, op):
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"{op}: the data have a damaged safetensors header ({type(e).__name__}: {e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{op}: the data have a safetensors header that is not a JSON object")
    return header


def _check_header(filename, op):
    """A clear ValueError for a file that is not safetensors (the library's message names neither)."""
    with open(filename, "rb") as f:
        head = f.read(9)
        size = f.seek(0, os.SEEK_END)
    if not is_safetensors(head, size):
        raise ValueError(f"{op}: {_NOT_SAFETENSORS.format(what=filename, size=size, head=head)}")


def _filename(path, op):
    if isinstance(path, (str, os.PathLike)):
        name = os.fspath(path)
        if isinstance(name, str):
            return name
    raise TypeError(f"{op}: expected a file name (str or os.PathLike of str), got {type(path).__name__}")
