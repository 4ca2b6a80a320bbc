"""ag.save / ag.load without pickle: safe to load files from anyone.

A file is a NumPy .npz archive (a zip of .npy arrays). Each tensor's data is stored as an array
under a generated key ("t0", "t1", ...); the array "__manifest__" holds UTF-8 JSON (as uint8 bytes)
that names the format and version and describes the saved object as a tree of typed nodes:

    {"type": "dict", "items": [[key, node], ...]}   keys are str or int; order is kept
    {"type": "list" | "tuple", "items": [node, ...]}
    {"type": "tensor", "key": "t0", "dtype": "float32", "shape": [2, 3], "device": "cpu", "requires_grad": false}
    {"type": "int" | "bool" | "str", "value": ...}, {"type": "float", "value": "1.5" | "inf" | "nan"}, {"type": "none"}

A tensor referenced twice (tied weights) is stored once and loads as one tensor. Loading reads arrays
with allow_pickle=False and validates the manifest, so a damaged or foreign file raises ValueError.
"""
import json
import os

import numpy as np   # host-only file-format helper: tensors reach it as host NumPy arrays via .numpy()

from .tensor import Tensor
from .device import Device, device as _parse_device
from .backends import SCALAR_TYPES

__all__ = ["save", "load"]

FORMAT = "autograd_gpu"
VERSION = 1
MANIFEST = "__manifest__"
_DTYPES = frozenset(["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
                     "float16", "float32", "float64", "complex64", "complex128"])


# --------------------------------------------------------------------------- save
def save(obj, path):
    """Write ``obj`` (a Tensor, or dicts/lists/tuples of Tensors, numbers, strings, bools and None) to
    ``path`` (a filename or a binary file object)."""
    arrays, ids = {}, {}
    root = _encode(obj, "obj", arrays, ids, set())
    manifest = json.dumps({"format": FORMAT, "version": VERSION, "root": root}, allow_nan=False)
    arrays[MANIFEST] = np.frombuffer(manifest.encode("utf-8"), dtype=np.uint8)
    if hasattr(path, "write"):
        np.savez(path, **arrays)
        return
    path = os.fspath(path)
    tmp = path + ".tmp"                  # never leave a half-written file under the real name
    try:
        with open(tmp, "wb") as f:       # an open file, so np.savez does not append ".npz" to the name
            np.savez(f, **arrays)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _encode(x, where, arrays, ids, active):
    """The manifest node for x; tensors' host arrays go into ``arrays``."""
    if isinstance(x, Tensor):
        key = ids.get(id(x))
        if key is None:
            key = ids[id(x)] = f"t{len(ids)}"
            arrays[key] = x.detach().numpy()
        return {"type": "tensor", "key": key, "dtype": str(x.dtype), "shape": list(x.shape),
                "device": str(x.device), "requires_grad": bool(x.requires_grad)}
    if x is None:
        return {"type": "none"}
    if x.__class__ in SCALAR_TYPES and getattr(x, "ndim", 1) == 0:
        x = x.item()                     # NumPy scalars are saved as the Python number they hold
    if isinstance(x, bool):
        return {"type": "bool", "value": x}
    if isinstance(x, int):
        return {"type": "int", "value": int(x)}
    if isinstance(x, float):
        return {"type": "float", "value": repr(float(x))}   # repr round-trips exactly, inf and nan included
    if isinstance(x, str):
        return {"type": "str", "value": x}
    if isinstance(x, (dict, list, tuple)):
        if id(x) in active:
            raise ValueError(f"save: {where} contains itself; cannot save a cyclic structure")
        active.add(id(x))
        try:
            return _encode_container(x, where, arrays, ids, active)
        finally:
            active.discard(id(x))
    raise TypeError(f"save: {where}: cannot save an object of type {type(x).__name__}; expected Tensors, "
                    "numbers, strings, bools, None, or dicts/lists/tuples of them")


