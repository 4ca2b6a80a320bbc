"""ag.save / ag.load without pickle: safe to load files from anyone.

A file is a NumPy .npz archive (a zip of uncompressed .npy arrays). Each tensor's data is stored as an
array under a generated key ("t0", "t1", ...); the array "__manifest__" holds UTF-8 JSON (as uint8
bytes) that names the format and version and describes the saved object as a tree of typed nodes:

    {"type": "dict", "items": [[key, node], ...]}   keys are str or int; order is kept
    {"type": "list" | "tuple", "items": [node, ...]}
    {"type": "tensor", "key": "t0", "dtype": "float32", "shape": [2, 3], "device": "cpu", "requires_grad": false}
    {"type": "int" | "bool" | "str", "value": ...}, {"type": "float", "value": "1.5" | "inf" | "nan"}, {"type": "none"}

A tensor referenced twice (tied weights) is stored once and loads as one tensor.

Saving writes a new temporary file beside the target and renames it over the target, so the target
always holds a complete file. Loading checks every size a file declares against the bytes it stores
before reading anything, so any file costs at most its own size in memory plus a bounded manifest, and
any damaged or hostile file raises ValueError. docs/reliability.md states the guarantees.

``load`` also reads safetensors files (ag.safetensors), recognised by their header rather than their name.
"""
import contextlib
import errno
import io
import json
import math
import os
import secrets
import stat
import zipfile
from typing import IO

from .tensor import Tensor
from . import safetensors as _safetensors
from .device import Device, device as _parse_device
from .backends import SCALAR_TYPES, get_backend

# The file format lives on the host: tensors reach it as host arrays via .numpy(), so it works in the
# CPU backend's namespace, including that library's .npy header parser (a literal, never code).
np = get_backend("cpu").xp
npy_format = np.lib.format

__all__ = ["save", "load"]

FORMAT = "autograd_gpu"
VERSION = 1
MANIFEST = "__manifest__"
# The one table of dtypes a file may hold: save refuses the others (float128, big-endian...), so
# whatever it writes loads.
_DTYPES = {name: np.dtype(name) for name in (
    "bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128")}
# NumPy's .npy header cannot name bfloat16 (ml_dtypes' dtype is a void type there): its bits are stored
# as uint16 and the manifest's dtype says what they are
_STORED = {name: np.dtype(np.uint16) if name == "bfloat16" else d for name, d in _DTYPES.items()}
MAX_DEPTH = 100                    # containers nested inside one another in a saved object
MAX_MANIFEST_BYTES = 4 << 20       # parsing JSON takes up to ~30x its size in memory: ~120 MB at worst
_MAX_JSON_DEPTH = 3 * MAX_DEPTH + 4   # a dict level is 3 JSON levels: node {, "items" [, [key, node]
_MAX_NDIM = 64                     # NumPy's limit


# --------------------------------------------------------------------------- save
def save(obj: object, path: str | os.PathLike[str] | IO[bytes]) -> None:
    """Write ``obj`` (a Tensor, or dicts/lists/tuples of Tensors, numbers, strings, bools and None) to
    ``path`` (a filename or a binary file object). A file name is replaced atomically: readers and a
    crash see the old file or the new one, never a mix."""
    if hasattr(path, "write"):
        _check_binary(path, "save", "wb")
    else:
        path = _file_name(path, "save")
    arrays = _encode_all(obj)          # every refusal happens by here, before any file is touched
    if isinstance(path, str):
        _replace(path, arrays)
    else:
        np.savez(path, **arrays)


def _encode_all(obj):
    """The arrays to write: the tensors' data and the manifest."""
    arrays, ids = {}, {}
    root = _encode(obj, "obj", arrays, ids, set())
    try:
        manifest = json.dumps({"format": FORMAT, "version": VERSION, "root": root}, allow_nan=False,
                              separators=(",", ":")).encode("utf-8")
    except ValueError as e:            # an int longer than Python's int<->str digit limit
        raise ValueError(f"save: cannot describe obj in JSON: {e}") from None
    if len(manifest) > MAX_MANIFEST_BYTES:
        raise ValueError(f"save: the description of obj (everything but tensor data) takes {len(manifest)} bytes, "
                         f"more than the {MAX_MANIFEST_BYTES} that ag.load accepts; store long lists of "
                         "numbers as tensors")
    arrays[MANIFEST] = np.frombuffer(manifest, dtype=np.uint8)
    return arrays


