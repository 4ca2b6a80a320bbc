"""The breadth issue's activations, vector functions and losses (F.mish ... F.soft_margin_loss, F.ctc_loss) and
their modules, compared with PyTorch: values and gradients of every input, at the kinks too (PyTorch's
gradient there), every reduction; plus their argument errors and ParameterList / ParameterDict."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn
import autograd_gpu.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(0)
# the kinks of the piecewise activations (and around them), then random points
KINKS = np.array([-7.0, -6.0, -4.0, -3.0, -2.5, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5, 3.0, 4.0, 6.0, 7.0, 25.0, -25.0])
X = np.concatenate([KINKS, RNG.uniform(-5, 5, 15)]).reshape(4, 8)


def _rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape)


def _sign(*shape):
    return np.where(RNG.uniform(-1, 1, shape) > 0, 1.0, -1.0)


def _compare(call, arrays, device, grads=True, atol=1e-10, rtol=1e-7):
    """call(F, *tensors) with the ag and torch functionals on the same float64 / int64 arrays: the values,
    then the gradient of sum(out * cotangent) for every float input."""
    ta = [torch.tensor(a, requires_grad=grads and a.dtype.kind == "f") for a in arrays]
    aa = [ag.tensor(a, device=device, requires_grad=grads and a.dtype.kind == "f") for a in arrays]
    want = call(TF, *ta)
    got = call(F, *aa)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=atol, equal_nan=True)
    if not grads or not want.requires_grad:
        return
    cot = RNG.uniform(0.5, 1.5, tuple(want.shape))
    (want * torch.tensor(cot)).sum().backward()
    (got * ag.tensor(cot, device=device)).sum().backward()
    for a, t in zip(aa, ta):
        if t.requires_grad:       # torch leaves None where it routes no gradient (the +-1 targets): 0 here too
            want_g = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            got_g = np.zeros(a.shape) if a.grad is None else a.grad.numpy()
            np.testing.assert_allclose(got_g, want_g, rtol=rtol, atol=atol, equal_nan=True)


ACTIVATIONS = [
    ("mish", lambda f, x: f.mish(x)),
    ("hardswish", lambda f, x: f.hardswish(x)),
    ("hardsigmoid", lambda f, x: f.hardsigmoid(x)),
    ("hardtanh", lambda f, x: f.hardtanh(x)),
    ("hardtanh_bounds", lambda f, x: f.hardtanh(x, -2.5, 3.0)),
    ("relu6", lambda f, x: f.relu6(x)),
    ("selu", lambda f, x: f.selu(x)),
    ("celu", lambda f, x: f.celu(x)),
    ("celu_alpha", lambda f, x: f.celu(x, alpha=0.5)),
    ("glu", lambda f, x: f.glu(x)),
    ("glu_dim0", lambda f, x: f.glu(x, 0)),
    ("softsign", lambda f, x: f.softsign(x)),
    ("tanhshrink", lambda f, x: f.tanhshrink(x)),
    ("softshrink", lambda f, x: f.softshrink(x)),
    ("softshrink_lambd", lambda f, x: f.softshrink(x, 1.0)),
    ("hardshrink", lambda f, x: f.hardshrink(x)),
    ("hardshrink_lambd", lambda f, x: f.hardshrink(x, 3.0)),
    ("logsigmoid", lambda f, x: f.logsigmoid(x)),
    ("normalize", lambda f, x: f.normalize(x)),
    ("normalize_p1_dim0", lambda f, x: f.normalize(x, p=1.0, dim=0)),
]


@pytest.mark.parametrize("name,call", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_matches_torch_at_the_kinks_too(name, call, device):
    _compare(call, [X], device)


def test_activations_keep_nan():
    x = np.array([np.nan, 1.0])
    for name in ("hardtanh", "hardswish", "softshrink", "hardshrink", "relu6", "mish", "selu", "celu"):
        got = getattr(F, name)(ag.tensor(x)).numpy()
        want = getattr(TF, name)(torch.tensor(x)).numpy()
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=name)


def test_prelu_per_channel_and_single_weight(device):
    x = _rand(2, 3, 4)
    x[0, 0, :2] = 0.0                                  # the gradient at 0 goes to the negative side, as PyTorch's
    _compare(lambda f, a, w: f.prelu(a, w), [x, np.array([0.1, -0.2, 0.3])], device)
    _compare(lambda f, a, w: f.prelu(a, w), [x, np.array([0.25])], device)
    _compare(lambda f, a, w: f.prelu(a, w), [_rand(5), np.array([0.25])], device)


VECTORS = [
    ("cosine_similarity", lambda f, a, b: f.cosine_similarity(a, b), [(4, 5), (4, 5)]),
    ("cosine_similarity_bcast", lambda f, a, b: f.cosine_similarity(a, b, dim=-1), [(3, 4, 5), (4, 5)]),
    ("pairwise_distance", lambda f, a, b: f.pairwise_distance(a, b), [(4, 5), (4, 5)]),
    ("pairwise_distance_p1_keepdim", lambda f, a, b: f.pairwise_distance(a, b, p=1.0, keepdim=True),
     [(4, 5), (5,)]),
    ("pairwise_distance_p3", lambda f, a, b: f.pairwise_distance(a, b, p=3.0), [(4, 5), (4, 5)]),
]


@pytest.mark.parametrize("name,call,shapes", VECTORS, ids=[v[0] for v in VECTORS])
def test_vector_function_matches_torch(name, call, shapes, device):
    _compare(call, [_rand(*s) for s in shapes], device)


def test_cosine_similarity_of_a_zero_vector_is_0_with_torchs_gradient(device):
    a = _rand(3, 4)
    a[1] = 0.0
    _compare(lambda f, x, y: f.cosine_similarity(x, y), [a, _rand(3, 4)], device)


REDUCTIONS = ("mean", "sum", "none")


def _loss_cases():
    cases = []
    for r in REDUCTIONS:
        cases += [
            (f"smooth_l1_{r}", lambda f, x, t, r=r: f.smooth_l1_loss(x, t, reduction=r), [_rand(4, 5), _rand(4, 5)]),
            (f"smooth_l1_beta_{r}", lambda f, x, t, r=r: f.smooth_l1_loss(x, t, reduction=r, beta=0.4),
             [_rand(4, 5), _rand(4, 5)]),
            (f"smooth_l1_beta0_{r}", lambda f, x, t, r=r: f.smooth_l1_loss(x, t, reduction=r, beta=0.0),
             [_rand(4, 5), _rand(4, 5)]),
            (f"huber_{r}", lambda f, x, t, r=r: f.huber_loss(x, t, reduction=r, delta=0.7), [_rand(4, 5), _rand(4, 5)]),
            (f"huber_weight_{r}", lambda f, x, t, w, r=r: f.huber_loss(x, t, reduction=r, weight=w),
             [_rand(4, 5), _rand(4, 5), _rand(4, 5, lo=0.1)]),
            (f"kl_div_{r}", lambda f, x, t, r=r: f.kl_div(x, t, reduction=r), [_rand(4, 5), _rand(4, 5, lo=0.0)]),
            (f"kl_div_log_target_{r}", lambda f, x, t, r=r: f.kl_div(x, t, reduction=r, log_target=True),
             [_rand(4, 5), _rand(4, 5)]),
            (f"margin_ranking_{r}", lambda f, a, b, y, r=r: f.margin_ranking_loss(a, b, y, margin=0.2, reduction=r),
             [_rand(6), _rand(6), _sign(6)]),
            (f"triplet_{r}", lambda f, a, p, n, r=r: f.triplet_margin_loss(a, p, n, reduction=r),
             [_rand(5, 3), _rand(5, 3), _rand(5, 3)]),
            (f"triplet_swap_p1_{r}", lambda f, a, p, n, r=r: f.triplet_margin_loss(a, p, n, margin=2.0, p=1,
                                                                                  swap=True, reduction=r),
             [_rand(5, 3), _rand(5, 3), _rand(5, 3)]),
            (f"cosine_embedding_{r}", lambda f, a, b, y, r=r: f.cosine_embedding_loss(a, b, y, margin=0.1,
                                                                                      reduction=r),
             [_rand(6, 3), _rand(6, 3), _sign(6)]),
            (f"poisson_{r}", lambda f, x, t, r=r: f.poisson_nll_loss(x, t, reduction=r), [_rand(4, 5), _rand(4, 5, lo=0)]),
            (f"poisson_full_{r}", lambda f, x, t, r=r: f.poisson_nll_loss(x, t.detach(), log_input=False, full=True,
                                                                          reduction=r),
             [_rand(4, 5, lo=0.1), np.round(_rand(4, 5, lo=0, hi=4))]),
            (f"gaussian_{r}", lambda f, x, t, v, r=r: f.gaussian_nll_loss(x, t, v, reduction=r),
             [_rand(4, 5), _rand(4, 5), np.concatenate([_rand(3, 5, lo=0.1), np.full((1, 5), 1e-9)])]),
            (f"gaussian_short_var_full_{r}", lambda f, x, t, v, r=r: f.gaussian_nll_loss(x, t, v, full=True,
                                                                                         reduction=r),
             [_rand(4, 5), _rand(4, 5), _rand(4, lo=0.1)]),
            (f"multi_margin_{r}", lambda f, x, y, r=r: f.multi_margin_loss(x, y, reduction=r),
             [_rand(5, 4), RNG.integers(0, 4, 5)]),
            (f"multi_margin_p2_weight_{r}", lambda f, x, y, w, r=r: f.multi_margin_loss(x, y, p=2, margin=0.5,
                                                                                        weight=w.detach(),
                                                                                        reduction=r),
             [_rand(5, 4), RNG.integers(0, 4, 5), _rand(4, lo=0.1)]),
            (f"multilabel_soft_margin_{r}", lambda f, x, t, r=r: f.multilabel_soft_margin_loss(x, t, reduction=r),
             [_rand(4, 5), RNG.integers(0, 2, (4, 5)).astype(float)]),
            (f"multilabel_soft_margin_weight_{r}", lambda f, x, t, w, r=r: f.multilabel_soft_margin_loss(
                x, t, weight=w, reduction=r), [_rand(4, 5), RNG.integers(0, 2, (4, 5)).astype(float), _rand(5)]),
            (f"hinge_embedding_{r}", lambda f, x, y, r=r: f.hinge_embedding_loss(x, y, margin=0.5, reduction=r),
             [_rand(4, 5), _sign(4, 5)]),
            (f"soft_margin_{r}", lambda f, x, y, r=r: f.soft_margin_loss(x, y.detach(), reduction=r), [_rand(4, 5), _sign(4, 5)]),
        ]
    cases += [
        ("kl_div_batchmean", lambda f, x, t: f.kl_div(x, t, reduction="batchmean"), [_rand(4, 5), _rand(4, 5, lo=0)]),
        ("smooth_l1_at_the_kinks", lambda f, x, t: f.smooth_l1_loss(x, t, beta=0.5),
         [np.array([0.5, -0.5, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, 1.0])]),
        ("huber_at_the_kinks", lambda f, x, t: f.huber_loss(x, t, delta=0.5),
         [np.array([0.5, -0.5, 0.0, 1.0]), np.array([0.0, 0.0, 0.0, 1.0])]),
        # torch's target gradient at t = 0 is 0/0 = nan (xlogy's); the input's is compared
        ("kl_div_zero_target", lambda f, x, t: f.kl_div(x, t.detach(), reduction="sum"),
         [_rand(3), np.array([0.0, 0.5, 0.5])]),
        ("multi_margin_unbatched", lambda f, x, y: f.multi_margin_loss(x, y), [_rand(4), np.array(2)]),
        ("cosine_embedding_unbatched", lambda f, a, b, y: f.cosine_embedding_loss(a, b, y),
         [_rand(3), _rand(3), np.array(-1.0)]),
        ("triplet_unbatched", lambda f, a, p, n: f.triplet_margin_loss(a, p, n), [_rand(3), _rand(3), _rand(3)]),
        ("multilabel_soft_margin_unbatched", lambda f, x, t: f.multilabel_soft_margin_loss(x, t),
         [_rand(5), RNG.integers(0, 2, 5).astype(float)]),
        ("gaussian_float_var", lambda f, x, t: f.gaussian_nll_loss(x, t, 0.5), [_rand(4, 5), _rand(4, 5)]),
        ("gaussian_size1_var", lambda f, x, t, v: f.gaussian_nll_loss(x, t, v), [_rand(4, 5), _rand(4, 5),
                                                                                 _rand(4, 1, lo=0.1)]),
    ]
    return cases


LOSSES = _loss_cases()


@pytest.mark.filterwarnings("ignore:kl_div. reduction='mean'", "ignore:reduction. 'mean'")
@pytest.mark.parametrize("name,call,arrays", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_matches_torch(name, call, arrays, device):
    _compare(call, arrays, device)


# --------------------------------------------------------------------------- ctc_loss
def _ctc_batch(T=12, N=4, C=6, S=5, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, N, C))
    targets = rng.integers(1, C, (N, S))
    targets[1, 1] = targets[1, 0]                       # a repeated label: needs a blank between them
    il = np.array([T, T - 2, 7, T])
    tl = np.array([S, 3, 4, 0])                         # the last target is empty
    return x, targets, il, tl


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_matches_torch_through_log_softmax(reduction, zero_infinity, device):
    x, targets, il, tl = _ctc_batch()
    _compare(lambda f, a, t, i, n: f.ctc_loss(f.log_softmax(a, 2), t, i, n, reduction=reduction,
                                              zero_infinity=zero_infinity), [x, targets, il, tl], device)


def test_ctc_loss_gradient_of_log_probs_is_torchs(device):
    """PyTorch's kernel gives exp(lp) - occupancy (the log_softmax in front assumed): the same here."""
    x, targets, il, tl = _ctc_batch()
    lp = torch.log_softmax(torch.tensor(x), 2).numpy()
    _compare(lambda f, a, t, i, n: f.ctc_loss(a, t, i, n, blank=0), [lp, targets, il, tl], device)


