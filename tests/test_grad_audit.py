"""Gradients at the points where PyTorch defines them in a particular way, compared with PyTorch (torch is
in the dev environment): trunc's zero gradient, heaviside's unimplemented derivative (backward raises),
copysign's zero gradient for ``other``, nanmean over an all-NaN slice, cdist with p=0 and p=inf (ties
not split), embedding_bag's max (the first maximum of each bag). Also the double backward of the ops
the op table now gradgradchecks (trunc, cdist p=0), and the order of the ops whose tie-breaking
PyTorch leaves to the device (the gradient goes where the returned indices point)."""
import math

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

NAN, INF = float("nan"), float("inf")


def _t(a, device, requires_grad=True):
    return ag.tensor(np.asarray(a, dtype=np.float64), device=device, requires_grad=requires_grad)


def _pt(a, requires_grad=True):
    return torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=requires_grad)


def _same(got, want, rtol=1e-10):
    got = got.detach().numpy() if isinstance(got, ag.Tensor) else np.asarray(got)
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-12, equal_nan=True)


def _grads(f_ag, f_pt, arrays, device, seed=0, rtol=1e-10):
    """Values and the gradients of sum(w * f(xs)) for a fixed random w, in both libraries; a missing
    gradient counts as zeros only on PyTorch's side, so an input ours leaves out of the graph fails."""
    xs = [_t(a, device) for a in arrays]
    ys = [_pt(a) for a in arrays]
    out, want = f_ag(*xs), f_pt(*ys)
    _same(out, want, rtol)
    w = np.random.default_rng(seed).standard_normal(tuple(want.shape))
    (out * ag.tensor(w, device=device)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    for x, y in zip(xs, ys):
        assert x.grad is not None, "an input PyTorch differentiates got no gradient"
        _same(x.grad, y.grad if y.grad is not None else torch.zeros_like(y), rtol)


def test_trunc_stays_in_the_graph_with_gradient_zero(device):
    a = [[-2.5, -0.0, 0.0, 1.5, 3.0], [INF, -INF, 0.3, -0.7, 2.0]]
    _grads(ag.trunc, torch.trunc, [a], device)
    x = _t(a, device)
    y = x.fix()
    assert y.requires_grad and y.grad_fn is not None
    # frac = x - trunc(x): gradient 1; fmod's divisor gradient -trunc(a / b) differentiates again
    _grads(ag.frac, torch.frac, [a[:1]], device)
    (g,) = ag.autograd.grad(ag.trunc(x).sum(), (x,), create_graph=True)
    np.testing.assert_array_equal(g.numpy(), np.zeros((2, 5)))
    ints = ag.tensor([[1, -2]], device=device)
    assert ag.trunc(ints).dtype == ints.dtype and not ag.trunc(ints).requires_grad


def test_heaviside_backward_raises_as_pytorchs(device):
    x, v = _t([-1.0, 0.0, 2.0], device), _t([0.5], device)
    y = ag.heaviside(x, v)
    _same(y, torch.heaviside(_pt([-1.0, 0.0, 2.0], False), _pt([0.5], False)))
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="heaviside: the derivative of heaviside is not implemented"):
        (y * x).sum().backward()
    with pytest.raises(RuntimeError, match="derivative for aten::heaviside is not implemented"):
        torch.heaviside(_pt([-1.0, 0.0, 2.0]), _pt([0.5])).sum().backward()
    with ag.no_grad():                          # no recording: a plain constant, as before
        assert not ag.heaviside(x, v).requires_grad
    assert not ag.heaviside(x.detach(), v.detach()).requires_grad


def test_copysign_gradients_match_pytorch(device):
    a = [[-1.5, 0.0, -0.0, 2.0, 0.0, 3.0, INF, NAN]]
    b = [[1.0, -1.0, 1.0, -0.0, 0.0, -2.0, -1.0, 1.0]]
    _grads(ag.copysign, torch.copysign, [a, b], device)
    _grads(lambda x, y: ag.copysign(x, y), torch.copysign, [np.ones((2, 3)), [-1.0, 2.0, -0.0]], device)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")     # NumPy's 0 / 0 and inf * 0
