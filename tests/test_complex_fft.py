"""Complex tensors and ag.fft: dtypes and promotion, PyTorch's gradient convention for real losses of
complex inputs (values and gradients against PyTorch 2.13), rfft/irfft lengths and norms, errors.
The op table (the complex OpTests registered with the ops) covers forward vs NumPy and finite differences."""
import numpy as np
import pytest

import autograd_gpu as ag

RNG = np.random.default_rng(0)


def _c(*shape):
    return RNG.normal(size=shape) + 1j * RNG.normal(size=shape)


def _r(*shape):
    return RNG.normal(size=shape)


# --------------------------------------------------------------------------- dtypes and promotion
def test_python_complex_becomes_complex64():
    assert ag.tensor(1 + 2j).dtype == ag.complex64
    assert ag.tensor([1.0, 2j]).dtype == ag.complex64
    assert ag.tensor(np.array([1j])).dtype == ag.complex128      # arrays keep their dtype


def test_python_complex_follows_the_default_float_dtype():
    ag.set_default_dtype(ag.float64)
    assert ag.tensor(1j).dtype == ag.complex128


@pytest.mark.parametrize("dtype,expected", [(ag.float32, ag.complex64), (ag.float64, ag.complex128),
                                            (ag.int64, ag.complex64)])
def test_complex_scalar_promotes_weakly(dtype, expected, device):
    x = ag.ones(3, dtype=dtype, device=device)
    assert (x * 1j).dtype == expected
    assert (1j + x).dtype == expected


def test_real_and_complex_tensors_promote_as_numpy(device):
    x = ag.ones(2, dtype=ag.float32, device=device)
    z = ag.ones(2, dtype=ag.complex64, device=device)
    assert (x * z).dtype == ag.complex64
    assert (x.double() * z).dtype == ag.complex128


def test_requires_grad_on_complex():
    z = ag.tensor([1 + 1j], requires_grad=True)
    assert z.requires_grad and z.is_complex()


def test_real_imag_are_properties_and_conj_of_real_is_itself(device):
    z = ag.tensor([1 + 2j, 3 - 4j], device=device)
    np.testing.assert_array_equal(z.real.numpy(), [1, 3])
    np.testing.assert_array_equal(z.imag.numpy(), [2, -4])
    assert z.real.dtype == ag.float32
    np.testing.assert_array_equal(z.conj().numpy(), [1 - 2j, 3 + 4j])
    np.testing.assert_allclose(z.abs().numpy(), [5 ** 0.5, 5])
    x = ag.ones(3, device=device)
    assert x.conj() is x and x.real is x


def test_complex_and_view_as_real_roundtrip(device):
    re, im = ag.tensor([1.0, 2.0], device=device), ag.tensor([3.0, 4.0], device=device)
    z = ag.complex(re, im)
    assert z.dtype == ag.complex64
    np.testing.assert_array_equal(ag.view_as_real(z).numpy(), [[1, 3], [2, 4]])
    np.testing.assert_array_equal(ag.view_as_complex(ag.view_as_real(z)).numpy(), z.numpy())


def test_complex_creation(device):
    assert ag.full((2,), 1j, device=device).dtype == ag.complex64
    ag.manual_seed(0)
    z = ag.randn(4000, dtype=ag.complex128, device=device)
    assert z.dtype == ag.complex128
    assert abs((z.abs() ** 2).mean().item() - 1.0) < 0.1        # each part has variance 1/2, as in PyTorch
    r = ag.rand(100, dtype=ag.complex64, device=device)
    assert 0 <= r.real.min().item() and r.imag.max().item() < 1


def test_logsumexp_of_complex_matches_torch():
    torch = pytest.importorskip("torch")
    z0 = _c(2, 3) * 3
    fn = (lambda m, z: m.logsumexp(z, 1).abs().sum())
    v, (g,) = _ag_grads(fn, [z0], "cpu")
    tv, (tg,) = _torch_grads(torch, fn, [z0])
    np.testing.assert_allclose(v, tv)
    np.testing.assert_allclose(g, tg, rtol=1e-10)


