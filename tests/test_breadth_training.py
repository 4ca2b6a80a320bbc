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
        np.testing.assert_allclose(float(a), float(b.detach()), rtol=1e-8)
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


# -- Module hooks: order and values against PyTorch ---------------------------------------------------
def _np(v):
    if v is None:
        return None
    return v.detach().numpy().copy() if hasattr(v, "detach") else v


def _hooked_run(lib, with_values=True):
    """A Linear with every kind of hook (global and its own, one prepended, one with kwargs), each logging
    and changing a value; returns (log, x.grad, weight.grad, output)."""
    if lib == "ag":
        mod, make, reg = nn, (lambda a: ag.tensor(a, requires_grad=True)), nn.module
    else:
        mod, make, reg = torch.nn, (lambda a: torch.tensor(a, requires_grad=True)), torch.nn.modules.module
    lin = mod.Linear(3, 2).double()
    with (ag.no_grad() if lib == "ag" else torch.no_grad()):
        lin.weight.copy_(make(W2[:2, :3]).detach()) if lib == "torch" else lin.weight.data.__setitem__(
            slice(None), W2[:2, :3])
        lin.bias.copy_(make(B2[:2]).detach()) if lib == "torch" else lin.bias.data.__setitem__(slice(None), B2[:2])
    log = []
    handles = [
        reg.register_module_forward_pre_hook(lambda m, a: log.append(("gpre", _np(a[0])))),
        reg.register_module_forward_hook(lambda m, a, o: log.append(("gfwd", _np(o)))),
        reg.register_module_full_backward_pre_hook(lambda m, go: log.append(("gbpre", _np(go[0])))),
        reg.register_module_full_backward_hook(lambda m, gi, go: log.append(("gbwd", _np(gi[0]), _np(go[0])))),
        lin.register_forward_pre_hook(lambda m, a: (a[0] * 2,)),
        lin.register_forward_pre_hook(lambda m, a: log.append(("pre0", _np(a[0]))), prepend=True),
        lin.register_forward_pre_hook(lambda m, a, kw: log.append(("prekw", _np(a[0]), sorted(kw))),
                                      with_kwargs=True),
        lin.register_forward_hook(lambda m, a, o: o + 1),
        lin.register_forward_hook(lambda m, a, kw, o: log.append(("fwdkw", _np(a[0]), _np(o))), with_kwargs=True),
        lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,)),
        lin.register_full_backward_pre_hook(lambda m, go: log.append(("bpre", _np(go[0])))),
        lin.register_full_backward_hook(lambda m, gi, go: log.append(("bwd", _np(gi[0]), _np(go[0])))),
        lin.register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.5,)),
        lin.register_full_backward_hook(lambda m, gi, go: log.append(("bwd2", _np(gi[0])))),
    ]
    try:
        x = make(X[:4, :3])
        out = lin(x)
        (out * out).sum().backward()
    finally:
        for h in handles:
            h.remove()
    return log, _np(x.grad), _np(lin.weight.grad), _np(out)


def _assert_same_log(a, b):
    assert [e[0] for e in a] == [e[0] for e in b]
    for ea, eb in zip(a, b):
        for va, vb in zip(ea[1:], eb[1:]):
            if isinstance(va, np.ndarray):
                np.testing.assert_allclose(va, vb, rtol=1e-12, err_msg=ea[0])
            else:
                assert va == vb, ea[0]


@needs_torch
def test_module_hooks_order_and_values_match_torch():
    log, xg, wg, out = _hooked_run("ag")
    tlog, txg, twg, tout = _hooked_run("torch")
    _assert_same_log(log, tlog)
    np.testing.assert_allclose(out, tout, rtol=1e-12)
    np.testing.assert_allclose(xg, txg, rtol=1e-12)
    np.testing.assert_allclose(wg, twg, rtol=1e-12)
    # removed: the module is plain again
    lin = nn.Linear(3, 2)
    assert "_hooks" not in lin.__dict__


class _TwoInTwoOut:
    """forward(a, b, flag) -> (a * b, a + b): a non-tensor argument and two outputs."""

    @staticmethod
    def make(lib):
        base = nn.Module if lib == "ag" else torch.nn.Module

        class M(base):
            def forward(self, a, b, flag=True, *, scale=1.0):
                return a * b * scale, a + b
        return M()


