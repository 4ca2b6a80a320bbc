"""Engine behaviour: accumulation, retain_graph, create_graph, grad modes, hooks, in-place checks."""
import threading

import numpy as np
import pytest

import autograd_gpu as ag


def test_gradients_accumulate_over_two_backward_calls(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [3 + 2, 3 + 4]


def test_broadcast_gradient_is_reduced_to_each_input_shape(device):
    a = ag.ones(2, 3, 4, device=device, requires_grad=True)
    b = ag.ones(3, 1, device=device, requires_grad=True)
    c = ag.ones((), device=device, requires_grad=True)
    (a * b + c).sum().backward()
    assert a.grad.shape == (2, 3, 4) and b.grad.shape == (3, 1) and c.grad.shape == ()
    assert b.grad.numpy().tolist() == [[8.0]] * 3
    assert c.grad.item() == 24.0


def test_backward_twice_without_retain_graph_raises(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        y.backward()


def test_backward_twice_with_retain_graph_accumulates(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    assert x.grad.tolist() == [4.0, 8.0]


def test_saved_tensors_are_released_after_backward(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x.exp()
    node = y.grad_fn
    y.sum().backward()
    assert node._saved is None


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match="does not require grad"):
        ag.tensor([1.0]).backward()


def test_backward_of_non_scalar_needs_grad_argument():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be omitted only"):
        (x * 2).backward()
    (x * 2).backward(ag.tensor([1.0, 10.0]))
    assert x.grad.tolist() == [2.0, 20.0]


def test_backward_grad_of_wrong_shape_raises():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="shape"):
        (x * 2).backward(ag.ones(3))


def test_grad_of_leaf_does_not_alias_other_gradients(device):
    a = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = ag.tensor([3.0, 4.0], device=device, requires_grad=True)
    g = ag.tensor([1.0, 1.0], device=device)
    (a + b).backward(g)
    assert a.grad is not b.grad and a.grad is not g
    a.grad.data[0] = 100.0
    assert b.grad.tolist() == [1.0, 1.0] and g.tolist() == [1.0, 1.0]


def test_a_view_that_alone_reaches_its_memory_becomes_grad_without_a_copy_and_shared_views_are_copied(device):
    """conv's weight gradient is a reshape of a fresh product: on the CPU it becomes .grad as it is (no copy a
    step). A gradient that is a view of memory something else holds (the user's reshaped tensor, a reshape
    of another leaf's gradient) is still copied, so .grad never aliases other memory."""
    w = ag.randn(4, 2, 3, 3, device=device, requires_grad=True)
    ag.nn.functional.conv2d(ag.randn(2, 2, 5, 5, device=device), w).sum().backward()
    if ag.device(device).type == "cpu":
        assert w.grad.data.base is not None               # kept as the view it came as
    g0 = w.grad
    ag.nn.functional.conv2d(ag.randn(2, 2, 5, 5, device=device), w).sum().backward()
    assert w.grad is g0                                   # accumulated in place, as any .grad
    a = ag.ones(2, 3, device=device, requires_grad=True)
    b = ag.ones(6, device=device, requires_grad=True)
    seed = ag.ones(6, device=device)
    (a.reshape(6) + b).backward(seed)                     # a's gradient: a view of the seed, held by the caller
    a.grad.data[0, 0] = 100.0
    assert seed.tolist() == [1.0] * 6 and b.grad.tolist() == [1.0] * 6
    x = ag.ones(2, 3, device=device, requires_grad=True)
    y = ag.ones(2, 3, device=device, requires_grad=True)
    s = (x * 2).reshape(6)
    (s.reshape(2, 3) + y.reshape(6).reshape(2, 3) * 0 + s.reshape(2, 3)).sum().backward()
    x.grad.data[0, 0] = 100.0
    assert y.grad.tolist() == [[0.0] * 3] * 2 and x.grad.tolist()[1] == [4.0] * 3


@pytest.mark.parametrize("op", [lambda x: ag.relu(x * 2), ag.tanh, ag.sigmoid, lambda x: x * x],
                         ids=["relu", "tanh", "sigmoid", "mul"])
def test_a_root_gradient_of_another_dtype_is_cast_to_the_outputs_as_pytorch(op, device):
    """backward(gradient) with a float64 (or integer) gradient for a float32 output: cast to the output's
    dtype first, as PyTorch does (on CUDA the fused backward kernels, typed by the output, refused it);
    complex against real is refused, as PyTorch refuses it."""
    x = ag.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    ref = ag.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    op(ref).backward(ag.tensor([1.0, 2.0, 3.0], device=device))
    op(x).backward(ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64, device=device))
    assert x.grad.dtype == ag.float32
    np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-6)
    x.grad = None
    op(x).backward(ag.tensor([1, 2, 3], device=device))
    np.testing.assert_allclose(x.grad.numpy(), ref.grad.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="complex"):
        op(x).backward(ag.ones(3, dtype=ag.complex64, device=device))


