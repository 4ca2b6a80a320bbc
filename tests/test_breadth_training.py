"""Issue 26's training breadth against PyTorch: the optimizers Adadelta, Adamax, NAdam, RAdam, ASGD, Rprop
and LBFGS (20 steps on one model and data), the learning-rate schedulers (30 epochs), Module hooks
(order and values, eager and under ag.compile), Module helpers, no_grad as a bare decorator and
inference_mode. Each comparison runs where torch is installed; the rest runs everywhere."""
import copy

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
from autograd_gpu.optim import lr_scheduler

try:
    import torch
except ImportError:
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

RNG = np.random.default_rng(26)
X = RNG.normal(size=(16, 5))
Y = RNG.normal(size=(16, 3))
W1, B1 = RNG.normal(size=(8, 5)) * 0.4, RNG.normal(size=8) * 0.1
W2, B2 = RNG.normal(size=(3, 8)) * 0.4, RNG.normal(size=3) * 0.1


def _ag_model(dtype=ag.float64):
    m = nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3))
    m.to(dtype).load_state_dict({"0.weight": W1, "0.bias": B1, "2.weight": W2, "2.bias": B2})
    return m


def _torch_model():
    m = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    with torch.no_grad():
        for p, v in zip(m.parameters(), (W1, B1, W2, B2)):
            p.copy_(torch.from_numpy(v))
    return m


def _ag_loss(m, x, y):
    return ((m(x) - y) ** 2).mean()


def _torch_loss(m, x, y):
    return ((m(x) - y) ** 2).mean()


OPTIMIZERS = [
    ("Adadelta", {}),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("Adamax", {}),
    ("Adamax", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.05, maximize=True)),
    ("NAdam", {}),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("RAdam", {}),
    ("RAdam", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1)),        # rho_t passes 5 after a few steps
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True, maximize=True)),
    ("ASGD", {}),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=5, weight_decay=0.1, maximize=True)),
    ("Rprop", {}),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.2), maximize=True)),
]


def _run_ag(name, kw, steps=20, dtype=ag.float64):
    m = _ag_model(dtype)
    opt = getattr(optim, name)(m.parameters(), **kw)
    x, y = ag.tensor(X, dtype=dtype), ag.tensor(Y, dtype=dtype)
    for _ in range(steps):
        opt.zero_grad()
        _ag_loss(m, x, y).backward()
        opt.step()
    return m, opt


def _run_torch(name, kw, steps=20):
    m = _torch_model()
    opt = getattr(torch.optim, name)(m.parameters(), **kw)
    x, y = torch.from_numpy(X), torch.from_numpy(Y)
    for _ in range(steps):
        opt.zero_grad()
        _torch_loss(m, x, y).backward()
        opt.step()
    return m, opt


def _assert_same_params(m, tm, rtol=1e-9, atol=1e-11):
    for (n, p), tp in zip(m.named_parameters(), tm.parameters()):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=rtol, atol=atol, err_msg=n)


@needs_torch
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZERS)])
def test_optimizer_20_steps_match_torch(name, kw):
    m, _ = _run_ag(name, kw)
    tm, _ = _run_torch(name, kw)
    if name in ("NAdam", "ASGD"):
        # PyTorch keeps NAdam's momentum product and ASGD's eta and mu as float32 scalars (the default dtype),
        # whatever the parameters' dtype; here they are Python floats: agreement to float32's precision
        _assert_same_params(m, tm, rtol=1e-7, atol=1e-8)
    else:
        _assert_same_params(m, tm)


@needs_torch
@pytest.mark.parametrize("kw", [{}, dict(lr=0.5, history_size=3, max_iter=7), dict(line_search_fn="strong_wolfe"),
                                dict(lr=0.8, history_size=4, line_search_fn="strong_wolfe", max_iter=5)])