@needs_torch
@pytest.mark.parametrize("use", ["both", "first", "b_frozen"])
def test_backward_hooks_with_several_inputs_and_outputs_match_torch(use):
    results = []
    for lib in ("ag", "torch"):
        m = _TwoInTwoOut.make(lib)
        log = []
        m.register_full_backward_pre_hook(lambda mod, go: log.append(("pre", [None if g is None else _np(g)
                                                                            for g in go])))
        m.register_full_backward_hook(lambda mod, gi, go: log.append(
            ("full", [None if g is None else _np(g) for g in gi], [None if g is None else _np(g) for g in go])))
        m.register_forward_pre_hook(lambda mod, a, kw: (a, {**kw, "scale": 2.0}), with_kwargs=True)
        mk = (lambda v, rg: ag.tensor(v, requires_grad=rg)) if lib == "ag" else \
            (lambda v, rg: torch.tensor(v, requires_grad=rg))
        a, b = mk(X[:3, :2], True), mk(Y[:3, :2], use != "b_frozen")
        p, s = m(a, b, False)
        loss = (p * p).sum() + ((s * 3).sum() if use != "first" else 0)
        loss.backward()
        results.append((log, _np(a.grad), _np(b.grad)))
    (log, ag_, bg), (tlog, tag, tbg) = results
    assert len(log) == len(tlog) == 2
    for e, te in zip(log, tlog):
        assert e[0] == te[0]
        for lst, tlst in zip(e[1:], te[1:]):
            assert [v is None for v in lst] == [v is None for v in tlst], e[0]
            for v, tv in zip(lst, tlst):
                if v is not None:
                    np.testing.assert_allclose(v, tv, rtol=1e-12)
    np.testing.assert_allclose(ag_, tag, rtol=1e-12)
    assert (bg is None) == (tbg is None)
    if bg is not None:
        np.testing.assert_allclose(bg, tbg, rtol=1e-12)


def test_backward_hook_when_no_input_needs_a_gradient():
    lin = nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((gi, go[0].shape)))
    lin(ag.ones(4, 3)).sum().backward()
    assert seen == [((None,), (4, 2))]
    lin2 = nn.Linear(3, 2)
    lin2.register_full_backward_hook(lambda m, gi, go: (ag.ones(4, 3),))
    with pytest.raises(RuntimeError, match="no input requires gradient"):
        lin2(ag.ones(4, 3)).sum().backward()
    lin3 = nn.Linear(3, 2)
    lin3.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input"):
        lin3(ag.ones(4, 3, requires_grad=True)).sum().backward()


def test_hook_handles_remove_and_sequential_children_fire():
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    calls = []
    h = seq[0].register_forward_hook(lambda m, a, o: calls.append("lin0"))
    with seq[1].register_forward_hook(lambda m, a, o: calls.append("relu")):
        seq(ag.ones(1, 3))
    seq(ag.ones(1, 3))
    assert calls == ["lin0", "relu", "lin0"]
    h.remove()
    h.remove()                                   # a second remove does nothing
    seq(ag.ones(1, 3))
    assert calls == ["lin0", "relu", "lin0"]
    with pytest.raises(TypeError, match="callable"):
        seq.register_forward_hook(3)
    with pytest.raises(RuntimeError, match="new_args, new_kwargs"):
        with seq.register_forward_pre_hook(lambda m, a, kw: 5, with_kwargs=True):
            seq(ag.ones(1, 3))


def test_forward_hook_always_call_runs_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    m, seen = Boom(), []
    m.register_forward_hook(lambda mod, a, o: seen.append(o), always_call=True)
    m.register_forward_hook(lambda mod, a, o: seen.append("never"))
    with pytest.raises(ValueError, match="boom"):
        m(ag.ones(1))
    assert seen == [None]


def _train_step(model, opt, x, y):
    opt.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    opt.step()
    return loss