def test_deep_chain_of_a_million_ops_has_no_recursion_error():
    x = ag.tensor([0.5], requires_grad=True)
    y = x
    for _ in range(1_000_000):
        y = -y
    y.sum().backward()
    assert x.grad.tolist() == [1.0]
    del y   # freeing the chain must not recurse either


def test_second_and_third_derivatives_with_create_graph(device):
    x = ag.tensor(1.5, dtype=ag.float64, device=device, requires_grad=True)
    y = x ** 4
    (g1,) = ag.autograd.grad(y, x, create_graph=True)
    (g2,) = ag.autograd.grad(g1, x, create_graph=True)
    (g3,) = ag.autograd.grad(g2, x)
    assert np.allclose([g1.item(), g2.item(), g3.item()], [4 * 1.5 ** 3, 12 * 1.5 ** 2, 24 * 1.5])


def test_create_graph_backward_leaves_differentiable_grad(device):
    x = ag.tensor([1.0, 2.0], dtype=ag.float64, device=device, requires_grad=True)
    (x.sin() * x).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    gx = x.grad
    x.grad = None
    gx.sum().backward()
    xs = np.array([1.0, 2.0])
    assert np.allclose(x.grad.numpy(), 2 * np.cos(xs) - xs * np.sin(xs))


def test_autograd_grad_returns_tuple_and_leaves_grad_untouched(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    w = ag.tensor([3.0, 4.0], device=device, requires_grad=True)
    gx, gw = ag.autograd.grad((x * w).sum(), [x, w])
    assert gx.tolist() == [3.0, 4.0] and gw.tolist() == [1.0, 2.0]
    assert x.grad is None and w.grad is None


def test_autograd_grad_of_intermediate_tensor(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    h = x * 2
    y = (h * h).sum()
    (gh,) = ag.autograd.grad(y, h)
    assert gh.tolist() == [4.0, 8.0]


def test_autograd_grad_unused_input(device):
    x = ag.tensor([1.0], device=device, requires_grad=True)
    z = ag.tensor([1.0], device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="allow_unused=True"):
        ag.autograd.grad((x * 2).sum(), [x, z])
    gx, gz = ag.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
    assert gz is None and gx.tolist() == [2.0]


def test_no_grad_stops_recording_and_restores():
    x = ag.tensor([1.0], requires_grad=True)
    with ag.no_grad():
        y = x * 2
        with ag.enable_grad():
            z = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert z.requires_grad and ag.is_grad_enabled()


def test_no_grad_and_set_grad_enabled_as_decorators():
    x = ag.tensor([1.0], requires_grad=True)

    @ag.no_grad()
    def f(t):
        return t * 2

    @ag.set_grad_enabled(False)
    def g(t):
        return t * 2

    assert ag.is_grad_enabled()
    assert not f(x).requires_grad and not g(x).requires_grad
    ag.set_grad_enabled(False)
    try:
        assert not (x * 2).requires_grad
    finally:
        ag.set_grad_enabled(True)


def test_no_grad_is_thread_local():
    seen = {}
    started, release = threading.Event(), threading.Event()

    def other():
        started.wait()
        x = ag.tensor([1.0], requires_grad=True)
        seen["other"] = (x * 2).requires_grad
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with ag.no_grad():
        started.set()
        release.wait(5)
    t.join()
    assert seen["other"] is True


def test_retain_grad_keeps_non_leaf_gradient(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    h = x * 3
    h.retain_grad()
    (h * h).sum().backward()
    assert h.grad.tolist() == [6.0, 12.0]
    assert h.retains_grad


def test_register_hook_can_replace_gradient(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    h = x * 3
    handle = h.register_hook(lambda g: g * 10)
    x.register_hook(lambda g: g + 1)
    h.sum().backward()
    assert x.grad.tolist() == [31.0, 31.0]
    handle.remove()


def test_inplace_on_saved_tensor_then_backward_raises_naming_op(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    y = x.exp()
    z = y * 2
    y.add_(1)
    with pytest.raises(RuntimeError, match="Exp.*in-place"):
        (z + y).sum().backward()


def test_inplace_on_non_leaf_records_gradient(device):
    x = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    w = ag.tensor([3.0, 4.0], device=device, requires_grad=True)
    h = x * 1
    h *= w
    h += 1
    h.sum().backward()
    assert x.grad.tolist() == [3.0, 4.0] and w.grad.tolist() == [1.0, 2.0]
    assert h.version_counter()[0] == 2


def test_inplace_on_leaf_requiring_grad_raises_unless_no_grad(device):
    w = ag.tensor([1.0], device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf tensor"):
        w += 1
    with ag.no_grad():
        w -= 0.5
    assert w.tolist() == [0.5] and w.is_leaf and w.requires_grad


def test_inplace_shares_memory_with_detached_alias(device):
    x = ag.zeros(3, device=device)
    alias = x.detach()
    x.add_(2)
    x.zero_()
    x.fill_(5.0)
    assert alias.tolist() == [5.0, 5.0, 5.0]


def test_float32_stays_float32_with_python_scalars(device):
    x = ag.ones(3, device=device)
    for y in (x * 2.5, 2.5 * x, x + 1, x / 3, x ** 2.0, 1.0 - x, x.clamp(0.1, 0.5)):
        assert y.dtype == ag.float32


def test_integer_tensor_with_python_float_gives_default_float(device):
    i = ag.tensor([1, 2, 3], device=device)
    assert i.dtype == ag.int64
    assert (i * 0.5).dtype == ag.float32
    assert (i / 2).dtype == ag.float32 and (i / 2).tolist() == [0.5, 1.0, 1.5]
    assert (i * 2).dtype == ag.int64


def test_comparisons_and_floordiv_are_constants_of_the_graph(device):
    x = ag.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
    for c in (x > 1, x == 2, x // 2, ag.sign(x)):
        assert not c.requires_grad and c.grad_fn is None
    (x * (x > 1)).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0]


def test_remainder_is_differentiable_as_pytorchs(device):
    """% is remainder: gradient 1 for the dividend, -floor(a / b) for the divisor (PyTorch)."""
    a = ag.tensor([5.0, -7.0, 3.5], device=device, requires_grad=True)
    b = ag.tensor([2.0, 3.0, -1.5], device=device, requires_grad=True)
    (a % b).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0, 1.0]
    assert b.grad.tolist() == [-2.0, 3.0, 3.0]


def test_numpy_array_operand_is_wrapped_on_cpu():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x * np.array([3.0, 4.0], dtype=np.float32)
    y.sum().backward()
    assert x.grad.tolist() == [3.0, 4.0]
    assert (np.float32(2.0) * x).dtype == ag.float32


def test_shared_weight_and_diamond_graph_gradients_are_exact(device):
    w = ag.tensor(2.0, dtype=ag.float64, device=device, requires_grad=True)
    a = w * 3          # diamond: w -> a, w -> b -> c, both into out
    b = w * w
    out = a * b + b
    out.backward()
    assert out.item() == 2 * 3 * 4 + 4
    assert w.grad.item() == pytest.approx(9 * 2 ** 2 + 2 * 2)


def test_repr_shows_grad_fn_requires_grad_and_dtype():
    assert repr(ag.tensor([1.0, 2.0, 3.0])) == "Tensor([1., 2., 3.])"
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    assert repr(x) == "Tensor([1., 2.], requires_grad=True)"
    assert repr(x + 1) == "Tensor([2., 3.], grad_fn=Add)"
    assert "dtype=float64" in repr(ag.tensor([1.0], dtype=ag.float64))


def test_requires_grad_on_integer_tensor_raises():
    with pytest.raises(RuntimeError, match="floating-point"):
        ag.tensor([1, 2], requires_grad=True)


def test_zero_dim_results_are_arrays_not_numpy_scalars():
    x = ag.tensor(2.0, requires_grad=True)
    for y in (x + x, x * 3, x.exp(), ag.sum(ag.ones(3)), x > 1):
        assert type(y.data).__name__ == "ndarray"


def test_max_of_empty_tensor_over_a_non_empty_dim_is_empty():
    # found by the property-based tests: NumPy allows this, only an empty reduced dim has no value
    x = ag.zeros(0, 3, requires_grad=True)
    y = x.max(dim=1)
    assert y.shape == (0,)
    y.sum().backward()
    assert x.grad.shape == (0, 3)
    with pytest.raises(IndexError, match="empty dimension"):      # PyTorch's type
        x.max(dim=0)


class PassThrough(ag.Function):
    @staticmethod
    def forward(ctx, a, b):
        return b                                  # returns one of its inputs

    @staticmethod
    def backward(ctx, grad):
        return None, grad


def test_function_returning_an_input_gives_a_new_tensor_and_leaves_the_input_alone():
    a = ag.tensor([1.0], requires_grad=True)
    b = ag.tensor([2.0], requires_grad=True)
    c = ag.tensor([3.0])
    out = PassThrough.apply(a, c)
    assert out is not c and not c.requires_grad and c.grad_fn is None and out.requires_grad
    PassThrough.apply(a, b).sum().backward()
    assert b.grad.tolist() == [1.0] and b.is_leaf


def test_view_of_a_tensor_modified_in_place_cannot_be_used_in_the_graph():
    x = ag.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = x * 1
    v = b[:2]
    early = v.sum()                               # used before the in-place op: fine
    b.mul_(2)
    with pytest.raises(RuntimeError, match="view of a tensor that was modified in place"):
        v.sum()
    (early + b.sum()).backward()
    assert x.grad.tolist() == [3.0, 3.0, 2.0]


def test_inplace_through_a_view_while_recording_raises():
    w = ag.tensor([1.0, 2.0], requires_grad=True)
    base = ag.zeros(3)
    with pytest.raises(RuntimeError, match="in-place modification of a view"):
        base[:2].add_(w)
    with pytest.raises(RuntimeError, match="in-place modification of a view"):
        base[:2][:] = w


def test_retained_grad_is_not_shared_with_a_leaf_grad_under_create_graph():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x.clone()
    y.retain_grad()
    (y.clone() * 1.0).sum().backward(create_graph=True)
    kept = y.grad
    (x * 1.0).sum().backward()
    assert kept.tolist() == [1.0, 1.0]


def test_autograd_grad_of_an_intermediate_runs_only_what_it_needs():
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    fired = []
    x.register_hook(lambda g: fired.append(g))
    y = x.exp()
    (gy,) = ag.autograd.grad((y * 2).sum(), y)
    assert gy.tolist() == [2.0, 2.0] and not fired       # nothing below y ran
    y.sum().backward()                                    # and y's own graph was not freed
    assert np.allclose(x.grad.numpy(), np.exp([1.0, 2.0])) and len(fired) == 1


def test_pow_gradient_at_zero_to_the_zero_is_zero():
    a = ag.tensor([0.0, 2.0], requires_grad=True)
    e = ag.tensor([0.0, 0.0], requires_grad=True)
    with np.errstate(all="ignore"):
        (a ** e).sum().backward()
    assert a.grad.tolist() == [0.0, 0.0]


def test_numpy_scalars_promote_like_python_numbers():
    x = ag.ones(2)
    assert (x * np.float64(2.0)).dtype == ag.float32 and (np.float64(2.0) + x).dtype == ag.float32
    assert (ag.tensor([1, 2]) * np.float64(0.5)).dtype == ag.float32
    assert ag.clamp(ag.tensor([1, 5, 10]), min=2.5).dtype == ag.float32


def test_clamp_with_tensor_bounds_passes_the_gradient_at_the_boundary():
    x = ag.tensor([0.0, 1.0, 2.0], requires_grad=True)
    lo = ag.tensor([1.0, 1.0, 1.0], requires_grad=True)
    y = ag.clamp(x, min=lo)
    y.sum().backward()
    assert y.tolist() == [1.0, 1.0, 2.0]
    assert x.grad.tolist() == [0.0, 1.0, 1.0] and lo.grad.tolist() == [1.0, 0.0, 0.0]


@pytest.mark.gpu
@pytest.mark.device_index
def test_backward_on_the_second_gpu_while_the_first_is_current():
    # gradients summed in the engine (a node or a leaf reached twice, .grad accumulated) on cuda:1
    if not ag.cuda.is_available() or ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the stand-in's two)")
    x0 = np.array([0.5, -1.0, 2.0])
    grads = []
    for device in ("cpu", "cuda:1"):
        x = ag.tensor(x0, device=device, requires_grad=True)
        with ag.cuda.device(0):
            for _ in range(2):
                h = x.tanh()
                (h * h + x * 3).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12)


@pytest.mark.gpu
@pytest.mark.device_index
def test_retain_grad_on_the_second_gpu_while_the_first_is_current():
    # the retained gradient is a copy: it must be made on the tensor's GPU (CuPy copies to the current one)
    if not ag.cuda.is_available() or ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the stand-in's two)")
    x = ag.tensor([0.5, -1.0], device="cuda:1", requires_grad=True)
    with ag.cuda.device(0):
        h = x * 2
        h.retain_grad()
        y = (h * h).sum()
        y.backward(retain_graph=True)
        y.backward()
        assert h.grad.data.device.id == 1
        np.testing.assert_allclose(h.grad.numpy(), 2 * 2 * np.array([1.0, -2.0]), rtol=1e-6)