def test_lbfgs_matches_torch(kw):
    m = _ag_model()
    opt = optim.LBFGS(m.parameters(), **kw)
    x, y = ag.tensor(X), ag.tensor(Y)
    tm = _torch_model()
    topt = torch.optim.LBFGS(tm.parameters(), **kw)
    tx, ty = torch.from_numpy(X), torch.from_numpy(Y)

    def closure():
        opt.zero_grad()
        loss = _ag_loss(m, x, y)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = _torch_loss(tm, tx, ty)
        loss.backward()
        return loss

    for _ in range(3):
        a, b = opt.step(closure), topt.step(tclosure)
        np.testing.assert_allclose(float(a), float(b), rtol=1e-8)
        _assert_same_params(m, tm, rtol=1e-7, atol=1e-9)
    tstate = topt.state[next(iter(tm.parameters()))]
    state = opt.state[next(iter(m.parameters()))]
    assert state["func_evals"] == tstate["func_evals"] and state["n_iter"] == tstate["n_iter"]


def test_lbfgs_needs_a_closure_and_one_group():
    m = _ag_model()
    with pytest.raises(RuntimeError, match="closure"):
        optim.LBFGS(m.parameters()).step()
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [m[0].weight]}, {"params": [m[0].bias]}])
    with pytest.raises(ValueError, match="line_search_fn"):
        optim.LBFGS(m.parameters(), line_search_fn="armijo")


@pytest.mark.parametrize("name,kw", OPTIMIZERS[::2] + [("LBFGS", dict(history_size=5, max_iter=4))],
                         ids=[n for n, _ in OPTIMIZERS[::2]] + ["LBFGS"])
def test_optimizer_state_dict_round_trip(name, kw):
    """10 steps, save, 10 more; a fresh optimizer loaded from the save and given the same 10 steps ends
    at the same parameters (state copied, not shared)."""
    m = _ag_model()
    opt = getattr(optim, name)(m.parameters(), **kw)
    x, y = ag.tensor(X), ag.tensor(Y)

    def closure():
        opt.zero_grad()
        loss = _ag_loss(m, x, y)
        loss.backward()
        return loss

    def run(o, n):
        for _ in range(n):
            o.step(closure) if name == "LBFGS" else (closure(), o.step())

    run(opt, 10)
    saved_params = copy.deepcopy(m.state_dict())
    sd = opt.state_dict()
    run(opt, 10)
    after = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    m.load_state_dict(saved_params)
    opt2 = getattr(optim, name)(m.parameters(), **kw)
    opt2.load_state_dict(sd)
    opt = opt2
    run(opt2, 10)
    for k, v in m.state_dict().items():
        np.testing.assert_allclose(v.numpy(), after[k], rtol=1e-12, atol=1e-14, err_msg=k)


