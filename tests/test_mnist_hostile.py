"""MNIST on hostile input: damaged, lying and bomb IDX files only ever make the reader raise a ValueError
naming the file, within a memory cap; the downloader fails over across mirrors that break in every way a
network can, and gives up with a RuntimeError listing each mirror and its failure.

Every reader call on a hostile file runs in one child process whose address space is capped
(RLIMIT_AS, Linux only); the network tests serve from a local HTTP server on 127.0.0.1 only."""
import functools
import gzip
import hashlib
import http.server
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import autograd_gpu as ag
from autograd_gpu.data.datasets import MNIST
from autograd_gpu.data.datasets import mnist as mnist_module

BUDGET = 200 << 20                 # what the reading child may add to its address space (the promise)
MiB = 1 << 20
BOMB_BYTES = 2 << 30               # what the gzip bombs expand to: 10x the budget
REPO = os.path.dirname(os.path.dirname(os.path.abspath(ag.__file__)))
FUZZ_EXAMPLES = int(os.environ.get("AG_MNIST_FUZZ_EXAMPLES", "300"))


# --------------------------------------------------------------------------- building files
def idx(array, code=0x08):
    """The IDX bytes of array: magic (0, 0, type code, ndim), big-endian uint32 dims, big-endian data."""
    return header(code, array.shape) + array.astype(array.dtype.newbyteorder(">")).tobytes()


def header(code, shape):
    return bytes([0, 0, code, len(shape)]) + b"".join(int(s).to_bytes(4, "big") for s in shape)


def gz(data):
    return gzip.compress(data, mtime=0)


VALID = idx(np.arange(60, dtype=np.uint8).reshape(3, 4, 5))
GZ = gz(VALID)


def with_byte(data, position, value):
    data = bytearray(data)
    data[position] = value
    return bytes(data)


