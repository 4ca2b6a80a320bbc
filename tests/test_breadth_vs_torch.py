"""What the other breadth tests left uncompared with PyTorch (the audit of issue 26's "tests compare each
module, loss, optimizer (20 steps) and scheduler (30 epochs) with PyTorch"):

- every loss module under every ``reduction`` (values and input gradients, float64), CTCLoss included;
- the modules compared by value only elsewhere (Softmax2d, CosineSimilarity, PairwiseDistance) and the
  module options the layer tests leave out (norms without bias or in eval mode after training steps, RMSNorm
  without affine, Upsample's other modes), each with a PyTorch state dict loaded by name: forward, input and
  parameter gradients, buffers;
- every optimizer, at PyTorch's defaults and with the options that matter (maximize, weight_decay,
  momentum/nesterov, amsgrad, centered, decoupled weight decay, LBFGS's strong-Wolfe search): parameters equal
  after EACH of 20 steps; mid-run, a fresh optimizer loaded from this one's state_dict() -- and one loaded from
  PyTorch's own state_dict -- carries on exactly as PyTorch's uninterrupted run;
- every scheduler for 30 epochs (lr and momentum/betas of each group after each epoch), OneCycleLR and CyclicLR
  cycling Adam's beta1 as well as SGD's momentum, SequentialLR / ChainedScheduler compositions,
  ReduceLROnPlateau on a metric sequence; mid-run, a fresh optimizer + scheduler loaded from the state dicts
  carries on as PyTorch's uninterrupted run."""
import copy

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu import nn, optim
from autograd_gpu.optim import lr_scheduler

torch = pytest.importorskip("torch")
TF = torch.nn.functional

RNG = np.random.default_rng(2026)


def _r(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape)


def _sign(*shape):
    return np.where(RNG.uniform(-1, 1, shape) > 0, 1.0, -1.0)


def _close(got, want, rtol=1e-9, atol=1e-11, what=""):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


# =============================================================================== loss modules, every reduction
REDUCTIONS = ("none", "mean", "sum")
# name -> (kwargs, input specs); a spec is a shape (a differentiable float input) or a named target kind
LOSS_MODULES = {
    "SmoothL1Loss": ({"beta": 0.7}, [(4, 5), (4, 5)]),
    "HuberLoss": ({"delta": 0.6}, [(4, 5), (4, 5)]),
    "KLDivLoss": ({}, [(4, 5), "prob45"]),
    "KLDivLoss-log_target": ({"log_target": True}, [(4, 5), (4, 5)]),
    "MarginRankingLoss": ({"margin": 0.3}, [(6,), (6,), "sign6"]),
    "TripletMarginLoss": ({"margin": 0.8, "p": 1.5, "swap": True}, [(4, 3), (4, 3), (4, 3)]),
    "CosineEmbeddingLoss": ({"margin": -0.2}, [(6, 3), (6, 3), "sign6"]),
    "PoissonNLLLoss": ({}, [(4, 5), "counts"]),
    "PoissonNLLLoss-full": ({"log_input": False, "full": True}, ["positive45", "counts"]),
    "GaussianNLLLoss": ({"eps": 1e-4}, [(4, 5), (4, 5), "var"]),
    "GaussianNLLLoss-full": ({"full": True}, [(4, 5), (4, 5), "var4"]),
    "MultiMarginLoss": ({"p": 2, "margin": 0.4, "weight": "w4"}, [(5, 4), "class4"]),
    "MultiLabelSoftMarginLoss": ({"weight": "w4"}, [(5, 4), "labels"]),
    "HingeEmbeddingLoss": ({"margin": 0.6}, [(4, 5), "sign45"]),
    "SoftMarginLoss": ({}, [(4, 5), "sign45"]),
}
_SPECIAL = {"sign6": lambda: _sign(6), "sign45": lambda: _sign(4, 5), "prob45": lambda: _r(4, 5, lo=0.05, hi=1),
            "counts": lambda: np.round(_r(4, 5, lo=1, hi=4)), "positive45": lambda: _r(4, 5, lo=0.2, hi=2),
            "var": lambda: _r(4, 5, lo=0.05, hi=1), "var4": lambda: _r(4, 1, lo=0.05, hi=1),
            "class4": lambda: RNG.integers(0, 4, 5), "labels": lambda: RNG.integers(0, 2, (5, 4)).astype(float)}
_DIFFERENTIABLE_SPECS = {"positive45", "var", "var4"}


def _loss_case(name, reduction):
    kwargs, specs = LOSS_MODULES[name]
    w = _r(4, lo=0.2, hi=1.5)
    cls = name.split("-")[0]
    tk = {k: (torch.tensor(w) if v == "w4" else v) for k, v in kwargs.items()}
    ak = {k: (ag.tensor(w) if v == "w4" else v) for k, v in kwargs.items()}
    arrays = [_SPECIAL[s]() if isinstance(s, str) else _r(*s) for s in specs]
    grads = [not isinstance(s, str) or s in _DIFFERENTIABLE_SPECS for s in specs]
    return (getattr(nn, cls)(reduction=reduction, **ak), getattr(torch.nn, cls)(reduction=reduction, **tk),
            arrays, grads)