def test_nansum_and_nanmean_gradients_match_pytorch_on_all_nan_slices(device):
    a = [[NAN, NAN, NAN], [1.0, NAN, 2.0], [3.0, 4.0, 5.0]]
    _grads(lambda x: ag.nanmean(x, 1), lambda y: torch.nanmean(y, 1), [a], device)
    _grads(lambda x: ag.nanmean(x, 0), lambda y: torch.nanmean(y, 0), [a], device)
    _grads(lambda x: ag.nansum(x, 1), lambda y: torch.nansum(y, 1), [a], device)
    x = _t(a, device)
    ag.nanmean(x, 1).sum().backward()
    assert np.isnan(x.grad.numpy()[0]).all() and not np.isnan(x.grad.numpy()[1:]).any()


@pytest.mark.parametrize("p", [0.0, INF])
def test_cdist_gradients_match_pytorch_at_ties(p, device):
    x1 = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 1.0], [0.0, 5.0, 1.0, 5.0, 0.0]])
    x2 = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0, 0.0]])
    _grads(lambda a, b: ag.cdist(a, b, p=p), lambda a, b: torch.cdist(a, b, p=p), [x1, x2], device)


def test_embedding_bag_max_routes_ties_to_the_first_maximum(device):
    w = np.array([[1.0, 5.0, 2.0], [1.0, 5.0, 3.0], [0.0, 5.0, 2.0], [1.0, -1.0, 2.0]])
    idx, off = np.array([0, 1, 2, 3, 0, 0, 2]), np.array([0, 3, 6, 7])
    _grads(lambda w_: F.embedding_bag(ag.tensor(idx, device=device), w_, ag.tensor(off, device=device), mode="max"),
           lambda w_: TF.embedding_bag(torch.tensor(idx), w_, torch.tensor(off), mode="max"), [w], device)
    bags = np.array([[0, 1, 2], [3, 0, 0], [2, 2, 1]])
    _grads(lambda w_: F.embedding_bag(ag.tensor(bags, device=device), w_, mode="max", padding_idx=1),
           lambda w_: TF.embedding_bag(torch.tensor(bags), w_, mode="max", padding_idx=1), [w], device)


def test_selection_gradients_follow_the_returned_indices_at_ties(device):
    """PyTorch leaves which of several equal values kthvalue/median/topk return to the device ("not
    necessarily the first occurrence"); on every device the gradient goes to the index returned."""
    a = np.array([[1.0, 3.0, 3.0, 0.0, 3.0], [2.0, 2.0, 2.0, 2.0, 1.0], [0.0, 5.0, 1.0, 5.0, 0.0]])
    for f in (lambda x: ag.kthvalue(x, 2, 1), lambda x: ag.median(x, 1), lambda x: ag.topk(x, 2, 1, largest=False),
              lambda x: ag.sort(x, 1, descending=True)):
        x = _t(a, device)
        values, indices = f(x)
        values.sum().backward()
        want = np.zeros_like(a)
        np.put_along_axis(want, indices.numpy().reshape(3, -1), 1.0, 1)
        np.testing.assert_array_equal(x.grad.numpy(), want)
        np.testing.assert_array_equal(values.detach().numpy().reshape(3, -1),
                                      np.take_along_axis(a, indices.numpy().reshape(3, -1), 1))


@pytest.mark.parametrize("name", ["hardswish", "hardsigmoid", "selu", "celu", "softshrink", "hardshrink", "hardtanh",
                                  "relu6", "mish", "logsigmoid", "softsign", "tanhshrink"])
@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
def test_activation_gradients_match_pytorch_at_kinks_nan_and_infinities(name, device):
    a = np.array([-3.0, 3.0, 0.0, 6.0, -1.0, 1.0, -0.5, 0.5, -2.9, 2.9, NAN, INF, -INF])
    x = _t(a, device)
    y = getattr(F, name)(x)
    t = _pt(a)
    want = getattr(TF, name)(t)
    keep = np.ones(a.shape, bool)
    if name == "hardswish":
        keep[-1] = False                 # hardswish(-inf): ours 0 (the limit), PyTorch's -inf * 0 = NaN
    _same(y.detach().numpy()[keep], want.detach().numpy()[keep])
    w = np.linspace(0.5, 1.5, a.size)
    (y * ag.tensor(w, device=device)).sum().backward()
    (want * torch.tensor(w)).sum().backward()
    _same(x.grad, t.grad, rtol=1e-7)          # PyTorch's hardsigmoid gradient has a float32 1/6