@pytest.mark.parametrize("name", ["Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "Rprop"])
def test_optimizer_float32_and_complex(name):
    """float32 follows the float64 run; a complex parameter is updated as pairs of real numbers."""
    m64, _ = _run_ag(name, {}, steps=5)
    m32, _ = _run_ag(name, {}, steps=5, dtype=ag.float32)
    for p64, p32 in zip(m64.parameters(), m32.parameters()):
        np.testing.assert_allclose(p32.numpy(), p64.numpy(), rtol=1e-3, atol=1e-4)
    z = ag.tensor(np.array([1 + 2j, -0.5 + 0.25j]), requires_grad=True)
    r = ag.tensor(np.array([[1.0, 2.0], [-0.5, 0.25]]), requires_grad=True)
    oz, orr = getattr(optim, name)([z]), getattr(optim, name)([r])
    for _ in range(3):
        for t, o in ((z, oz), (r, orr)):
            o.zero_grad()
            (ag.real(t * t.conj()).sum() if t is z else (t * t).sum()).backward()
            o.step()
    np.testing.assert_allclose(np.stack([z.numpy().real, z.numpy().imag], 1), r.numpy(), rtol=1e-12)


def test_optimizer_defaults_and_checks():
    p = [nn.Parameter(ag.zeros(2))]
    assert optim.Adadelta(p).defaults["lr"] == 1.0 and optim.Adamax(p).defaults["lr"] == 2e-3
    assert optim.NAdam(p).defaults["momentum_decay"] == 4e-3 and optim.RAdam(p).defaults["lr"] == 1e-3
    assert optim.ASGD(p).defaults["t0"] == 1e6 and optim.Rprop(p).defaults["etas"] == (0.5, 1.2)
    assert optim.LBFGS(p).defaults["max_eval"] == 25
    with pytest.raises(ValueError, match="rho"):
        optim.Adadelta(p, rho=1.5)
    with pytest.raises(ValueError, match="beta"):
        optim.NAdam(p, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="eta"):
        optim.Rprop(p, etas=(1.5, 1.2))
    with pytest.raises(ValueError, match="learning rate"):
        optim.RAdam(p, lr=-1)


# -- learning-rate schedulers: 30 epochs against PyTorch ----------------------------------------------
def _sched_cases(mod, opt):
    """name -> a scheduler of ``mod`` (ag's lr_scheduler or torch's) on ``opt``."""
    return {
        "StepLR": lambda: mod.StepLR(opt, 7, gamma=0.5),
        "MultiStepLR": lambda: mod.MultiStepLR(opt, [3, 8, 8, 20], gamma=0.3),
        "ExponentialLR": lambda: mod.ExponentialLR(opt, 0.9),
        "CosineAnnealingLR": lambda: mod.CosineAnnealingLR(opt, 10, eta_min=0.001),
        "LambdaLR": lambda: mod.LambdaLR(opt, [lambda e: 0.95 ** e, lambda e: 1 / (1 + e)]),
        "MultiplicativeLR": lambda: mod.MultiplicativeLR(opt, lambda e: 0.9 if e % 2 else 1.05),
        "ConstantLR": lambda: mod.ConstantLR(opt, factor=0.25, total_iters=6),
        "LinearLR": lambda: mod.LinearLR(opt, start_factor=0.1, end_factor=0.9, total_iters=12),
        "PolynomialLR": lambda: mod.PolynomialLR(opt, total_iters=20, power=2.0),
        "CosineAnnealingWarmRestarts": lambda: mod.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2, eta_min=0.01),
        "CyclicLR": lambda: mod.CyclicLR(opt, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4, step_size_down=3,
                                         mode="triangular2"),
        "CyclicLR-exp": lambda: mod.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=5, mode="exp_range",
                                             gamma=0.97),
        "OneCycleLR": lambda: mod.OneCycleLR(opt, max_lr=[0.5, 1.0], total_steps=31),
        "OneCycleLR-3": lambda: mod.OneCycleLR(opt, max_lr=0.5, epochs=4, steps_per_epoch=8, pct_start=0.25,
                                               anneal_strategy="linear", three_phase=True),
        "SequentialLR": lambda: mod.SequentialLR(opt, [mod.LinearLR(opt, 0.1, total_iters=5),
                                                       mod.CosineAnnealingLR(opt, 12), mod.ExponentialLR(opt, 0.8)],
                                                 milestones=[5, 17]),
        "ChainedScheduler": lambda: mod.ChainedScheduler([mod.ConstantLR(opt, factor=0.5, total_iters=4),
                                                          mod.ExponentialLR(opt, 0.9)]),
    }


SCHEDULERS = list(_sched_cases(lr_scheduler, None))


def _sched_pair(name):
    pa, pb = nn.Parameter(ag.zeros(2)), nn.Parameter(ag.zeros(3))
    opt = optim.SGD([{"params": [pa]}, {"params": [pb], "lr": 0.2}], lr=0.1, momentum=0.9)
    ta, tb = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
    topt = torch.optim.SGD([{"params": [ta]}, {"params": [tb], "lr": 0.2}], lr=0.1, momentum=0.9)
    return opt, _sched_cases(lr_scheduler, opt)[name](), topt, _sched_cases(torch.optim.lr_scheduler, topt)[name]()


@needs_torch
@pytest.mark.parametrize("name", SCHEDULERS)
def test_scheduler_30_epochs_match_torch(name):
    opt, s, topt, ts = _sched_pair(name)
    for epoch in range(31):
        np.testing.assert_allclose(s.get_last_lr(), ts.get_last_lr(), rtol=1e-12, atol=1e-15, err_msg=str(epoch))
        assert [g["lr"] for g in opt.param_groups] == pytest.approx([g["lr"] for g in topt.param_groups], rel=1e-12)
        assert [g["momentum"] for g in opt.param_groups] == pytest.approx([g["momentum"] for g in topt.param_groups],
                                                                          rel=1e-12)
        if epoch < 30:
            opt.step()
            topt.step()
            s.step()
            ts.step()