def _encode(x, where, arrays, ids, active):
    """The manifest node for x; tensors' host arrays go into ``arrays``."""
    if isinstance(x, Tensor):
        if str(x.dtype) not in _DTYPES:
            raise TypeError(f"save: {where}: cannot save a tensor of dtype {x.dtype}; expected one of "
                            f"{', '.join(_DTYPES)}")
        key = ids.get(id(x))
        if key is None:
            key = ids[id(x)] = f"t{len(ids)}"
            a = x.detach().numpy()
            arrays[key] = a if a.dtype is _STORED[str(x.dtype)] else a.view(_STORED[str(x.dtype)])
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
        if len(active) >= MAX_DEPTH:
            raise ValueError(f"save: {where} is nested more than {MAX_DEPTH} levels deep, which ag.load refuses")
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
                raise TypeError(f"save: {where}: cannot save a dict key of type {type(k).__name__} ({k!r:.80}); "
                                "keys must be str or int")
            items.append([k, _encode(v, f"{where}[{_short(k)}]", arrays, ids, active)])
        return {"type": "dict", "items": items}
    kind = "tuple" if isinstance(x, tuple) else "list"
    return {"type": kind, "items": [_encode(v, f"{where}[{i}]", arrays, ids, active) for i, v in enumerate(x)]}


def _short(key):
    """repr(key), cut short: error locations stay small however long the keys are."""
    text = repr(key)
    return text if len(text) <= 40 else text[:37] + "..."


def _replace(path, arrays):
    """Write a new temporary file beside the target, fsync it, rename it over the target, fsync the
    directory: concurrent readers and a power loss see the old file or the new one, never a mix."""
    target = os.path.realpath(path)    # a symlink is written through, as open() does; the link stays
    st = _existing(target, path)
    directory = os.path.dirname(target)
    fd, tmp = _create_temp(directory, path)
    try:
        with open(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            if st is not None:         # keep the old file's permissions; a new file got open()'s
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode))
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:              # KeyboardInterrupt too: never leave the temporary file behind
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_directory(directory)


def _existing(target, path):
    """os.stat of the file being replaced, or None when there is none."""
    try:
        st = os.stat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "save: is a directory", path)
    if not stat.S_ISREG(st.st_mode):   # renaming over /dev/null or a FIFO would replace it with a file
        raise ValueError(f"save: {path} is not a regular file (a pipe, socket or device); to write into a "
                         "stream, pass save an open binary file object")
    if not os.access(target, os.W_OK):
        raise PermissionError(errno.EACCES, "save: the file exists and is not writable", path)  # as open() would
    return st


def _create_temp(directory, path):
    """A new empty file in directory, created exclusively: an existing file or a planted symlink at the
    name is never opened, and a concurrent save never shares it. The name is short, so it fits beside
    a target whose name is near the 255-byte limit."""
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    base = os.path.basename(path)[:32]
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{_tag()}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp      # 0o666 less the umask, as open() creates files
        except FileExistsError:
            continue
        except OSError as e:           # name the user's path, not the temporary one
            raise type(e)(e.errno, f"save: cannot create a file in {directory!r}: {e.strerror}", path) from None
    raise FileExistsError(errno.EEXIST, f"save: no free temporary name in {directory!r}", path)


def _tag():
    return secrets.token_hex(6)