def _encode_container(x, where, arrays, ids, active):
    if isinstance(x, dict):
        items = []
        for k, v in x.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(f"save: {where}: cannot save a dict key of type {type(k).__name__} ({k!r}); "
                                "keys must be str or int")
            items.append([k, _encode(v, f"{where}[{k!r}]", arrays, ids, active)])
        return {"type": "dict", "items": items}
    kind = "tuple" if isinstance(x, tuple) else "list"
    return {"type": kind, "items": [_encode(v, f"{where}[{i}]", arrays, ids, active) for i, v in enumerate(x)]}


# --------------------------------------------------------------------------- load
def load(path, map_location=None):
    """Read what ``save`` wrote. ``map_location``: None (each tensor's saved device), a device ("cpu",
    "cuda:1"), a dict from saved to new device names ({"cuda:0": "cpu"}), or a callable taking the saved
    device name and returning a device."""
    relocate = _relocation(map_location)
    if hasattr(path, "read"):
        return _load_from(path, _name(path), relocate)
    with open(path, "rb") as f:          # OS errors (missing file, permissions) propagate unchanged
        return _load_from(f, _name(path), relocate)


def _load_from(f, name, relocate):
    start = f.tell()
    head = f.read(6)
    f.seek(start)
    if head.startswith(b"\x93NUMPY"):
        raise ValueError(f"load: {name} is a plain .npy array, not an autograd_gpu file written by ag.save")
    if not head.startswith(b"PK"):
        raise ValueError(f"load: {name} is not an autograd_gpu file: expected a .npz (zip) archive written by "
                         f"ag.save, got a file starting with {head!r}")
    try:
        archive = np.load(f, allow_pickle=False)
    except MemoryError:
        raise
    except Exception as e:     # zipfile and NumPy's header parser fail in many ways on damaged bytes
        raise ValueError(f"load: {name} is damaged or not an autograd_gpu file (cannot open it as the .npz "
                         f"archive ag.save writes: {type(e).__name__}: {e})") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"load: {name} is a plain .npy array, not an autograd_gpu file written by ag.save")
    with archive:
        root = _read_manifest(archive, name)
        return _Decoder(archive, name, relocate).decode(root, "obj")


def _name(path):
    if isinstance(path, (str, bytes, os.PathLike)):
        return os.fsdecode(path)
    return str(getattr(path, "name", f"<{type(path).__name__}>"))


