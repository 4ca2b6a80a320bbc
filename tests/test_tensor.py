"""Tensor creation, dtypes, devices and conversions."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.backends import cupy_backend


def test_python_floats_become_default_float_dtype_and_arrays_keep_theirs():
    assert ag.tensor([1.0, 2.0]).dtype == ag.float32
    assert ag.tensor(1.5).dtype == ag.float32
    assert ag.tensor([1, 2]).dtype == ag.int64
    assert ag.tensor([True, False]).dtype == ag.bool_
    assert ag.tensor(np.zeros(2, dtype=np.float64)).dtype == ag.float64
    ag.set_default_dtype(ag.float64)
    assert ag.tensor([1.0]).dtype == ag.float64 and ag.ones(2).dtype == ag.float64


def test_tensor_copies_its_input_and_as_tensor_shares():
    a = np.zeros(3, dtype=np.float32)
    t = ag.tensor(a)
    s = ag.as_tensor(a)
    a[0] = 7
    assert t.tolist()[0] == 0.0 and s.tolist()[0] == 7.0


def test_tensor_from_tensor_and_list_of_tensors():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = ag.tensor(x)
    assert not y.requires_grad and y.tolist() == [1.0, 2.0]
    assert ag.tensor([ag.tensor(1.0), ag.tensor(2.0)]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize("factory,args,expected", [
    (ag.zeros, (2, 3), np.zeros((2, 3))),
    (ag.ones, ((2, 3),), np.ones((2, 3))),
    (ag.eye, (3,), np.eye(3)),
    (ag.arange, (5,), np.arange(5)),
    (ag.arange, (1, 2, 0.25), np.arange(1, 2, 0.25)),
    (ag.linspace, (0, 1, 5), np.linspace(0, 1, 5)),
])
def test_factories_match_numpy(factory, args, expected, device):
    t = factory(*args, device=device)
    assert t.device == device and t.shape == expected.shape
    np.testing.assert_allclose(t.numpy(), expected, rtol=1e-6)


def test_full_and_like_factories(device):
    x = ag.ones(2, 3, device=device, dtype=ag.float64)
    assert ag.full((2, 2), 7, device=device).dtype == ag.int64
    assert ag.full((2,), 0.5, device=device).tolist() == [0.5, 0.5]
    for f in (ag.zeros_like, ag.ones_like, ag.rand_like, ag.randn_like, ag.empty_like):
        y = f(x)
        assert y.shape == (2, 3) and y.dtype == ag.float64 and y.device == x.device
    assert ag.full_like(x, 3.0).tolist() == [[3.0] * 3] * 2
    assert ag.zeros(2, device=device, requires_grad=True).requires_grad


def test_manual_seed_makes_random_factories_reproducible(device):
    ag.manual_seed(123)
    a = ag.randn(5, device=device).numpy(), ag.rand(3, device=device).numpy(), ag.randint(0, 10, (4,), device=device).numpy()
    ag.manual_seed(123)
    b = ag.randn(5, device=device).numpy(), ag.rand(3, device=device).numpy(), ag.randint(0, 10, (4,), device=device).numpy()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    r = ag.rand(1000, device=device).numpy()
    assert r.min() >= 0 and r.max() < 1 and ag.randint(3, 5, (100,), device=device).numpy().min() >= 3


def test_factory_errors_are_clear():
    with pytest.raises(ValueError, match="negative dimension"):
        ag.zeros(2, -1)
    with pytest.raises(TypeError, match="shape of ints"):
        ag.ones(2.5)
    with pytest.raises(ValueError, match="low < high"):
        ag.randint(5, 5, (2,))


def test_attributes_and_size():
    x = ag.zeros(2, 3, 4)
    assert x.shape == (2, 3, 4) and x.ndim == 3 and x.numel() == 24
    assert x.size == 24 and x.size() == (2, 3, 4) and x.size(1) == 3 and x.size(-1) == 4
    assert x.T.shape == (4, 3, 2) and len(x) == 2 and x.is_leaf and x.grad_fn is None


def test_item_tolist_numpy_and_python_conversions():
    x = ag.tensor([[1.5, 2.0]])
    assert x.tolist() == [[1.5, 2.0]] and isinstance(x.numpy(), np.ndarray)
    assert ag.tensor(3.0).item() == 3.0 and float(ag.tensor([2.5])) == 2.5 and int(ag.tensor(4)) == 4
    assert f"{ag.tensor(1.23456):.2f}" == "1.23"
    with pytest.raises(ValueError, match="one-element"):
        x.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(x)
    assert [1, 2, 3][ag.tensor(1)] == 2


def test_to_casts_and_is_differentiable():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    assert x.to(ag.float32) is x
    y = x.to(ag.float64)
    assert y.dtype == ag.float64
    (y * y).sum().backward()
    assert x.grad.dtype == ag.float32 and x.grad.tolist() == [2.0, 4.0]
    assert x.double().dtype == ag.float64 and x.long().dtype == ag.int64 and x.to("cpu") is x


def test_detach_shares_data_and_clone_copies():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    d, c = x.detach(), x.clone()
    assert not d.requires_grad and c.grad_fn is not None
    with ag.no_grad():
        x.add_(1)
    assert d.tolist() == [2.0, 3.0] and c.tolist() == [1.0, 2.0]


def test_dlpack_round_trip_with_numpy():
    x = ag.arange(6, dtype=ag.float32).reshape(2, 3)
    a = np.from_dlpack(x)
    assert a.shape == (2, 3) and a[1, 2] == 5
    y = ag.from_dlpack(a)
    assert y.tolist() == x.tolist()


def test_numpy_array_on_the_left_defers_to_tensor():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = np.array([3.0, 4.0], dtype=np.float32) * x
    assert isinstance(y, ag.Tensor) and y.requires_grad


def test_device_parsing():
    d = ag.device("cuda:1")
    assert d.type == "cuda" and d.index == 1 and str(d) == "cuda:1"
    assert ag.device("cuda") is ag.device("cuda:0") and str(ag.device("cpu")) == "cpu"
    assert ag.device("cpu").index is None and ag.device("cpu") == "cpu"
    with pytest.raises(ValueError, match="expected 'cpu', 'cuda'"):
        ag.device("tpu")
    with pytest.raises(ValueError, match="GPU index"):
        ag.device("cuda:x")


def test_default_device_is_cpu_and_backends_are_listed():
    assert ag.get_default_device() == "cpu"
    assert "cpu" in ag.backends.available()
    assert ag.backends.get_backend("cpu").xp is np


@pytest.mark.skipif(ag.cuda.is_available(), reason="this machine has a usable GPU")
def test_asking_for_cuda_without_it_raises_with_install_hint():
    with pytest.raises(RuntimeError) as err:
        ag.zeros(2, device="cuda")
    msg = str(err.value)
    assert "CUDA was requested" in msg
    if cupy_backend._import_cupy() is None:
        assert "CuPy is not installed" in msg and 'pip install -e ".[cuda12]"' in msg and "cupy-cuda12x" in msg
    assert not ag.cuda.is_available() and ag.cuda.device_count() == 0


def test_device_mismatch_names_both_devices(device):
    if device == "cpu":
        pytest.skip("needs a GPU to have two devices")
    a, b = ag.ones(2), ag.ones(2, device=device)
    name = str(ag.device(device))
    with pytest.raises(RuntimeError, match=f"cpu and {name}|{name} and cpu"):
        a + b
    with pytest.raises(RuntimeError, match="cpu"):
        ag.matmul(a.reshape(1, 2), b.reshape(2, 1))


def test_numpy_array_never_slips_into_a_cuda_op(device):
    if device == "cpu":
        pytest.skip("needs a GPU")
    x = ag.ones(2, device=device)
    with pytest.raises(RuntimeError, match="one device"):
        x * np.ones(2, dtype=np.float32)
    assert (x * np.float32(2.0)).tolist() == [2.0, 2.0]     # 0-d host values are fine


def test_cuda_tensor_round_trip_and_repr(device):
    if device == "cpu":
        pytest.skip("needs a GPU")
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    name = str(ag.device(device))
    assert f"device='{name}" in repr(x)        # "cuda:0 (simulated)" on the CuPy stand-in
    y = x.cpu() * 2
    y.sum().backward()
    assert x.grad.device == name and x.grad.tolist() == [2.0, 2.0]


def test_deepcopy_copies_leaves_with_their_grad_and_keeps_sharing():
    import copy
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).sum().backward()
    state = copy.deepcopy({"a": x, "b": [x]})
    assert state["a"] is state["b"][0] and state["a"] is not x
    assert state["a"].requires_grad and state["a"].grad.tolist() == [2.0, 2.0]
    with ag.no_grad():
        x.add_(1)
    assert state["a"].tolist() == [1.0, 2.0]
    with pytest.raises(RuntimeError, match="only leaf tensors"):
        copy.deepcopy(x * 2)


@pytest.mark.gpu
@pytest.mark.device_index
def test_deepcopy_on_the_second_gpu_while_the_first_is_current():
    import copy
    if not ag.cuda.is_available() or ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the stand-in's two)")
    x = ag.tensor([1.0, 2.0], device="cuda:1", requires_grad=True)
    (x * 2).sum().backward()
    with ag.cuda.device(0):
        y = copy.deepcopy(x)
        assert y.data.device.id == 1 and y.grad.data.device.id == 1
        assert (y + y).tolist() == [2.0, 4.0] and (y.grad + y.grad).tolist() == [4.0, 4.0]


@pytest.mark.parametrize("value", [np.float16(0.3), np.float32(0.3), np.float64(0.3), np.int8(3),
                                   np.int32(3), np.int64(3), np.uint8(3), np.bool_(True)],
                         ids=lambda v: type(v).__name__)
def test_numpy_scalar_keeps_its_dtype(value, device):
    assert ag.tensor(value, device=device).dtype == value.dtype
    assert ag.Tensor(value, device=device).dtype == value.dtype
    assert ag.as_tensor(value, device=device).dtype == value.dtype


def test_numpy_float64_scalar_is_not_a_python_float_even_under_another_default():
    # np.float64 subclasses float, but it carries a dtype: it stays float64 as in NumPy and PyTorch
    assert ag.tensor(np.float64(0.3)).dtype == ag.float64
    assert ag.tensor(np.float64(0.3)).item() == 0.3
    ag.set_default_dtype(ag.float16)
    assert ag.tensor(np.float32(0.3)).dtype == ag.float32 and ag.tensor(0.3).dtype == ag.float16


@pytest.mark.parametrize("data", [[np.float64(1.0)], [np.float64(1.0), 2.0], [np.float32(1.0), 2.0],
                                  [[1.0], [np.float16(2.0)]], [np.float16(1.0), np.float16(2.0)],
                                  [np.array([1.0, 2.0]), [3.0, 4.0]], [np.int32(1), 2]])
def test_list_holding_numpy_values_takes_numpy_dtype(data):
    assert ag.tensor(data).dtype == np.asarray(data).dtype


def test_list_of_python_numbers_takes_the_default_float_dtype():
    assert ag.tensor([1.0, 2]).dtype == ag.float32 and ag.tensor([[1], [2.5]]).dtype == ag.float32
    ag.set_default_dtype(ag.float64)
    assert ag.tensor([1.0, 2]).dtype == ag.float64 and ag.tensor((0.5,)).dtype == ag.float64


def test_list_of_tensors_keeps_their_dtype():
    t = ag.tensor([1.0, 2.0], dtype=ag.float64)
    assert ag.tensor([t, t]).dtype == ag.float64
    assert ag.tensor([ag.tensor(1.0), ag.tensor(2.0)]).dtype == ag.float32


def test_cuda_backend_keeps_python_numbers_weak_from_cupy_14(monkeypatch):
    # CuPy 14 follows NumPy 2's promotion (NEP 50); CuPy 13 promotes Python numbers by value, so there the
    # backend passes them typed (CupyBackend.scalar)
    from types import SimpleNamespace
    monkeypatch.setattr(cupy_backend, "_simulated", False)
    for version, weak in [("13.6.0", False), ("14.0.0rc1", True), ("14.2.0", True), ("15.0.0", True)]:
        assert cupy_backend._weak_scalars(SimpleNamespace(__version__=version)) is weak
    assert cupy_backend._weak_scalars(SimpleNamespace()) is False


@pytest.mark.parametrize("weak", [True, False], ids=["cupy14", "cupy13"])
def test_python_number_operands_promote_alike_with_weak_and_typed_scalars(weak, device, monkeypatch):
    # weak_scalars False (CuPy 13) takes the typed path through CupyBackend.scalar: same dtypes and values
    if device == "cpu":
        pytest.skip("the CUDA backend's two paths")
    backend = ag.ones(1, device=device).device.backend
    monkeypatch.setattr(backend, "weak_scalars", weak)
    cases = [(ag.float32, lambda t: t * 1.1), (ag.float32, lambda t: 0.5 + t), (ag.float16, lambda t: t - 3),
             (ag.float64, lambda t: 2.0 / t), (ag.int32, lambda t: t * 0.5), (ag.int8, lambda t: t + 100),
             (ag.bool_, lambda t: t + 1), (ag.float32, lambda t: t * np.float64(2.0)),
             (ag.float32, lambda t: t * 1j), (ag.uint8, lambda t: 3 - t)]
    for dtype, f in cases:
        x = ag.tensor([1, 2, 4], dtype=dtype)
        want, got = f(x), f(x.to(device))
        assert got.dtype == want.dtype and np.array_equal(got.cpu().numpy(), want.numpy()), (dtype, want, got)
    x = ag.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    (x * 1.5 + 0.25).sum().backward()
    assert x.grad.dtype == ag.float32 and x.grad.tolist() == [1.5, 1.5, 1.5]
