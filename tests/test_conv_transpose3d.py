"""F.conv_transpose3d and nn.ConvTranspose3d against PyTorch: values and the input, weight and bias gradients
(stride, padding, output_padding, groups, dilation, unbatched), a torch state dict loaded by name, PyTorch's
default initialisation, forward's output_size, vmap without the per-example loop, PyTorch's error for an input
of the wrong rank, and on the CuPy stand-in no host transfer and as many launches for a batch of 8 as of 1."""
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu import nn

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(3)

# name -> (input shape, weight shape, keyword arguments)
CASES = {
    "plain": ((2, 3, 3, 4, 3), (3, 2, 2, 3, 2), {}),
    "stride2": ((2, 2, 3, 2, 3), (2, 3, 3, 2, 2), {"stride": 2}),
    "stride_padding_output_padding": ((1, 2, 3, 3, 2), (2, 2, 3, 3, 2),
                                      {"stride": (2, 3, 2), "padding": (1, 0, 1), "output_padding": (1, 2, 0)}),
    "groups": ((2, 4, 2, 3, 3), (4, 3, 2, 2, 2), {"groups": 2, "stride": (1, 2, 1)}),
    "dilation": ((1, 2, 3, 3, 3), (2, 2, 2, 3, 2), {"dilation": (2, 1, 3), "padding": 1}),
    "dilation_output_padding": ((1, 2, 2, 3, 2), (2, 1, 2, 2, 2),
                                {"dilation": 3, "output_padding": (2, 1, 0), "stride": (1, 2, 1)}),
    "everything": ((2, 6, 3, 2, 3), (6, 2, 3, 2, 2),
                   {"stride": (2, 3, 1), "padding": (2, 1, 0), "output_padding": (1, 2, 0), "groups": 3,
                    "dilation": (2, 1, 2)}),
    "unbatched": ((3, 3, 2, 4), (3, 2, 2, 2, 3), {"stride": 2, "padding": (0, 1, 1)}),
}


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name, bias, device):
    xs, ws, kw = CASES[name]
    cout = ws[1] * kw.get("groups", 1)
    arrays = [RNG.standard_normal(xs), RNG.standard_normal(ws)] + ([RNG.standard_normal(cout)] if bias else [])
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    xs_ = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    ref = torch.nn.functional.conv_transpose3d(*ts, **kw)
    got = F.conv_transpose3d(*xs_, **kw)
    assert got.shape == tuple(ref.shape)
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = RNG.standard_normal(tuple(ref.shape))
    (ref * torch.tensor(g)).sum().backward()
    (got * ag.tensor(g, device=device)).sum().backward()
    for what, t, x in zip(("input", "weight", "bias"), ts, xs_):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10, err_msg=what)


def test_float32_matches_torch(device):
    xs, ws, kw = CASES["everything"]
    x, w = RNG.standard_normal(xs).astype(np.float32), RNG.standard_normal(ws).astype(np.float32)
    got = F.conv_transpose3d(ag.tensor(x, device=device), ag.tensor(w, device=device), **kw)
    assert got.dtype == ag.float32
    ref = torch.nn.functional.conv_transpose3d(torch.tensor(x), torch.tensor(w), **kw)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-4, atol=1e-5)


def test_second_derivative_matches_gradgradcheck():
    x = ag.tensor(RNG.standard_normal((1, 2, 2, 2, 3)), requires_grad=True)
    w = ag.tensor(RNG.standard_normal((2, 2, 2, 1, 2)), requires_grad=True)
    b = ag.tensor(RNG.standard_normal(4), requires_grad=True)

    def f(x, w, b):
        return F.conv_transpose3d(x, w, b, stride=(2, 1, 2), padding=(1, 0, 0), output_padding=(1, 0, 1),
                                  groups=2, dilation=(1, 2, 1))
    assert ag.autograd.gradcheck(f, (x, w, b))
    assert ag.autograd.gradgradcheck(f, (x, w, b))


