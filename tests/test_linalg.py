"""Linear algebra beyond the op table: error messages, broadcast and diagonal gradients, promotion,
second derivatives through einsum, and the same checks on every device."""
import numpy as np
import pytest

import autograd_gpu as ag


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


# --------------------------------------------------------------------------- errors
def test_matmul_shape_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"matmul: cannot multiply \(2, 3\) by \(4, 5\): inner dimensions 3 and 4 differ"):
        ag.matmul(ag.ones(2, 3), ag.ones(4, 5))


def test_matmul_batch_mismatch_names_batch_dims():
    with pytest.raises(ValueError, match=r"batch dimensions \(2,\) and \(3,\)"):
        ag.ones(2, 3, 4) @ ag.ones(3, 4, 5)


def test_matmul_with_0d_operand_raises():
    with pytest.raises(ValueError, match="at least 1 dimension"):
        ag.matmul(ag.tensor(2.0), ag.ones(3))


def test_matmul_with_python_scalar_raises():
    with pytest.raises(ValueError, match="use \\* to multiply by a scalar"):
        ag.ones(3) @ 2.0


@pytest.mark.skipif(not ag.cuda.is_available(), reason="needs a CUDA device to mix devices")
@pytest.mark.gpu
@pytest.mark.device_index
def test_matmul_across_devices_names_both_devices():
    with pytest.raises(RuntimeError, match="cpu.*cuda:0"):
        ag.matmul(ag.ones(2, 2), ag.ones(2, 2, device="cuda"))


def test_outer_requires_vectors():
    with pytest.raises(ValueError, match=r"outer: expected two 1-D tensors, got shapes \(2, 2\) and \(3,\)"):
        ag.outer(ag.ones(2, 2), ag.ones(3))


def test_tensordot_size_mismatch_raises():
    with pytest.raises(ValueError, match="tensordot: cannot contract"):
        ag.tensordot(ag.ones(2, 3), ag.ones(4, 2), axes=([1], [0]))


def test_einsum_wrong_number_of_operands_raises():
    with pytest.raises(ValueError, match="name 2 operand"):
        ag.einsum("ij,jk->ik", ag.ones(2, 3))


def test_einsum_letter_count_must_match_ndim():
    with pytest.raises(ValueError, match="operand 0 has 3 dimension"):
        ag.einsum("ij->i", ag.ones(2, 3, 4))


def test_einsum_inconsistent_sizes_raise():
    with pytest.raises(ValueError, match="subscript 'j' has size 3 in operand 0"):
        ag.einsum("ij,jk->ik", ag.ones(2, 3), ag.ones(4, 5))


def test_einsum_output_letter_must_appear_in_inputs():
    with pytest.raises(ValueError, match="'k'.*appears in no input"):
        ag.einsum("ij->ik", ag.ones(2, 3))


def test_einsum_invalid_character_raises():
    with pytest.raises(ValueError, match="invalid character '1'"):
        ag.einsum("i1->i", ag.ones(2, 3))


# --------------------------------------------------------------------------- values and gradients
def test_matmul_broadcast_batch_gradient_sums_over_the_batch():
    a_np, b_np = _rand(1, 2, 3), _rand(4, 3, 2, seed=1)
    a = ag.tensor(a_np, requires_grad=True)
    b = ag.tensor(b_np, requires_grad=True)
    (a @ b).sum().backward()
    # d/da[0, i, k] sum(a @ b) = sum over batch and j of b[n, k, j]; d/db[n, k, j] = sum over i of a[0, i, k]
    np.testing.assert_allclose(a.grad.numpy(), np.broadcast_to(b_np.sum(axis=(0, 2)), (1, 2, 3)))
    np.testing.assert_allclose(b.grad.numpy(), np.broadcast_to(a_np[0].sum(0)[:, None], (4, 3, 2)))


def test_matmul_vector_shapes_follow_numpy():
    assert ag.matmul(ag.ones(3), ag.ones(3)).shape == ()
    assert ag.matmul(ag.ones(3), ag.ones(3, 4)).shape == (4,)
    assert ag.matmul(ag.ones(2, 3, 4), ag.ones(4)).shape == (2, 3)
    assert ag.matmul(ag.ones(2, 1, 3, 4), ag.ones(5, 4, 2)).shape == (2, 5, 3, 2)


def test_matmul_promotes_mixed_float_dtypes():
    a = ag.ones(2, 3, dtype=ag.float32, requires_grad=True)
    b = ag.ones(3, 2, dtype=ag.float64, requires_grad=True)
    y = a @ b
    y.sum().backward()
    assert y.dtype == ag.float64
    assert a.grad.dtype == ag.float32 and b.grad.dtype == ag.float64


def test_matmul_accepts_a_list_operand():
    y = ag.tensor([[1.0, 2.0], [3.0, 4.0]]) @ [1.0, 1.0]
    np.testing.assert_allclose(y.numpy(), [3.0, 7.0])


def test_dot_of_vectors_is_a_scalar():
    assert ag.dot(ag.tensor([1.0, 2.0, 3.0]), ag.tensor([4.0, 5.0, 6.0])).item() == 32.0


def test_einsum_diagonal_gradient_is_placed_on_the_diagonal():
    x = ag.tensor(_rand(3, 3), requires_grad=True)
    w = ag.tensor([1.0, 2.0, 3.0], dtype=ag.float64)
    (ag.einsum("ii->i", x) * w).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.diag([1.0, 2.0, 3.0]))


def test_einsum_trace_gradient_is_the_identity():
    x = ag.tensor(_rand(4, 4), requires_grad=True)
    ag.einsum("ii", x).backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.eye(4))


def test_einsum_second_derivative_of_a_quadratic_form():
    a_np = _rand(3, 3)
    x = ag.tensor(_rand(3, seed=1), requires_grad=True)
    f = ag.einsum("i,ij,j", x, ag.tensor(a_np), x)
    g, = ag.autograd.grad(f, x, create_graph=True)
    np.testing.assert_allclose(g.numpy(), (a_np + a_np.T) @ x.numpy())
    hessian_row, = ag.autograd.grad(g[0], x)
    np.testing.assert_allclose(hessian_row.numpy(), (a_np + a_np.T)[0])


def test_einsum_result_is_not_a_view_of_its_input():
    x = ag.tensor(_rand(2, 3))
    y = ag.einsum("ij->ji", x)
    y += 1.0
    np.testing.assert_array_equal(x.numpy(), _rand(2, 3))


@pytest.mark.parametrize("subscripts", ["bij,bjk->bik", "...ij,...jk->...ik"])
def test_einsum_batched_product_matches_matmul(subscripts, device):
    a = ag.tensor(_rand(2, 3, 4), device=device, requires_grad=True)
    b = ag.tensor(_rand(2, 4, 5, seed=1), device=device, requires_grad=True)
    y = ag.einsum(subscripts, a, b)
    assert y.device == ag.device(device)
    np.testing.assert_allclose(y.numpy(), (a @ b).numpy(), rtol=1e-12)
    ga, gb = ag.autograd.grad(y.sum(), (a, b))
    ea, eb = ag.autograd.grad((a @ b).sum(), (a, b))
    np.testing.assert_allclose(ga.numpy(), ea.numpy(), rtol=1e-12)
    np.testing.assert_allclose(gb.numpy(), eb.numpy(), rtol=1e-12)