def _compare_module(am, tm, arrays, grads, rtol=1e-9, atol=1e-11):
    """am(*ag inputs) against tm(*torch inputs): the value, then the gradient of sum(out * cotangent) for each
    differentiable input and each parameter."""
    ta = [torch.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    aa = [ag.tensor(a, requires_grad=g) for a, g in zip(arrays, grads)]
    want, got = tm(*ta), am(*aa)
    assert tuple(got.shape) == tuple(want.shape)
    _close(got.numpy(), want.detach().numpy(), rtol, atol, "value")
    cot = RNG.uniform(0.5, 1.5, tuple(want.shape))
    (want * torch.tensor(cot)).sum().backward()
    (got * ag.tensor(cot)).sum().backward()
    for i, (a, t) in enumerate(zip(aa, ta)):
        if t.requires_grad:
            want_g = np.zeros(t.shape) if t.grad is None else t.grad.numpy()
            got_g = np.zeros(a.shape) if a.grad is None else a.grad.numpy()
            _close(got_g, want_g, rtol, atol, f"gradient of input {i}")
    tparams = dict(tm.named_parameters())
    for k, p in am.named_parameters():
        _close(p.grad.numpy(), tparams[k].grad.numpy(), rtol, atol, f"gradient of {k}")
    tbuffers = dict(tm.named_buffers())
    for k, b in am.named_buffers():
        if b is not None:
            _close(b.numpy(), tbuffers[k].numpy(), rtol, atol, f"buffer {k}")


@pytest.mark.filterwarnings("ignore:kl_div. reduction='mean'", "ignore:reduction. 'mean'")   # both warn as torch
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(LOSS_MODULES))
def test_loss_module_matches_torch_for_every_reduction(name, reduction):
    am, tm, arrays, grads = _loss_case(name, reduction)
    assert am.reduction == tm.reduction == reduction
    _compare_module(am, tm, arrays, grads)


def test_kl_div_loss_batchmean_module():
    am, tm = nn.KLDivLoss(reduction="batchmean"), torch.nn.KLDivLoss(reduction="batchmean")
    _compare_module(am, tm, [_r(4, 5), _r(4, 5, lo=0.05, hi=1)], [True, False])


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_ctc_loss_module_matches_torch_for_every_reduction(reduction, zero_infinity):
    T, N, C, S = 10, 3, 5, 4
    rng = np.random.default_rng(3)
    lp = torch.log_softmax(torch.tensor(rng.standard_normal((T, N, C))), 2).numpy()
    targets = rng.integers(1, C, (N, S))
    il, tl = np.array([T, 8, 2]), np.array([S, 2, 3])       # the last one cannot fit: inf (or 0 when zeroed)
    tm = torch.nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=zero_infinity)
    am = nn.CTCLoss(blank=0, reduction=reduction, zero_infinity=zero_infinity)
    ints = [torch.tensor(a) for a in (targets, il, tl)]
    tlp, alp = torch.tensor(lp, requires_grad=True), ag.tensor(lp, requires_grad=True)
    want, got = tm(tlp, *ints), am(alp, *[ag.tensor(a) for a in (targets, il, tl)])
    _close(got.numpy(), want.detach().numpy(), 1e-9, 1e-11)
    if not zero_infinity and reduction != "none":
        return                                      # inf: no finite gradient to compare
    cot = np.ones(tuple(want.shape)) if reduction != "none" else np.array([1.0, 0.5, 2.0])
    (want * torch.tensor(cot)).sum().backward()
    (got * ag.tensor(cot)).sum().backward()
    _close(alp.grad.numpy(), tlp.grad.numpy(), 1e-9, 1e-11)


# =============================================================================== modules: options left out elsewhere
def _load(mod, tmod):
    sd = {k: ag.tensor(v.detach().numpy()) for k, v in tmod.state_dict().items()}
    assert list(sd) == list(mod.state_dict()), (list(sd), list(mod.state_dict()))
    mod.load_state_dict(sd)
    return mod