# --------------------------------------------------------------------------- gradients vs PyTorch
def _torch_grads(torch, fn, arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(torch, *ts)
    out.backward()
    return out.item(), [t.grad.resolve_conj().numpy() for t in ts]


def _ag_grads(fn, arrays, device):
    xs = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    out = fn(ag, *xs)
    out.backward()
    return out.item(), [x.grad.numpy() for x in xs]


def _fft_mod(lib):
    return lib.fft


LOSSES = {
    "power_spectrum": (lambda m, z: (_fft_mod(m).fft(z).abs() ** 2).sum(), [_c(6)]),
    "ifft_fft_real": (lambda m, z: _fft_mod(m).ifft(_fft_mod(m).fft(z)).real.sum(), [_c(5)]),
    "inner_product": (lambda m, z, w: (z * w.conj()).real.sum(), [_c(4), _c(4)]),
    "complex_matmul": (lambda m, a, b: (a @ b).abs().sum(), [_c(2, 3), _c(3, 4)]),
    "matmul_real_by_complex": (lambda m, a, b: (a.to(m.complex128) @ b).imag.sum(), [_r(2, 3), _c(3, 2)]),
    "mixed_elementwise": (lambda m, z, x: ((z.exp() * x + z.sin() / (x + 3.0)).abs() ** 2).sum()
                          + (z * 1j).angle().sum(), [_c(5), _r(5)]),
    "rfft_irfft_odd": (lambda m, x: (_fft_mod(m).irfft(_fft_mod(m).rfft(x, n=7) * 2.0, n=7) ** 2).sum(), [_r(7)]),
    "rfft_abs_even": (lambda m, x: _fft_mod(m).rfft(x, norm="ortho").abs().sum(), [_r(8)]),
    "irfft_of_complex": (lambda m, z: (_fft_mod(m).irfft(z, n=6) * _fft_mod(m).irfft(z, n=6)).sum(), [_c(4)]),
    "irfft_odd_n": (lambda m, z: _fft_mod(m).irfft(z, n=5, norm="forward").pow(3).sum(), [_c(3)]),
    "fft2_forward": (lambda m, z: _fft_mod(m).fft2(z, norm="forward").abs().sum(), [_c(3, 4)]),
    "rfftn_irfftn": (lambda m, x: (_fft_mod(m).irfftn(_fft_mod(m).rfftn(x) ** 2, s=x.shape) ** 2).sum(),
                     [_r(3, 4)]),
    "fftshift": (lambda m, z: (_fft_mod(m).fftshift(_fft_mod(m).fft(z)).abs() * m.arange(5.0).to(z.device)).sum(), [_c(5)]),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_real_loss_of_complex_inputs_matches_torch(name, device):
    torch = pytest.importorskip("torch")
    fn, arrays = LOSSES[name]
    v, gs = _ag_grads(fn, arrays, device)
    tv, tgs = _torch_grads(torch, fn, arrays)
    np.testing.assert_allclose(v, tv, rtol=1e-10)
    for g, tg, a in zip(gs, tgs, arrays):
        assert g.dtype == a.dtype                  # a real input gets a real gradient
        np.testing.assert_allclose(g, tg, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 4, 5, 8, 9])
def test_rfft_irfft_values_and_grads_match_torch(n, norm):
    torch = pytest.importorskip("torch")
    x, z = _r(2, 7), _c(2, 4)
    for fn in (lambda m, x: (m.fft.rfft(x, n=n, norm=norm).abs() ** 2).sum(),):
        np.testing.assert_allclose(_ag_grads(fn, [x], "cpu")[1][0], _torch_grads(torch, fn, [x])[1][0], atol=1e-10)
    w = _r(2, 64)

    def loss(m, z):
        y = m.fft.irfft(z, n=n, norm=norm)
        return (y * m.tensor(w[:, :y.shape[-1]])).sum()
    np.testing.assert_allclose(_ag_grads(loss, [z], "cpu")[1][0], _torch_grads(torch, loss, [z])[1][0], atol=1e-10)
    got = ag.fft.irfft(ag.tensor(z), n=n, norm=norm).numpy()
    np.testing.assert_allclose(got, np.fft.irfft(z, n=n, norm=norm), atol=1e-12)


def test_second_derivative_of_spectrum_matches_torch():
    torch = pytest.importorskip("torch")
    x0 = _r(6)
    x = ag.tensor(x0, requires_grad=True)
    g, = ag.autograd.grad((ag.fft.rfft(x).abs() ** 3).sum(), [x], create_graph=True)
    (g * g).sum().backward()
    xt = torch.tensor(x0, requires_grad=True)
    gt, = torch.autograd.grad((torch.fft.rfft(xt).abs() ** 3).sum(), [xt], create_graph=True)
    (gt * gt).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9)