def test_ctc_loss_concatenated_targets_another_blank_and_impossible_alignments(device):
    x, targets, il, tl = _ctc_batch(C=5)
    targets = np.where(targets == 3, 0, targets)        # blank 3 below: 0 is a label
    il = np.array([12, 2, 7, 12])                       # sample 1 cannot fit 3 labels in 2 steps: inf
    flat = np.concatenate([targets[n, :tl[n]] for n in range(4)])
    for zi in (True, False):
        _compare(lambda f, a, t, i, n: f.ctc_loss(f.log_softmax(a, 2), t, i, n, blank=3, reduction="none",
                                                  zero_infinity=zi), [x, flat, il, tl], device)


def test_ctc_loss_unbatched_and_the_module(device):
    x, targets, il, tl = _ctc_batch()
    _compare(lambda f, a, t: f.ctc_loss(f.log_softmax(a, 1), t, (10,), (3,)), [x[:, 0], targets[0, :3]], device)
    want = torch.nn.CTCLoss(blank=0, reduction="sum")(torch.log_softmax(torch.tensor(x), 2), torch.tensor(targets),
                                                      torch.tensor(il), torch.tensor(tl))
    got = nn.CTCLoss(reduction="sum")(F.log_softmax(ag.tensor(x, device=device), 2), ag.tensor(targets, device=device),
                                      ag.tensor(il, device=device), ag.tensor(tl, device=device))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)