def _load(mod, tmod, device):
    sd = {k: ag.tensor(v.detach().numpy(), device=device) for k, v in tmod.state_dict().items()}
    assert set(sd) == set(mod.state_dict())
    mod.load_state_dict(sd)
    return mod


@pytest.mark.parametrize("args, kwargs", [
    ((4, 6, 3), {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}),
    ((2, 3, (2, 3, 1)), {"dilation": (1, 2, 1), "bias": False}),
], ids=["groups_stride", "dilation_no_bias"])
def test_layer_with_a_torch_state_dict_matches_torch(args, kwargs, device):
    torch.manual_seed(0)
    tmod = torch.nn.ConvTranspose3d(*args, **kwargs).double()
    mod = _load(nn.ConvTranspose3d(*args, **kwargs).to(dtype=ag.float64).to(device), tmod, device)
    a = RNG.standard_normal((2, args[0], 3, 2, 3))
    t = torch.tensor(a, requires_grad=True)
    x = ag.tensor(a, device=device, requires_grad=True)
    ref, got = tmod(t), mod(x)
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-10)
    g = RNG.standard_normal(tuple(ref.shape))
    (ref * torch.tensor(g)).sum().backward()
    (got * ag.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-10)
    tparams = dict(tmod.named_parameters())
    assert sorted(tparams) == sorted(k for k, _ in mod.named_parameters())
    for k, p in mod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[k].grad.numpy(), rtol=1e-10, atol=1e-10, err_msg=k)


def test_layer_parameters_and_default_initialisation_are_torchs():
    ag.manual_seed(0)
    mod = nn.ConvTranspose3d(4, 6, (3, 2, 2), groups=2)
    tmod = torch.nn.ConvTranspose3d(4, 6, (3, 2, 2), groups=2)
    assert mod.weight.shape == tuple(tmod.weight.shape) == (4, 3, 3, 2, 2)
    assert mod.bias.shape == (6,)
    bound = 1 / np.sqrt(3 * 3 * 2 * 2)         # fan_in from weight dim 1 and the kernel, as PyTorch
    for p in (mod.weight, mod.bias):
        v = np.abs(p.numpy())
        assert v.max() <= bound and v.max() > 0.6 * bound
    assert repr(mod) == repr(tmod)
    assert nn.ConvTranspose3d(2, 2, 1, bias=False).bias is None


def test_forward_output_size_picks_the_output_padding():
    torch.manual_seed(0)
    tmod = torch.nn.ConvTranspose3d(2, 3, 3, stride=(2, 3, 2), padding=1).double()
    mod = _load(nn.ConvTranspose3d(2, 3, 3, stride=(2, 3, 2), padding=1).to(dtype=ag.float64), tmod, "cpu")
    a = RNG.standard_normal((1, 2, 3, 2, 3))
    for size in [(5, 4, 5), (6, 6, 6), (1, 3, 6, 5, 6)]:
        ref = tmod(torch.tensor(a), output_size=size)
        got = mod(ag.tensor(a), output_size=size)
        np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="valid sizes of dim 0 range from 5 to 6"):
        mod(ag.tensor(a), output_size=(7, 4, 5))