MODULES = {
    "Softmax2d": (lambda: nn.Softmax2d(), lambda: torch.nn.Softmax2d(), [(2, 3, 4, 5)]),
    "Softmax2d-unbatched": (lambda: nn.Softmax2d(), lambda: torch.nn.Softmax2d(), [(3, 4, 5)]),
    "CosineSimilarity": (lambda: nn.CosineSimilarity(dim=0, eps=1e-6), lambda: torch.nn.CosineSimilarity(0, 1e-6),
                         [(4, 5), (4, 5)]),
    "PairwiseDistance": (lambda: nn.PairwiseDistance(p=3.0, keepdim=True),
                         lambda: torch.nn.PairwiseDistance(p=3.0, keepdim=True), [(4, 5), (4, 5)]),
    "PairwiseDistance-default": (lambda: nn.PairwiseDistance(), lambda: torch.nn.PairwiseDistance(), [(4, 5), (5,)]),
    "GroupNorm-no-bias": (lambda: nn.GroupNorm(3, 6, bias=False), lambda: torch.nn.GroupNorm(3, 6, bias=False),
                          [(2, 6, 5)]),
    "GroupNorm-no-affine": (lambda: nn.GroupNorm(2, 4, affine=False, eps=1e-3),
                            lambda: torch.nn.GroupNorm(2, 4, affine=False, eps=1e-3), [(3, 4, 2, 3)]),
    "InstanceNorm1d-no-bias-tracked": (
        lambda: nn.InstanceNorm1d(3, affine=True, bias=False, track_running_stats=True, momentum=0.3),
        lambda: torch.nn.InstanceNorm1d(3, affine=True, bias=False, track_running_stats=True, momentum=0.3),
        [(2, 3, 6)]),
    "InstanceNorm2d-unbatched": (lambda: nn.InstanceNorm2d(3, affine=True), lambda: torch.nn.InstanceNorm2d(
        3, affine=True), [(3, 4, 5)]),
    "RMSNorm-no-affine-eps": (lambda: nn.RMSNorm((3, 4), eps=1e-2, elementwise_affine=False),
                              lambda: torch.nn.RMSNorm((3, 4), eps=1e-2, elementwise_affine=False), [(2, 3, 4)]),
    "RMSNorm-2d": (lambda: nn.RMSNorm([2, 5]), lambda: torch.nn.RMSNorm([2, 5]), [(3, 2, 5)]),
    "LocalResponseNorm-3d": (lambda: nn.LocalResponseNorm(2, alpha=0.01, beta=0.5, k=2.0),
                             lambda: torch.nn.LocalResponseNorm(2, alpha=0.01, beta=0.5, k=2.0), [(2, 5, 6)]),
    "Upsample-nearest-size": (lambda: nn.Upsample(size=(5, 7)), lambda: torch.nn.Upsample(size=(5, 7)),
                              [(1, 2, 3, 4)]),
    "Upsample-bicubic-corners": (lambda: nn.Upsample(scale_factor=(1.5, 2), mode="bicubic", align_corners=True),
                                 lambda: torch.nn.Upsample(scale_factor=(1.5, 2), mode="bicubic", align_corners=True),
                                 [(1, 2, 3, 4)]),
    "Upsample-linear": (lambda: nn.Upsample(scale_factor=3, mode="linear"),
                        lambda: torch.nn.Upsample(scale_factor=3, mode="linear"), [(2, 2, 4)]),
    "ConvTranspose2d-dilation-no-bias": (
        lambda: nn.ConvTranspose2d(2, 4, (2, 3), stride=(2, 1), dilation=(1, 2), bias=False),
        lambda: torch.nn.ConvTranspose2d(2, 4, (2, 3), stride=(2, 1), dilation=(1, 2), bias=False), [(2, 2, 3, 4)]),
    # padding_mode: F.pad by the mode, then the convolution without padding
    "Conv3d-stride-circular": (lambda: nn.Conv3d(2, 3, 2, stride=(1, 2, 1), padding=1, padding_mode="circular"),
                               lambda: torch.nn.Conv3d(2, 3, 2, stride=(1, 2, 1), padding=1, padding_mode="circular"),
                               [(1, 2, 3, 4, 3)]),
    "Conv3d-replicate-same": (lambda: nn.Conv3d(2, 2, (2, 3, 2), padding="same", padding_mode="replicate"),
                              lambda: torch.nn.Conv3d(2, 2, (2, 3, 2), padding="same", padding_mode="replicate"),
                              [(1, 2, 3, 4, 3)]),
    "Conv1d-reflect-same-even": (lambda: nn.Conv1d(2, 3, 4, padding="same", dilation=2, padding_mode="reflect"),
                                 lambda: torch.nn.Conv1d(2, 3, 4, padding="same", dilation=2, padding_mode="reflect"),
                                 [(2, 2, 9)]),
    "Conv1d-circular-unbatched": (lambda: nn.Conv1d(2, 3, 3, stride=2, padding=2, padding_mode="circular"),
                                  lambda: torch.nn.Conv1d(2, 3, 3, stride=2, padding=2, padding_mode="circular"),
                                  [(2, 7)]),
    "Conv2d-reflect": (lambda: nn.Conv2d(2, 4, 3, padding=(1, 2), groups=2, padding_mode="reflect"),
                       lambda: torch.nn.Conv2d(2, 4, 3, padding=(1, 2), groups=2, padding_mode="reflect"),
                       [(2, 2, 4, 5)]),
    "Conv2d-replicate-stride": (lambda: nn.Conv2d(3, 2, (2, 3), stride=2, padding=1, padding_mode="replicate"),
                                lambda: torch.nn.Conv2d(3, 2, (2, 3), stride=2, padding=1, padding_mode="replicate"),
                                [(1, 3, 5, 6)]),
    "Conv2d-circular-valid": (lambda: nn.Conv2d(1, 2, 2, padding="valid", padding_mode="circular"),
                              lambda: torch.nn.Conv2d(1, 2, 2, padding="valid", padding_mode="circular"),
                              [(1, 1, 3, 3)]),
    "EmbeddingBag-max": (lambda: nn.EmbeddingBag(6, 3, mode="max"), lambda: torch.nn.EmbeddingBag(6, 3, mode="max"),
                         ["bags"]),
    "Bilinear-no-bias": (lambda: nn.Bilinear(2, 3, 4, bias=False), lambda: torch.nn.Bilinear(2, 3, 4, bias=False),
                         [(5, 2), (5, 3)]),
    "PReLU-channels": (lambda: nn.PReLU(3, init=0.2), lambda: torch.nn.PReLU(3, init=0.2), [(2, 3, 4)]),
    "GLU": (lambda: nn.GLU(dim=1), lambda: torch.nn.GLU(dim=1), [(3, 4, 2)]),
    "Hardtanh-inplace": (lambda: nn.Hardtanh(-0.5, 0.5), lambda: torch.nn.Hardtanh(-0.5, 0.5), [(3, 4)]),
    "Unflatten-named-dims": (lambda: nn.Unflatten(-1, (2, 3)), lambda: torch.nn.Unflatten(-1, (2, 3)), [(4, 6)]),
    "MaxPool1d-ceil-dilation": (lambda: nn.MaxPool1d(3, 2, 1, dilation=2, ceil_mode=True),
                                lambda: torch.nn.MaxPool1d(3, 2, 1, dilation=2, ceil_mode=True), [(2, 3, 10)]),
    "AvgPool1d-ceil": (lambda: nn.AvgPool1d(3, 2, 1, ceil_mode=True), lambda: torch.nn.AvgPool1d(3, 2, 1, ceil_mode=True),
                       [(2, 3, 8)]),
    "AdaptiveMaxPool2d-None": (lambda: nn.AdaptiveMaxPool2d((None, 3)), lambda: torch.nn.AdaptiveMaxPool2d((None, 3)),
                               [(2, 3, 5, 4)]),
    "AdaptiveAvgPool1d-unbatched": (lambda: nn.AdaptiveAvgPool1d(4), lambda: torch.nn.AdaptiveAvgPool1d(4), [(3, 9)]),
    "Upsample-trilinear": (lambda: nn.Upsample(scale_factor=2, mode="trilinear"),
                           lambda: torch.nn.Upsample(scale_factor=2, mode="trilinear"), [(1, 2, 2, 3, 2)]),
    "Upsample-bilinear-recompute": (
        lambda: nn.Upsample(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
        lambda: torch.nn.Upsample(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True), [(1, 2, 5, 4)]),
    "Bilinear-unbatched": (lambda: nn.Bilinear(2, 3, 4), lambda: torch.nn.Bilinear(2, 3, 4), [(2,), (3,)]),
    "Bilinear-3d": (lambda: nn.Bilinear(2, 3, 4), lambda: torch.nn.Bilinear(2, 3, 4), [(5, 6, 2), (5, 6, 3)]),
    "Fold-unbatched": (lambda: nn.Fold((4, 5), 2), lambda: torch.nn.Fold((4, 5), 2), [(8, 12)]),
    "PixelShuffle-5d": (lambda: nn.PixelShuffle(2), lambda: torch.nn.PixelShuffle(2), [(2, 2, 8, 2, 3)]),
    "ZeroPad2d-negative": (lambda: nn.ZeroPad2d((-1, 2, 0, -1)), lambda: torch.nn.ZeroPad2d((-1, 2, 0, -1)),
                           [(1, 2, 4, 4)]),
    "Transformer-gelu-norm_first-batch_first": (
        lambda: nn.Transformer(8, 2, 1, 1, 16, 0.0, activation="gelu", batch_first=True, norm_first=True),
        lambda: torch.nn.Transformer(8, 2, 1, 1, 16, 0.0, activation="gelu", batch_first=True, norm_first=True),
        [(2, 5, 8), (2, 4, 8)]),
    "Transformer-no-bias": (lambda: nn.Transformer(8, 2, 1, 1, 16, 0.0, bias=False),
                            lambda: torch.nn.Transformer(8, 2, 1, 1, 16, 0.0, bias=False), [(5, 2, 8), (4, 2, 8)]),
}


@pytest.mark.filterwarnings("ignore:enable_nested_tensor")          # torch's Transformer with norm_first
@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_with_torchs_state_dict_matches_torch(name):
    make, tmake, shapes = MODULES[name]
    torch.manual_seed(1)
    tm = tmake().double()
    am = _load(make().to(dtype=ag.float64), tm)
    if shapes == ["bags"]:
        idx = np.array([[1, 4, 4], [0, 5, 2]])
        want, got = tm(torch.tensor(idx)), am(ag.tensor(idx))
        _close(got.numpy(), want.detach().numpy())
        want.sum().backward()
        got.sum().backward()
        _close(am.weight.grad.numpy(), tm.weight.grad.numpy())
        return
    _compare_module(am, tm, [_r(*s) for s in shapes], [True] * len(shapes))


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_embedding_bag_scale_grad_by_freq_is_torchs_embedding_then_the_bag_reduction(mode):
    """Each index's gradient divided by its count in the batch (PyTorch's documented semantics, what
    torch.nn.Embedding(scale_grad_by_freq=True) followed by the bag's sum or mean gives). PyTorch 2.13's own CPU
    embedding_bag kernel is not the reference here: it divides by wrong counts (indices [[5, 2, 2, 1, 1, 1]]
    give index 5 a gradient of 1/3 and index 2 of 2/3, where each should get 1)."""
    idx = np.array([[5, 2, 2, 1, 1, 1], [0, 2, 4, 4, 1, 3]])
    torch.manual_seed(0)
    te = torch.nn.Embedding(6, 3, scale_grad_by_freq=True).double()
    am = _load(nn.EmbeddingBag(6, 3, mode=mode, scale_grad_by_freq=True).to(dtype=ag.float64), te)
    e = te(torch.tensor(idx))
    want = e.sum(1) if mode == "sum" else e.mean(1)
    got = am(ag.tensor(idx))
    _close(got.numpy(), want.detach().numpy())
    g = _r(*want.shape)
    (want * torch.tensor(g)).sum().backward()
    (got * ag.tensor(g)).sum().backward()
    _close(am.weight.grad.numpy(), te.weight.grad.numpy())


@pytest.mark.parametrize("cls", ["InstanceNorm2d", "GroupNorm", "BatchNorm2d"])
def test_norm_trained_then_evaluated_matches_torch(cls):
    """Three training steps (running statistics move), then eval: the same outputs and buffers as PyTorch's."""
    args = (2, 4) if cls == "GroupNorm" else (4,)
    kw = {} if cls == "GroupNorm" else {"track_running_stats": True, "affine": True, "momentum": 0.2}
    tm = getattr(torch.nn, cls)(*args, **kw).double()
    with torch.no_grad():
        for p in tm.parameters():
            p.add_(torch.tensor(_r(*p.shape, lo=-0.5, hi=0.5)))
    am = _load(getattr(nn, cls)(*args, **kw).to(dtype=ag.float64), tm)
    for _ in range(3):
        _compare_module(am, tm, [_r(3, 4, 2, 5)], [True])
        for p, q in zip(am.parameters(), tm.parameters()):
            p.grad, q.grad = None, None
    am.eval()
    tm.eval()
    _compare_module(am, tm, [_r(3, 4, 2, 5)], [True])


# =============================================================================== optimizers: each of 20 steps
X = RNG.normal(size=(12, 4))
Y = RNG.normal(size=(12, 2))
W1, B1 = RNG.normal(size=(6, 4)) * 0.5, RNG.normal(size=6) * 0.1
W2, B2 = RNG.normal(size=(2, 6)) * 0.5, RNG.normal(size=2) * 0.1


def _models():
    m = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).to(dtype=ag.float64)
    m.load_state_dict({"0.weight": W1, "0.bias": B1, "2.weight": W2, "2.bias": B2})
    tm = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 2)).double()
    with torch.no_grad():
        for p, v in zip(tm.parameters(), (W1, B1, W2, B2)):
            p.copy_(torch.from_numpy(v))
    return m, tm


