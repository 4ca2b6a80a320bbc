"""In-place arithmetic (add_, sub_, mul_, div_ and the augmented operators): outside a graph they write
straight into the tensor's memory, with NumPy's results, the version counter bumped and the same errors
as the general path."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.testing.helpers import assert_close


def _pair(device, shape=(3, 4), dtype=ag.float32, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype)
    b = rng.standard_normal(shape).astype(dtype) + 3
    return a, b, ag.tensor(a, device=device), ag.tensor(b, device=device)


@pytest.mark.parametrize("op,ref", [("add_", np.add), ("sub_", np.subtract), ("mul_", np.multiply),
                                    ("div_", np.divide)])
def test_update_under_no_grad_writes_into_the_tensors_memory(op, ref, device):
    a, b, x, y = _pair(device)
    memory = x.data
    with ag.no_grad():
        out = getattr(x, op)(y)
    assert out is x and x.data is memory
    assert_close(x, ref(a, b))


def test_augmented_operators_keep_the_tensor_and_its_memory(device):
    a, b, x, y = _pair(device)
    memory = x.data
    x -= 0.5 * y
    x += 1
    x *= y
    x /= 2.0
    assert x.data is memory
    assert_close(x, (a - np.float32(0.5) * b + 1) * b / 2)


def test_alpha_and_broadcast_operand(device):
    a, b, x, _ = _pair(device)
    row = ag.tensor(b[0], device=device)
    with ag.no_grad():
        x.sub_(row, alpha=0.25)
    assert_close(x, a - np.float32(0.25) * b[0])


def test_each_direct_update_bumps_the_version_so_saved_tensors_notice(device):
    w = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    x = ag.tensor([3.0, 4.0], device=device)
    y = (w * x).sum()                     # saves x for w's gradient
    v = x.version_counter()[0]
    with ag.no_grad():
        x.add_(1.0)
    assert x.version_counter()[0] == v + 1
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        y.backward()


def test_lower_precision_operand_is_cast_as_numpy_does(device):
    x = ag.tensor([1.0, 2.0], dtype=ag.float64, device=device)
    x.add_(ag.tensor([0.5, 0.25], dtype=ag.float32, device=device))
    assert x.dtype == ag.float64
    assert_close(x, np.array([1.5, 2.25]))


def test_results_a_tensor_cannot_hold_raise_as_before(device):
    i = ag.tensor([1, 2], device=device)
    with pytest.raises(TypeError, match="div_.*cannot be stored in place"):
        i.div_(2)
    with pytest.raises(TypeError, match="cannot be stored in place"):
        i.add_(0.5)
    x = ag.zeros(3, device=device)
    with pytest.raises(RuntimeError, match="cannot change the shape"):
        x.add_(ag.ones((2, 3), device=device))


@pytest.mark.gpu
@pytest.mark.device_index
def test_operand_on_another_device_raises():
    x = ag.zeros(2)
    other = ag.ones(2, device="cuda") if ag.cuda.is_available() else None
    if other is None:
        pytest.skip("needs a second device")
    with pytest.raises(RuntimeError, match="device"):
        x.add_(other)


def test_shifted_view_of_itself_reads_the_old_values(device):
    x = ag.arange(6, dtype=ag.float32, device=device)
    with ag.no_grad():
        x[1:].add_(x[:-1])
    assert_close(x, np.array([0, 1, 3, 5, 7, 9], np.float32))


def test_broadcast_view_is_refused():
    x = ag.zeros(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="read-only"):
        x.add_(1.0)


def test_recording_path_still_differentiates(device):
    w = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    h = w * 3
    h.mul_(w)                             # h = 3 w^2, recorded
    h.sum().backward()
    assert_close(w.grad, np.array([6.0, 12.0], np.float32))


@pytest.mark.parametrize("op,sign", [("add_", 1.0), ("sub_", -1.0)])
def test_number_operand_with_alpha_while_recording(op, sign, device):
    # the direct path (nothing recorded) took x.add_(2, alpha=3); the recorded path must too
    w = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    h = w * 1
    getattr(h, op)(2, alpha=3)
    assert_close(h, np.array([1.0, 2.0], np.float32) + sign * 6.0)
    h.sum().backward()
    assert_close(w.grad, np.ones(2, np.float32))


@pytest.mark.gpu
@pytest.mark.device_index
def test_updates_on_the_second_gpu_while_the_first_is_current():
    if not ag.cuda.is_available() or ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the stand-in's two)")
    x = ag.ones(3, device="cuda:1")
    with ag.cuda.device(0), ag.no_grad():
        x.mul_(0.5)
        x.add_(ag.ones(3, device="cuda:1"), alpha=2)
        x.copy_(x * 2)
    assert_close(x, np.full(3, 5.0, np.float32))


@pytest.mark.gpu
@pytest.mark.device_index
def test_recorded_update_on_the_second_gpu_while_the_first_is_current():
    if not ag.cuda.is_available() or ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the stand-in's two)")
    w = ag.tensor([1.0, 2.0], device="cuda:1", requires_grad=True)
    with ag.cuda.device(0):
        h = w * 3
        h.mul_(w)                         # recorded: the old h is snapshot first
        h.sum().backward()
    assert_close(w.grad, np.array([6.0, 12.0], np.float32))


def test_update_of_a_parameter_saved_by_a_graph_is_noticed_after_earlier_updates(device):
    """saved_tensors compares versions without rebuilding: a parameter updated in place (by the fast
    path) before the forward passes, one updated after it raises."""
    w = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    g = ag.tensor([0.5, 0.5], device=device)
    with ag.no_grad():
        w.sub_(g * 0.1)                   # w has a version counter now
    y = (w * w).sum()
    y.backward()
    assert_close(w.grad, 2 * np.array([0.95, 1.95], np.float32))
    y = (w * w).sum()
    with ag.no_grad():
        w.sub_(g)
    with pytest.raises(RuntimeError, match="modified by an in-place"):
        y.backward()


def test_number_operands_under_no_grad_give_plain_results(device):
    """tensor + number and tensor * number without a graph: NumPy's values and dtype, a new tensor
    outside any graph, the operand untouched."""
    a, _, x, _ = _pair(device)
    w = ag.tensor(a, device=device, requires_grad=True)
    with ag.no_grad():
        for t in (x, w):
            p, q = t * 0.1, t + 2
            assert p.grad_fn is None and not p.requires_grad and p.dtype == ag.float32
            assert_close(p, a * np.float32(0.1))
            assert_close(q, a + np.float32(2))
            assert p.data is not t.data and q.data is not t.data
    assert_close(w, a)
    y = (w * 0.1).sum()                   # recording again: the gradient flows
    y.backward()
    assert_close(w.grad, np.full_like(a, 0.1))


@pytest.mark.parametrize("src_shape", [(3,), ()], ids=["same", "broadcast"])
def test_copy_into_a_graph_tensor_cuts_the_old_values_gradient(src_shape, device):
    """x.copy_(src) in a graph: x's value is src's now, so the old value's gradient is 0 (PyTorch's
    CopyBackwards), and src gets the gradient summed back to its shape and cast to its dtype."""
    a = ag.ones(3, device=device, requires_grad=True)
    src = ag.tensor(np.full(src_shape, 2.0), dtype=ag.float64, device=device, requires_grad=True)
    b = a * 3
    b.copy_(src)
    assert b.requires_grad and b.dtype == ag.float32
    (b * ag.tensor([1.0, 2.0, 3.0], device=device)).sum().backward()
    assert_close(a.grad, np.zeros(3, np.float32))
    assert src.grad.dtype == ag.float64
    assert_close(src.grad, np.full(src_shape, 6.0) if src_shape == () else np.array([1.0, 2.0, 3.0]))
    c = a * 3                               # from a constant: still zero for the old value, and still in a graph
    c.copy_(ag.tensor([1.0, 2.0, 3.0], device=device))
    a.grad = None
    (c * 2).sum().backward()
    assert_close(a.grad, np.zeros(3, np.float32))