def test_ctc_loss_float32_and_twice_differentiation_raises():
    x, targets, il, tl = _ctc_batch()
    got = F.ctc_loss(F.log_softmax(ag.tensor(x.astype(np.float32)), 2), ag.tensor(targets), ag.tensor(il), ag.tensor(tl))
    want = TF.ctc_loss(torch.log_softmax(torch.tensor(x, dtype=torch.float32), 2), torch.tensor(targets),
                       torch.tensor(il), torch.tensor(tl))
    assert got.dtype == ag.float32
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    a = ag.tensor(x, requires_grad=True)
    g, = ag.autograd.grad(F.ctc_loss(F.log_softmax(a, 2), ag.tensor(targets), ag.tensor(il), ag.tensor(tl)), [a],
                          create_graph=True)
    with pytest.raises(RuntimeError, match="not implemented"):
        g.sum().backward()


def test_ctc_loss_errors():
    x, targets, il, tl = _ctc_batch()
    lp = F.log_softmax(ag.tensor(x), 2)
    with pytest.raises(ValueError, match="input_lengths in"):
        F.ctc_loss(lp, ag.tensor(targets), ag.tensor(il + 5), ag.tensor(tl))
    with pytest.raises(ValueError, match="target_lengths in"):
        F.ctc_loss(lp, ag.tensor(targets), ag.tensor(il), ag.tensor(tl + 3))
    with pytest.raises(IndexError, match="out of range"):
        F.ctc_loss(lp, ag.tensor(targets + 6), ag.tensor(il), ag.tensor(tl))
    with pytest.raises(TypeError, match="integer"):
        F.ctc_loss(lp, ag.tensor(targets.astype(float)), ag.tensor(il), ag.tensor(tl))
    with pytest.raises(ValueError, match="blank"):
        F.ctc_loss(lp, ag.tensor(targets), ag.tensor(il), ag.tensor(tl), blank=6)