def _closures(m, opt, tm, topt):
    x, y, tx, ty = ag.tensor(X), ag.tensor(Y), torch.from_numpy(X), torch.from_numpy(Y)

    def closure():
        opt[0].zero_grad()
        loss = ((m(x) - y) ** 2).mean()
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = ((tm(tx) - ty) ** 2).mean()
        loss.backward()
        return loss
    return closure, tclosure


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.05)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, maximize=True)),
    ("Adam", {}),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.9), maximize=True, decoupled_weight_decay=True, weight_decay=0.2)),
    ("AdamW", {}),
    ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True, weight_decay=0.3)),
    ("RMSprop", {}),
    ("RMSprop", dict(lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, maximize=True)),
    ("Adagrad", {}),
    ("Adagrad", dict(lr=0.05, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1, maximize=True)),
    ("Adadelta", {}),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
    ("Adamax", {}),
    ("Adamax", dict(lr=0.01, weight_decay=0.05, maximize=True)),
    ("NAdam", {}),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("ASGD", {}),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.1, maximize=True)),
    ("Rprop", {}),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
]
# PyTorch keeps NAdam's momentum product and ASGD's eta and mu as float32 scalars whatever the parameters'
# dtype; here they are Python floats: agreement to float32's precision
LOOSE = {"NAdam", "ASGD"}