def test_vmap_equals_the_loop_without_the_per_example_fallback():
    x = ag.tensor(RNG.standard_normal((3, 2, 4, 2, 3, 2)))
    w = ag.tensor(RNG.standard_normal((4, 1, 2, 2, 3)))

    def fn(a):
        return F.conv_transpose3d(a, w, stride=(2, 1, 2), padding=(1, 0, 0), output_padding=(1, 0, 1), groups=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # the loop fallback warns
        v = ag.func.vmap(fn)(x)
    np.testing.assert_allclose(v.numpy(), np.stack([fn(x[i]).numpy() for i in range(3)]), rtol=1e-12, atol=1e-12)


def test_per_example_gradients_by_vmap_of_grad_equal_the_loop():
    """vmap of the backward (the depth taps' gather and the 2-D convolution batched by folding)."""
    x = ag.tensor(RNG.standard_normal((3, 2, 3, 2, 3)))
    w = ag.tensor(RNG.standard_normal((2, 2, 2, 2, 2)))

    def loss(a):
        return (F.conv_transpose3d(a, w, stride=2, padding=1, output_padding=1) ** 2).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = ag.func.vmap(ag.func.grad(loss))(x)
    np.testing.assert_allclose(g.numpy(), np.stack([ag.func.grad(loss)(x[i]).numpy() for i in range(3)]),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", [(4, 4, 4), (1, 1, 1, 4, 4, 4)])
def test_an_input_of_the_wrong_rank_raises_runtime_error_as_torch(shape):
    with pytest.raises(RuntimeError):
        torch.nn.functional.conv_transpose3d(torch.zeros(shape), torch.zeros((1, 1, 2, 2, 2)))
    with pytest.raises(RuntimeError, match=r"conv_transpose3d: expected a 5-D input \(N, C, D, H, W\) or a 4-D"):
        F.conv_transpose3d(ag.zeros(shape), ag.zeros((1, 1, 2, 2, 2)))


@pytest.mark.parametrize("call, match", [
    (lambda: F.conv_transpose3d(ag.zeros((1, 3, 2, 2, 2)), ag.zeros((2, 2, 2, 2, 2))), "in_channels = 3"),
    (lambda: F.conv_transpose3d(ag.zeros((1, 2, 2, 2, 2)), ag.zeros((2, 2, 2, 2))), "5-D weight"),
    (lambda: F.conv_transpose3d(ag.zeros((1, 2, 2, 2, 2)), ag.zeros((2, 2, 2, 2, 2)), stride=2, output_padding=2),
     "output_padding"),
    (lambda: F.conv_transpose3d(ag.zeros((1, 2, 2, 2, 2)), ag.zeros((2, 2, 2, 2, 2)), stride=(1, 2)), "3 ints"),
    (lambda: F.conv_transpose3d(ag.zeros((1, 2, 2, 2, 2)), ag.zeros((2, 2, 2, 2, 2)), ag.zeros(3)), "bias"),
    (lambda: nn.ConvTranspose3d(4, 6, 2, groups=4), "divisible"),
])
def test_bad_arguments_say_what_was_expected(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# --------------------------------------------------------------------------- the CUDA path (stand-in)

def _inputs(n):
    return (ag.tensor(RNG.standard_normal((n, 4, 3, 2, 3)), device="cuda", requires_grad=True),
            ag.tensor(RNG.standard_normal((4, 1, 2, 2, 3)), device="cuda", requires_grad=True),
            ag.tensor(RNG.standard_normal(2), device="cuda", requires_grad=True))


def _step(x, w, b):
    y = F.conv_transpose3d(x, w, b, stride=2, padding=(1, 0, 1), output_padding=1, groups=2)
    y.backward(ag.ones_like(y))         # the gradients of y.sum(), without a reduction whose passes vary with size


@pytest.mark.gpu
def test_cuda_makes_no_host_transfer_and_does_not_loop_over_the_batch(standin):
    """Forward and backward: nothing copied either way, and the same launches for a batch of 8 as of 2. (Of 2,
    not 1: a grouped product's weights broadcast over a batch of 2 or more, for which CuPy's matmul builds
    pointer tables, and at batch 1 some copies of a (1, ...) array are writes into its own memory that CuPy skips.)"""
    launches = {}
    for n in (2, 8):
        args = _inputs(n)                           # made outside the counted region
        _step(*args)                                # warm caches
        with standin.count_transfers() as transfers, standin.count_launches() as counted:
            _step(*args)
        assert (transfers.d2h, transfers.h2d) == (0, 0), transfers.events
        launches[n] = counted.launches
    assert launches[2] == launches[8] > 0


@pytest.mark.gpu
def test_cuda_equals_cpu(standin):
    args = _inputs(2)
    host = [ag.tensor(a.numpy(), requires_grad=True) for a in args]
    _step(*args)
    _step(*host)
    for a, h in zip(args, host):
        np.testing.assert_allclose(a.grad.numpy(), h.grad.numpy(), rtol=1e-12, atol=1e-12)