# --------------------------------------------------------------------------- errors
def test_argument_errors_name_what_was_expected():
    x = ag.ones(3, 4)
    with pytest.raises(ValueError, match="halving dimension must be even"):
        F.glu(ag.ones(3, 5))
    with pytest.raises(ValueError, match="min_val cannot be greater"):
        F.hardtanh(x, 2.0, 1.0)
    with pytest.raises(ValueError, match="lambd must be greater or equal to 0"):
        F.softshrink(x, -1.0)
    with pytest.raises(ValueError, match="channel size"):
        F.prelu(x, ag.ones(3))
    with pytest.raises(RuntimeError, match="beta must be non-negative"):
        F.smooth_l1_loss(x, x, beta=-1.0)
    with pytest.raises(RuntimeError, match="delta must be positive"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(ValueError, match="'batchmean'"):
        F.kl_div(x, x, reduction="avg")
    with pytest.raises(ValueError, match="margin must be greater than 0"):
        F.triplet_margin_loss(x, x, x, margin=0.0)
    with pytest.raises(ValueError, match="only p == 1 and p == 2"):
        F.multi_margin_loss(x, ag.tensor([0, 1, 2]), p=3)
    with pytest.raises(IndexError, match="out of range"):
        F.multi_margin_loss(x, ag.tensor([0, 1, 4]))
    with pytest.raises(ValueError, match="negative"):
        F.gaussian_nll_loss(x, x, -ag.ones(3, 4))
    with pytest.raises(ValueError, match="incorrect size"):
        F.gaussian_nll_loss(x, x, ag.ones(2, 2))
    with pytest.raises(ValueError, match="same number of dimensions"):
        F.margin_ranking_loss(x, x, ag.ones(4))
    with pytest.raises(ValueError, match="reduction must be"):
        F.soft_margin_loss(x, x, reduction="avg")
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(x, x)


def test_inplace_activations_write_into_the_input_without_a_graph():
    x = ag.tensor([-4.0, 0.5, 4.0])
    assert F.hardtanh(x, inplace=True) is x
    np.testing.assert_array_equal(x.numpy(), [-1.0, 0.5, 1.0])
    y = ag.tensor([-4.0, 0.5], requires_grad=True)
    assert F.mish(y, inplace=True) is not y             # a graph is recorded: a new tensor, as PyTorch refuses


# --------------------------------------------------------------------------- modules
MODULES = [
    ("Mish", (), {}), ("Hardswish", (), {}), ("Hardsigmoid", (), {}), ("Hardtanh", (-2.0, 3.0), {}),
    ("ReLU6", (), {}), ("SELU", (), {}), ("CELU", (0.7,), {}), ("GLU", (), {"dim": 0}), ("Softsign", (), {}),
    ("Tanhshrink", (), {}), ("Softshrink", (0.8,), {}), ("Hardshrink", (), {"lambd": 1.0}), ("LogSigmoid", (), {}),
    ("PReLU", (), {}), ("PReLU", (), {"num_parameters": 8, "init": 0.1}),
]


@pytest.mark.parametrize("name,args,kwargs", MODULES, ids=[f"{m[0]}{i}" for i, m in enumerate(MODULES)])
def test_activation_module_matches_torch(name, args, kwargs, device):
    tm = getattr(torch.nn, name)(*args, **kwargs).double()
    am = getattr(nn, name)(*args, **kwargs)
    am.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    am.to(device)
    assert [n for n, _ in am.named_parameters()] == [n for n, _ in tm.named_parameters()]
    for (n, p), (_, q) in zip(am.named_parameters(), tm.named_parameters()):
        np.testing.assert_array_equal(p.numpy(), q.detach().numpy().astype(np.float32), err_msg=n)  # default init
    x = X.reshape(4, 8)
    xt = torch.tensor(x, requires_grad=True)
    xa = ag.tensor(x, device=device, requires_grad=True)
    yt, ya = tm(xt), am.double()(xa)
    np.testing.assert_allclose(ya.numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-12)
    yt.sum().backward()
    ya.sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-12)
    for (n, p), (_, q) in zip(am.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-7, err_msg=n)