@pytest.mark.parametrize("resume", ["own", "torch"])
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZERS)])
def test_optimizer_each_of_20_steps_matches_torch_and_resumes_from_a_state_dict(name, kw, resume):
    m, tm = _models()
    opt = [getattr(optim, name)(m.parameters(), **kw)]
    topt = getattr(torch.optim, name)(tm.parameters(), **kw)
    closure, tclosure = _closures(m, opt, tm, topt)
    tol = dict(rtol=1e-7, atol=1e-8) if name in LOOSE else dict(rtol=1e-10, atol=1e-12)
    for step in range(20):
        if step == 10:          # resume: a fresh optimizer from this one's (or torch's) state dict
            sd = copy.deepcopy(opt[0].state_dict()) if resume == "own" else copy.deepcopy(topt.state_dict())   # torch tensors, loaded as they are
            opt[0] = getattr(optim, name)(m.parameters(), **kw)
            opt[0].load_state_dict(sd)
        closure()
        opt[0].step()
        tclosure()
        topt.step()
        for (k, p), tp in zip(m.named_parameters(), tm.parameters()):
            _close(p.numpy(), tp.detach().numpy(), what=f"step {step}, {k}", **tol)


LBFGS_CASES = [{}, dict(lr=0.5, history_size=3, max_iter=6), dict(line_search_fn="strong_wolfe"),
               dict(lr=0.8, history_size=4, max_iter=5, line_search_fn="strong_wolfe", tolerance_change=1e-12)]


