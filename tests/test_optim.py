"""Optimizers and schedulers: update rules checked against PyTorch's published equations written out
in NumPy for a few steps, state_dict round trips, parameter groups, schedules, and short trainings."""
import math

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
from autograd_gpu.optim import lr_scheduler

try:
    import torch
except ImportError:  # the torch comparisons are extras; the NumPy references are the real checks
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

RNG = np.random.default_rng(0)
P0 = RNG.normal(size=(3, 4))
GRADS = [RNG.normal(size=(3, 4)) for _ in range(3)]


# -- the published update rules, one NumPy function per optimizer (float64) ---------------------
def ref_sgd(p, grads, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    p, buf = p.copy(), None
    for g in grads:
        d = (-g if maximize else g) + weight_decay * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p = p - lr * d
    return p


def ref_adam(p, grads, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False):
    p = p.copy()
    m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    b1, b2 = betas
    for t, g in enumerate(grads, 1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        vhat = (vmax if amsgrad else v) / (1 - b2 ** t)
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(vhat) + eps)
    return p


def ref_rmsprop(p, grads, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    p = p.copy()
    s, gbar, buf = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    for g in grads:
        g = g + weight_decay * p
        s = alpha * s + (1 - alpha) * g * g
        if centered:
            gbar = alpha * gbar + (1 - alpha) * g
            avg = np.sqrt(s - gbar * gbar) + eps
        else:
            avg = np.sqrt(s) + eps
        if momentum > 0:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
    return p


def ref_adagrad(p, grads, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10):
    p = p.copy()
    s = np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(grads, 1):
        g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (np.sqrt(s) + eps)
    return p


def run(opt_cls, device, grads=GRADS, **kwargs):
    """Apply ``grads`` one step each to a float64 parameter starting at P0; return its final value."""
    p = nn.Parameter(ag.tensor(P0, device=device))
    opt = opt_cls([p], **kwargs)
    for g in grads:
        p.grad = ag.tensor(g, device=device)
        opt.step()
    return p.numpy()


SGD_CASES = [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.1, momentum=0.9, dampening=0.5),
             dict(lr=0.1, momentum=0.9, nesterov=True), dict(lr=0.1, weight_decay=0.1),
             dict(lr=0.05, momentum=0.8, weight_decay=0.01, nesterov=True), dict(lr=0.1, maximize=True)]
ADAM_CASES = [dict(), dict(lr=0.01, betas=(0.8, 0.9)), dict(lr=0.01, weight_decay=0.1),
              dict(lr=0.01, amsgrad=True), dict(lr=0.01, eps=1e-3, weight_decay=0.05, amsgrad=True)]
RMSPROP_CASES = [dict(), dict(lr=0.01, alpha=0.9), dict(lr=0.01, momentum=0.9), dict(lr=0.01, centered=True),
                 dict(lr=0.01, centered=True, momentum=0.5, weight_decay=0.1)]
ADAGRAD_CASES = [dict(), dict(lr=0.1, lr_decay=0.5), dict(lr=0.1, weight_decay=0.1),
                 dict(lr=0.1, initial_accumulator_value=0.5, eps=1e-3)]


@pytest.mark.parametrize("kw", SGD_CASES, ids=str)
def test_sgd_matches_the_update_equations(kw, device):
    np.testing.assert_allclose(run(optim.SGD, device, **kw), ref_sgd(P0, GRADS, **kw), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", ADAM_CASES, ids=str)
def test_adam_matches_the_update_equations(kw, device):
    np.testing.assert_allclose(run(optim.Adam, device, **kw), ref_adam(P0, GRADS, **kw), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", [dict(), dict(lr=0.01, weight_decay=0.1), dict(lr=0.01, amsgrad=True)], ids=str)
def test_adamw_decouples_weight_decay(kw, device):
    expected = ref_adam(P0, GRADS, decoupled=True, **{"weight_decay": 1e-2, **kw})
    np.testing.assert_allclose(run(optim.AdamW, device, **kw), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kw", RMSPROP_CASES, ids=str)
def test_rmsprop_matches_the_update_equations(kw, device):
    np.testing.assert_allclose(run(optim.RMSprop, device, **kw), ref_rmsprop(P0, GRADS, **kw), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("kw", ADAGRAD_CASES, ids=str)
def test_adagrad_matches_the_update_equations(kw, device):
    np.testing.assert_allclose(run(optim.Adagrad, device, **kw), ref_adagrad(P0, GRADS, **kw), rtol=1e-12,
                               atol=1e-12)


def test_sgd_first_step_by_hand():
    # momentum buffer starts as the gradient itself: p = 1 - 0.5 * 2 = 0, then b = 0.9 * 2 + 2 = 3.8
    p = nn.Parameter(ag.tensor([1.0]))
    opt = optim.SGD([p], lr=0.5, momentum=0.9)
    p.grad = ag.tensor([2.0])
    opt.step()
    assert p.tolist() == [0.0]
    opt.step()
    assert p.tolist() == pytest.approx([-1.9])


def test_adam_first_step_moves_each_element_by_lr():
    # bias correction makes the first step lr * g / (|g| + eps'): magnitude lr whatever the scale of g
    p = nn.Parameter(ag.tensor([0.0, 0.0, 0.0], dtype=ag.float64))
    opt = optim.Adam([p], lr=0.1)
    p.grad = ag.tensor([1e-3, -5.0, 300.0], dtype=ag.float64)
    opt.step()
    np.testing.assert_allclose(p.numpy(), [-0.1, 0.1, -0.1], rtol=1e-4)


def test_float32_parameters_stay_float32(device):
    for cls in (optim.SGD, optim.Adam, optim.AdamW, optim.RMSprop, optim.Adagrad):
        p = nn.Parameter(ag.tensor(P0.astype(np.float32), device=device))
        opt = cls([p], lr=0.01, momentum=0.9) if cls is optim.SGD else cls([p], lr=0.01)
        p.grad = ag.tensor(GRADS[0].astype(np.float32), device=device)
        opt.step()
        assert p.dtype == ag.float32
        assert all(v.dtype == ag.float32 for v in opt.state[p].values() if isinstance(v, ag.Tensor))


def test_step_skips_parameters_without_grad_and_bumps_versions_once():
    a, b = nn.Parameter(ag.ones(2)), nn.Parameter(ag.ones(2))
    opt = optim.Adam([a, b], lr=0.1)
    a.grad = ag.ones(2)
    va, vb = a.version_counter()[0], b.version_counter()[0]
    opt.step()
    assert a.version_counter()[0] == va + 1 and b.version_counter()[0] == vb
    assert b.tolist() == [1.0, 1.0] and b not in opt.state


def test_step_invalidates_graphs_that_saved_the_parameter():
    p = nn.Parameter(ag.tensor([1.0, 2.0]))
    y = (p * p).sum()
    p.grad = ag.ones(2)
    optim.SGD([p], lr=0.1).step()
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        y.backward()


def test_closure_is_called_with_grad_enabled_and_its_loss_returned():
    p = nn.Parameter(ag.tensor([3.0]))
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with ag.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 9.0 and p.tolist() == [1.5]


def test_zero_grad_sets_none_or_zeros():
    p = nn.Parameter(ag.ones(3))
    opt = optim.SGD([p], lr=0.1)
    p.grad = ag.ones(3)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and p.grad.tolist() == [0.0, 0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


# -- parameter groups --------------------------------------------------------------------------------
def test_param_groups_use_their_own_options():
    a, b = nn.Parameter(ag.zeros(2)), nn.Parameter(ag.zeros(2))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.01}], lr=0.1, momentum=0.5)
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["lr"] == 0.01
    a.grad, b.grad = ag.ones(2), ag.ones(2)
    opt.step()
    assert a.tolist() == pytest.approx([-0.1, -0.1]) and b.tolist() == pytest.approx([-0.01, -0.01])


def test_add_param_group_fills_defaults_and_refuses_duplicates():
    a, b = nn.Parameter(ag.zeros(2)), nn.Parameter(ag.zeros(2))
    opt = optim.Adam([a], lr=0.1)
    opt.add_param_group({"params": b, "lr": 0.5})
    assert opt.param_groups[1]["betas"] == (0.9, 0.999) and opt.param_groups[1]["params"] == [b]
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


@pytest.mark.parametrize("make, exc, match", [
    (lambda p: optim.SGD([], lr=0.1), ValueError, "empty parameter list"),
    (lambda p: optim.SGD(p, lr=0.1), TypeError, "iterable of Tensors"),
    (lambda p: optim.SGD([p * 2], lr=0.1), ValueError, "non-leaf"),
    (lambda p: optim.SGD([p], lr=-1.0), ValueError, "learning rate"),
    (lambda p: optim.SGD([p], lr=0.1, nesterov=True), ValueError, "Nesterov"),
    (lambda p: optim.Adam([p], betas=(1.0, 0.9)), ValueError, "beta parameter at index 0"),
    (lambda p: optim.SGD({p}, lr=0.1), TypeError, "ordered"),
    (lambda p: optim.SGD([p, 3.0], lr=0.1), TypeError, "float"),
])
def test_bad_arguments_raise_clear_errors(make, exc, match):
    with pytest.raises(exc, match=match):
        make(nn.Parameter(ag.ones(2)))


# -- state dicts ---------------------------------------------------------------------------------------
OPTIMIZERS = [(optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)), (optim.Adam, dict(lr=0.1, amsgrad=True)),
              (optim.AdamW, dict(lr=0.1)), (optim.RMSprop, dict(lr=0.01, momentum=0.9, centered=True)),
              (optim.Adagrad, dict(lr=0.1, lr_decay=0.1))]


@pytest.mark.parametrize("cls, kw", OPTIMIZERS, ids=[c.__name__ for c, _ in OPTIMIZERS])
def test_state_dict_round_trip_reproduces_the_next_step(cls, kw, device):
    p = nn.Parameter(ag.tensor(P0, device=device))
    opt = cls([p], **kw)
    for g in GRADS[:2]:
        p.grad = ag.tensor(g, device=device)
        opt.step()
    sd = opt.state_dict()
    q = nn.Parameter(ag.tensor(p.numpy(), device=device))
    opt2 = cls([q], lr=123.0)                      # options come back from the state dict
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == kw["lr"]
    for param, o in ((p, opt), (q, opt2)):
        param.grad = ag.tensor(GRADS[2], device=device)
        o.step()
    np.testing.assert_array_equal(p.numpy(), q.numpy())


def test_state_dict_is_keyed_by_parameter_index_and_is_a_snapshot():
    a, b, c = (nn.Parameter(ag.zeros(2)) for _ in range(3))
    opt = optim.SGD([{"params": [a, b]}, {"params": [c], "lr": 0.5}], lr=0.1, momentum=0.9)
    b.grad = c.grad = ag.ones(2)
    opt.step()
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sorted(sd["state"]) == [1, 2] and sd["param_groups"][1]["lr"] == 0.5
    before = sd["state"][1]["momentum_buffer"].tolist()
    opt.step()
    assert sd["state"][1]["momentum_buffer"].tolist() == before


def test_load_state_dict_checks_the_groups():
    a, b = nn.Parameter(ag.zeros(2)), nn.Parameter(ag.zeros(2))
    sd = optim.SGD([a, b], lr=0.1).state_dict()
    with pytest.raises(ValueError, match="parameter group"):
        optim.SGD([a], lr=0.1).load_state_dict(sd)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.SGD([{"params": [a]}, {"params": [b]}], lr=0.1).load_state_dict(sd)


def test_load_state_dict_casts_state_to_the_parameter_dtype():
    p = nn.Parameter(ag.tensor(P0))
    opt = optim.Adam([p])
    p.grad = ag.tensor(GRADS[0])
    opt.step()
    q = nn.Parameter(ag.tensor(P0.astype(np.float32)))
    opt2 = optim.Adam([q])
    opt2.load_state_dict(opt.state_dict())
    assert opt2.state[q]["exp_avg"].dtype == ag.float32 and opt2.state[q]["step"] == 1


# -- schedulers ----------------------------------------------------------------------------------------
def lrs(sched, n):
    out = []
    for _ in range(n):
        out.append(sched.get_last_lr()[0])
        sched.optimizer.step()
        sched.step()
    return out


def make_opt(lr=1.0):
    return optim.SGD([nn.Parameter(ag.zeros(1))], lr=lr)


def test_steplr_sequence():
    got = lrs(lr_scheduler.StepLR(make_opt(1.0), step_size=3, gamma=0.5), 8)
    assert got == pytest.approx([1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25])


def test_cosine_annealing_follows_the_closed_form():
    got = lrs(lr_scheduler.CosineAnnealingLR(make_opt(0.1), T_max=5, eta_min=0.01), 11)
    expected = [0.01 + 0.09 * (1 + math.cos(math.pi * t / 5)) / 2 for t in range(11)]
    assert got == pytest.approx(expected, abs=1e-12)


def test_multisteplr_and_exponentiallr_sequences():
    got = lrs(lr_scheduler.MultiStepLR(make_opt(1.0), milestones=[2, 5], gamma=0.1), 7)
    assert got == pytest.approx([1, 1, 0.1, 0.1, 0.1, 0.01, 0.01])
    assert lrs(lr_scheduler.ExponentialLR(make_opt(2.0), gamma=0.5), 4) == pytest.approx([2, 1, 0.5, 0.25])


def test_lambdalr_with_one_function_per_group():
    a, b = nn.Parameter(ag.zeros(1)), nn.Parameter(ag.zeros(1))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 2.0}], lr=1.0)
    sched = lr_scheduler.LambdaLR(opt, [lambda e: 0.5 ** e, lambda e: e + 1])
    for _ in range(3):
        opt.step()
        sched.step()
    assert sched.get_last_lr() == [0.125, 8.0] and sched.last_epoch == 3
    assert opt.param_groups[1]["lr"] == 8.0