def test_softmax2d_cosine_similarity_pairwise_distance_modules(device):
    x = _rand(2, 3, 4, 5)
    np.testing.assert_allclose(nn.Softmax2d()(ag.tensor(x, device=device)).numpy(),
                               torch.nn.Softmax2d()(torch.tensor(x)).numpy(), rtol=1e-10)
    with pytest.raises(ValueError, match="3 or 4 dimensions"):
        nn.Softmax2d()(ag.ones(2, 3))
    a, b = _rand(4, 5), _rand(4, 5)
    for am, tm in ((nn.CosineSimilarity(dim=0), torch.nn.CosineSimilarity(dim=0)),
                   (nn.PairwiseDistance(p=1.0, keepdim=True), torch.nn.PairwiseDistance(p=1.0, keepdim=True))):
        np.testing.assert_allclose(am(ag.tensor(a, device=device), ag.tensor(b, device=device)).numpy(),
                                   tm(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-10)


LOSS_MODULES = [
    ("SmoothL1Loss", {"beta": 0.5, "reduction": "sum"}, [(4, 5), (4, 5)]),
    ("HuberLoss", {"delta": 0.5}, [(4, 5), (4, 5)]),
    ("KLDivLoss", {"reduction": "batchmean", "log_target": True}, [(4, 5), (4, 5)]),
    ("MarginRankingLoss", {"margin": 0.1}, [(6,), (6,), "sign6"]),
    ("TripletMarginLoss", {"margin": 0.5, "swap": True}, [(4, 3), (4, 3), (4, 3)]),
    ("CosineEmbeddingLoss", {"margin": 0.2, "reduction": "none"}, [(6, 3), (6, 3), "sign6"]),
    ("PoissonNLLLoss", {"full": True}, [(4, 5), "counts"]),       # (targets >= 1: torch's is nan at 0)
    ("GaussianNLLLoss", {"full": True, "eps": 1e-3}, [(4, 5), (4, 5), "var"]),
    ("MultiMarginLoss", {"margin": 0.7, "weight": "w4"}, [(5, 4), "class4"]),
    ("MultiLabelSoftMarginLoss", {"weight": "w4"}, [(5, 4), "labels"]),
    ("HingeEmbeddingLoss", {"margin": 0.3}, [(4, 5), "sign45"]),
    ("SoftMarginLoss", {"size_average": False}, [(4, 5), "sign45"]),
]


def _array(spec):
    special = {"sign6": lambda: _sign(6), "sign45": lambda: _sign(4, 5), "counts": lambda: np.round(_rand(4, 5, lo=1, hi=4)),
               "var": lambda: _rand(4, 5, lo=0.0), "class4": lambda: RNG.integers(0, 4, 5),
               "labels": lambda: RNG.integers(0, 2, (5, 4)).astype(float)}
    return special[spec]() if isinstance(spec, str) else _rand(*spec)


@pytest.mark.filterwarnings("ignore:size_average and reduce")
@pytest.mark.parametrize("name,kwargs,specs", LOSS_MODULES, ids=[m[0] for m in LOSS_MODULES])
def test_loss_module_matches_torch(name, kwargs, specs, device):
    w = _rand(4, lo=0.2)
    tk = {k: (torch.tensor(w) if v == "w4" else v) for k, v in kwargs.items()}
    ak = {k: (ag.tensor(w, device=device) if v == "w4" else v) for k, v in kwargs.items()}
    tm, am = getattr(torch.nn, name)(**tk), getattr(nn, name)(**ak)
    assert am.reduction == tm.reduction
    targets = [isinstance(s, str) and s != "var" for s in specs]       # labels and counts take no gradient
    _compare(lambda f, *xs: (tm if f is TF else am)(*[x.detach() if t else x for x, t in zip(xs, targets)]),
             [_array(s) for s in specs], device)
    if "weight" in kwargs:                              # class weights are buffers, in the state dict
        assert list(am.state_dict()) == list(tm.state_dict()) == ["weight"]


# --------------------------------------------------------------------------- ParameterList / ParameterDict
def test_parameter_list_registers_appends_and_round_trips_a_torch_state_dict():
    tl = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(2, 3)), torch.nn.Parameter(torch.randn(4))])
    pl = nn.ParameterList([ag.zeros(2, 3), nn.Parameter(ag.zeros(4))])
    assert all(isinstance(p, nn.Parameter) for p in pl)
    assert list(pl.state_dict()) == list(tl.state_dict()) == ["0", "1"]
    pl.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in tl.state_dict().items()})
    np.testing.assert_allclose(pl[0].numpy(), tl[0].detach().numpy())
    pl.append(ag.ones(1))
    pl += [ag.ones(2)]
    assert len(pl) == 4 and [p.shape for p in pl[1:3]] == [(4,), (1,)] and pl[-1].shape == (2,)
    assert len(list(pl.parameters())) == 4
    pl[0] = ag.ones(5)
    assert isinstance(pl[0], nn.Parameter) and pl[0].shape == (5,)
    with pytest.raises(IndexError, match="out of range"):
        pl[7]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.ps = nn.ParameterList([ag.ones(2)])

    assert list(M().state_dict()) == ["ps.0"]


