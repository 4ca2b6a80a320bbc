"""ag.load on damaged and hostile files, and ag.save under concurrency and crashes.

Every load of a hostile file runs in a forked child whose address space may grow by at most
MEMORY_BUDGET (RLIMIT_AS); the child must finish normally, having seen only ValueErrors that name the
file. Hypothesis mutates a valid file and builds random archives inside such a child too
(AG_HOSTILE_EXAMPLES examples per property, 300 by default).
AG_SAVE_STRESS_SECONDS / _PROCESSES / _THREADS size the concurrent-save test (the acceptance run is
30 s with 4 processes of 4 threads).
"""
import io
import json
import multiprocessing
import os
import re
import signal
import struct
import sys
import threading
import time
import traceback
import warnings
import zipfile
import zlib
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import autograd_gpu as ag
from autograd_gpu import serialization
from autograd_gpu.serialization import load, save

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="uses fork, RLIMIT_AS and /proc/self/status")
resource = pytest.importorskip("resource")

MEMORY_BUDGET = 200 << 20          # what one child may allocate beyond what it inherits (the promise)
EXAMPLES = int(os.environ.get("AG_HOSTILE_EXAMPLES", "300"))   # per property test
CHILD_TIMEOUT = 60 + EXAMPLES // 20
FORK = multiprocessing.get_context("fork")


# --------------------------------------------------------------------------- a memory-capped child
def _address_space():
    with open("/proc/self/status") as f:
        kib = next(int(line.split()[1]) for line in f if line.startswith("VmSize:"))
    return kib << 10


def _child_main(report, fn, args):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = _address_space() + MEMORY_BUDGET
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
    try:
        fn(*args)
        report.send("ok")
    except BaseException:
        report.send(traceback.format_exc())


def run_capped(fn, *args):
    """Run fn(*args) in a forked child under the memory cap; fail with the child's traceback unless fn
    returned normally."""
    receive, send = FORK.Pipe(duplex=False)
    child = FORK.Process(target=_child_main, args=(send, fn, args), daemon=True)
    child.start()
    send.close()
    try:
        report = receive.recv() if receive.poll(CHILD_TIMEOUT) else f"no report within {CHILD_TIMEOUT} s"
    except EOFError:
        report = "the child died without a report"
    child.join(CHILD_TIMEOUT)
    if child.is_alive():
        child.kill()
    assert report == "ok" and child.exitcode == 0, f"exit code {child.exitcode}:\n{report}"


def _load_refused(source, name, message):
    """ag.load(source) raises a ValueError naming the file and matching message, and nothing else."""
    with pytest.raises(ValueError) as info:
        load(source)
    text = str(info.value)
    assert text.startswith(f"load: {name}") and re.search(message, text), text


def _load_or_refuse(data):
    """ag.load of bytes: a result or a ValueError, and never any other exception."""
    try:
        load(io.BytesIO(data), map_location="cpu")
    except ValueError as e:
        assert str(e).startswith("load: "), e


# --------------------------------------------------------------------------- building files byte by byte
LOCAL = struct.Struct("<4s5H3L2H")          # zip local file header
CENTRAL = struct.Struct("<4s6H3L5H2L")      # zip central directory entry
END = struct.Struct("<4s4H2LH")             # zip end of central directory


def _member(name, data, *, method=zipfile.ZIP_STORED, size=None, crc=None, flags=0, local_name=None):
    """One zip member: ``data`` is stored as given (already compressed when method says so)."""
    return dict(name=name.encode(), local_name=(local_name or name).encode(), data=data, method=method,
                size=len(data) if size is None else size, crc=zlib.crc32(data) if crc is None else crc,
                flags=flags)


def _zip(*members):
    body, central = b"", b""
    for m in members:
        central += CENTRAL.pack(b"PK\x01\x02", 20, 20, m["flags"], m["method"], 0, 0x21, m["crc"],
                                len(m["data"]), m["size"], len(m["name"]), 0, 0, 0, 0, 0, len(body)) + m["name"]
        body += LOCAL.pack(b"PK\x03\x04", 20, m["flags"], m["method"], 0, 0x21, m["crc"], len(m["data"]),
                           m["size"], len(m["local_name"]), 0) + m["local_name"] + m["data"]
    return body + central + END.pack(b"PK\x05\x06", 0, 0, len(members), len(members), len(central), len(body), 0)