@needs_torch
def test_reduce_lr_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.96, 0.8, 0.8, 0.8, 0.8, 0.85, 0.79, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9,
               0.9, 0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    for kw in (dict(patience=2, factor=0.5, cooldown=1, min_lr=[0.01, 0.05]),
               dict(mode="max", patience=1, threshold=0.1, threshold_mode="abs"),
               dict(patience=0, factor=0.9, eps=0.05)):
        pa, pb = nn.Parameter(ag.zeros(2)), nn.Parameter(ag.zeros(3))
        opt = optim.Adam([{"params": [pa]}, {"params": [pb], "lr": 0.2}], lr=0.1)
        ta, tb = torch.zeros(2, requires_grad=True), torch.zeros(3, requires_grad=True)
        topt = torch.optim.Adam([{"params": [ta]}, {"params": [tb], "lr": 0.2}], lr=0.1)
        s, ts = lr_scheduler.ReduceLROnPlateau(opt, **kw), torch.optim.lr_scheduler.ReduceLROnPlateau(topt, **kw)
        for epoch, m in enumerate(metrics):
            s.step(ag.tensor(m, dtype=ag.float64) if epoch % 2 else m)     # a one-element tensor too
            ts.step(m)
            assert s.get_last_lr() == pytest.approx(ts.get_last_lr(), rel=1e-12), (kw, epoch)
            assert (s.num_bad_epochs, s.cooldown_counter, s.best) == (ts.num_bad_epochs, ts.cooldown_counter, ts.best)


@pytest.mark.parametrize("name", SCHEDULERS + ["ReduceLROnPlateau"])
def test_scheduler_state_dict_round_trip(name):
    """10 epochs, save; a new optimizer and scheduler loaded from the saves follow the first for 20 more."""
    def make():
        pa, pb = nn.Parameter(ag.zeros(2)), nn.Parameter(ag.zeros(3))
        opt = optim.SGD([{"params": [pa]}, {"params": [pb], "lr": 0.2}], lr=0.1, momentum=0.9)
        if name == "ReduceLROnPlateau":
            return opt, lr_scheduler.ReduceLROnPlateau(opt, patience=1, factor=0.5)
        return opt, _sched_cases(lr_scheduler, opt)[name]()

    def step(s, e):
        s.step(1.0 / (1 + e // 3)) if name == "ReduceLROnPlateau" else s.step()

    opt, s = make()
    for e in range(10):
        step(s, e)
    osd, ssd = copy.deepcopy(opt.state_dict()), copy.deepcopy(s.state_dict())
    opt2, s2 = make()
    opt2.load_state_dict(osd)
    s2.load_state_dict(ssd)
    for e in range(10, 30):
        step(s, e)
        step(s2, e)
        assert s2.get_last_lr() == pytest.approx(s.get_last_lr(), rel=1e-12)
        assert [g["lr"] for g in opt2.param_groups] == pytest.approx([g["lr"] for g in opt.param_groups], rel=1e-12)


def test_scheduler_errors():
    opt = optim.SGD([nn.Parameter(ag.zeros(2))], lr=0.1)
    with pytest.raises(ValueError, match="total steps"):
        s = lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=2)
        for _ in range(3):
            s.step()
    with pytest.raises(ValueError, match="milestone"):
        lr_scheduler.SequentialLR(opt, [lr_scheduler.ExponentialLR(opt, 0.9)], milestones=[3])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        lr_scheduler.ChainedScheduler([lr_scheduler.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="momentum"):
        lr_scheduler.CyclicLR(optim.Rprop([nn.Parameter(ag.zeros(2))]), 0.01, 0.1)
    with pytest.raises(ValueError, match="factor"):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(ValueError, match="T_0"):
        lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=0)
