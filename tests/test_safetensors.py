"""ag.safetensors: files and bytes in the safetensors format, bfloat16 and metadata included; ag.load
recognising them; PyTorch models moved both ways through safetensors.torch; clear errors."""
import io
import json
import struct
import sys

import numpy as np
import pytest

import autograd_gpu as ag

pytest.importorskip("safetensors")
st = ag.safetensors

DTYPES = [ag.float32, ag.float64, ag.float16, ag.bfloat16, ag.int64, ag.int32, ag.int8, ag.uint8, ag.bool_,
          ag.complex64]


def _tensors(device):
    out = {}
    for i, dt in enumerate(DTYPES):
        values = np.arange(-3, 3, dtype=np.float64).reshape(2, 3) * 0.75
        if dt == ag.bool_:
            values = values > 0
        out[f"t{i}.{dt}"] = ag.tensor(values, device=device).to(dt)
    out["scalar"] = ag.tensor(2.5, device=device)
    out["empty"] = ag.zeros(0, 4, device=device)
    return out


def _same(a, b, device):
    assert isinstance(b, ag.Tensor) and b.device == device
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_file_roundtrip_every_dtype_with_metadata(tmp_path, device):
    tensors = _tensors(device)
    path = tmp_path / "m.safetensors"
    st.save_file(tensors, path, metadata={"format": "pt", "step": "12"})
    got = st.load_file(path, device=device)
    assert sorted(got) == sorted(tensors)
    for k in tensors:
        _same(tensors[k], got[k], ag.device(device))
    assert st.load_metadata(path) == {"format": "pt", "step": "12"}


def test_bytes_roundtrip_and_metadata(device):
    tensors = _tensors(device)
    data = st.save(tensors, metadata={"note": "bytes"})
    assert isinstance(data, bytes)
    got = st.load(data, device=device)
    assert list(got) == sorted(tensors)
    for k in tensors:
        _same(tensors[k], got[k], ag.device(device))
    assert st.load_metadata(data) == {"note": "bytes"}
    assert st.load_metadata(st.save({"a": ag.ones(1)})) == {}


def test_loads_onto_the_cpu_by_default_and_onto_a_named_device(tmp_path, device):
    path = tmp_path / "w.safetensors"
    st.save_file({"w": ag.ones(2, 3, device=device)}, path)
    assert st.load_file(path)["w"].device == "cpu"
    assert st.load_file(path, device=device)["w"].device == ag.device(device)


def test_tied_tensor_is_stored_under_both_names(tmp_path):
    w = ag.randn(3, 3)
    st.save_file({"encoder.weight": w, "decoder.weight": w}, tmp_path / "tied.safetensors")
    got = st.load_file(tmp_path / "tied.safetensors")
    np.testing.assert_array_equal(got["encoder.weight"].numpy(), w.numpy())
    np.testing.assert_array_equal(got["decoder.weight"].numpy(), w.numpy())


def test_saving_copies_noncontiguous_and_grad_tensors(tmp_path):
    x = ag.randn(3, 4, requires_grad=True)
    st.save_file({"t": x.T, "x": x * 2}, tmp_path / "v.safetensors")
    got = st.load_file(tmp_path / "v.safetensors")
    np.testing.assert_array_equal(got["t"].numpy(), x.detach().numpy().T)
    assert not got["x"].requires_grad


def test_ag_load_recognises_safetensors_by_header_not_name(tmp_path, device):
    tensors = {"a": ag.ones(2, dtype=ag.bfloat16), "b": ag.arange(4)}
    path = tmp_path / "weights.bin"                      # no .safetensors extension
    st.save_file(tensors, path)
    for got in (ag.load(path), ag.load(io.BytesIO(path.read_bytes()))):
        assert sorted(got) == ["a", "b"] and got["a"].dtype == ag.bfloat16
        np.testing.assert_array_equal(got["b"].numpy(), np.arange(4))
    moved = ag.load(path, map_location=device)
    assert all(t.device == ag.device(device) for t in moved.values())
    assert ag.load(path, map_location={"cpu": device})["a"].device == ag.device(device)


def test_ag_save_files_still_load_as_before(tmp_path):
    ag.save({"x": ag.ones(2)}, tmp_path / "obj.pt")
    assert list(ag.load(tmp_path / "obj.pt")) == ["x"]