def _read_manifest(archive, name):
    if MANIFEST not in archive.files:
        raise ValueError(f"load: {name} has no {MANIFEST} entry; it is a .npz file but not one written by ag.save")
    raw = _array(archive, MANIFEST, name)
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError(f"load: {name}: expected the manifest as a 1-D uint8 array, got {raw.dtype} of shape {raw.shape}")
    try:
        manifest = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ValueError(f"load: {name}: the manifest is not valid UTF-8 JSON ({type(e).__name__}: {e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise ValueError(f"load: {name}: expected format {FORMAT!r}, got {got!r}")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise ValueError(f"load: {name}: format version {version!r} is not supported (this library reads "
                         f"versions 1..{VERSION}); upgrade autograd_gpu")
    if "root" not in manifest:
        raise ValueError(f"load: {name}: the manifest has no 'root' entry")
    return manifest["root"]


def _array(archive, key, name):
    """archive[key], turning every way a damaged member fails into a ValueError naming the file."""
    try:
        return archive[key]
    except MemoryError:
        raise
    except Exception as e:     # a damaged member: bad zip data, a garbled .npy header, an odd compression
        raise ValueError(f"load: {name}: cannot read array {key!r} ({type(e).__name__}: {e}); the file is "
                         "damaged or was not written by ag.save") from None


def _relocation(map_location):
    """A function from a saved device name to the Device to load onto."""
    if map_location is None:
        return _parse_device
    if callable(map_location):
        return lambda saved: _parse_device(map_location(saved))
    if isinstance(map_location, dict):
        table = {str(_parse_device(k)): _parse_device(v) for k, v in map_location.items()}
        return lambda saved: table.get(str(_parse_device(saved)), _parse_device(saved))
    if isinstance(map_location, (str, Device)):
        target = _parse_device(map_location)
        return lambda saved: target
    raise TypeError(f"load: map_location must be None, a device, a dict or a callable, got {type(map_location).__name__}")


class _Decoder:
    """Rebuilds the saved object from manifest nodes, checking each node's shape as it goes."""

    def __init__(self, archive, name, relocate):
        self.archive, self.name, self.relocate = archive, name, relocate
        self.tensors = {}

    def fail(self, where, what):
        raise ValueError(f"load: {self.name}: malformed manifest at {where}: {what}")

    def decode(self, node, where):
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            self.fail(where, f"expected a node with a 'type', got {node!r:.80}")
        kind = node["type"]
        if kind == "none":
            return None
        if kind in ("bool", "int", "str"):
            return self.scalar(node, kind, where)
        if kind == "float":
            return self.float(node, where)
        if kind in ("list", "tuple"):
            items = self.items(node, where)
            out = [self.decode(v, f"{where}[{i}]") for i, v in enumerate(items)]
            return tuple(out) if kind == "tuple" else out
        if kind == "dict":
            return self.dict(node, where)
        if kind == "tensor":
            return self.tensor(node, where)
        self.fail(where, f"unknown node type {kind!r}")

    def scalar(self, node, kind, where):
        value = node.get("value")
        ok = {"bool": lambda v: isinstance(v, bool), "str": lambda v: isinstance(v, str),
              "int": lambda v: isinstance(v, int) and not isinstance(v, bool)}[kind]
        if not ok(value):
            self.fail(where, f"expected a {kind} value, got {value!r:.80}")
        return value

    def float(self, node, where):
        value = node.get("value")
        try:
            return float(value)
        except (TypeError, ValueError):
            self.fail(where, f"expected a float written as a string, got {value!r:.80}")

    def items(self, node, where):
        items = node.get("items")
        if not isinstance(items, list):
            self.fail(where, f"expected a list of items, got {items!r:.80}")
        return items

    def dict(self, node, where):
        out = {}
        for pair in self.items(node, where):
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], (str, int))
                    and not isinstance(pair[0], bool)):
                self.fail(where, f"expected [key, node] with a str or int key, got {pair!r:.80}")
            out[pair[0]] = self.decode(pair[1], f"{where}[{pair[0]!r}]")
        return out

    def tensor(self, node, where):
        key = node.get("key")
        if not isinstance(key, str):
            self.fail(where, f"expected a tensor key string, got {key!r:.80}")
        if key not in self.tensors:
            self.tensors[key] = self.new_tensor(node, key, where)
        return self.tensors[key]

    def new_tensor(self, node, key, where):
        dtype, shape, saved = node.get("dtype"), node.get("shape"), node.get("device")
        if dtype not in _DTYPES or not isinstance(shape, list) or not isinstance(saved, str):
            self.fail(where, f"expected dtype, shape and device for tensor {key!r}, got {node!r:.120}")
        if key not in self.archive.files:
            raise ValueError(f"load: {self.name}: the manifest refers to array {key!r} (at {where}), which the "
                             "file does not contain; the file is damaged")
        a = _array(self.archive, key, self.name)
        if str(a.dtype) != dtype or list(a.shape) != shape:
            raise ValueError(f"load: {self.name}: array {key!r} (at {where}) is {a.dtype} of shape {a.shape}, "
                             f"but the manifest says {dtype} of shape {tuple(shape)}; the file is damaged")
        dev = self.device(saved, where)
        t = Tensor._make(dev.backend.asarray(a), dev)
        if node.get("requires_grad") is True:
            t.requires_grad_(True)
        return t

    def device(self, saved, where):
        try:
            dev = self.relocate(saved)
        except (ValueError, TypeError) as e:
            raise ValueError(f"load: {self.name}: bad device {saved!r} at {where} ({e})") from None
        try:
            dev.backend
        except RuntimeError as e:
            raise RuntimeError(f"load: {self.name}: cannot put {where} (saved on {saved}) on {dev}: {e}; "
                               "pass map_location='cpu' to load it onto the CPU") from None
        return dev
