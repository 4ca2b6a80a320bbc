"""ag.func: grad, value_and_grad, vjp, jvp, jacrev/jacobian, jacfwd, hessian; JAX conventions."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import func


def _x(device, values=(0.3, -1.2, 2.0)):
    return ag.tensor(list(values), dtype=ag.float64, device=device)


def test_grad_of_scalar_function(device):
    x = _x(device)
    g = func.grad(lambda t: (t.sin() * t).sum())(x)
    a = x.numpy()
    np.testing.assert_allclose(g.numpy(), np.cos(a) * a + np.sin(a))
    assert not g.requires_grad and x.grad is None


def test_grad_composes_to_higher_orders(device):
    x = ag.tensor(1.5, dtype=ag.float64, device=device)
    f = lambda t: t ** 4
    assert func.grad(func.grad(f))(x).item() == pytest.approx(12 * 1.5 ** 2)
    assert func.grad(func.grad(func.grad(f)))(x).item() == pytest.approx(24 * 1.5)


def test_argnums_tuple_and_value_and_grad_has_aux(device):
    a, b = _x(device), _x(device, (1.0, 2.0, 3.0))
    (value, aux), (ga, gb) = func.value_and_grad(lambda a, b: ((a * b).sum(), a.mean()), argnums=(0, 1),
                                                 has_aux=True)(a, b)
    assert value.item() == pytest.approx(float((a.numpy() * b.numpy()).sum()))
    assert not aux.requires_grad and aux.item() == pytest.approx(a.numpy().mean())
    np.testing.assert_allclose(ga.numpy(), b.numpy())
    np.testing.assert_allclose(gb.numpy(), a.numpy())
    g, aux = func.grad(lambda t: ((t * t).sum(), "note"), has_aux=True)(a)
    assert aux == "note" and np.allclose(g.numpy(), 2 * a.numpy())


def test_grad_rejects_non_scalar_output_and_bad_argnums():
    with pytest.raises(TypeError, match="one element"):
        func.grad(lambda t: t * 2)(ag.ones(3))
    with pytest.raises(ValueError, match="out of range"):
        func.grad(lambda t: t.sum(), argnums=2)(ag.ones(3))
    with pytest.raises(TypeError, match="floating-point"):
        func.grad(lambda t: t.sum())(ag.tensor([1, 2]))


def test_vjp_and_jvp_match_the_jacobian(device):
    x = _x(device)
    f = lambda t: ag.stack([t[0] * t[1], t[1].exp(), t.sum() ** 2])
    J = func.jacrev(f)(x).numpy()
    v = ag.tensor([1.0, -2.0, 0.5], dtype=ag.float64, device=device)
    t = ag.tensor([0.5, 1.0, -1.0], dtype=ag.float64, device=device)
    out, vjp_fn = func.vjp(f, x)
    (g,) = vjp_fn(v)
    np.testing.assert_allclose(g.numpy(), v.numpy() @ J)
    (g2,) = vjp_fn(v * 2)                      # vjp_fn may be called again
    np.testing.assert_allclose(g2.numpy(), 2 * v.numpy() @ J)
    out2, tout = func.jvp(f, (x,), (t,))
    np.testing.assert_allclose(tout.numpy(), J @ t.numpy())
    np.testing.assert_allclose(out2.numpy(), out.numpy())


def _softmax_cross_entropy(logits):
    target = [2, 0]
    lsm = logits - ag.logsumexp(logits, dim=1, keepdim=True)
    return -(lsm[ag.arange(2, device=logits.device), ag.tensor(target, device=logits.device)]).mean()


def _mlp(params):
    x = ag.tensor([[0.5, -1.0], [1.5, 0.25], [-0.3, 0.8]], dtype=ag.float64, device=params.device)
    w1 = params[:6].reshape(2, 3)
    w2 = params[6:9].reshape(3, 1)
    return (ag.tanh(x @ w1) @ w2).sum() ** 2


def _numeric_jacobian(f, x, eps=1e-6):
    a = x.numpy().astype(np.float64)
    out = f(x).numpy()
    J = np.zeros(out.shape + a.shape)
    for idx in np.ndindex(a.shape):
        ap, am = a.copy(), a.copy()
        ap[idx] += eps
        am[idx] -= eps
        fp = f(ag.tensor(ap, device=x.device)).numpy()
        fm = f(ag.tensor(am, device=x.device)).numpy()
        J[(...,) + idx] = (fp - fm) / (2 * eps)
    return J


@pytest.mark.parametrize("name", ["softmax_cross_entropy", "mlp"])
def test_jacfwd_jacrev_hessian_agree_with_each_other_and_finite_differences(name, device):
    ag.manual_seed(0)
    if name == "softmax_cross_entropy":
        f, x = _softmax_cross_entropy, ag.randn(2, 3, dtype=ag.float64, device=device)
    else:
        f, x = _mlp, ag.randn(9, dtype=ag.float64, device=device)
    jr, jf = func.jacrev(f)(x), func.jacfwd(f)(x)
    assert jr.shape == x.shape
    np.testing.assert_allclose(jr.numpy(), jf.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jr.numpy(), _numeric_jacobian(f, x), rtol=1e-5, atol=1e-7)
    h = func.hessian(f)(x)
    assert h.shape == x.shape + x.shape
    np.testing.assert_allclose(h.numpy(), func.jacfwd(func.jacrev(f))(x).numpy(), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(h.numpy(), h.numpy().reshape(x.numel(), -1).T.reshape(h.shape), atol=1e-10)
    hnum = _numeric_jacobian(lambda t: func.grad(f)(t), x)
    np.testing.assert_allclose(h.numpy(), hnum, rtol=1e-4, atol=1e-6)


def test_jacobian_shape_is_output_then_input(device):
    x = ag.ones(2, 3, dtype=ag.float64, device=device)
    J = func.jacobian(lambda t: t.sum(dim=1))(x)
    assert J.shape == (2, 2, 3)
    assert J.numpy()[0, 0].tolist() == [1, 1, 1] and J.numpy()[0, 1].tolist() == [0, 0, 0]
    J1, J2 = func.jacrev(lambda a, b: a * b, argnums=(0, 1))(x[0], x[1] * 2)
    assert J1.shape == (3, 3) and np.allclose(J1.numpy(), 2 * np.eye(3))


def test_transforms_of_closures_over_parameters_stay_differentiable(device):
    w = ag.tensor([2.0], dtype=ag.float64, device=device, requires_grad=True)
    x = ag.tensor([3.0], dtype=ag.float64, device=device)
    g = func.grad(lambda t: (w * t * t).sum())(x)       # 2 w x
    g.sum().backward()                                  # d/dw (2 w x) = 2 x
    assert g.item() == pytest.approx(12.0) and w.grad.item() == pytest.approx(6.0)


def test_nested_transforms_do_not_confuse_their_variables():
    # d/dx [ d/dy (x * y) at y = x ] = d/dx x = 1 (JAX gives 1; differentiating x * x would give 2)
    g = func.grad(lambda x: func.grad(lambda y: x * y)(x))(ag.tensor(3.0))
    assert g.item() == 1.0


def test_jvp_of_a_closure_stays_differentiable_in_its_parameters():
    w = ag.tensor([1.0, 2.0], requires_grad=True)
    _, t = func.jvp(lambda x: w * x * x, (ag.tensor([3.0, 4.0]),), (ag.ones(2),))
    t.sum().backward()
    assert w.grad.tolist() == [6.0, 8.0]


def test_hessian_of_prod_with_zeros_is_exact_and_symmetric():
    H = func.hessian(lambda v: v.prod())
    np.testing.assert_allclose(H(ag.tensor([0.0, 2.0, 3.0], dtype=ag.float64)).numpy(),
                               [[0, 3, 2], [3, 0, 0], [2, 0, 0]])
    np.testing.assert_allclose(H(ag.tensor([0.0, 0.0, 3.0], dtype=ag.float64)).numpy(),
                               [[0, 3, 0], [3, 0, 0], [0, 0, 0]])
