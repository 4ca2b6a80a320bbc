"""ag.save / ag.load: round trips, map_location, and clear errors for damaged or foreign files
(which are never unpickled) and for objects that cannot be saved."""
import io
import json
import math
import os
import stat
import zipfile

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import serialization
from autograd_gpu.serialization import load, save


def _roundtrip(obj, tmp_path, **kwargs):
    path = tmp_path / "obj.agt"
    save(obj, path)
    return load(path, **kwargs)


def _same(a, b):
    assert isinstance(b, ag.Tensor)
    assert a.dtype == b.dtype and a.shape == b.shape and a.device == b.device
    assert a.requires_grad == b.requires_grad
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def _write_npz(path, manifest=None, **arrays):
    """An .npz with the given arrays and, unless None, this manifest (a dict, or raw bytes)."""
    if manifest is not None:
        raw = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
        arrays["__manifest__"] = np.frombuffer(raw, dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def _manifest(root):
    return {"format": "autograd_gpu", "version": 1, "root": root}


def _tensor_node(key="t0", dtype="float32", shape=(2,), device="cpu"):
    return {"type": "tensor", "key": key, "dtype": dtype, "shape": list(shape), "device": device,
            "requires_grad": False}


# --------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("dtype", [ag.float16, ag.float32, ag.float64, ag.int64, ag.int32, ag.uint8, ag.bool_],
                         ids=str)
def test_tensor_roundtrip_keeps_dtype_shape_and_values(dtype, device, tmp_path):
    t = ag.tensor(np.arange(-3, 9).reshape(3, 4) % 5, dtype=dtype, device=device)
    _same(t, _roundtrip(t, tmp_path))


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2)], ids=["0d", "size0", "size0_3d"])
def test_zero_dim_and_empty_tensors_roundtrip(shape, device, tmp_path):
    t = ag.full(shape, 2.5, device=device) if shape == () else ag.zeros(*shape, device=device)
    _same(t, _roundtrip(t, tmp_path))


def test_requires_grad_is_kept_and_non_contiguous_tensors_are_saved(tmp_path):
    w = ag.randn(3, 4, requires_grad=True)
    x = ag.arange(12).reshape(3, 4).T
    loaded = _roundtrip({"w": w, "x": x, "y": w * 2}, tmp_path)
    assert loaded["w"].requires_grad and loaded["w"].is_leaf
    assert loaded["y"].requires_grad and loaded["y"].is_leaf   # saved as a leaf: graphs are not saved
    _same(x, loaded["x"])


def test_state_dict_roundtrip_keeps_key_order(tmp_path):
    state = {"layer2.weight": ag.randn(4, 3), "layer1.weight": ag.randn(3, 2), "layer1.bias": ag.zeros(3)}
    loaded = _roundtrip(state, tmp_path)
    assert list(loaded) == list(state)
    for k in state:
        _same(state[k], loaded[k])


def test_optimizer_like_state_roundtrip(tmp_path):
    state = {
        "state": {0: {"step": 12, "exp_avg": ag.randn(3), "exp_avg_sq": ag.rand(3), "flag": None},
                  1: {"step": 12, "momentum_buffer": ag.randn(2, 2, dtype=ag.float64)}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "amsgrad": False,
                          "maximize": True, "weight_decay": 0, "params": [0, 1], "name": "body",
                          "max_lr": math.inf, "min_lr": -math.inf, "big": 2 ** 70}],
    }
    loaded = _roundtrip(state, tmp_path)
    group = loaded["param_groups"][0]
    assert group["betas"] == (0.9, 0.999) and isinstance(group["betas"], tuple)
    assert group["params"] == [0, 1] and isinstance(group["params"], list)
    assert group["lr"] == 1e-3 and group["eps"] == 1e-8 and group["big"] == 2 ** 70
    assert group["amsgrad"] is False and group["maximize"] is True and group["weight_decay"] == 0
    assert isinstance(group["weight_decay"], int) and group["name"] == "body"
    assert group["max_lr"] == math.inf and group["min_lr"] == -math.inf
    assert set(loaded["state"]) == {0, 1} and loaded["state"][0]["flag"] is None
    _same(state["state"][1]["momentum_buffer"], loaded["state"][1]["momentum_buffer"])