def _npy(array):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


def _npy_header(text, data=b"", version=(1, 0)):
    """A .npy member with this header text, as an attacker writes it."""
    raw = text.encode("latin1")
    size = struct.pack("<H" if version == (1, 0) else "<I", len(raw))
    return np.lib.format.magic(*version) + size + raw + data


def _header(descr, shape, fortran=False):
    return _npy_header(repr({"descr": descr, "fortran_order": fortran, "shape": tuple(shape)}) + "\n")


def _manifest(root):
    return _npy(np.frombuffer(json.dumps({"format": "autograd_gpu", "version": 1, "root": root}).encode(), np.uint8))


def _tensor(key="t0", dtype="float32", shape=(2,), device="cpu", requires_grad=False):
    shape = list(shape) if isinstance(shape, tuple) else shape
    return {"type": "tensor", "key": key, "dtype": dtype, "shape": shape, "device": device,
            "requires_grad": requires_grad}


def _file(root, *members):
    """A zip with this manifest root and these members (name, data)."""
    return _zip(_member("__manifest__.npy", _manifest(root)), *(_member(n, d) for n, d in members))


BOMB = 512 << 20                   # bytes a bomb expands to: more than MEMORY_BUDGET


@lru_cache(maxsize=None)
def _deflate_bomb(header):
    """``header`` and BOMB zero bytes, deflated into about 2.3 MB (level 1 is the quickest to build)."""
    packer = zlib.compressobj(1, zlib.DEFLATED, -15)
    zeros = b"\0" * (4 << 20)
    parts = [packer.compress(header)] + [packer.compress(zeros) for _ in range(BOMB // len(zeros))]
    return b"".join(parts) + packer.flush()


def _bomb_member(name):
    header = _header("|u1", (BOMB,))
    # CRC left 0: the loader must refuse before it could check it
    return _member(name, _deflate_bomb(header), method=zipfile.ZIP_DEFLATED, size=len(header) + BOMB, crc=0)


def _overlapping_members(count=500, payload=1 << 20):
    """count stored members whose data overlap: each member's data holds all the following members and
    one shared payload, so a loader that trusts the directory reads about count * payload bytes (and
    every CRC matches) from a file of about payload bytes."""
    tail, members, rest = [b"\0" * payload], [], payload     # tail: member i's data after its .npy header
    for i in reversed(range(count)):
        name, header = f"t{i}.npy".encode(), _header("|u1", (rest,))
        crc = zlib.crc32(header)
        for piece in reversed(tail):
            crc = zlib.crc32(piece, crc)
        size = len(header) + rest
        local = LOCAL.pack(b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, size, size, len(name), 0) + name
        tail += [header, local]
        members.append((name, crc, size, rest))
        rest = size + len(local)
    manifest = _member("__manifest__.npy", _manifest(
        {"type": "list", "items": [_tensor(f"t{i}", "uint8", (m[3],)) for i, m in enumerate(reversed(members))]}))
    body = _zip(manifest)
    body = body[:body.index(b"PK\x01\x02")]                  # the manifest's local header and data
    central = CENTRAL.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, manifest["crc"], len(manifest["data"]),
                           len(manifest["data"]), len(manifest["name"]), 0, 0, 0, 0, 0, 0) + manifest["name"]
    offset = len(body)
    for name, crc, size, rest in reversed(members):    # member i+1's local header follows member i's .npy header
        central += CENTRAL.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0x21, crc, size, size, len(name), 0, 0, 0, 0, 0,
                                offset) + name
        offset += LOCAL.size + len(name) + size - rest
    body += b"".join(reversed(tail))
    return body + central + END.pack(b"PK\x05\x06", 0, 0, count + 1, count + 1, len(central), len(body), 0)


def _nested(depth, leaf):
    for _ in range(depth):
        leaf = {"type": "list", "items": [leaf]}
    return leaf


def _cut(data, marker, count):
    """data without count bytes right after the first marker."""
    at = data.index(marker) + len(marker)
    return data[:at] + data[at + count:]


def _raw_manifest(text):
    return _zip(_member("__manifest__.npy", _npy(np.frombuffer(text, np.uint8))))