def test_gradient_descent_on_a_complex_parameter_converges():
    """z.grad is the direction that decreases the loss: fit z so that z * a = b."""
    a, b = ag.tensor(_c(8)), ag.tensor(_c(8))
    z = ag.tensor(0j, dtype=ag.complex128, requires_grad=True)
    for _ in range(200):
        z.grad = None
        loss = ((z * a - b).abs() ** 2).sum()
        loss.backward()
        with ag.no_grad():
            z -= 0.02 * z.grad
    best = (np.vdot(a.numpy(), b.numpy()) / np.vdot(a.numpy(), a.numpy()))
    np.testing.assert_allclose(z.item(), best, rtol=1e-6)


def test_real_leaf_times_complex_gets_the_real_part():
    x = ag.tensor([1.0, 2.0], dtype=ag.float64, requires_grad=True)
    (x * (1 + 2j)).imag.sum().backward()
    assert x.grad.dtype == ag.float64
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 2.0])


# --------------------------------------------------------------------------- ag.fft details
def test_fft_keeps_single_precision(device):
    x = ag.ones(8, device=device)
    assert ag.fft.fft(x).dtype == ag.complex64
    assert ag.fft.rfft(x).dtype == ag.complex64
    assert ag.fft.irfft(ag.fft.rfft(x)).dtype == ag.float32
    assert ag.fft.fft(x.double()).dtype == ag.complex128


@pytest.mark.parametrize("fn", ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
                                "irfft2", "rfftn", "irfftn"])
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_fft_functions_match_numpy(fn, norm, device):
    a = _r(4, 6) if fn.startswith("rfft") else _c(4, 6)
    got = getattr(ag.fft, fn)(ag.tensor(a, device=device), norm=norm)
    np.testing.assert_allclose(got.numpy(), getattr(np.fft, fn)(a, norm=norm), atol=1e-12)


def test_freq_helpers(device):
    f = ag.fft.fftfreq(5, d=0.1, device=device)
    assert f.dtype == ag.float32 and str(f.device).startswith(device)
    np.testing.assert_allclose(f.numpy(), np.fft.fftfreq(5, 0.1), rtol=1e-6)
    r = ag.fft.rfftfreq(8, dtype=ag.float64, device=device)
    np.testing.assert_array_equal(r.numpy(), np.fft.rfftfreq(8))


def test_fftshift_roundtrip(device):
    x = ag.tensor(_r(3, 5), device=device)
    np.testing.assert_array_equal(ag.fft.ifftshift(ag.fft.fftshift(x)).numpy(), x.numpy())
    np.testing.assert_array_equal(ag.fft.fftshift(x, axes=1).numpy(), np.fft.fftshift(x.numpy(), axes=1))


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("op", [
    lambda z: z < 1, lambda z: z >= z, lambda z: ag.max(z), lambda z: z.min(dim=0), lambda z: ag.relu(z),
    lambda z: ag.clamp(z, 0, 1), lambda z: ag.floor(z), lambda z: ag.maximum(z, z), lambda z: ag.argmax(z),
    lambda z: ag.sign(z), lambda z: z // 2, lambda z: ag.erf(z), lambda z: ag.nn.functional.relu(z),
])
def test_ordered_ops_refuse_complex(op, device):
    z = ag.tensor([1 + 1j, 2 - 1j], device=device)
    with pytest.raises(TypeError, match="complex"):
        op(z)