def test_hooks_under_compile_match_eager_and_retrace_when_changed():
    """A forward hook and a backward hook that change values are part of the compiled program; adding or
    removing a hook (the module's or a global one), or changing a value a hook reads, traces again."""
    x, y = ag.tensor(X[:, :5]), ag.tensor(Y)
    models = [_ag_model(), _ag_model()]
    opts = [optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in models]
    cfg = {"scale": 0.5}
    step = ag.compile(lambda xx, yy: _train_step(models[1], opts[1], xx, yy))

    def both(expect_retrace=None):
        before = step.stats["traces"]
        a = _train_step(models[0], opts[0], x, y)
        b = step(x, y)
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-12)
        for p, q in zip(models[0].parameters(), models[1].parameters()):
            np.testing.assert_allclose(q.numpy(), p.numpy(), rtol=1e-12)
        if expect_retrace is not None:
            assert (step.stats["traces"] > before) == expect_retrace

    for _ in range(3):
        both()
    handles = [(m[2].register_forward_hook(lambda mod, a, o: o * cfg["scale"]),
                m[2].register_full_backward_hook(lambda mod, gi, go: (gi[0] * 2,)),
                m[0].register_full_backward_pre_hook(lambda mod, go: (go[0] + 1,))) for m in models]
    both(expect_retrace=True)
    for _ in range(3):
        both(expect_retrace=False)
    assert step.stats["replays"] >= 3
    cfg["scale"] = 0.25                          # a value the hook reads
    both()
    both(expect_retrace=False)
    for hs in handles:
        hs[0].remove()
    both(expect_retrace=True)
    both(expect_retrace=False)
    g = nn.module.register_module_forward_hook(lambda mod, a, o: o * 1.5 if isinstance(mod, nn.Tanh) else None)
    try:
        both(expect_retrace=True)
        both(expect_retrace=False)
    finally:
        g.remove()
    both(expect_retrace=False)                   # the program of the call before the global hook, cached
    for hs in handles:
        for h in hs:
            h.remove()
    both()


# -- Module helpers -----------------------------------------------------------------------------------
def test_module_helpers():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    assert net.get_submodule("2.1") is net[2][1] and net.get_submodule("") is net
    assert net.get_parameter("2.1.weight") is net[2][1].weight
    assert net.get_buffer("1.running_mean") is net[1].running_mean
    with pytest.raises(AttributeError, match="no submodule"):
        net.get_submodule("2.5")
    with pytest.raises(AttributeError, match="no parameter `running_mean`"):
        net.get_parameter("1.running_mean")
    assert [n for n, _ in net.named_buffers()] == ["1.running_mean", "1.running_var", "1.num_batches_tracked"]
    assert [n for n, _ in net.named_buffers(prefix="m", recurse=True)][0] == "m.1.running_mean"
    assert list(net.named_buffers(recurse=False)) == []
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "BatchNorm1d", "ReLU", "Linear", "Sequential", "Sequential"]   # children first
    assert net.requires_grad_(False) is net and not any(p.requires_grad for p in net.parameters())
    net.requires_grad_()
    assert all(p.requires_grad for p in net.parameters())


@needs_torch
def test_module_helpers_match_torch_names():
    net = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    tnet = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    assert [n for n, _ in net.named_buffers()] == [n for n, _ in tnet.named_buffers()]
    order, torder = [], []
    net.apply(lambda m: order.append(type(m).__name__))
    tnet.apply(lambda m: torder.append(type(m).__name__))
    assert order == torder


# -- grad modes ---------------------------------------------------------------------------------------
def test_no_grad_and_enable_grad_bare_decorators():
    w = ag.ones(3, requires_grad=True)

    @ag.no_grad
    def f(x):
        """doc"""
        return x * 2

    @ag.enable_grad
    def g(x):
        return x * 2

    assert not f(w).requires_grad and f.__name__ == "f" and f.__doc__ == "doc"
    with ag.no_grad():
        assert g(w).requires_grad
    assert not ag.no_grad()(lambda x: x * 2)(w).requires_grad
    assert ag.is_grad_enabled()
    with pytest.raises(TypeError, match="takes no arguments"):
        ag.no_grad(3)


def test_inference_mode():
    lin = nn.Linear(3, 2)
    w = ag.ones(2, requires_grad=True)
    with ag.inference_mode():
        assert ag.is_inference_mode_enabled() and not ag.is_grad_enabled()
        y = lin(ag.ones(4, 3))
        y.add_(1)                                        # in place inside: allowed
        d = ag.tensor([1.0, 2.0])                        # made from Python data: one too
        with ag.inference_mode(False):
            assert not ag.is_inference_mode_enabled()
    assert not ag.is_inference_mode_enabled() and ag.is_grad_enabled() and not y.requires_grad
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
        y * w                                            # recording a product saves y
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside InferenceMode"):
        y.add_(1)
    with pytest.raises(RuntimeError, match="Inference tensors"):
        d * w
    z = y + w                                            # not saved: allowed, as in PyTorch
    z.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [4.0, 4.0])
    (y.clone() * w).sum().backward()                     # a clone is a normal tensor
    v = y[0]                                             # a view of one is one too
    with pytest.raises(RuntimeError, match="Inference tensors"):
        v * w

    @ag.inference_mode
    def predict(x):
        return lin(x)

    @ag.inference_mode()
    def predict2(x):
        return lin(x)
    for fn in (predict, predict2):
        with pytest.raises(RuntimeError, match="Inference tensors"):
            fn(ag.ones(1, 3)) * w
    normal = lin(ag.ones(1, 3))                          # outside: a normal tensor
    (normal * w).sum().backward()