@functools.lru_cache(maxsize=None)
def _zeros_member_parts():
    """(gzip header + deflate body, trailer) of one gzip member holding BOMB_BYTES zeros. Zeros are compressed
    one MiB at a time, ending with a full flush so the compressed MiB stands alone and can simply be repeated:
    never more than a MiB of zeros in memory."""
    zeros = bytes(MiB)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(zeros) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(BOMB_BYTES // MiB):
        crc = zlib.crc32(zeros, crc)
    head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = crc.to_bytes(4, "little") + (BOMB_BYTES % 2**32).to_bytes(4, "little")
    return head, block, deflate.flush(zlib.Z_FINISH) + trailer


def write_bomb(path, prefix):
    """A gzip file (about 2 MB) expanding to prefix followed by 2 GiB of zeros: a member holding prefix, then
    the member of zeros (concatenated members are one gzip stream, as `gzip -d` reads them)."""
    head, block, tail = _zeros_member_parts()
    with open(path, "wb") as f:
        f.write(gz(prefix))
        f.write(head)
        for _ in range(BOMB_BYTES // MiB):
            f.write(block)
        f.write(tail)


def write_sparse(path, prefix, size=BOMB_BYTES):
    """A raw file of `size` bytes (sparse: it takes no disk space) starting with prefix, zeros after."""
    with open(path, "wb") as f:
        f.write(prefix)
        f.truncate(size)


# --------------------------------------------------------------------------- the capped child
_WORKER = r"""
import json, resource, sys
from autograd_gpu.data.datasets import MNIST, read_idx

def peak_kb():
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith("VmPeak:")).split()[1])

with open("/proc/self/status") as f:
    size_kb = int(next(line for line in f if line.startswith("VmSize:")).split()[1])
cap = size_kb * 1024 + int(sys.argv[1])        # what it has after its imports, plus the budget
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
print(json.dumps({"peak_kb": peak_kb()}), flush=True)
for line in sys.stdin:
    call = json.loads(line)
    try:
        if call["fn"] == "read_idx":
            a = read_idx(call["path"], **call["kwargs"])
            out = {"raised": None, "shape": list(a.shape), "dtype": str(a.dtype)}
        else:
            out = {"raised": None, "len": len(MNIST(call["root"], train=False))}
    except BaseException as e:
        out = {"raised": type(e).__name__, "message": str(e)}
    out["peak_kb"] = peak_kb()
    print(json.dumps(out), flush=True)
"""


class CappedReader:
    """One child Python process, its address space capped at its size after imports + BUDGET, that runs read_idx or MNIST on request and
    answers with what it returned or raised and its peak size; one child for the module keeps start-up cheap."""

    def __init__(self, log_path):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
                   OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", _WORKER, str(BUDGET)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.baseline = self._answer()["peak_kb"] * 1024

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _answer(self):
        try:
            line = self.lines.get(timeout=60)
        except queue.Empty:
            self.proc.kill()
            pytest.fail("the capped reader hung for 60 s")
        if line is None:
            with open(self.log_path) as log:
                pytest.fail(f"the capped reader died with exit code {self.proc.wait()}: {log.read()[-2000:]}")
        return json.loads(line)

    def call(self, **call):
        self.proc.stdin.write(json.dumps(call) + "\n")
        self.proc.stdin.flush()
        answer = self._answer()
        assert answer["peak_kb"] * 1024 - self.baseline < BUDGET, answer
        return answer

    def read_idx(self, path, **kwargs):
        return self.call(fn="read_idx", path=os.fspath(path), kwargs=kwargs)

    def mnist(self, root):
        return self.call(fn="mnist", root=os.fspath(root))

    def close(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    if not sys.platform.startswith("linux"):
        pytest.skip("the memory cap (RLIMIT_AS, /proc/self/status) is Linux-only")
    reader = CappedReader(tmp_path_factory.mktemp("capped") / "stderr.txt")
    yield reader
    reader.close()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return tmp_path_factory.mktemp("hostile")


def assert_value_error(answer, path, match):
    assert answer["raised"] == "ValueError", answer
    assert os.fspath(path) in answer["message"], answer["message"]          # names the file
    assert re.search(match, answer["message"]), answer["message"]


def test_the_child_is_capped_and_the_cap_bites_above_the_budget(capped, files):
    path = files / "declares_250_mib.idx"
    write_sparse(path, header(0x08, (250 * MiB,)))      # a real (sparse) 2 GiB file: reading it needs 250 MiB
    assert capped.read_idx(path, max_bytes=256 * MiB)["raised"] == "MemoryError"
    path = files / "declares_the_default_limit.idx"     # the default limit fits in the budget
    write_sparse(path, header(0x08, (mnist_module.MAX_IDX_BYTES,)))
    assert capped.read_idx(path)["raised"] == "ValueError"   # trailing data, after reading all of it


# --------------------------------------------------------------------------- read_idx: hostile files
NOT_IDX = "is not an IDX file"
DAMAGED = r"is a damaged gzip file \(\w+: "
TRUNCATED_DATA = r"is truncated: shape \(3, 4, 5\) of uint8 needs 60 bytes"
HUGE = (2**32 - 1,) * 3
LIMIT = mnist_module.MAX_IDX_BYTES

HOSTILE = [   # (id, file bytes, what the ValueError says)
    ("empty", b"", "is not an IDX file: it is empty"),
    ("one_byte", b"\0", "is truncated: its header needs at least 4 bytes, the file has 1"),
    ("three_bytes", b"\0\0\x08", "is truncated: its header needs at least 4 bytes, the file has 3"),
    ("png", b"\x89PNG\r\n\x1a\n" + bytes(100), NOT_IDX + r".*got 89504e47"),
    ("nonzero_magic", b"\0\x01" + VALID[2:], NOT_IDX),
    ("html_in_gzip", gz(b"<html>404 Not Found</html>"), NOT_IDX),
    ("gzip_in_gzip", gz(GZ), NOT_IDX + ".*got 1f8b"),
    ("unknown_type_code", with_byte(VALID, 2, 0x07), "unknown IDX type code 0x07"),
    ("zero_dims", header(0x08, ()), "declares 0 dimensions"),
    ("dims_cut", VALID[:10], "is truncated: its header needs 16 bytes, the file has 10"),
    ("dims_cut_gzip", gz(VALID[:10]), "is truncated: its header needs 16 bytes, the file has 10"),
    ("huge_dims", header(0x08, HUGE), r"declares shape \(4294967295, 4294967295, 4294967295\) of uint8, "
                                      r"\d+ bytes, more than the limit"),
    ("huge_dims_gzip", gz(header(0x08, HUGE) + bytes(1000)), "more than the limit"),
    ("255_dims_of_float64", header(0x0E, (2**32 - 1,) * 255), r"of float64, \d{2400,} bytes, more than the limit"),
    ("one_byte_over_the_limit", header(0x08, (LIMIT + 1,)), f"{LIMIT + 1} bytes, more than the limit of {LIMIT}"),
    ("zero_sized_but_unrepresentable", header(0x08, (0,) + HUGE[1:]), "which NumPy cannot hold"),
    ("too_many_dims_for_numpy", header(0x08, (1,) * 255) + b"x", "which NumPy cannot hold"),
    ("data_cut", VALID[:-1], TRUNCATED_DATA + ".*the file holds 59"),
    ("data_cut_gzip", gz(VALID[:-1]), TRUNCATED_DATA + ".*the file holds 59"),
    ("declares_60000_images_holds_1", header(0x08, (60000, 28, 28)) + bytes(784), "is truncated"),
    ("trailing_byte", VALID + b"\0", r"has trailing data: shape \(3, 4, 5\)"),
    ("trailing_byte_gzip", gz(VALID + b"x"), "has trailing data"),
    ("trailing_gzip_member", GZ + gz(b"\0"), "has trailing data"),
    ("int32_data_cut", idx(np.arange(6, dtype=np.int32), 0x0C)[:-2], r"shape \(6,\) of int32 needs 24 bytes"),
    ("gzip_magic_only", b"\x1f\x8b", DAMAGED),
    ("gzip_header_cut", GZ[:7], DAMAGED),
    ("gzip_body_cut", GZ[:len(GZ) // 2], DAMAGED),
    ("gzip_trailer_missing", GZ[:-8], DAMAGED),
    ("gzip_trailer_cut", GZ[:-3], DAMAGED),
    ("gzip_bad_crc", with_byte(GZ, -8, GZ[-8] ^ 1), DAMAGED + "CRC check failed"),
    ("gzip_bad_length", with_byte(GZ, -4, GZ[-4] ^ 1), DAMAGED + "Incorrect length"),
    ("gzip_corrupt_data", with_byte(GZ, len(GZ) // 2, GZ[len(GZ) // 2] ^ 0xFF), DAMAGED + "CRC check failed"),
    ("gzip_corrupt_deflate", with_byte(GZ, 12, GZ[12] ^ 0xFF), DAMAGED + "Error -3 while decompressing"),
    ("gzip_unknown_method", with_byte(GZ, 2, 7), DAMAGED + "Unknown compression method"),
    ("gzip_trailing_garbage", GZ + b"garbage!", DAMAGED + "Not a gzipped file"),
    ("gzip_name_never_ends", b"\x1f\x8b\x08\x08" + bytes(6) + b"name-without-its-zero-byte", DAMAGED),
    ("gzip_extra_field_cut", b"\x1f\x8b\x08\x04" + bytes(6) + b"\xff\xff" + bytes(10), DAMAGED),
]


@pytest.mark.parametrize("name,data,match", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_hostile_file_is_a_value_error_naming_it(capped, files, name, data, match):
    path = files / name
    path.write_bytes(data)
    assert_value_error(capped.read_idx(path), path, match)


BOMBS = [   # (id, write(path), read_idx keywords, what the ValueError says)
    ("gzip_bomb_after_10_images", lambda p: write_bomb(p, header(0x08, (10, 28, 28))), {}, "has trailing data"),
    ("gzip_bomb_without_header", lambda p: write_bomb(p, b""), {}, "unknown IDX type code 0x00"),
    ("gzip_bomb_declaring_2_gib", lambda p: write_bomb(p, header(0x08, (2**31,))), {}, "more than the limit"),
    ("gzip_bomb_at_the_limit", lambda p: write_bomb(p, header(0x08, (64 * MiB,))), {"max_bytes": 64 * MiB},
     "has trailing data"),
    ("sparse_2_gib_after_10_images", lambda p: write_sparse(p, header(0x08, (10, 28, 28))), {}, "has trailing data"),
    ("sparse_2_gib_at_the_limit", lambda p: write_sparse(p, header(0x08, (64 * MiB,))), {"max_bytes": 64 * MiB},
     "has trailing data"),
    # declares the whole default limit, holds one byte: the reader must not reserve what the header claims
    ("declares_the_limit_holds_a_byte", lambda p: p.write_bytes(header(0x08, (LIMIT,)) + b"x"), {},
     f"is truncated: shape \\({LIMIT},\\) of uint8 needs {LIMIT} bytes.*holds 1$"),
]


@pytest.mark.parametrize("name,write,kwargs,match", BOMBS, ids=[case[0] for case in BOMBS])
def test_bombs_are_refused_within_the_memory_cap(capped, files, name, write, kwargs, match):
    path = files / name
    write(path)
    assert_value_error(capped.read_idx(path, **kwargs), path, match)


def test_gzip_bomb_is_a_valid_gzip_stream_of_2_gib(files):
    path = files / "bomb.gz"
    write_bomb(path, b"prefix")
    assert path.stat().st_size < 3 * MiB
    with gzip.open(path) as f:
        assert f.read(6) == b"prefix" and f.read(3 * MiB) == bytes(3 * MiB)
    head, block, tail = _zeros_member_parts()
    assert len(zlib.decompressobj(-15).decompress(block * 2 + tail[:-8])) == 2 * MiB


@pytest.mark.parametrize("name,data,shape", [
    ("valid_raw", VALID, [3, 4, 5]),
    ("valid_gzip", GZ, [3, 4, 5]),
    ("valid_empty", header(0x08, (0, 28, 28)), [0, 28, 28]),
    ("valid_padded_gzip", GZ + bytes(16), [3, 4, 5]),      # gzip allows zero padding after the last member
])
def test_valid_files_read_in_the_capped_child(capped, files, name, data, shape):
    path = files / name
    path.write_bytes(data)
    answer = capped.read_idx(path)
    assert answer["raised"] is None and answer["shape"] == shape and answer["dtype"] == "uint8", answer


# --------------------------------------------------------------------------- MNIST: labels, images, N
IMAGES = np.arange(4 * 28 * 28, dtype=np.uint8).reshape(4, 28, 28)
LABELS = np.array([0, 9, 3, 7], dtype=np.uint8)

MNIST_CASES = [   # (id, images file, labels file, which file the error names, what it says)
    ("fraction_float64", idx(IMAGES), idx(np.array([0, 9.99, 1, 2]), 0x0E), "labels",
     r"labels to be integers in 0\.\.9, got 9\.99 \(label 1; 1 bad in all\)"),
    ("fraction_float32", idx(IMAGES), idx(np.array([0, 1, 2, 9.99], dtype=np.float32), 0x0D), "labels",
     r"got 9\.99 \(label 3;"),
    ("half_float64", idx(IMAGES), idx(np.array([0, 0.5, 1, 2]), 0x0E), "labels", r"got 0\.5 \(label 1;"),
    ("negative_int8", idx(IMAGES), idx(np.array([0, -1, 2, 3], dtype=np.int8), 0x09), "labels",
     r"got -1 \(label 1;"),
    ("negative_zero_point_one", idx(IMAGES), idx(np.array([0, 1, -0.1, 3]), 0x0E), "labels", r"got -0\.1 \(label 2;"),
    ("nan_float64", idx(IMAGES), idx(np.array([np.nan, 1, 2, 3]), 0x0E), "labels", r"got nan \(label 0;"),
    ("inf_float32", idx(IMAGES), idx(np.array([1, np.inf, 2, 3], dtype=np.float32), 0x0D), "labels",
     r"got inf \(label 1;"),
    ("ten_and_255_uint8", idx(IMAGES), idx(np.array([0, 10, 255, 3], dtype=np.uint8)), "labels",
     r"got 10 \(label 1; 2 bad in all\)"),
    ("big_int32", idx(IMAGES), idx(np.array([1, 2, 3, 70000], dtype=np.int32), 0x0C), "labels", r"got 70000"),
    ("min_int16", idx(IMAGES), idx(np.array([-32768, 2, 3, 4], dtype=np.int16), 0x0B), "labels", r"got -32768"),
    ("labels_2d", idx(IMAGES), idx(LABELS.reshape(4, 1)), "labels", r"expected 4 t10k labels .*got shape \(4, 1\)"),
    ("one_label_more", idx(IMAGES), idx(np.zeros(5, dtype=np.uint8)), "labels", r"expected 4 t10k labels .*\(5,\)"),
    ("one_label_less", idx(IMAGES), idx(np.zeros(3, dtype=np.uint8)), "labels", r"expected 4 t10k labels .*\(3,\)"),
    ("labels_trailing_gzip_bomb_style", idx(IMAGES), gz(idx(LABELS) + bytes(1 << 16)), "labels", "trailing data"),
    ("images_int16", idx(IMAGES.astype(np.int16), 0x0B), idx(LABELS), "images",
     r"images of uint8 with shape \(N, 28, 28\) .*got int16 with shape \(4, 28, 28\)"),
    ("images_28x27", idx(IMAGES[:, :, :27]), idx(LABELS), "images", r"got uint8 with shape \(4, 28, 27\)"),
    ("images_flat", idx(IMAGES.reshape(4, 784)), idx(LABELS), "images", r"got uint8 with shape \(4, 784\)"),
    ("images_float32", idx(IMAGES.astype(np.float32), 0x0D), idx(LABELS), "images", r"got float32"),
    ("images_cut", idx(IMAGES)[:-1], idx(LABELS), "images", "is truncated"),
]


def _mnist_root(root, images, labels):
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "t10k-images-idx3-ubyte").write_bytes(images)
    (raw / "t10k-labels-idx1-ubyte.gz").write_bytes(gz(labels) if labels[:2] != b"\x1f\x8b" else labels)
    return {"images": raw / "t10k-images-idx3-ubyte", "labels": raw / "t10k-labels-idx1-ubyte.gz"}


@pytest.mark.parametrize("name,images,labels,culprit,match", MNIST_CASES, ids=[case[0] for case in MNIST_CASES])
def test_mnist_refuses_bad_labels_images_and_counts(capped, files, name, images, labels, culprit, match):
    paths = _mnist_root(files / ("mnist_" + name), images, labels)
    assert_value_error(capped.mnist(files / ("mnist_" + name)), paths[culprit], match)


@pytest.mark.parametrize("labels", [idx(LABELS), idx(LABELS.astype(np.float64), 0x0E),
                                    idx(LABELS.astype(np.int32), 0x0C)], ids=["uint8", "whole_float64", "int32"])
def test_mnist_accepts_labels_that_are_integers_in_0_to_9(tmp_path, labels):
    _mnist_root(tmp_path, idx(IMAGES), labels)
    ds = MNIST(tmp_path, train=False)
    assert len(ds) == 4 and ds.targets.dtype == ag.int64 and ds.targets.tolist() == LABELS.tolist()


# --------------------------------------------------------------------------- property: mutations
MUTATION = st.one_of(
    st.tuples(st.just("xor"), st.integers(0, 400), st.integers(1, 255)),
    st.tuples(st.just("cut"), st.integers(0, 400)),
    st.tuples(st.just("insert"), st.integers(0, 400), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("dim"), st.integers(0, 3), st.integers(0, 2**32 - 1)),   # rewrite a declared dim
    st.tuples(st.just("byte"), st.integers(0, 3), st.integers(0, 255)),        # rewrite a magic byte
)
BASES = [idx(np.arange(120, dtype=np.uint8).reshape(2, 3, 4, 5)), idx(np.array([1.5, -2.0], np.float32), 0x0D),
         idx(np.arange(6, dtype=np.int16) - 3, 0x0B)]


def mutate(data, mutations):
    data = bytearray(data)
    for kind, *args in mutations:
        at = args[0] % (len(data) + 1)
        if kind == "xor" and data:
            data[at % len(data)] ^= args[1]
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = args[1]
        elif kind == "dim":
            data[4 + 4 * args[0]:8 + 4 * args[0]] = args[1].to_bytes(4, "big")
        elif kind == "byte":
            data[args[0]:args[0] + 1] = bytes([args[1]])
    return bytes(data)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(base=st.sampled_from(BASES), layer=st.sampled_from(["raw", "inside_gzip", "gzip_bytes"]),
       mutations=st.lists(MUTATION, min_size=1, max_size=4))
def test_mutated_files_only_ever_raise_value_error(capped, files, base, layer, mutations):
    data = gz(mutate(base, mutations)) if layer == "inside_gzip" else mutate(gz(base) if layer == "gzip_bytes"
                                                                            else base, mutations)
    path = files / "mutated"
    path.write_bytes(data)
    answer = capped.read_idx(path)
    if answer["raised"] is not None:
        assert_value_error(answer, path, ".")


# --------------------------------------------------------------------------- downloader: a local server
class _Handler(http.server.BaseHTTPRequestHandler):
    """GET /<behaviour>/<name>: serve files[name] the way <behaviour> says, well or badly."""
    timeout = 5                                  # no client can hold a handler thread for long

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.server.log.append(self.path)
        behaviour, _, name = self.path.strip("/").partition("/")
        body = self.server.files.get(name)
        if body is None:
            self.send_error(404)
            return
        try:
            getattr(self, "serve_" + behaviour)(body)
        except OSError:                          # the client hung up first: that is the point of some tests
            pass

    def _head(self, length=None, **headers):
        self.send_response(200)
        if length is not None:
            self.send_header("Content-Length", str(length))
        for key, value in headers.items():
            self.send_header(key.replace("_", "-"), value)
        self.end_headers()

    def serve_good(self, body):
        self._head(len(body))
        self.wfile.write(body)

    def serve_missing(self, body):
        self.send_error(404)

    def serve_wrong(self, body):
        self._head(12)
        self.wfile.write(b"not the file")

    def serve_cut(self, body):                   # announces the whole file, sends half, hangs up
        self._head(len(body))
        self.wfile.write(body[:len(body) // 2])

    def serve_chunked_cut(self, body):           # one chunk, then hangs up: http.client raises IncompleteRead
        self.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n" % 10 + body[:10] + b"\r\n")

    def serve_garbage(self, body):               # http.client raises BadStatusLine
        self.wfile.write(b"garbage\r\n\r\n")

    def serve_silent(self, body):                # hangs up without a word: RemoteDisconnected
        pass

    def serve_huge(self, body):
        self._head(10**12)

    def serve_bad_length(self, body):
        self._head(Content_Length="lots")
        self.wfile.write(body)

    def serve_endless(self, body):               # no length, more bytes than the client's limit
        self._head()
        for _ in range(64):
            self.wfile.write(bytes(16 << 10))

    def serve_stall(self, body):                 # headers, then nothing until the test ends
        self._head(len(body))
        self.wfile.flush()
        self.server.release.wait(10)


@pytest.fixture
def mirror(monkeypatch):
    """A local HTTP server on 127.0.0.1 (proxies bypassed): .url(behaviour) is a mirror URL, .files what it
    serves, .log the paths asked for. It shuts itself down after the test."""
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv("NO_PROXY", "*")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    server.handle_error = lambda request, address: None
    server.files, server.log, server.release = {}, [], threading.Event()
    server.url = lambda behaviour: f"http://127.0.0.1:{server.server_port}/{behaviour}/"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join(5)


def _closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FILE = gz(idx(LABELS))
RESOURCES = [("t10k-labels-idx1-ubyte.gz", hashlib.md5(FILE).hexdigest())]


def test_download_fails_over_from_broken_mirrors_to_a_good_one(tmp_path, mirror):
    mirror.files[RESOURCES[0][0]] = FILE
    behaviours = ["cut", "chunked_cut", "garbage", "silent", "good"]
    mnist_module.download_mnist(tmp_path, RESOURCES, [mirror.url(b) for b in behaviours], timeout=5)
    assert (tmp_path / RESOURCES[0][0]).read_bytes() == FILE
    assert os.listdir(tmp_path) == [RESOURCES[0][0]]                    # no temporary file left behind
    assert mirror.log == [f"/{b}/{RESOURCES[0][0]}" for b in behaviours]


def test_download_with_only_bad_mirrors_lists_each_and_its_failure(tmp_path, mirror):
    mirror.files[RESOURCES[0][0]] = FILE
    failures = {   # behaviour -> what the RuntimeError says about it
        "cut": r"ValueError: incomplete download: the connection closed after \d+ of the \d+ bytes",
        "chunked_cut": "IncompleteRead",
        "garbage": "BadStatusLine",
        "silent": "RemoteDisconnected",
        "missing": "HTTPError: HTTP Error 404",
        "wrong": "ValueError: MD5 checksum mismatch",
        "huge": "announces 1000000000000 bytes, more than the limit of 65536",
        "bad_length": "bad Content-Length header 'lots'",
        "endless": "longer than the limit of 65536 bytes",
    }
    urls = [mirror.url(b) for b in failures] + [f"http://127.0.0.1:{_closed_port()}/"]
    with pytest.raises(RuntimeError) as info:
        mnist_module.download_mnist(tmp_path, RESOURCES, urls, timeout=5, max_bytes=1 << 16)
    message = str(info.value)
    for url, failure in zip(urls, list(failures.values()) + ["URLError: .*Connection refused"]):
        assert re.search(re.escape(url + RESOURCES[0][0]) + ": [^;]*" + failure, message), (url, message)
    assert "download=False" in message
    assert os.listdir(tmp_path) == []                                   # nothing half-written kept


def test_download_from_a_mirror_that_stalls_times_out(tmp_path, mirror):
    mirror.files[RESOURCES[0][0]] = FILE
    with pytest.raises(RuntimeError, match=r"/stall/t10k-labels-idx1-ubyte\.gz: TimeoutError: timed out"):
        mnist_module.download_mnist(tmp_path, RESOURCES, [mirror.url("stall")], timeout=0.3)
    assert os.listdir(tmp_path) == []


def test_failed_download_leaves_an_existing_file_untouched(tmp_path, mirror):
    mirror.files[RESOURCES[0][0]] = FILE
    (tmp_path / RESOURCES[0][0]).write_bytes(b"an older copy")
    with pytest.raises(RuntimeError, match="incomplete download"):
        mnist_module.download_mnist(tmp_path, RESOURCES, [mirror.url("cut")], timeout=5)
    assert os.listdir(tmp_path) == [RESOURCES[0][0]]
    assert (tmp_path / RESOURCES[0][0]).read_bytes() == b"an older copy"


def test_download_with_no_mirrors_says_so(tmp_path):
    with pytest.raises(RuntimeError, match=r"t10k-labels-idx1-ubyte\.gz from any mirror \(no mirrors given\)"):
        mnist_module.download_mnist(tmp_path, RESOURCES, [])


def test_mnist_download_through_a_broken_mirror(tmp_path, mirror, monkeypatch):
    served = {"t10k-images-idx3-ubyte.gz": gz(idx(IMAGES)), "t10k-labels-idx1-ubyte.gz": FILE}
    mirror.files.update(served)
    monkeypatch.setattr(MNIST, "resources", [(n, hashlib.md5(b).hexdigest()) for n, b in served.items()])
    monkeypatch.setattr(MNIST, "mirrors", [mirror.url("garbage"), mirror.url("good")])
    ds = MNIST(tmp_path, train=False, download=True)
    assert len(ds) == 4 and ds.targets.tolist() == LABELS.tolist()
    assert sorted(os.listdir(tmp_path / "MNIST" / "raw")) == sorted(served)