def test_parameter_dict_behaves_as_a_dict_of_parameters():
    td = torch.nn.ParameterDict({"b": torch.nn.Parameter(torch.randn(2)), "a": torch.nn.Parameter(torch.randn(3))})
    pd = nn.ParameterDict({"b": ag.zeros(2), "a": ag.zeros(3)})
    assert list(pd.state_dict()) == list(td.state_dict()) == ["a", "b"]       # a plain dict: sorted, as torch
    assert list(nn.ParameterDict([("b", ag.ones(1)), ("a", ag.ones(1))])) == ["b", "a"]
    pd.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in td.state_dict().items()})
    np.testing.assert_allclose(pd["a"].numpy(), td["a"].detach().numpy())
    pd["c"] = ag.ones(1)
    assert "c" in pd and len(pd) == 3 and isinstance(pd["c"], nn.Parameter)
    assert pd.keys() == ["a", "b", "c"]
    assert pd.pop("b").shape == (2,) and list(pd) == ["a", "c"]
    pd.update([("d", ag.ones(4))])
    assert [k for k, _ in pd.named_parameters()] == ["a", "c", "d"]
    assert pd.get("zz") is None and pd.setdefault("e", ag.ones(1)).shape == (1,)
    with pytest.raises(KeyError):
        pd["zz"]
    with pytest.raises(TypeError, match="strings"):
        pd[1] = ag.ones(1)
    pd.clear()
    assert len(pd) == 0 and not list(pd.parameters())
