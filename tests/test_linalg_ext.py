"""ag.linalg against PyTorch (values, gradients, second derivatives), its errors, what happens at
repeated eigenvalues, and properties over batch dimensions and ill-conditioned inputs. The op table
(the OpTests registered with the ag.linalg ops) covers forward vs NumPy, finite differences and CUDA vs CPU."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st

import autograd_gpu as ag
from autograd_gpu.testing.helpers import assert_close

L = ag.linalg
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape)


def _wc(a):
    return a + 4 * np.eye(a.shape[-1])


def _spd(a):
    return a @ np.swapaxes(a, -1, -2) + a.shape[-1] * np.eye(a.shape[-1])


def _sym(a):
    return (a + np.swapaxes(a, -1, -2)) / 2


# --------------------------------------------------------------------------- against PyTorch
def _outs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def _derivatives_ag(fn, arrays, order):
    xs = [ag.tensor(a, requires_grad=True) for a in arrays]
    outs = _outs(fn(*xs))
    ws = [np.cos(np.arange(o.numel()).reshape(o.shape) + 1.0) for o in outs]
    loss = sum((o * ag.tensor(w)).sum() for o, w in zip(outs, ws))
    grads = ag.autograd.grad(loss, xs, create_graph=order > 1)
    res = [[o.detach().numpy() for o in outs], [g.detach().numpy() for g in grads]]
    if order > 1:                         # a Hessian-vector product: d/dx <grad, v>
        vs = [np.sin(np.arange(x.numel()).reshape(x.shape) + 2.0) for x in xs]
        hv = ag.autograd.grad(sum((g * ag.tensor(v)).sum() for g, v in zip(grads, vs)), xs, allow_unused=True)
        res.append([h.numpy() for h in hv])
    return res


def _derivatives_torch(torch, fn, arrays, order):
    xs = [torch.tensor(a, requires_grad=True) for a in arrays]
    outs = _outs(fn(*xs))
    ws = [np.cos(np.arange(o.numel()).reshape(o.shape) + 1.0) for o in outs]
    loss = sum((o * torch.tensor(w)).sum() for o, w in zip(outs, ws))
    grads = torch.autograd.grad(loss, xs, create_graph=order > 1)
    res = [[o.detach().numpy() for o in outs], [g.detach().numpy() for g in grads]]
    if order > 1:
        vs = [np.sin(np.arange(x.numel()).reshape(x.shape) + 2.0) for x in xs]
        hv = torch.autograd.grad(sum((g * torch.tensor(v)).sum() for g, v in zip(grads, vs)), xs)
        res.append([h.numpy() for h in hv])
    return res


def _sym_t(x):
    return (x + x.mT) / 2


def _wc_t(x):
    return x + 4 * _eye_t(x)


def _eye_t(x):
    return (ag.eye(x.shape[-1], dtype=x.dtype) if isinstance(x, ag.Tensor)
            else __import__("torch").eye(x.shape[-1], dtype=x.dtype))


def _spd_t(x):
    return x @ x.mT + x.shape[-1] * _eye_t(x)


def _gauge_qr(q, r, diag, sign):
    d = sign(diag(r))
    return q * d[..., None, :], r * d[..., :, None]


# (name, ag function, torch function by name in torch.linalg, input shapes, derivative order)
def _cases():
    import torch
    T = torch.linalg
    return [
        ("inv", lambda x: L.inv(_wc_t(x)), lambda x: T.inv(_wc_t(x)), [(2, 3, 3)], 2),
        ("solve", lambda x, y: L.solve(_wc_t(x), y), lambda x, y: T.solve(_wc_t(x), y), [(2, 3, 3), (2, 3, 2)], 2),
        ("det", lambda x: L.det(x), lambda x: T.det(x), [(2, 3, 3)], 2),
        ("cholesky", lambda x: L.cholesky(_spd_t(x)), lambda x: T.cholesky(_spd_t(x)), [(2, 3, 3)], 2),
        ("eigh_eigenvalues", lambda x: L.eigh(_sym_t(x))[0], lambda x: T.eigh(_sym_t(x))[0], [(2, 4, 4)], 2),
        ("svdvals", L.svdvals, T.svdvals, [(2, 4, 3)], 2),
        ("norm", L.norm, T.norm, [(3, 4)], 2),
        ("norm_nuc", lambda x: L.norm(x, "nuc"), lambda x: T.norm(x, "nuc"), [(3, 4)], 2),
        ("norm_2", lambda x: L.norm(x, 2), lambda x: T.norm(x, 2), [(3, 4)], 2),
        ("norm_3_axis", lambda x: L.norm(x, 3, axis=1), lambda x: T.norm(x, 3, dim=1), [(3, 4)], 2),
        ("norm_inf_axis", lambda x: L.norm(x, math.inf, axis=1), lambda x: T.norm(x, math.inf, dim=1), [(3, 4)], 1),
        ("slogdet", lambda x: L.slogdet(x)[1], lambda x: T.slogdet(x)[1], [(2, 3, 3)], 1),
        ("qr", lambda x: _gauge_qr(*L.qr(x), L.diagonal, ag.sign),
         lambda x: _gauge_qr(*T.qr(x), T.diagonal, torch.sign), [(2, 4, 3)], 1),
        ("qr_wide", lambda x: _gauge_qr(*L.qr(x), L.diagonal, ag.sign),
         lambda x: _gauge_qr(*T.qr(x), T.diagonal, torch.sign), [(3, 5)], 1),
        ("eigh_vectors", lambda x: [v * v for v in L.eigh(_sym_t(x))],
         lambda x: [v * v for v in T.eigh(_sym_t(x))], [(2, 4, 4)], 1),
        ("svd", lambda x: [u * u for u in L.svd(x)], lambda x: [u * u for u in T.svd(x, full_matrices=False)],
         [(2, 4, 3)], 1),
        ("svd_wide", lambda x: [u * u for u in L.svd(x)], lambda x: [u * u for u in T.svd(x, full_matrices=False)],
         [(3, 5)], 1),
        ("pinv", L.pinv, T.pinv, [(2, 4, 3)], 1),
        ("lstsq", L.lstsq, lambda a, b: T.lstsq(a, b).solution, [(5, 3), (5, 2)], 1),
        ("matrix_power", lambda x: L.matrix_power(x, 3), lambda x: T.matrix_power(x, 3), [(2, 3, 3)], 1),
        ("matrix_power_neg", lambda x: L.matrix_power(_wc_t(x), -2), lambda x: T.matrix_power(_wc_t(x), -2),
         [(3, 3)], 1),
        ("multi_dot", lambda *xs: L.multi_dot(xs), lambda *xs: T.multi_dot(xs), [(2, 5), (5, 3), (3, 4)], 1),
        ("cross", L.cross, T.cross, [(4, 3), (4, 3)], 1),
        ("diagonal", lambda x: L.diagonal(x, offset=1), lambda x: T.diagonal(x, offset=1), [(2, 3, 4)], 1),
        ("trace", L.trace, lambda x: T.diagonal(x).sum(-1), [(2, 3, 3)], 1),
        ("vector_norm", lambda x: L.vector_norm(x, 3, axis=0), lambda x: T.vector_norm(x, 3, dim=0), [(3, 4)], 1),
        ("matrix_norm", lambda x: L.matrix_norm(x, -2), lambda x: T.matrix_norm(x, -2), [(2, 3, 4)], 1),
    ]


def _case_ids():
    try:
        import torch  # noqa: F401
    except ImportError:
        return []
    return [pytest.param(*c, id=c[0]) for c in _cases()]


@pytest.mark.parametrize("name,fn,torch_fn,shapes,order", _case_ids())
def test_agrees_with_pytorch(name, fn, torch_fn, shapes, order):
    torch = pytest.importorskip("torch")
    arrays = [_rand(*s, seed=i) for i, s in enumerate(shapes)]
    ours = _derivatives_ag(fn, arrays, order)
    theirs = _derivatives_torch(torch, torch_fn, arrays, order)
    for what, a, b in zip(("values", "gradients", "second derivatives"), ours, theirs):
        for x, y in zip(a, b):
            np.testing.assert_allclose(x, y, rtol=1e-7, atol=1e-9, err_msg=f"{name}: {what}")


# --------------------------------------------------------------------------- errors
def test_inv_of_singular_matrix_names_the_op(device):
    x = ag.tensor([[1.0, 2.0], [2.0, 4.0]], device=device) * 0
    with pytest.raises(ValueError, match="inv: the matrix is singular"):
        L.inv(x).numpy()


def test_singular_batch_element_is_named(device):
    a = np.stack([np.eye(3), np.eye(3), np.zeros((3, 3))])
    with pytest.raises(ValueError, match=r"solve: the matrix is singular .*batch element 2"):
        L.solve(ag.tensor(a, device=device), ag.ones(3, 1, device=device, dtype=ag.float64)).numpy()
    with pytest.raises(ValueError, match=r"inv: .*batch element 2, .*shape \(3,\)"):
        L.inv(ag.tensor(a, device=device)).numpy()


def test_cholesky_of_non_positive_definite_matrix_raises(device):
    a = np.stack([np.eye(2), np.diag([1.0, -1.0])])
    with pytest.raises(ValueError, match=r"cholesky: the matrix is not positive definite .*batch element 1"):
        L.cholesky(ag.tensor(a, device=device)).numpy()


def test_singular_matrix_has_det_zero_and_slogdet_minus_inf():
    a = ag.tensor([[1.0, 2.0], [2.0, 4.0]])
    assert abs(L.det(a).item()) < 1e-12
    sign, logabs = L.slogdet(ag.zeros(2, 2))
    assert sign.item() == 0 and logabs.item() == -math.inf and not sign.requires_grad


@pytest.mark.parametrize("fn", [L.inv, L.det, L.cholesky, L.eigh, L.slogdet])
def test_non_square_input_names_the_shape(fn):
    with pytest.raises(ValueError, match=r"expected square matrices, got .*\(2, 3\)"):
        fn(ag.zeros(2, 3))


@pytest.mark.parametrize("fn", [L.inv, L.svd, L.qr, L.pinv, L.svdvals])
def test_vector_input_is_not_a_matrix(fn):
    with pytest.raises(ValueError, match=r"at least 2 dimensions.*\(3,\)"):
        fn(ag.zeros(3))


def test_solve_with_mismatched_shapes_names_both():
    with pytest.raises(ValueError, match=r"solve: b of shape \(4, 1\) does not match a of shape \(3, 3\)"):
        L.solve(ag.eye(3), ag.ones(4, 1))
    with pytest.raises(ValueError, match=r"batch dimensions of a \(2, 3, 3\) and b \(4, 3, 1\)"):
        L.solve(ag.ones(2, 3, 3), ag.ones(4, 3, 1))


def test_integer_input_is_a_type_error():
    with pytest.raises(TypeError, match="inv: expected a float32 or float64 tensor, got int64"):
        L.inv(ag.tensor([[1, 0], [0, 1]]))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="matrix_norm: invalid ord 3"):
        L.matrix_norm(ag.ones(2, 2), ord=3)
    with pytest.raises(ValueError, match=r"multi_dot: cannot multiply \(2, 3\) .* by \(4, 2\)"):
        L.multi_dot([ag.ones(2, 3), ag.ones(4, 2)])
    with pytest.raises(ValueError, match="cross: expected 3-vectors"):
        L.cross(ag.ones(2), ag.ones(2))
    with pytest.raises(ValueError, match="qr: only mode='reduced'"):
        L.qr(ag.ones(2, 2), mode="complete")
    with pytest.raises(TypeError, match="matrix_power: expected an integer exponent"):
        L.matrix_power(ag.eye(2), 1.5)


# --------------------------------------------------------------------------- repeated eigenvalues
def _grad(fn, a):
    x = ag.tensor(a, requires_grad=True)
    fn(x).backward()
    return x.grad.numpy()


def test_eigenvalue_gradient_is_finite_at_repeated_eigenvalues():
    a = np.diag([1.0, 1.0, 2.0])
    g = _grad(lambda x: (L.eigh(x)[0] * ag.tensor([1.0, 2.0, 3.0])).sum(), a)
    assert np.isfinite(g).all()
    torch = pytest.importorskip("torch")
    t = torch.tensor(a, requires_grad=True)
    (torch.linalg.eigh(t)[0] * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(g, t.grad.numpy(), atol=1e-12)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_eigenvector_gradient_at_repeated_eigenvalues_is_not_finite_as_in_pytorch():
    a = np.diag([1.0, 1.0, 2.0])
    w = np.arange(9.0).reshape(3, 3)
    g = _grad(lambda x: (L.eigh(x)[1] * ag.tensor(w)).sum(), a)
    assert not np.isfinite(g).all()             # inf/NaN, never a silently wrong number
    torch = pytest.importorskip("torch")
    t = torch.tensor(a, requires_grad=True)
    (torch.linalg.eigh(t)[1] * torch.tensor(w)).sum().backward()
    assert not np.isfinite(t.grad.numpy()).all()


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_svdvals_gradient_is_finite_at_repeated_singular_values():
    g = _grad(lambda x: L.svdvals(x).sum(), np.eye(3))
    np.testing.assert_allclose(g, np.eye(3))           # the nuclear norm's gradient U V^T
    g = _grad(lambda x: L.svd(x)[1].sum(), np.eye(3))  # svd's S alone: the same formula
    np.testing.assert_allclose(g, np.eye(3))
    assert not np.isfinite(_grad(lambda x: (L.svd(x)[0] * ag.tensor(np.arange(9.0).reshape(3, 3))).sum(),
                                 np.eye(3))).all()


# --------------------------------------------------------------------------- properties
@st.composite
def conditioned(draw, max_log_cond=8):
    """A batch of square matrices U diag(s) V^T with singular values spanning 10**k (k <= max_log_cond)."""
    batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
    n = draw(st.integers(1, 4))
    log_cond = draw(st.floats(0, max_log_cond))
    seed = draw(st.integers(0, 2 ** 16))
    rng = np.random.default_rng(seed)
    u = np.linalg.qr(rng.standard_normal(batch + (n, n)))[0]
    v = np.linalg.qr(rng.standard_normal(batch + (n, n)))[0]
    s = np.logspace(0, -log_cond, n)
    return (u * s[..., None, :]) @ np.swapaxes(v, -1, -2), 10.0 ** log_cond


@SETTINGS
@given(conditioned())
def test_solve_recovers_x_to_within_the_condition_number(case):
    a, cond = case
    x = np.random.default_rng(1).standard_normal(a.shape[:-1] + (2,))
    got = L.solve(ag.tensor(a), ag.tensor(a @ x)).numpy()
    err = np.linalg.norm(got - x, axis=(-2, -1)) / np.linalg.norm(x, axis=(-2, -1))
    assert (err <= 50 * a.shape[-1] * cond * np.finfo(np.float64).eps).all()


@SETTINGS
@given(conditioned(max_log_cond=4))
def test_det_is_the_product_of_eigenvalues(case):
    a, _ = case
    expected = np.prod(np.linalg.eigvals(a), axis=-1).real
    np.testing.assert_allclose(L.det(ag.tensor(a)).numpy(), expected, rtol=1e-8, atol=1e-12)


@SETTINGS
@given(conditioned(max_log_cond=3), st.sampled_from(["inv", "det", "cholesky", "eigvalsh", "svdvals", "qr",
                                                     "slogdet", "pinv"]))
def test_batched_equals_a_loop_of_unbatched(case, name):
    a, _ = case
    if name in ("cholesky", "eigvalsh"):
        a = a @ np.swapaxes(a, -1, -2) + np.eye(a.shape[-1])
    fn = {"inv": L.inv, "det": L.det, "cholesky": L.cholesky, "eigvalsh": lambda x: L.eigh(x)[0],
          "svdvals": L.svdvals, "qr": lambda x: L.qr(x)[1], "slogdet": lambda x: L.slogdet(x)[1],
          "pinv": L.pinv}[name]
    x = ag.tensor(a, requires_grad=True)
    batched = fn(x)
    flat = a.reshape((-1,) + a.shape[-2:])
    looped = [fn(ag.tensor(m)).numpy() for m in flat]
    np.testing.assert_allclose(batched.numpy().reshape((len(flat),) + batched.shape[x.ndim - 2:]),
                               np.stack(looped), rtol=1e-9, atol=1e-12)


@SETTINGS
@given(conditioned(max_log_cond=2))
def test_inverse_gradient_of_a_batch_equals_each_matrix_alone(case):
    a, _ = case
    x = ag.tensor(a, requires_grad=True)
    (L.inv(x) ** 2).sum().backward()
    for i, m in enumerate(a.reshape((-1,) + a.shape[-2:])):
        y = ag.tensor(m, requires_grad=True)
        (L.inv(y) ** 2).sum().backward()
        np.testing.assert_allclose(x.grad.numpy().reshape((-1,) + a.shape[-2:])[i], y.grad.numpy(),
                                   rtol=1e-9, atol=1e-12)


def test_pinv_of_a_rank_deficient_matrix_matches_numpy():
    a = np.outer([1.0, 2.0, 3.0], [1.0, -1.0])
    np.testing.assert_allclose(L.pinv(ag.tensor(a)).numpy(), np.linalg.pinv(a), atol=1e-12)


def test_svdvals_without_grad_skips_the_vectors_and_matches():
    a = _rand(2, 3, 4)
    with ag.no_grad():
        s = L.svdvals(ag.tensor(a, requires_grad=True))
    assert s.grad_fn is None
    np.testing.assert_allclose(s.numpy(), np.linalg.svdvals(a))


# --------------------------------------------------------------------------- no host sync on a GPU
@pytest.mark.gpu
def test_linalg_ops_and_their_backward_make_no_device_to_host_transfer():
    from autograd_gpu.backends import cupy_backend
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the CuPy stand-in)")
    a = ag.tensor(_rand(2, 4, 4), device="cuda", requires_grad=True)
    b = ag.tensor(_rand(2, 4, 1, seed=1), device="cuda")
    ag.cuda.synchronize()

    def loss():
        spd = a @ a.mT + 4 * ag.eye(4, device="cuda")
        w, v = L.eigh(spd)
        u, s, vh = L.svd(a)
        return (L.inv(spd).sum() + L.solve(spd, b).sum() + L.det(spd).sum() + L.slogdet(spd)[1].sum()
                + L.cholesky(spd).sum() + (v * v).sum() + w.sum() + (u * u).sum() + s.sum() + L.svdvals(a).sum()
                + L.pinv(a).sum() + L.lstsq(a, b).sum() + L.qr(a)[1].sum() + L.norm(a, axis=(-2, -1)).sum())

    counter = None
    if cupy_backend.simulated():
        from autograd_gpu.testing.cupy_standin import count_transfers
        counter = count_transfers()
        log = counter.__enter__()
    ag.cuda.set_sync_debug_mode("error")
    try:
        loss().backward()
    finally:
        ag.cuda.set_sync_debug_mode("default")
        if counter is not None:
            counter.__exit__(None, None, None)
    if counter is not None:
        assert log.d2h == 0, log.events
    assert np.isfinite(a.grad.numpy()).all()


def test_det_gradient_at_a_singular_matrix_raises_instead_of_returning_nan():
    x = ag.tensor(np.array([[1.0, 2.0], [0.0, 0.0]]), requires_grad=True)
    d = L.det(x)
    with pytest.raises(ValueError, match="det backward: the gradient needs A\\^-1 and this A is singular"):
        d.backward()


def test_lstsq_of_a_rank_deficient_matrix_gives_numpys_minimum_norm_solution():
    a = np.outer([1.0, 2.0, 3.0], [1.0, -1.0])
    b = np.array([1.0, 0.5, -2.0])
    x = ag.tensor(a, requires_grad=True)
    got = L.lstsq(x, ag.tensor(b))
    assert_close(got, np.linalg.lstsq(a, b, rcond=None)[0])
    got.sum().backward()                     # pinv's gradient: finite where the rank is locally constant
    assert np.isfinite(x.grad.numpy()).all()


def test_lstsq_takes_rcond_as_numpy():
    a = np.diag([1.0, 1e-9, 2.0])
    b = np.ones(3)
    for rcond in (None, 1e-6):
        assert_close(L.lstsq(ag.tensor(a), ag.tensor(b), rcond=rcond), np.linalg.lstsq(a, b, rcond=rcond)[0])


def test_under_autocast_float16_inputs_run_in_float32():
    a = ag.tensor(_spd(_rand(3, 3)), dtype=ag.float16)
    with ag.amp.autocast("cpu"):
        low = L.cholesky(a)
    assert low.dtype == ag.float32
    np.testing.assert_allclose(low.numpy(), np.linalg.cholesky(a.numpy().astype(np.float32)), rtol=1e-5)


@pytest.mark.parametrize("fn", [lambda x: L.eigh(x)[0], lambda x: L.svd(x)[1], L.svdvals, L.pinv],
                         ids=["eigh", "svd", "svdvals", "pinv"])
def test_nan_input_to_a_decomposition_is_a_value_error(fn, device):
    x = ag.tensor(np.full((2, 3, 3), np.nan), device=device)
    with pytest.raises(ValueError, match="did not converge: the input has inf/NaN entries"):
        fn(x).numpy()
