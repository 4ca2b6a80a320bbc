"""Indexing beyond the op table: accumulation of repeated indices, bounds and device errors,
setitem in place (with and without autograd), and the same checks on every device."""
import numpy as np
import pytest

import autograd_gpu as ag


# --------------------------------------------------------------------------- gradients
def test_repeated_indices_accumulate_in_backward():
    x = ag.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x[ag.tensor([0, 2, 0, 0])] * ag.tensor([1.0, 2.0, 3.0, 4.0])
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [8.0, 0.0, 2.0, 0.0])


def test_repeated_index_pairs_accumulate_in_backward(device):
    x = ag.zeros(2, 3, device=device, requires_grad=True)
    x[[0, 1, 0], [2, 2, 2]].sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0, 2], [0, 0, 1]])


def test_gather_repeated_indices_accumulate_in_backward(device):
    x = ag.zeros(2, 3, device=device, requires_grad=True)
    ag.gather(x, 1, ag.tensor([[0, 0], [2, 0]], device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[2, 0, 0], [1, 0, 1]])


def test_scatter_add_sums_repeated_targets(device):
    out = ag.scatter_add(ag.zeros(3, device=device), 0, ag.tensor([0, 2, 0], device=device),
                         ag.tensor([1.0, 2.0, 3.0], device=device))
    np.testing.assert_array_equal(out.numpy(), [4.0, 0.0, 2.0])


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "int32", "int64"])
def test_scatter_add_of_integer_and_bool_tensors_matches_numpy(device, dtype):
    # CuPy's scatter_add has CUDA atomics for int32/int64/uint32/uint64/floats only: the CUDA backend adds
    # the other dtypes in uint64 and folds the sums back, wrapping as NumPy's add.at does
    x = np.array([[100, 1], [0, 0], [5, 7]]).astype(dtype)
    idx = np.array([[0, 2], [0, 2], [1, 0]])
    src = np.array([[100, 1], [27, 1], [1, 0]]).astype(dtype)
    expected = x.copy()
    np.add.at(expected, (idx, np.arange(2)[None, :]), src)
    out = ag.scatter_add(ag.tensor(x, device=device), 0, ag.tensor(idx, device=device), ag.tensor(src, device=device))
    assert out.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_second_derivative_through_integer_index():
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x[[0, 0, 2]] ** 2).sum()             # = 2 x0^2 + x2^2
    (g,) = ag.autograd.grad(y, x, create_graph=True)
    (h,) = ag.autograd.grad(g.sum(), x)
    np.testing.assert_array_equal(h.numpy(), [4.0, 0.0, 2.0])


def test_basic_index_is_a_view_sharing_memory():
    x = ag.zeros(2, 3)
    row = x[1]
    x[1, 2] = 5.0
    assert row.numpy()[2] == 5.0


# --------------------------------------------------------------------------- errors
# Index arrays are checked on the device: the CPU raises in the op, a GPU at the next read (.numpy(),
# .item(), synchronize()), as PyTorch's device-side asserts do; so each test reads the result.
def test_out_of_range_index_array_raises_index_error(device):
    x = ag.zeros(3, device=device)
    with pytest.raises(IndexError, match=r"getitem.*index 3 is out of bounds.*size 3"):
        x[ag.tensor([0, 3], device=device)].numpy()


def test_out_of_range_negative_index_array_raises_index_error(device):
    x = ag.zeros(2, 3, device=device)
    with pytest.raises(IndexError, match=r"getitem.*index -4 is out of bounds.*size 3"):
        x[:, [-4]].numpy()


def test_out_of_range_int_index_raises_index_error(device):
    x = ag.zeros(2, 3, device=device)
    with pytest.raises(IndexError, match=r"getitem: index 3 is out of bounds for dim 1 of size 3"):
        x[0, 3]


def test_out_of_range_gather_index_raises_index_error(device):
    x = ag.zeros(2, 3, device=device)
    with pytest.raises(IndexError, match=r"gather.*index 3 is out of bounds.*size 3"):
        ag.gather(x, 1, ag.tensor([[0], [3]], device=device)).numpy()


def test_out_of_range_scatter_add_index_raises_index_error(device):
    x = ag.zeros(3, device=device)
    with pytest.raises(IndexError, match=r"scatter_add.*index 5 is out of bounds.*size 3"):
        ag.scatter_add(x, 0, ag.tensor([5], device=device), ag.ones(1, device=device)).numpy()


def test_too_many_indices_raises_index_error():
    with pytest.raises(IndexError, match=r"getitem: too many indices for a tensor of shape \(2, 3\)"):
        ag.zeros(2, 3)[0, 1, 2]