def test_nan_and_special_floats_roundtrip_exactly(tmp_path):
    values = [math.nan, 0.1, -0.0, 5e-324, 1.7976931348623157e308]
    loaded = _roundtrip(values, tmp_path)
    assert math.isnan(loaded[0]) and loaded[1:] == values[1:] and math.copysign(1, loaded[2]) == -1


def test_str_and_int_keys_stay_distinct(tmp_path):
    assert _roundtrip({1: "int", "1": "str"}, tmp_path) == {1: "int", "1": "str"}


def test_a_tensor_saved_twice_loads_as_one_tensor(tmp_path):
    w = ag.randn(2, 2)
    loaded = _roundtrip({"encoder": w, "decoder": w, "copy": w.clone()}, tmp_path)
    assert loaded["encoder"] is loaded["decoder"] and loaded["copy"] is not loaded["encoder"]


def test_a_bare_tensor_and_plain_values_roundtrip(tmp_path):
    _same(ag.ones(2), _roundtrip(ag.ones(2), tmp_path))
    assert _roundtrip(None, tmp_path) is None
    assert _roundtrip((1, "a", [True, 2.5]), tmp_path) == (1, "a", [True, 2.5])
    assert _roundtrip(np.float32(1.5), tmp_path) == 1.5             # NumPy scalars become Python numbers


def test_save_uses_the_exact_path_and_file_objects_work(tmp_path):
    path = tmp_path / "model.pt"
    save({"w": ag.ones(3)}, str(path))
    assert os.listdir(tmp_path) == ["model.pt"]                    # no ".npz" appended, no temp file left
    buffer = io.BytesIO()
    save({"w": ag.ones(3)}, buffer)
    buffer.seek(0)
    assert load(buffer)["w"].tolist() == [1.0, 1.0, 1.0]


def test_loaded_tensors_own_their_memory(tmp_path):
    t = ag.arange(4)
    loaded = _roundtrip(t, tmp_path)
    loaded.data[0] = 7
    assert t.tolist()[0] == 0


# --------------------------------------------------------------------------- map_location
def test_map_location_moves_tensors(device, tmp_path):
    t = ag.randn(3, device=device)
    path = tmp_path / "t.agt"
    save({"t": t}, path)
    assert load(path)["t"].device == device
    for where in ("cpu", ag.device("cpu"), {device: "cpu"}, lambda saved: "cpu"):
        got = load(path, map_location=where)["t"]
        assert got.device == "cpu"
        np.testing.assert_array_equal(got.numpy(), t.numpy())
    assert load(path, map_location=device)["t"].device == device


def test_tensor_saved_on_cuda_loads_on_cpu_with_map_location(tmp_path):
    path = _write_npz(tmp_path / "gpu.agt", _manifest(_tensor_node(device="cuda:0")), t0=np.ones(2, np.float32))
    assert load(path, map_location={"cuda:0": "cpu"}).device == "cpu"
    assert load(path, map_location="cpu").tolist() == [1.0, 1.0]
    if not ag.cuda.is_available():
        with pytest.raises(RuntimeError, match=r"saved on cuda:0.*map_location='cpu'"):
            load(path)


def test_bad_map_location_is_a_type_error(tmp_path):
    save(ag.ones(1), tmp_path / "a")
    with pytest.raises(TypeError, match="map_location"):
        load(tmp_path / "a", map_location=3)


# --------------------------------------------------------------------------- damaged and foreign files
def test_random_bytes_are_not_a_file(tmp_path):
    path = tmp_path / "random.bin"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match=r"random\.bin.*not an autograd_gpu file"):
        load(path)


def test_empty_file_is_not_a_file(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ValueError, match="empty.*not an autograd_gpu file"):
        load(tmp_path / "empty")


def test_plain_npz_without_manifest(tmp_path):
    path = _write_npz(tmp_path / "plain.npz", None, weights=np.zeros(3))
    with pytest.raises(ValueError, match=r"plain\.npz has no __manifest__"):
        load(path)


def test_plain_npy_file(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros(3))
    with pytest.raises(ValueError, match=r"a\.npy is a plain \.npy array"):
        load(tmp_path / "a.npy")


def _record_unpickling(path):
    with open(path, "w") as f:
        f.write("unpickled")
    return 0