def _write(tmp_path, data, name="bad.safetensors"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("data, where", [
    (b"hello, not a safetensors file", "not a safetensors file"),
    (b"", "not a safetensors file"),
    (struct.pack("<Q", 1000) + b'{"a": 1}', "not a safetensors file"),         # header longer than the file
    (struct.pack("<Q", 8) + b"{ broken", "not a valid safetensors file"),
    (struct.pack("<Q", 54) + b'{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}', "not a valid safetensors"),
])
def test_damaged_files_raise_value_error_naming_the_file(tmp_path, data, where):
    path = _write(tmp_path, data)
    with pytest.raises(ValueError, match=where) as e:
        st.load_file(path)
    assert str(path) in str(e.value)
    with pytest.raises(ValueError):
        st.load(data)


def test_ag_load_of_a_foreign_file_names_both_formats(tmp_path):
    path = _write(tmp_path, b"plain text, not a checkpoint", "x.safetensors")
    with pytest.raises(ValueError, match="ag.save or a safetensors file"):
        ag.load(path)


def test_damaged_metadata_raises_value_error():
    header = json.dumps({"__metadata__": [1, 2]}).encode()
    with pytest.raises(ValueError, match="__metadata__"):
        st.load_metadata(struct.pack("<Q", len(header)) + header)
    with pytest.raises(ValueError, match="not a safetensors file"):
        st.load_metadata(b"1234")


@pytest.mark.parametrize("tensors, match", [
    ([ag.ones(2)], "expected a dict of str -> Tensor, got list"),
    ({1: ag.ones(2)}, "expected str names, got int"),
    ({"a": np.ones(2)}, "expected a Tensor for 'a', got ndarray"),
    ({"a": 1.5}, "expected a Tensor for 'a', got float"),
    ({"a": ag.ones(2, dtype=ag.complex128)}, "'a' has dtype complex128, which safetensors cannot store"),
])
def test_save_refuses_what_the_format_cannot_hold(tmp_path, tensors, match):
    with pytest.raises(TypeError, match=match):
        st.save_file(tensors, tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match=match):
        st.save(tensors)
    assert not (tmp_path / "x.safetensors").exists()


def test_bad_metadata_and_arguments_are_type_errors(tmp_path):
    with pytest.raises(TypeError, match="metadata as a dict of str -> str"):
        st.save({"a": ag.ones(1)}, metadata={"step": 3})
    with pytest.raises(TypeError, match="for a file name use load_file"):
        st.load(str(tmp_path / "x.safetensors"))
    with pytest.raises(TypeError, match="expected a file name"):
        st.load_file(3)


def test_missing_package_gives_an_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "safetensors", None)
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ImportError, match=r'pip install -e "\.\[safetensors\]"'):
        st.save({"a": ag.ones(1)})


# --------------------------------------------------------------------------- PyTorch, both ways
class _AgMLP(ag.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = ag.nn.Sequential(ag.nn.Linear(6, 16), ag.nn.ReLU(), ag.nn.Linear(16, 3))
        self.norm = ag.nn.LayerNorm(3)

    def forward(self, x):
        return self.norm(self.net(x))


def _torch_mlp(torch):
    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
            self.norm = torch.nn.LayerNorm(3)

        def forward(self, x):
            return self.norm(self.net(x))
    return MLP()


# float32 outputs agree to rounding; bfloat16 ones to one bfloat16 ulp at these magnitudes (both
# libraries accumulate in float32 and round each op's result, in orders that may differ)
_OUT_TOL = {"float32": dict(rtol=1e-5, atol=1e-6), "bfloat16": dict(rtol=1.6e-2, atol=1.6e-2)}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_pytorch_model_loads_into_an_equivalent_ag_model(tmp_path, dtype):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file as torch_save_file
    torch.manual_seed(0)
    tm = _torch_mlp(torch).to(getattr(torch, dtype))
    torch_save_file(tm.state_dict(), str(tmp_path / "torch.safetensors"))

    state = st.load_file(tmp_path / "torch.safetensors")
    assert all(t.dtype == getattr(ag, dtype) for t in state.values())
    am = _AgMLP().to(getattr(ag, dtype))
    am.load_state_dict(state)

    x = np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x).to(getattr(torch, dtype))).float().numpy()
    got = am(ag.tensor(x).to(getattr(ag, dtype)))
    assert got.dtype == getattr(ag, dtype)
    np.testing.assert_allclose(got.float().numpy(), want, **_OUT_TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ag_model_loads_into_an_equivalent_pytorch_model(tmp_path, dtype):
    torch = pytest.importorskip("torch")
    from safetensors.torch import load_file as torch_load_file
    ag.manual_seed(0)
    am = _AgMLP().to(getattr(ag, dtype))
    st.save_file(am.state_dict(), tmp_path / "ag.safetensors", metadata={"format": "pt"})

    state = torch_load_file(str(tmp_path / "ag.safetensors"))
    assert all(t.dtype == getattr(torch, dtype) for t in state.values())
    tm = _torch_mlp(torch).to(getattr(torch, dtype))
    tm.load_state_dict(state)

    x = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    with torch.no_grad():
        want = tm(torch.from_numpy(x).to(getattr(torch, dtype))).float().numpy()
    got = am(ag.tensor(x).to(getattr(ag, dtype)))
    np.testing.assert_allclose(got.float().numpy(), want, **_OUT_TOL[dtype])