FLOATS = ("t0.npy", _npy(np.zeros(2, np.float32)))
CASES = {
    # what a file declares is checked before anything is read or decompressed
    "deflate_bomb_tensor": (lambda: _zip(_member("__manifest__.npy", _manifest(_tensor(dtype="uint8", shape=(BOMB,)))),
                                         _bomb_member("t0.npy")), "'t0' is compressed"),
    "deflate_bomb_manifest": (lambda: _zip(_bomb_member("__manifest__.npy")), "'__manifest__' is compressed"),
    "header_declares_8_TiB": (lambda: _file(_tensor(dtype="float64", shape=(1 << 40,)),
                                            ("t0.npy", _header("<f8", (1 << 40,)))),
                              "declares 8796093022208 bytes of data, but 0 follow"),
    "manifest_declares_8_TiB": (lambda: _zip(_member("__manifest__.npy", _header("|u1", (1 << 43,)))),
                                f"takes 8796093022208 bytes, more than the {serialization.MAX_MANIFEST_BYTES} allowed"),
    "overlapping_members": (_overlapping_members, "zip members claim more bytes than the file's"),
    "data_longer_than_declared": (lambda: _file(_tensor(), ("t0.npy", _header("<f4", (2,)) + bytes(12))),
                                  "declares 8 bytes of data, but 12 follow"),
    "entry_sizes_disagree": (lambda: _zip(_member("__manifest__.npy", _manifest(_tensor())),
                                          _member("t0.npy", FLOATS[1], size=7)), "stored in .* but declares 7"),
    "duplicate_names": (lambda: _file(_tensor(), FLOATS, FLOATS), "two zip members have one name"),
    "encrypted": (lambda: _zip(_member("__manifest__.npy", _manifest(_tensor())), _member(*FLOATS, flags=1)),
                  "compressed or encrypted"),
    "bad_crc": (lambda: _zip(_member("__manifest__.npy", _manifest(_tensor())), _member(*FLOATS, crc=1)),
                "cannot read .*'t0'.*CRC"),
    "local_name_differs": (lambda: _zip(_member("__manifest__.npy", _manifest(_tensor())),
                                        _member(*FLOATS, local_name="t9.npy")),
                           "cannot read the zip entry of array 't0'"),
    "directory_cut_short": (lambda: _cut(_file(_tensor(), FLOATS), b"PK\x01\x02", 10), "cannot read the zip directory"),
    "empty_archive": (lambda: _zip(), "has no __manifest__ entry"),
    # .npy headers
    "object_array": (lambda: _file(_tensor(), ("t0.npy", _npy(np.array([None, 1], dtype=object)))), "is object"),
    "big_endian": (lambda: _file(_tensor(), ("t0.npy", _npy(np.zeros(2, ">f4")))), "is >f4 of shape"),
    "structured": (lambda: _file(_tensor(dtype="uint8", shape=(8,)), ("t0.npy", _npy(np.zeros(1, "f4,f4")))),
                   "but the manifest says uint8"),
    "npy_version_3": (lambda: _file(_tensor(), ("t0.npy", _npy_header("{}", version=(3, 0)))), r"version \(3, 0\)"),
    "nested_header": (lambda: _file(_tensor(), ("t0.npy", _npy_header("(1," * 300 + ")" * 300))),
                      "cannot read the header of array 't0'"),
    "header_too_long": (lambda: _file(_tensor(), ("t0.npy", _npy_header(" " * 60000))), "cannot read the header"),
    "header_not_a_dict": (lambda: _file(_tensor(), ("t0.npy", _npy_header("[1, 2]"))), "cannot read the header"),
    # the manifest
    "deep_json": (lambda: _raw_manifest(b"[" * 100000), "nests 100000 levels deep"),
    "deep_nodes": (lambda: _file(_nested(2 * serialization.MAX_DEPTH, {"type": "none"})), "levels deep"),
    "brackets_in_strings_do_not_nest": (lambda: _file({"type": "list",
                                                       "items": [{"type": "str", "value": "[{" * 999}]}), None),
    "long_int": (lambda: _raw_manifest(b'{"format":"autograd_gpu","version":1,"root":{"type":"int","value":'
                                       + b"9" * 5000 + b"}}"), "not valid UTF-8 JSON"),
    "float_overflow": (lambda: _file({"type": "float", "value": 10 ** 400}), "expected a float"),
    "not_utf8": (lambda: _raw_manifest(b'"\xff"'), "UTF-8"),
    "int_tensor_requires_grad": (lambda: _file(_tensor(dtype="int64", requires_grad=True),
                                               ("t0.npy", _npy(np.zeros(2, np.int64)))), "cannot require gradients"),
    "tensor_described_twice": (lambda: _file({"type": "list", "items": [_tensor(), _tensor(shape=(1, 2))]}, FLOATS),
                               "described differently"),
    "negative_shape": (lambda: _file(_tensor(shape=(-2,)), FLOATS), "expected dtype, shape and device"),
    "dtype_not_a_string": (lambda: _file(_tensor(dtype=["float32"]), FLOATS), "expected dtype, shape and device"),
    "65_dimensions": (lambda: _file(_tensor(shape=(1,) * 65), FLOATS), "expected dtype, shape and device"),
    "float128": (lambda: _file(_tensor(dtype="float128"), ("t0.npy", _npy(np.zeros(2, np.longdouble)))),
                 "expected dtype, shape and device"),
    "bad_device": (lambda: _file(_tensor(device="tpu:0"), FLOATS), "bad device 'tpu:0'"),
    "manifest_of_8_MiB_of_empty_dicts": (lambda: _raw_manifest(
        b'{"format":"autograd_gpu","version":1,"root":{"type":"list","items":['
        + b"{}," * (serialization.MAX_MANIFEST_BYTES // 3 - 100) + b"{}]}}"), r"obj\[0\]: expected a node"),
    "long_keys": (lambda: _file(_nested_dict(99, "k" * 30000, {"type": "pickle"})), "unknown node type"),   # 3 MB
}


def _nested_dict(depth, key, leaf):
    for _ in range(depth):
        leaf = {"type": "dict", "items": [[key, leaf]]}
    return leaf


def _check_case(path, message):
    if message is None:
        load(path)
    else:
        _load_refused(path, str(path), message)


@pytest.mark.parametrize("case", list(CASES))
def test_hostile_file_is_refused_within_the_memory_budget(case, tmp_path):
    build, message = CASES[case]
    path = tmp_path / f"{case}.agt"
    path.write_bytes(build())
    run_capped(_check_case, path, message)


# --------------------------------------------------------------------------- property-based
PROPERTY = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _valid_file():
    buffer = io.BytesIO()
    save({"w": ag.arange(6, dtype=ag.float32).reshape(2, 3), "b": ag.zeros(3, dtype=ag.int64), "step": 7,
          "lr": 0.5, "name": "x", "flags": (True, None)}, buffer)
    return buffer.getvalue()


_position = st.integers(0, 1 << 16)
_mutation = st.one_of(
    st.tuples(st.just("flip"), _position, st.integers(1, 255)),
    st.tuples(st.just("truncate"), _position),
    st.tuples(st.just("insert"), _position, st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("delete"), _position, st.integers(1, 8)),
    # sizes, offsets, counts and compression methods set to extremes
    st.tuples(st.just("overwrite"), _position,
              st.sampled_from([b"\xff\xff\xff\xff", b"\xff\xff\xff\x7f", b"\0\0\0\0", b"\0\0\0\x80", b"\x08\0"])),
)


def _mutate(data, mutations):
    data = bytearray(data)
    for kind, at, *arg in mutations:
        at %= len(data) + 1
        if kind == "flip" and at < len(data):
            data[at] ^= arg[0]
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = arg[0]
        elif kind == "delete":
            del data[at:at + arg[0]]
        elif kind == "overwrite":
            data[at:at + len(arg[0])] = arg[0]
    return bytes(data)


def _mutated_files():
    original = _valid_file()

    @PROPERTY
    @given(st.lists(_mutation, min_size=1, max_size=4))
    def check(mutations):
        _load_or_refuse(_mutate(original, mutations))

    check()


def test_flipped_cut_and_spliced_files_load_or_raise_value_error():
    run_capped(_mutated_files)


_VALID = zipfile.ZipFile(io.BytesIO(_valid_file()))
_VALID_MEMBERS = {name: _VALID.read(name) for name in _VALID.namelist()}     # __manifest__.npy, t0.npy, t1.npy
_VALID_JSON = np.load(io.BytesIO(_VALID_MEMBERS["__manifest__.npy"])).tobytes()
_STRUCTURED = [("float32", [2, 3]), ("int64", [3]), ("float32", [2]), ("uint8", [3])]

_shape = st.lists(st.one_of(st.integers(0, 4), st.integers(-2, 1 << 62)), max_size=3)
_json = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
         | st.lists(st.integers(), max_size=2))
_tensor_node = st.builds(
    lambda key, dtype_shape, device, requires_grad: _tensor(key, *dtype_shape, device, requires_grad),
    st.sampled_from(["t0", "t1", "t2", "__manifest__", "t0.npy"]),
    st.sampled_from(_STRUCTURED) | st.tuples(st.sampled_from(["float32", "bool", "float128", "object", "<f4",
                                                              None, ["float32"]]), _shape | _json),
    st.sampled_from(["cpu", "cpu", "cuda:0", "tpu", "cpu:1"]), st.booleans())
_valid_leaf = st.one_of(st.builds(lambda v: {"type": "int", "value": v}, st.integers()),
                        st.builds(lambda v: {"type": "float", "value": repr(v)}, st.floats()),
                        st.builds(lambda v: {"type": "str", "value": v}, st.text(max_size=4)),
                        st.just({"type": "none"}))
_leaf = st.one_of(_tensor_node, _valid_leaf, _valid_leaf,
                  st.builds(lambda kind, value: {"type": kind, "value": value},
                            st.sampled_from(["int", "float", "str", "bool", "none", "pickle"]), _json))
_node = st.recursive(_leaf, lambda inner: st.one_of(
    st.builds(lambda kind, items: {"type": kind, "items": items}, st.sampled_from(["list", "tuple"]),
              st.lists(inner, max_size=3)),
    st.builds(lambda items: {"type": "dict", "items": items},
              st.lists(st.tuples(st.text(max_size=3) | st.integers(), inner).map(list), max_size=3))), max_leaves=8)
_manifest_text = st.one_of(
    st.builds(lambda root, version: json.dumps({"format": "autograd_gpu", "version": version, "root": root}).encode(),
              _node, st.sampled_from([1] * 8 + [2, "1", True])),
    st.builds(_mutate, st.just(_VALID_JSON), st.lists(_mutation, min_size=1, max_size=3)))   # near misses
_npy_bytes = st.builds(lambda descr, shape, fortran, data: _header(descr, shape, fortran) + data,
                       st.sampled_from(["|u1", "<f4", ">f4", "|b1", "<i8", "|O", "<f16", "<U2", "|V4"]),
                       _shape, st.booleans(), st.binary(max_size=48))
_data = st.one_of(st.binary(max_size=64), _npy_bytes, st.sampled_from(list(_VALID_MEMBERS.values())),
                  st.builds(_mutate, st.sampled_from(list(_VALID_MEMBERS.values())),   # damaged, with a right CRC
                            st.lists(_mutation, min_size=1, max_size=3)))
_method = st.sampled_from([zipfile.ZIP_STORED] * 4 + [zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2])
_member_strategy = st.tuples(_data, _method)
_archive = st.fixed_dictionaries(
    {"__manifest__.npy": st.one_of(*[st.tuples(_manifest_text.map(lambda t: _npy(np.frombuffer(t, np.uint8))),
                                               st.just(zipfile.ZIP_STORED))] * 4, _member_strategy)},
    optional={name: _member_strategy for name in ("t0.npy", "t1.npy", "t2.npy", "t0", "x.npy")})


def _random_archives():
    warnings.simplefilter("ignore")    # zipfile warns about duplicate names, which some archives have

    @PROPERTY
    @given(_archive, st.sampled_from([False] * 9 + [True]))
    def check(members, duplicate):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for name, (data, method) in list(members.items()) + list(members.items())[:duplicate]:
                archive.writestr(name, data, compress_type=method)
        _load_or_refuse(buffer.getvalue())

    check()


def test_random_archives_load_or_raise_value_error():
    run_capped(_random_archives)


# --------------------------------------------------------------------------- concurrent saves
STRESS_SECONDS = float(os.environ.get("AG_SAVE_STRESS_SECONDS", "3"))
STRESS_PROCESSES = int(os.environ.get("AG_SAVE_STRESS_PROCESSES", "4"))
STRESS_THREADS = int(os.environ.get("AG_SAVE_STRESS_THREADS", "4"))


def _stress_state(process, thread, step):
    """What writer (process, thread) saves at step: the contents say who wrote it, the sizes vary."""
    code = (process * 100 + thread) * 1_000_000 + step
    return {"writer": [process, thread], "step": step,
            "w": ag.full((1 + step % 8, 256), float(code), dtype=ag.float64),
            "b": ag.full((step % 5,), code, dtype=ag.int64)}


def _check_stress_state(state):
    """state is exactly what one writer saved at one step: nothing mixed in, nothing cut off."""
    expected = _stress_state(*state["writer"], state["step"])
    assert list(state) == list(expected)
    for key in ("w", "b"):
        assert state[key].dtype == expected[key].dtype
        np.testing.assert_array_equal(state[key].numpy(), expected[key].numpy())


def _writer(path, process, deadline, report):
    steps, errors = [0] * STRESS_THREADS, []

    def work(thread):
        while time.monotonic() < deadline:
            try:
                save(_stress_state(process, thread, steps[thread]), path)
            except BaseException:
                errors.append(traceback.format_exc())
                return
            steps[thread] += 1

    threads = [threading.Thread(target=work, args=(t,)) for t in range(STRESS_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report.send((steps, errors))


def _reader(path, deadline, report):
    loads, errors = 0, []
    while time.monotonic() < deadline:
        try:
            _check_stress_state(load(path))
        except BaseException:
            errors.append(traceback.format_exc())
            break
        loads += 1
    report.send((loads, errors))


def test_concurrent_saves_to_one_path_leave_the_last_complete_file(tmp_path):
    path = str(tmp_path / "ckpt.agt")
    save(_stress_state(99, 0, 0), path)
    deadline = time.monotonic() + STRESS_SECONDS
    jobs = [(_writer, (path, p, deadline)) for p in range(STRESS_PROCESSES)] + [(_reader, (path, deadline))]
    children, reports = [], []
    for target, args in jobs:
        receive, send = FORK.Pipe(duplex=False)
        children.append(FORK.Process(target=target, args=(*args, send), daemon=True))
        children[-1].start()
        send.close()
        reports.append(receive)
    results = [r.recv() if r.poll(STRESS_SECONDS + CHILD_TIMEOUT) else (None, ["no report"]) for r in reports]
    for child in children:
        child.join(CHILD_TIMEOUT)
    errors = [e for _, errs in results for e in errs]
    assert not errors, errors[0]
    steps, (loads, _) = [s for s, _ in results[:-1]], results[-1]
    assert loads > 0 and all(n > 0 for s in steps for n in s), (steps, loads)
    final = load(path)
    _check_stress_state(final)
    process, thread = final["writer"]
    assert final["step"] == steps[process][thread] - 1    # the last rename is its writer's last save
    assert os.listdir(tmp_path) == ["ckpt.agt"]           # no temporary file left behind
    print(f"\n{STRESS_PROCESSES} processes x {STRESS_THREADS} threads for {STRESS_SECONDS:g} s: "
          f"{sum(map(sum, steps))} saves, {loads} loads checked, no error")


# --------------------------------------------------------------------------- a save killed midway
def _save_forever(path, size):
    for step in range(1, 1 << 30):
        save({"step": step, "w": ag.full((size,), float(step))}, path)


def test_a_save_killed_midway_keeps_the_old_file(tmp_path):
    path = tmp_path / "big.agt"
    save({"step": 0, "w": ag.zeros(4)}, path)
    child = FORK.Process(target=_save_forever, args=(str(path), 16 << 20), daemon=True)   # 64 MB a save
    child.start()
    try:
        _wait_for_temp_file(tmp_path, at_least=4 << 20)                # kill it in the middle of writing
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(CHILD_TIMEOUT)
    assert child.exitcode == -signal.SIGKILL
    state = load(path)                                  # the old file, or one the child finished
    assert state["w"].shape == ((4,) if state["step"] == 0 else (16 << 20,))
    assert bool((state["w"] == float(state["step"])).all())
    leftovers = set(os.listdir(tmp_path)) - {"big.agt"}
    assert len(leftovers) <= 1 and all(re.fullmatch(r"\.big\.agt\.[0-9a-f]+\.tmp", n) for n in leftovers), leftovers


def _wait_for_temp_file(directory, at_least):
    deadline = time.monotonic() + CHILD_TIMEOUT
    while time.monotonic() < deadline:
        for entry in os.scandir(directory):
            try:
                if entry.name.endswith(".tmp") and entry.stat().st_size >= at_least:
                    return
            except FileNotFoundError:                   # renamed meanwhile
                pass
    raise AssertionError(f"no temporary file of {at_least} bytes appeared in {directory}")