def test_hinge_losses_pass_the_gradient_at_zero_as_pytorchs(device):
    """clamp_min(v, 0) in PyTorch's margin_ranking, triplet_margin, cosine_embedding and hinge_embedding
    losses passes the gradient at v == 0; multi_margin_loss's kernel (v > 0) does not."""
    y = np.array([-1.0, -1.0, 1.0])
    _grads(lambda x: F.hinge_embedding_loss(x, ag.tensor(y, device=device), reduction="sum"),
           lambda x: TF.hinge_embedding_loss(x, torch.tensor(y), reduction="sum"), [[1.0, 0.5, 2.0]], device)
    _grads(lambda a, b: F.margin_ranking_loss(a, b, ag.tensor([1.0, 1.0], device=device), margin=0.5, reduction="sum"),
           lambda a, b: TF.margin_ranking_loss(a, b, torch.tensor([1.0, 1.0]), margin=0.5, reduction="sum"),
           [[1.0, 2.0], [0.5, 2.0]], device)
    _grads(lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.0, eps=0.0),
           lambda a, p, n: TF.triplet_margin_loss(a, p, n, margin=1.0, eps=0.0),
           [[[0.0, 0.0]], [[1.0, 0.0]], [[0.0, 2.0]]], device)
    _grads(lambda a, b: F.cosine_embedding_loss(a, b, ag.tensor([-1.0, -1.0], device=device)),
           lambda a, b: TF.cosine_embedding_loss(a, b, torch.tensor([-1.0, -1.0])),
           [[[1.0, 0.0], [1.0, 0.0]], [[0.0, 1.0], [0.0, 0.0]]], device, rtol=1e-8)   # 1 / sqrt(1e-12) there
    _grads(lambda x: F.multi_margin_loss(x, ag.tensor([1], device=device), margin=0.5, reduction="sum"),
           lambda x: TF.multi_margin_loss(x, torch.tensor([1]), margin=0.5, reduction="sum"), [[[1.0, 2.0, 1.5]]],
           device)


def test_triplet_swap_shares_the_gradient_between_equal_distances(device):
    a, p, n = [[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]], [[1.0, 0.0, 2.0], [1.0, 1.0, 0.0]], [[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]]
    _grads(lambda a_, p_, n_: F.triplet_margin_loss(a_, p_, n_, swap=True),
           lambda a_, p_, n_: TF.triplet_margin_loss(a_, p_, n_, swap=True), [a, p, n], device)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
def test_kl_div_and_atan2_gradients_at_zero_match_pytorch(device):
    logp = np.log([[0.2, 0.3, 0.5, 0.1]])
    _grads(lambda x, t: F.kl_div(x, t, reduction="batchmean"), lambda x, t: TF.kl_div(x, t, reduction="batchmean"),
           [logp, [[0.0, 0.5, 0.5, 0.0]]], device)
    _grads(ag.atan2, torch.atan2, [[0.0, 3.0, -0.0], [0.0, 4.0, 0.0]], device)


def test_std_of_a_constant_slice_has_gradient_zero(device):
    a = [[1.0, 1.0, 1.0], [2.0, 3.0, 5.0]]
    _grads(lambda x: x.std(axis=1, ddof=1), lambda y: y.std(1), [a], device)
    _grads(lambda x: ag.std(x, dim=1, correction=0), lambda y: torch.std(y, 1, correction=0), [a], device)
    _grads(lambda x: x.std(), lambda y: y.std(correction=0), [[[2.0, 2.0], [2.0, 2.0]]], device)


def test_std_mean_of_a_constant_slice_has_gradient_zero_and_aminmax_sends_nan_to_the_nans(device):
    a = [[1.0, 1.0, 1.0], [2.0, 3.0, 5.0]]
    _grads(lambda x: ag.std_mean(x, 1)[0], lambda y: torch.std_mean(y, 1)[0], [a], device)
    _grads(lambda x: ag.std_mean(x, 1, correction=0)[1], lambda y: torch.std_mean(y, 1, correction=0)[1], [a], device)
    # PyTorch's aminmax gives NaN gradients to a whole slice whose maximum is NaN; ours sends it to the NaNs
    x = _t([[1.0, NAN, 2.0, NAN], [3.0, 0.0, 3.0, 2.0]], device)
    ag.aminmax(x, dim=1).max.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0.0, 0.5, 0.0, 0.5], [0.5, 0.0, 0.5, 0.0]])