@pytest.mark.parametrize("resume", ["own", "torch"])
@pytest.mark.parametrize("kw", LBFGS_CASES, ids=["default", "history3", "strong_wolfe", "strong_wolfe-short"])
def test_lbfgs_each_step_matches_torch_and_resumes_from_a_state_dict(kw, resume):
    m, tm = _models()
    opt = [optim.LBFGS(m.parameters(), **kw)]
    topt = torch.optim.LBFGS(tm.parameters(), **kw)
    closure, tclosure = _closures(m, opt, tm, topt)
    for step in range(4):
        if step == 2:
            sd = copy.deepcopy(opt[0].state_dict()) if resume == "own" else copy.deepcopy(topt.state_dict())   # torch tensors, loaded as they are
            opt[0] = optim.LBFGS(m.parameters(), **kw)
            opt[0].load_state_dict(sd)
        loss, tloss = opt[0].step(closure), topt.step(tclosure)
        _close(float(loss), float(tloss.detach()), rtol=1e-8, what=f"step {step} loss")
        for (k, p), tp in zip(m.named_parameters(), tm.parameters()):
            _close(p.numpy(), tp.detach().numpy(), rtol=1e-7, atol=1e-9, what=f"step {step}, {k}")
        state, tstate = opt[0].state[m[0].weight], topt.state[tm[0].weight]
        assert (state["func_evals"], state["n_iter"]) == (tstate["func_evals"], tstate["n_iter"])


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam",
                                  "RAdam", "ASGD", "Rprop"])
def test_optimizer_groups_with_their_own_options_and_parameters_without_gradients(name):
    """Two groups (the second with its own lr and weight decay); the second group's parameter gets a gradient
    only every third step (PyTorch skips a parameter whose .grad is None: no state change, no step count)."""
    rng = np.random.default_rng(5)
    a0, b0 = rng.normal(size=3), rng.normal(size=(2, 2))
    kw = {"SGD": dict(lr=0.05, momentum=0.9), "Adadelta": {}}.get(name, dict(lr=0.05))
    a, b = ag.tensor(a0, requires_grad=True), ag.tensor(b0, requires_grad=True)
    ta, tb = torch.tensor(a0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt = getattr(optim, name)([{"params": [a]}, {"params": [b], "weight_decay": 0.1, "lr": 0.02}], **kw)
    topt = getattr(torch.optim, name)([{"params": [ta]}, {"params": [tb], "weight_decay": 0.1, "lr": 0.02}], **kw)
    tol = dict(rtol=1e-7, atol=1e-8) if name in LOOSE else dict(rtol=1e-10, atol=1e-12)
    for step in range(12):
        opt.zero_grad()
        topt.zero_grad()
        loss, tloss = (a * a).sum(), (ta * ta).sum()
        if step % 3 == 0:
            loss, tloss = loss + (b * b * b).sum(), tloss + (tb ** 3).sum()
        loss.backward()
        tloss.backward()
        opt.step()
        topt.step()
        _close(a.numpy(), ta.detach().numpy(), what=f"step {step}, a", **tol)
        _close(b.numpy(), tb.detach().numpy(), what=f"step {step}, b", **tol)


# =============================================================================== schedulers: 30 epochs
def _groups(lib, opt_name):
    """Two parameter groups (lr 0.1 and 0.2) of SGD with momentum, or of Adam (betas cycle instead)."""
    ps = ([nn.Parameter(ag.zeros(2)), nn.Parameter(ag.zeros(3))] if lib is lr_scheduler else
          [torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)])
    o = optim if lib is lr_scheduler else torch.optim
    groups = [{"params": [ps[0]]}, {"params": [ps[1]], "lr": 0.2}]
    return o.SGD(groups, lr=0.1, momentum=0.9) if opt_name == "SGD" else o.Adam(groups, lr=0.1, betas=(0.85, 0.99))