def test_backward_of_a_complex_scalar_needs_grad():
    z = ag.tensor(1 + 2j, requires_grad=True)
    with pytest.raises(RuntimeError, match="real scalar"):
        (z * z).backward()
    (z * z).backward(ag.tensor(1 + 0j))
    np.testing.assert_allclose(z.grad.numpy(), np.conj(2 * (1 + 2j)))


def test_errors_name_the_op():
    z = ag.tensor([1 + 1j, 2j])
    with pytest.raises(TypeError, match="rfft: expected a real input tensor, got complex64"):
        ag.fft.rfft(z)
    with pytest.raises(ValueError, match="fft: norm must be"):
        ag.fft.fft(z, norm="unitary")
    with pytest.raises(ValueError, match="invalid number of data points"):
        ag.fft.fft(z, n=0)
    with pytest.raises(ValueError, match="s and axes must have the same length"):
        ag.fft.fftn(ag.ones(2, 3), s=(2, 3), axes=(0,))
    with pytest.raises(TypeError, match="imag: expected a complex tensor"):
        ag.ones(2).imag
    with pytest.raises(TypeError, match="complex: expected float tensors"):
        ag.complex(ag.ones(2, dtype=ag.int64), ag.ones(2, dtype=ag.int64))
    with pytest.raises(ValueError, match="0-d"):
        ag.fft.fft(ag.tensor(1.0))