def test_scheduler_state_dict_round_trip():
    sched = lr_scheduler.StepLR(make_opt(1.0), step_size=2, gamma=0.1)
    lrs(sched, 3)
    opt2 = make_opt(1.0)
    sched2 = lr_scheduler.StepLR(opt2, step_size=7)
    sched2.load_state_dict(sched.state_dict())
    opt2.param_groups[0]["lr"] = sched.get_last_lr()[0]
    assert lrs(sched2, 4) == pytest.approx(lrs(sched, 4))


def test_scheduler_step_with_epoch_uses_the_closed_form():
    sched = lr_scheduler.StepLR(make_opt(1.0), step_size=2, gamma=0.1)
    sched.step(5)
    assert sched.get_last_lr() == pytest.approx([0.01])


# -- against PyTorch (extra; skipped without torch) ----------------------------------------------------
TORCH_CASES = ([("SGD", kw) for kw in SGD_CASES] + [("Adam", kw) for kw in ADAM_CASES]
               + [("AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True))]
               + [("RMSprop", kw) for kw in RMSPROP_CASES] + [("Adagrad", kw) for kw in ADAGRAD_CASES])


@needs_torch
@pytest.mark.parametrize("name, kw", TORCH_CASES, ids=[f"{n}-{k}" for n, k in TORCH_CASES])
def test_matches_torch_for_five_steps(name, kw):
    grads = [np.random.default_rng(i).normal(size=P0.shape) for i in range(5)]
    tp = torch.nn.Parameter(torch.tensor(P0))
    topt = getattr(torch.optim, name)([tp], **kw)
    for g in grads:
        tp.grad = torch.tensor(g)
        topt.step()
    np.testing.assert_allclose(run(getattr(optim, name), "cpu", grads, **kw), tp.detach().numpy(),
                               rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("name, kw", [("StepLR", dict(step_size=3, gamma=0.3)),
                                      ("CosineAnnealingLR", dict(T_max=4, eta_min=0.05)),
                                      ("MultiStepLR", dict(milestones=[2, 3, 7], gamma=0.5)),
                                      ("ExponentialLR", dict(gamma=0.9)),
                                      ("LambdaLR", dict(lr_lambda=lambda e: 1 / (e + 1)))], ids=str)
def test_schedulers_match_torch(name, kw):
    topt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    tsched = getattr(torch.optim.lr_scheduler, name)(topt, **kw)
    expected = []
    for _ in range(12):
        expected.append(tsched.get_last_lr()[0])
        topt.step()
        tsched.step()
    assert lrs(getattr(lr_scheduler, name)(make_opt(0.5), **kw), 12) == pytest.approx(expected, rel=1e-12)


# -- training sanity ------------------------------------------------------------------------------------
def xor_blobs(n=64, seed=0):
    """Four tight Gaussian blobs at (+-1, +-1) labelled by the sign of x0 * x1: separable, but not by a line."""
    rng = np.random.default_rng(seed)
    centers = np.array([[1, 1], [-1, -1], [1, -1], [-1, 1]], dtype=np.float64)
    k = np.arange(n) % 4
    x = centers[k] + rng.normal(scale=0.25, size=(n, 2))
    return x.astype(np.float32), (k >= 2).astype(np.int64)


@pytest.mark.parametrize("make_opt_fn", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                         lambda ps: optim.Adam(ps, lr=0.01)], ids=["SGD", "Adam"])
def test_mlp_reaches_full_accuracy_on_separable_data(make_opt_fn, device):
    ag.manual_seed(0)
    x_np, y_np = xor_blobs()
    x, y = ag.tensor(x_np, device=device), ag.tensor(y_np, device=device)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
    opt = make_opt_fn(model.parameters())
    loss_fn = nn.CrossEntropyLoss()
    for step in range(200):
        opt.zero_grad()
        logits = model(x)
        loss = loss_fn(logits, y)
        loss.backward()
        opt.step()
        if (logits.numpy().argmax(1) == y_np).all():
            break
    with ag.no_grad():
        acc = (model(x).numpy().argmax(1) == y_np).mean()
    assert acc == 1.0, f"accuracy {acc} after {step + 1} steps"


def test_exponential_lr_resumed_starts_at_the_saved_lr():
    p = ag.nn.Parameter(ag.ones(1))
    opt = ag.optim.SGD([{"params": [p], "lr": 0.1, "initial_lr": 0.1}])
    sched = ag.optim.lr_scheduler.ExponentialLR(opt, 0.5, last_epoch=3)
    assert sched.get_last_lr() == [0.1]


def test_optimizer_state_dict_without_newer_options_loads_with_defaults():
    p = ag.nn.Parameter(ag.ones(2))
    opt = ag.optim.Adam([p], lr=0.1)
    sd = opt.state_dict()
    for group in sd["param_groups"]:
        group.pop("amsgrad")
    fresh = ag.optim.Adam([p], lr=0.1)
    fresh.load_state_dict(sd)
    p.grad = ag.ones(2)
    fresh.step()
    assert fresh.param_groups[0]["amsgrad"] is False


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad"])
def test_every_optimizer_steps_a_0d_parameter(name, device):
    p = ag.tensor(1.5, device=device, requires_grad=True)
    extra = {"momentum": 0.9} if name in ("SGD", "RMSprop") else {}
    opt = getattr(ag.optim, name)([p], lr=0.01, **extra)
    for _ in range(3):
        opt.zero_grad()
        (p * p).backward()
        opt.step()
    assert p.shape == () and 0 < p.item() < 1.5