SCHEDULERS = {
    "StepLR": ("SGD", lambda s, o: s.StepLR(o, 4, gamma=0.7)),
    "MultiStepLR": ("SGD", lambda s, o: s.MultiStepLR(o, [2, 5, 5, 11], gamma=0.5)),
    "ExponentialLR": ("Adam", lambda s, o: s.ExponentialLR(o, 0.93)),
    "CosineAnnealingLR": ("SGD", lambda s, o: s.CosineAnnealingLR(o, 7, eta_min=0.01)),     # past T_max: it cycles
    "LambdaLR": ("SGD", lambda s, o: s.LambdaLR(o, lambda e: 1 / (1 + 0.3 * e))),
    "MultiplicativeLR": ("Adam", lambda s, o: s.MultiplicativeLR(o, [lambda e: 0.95, lambda e: 1.02])),
    "ConstantLR": ("SGD", lambda s, o: s.ConstantLR(o)),                                       # PyTorch's defaults
    "LinearLR": ("SGD", lambda s, o: s.LinearLR(o)),
    "PolynomialLR": ("Adam", lambda s, o: s.PolynomialLR(o, total_iters=12, power=0.5)),
    "CosineAnnealingWarmRestarts": ("SGD", lambda s, o: s.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=3,
                                                                                      eta_min=0.005)),
    "CyclicLR-SGD": ("SGD", lambda s, o: s.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                                    base_momentum=0.7, max_momentum=0.95)),
    "CyclicLR-Adam": ("Adam", lambda s, o: s.CyclicLR(o, base_lr=[0.01, 0.02], max_lr=[0.1, 0.3], step_size_up=3,
                                                      step_size_down=5, mode="triangular2",
                                                      base_momentum=0.6, max_momentum=0.9)),
    "CyclicLR-exp-no-momentum": ("SGD", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=2, mode="exp_range",
                                                                gamma=0.9, cycle_momentum=False)),
    "CyclicLR-scale_fn": ("SGD", lambda s, o: s.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                         scale_fn=lambda x: 0.5 ** x, scale_mode="iterations")),
    "OneCycleLR-SGD": ("SGD", lambda s, o: s.OneCycleLR(o, max_lr=0.5, total_steps=31)),
    "OneCycleLR-Adam": ("Adam", lambda s, o: s.OneCycleLR(o, max_lr=[0.5, 0.8], epochs=3, steps_per_epoch=11,
                                                          pct_start=0.4, div_factor=10, final_div_factor=100,
                                                          base_momentum=0.8, max_momentum=0.9)),
    "OneCycleLR-linear-3phase": ("Adam", lambda s, o: s.OneCycleLR(o, max_lr=0.4, total_steps=40, anneal_strategy="linear",
                                                                   three_phase=True)),
    "OneCycleLR-no-momentum": ("SGD", lambda s, o: s.OneCycleLR(o, max_lr=0.4, total_steps=35, cycle_momentum=False)),
    "SequentialLR-warmup-cosine": ("SGD", lambda s, o: s.SequentialLR(
        o, [s.LinearLR(o, start_factor=0.01, total_iters=5), s.CosineAnnealingLR(o, T_max=25, eta_min=1e-3)],
        milestones=[5])),
    "SequentialLR-three": ("Adam", lambda s, o: s.SequentialLR(
        o, [s.ConstantLR(o, factor=0.3, total_iters=4), s.StepLR(o, 3, gamma=0.5),
            s.CosineAnnealingWarmRestarts(o, T_0=4)], milestones=[6, 15])),
    "ChainedScheduler": ("SGD", lambda s, o: s.ChainedScheduler([
        s.LinearLR(o, start_factor=0.2, total_iters=6), s.MultiStepLR(o, [8, 16], gamma=0.5),
        s.ExponentialLR(o, 0.97)])),
    "ChainedScheduler-with-optimizer": ("Adam", lambda s, o: s.ChainedScheduler(
        [s.ConstantLR(o, factor=0.5, total_iters=3), s.CosineAnnealingLR(o, 10)], optimizer=o)),
}