def _fsync_directory(directory):
    """Make the rename durable. Some file systems cannot fsync a directory; the rename then stands as
    the OS keeps it, and the data itself was already fsynced."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _file_name(path, op):
    """A path as str; bytes and file descriptors, which open() takes, are refused."""
    if isinstance(path, (str, os.PathLike)):
        name = os.fspath(path)
        if isinstance(name, str):
            return name
    raise TypeError(f"{op}: expected a file name (str or os.PathLike of str) or a binary file object, "
                    f"got {type(path).__name__}")


def _check_binary(f, op, mode):
    if isinstance(f, io.TextIOBase):
        raise TypeError(f"{op}: expected a binary file object, got the text-mode {type(f).__name__} "
                        f"{_name(f)}; open it with mode {mode!r}")


# --------------------------------------------------------------------------- load
def load(path, map_location=None):
    """Read what ``save`` wrote, or a safetensors file (its dict of str -> Tensor, as
    ag.safetensors.load_file gives). ``map_location``: None (each tensor's saved device), a device ("cpu",
    "cuda:1"), a dict from saved to new device names ({"cuda:0": "cpu"}), or a callable taking the saved
    device name and returning a device."""
    relocate = _relocation(map_location)
    if hasattr(path, "read"):
        _check_binary(path, "load", "rb")
        if callable(getattr(path, "seekable", None)) and not path.seekable():
            raise TypeError(f"load: expected a seekable binary file object, got a non-seekable "
                            f"{type(path).__name__} {_name(path)} (a pipe?); read it into io.BytesIO first")
        return _load_from(path, _name(path), relocate)
    name = _file_name(path, "load")
    with _open_regular(name) as f:     # OS errors (missing file, permissions) propagate unchanged
        return _load_from(f, name, relocate, path=name)


def _open_regular(name):
    """The file opened for reading; FIFOs and devices, whose reads may block or never end, are refused."""
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:                               # O_NONBLOCK: opening a FIFO must not wait for a writer (no effect on files)
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "load: is a directory", name)
        if not stat.S_ISREG(mode):
            raise ValueError(f"load: {name} is not a regular file (a pipe, socket or device); expected a file "
                             "written by ag.save")
        return open(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _load_from(f, name, relocate, path=None):
    start = f.tell()
    head = f.read(9)
    f.seek(start)
    if not isinstance(head, bytes):
        raise TypeError(f"load: expected a binary file object, got {type(f).__name__} whose read() returns "
                        f"{type(head).__name__}")
    if not head.startswith(b"PK"):
        size = f.seek(0, os.SEEK_END) - start
        f.seek(start)
        if _safetensors.is_safetensors(head, size):   # recognised by its header, whatever the file's name:
            dev = relocate("cpu")                      # its dict of tensors, "cpu" mapped by map_location
            return _safetensors.load_file(path, dev) if path is not None else _safetensors.load(f.read(), dev)
    if head.startswith(b"\x93NUMPY"):
        raise ValueError(f"load: {name} is a plain .npy array, not an autograd_gpu file written by ag.save")
    if not head.startswith(b"PK"):
        raise ValueError(f"load: {name} is not an autograd_gpu file: expected a .npz (zip) archive written by "
                         f"ag.save or a safetensors file, got a file starting with {head!r}")
    stream_end = f.seek(0, os.SEEK_END)
    end = _archive_end(f, start, stream_end)
    # a stream may hold several saves one after another (torch.load's contract): read the one that starts
    # here, through a window that ends with it (zipfile looks for the archive's directory from the end)
    view = f if start == 0 and end == stream_end else _Window(f, start, end)
    try:
        with _Archive(view, name) as archive:
            root = _read_manifest(archive, name)
            return _Decoder(archive, name, relocate).decode(root, "obj")
    finally:
        f.seek(end)                    # after this object: the next load reads the next one


_LOCAL, _CENTRAL, _END = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
_END64, _LOCATOR64 = b"PK\x06\x06", b"PK\x06\x07"


def _archive_end(f, start, stream_end):
    """Where the zip archive that starts at ``start`` ends: its records walked in order (members, central
    directory, end record). ``stream_end`` when the walk cannot tell (a member whose size follows its data,
    bytes that are no zip record): the whole rest of the stream is the archive then, as zipfile reads it."""
    pos = start
    while pos + 4 <= stream_end:
        f.seek(pos)
        head = f.read(46)
        sig = head[:4]
        if sig == _LOCAL and len(head) >= 30:
            flags, size, n, m = int.from_bytes(head[6:8], "little"), int.from_bytes(head[18:22], "little"), \
                int.from_bytes(head[26:28], "little"), int.from_bytes(head[28:30], "little")
            if flags & 8:              # the sizes follow the data: the walk cannot skip it
                return stream_end
            if size == 0xFFFFFFFF:     # ZIP64: the size is in the extra field (NumPy's savez writes these)
                f.seek(pos + 30 + n)
                size = _zip64_compressed_size(f.read(m), int.from_bytes(head[22:26], "little") == 0xFFFFFFFF)
                if size is None:
                    return stream_end
            pos += 30 + n + m + size
        elif sig == _CENTRAL and len(head) == 46:
            pos += 46 + sum(int.from_bytes(head[i:i + 2], "little") for i in (28, 30, 32))
        elif sig == _END64 and len(head) >= 12:
            pos += 12 + int.from_bytes(head[4:12], "little")
        elif sig == _LOCATOR64:
            pos += 20
        elif sig == _END and len(head) >= 22:
            return min(pos + 22 + int.from_bytes(head[20:22], "little"), stream_end)
        else:
            return stream_end
    return stream_end


def _zip64_compressed_size(extra, has_file_size):
    """The compressed size in a local header's ZIP64 extra field (after the uncompressed size when that
    is there too), or None."""
    while len(extra) >= 4:
        tag, n = int.from_bytes(extra[:2], "little"), int.from_bytes(extra[2:4], "little")
        if tag == 1:
            at = 4 + (8 if has_file_size else 0)
            return int.from_bytes(extra[at:at + 8], "little") if n >= at + 4 and len(extra) >= at + 8 else None
        extra = extra[4 + n:]
    return None


class _Window:
    """Bytes [start, end) of a seekable binary file, as a file of their own (what zipfile reads)."""

    def __init__(self, f, start, end):
        self.f, self.start, self.end, self.pos = f, start, end, 0

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=os.SEEK_SET):
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self.pos, os.SEEK_END: self.end - self.start}[whence]
        if base + offset < 0:
            raise ValueError(f"negative seek position {base + offset}")
        self.pos = base + offset
        return self.pos

    def read(self, n=-1):
        left = max(0, self.end - self.start - self.pos)
        n = left if n is None or n < 0 else min(n, left)
        self.f.seek(self.start + self.pos)
        data = self.f.read(n)
        self.pos += len(data)
        return data


def _name(path):
    if isinstance(path, (str, bytes, os.PathLike)):
        return os.fsdecode(path)
    return str(getattr(path, "name", f"<{type(path).__name__}>"))


class _Archive:
    """The zip members of a file, checked so that reading any of them costs no more than the bytes the
    file stores for it: members are uncompressed, their sizes add up to at most the file's size (so
    they cannot overlap to be read many times over), and an array's header must declare exactly the
    bytes that follow it."""

    def __init__(self, f, name):
        self.name = name
        with self.reading("the zip directory"):
            size = f.seek(0, os.SEEK_END)
            self.zip = zipfile.ZipFile(f)
            infos = self.zip.infolist()
        self.members = {info.filename: info for info in infos}
        if len(self.members) < len(infos):
            raise self.error("two zip members have one name")
        if sum(info.compress_size for info in infos) > size:
            raise self.error(f"its zip members claim more bytes than the file's {size}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.zip.close()

    def error(self, problem):
        return ValueError(f"load: {self.name}: {problem}; the file is damaged or was not written by ag.save")

    @contextlib.contextmanager
    def reading(self, what):
        """Turn however zipfile and NumPy fail on damaged bytes into a ValueError naming the file."""
        try:
            yield
        except Exception as e:         # MemoryError too: Python's parser reports a deeply nested header so
            raise self.error(f"cannot read {what} ({type(e).__name__}: {e})") from None

    def array(self, key, where, dtype, shape=None, max_bytes=None):
        """The array stored under key, checked to be dtype and shape (when shape is None: 1-D of at most
        max_bytes) before its data is read."""
        info = self.members.get(key + ".npy")
        if info is None:
            raise ValueError(f"load: {self.name}: the manifest refers to array {key!r} ({where}), which the "
                             "file does not contain; the file is damaged")
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:
            raise self.error(f"array {key!r} is compressed or encrypted, which ag.save never writes")
        if info.compress_size != info.file_size:
            raise self.error(f"array {key!r} is stored in {info.compress_size} bytes but declares {info.file_size}")
        with self.reading(f"the zip entry of array {key!r}"):
            member = self.zip.open(info)
        with member:
            with self.reading(f"the header of array {key!r}"):
                version = npy_format.read_magic(member)
                if version not in _HEADER_READERS:
                    raise ValueError(f".npy format version {version} is not one ag.save writes")
                got_shape, fortran_order, got_dtype = _HEADER_READERS[version](member)
                data_start = member.tell()
            if shape is None:
                shape_ok, expected = len(got_shape) == 1, f"expected 1-D {dtype}"
            else:
                shape_ok, expected = got_shape == shape, f"the manifest says {dtype} of shape {shape}"
            if got_dtype != dtype or not shape_ok:
                raise ValueError(f"load: {self.name}: array {key!r} ({where}) is {got_dtype} of shape "
                                 f"{got_shape}, but {expected}; the file is damaged")
            nbytes = math.prod(got_shape) * dtype.itemsize
            if max_bytes is not None and nbytes > max_bytes:
                raise self.error(f"array {key!r} ({where}) takes {nbytes} bytes, more than the {max_bytes} allowed")
            if data_start + nbytes != info.file_size:
                raise self.error(f"array {key!r} declares {nbytes} bytes of data, but "
                                 f"{info.file_size - data_start} follow its header")
            data = np.empty(nbytes, dtype=np.uint8)
            with self.reading(f"array {key!r}"):
                got = _read_into(member, data)     # reading to the end checks the zip CRC
            if got != nbytes:
                raise self.error(f"array {key!r} ends after {got} of its {nbytes} bytes")
        return data.view(dtype).reshape(got_shape, order="F" if fortran_order else "C")


_HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}


def _read_into(f, buffer, piece=16 << 20):
    """Fill buffer from f piece by piece, so a large array is never held twice; the bytes read."""
    view, filled = memoryview(buffer), 0
    while filled < len(view):
        data = f.read(min(piece, len(view) - filled))
        if not data:
            break
        view[filled:filled + len(data)] = data
        filled += len(data)
    return filled


def _read_manifest(archive, name):
    if MANIFEST + ".npy" not in archive.members:
        raise ValueError(f"load: {name} has no {MANIFEST} entry; it is a .npz file but not one written by ag.save")
    raw = archive.array(MANIFEST, "the manifest", np.dtype(np.uint8), max_bytes=MAX_MANIFEST_BYTES).tobytes()
    depth = _json_depth(raw)
    if depth > _MAX_JSON_DEPTH:
        raise ValueError(f"load: {name}: the manifest nests {depth} levels deep, more than the {_MAX_JSON_DEPTH} "
                         "that ag.save writes")
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ValueError(f"load: {name}: the manifest is not valid UTF-8 JSON ({type(e).__name__}: {e})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise ValueError(f"load: {name}: expected format {FORMAT!r}, got {got!r:.80}")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= VERSION:
        raise ValueError(f"load: {name}: format version {version!r:.80} is not supported (this library reads "
                         f"versions 1..{VERSION}); upgrade autograd_gpu")
    if "root" not in manifest:
        raise ValueError(f"load: {name}: the manifest has no 'root' entry")
    return manifest["root"]


def _json_depth(raw):
    """How deep [ and { nest in JSON text outside strings, found in linear time without recursion, so
    that json.loads (which recurses in C) never meets a deep file. Text after a JSON syntax error may be
    misread, but json.loads stops at that error anyway."""
    text = raw.replace(b"\\\\", b"").replace(b'\\"', b"")    # drop escapes: each quote left delimits a string
    b = np.frombuffer(text, dtype=np.uint8)
    outside = np.cumsum(b == ord('"'), dtype=np.uint8) % 2 == 0   # uint8 wraps at 256, keeping the parity
    step = (((b == ord("[")) | (b == ord("{"))) & outside).astype(np.int8)
    step -= ((b == ord("]")) | (b == ord("}"))) & outside
    return int(np.cumsum(step, dtype=np.int32).max(initial=0))


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
    """Rebuilds the saved object from manifest nodes, checking each node as it goes."""

    def __init__(self, archive, name, relocate):
        self.archive, self.name, self.relocate = archive, name, relocate
        self.tensors = {}              # key -> (its first node, the tensor)

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
        self.fail(where, f"unknown node type {kind!r:.80}")

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
        except (TypeError, ValueError, OverflowError):   # OverflowError: a huge int
            pass
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
            out[pair[0]] = self.decode(pair[1], f"{where}[{_short(pair[0])}]")
        return out

    def tensor(self, node, where):
        key = node.get("key")
        if not isinstance(key, str):
            self.fail(where, f"expected a tensor key string, got {key!r:.80}")
        if key not in self.tensors:
            self.tensors[key] = (node, self.new_tensor(node, key, where))
        first, t = self.tensors[key]
        if node != first:
            self.fail(where, f"tensor {key!r:.80} is described differently where it appears again")
        return t

    def new_tensor(self, node, key, where):
        dtype, shape, saved = node.get("dtype"), node.get("shape"), node.get("device")
        if not (isinstance(dtype, str) and dtype in _DTYPES and _is_shape(shape) and isinstance(saved, str)):
            self.fail(where, f"expected dtype, shape and device for tensor {key!r:.80}, got {node!r:.120}")
        requires_grad = node.get("requires_grad") is True
        if requires_grad and _DTYPES[dtype].kind not in "fc" and dtype != "bfloat16":
            self.fail(where, f"a {dtype} tensor cannot require gradients")
        dev = self.device(saved, where)
        a = self.archive.array(key, f"at {where}", _STORED[dtype], tuple(shape))
        if _STORED[dtype] is not _DTYPES[dtype]:
            a = a.view(_DTYPES[dtype])
        return Tensor._make(dev.backend.asarray(a), dev).requires_grad_(requires_grad)

    def device(self, saved, where):
        try:
            _parse_device(saved)       # even when map_location replaces it
            dev = self.relocate(saved)
        except (ValueError, TypeError) as e:
            raise ValueError(f"load: {self.name}: bad device {saved!r:.80} at {where} ({e})") from None
        try:
            dev.backend
        except RuntimeError as e:
            raise RuntimeError(f"load: {self.name}: cannot put {where} (saved on {saved}) on {dev}: {e}; "
                               "pass map_location='cpu' to load it onto the CPU") from None
        return dev


def _is_shape(shape):
    return (isinstance(shape, list) and len(shape) <= _MAX_NDIM
            and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape))