def test_docs_filter_identification_example_converges():
    """docs/autodiff.md's worked example: SGD on a complex frequency response through rfft/irfft."""
    ag.manual_seed(0)
    n = 64
    u = ag.randn(8, n, dtype=ag.float64)
    taps = ag.tensor([0.5, 0.3, -0.2] + [0.0] * (n - 3), dtype=ag.float64)
    true_h = ag.fft.rfft(taps)
    y = ag.fft.irfft(ag.fft.rfft(u) * true_h, n=n)
    h = ag.zeros(n // 2 + 1, dtype=ag.complex128, requires_grad=True)
    opt = ag.optim.SGD([h], lr=5.0)
    for _ in range(200):
        opt.zero_grad()
        loss = ((ag.fft.irfft(ag.fft.rfft(u) * h, n=n) - y) ** 2).mean()
        loss.backward()
        opt.step()
    assert loss.item() < 1e-18
    assert (h - true_h).abs().max().item() < 1e-8
    assert h.imag[0].item() == 0.0 and h.imag[-1].item() == 0.0


@pytest.mark.parametrize("name,kw", [("Adam", {}), ("Adam", {"amsgrad": True, "weight_decay": 0.1}), ("AdamW", {}),
                                     ("RMSprop", {"momentum": 0.5, "centered": True}),
                                     ("Adagrad", {"initial_accumulator_value": 0.1}),
                                     ("SGD", {"momentum": 0.5, "nesterov": True, "weight_decay": 0.1})])
def test_optimizers_update_complex_parameters_as_torch(name, kw, device):
    """A complex parameter is updated as pairs of real numbers (PyTorch's view_as_real rule)."""
    torch = pytest.importorskip("torch")
    z0, a0 = _c(3, 2), _c(3, 2)
    z = ag.tensor(z0, device=device, requires_grad=True)
    zt = torch.tensor(z0, requires_grad=True)
    opt, opt_t = getattr(ag.optim, name)([z], lr=0.01, **kw), getattr(torch.optim, name)([zt], lr=0.01, **kw)
    for _ in range(10):
        opt.zero_grad()
        opt_t.zero_grad()
        ((z * ag.tensor(a0, device=device)).abs() ** 3).sum().backward()
        ((zt * torch.tensor(a0)).abs() ** 3).sum().backward()
        opt.step()
        opt_t.step()
    np.testing.assert_allclose(z.numpy(), zt.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_a_complex_gradient_reaching_a_real_leaf_keeps_its_real_part():
    class Twice(ag.Function):
        @staticmethod
        def forward(ctx, x):
            return ctx.wrap(x.data * 2)

        @staticmethod
        def backward(ctx, grad):
            return grad * (2 + 1j)             # a sloppy custom backward: complex for a real input

    x = ag.tensor([1.0, 2.0], requires_grad=True)
    Twice.apply(x).sum().backward()
    assert x.grad.dtype == ag.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


# --------------------------------------------------------------------------- properties (hypothesis)
from hypothesis import given, settings, HealthCheck, strategies as st  # noqa: E402
import os  # noqa: E402

_EXAMPLES = int(os.environ.get("AG_FUZZ_EXAMPLES", "6"))
_SETTINGS = settings(max_examples=_EXAMPLES, deadline=None, derandomize=_EXAMPLES <= 10,
                     suppress_health_check=[HealthCheck.too_slow])


@st.composite
def _fft_case(draw):
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=1, max_size=3)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    n = draw(st.one_of(st.none(), st.integers(1, 7)))
    norm = draw(st.sampled_from([None, "ortho", "forward"]))
    return shape, axis, n, norm, draw(st.integers(0, 2 ** 16))


@_SETTINGS
@given(case=_fft_case())
def test_fft_family_matches_numpy_and_finite_differences_on_random_shapes(case):
    shape, axis, n, norm, seed = case
    rng = np.random.default_rng(seed)
    x = rng.normal(size=shape)
    z = x + 1j * rng.normal(size=shape)
    for fn, a in (("fft", z), ("ifft", z), ("rfft", x), ("irfft", z)):
        if fn == "irfft" and n is None and shape[axis] == 1:
            continue                                    # 2 * (1 - 1) = 0 points: NumPy raises too
        f = getattr(ag.fft, fn)
        got = f(ag.tensor(a), n=n, axis=axis, norm=norm)
        np.testing.assert_allclose(got.numpy(), getattr(np.fft, fn)(a, n=n, axis=axis, norm=norm), atol=1e-12)
        assert ag.autograd.gradcheck(lambda t: f(t, n=n, axis=axis, norm=norm),
                                     (ag.tensor(a, requires_grad=True),))


@_SETTINGS
@given(case=_fft_case())
def test_inverse_transforms_undo_forward_ones(case):
    shape, axis, _, norm, seed = case
    rng = np.random.default_rng(seed)
    x = ag.tensor(rng.normal(size=shape))
    z = ag.tensor(rng.normal(size=shape) + 1j * rng.normal(size=shape))
    np.testing.assert_allclose(ag.fft.ifft(ag.fft.fft(z, axis=axis, norm=norm), axis=axis, norm=norm).numpy(),
                               z.numpy(), atol=1e-12)
    m = shape[axis]
    back = ag.fft.irfft(ag.fft.rfft(x, axis=axis, norm=norm), n=m, axis=axis, norm=norm)
    np.testing.assert_allclose(back.numpy(), x.numpy(), atol=1e-12)
    # Parseval: the orthonormal transform keeps the energy
    e = (ag.fft.fftn(z, norm="ortho").abs() ** 2).sum().item()
    np.testing.assert_allclose(e, (z.abs() ** 2).sum().item(), rtol=1e-10)


def test_fft_accepts_pytorch_dim():
    z = ag.tensor(_c(3, 4))
    np.testing.assert_allclose(ag.fft.fft(z, dim=0).numpy(), np.fft.fft(z.numpy(), axis=0))
    np.testing.assert_allclose(ag.fft.fftn(z, dim=(1,)).numpy(), np.fft.fftn(z.numpy(), axes=(1,)))
    with pytest.raises(TypeError, match="both"):
        ag.fft.fft(z, axis=0, dim=1)