def _snapshot(opt):
    return ([g["lr"] for g in opt.param_groups],
            [g["momentum"] if "momentum" in g else g["betas"][0] for g in opt.param_groups])


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_30_epochs_match_torch_and_resume_from_state_dicts(name):
    opt_name, make = SCHEDULERS[name]
    opt, topt = _groups(lr_scheduler, opt_name), _groups(torch.optim.lr_scheduler, opt_name)
    s, ts = make(lr_scheduler, opt), make(torch.optim.lr_scheduler, topt)
    for epoch in range(31):
        if epoch == 12:         # resume: fresh optimizer and scheduler from the state dicts
            osd, ssd = copy.deepcopy(opt.state_dict()), copy.deepcopy(s.state_dict())
            opt = _groups(lr_scheduler, opt_name)
            s = make(lr_scheduler, opt)
            opt.load_state_dict(osd)
            s.load_state_dict(ssd)
        _close(s.get_last_lr(), ts.get_last_lr(), rtol=1e-12, atol=1e-15, what=f"epoch {epoch}: get_last_lr")
        lrs, moms = _snapshot(opt)
        tlrs, tmoms = _snapshot(topt)
        _close(lrs, tlrs, rtol=1e-12, atol=1e-15, what=f"epoch {epoch}: lr")
        _close(moms, tmoms, rtol=1e-12, atol=1e-15, what=f"epoch {epoch}: momentum / beta1")
        opt.step()
        topt.step()
        s.step()
        ts.step()


@pytest.mark.parametrize("name", ["StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LinearLR",
                                  "PolynomialLR", "CosineAnnealingWarmRestarts"])
def test_scheduler_made_with_last_epoch_resumes_as_torchs(name):
    """A scheduler made with last_epoch=k (the optimizer's groups carrying initial_lr, as after a resume)
    continues the schedule from epoch k, as PyTorch's."""
    make = {"StepLR": lambda s, o: s.StepLR(o, 3, gamma=0.5, last_epoch=4),
            "MultiStepLR": lambda s, o: s.MultiStepLR(o, [2, 6, 9], gamma=0.5, last_epoch=4),
            "ExponentialLR": lambda s, o: s.ExponentialLR(o, 0.9, last_epoch=4),
            "CosineAnnealingLR": lambda s, o: s.CosineAnnealingLR(o, 10, eta_min=0.01, last_epoch=4),
            "LinearLR": lambda s, o: s.LinearLR(o, start_factor=0.2, total_iters=8, last_epoch=3),
            "PolynomialLR": lambda s, o: s.PolynomialLR(o, total_iters=10, power=2.0, last_epoch=3),
            "CosineAnnealingWarmRestarts": lambda s, o: s.CosineAnnealingWarmRestarts(o, 4, T_mult=2, last_epoch=5),
            }[name]
    opt, topt = _groups(lr_scheduler, "SGD"), _groups(torch.optim.lr_scheduler, "SGD")
    for o in (opt, topt):
        for g in o.param_groups:
            g["initial_lr"] = g["lr"]
    s, ts = make(lr_scheduler, opt), make(torch.optim.lr_scheduler, topt)
    for epoch in range(15):
        _close(s.get_last_lr(), ts.get_last_lr(), rtol=1e-12, atol=1e-15, what=f"epoch {epoch}")
        _close(_snapshot(opt)[0], _snapshot(topt)[0], rtol=1e-12, atol=1e-15, what=f"epoch {epoch}")
        opt.step()
        topt.step()
        s.step()
        ts.step()


METRICS = [1.0, 0.9, 0.95, 0.95, 0.96, 0.8, 0.8, 0.8, 0.8, 0.85, 0.79, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9,
           0.9, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]


@pytest.mark.parametrize("kw", [{}, dict(patience=2, factor=0.5, cooldown=2, min_lr=[0.01, 0.05]),
                                dict(mode="max", patience=1, threshold=0.05, threshold_mode="abs"),
                                dict(mode="max", patience=2, factor=0.3, threshold=0.1),
                                dict(patience=0, factor=0.9, eps=0.02, threshold=0.0)],
                         ids=["defaults", "cooldown-min_lr", "max-abs", "max-rel", "eps"])
def test_reduce_lr_on_plateau_30_epochs_matches_torch_and_resumes(kw):
    opt, topt = _groups(lr_scheduler, "SGD"), _groups(torch.optim.lr_scheduler, "SGD")
    s = lr_scheduler.ReduceLROnPlateau(opt, **kw)
    ts = torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
    for epoch, metric in enumerate(METRICS):
        if epoch == 13:
            osd, ssd = copy.deepcopy(opt.state_dict()), copy.deepcopy(s.state_dict())
            opt = _groups(lr_scheduler, "SGD")
            s = lr_scheduler.ReduceLROnPlateau(opt, **kw)
            opt.load_state_dict(osd)
            s.load_state_dict(ssd)
        s.step(metric)
        ts.step(metric)
        _close(s.get_last_lr(), ts.get_last_lr(), rtol=1e-12, what=f"epoch {epoch}")
        _close(_snapshot(opt)[0], _snapshot(topt)[0], rtol=1e-12, what=f"epoch {epoch}")
        assert (s.num_bad_epochs, s.cooldown_counter, s.best) == (ts.num_bad_epochs, ts.cooldown_counter, ts.best)