def test_bool_mask_shape_mismatch_raises(device):
    x = ag.zeros(3, 4, device=device)
    mask = ag.tensor([True, False], device=device)
    with pytest.raises(IndexError, match=r"getitem: the bool mask of shape \(2,\) does not match .* \(3, 4\)"):
        x[mask]


def test_float_index_tensor_raises_type_error():
    with pytest.raises(TypeError, match="getitem: indices must be integers or bools, got an index of dtype float32"):
        ag.zeros(3)[ag.tensor([0.0, 1.0])]


def test_float_gather_index_raises_type_error():
    with pytest.raises(TypeError, match="gather: expected index to be an integer tensor, got dtype float32"):
        ag.gather(ag.zeros(2, 3), 1, ag.tensor([[0.0], [1.0]]))


def test_gather_index_with_wrong_ndim_raises():
    with pytest.raises(ValueError, match=r"gather: expected index with as many dims as the tensor \(2\)"):
        ag.gather(ag.zeros(2, 3), 1, ag.tensor([0, 1]))


def test_index_select_needs_a_1d_index():
    with pytest.raises(ValueError, match=r"index_select: expected a 1-d index, got shape \(1, 2\)"):
        ag.index_select(ag.zeros(2, 3), 0, ag.tensor([[0, 1]]))


@pytest.mark.skipif(not ag.cuda.is_available(), reason="needs a CUDA device to mix devices")
@pytest.mark.gpu
@pytest.mark.device_index
def test_index_on_another_device_raises():
    with pytest.raises(RuntimeError, match="getitem: .*cuda:0.*cpu"):
        ag.zeros(3, device="cuda")[ag.tensor([0, 1])]


@pytest.mark.skipif(not ag.cuda.is_available(), reason="needs a CUDA device to mix devices")
@pytest.mark.gpu
@pytest.mark.device_index
def test_gather_index_on_another_device_raises():
    with pytest.raises(RuntimeError, match="gather: .*cpu.*cuda:0"):
        ag.gather(ag.zeros(2, 3), 1, ag.tensor([[0], [1]], device="cuda"))


@pytest.mark.skipif(not ag.cuda.is_available(), reason="needs a CUDA device to mix devices")
@pytest.mark.gpu
@pytest.mark.device_index
def test_setitem_value_on_another_device_raises():
    x = ag.zeros(3)
    with pytest.raises(RuntimeError, match="setitem: .*cpu.*cuda:0"):
        x[0] = ag.ones((), device="cuda")


# --------------------------------------------------------------------------- setitem
def test_setitem_under_no_grad_writes_in_place():
    x = ag.zeros(2, 3, requires_grad=True)
    before = x.data
    with ag.no_grad():
        x[0, 1:] = ag.tensor([1.0, 2.0])
    assert x.data is before
    np.testing.assert_array_equal(x.numpy(), [[0, 1, 2], [0, 0, 0]])
    assert x.is_leaf and x.grad_fn is None


def test_setitem_under_no_grad_bumps_the_version():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()                               # saves its output y for backward
    with ag.no_grad():
        y[0] = 0.0
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.sum().backward()


def test_setitem_gives_gradients_to_the_tensor_and_the_value(device):
    x = ag.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device, requires_grad=True)
    v = ag.tensor([10.0, 20.0], device=device, requires_grad=True)
    y = x * 1.0                               # a non-leaf: leaves that require grad cannot be written
    y[:, 1] = v
    (y * ag.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[1, 0, 3], [4, 0, 6]])
    np.testing.assert_array_equal(v.grad.numpy(), [2.0, 5.0])


def test_setitem_broadcast_value_gets_summed_gradient():
    x = ag.zeros(2, 3, requires_grad=True)
    v = ag.tensor(1.5, requires_grad=True)
    y = x + 0.0
    y[ag.tensor([[True, False, True], [False, False, True]])] = v
    y.sum().backward()
    assert v.grad.item() == 3.0
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [1, 1, 0]])


def test_setitem_on_leaf_requiring_grad_raises():
    x = ag.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="setitem: a leaf tensor that requires grad"):
        x[0] = 1.0


def test_backward_through_saved_tensor_modified_by_setitem_raises():
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.exp()                               # saves its output y for backward
    y[1] = 0.0
    with pytest.raises(RuntimeError, match="Exp: one of the tensors it saved for backward"):
        y.sum().backward()


def test_setitem_shape_mismatch_raises():
    x = ag.zeros(2, 3)
    with pytest.raises(ValueError, match="setitem: could not broadcast"):
        x[0] = ag.ones(2)