@needs_torch
def test_inference_mode_raises_where_torch_raises():
    for lib in ("ag", "torch"):
        mod = ag if lib == "ag" else torch
        w = mod.ones(2, requires_grad=True)
        with mod.inference_mode():
            y = mod.ones(3, 2) * 2 if lib == "torch" else ag.nn.Linear(2, 2)(ag.ones(3, 2))
        raised = []
        for op in (lambda: y * w, lambda: y + w, lambda: y.add_(1), lambda: y.clone() * w):
            try:
                op()
                raised.append(False)
            except RuntimeError:
                raised.append(True)
        if lib == "ag":
            ours = raised
    assert ours == raised == [True, False, True, False]


def test_inference_mode_is_per_thread_and_restored_after_an_error():
    import threading
    w = ag.ones(2, requires_grad=True)
    made, go, done = {}, threading.Event(), threading.Event()

    def other():
        go.wait()
        made["t"] = ag.ones(2) * 3                        # made while the main thread is inside
        done.set()

    th = threading.Thread(target=other)
    th.start()
    with ag.inference_mode():
        go.set()
        done.wait(10)
    th.join()
    (made["t"] * w).sum().backward()                     # a normal tensor: it was made in another thread
    with pytest.raises(ZeroDivisionError):
        with ag.inference_mode():
            1 / 0
    assert not ag.is_inference_mode_enabled() and ag.is_grad_enabled()
    (ag.ones(2) * w).sum().backward()


def test_a_module_call_is_forward_until_a_hook_is_registered():
    """No hook registered in the process: Module.__call__ is the plain call (nothing looks for hooks);
    the first registration swaps in the one that does (run in a fresh interpreter)."""
    import subprocess
    import sys
    code = ("import autograd_gpu as ag; M = ag.nn.Module; plain = M.__call__; "
            "assert plain.__code__.co_names == ('forward',), plain.__code__.co_names; "
            "ag.nn.Linear(2, 2)(ag.ones(1, 2)); assert M.__call__ is plain; "
            "h = ag.nn.Linear(2, 2).register_forward_hook(lambda *a: None); h.remove(); "
            "assert M.__call__ is M._call_looking_for_hooks")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# -- the new optimizers on every device and under ag.compile --------------------------------------
NEW_OPTIMIZERS = [("Adadelta", dict(weight_decay=0.1)), ("Adamax", dict(lr=0.01)), ("NAdam", dict(lr=0.01)),
                  ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
                  ("ASGD", dict(lr=0.05, t0=3)), ("Rprop", dict(lr=0.05))]


@pytest.mark.parametrize("name,kw", NEW_OPTIMIZERS, ids=[n for n, _ in NEW_OPTIMIZERS])
def test_new_optimizers_on_device_and_compiled_match_eager_cpu(name, kw, device):
    """Eager on ``device`` and ag.compile'd on ``device`` follow eager on the CPU for 8 steps (float32)."""
    runs = []
    for dev, compiled in (("cpu", False), (device, False), (device, True)):
        m = _ag_model(ag.float32).to(dev)
        opt = getattr(optim, name)(m.parameters(), **kw)
        x, y = ag.tensor(X, dtype=ag.float32, device=dev), ag.tensor(Y, dtype=ag.float32, device=dev)
        step = ag.compile(_train_step) if compiled else _train_step
        losses = [float(step(m, opt, x, y)) for _ in range(8)]
        runs.append((losses, [p.numpy() for p in m.parameters()]))
        if compiled:
            assert step.stats["replays"] >= 5, step.stats
    (l0, p0) = runs[0]
    for losses, params in runs[1:]:
        np.testing.assert_allclose(losses, l0, rtol=1e-4, atol=1e-6)
        for a, b in zip(params, p0):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