class _Payload:
    """Unpickling this calls _record_unpickling: proof that load never unpickles."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return _record_unpickling, (self.path,)


def test_object_arrays_are_never_unpickled(tmp_path):
    marker = str(tmp_path / "marker")
    payload = np.array([_Payload(marker)], dtype=object)
    for name, kwargs in (("as_manifest.npz", {"__manifest__": payload}),
                         ("as_tensor.npz", {"__manifest__": np.frombuffer(json.dumps(
                             _manifest(_tensor_node(dtype="float32", shape=(1,)))).encode(), np.uint8),
                                            "t0": payload})):
        with open(tmp_path / name, "wb") as f:
            np.savez(f, **kwargs)
        with pytest.raises(ValueError, match=rf"{name}: array '\w+' .* is object of shape \(1,\)"):
            load(tmp_path / name)
    assert not os.path.exists(marker)


def test_bad_json_manifest(tmp_path):
    path = _write_npz(tmp_path / "f.agt", b"{not json")
    with pytest.raises(ValueError, match=r"f\.agt: the manifest is not valid UTF-8 JSON"):
        load(path)


def test_wrong_format_name_and_version(tmp_path):
    path = _write_npz(tmp_path / "f.agt", {"format": "safetensors", "version": 1, "root": {"type": "none"}})
    with pytest.raises(ValueError, match="expected format 'autograd_gpu', got 'safetensors'"):
        load(path)
    path = _write_npz(tmp_path / "g.agt", {"format": "autograd_gpu", "version": 99, "root": {"type": "none"}})
    with pytest.raises(ValueError, match="version 99 is not supported"):
        load(path)


def test_manifest_referencing_a_missing_array(tmp_path):
    path = _write_npz(tmp_path / "f.agt", _manifest({"type": "dict", "items": [["w", _tensor_node("t5")]]}))
    with pytest.raises(ValueError, match=r"refers to array 't5' \(at obj\['w'\]\), which the file does not contain"):
        load(path)


def test_array_that_disagrees_with_the_manifest(tmp_path):
    path = _write_npz(tmp_path / "f.agt", _manifest(_tensor_node(shape=(3,))), t0=np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"float32 of shape \(2,\), but the manifest says float32 of shape \(3,\)"):
        load(path)


@pytest.mark.parametrize("root,message", [
    ({"type": "pickle", "value": "x"}, "unknown node type 'pickle'"),
    ({"type": "list", "items": [{"type": "int", "value": "7"}]}, r"obj\[0\]: expected a int value"),
    ({"type": "dict", "items": [[1.5, {"type": "none"}]]}, "str or int key"),
    ([1, 2], "expected a node with a 'type'"),
    (_tensor_node(dtype="object"), "expected dtype, shape and device"),
])
def test_malformed_manifest_nodes(tmp_path, root, message):
    path = _write_npz(tmp_path / "f.agt", _manifest(root))
    with pytest.raises(ValueError, match=message):
        load(path)


def test_truncated_file(tmp_path):
    path = tmp_path / "f.agt"
    save({"w": ag.randn(100, 100)}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"f\.agt"):
        load(path)


def test_corrupted_array_bytes(tmp_path):
    path = tmp_path / "f.agt"
    save({"w": ag.ones(1000)}, path)
    data = bytearray(path.read_bytes())
    at = data.index(np.ones(8, np.float32).tobytes())   # inside t0's data: the zip CRC no longer matches
    data[at:at + 4] = b"\x00\x00\x00\x00"
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"f\.agt: cannot read array 't0'"):
        load(path)


def test_a_zip_that_is_not_an_npz(tmp_path):
    with zipfile.ZipFile(tmp_path / "f.zip", "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match="has no __manifest__"):
        load(tmp_path / "f.zip")


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "nope.agt")


# --------------------------------------------------------------------------- unsavable objects
class Foo:
    pass


def test_unsavable_object_names_its_path(tmp_path):
    obj = {"state": [0, 1, 2, {"foo": Foo()}]}
    with pytest.raises(TypeError, match=r"obj\['state'\]\[3\]\['foo'\]: cannot save an object of type Foo"):
        save(obj, tmp_path / "f.agt")
    assert not os.listdir(tmp_path)                  # nothing written


@pytest.mark.parametrize("obj,message", [
    ({"f": lambda x: x}, r"obj\['f'\]: cannot save an object of type function"),
    ([{1, 2}], r"obj\[0\]: cannot save an object of type set"),
    ({(1, 2): ag.ones(1)}, r"cannot save a dict key of type tuple"),
    ({"z": 1j}, "type complex"),
])
def test_unsavable_values_and_keys(tmp_path, obj, message):
    with pytest.raises(TypeError, match=message):
        save(obj, tmp_path / "f.agt")


def test_cyclic_structure_is_an_error(tmp_path):
    a = [1]
    a.append(a)
    with pytest.raises(ValueError, match=r"obj\[1\] contains itself"):
        save(a, tmp_path / "f.agt")


def test_load_of_a_damaged_header_or_member_is_a_value_error():
    import io
    buf = io.BytesIO()
    ag.save({"w": ag.ones(10000)}, buf)
    raw = buf.getvalue()
    k = raw.index(b"}", raw.index(b"{'descr'"))
    i = raw.index(b"PK\x01\x02")
    odd_compression = bytearray(raw)
    odd_compression[i + 10] = 99
    for bad in (raw[:k] + b"(" + raw[k + 1:], bytes(odd_compression)):
        with pytest.raises(ValueError, match="damaged"):
            ag.load(io.BytesIO(bad))


# --------------------------------------------------------------------------- replacing a file safely
def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_save_leaves_the_users_own_tmp_file_alone(tmp_path):
    (tmp_path / "model.pt.tmp").write_text("mine")
    save({"w": ag.ones(2)}, tmp_path / "model.pt")
    assert (tmp_path / "model.pt.tmp").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["model.pt", "model.pt.tmp"]


def test_save_never_follows_a_symlink_planted_at_a_temporary_name(tmp_path, monkeypatch):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "model.pt.tmp").symlink_to(victim)              # the name save used to write to
    (tmp_path / ".model.pt.planted.tmp").symlink_to(victim)     # the name save draws first below
    tags = iter(["planted", "fresh"])
    monkeypatch.setattr(serialization, "_tag", lambda: next(tags))
    save({"w": ag.ones(2)}, tmp_path / "model.pt")
    assert victim.read_text() == "precious"
    assert load(tmp_path / "model.pt")["w"].tolist() == [1.0, 1.0]
    assert sorted(os.listdir(tmp_path)) == [".model.pt.planted.tmp", "model.pt", "model.pt.tmp", "victim"]


def test_save_keeps_the_mode_of_the_file_it_replaces(tmp_path):
    path = tmp_path / "secret.pt"
    save(ag.ones(1), path)
    os.chmod(path, 0o600)
    save(ag.zeros(1), path)
    assert _mode(path) == 0o600 and load(path).tolist() == [0.0]


def test_a_new_file_gets_the_mode_open_gives_it(tmp_path):
    old = os.umask(0o027)
    try:
        save(ag.ones(1), tmp_path / "saved.pt")
        open(tmp_path / "opened", "wb").close()
    finally:
        os.umask(old)
    assert _mode(tmp_path / "saved.pt") == _mode(tmp_path / "opened") == 0o640


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may write any file")
def test_a_read_only_file_is_not_replaced(tmp_path):
    path = tmp_path / "frozen.pt"
    save(ag.ones(1), path)
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError, match="not writable"):
        save(ag.zeros(1), path)
    assert load(path).tolist() == [1.0]


def test_save_writes_through_a_symlink_at_the_target(tmp_path):
    real = tmp_path / "ckpt_100.pt"
    save(ag.zeros(1), real)
    (tmp_path / "latest.pt").symlink_to(real.name)
    save(ag.ones(1), tmp_path / "latest.pt")
    assert (tmp_path / "latest.pt").is_symlink() and load(real).tolist() == [1.0]
    assert sorted(os.listdir(tmp_path)) == ["ckpt_100.pt", "latest.pt"]


@pytest.mark.parametrize("length", [250, 255])
def test_file_names_near_the_255_byte_limit(tmp_path, length):
    path = tmp_path / ("m" * length)
    save({"w": ag.ones(2)}, path)
    save({"w": ag.zeros(2)}, path)
    assert load(path)["w"].tolist() == [0.0, 0.0] and os.listdir(tmp_path) == [path.name]


def test_an_interrupted_save_keeps_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "model.pt"
    save({"w": ag.ones(2)}, path)
    before = path.read_bytes()

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez", interrupt)
    with pytest.raises(KeyboardInterrupt):
        save({"w": ag.zeros(2)}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.pt"]


UNLOADABLE_DTYPES = [np.dtype(">f4")] + ([np.dtype(np.longdouble)] if np.dtype(np.longdouble).itemsize > 8 else [])


@pytest.mark.parametrize("dtype", UNLOADABLE_DTYPES, ids=str)
def test_save_refuses_a_dtype_load_refuses_before_touching_the_old_file(tmp_path, dtype):
    path = tmp_path / "model.pt"
    save({"w": ag.ones(2)}, path)
    before = path.read_bytes()
    with pytest.raises(TypeError, match=rf"obj\['w'\]: cannot save a tensor of dtype {dtype}; expected one of bool"):
        save({"w": ag.tensor(np.zeros(2, dtype))}, path)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.pt"]


def test_save_and_load_share_the_nesting_and_manifest_limits(tmp_path, monkeypatch):
    deep = ag.ones(1)
    for _ in range(serialization.MAX_DEPTH):     # dicts nest deepest in the manifest
        deep = {"k": deep}
    loaded = _roundtrip(deep, tmp_path)
    for _ in range(serialization.MAX_DEPTH):
        loaded = loaded["k"]
    assert loaded.tolist() == [1.0]
    with pytest.raises(ValueError, match=r"obj\['k'\].* is nested more than 100 levels deep"):
        save({"k": deep}, tmp_path / "deeper.agt")
    save(list(range(100)), tmp_path / "numbers.agt")
    monkeypatch.setattr(serialization, "MAX_MANIFEST_BYTES", 1000)
    with pytest.raises(ValueError, match="more than the 1000 that ag.load accepts; store long lists"):
        save(list(range(100)), tmp_path / "other.agt")
    with pytest.raises(ValueError, match=r"numbers\.agt: array '__manifest__' \(the manifest\) takes \d+ bytes"):
        load(tmp_path / "numbers.agt")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_save_does_not_replace_a_pipe_or_device(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match=r"fifo is not a regular file .*pass save an open binary file object"):
        save(ag.ones(1), tmp_path / "fifo")
    assert stat.S_ISFIFO(os.stat(tmp_path / "fifo").st_mode) and os.listdir(tmp_path) == ["fifo"]


# --------------------------------------------------------------------------- wrong arguments
def test_save_into_a_missing_directory_names_the_path(tmp_path):
    path = tmp_path / "no" / "such" / "model.pt"
    with pytest.raises(FileNotFoundError, match="save: cannot create a file in") as info:
        save(ag.ones(1), path)
    assert info.value.filename == str(path)


def test_bytes_paths_and_file_descriptors_are_type_errors(tmp_path):
    save(ag.ones(1), tmp_path / "model.pt")
    for bad in (os.fsencode(tmp_path / "model.pt"), 3):
        with pytest.raises(TypeError, match=f"save: expected a file name .*, got {type(bad).__name__}"):
            save(ag.ones(1), bad)
        with pytest.raises(TypeError, match=f"load: expected a file name .*, got {type(bad).__name__}"):
            load(bad)


def test_text_mode_file_objects_are_type_errors(tmp_path):
    with open(tmp_path / "text.pt", "w") as f:
        with pytest.raises(TypeError, match="save: expected a binary file object, got the text-mode TextIOWrapper"):
            save(ag.ones(1), f)
    save(ag.ones(1), tmp_path / "model.pt")
    with open(tmp_path / "model.pt") as f:
        with pytest.raises(TypeError, match="load: expected a binary file object.*mode 'rb'"):
            load(f)
    with pytest.raises(TypeError, match="got the text-mode StringIO"):
        load(io.StringIO("PK"))


def test_directories_are_refused_as_open_refuses_them(tmp_path):
    with pytest.raises(IsADirectoryError):
        load(tmp_path)
    with pytest.raises(IsADirectoryError):
        save(ag.ones(1), tmp_path)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_load_refuses_pipes_without_waiting_on_them(tmp_path):
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as reader, os.fdopen(write_end, "wb"):
        with pytest.raises(TypeError, match="non-seekable BufferedReader .*read it into io.BytesIO"):
            load(reader)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match=r"fifo is not a regular file \(a pipe, socket or device\)"):
        load(tmp_path / "fifo")
