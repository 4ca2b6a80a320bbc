"""The fused multi-tensor updates of Adamax, NAdam, RAdam, Adadelta, ASGD and Rprop (backend.adamax_step ...
rprop_step: one call per device, dtype and step coefficients of a group, one kernel launch per bucket on
CUDA) equal the step-by-step update they replace (``_reference_update``, which ag.compile still records):
every option that changes the maths, float32 and float64, both devices, 8 steps (RAdam crosses its
rectification switch at step 6), odd shapes (0-d, empty, one row, non-contiguous), parameters of two dtypes
and without a gradient in one group, several groups, complex parameters and parameters at different step
counts. LBFGS keeps its flat-vector update (optim/lbfgs.py says why)."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
from autograd_gpu.backends.kernels import optim as kernels
from autograd_gpu.optim import radam

from test_fused_optim import SPECS, _params, _set_grads, _assert_same, _launch_counter

STEPS = 8
CASES = [
    (optim.Adamax, dict(lr=0.01)),
    (optim.Adamax, dict(lr=0.01, weight_decay=0.1)),
    (optim.Adamax, dict(lr=0.01, maximize=True)),
    (optim.Adamax, dict(lr=0.02, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1, maximize=True)),
    (optim.NAdam, dict(lr=0.01)),
    (optim.NAdam, dict(lr=0.01, weight_decay=0.1)),
    (optim.NAdam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.NAdam, dict(lr=0.01, maximize=True)),
    (optim.NAdam, dict(lr=0.02, betas=(0.8, 0.9), eps=1e-3, momentum_decay=0.1, weight_decay=0.2,
                       decoupled_weight_decay=True, maximize=True)),
    (optim.RAdam, dict(lr=0.01)),
    (optim.RAdam, dict(lr=0.01, weight_decay=0.1)),
    (optim.RAdam, dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    (optim.RAdam, dict(lr=0.01, maximize=True)),
    (optim.RAdam, dict(lr=0.02, betas=(0.8, 0.99), eps=1e-3, weight_decay=0.2, decoupled_weight_decay=True,
                       maximize=True)),
    (optim.Adadelta, dict()),
    (optim.Adadelta, dict(lr=0.5, rho=0.8, eps=1e-4)),
    (optim.Adadelta, dict(weight_decay=0.1)),
    (optim.Adadelta, dict(maximize=True)),
    (optim.Adadelta, dict(lr=0.3, rho=0.7, eps=1e-3, weight_decay=0.1, maximize=True)),
    (optim.ASGD, dict(lr=0.05)),                                   # t0 = 1e6: ax follows p
    (optim.ASGD, dict(lr=0.05, t0=2)),                             # averaging from step 3
    (optim.ASGD, dict(lr=0.05, lambd=0.1, alpha=0.5, t0=3)),
    (optim.ASGD, dict(lr=0.05, weight_decay=0.1)),
    (optim.ASGD, dict(lr=0.05, maximize=True)),
    (optim.ASGD, dict(lr=0.05, lambd=0.05, alpha=0.9, t0=1, weight_decay=0.1, maximize=True)),
    (optim.Rprop, dict(lr=0.01)),
    (optim.Rprop, dict(lr=0.01, maximize=True)),
    (optim.Rprop, dict(lr=0.1, etas=(0.3, 1.5), step_sizes=(0.05, 0.2))),   # both clamps reached
    (optim.Rprop, dict(lr=0.1, etas=(0.4, 1.3), step_sizes=(0.02, 0.15), maximize=True)),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for c, kw in CASES]
FAMILIES = {optim.Adamax: "adamax", optim.NAdam: "nadam", optim.RAdam: "radam", optim.Adadelta: "adadelta",
            optim.ASGD: "asgd", optim.Rprop: "rprop"}


def _run(cls, kw, device, specs, fused, groups=None, steps=STEPS, noncontiguous=False, grad_rng=None):
    params = _params(specs, device, 0, noncontiguous)
    if groups is None:
        opt = cls(params, **kw)
    else:   # groups: [(indices, options)]
        opt = cls([dict(params=[params[i] for i in idx], **o) for idx, o in groups], **kw)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        _set_grads(params, specs, device, rng, noncontiguous)
        for group in opt.param_groups:
            (opt._update_group if fused else opt._reference_update)(group)
    return params, opt


@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_fused_update_equals_the_step_by_step_update(cls, kw, device):
    _assert_same(SPECS, _run(cls, kw, device, SPECS, True), _run(cls, kw, device, SPECS, False))


@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_fused_update_on_noncontiguous_parameters_and_gradients(cls, kw, device):
    specs = [((3, 4), "float64", True), ((2, 5), "float32", True)]
    _assert_same(specs, _run(cls, kw, device, specs, True, noncontiguous=True),
                 _run(cls, kw, device, specs, False, noncontiguous=True))


@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_fused_update_with_several_groups(cls, kw, device):
    other = dict(lr=kw.get("lr", 1.0) / 2, maximize=not kw.get("maximize", False))
    if cls is not optim.Rprop:
        other["weight_decay"] = 0.02
    groups = [([0, 1, 5], {}), ([2, 3, 4, 6], other)]
    _assert_same(SPECS, _run(cls, kw, device, SPECS, True, groups), _run(cls, kw, device, SPECS, False, groups))


@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_fused_update_of_complex_parameters(cls, kw, device):
    specs = [((3, 2), "complex128", True), ((4,), "complex128", True)]
    _assert_same(specs, _run(cls, kw, device, specs, True), _run(cls, kw, device, specs, False))


@pytest.mark.parametrize("cls", list(FAMILIES), ids=lambda c: c.__name__)
def test_parameters_at_different_step_counts_share_a_group(cls, device):
    """A parameter that skipped steps has its own step coefficients (a bucket of its own)."""
    specs = [((3,), "float64", True), ((2, 2), "float64", True), ((5,), "float64", True)]
    kw = dict(t0=2) if cls is optim.ASGD else {}
    results = []
    for fused in (True, False):
        params = _params(specs, device, 0)
        opt = cls(params, **kw)
        rng = np.random.default_rng(2)
        for i in range(STEPS):
            _set_grads(params, [(s, d, g and (k != 1 or i % 2 == 0)) for k, (s, d, g) in enumerate(specs)],
                       device, rng)
            for group in opt.param_groups:
                (opt._update_group if fused else opt._reference_update)(group)
        results.append((params, opt))
    _assert_same(specs, *results)
    assert [results[0][1].state[p]["step"] for p in results[0][0]] == [STEPS, STEPS // 2, STEPS]


def test_radam_takes_both_sides_of_its_rectification_switch_in_these_tests():
    """The cases above run 8 steps: the plain update for steps 1-5 (rho_t <= 5), the rectified one after."""
    for betas in ((0.9, 0.999), (0.8, 0.99)):
        state, group = {}, dict(lr=0.01, betas=betas, weight_decay=0.0)
        kinds = [radam._count_step(state, group)[1] != 0 for _ in range(STEPS)]
        assert kinds == [False] * 5 + [True] * 3


def test_rprop_cases_reach_both_step_size_clamps():
    """The clamped Rprop case above grows some step sizes to the maximum and shrinks others to the minimum."""
    specs = [((40,), "float64", True)]
    params, opt = _run(optim.Rprop, CASES[27][1], "cpu", specs, True)
    size = opt.state[params[0]]["step_size"].numpy()
    assert (size == 0.2).any() and (size == 0.05).any()


@pytest.mark.parametrize("cls", list(FAMILIES), ids=lambda c: c.__name__)
def test_step_uses_the_fused_update_and_bumps_each_version_once(cls, device, monkeypatch):
    p, q = nn.Parameter(ag.ones(3, device=device)), nn.Parameter(ag.ones(2, 2, device=device))
    opt = cls([p, q])
    calls = []
    backend = p.device.backend
    name = FAMILIES[cls] + "_step"
    real = getattr(backend, name)
    monkeypatch.setattr(backend, name, lambda *a, **k: (calls.append(len(a[0])), real(*a, **k)))
    p.grad = ag.ones(3, device=device)
    v0, w0 = p.version_counter()[0], q.version_counter()[0]
    opt.step()
    assert calls == [1] and p.version_counter()[0] == v0 + 1     # q has no gradient: untouched, no state
    assert q.version_counter()[0] == w0 and q not in opt.state
    p.grad, q.grad = ag.ones(3, device=device), ag.ones(2, 2, device=device)
    opt.step()
    opt.zero_grad()
    assert p.grad is None and q.grad is None
    if cls in (optim.Rprop, optim.Adadelta):
        assert calls == [1, 2]            # nothing depends on the step count: one bucket
    else:
        assert calls == [1, 1, 1]         # p at step 2, q at step 1: two buckets


def test_state_dict_round_trip_after_fused_steps(device):
    """State stays per parameter (the fused update keeps no buffers of its own): a saved and loaded
    optimizer continues exactly as the original."""
    specs = [((3, 4), "float32", True), ((5,), "float64", True)]
    for cls, kw in [CASES[8], CASES[13], CASES[24], CASES[28]]:
        params, opt = _run(cls, kw, device, specs, True, steps=3)
        clone_params = _params(specs, device, 5)
        for c, p in zip(clone_params, params):
            c.data = p.data.copy()
        clone = cls(clone_params, **kw)
        clone.load_state_dict(opt.state_dict())
        rng = np.random.default_rng(9)
        for _ in range(3):
            _set_grads(params, specs, device, rng)
            for c, p in zip(clone_params, params):
                c.grad = p.grad
            opt.step()
            clone.step()
        _assert_same(specs, (params, opt), (clone_params, clone))


# -- CUDA: one launch per bucket (the CuPy stand-in's counter) --------------------------------------------
# launches of one step of a 20-parameter float32 model (10 Linear layers), pinned: one kernel for the group
# (the step-by-step update made 6 (ASGD) to 18 (Adadelta with weight decay) a parameter: 120 to 360)
LAUNCH_BUDGET = {"Adamax": 1, "NAdam": 1, "RAdam": 1, "Adadelta": 1, "ASGD": 1, "Rprop": 1}


@pytest.mark.gpu
@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_one_launch_per_dtype_bucket_on_cuda(cls, kw):
    """One kernel per (device, dtype) bucket of a group, whatever the number of parameters; zero_grad()
    launches nothing."""
    count_launches = _launch_counter()
    params, opt = _run(cls, kw, "cuda", SPECS, True, steps=1)
    _set_grads(params, SPECS, "cuda", np.random.default_rng(3))
    with count_launches() as log:
        opt.step()
    assert log.launches == len({d for shape, d, g in SPECS if g and 0 not in shape}) == 2
    with count_launches() as log:
        opt.zero_grad()
    assert log.launches == 0


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(LAUNCH_BUDGET))
def test_a_20_parameter_model_step_stays_within_its_launch_budget(name):
    count_launches = _launch_counter()
    ag.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(10)]).to("cuda")
    params = list(model.parameters())
    assert len(params) == 20
    opt = getattr(optim, name)(params)
    rng = np.random.default_rng(0)
    for step in range(3):
        for p in params:
            p.grad = ag.tensor(rng.standard_normal(p.shape).astype(np.float32), device="cuda")
        with count_launches() as log:
            opt.step()
        if step:                          # the first step also fills the state (zeros, Rprop's lr)
            assert log.launches <= LAUNCH_BUDGET[name], (log.launches, log.by_kind)


@pytest.mark.gpu
@pytest.mark.parametrize("cls, kw", [CASES[3], CASES[8], CASES[13], CASES[18], CASES[24], CASES[28]],
                         ids=[IDS[3], IDS[8], IDS[13], IDS[18], IDS[24], IDS[28]])
def test_many_parameters_take_one_launch_per_chunk_and_equal_the_step_by_step_update(cls, kw):
    count_launches = _launch_counter()
    specs = [((i % 5 + 2, i % 3 + 2), "float32", True) for i in range(2 * kernels._MAX_SLOTS + 3)] + \
        [((0,), "float32", True), ((), "float32", True)]
    fused = _run(cls, kw, "cuda", specs, True, steps=3, noncontiguous=True)
    _assert_same(specs, fused, _run(cls, kw, "cuda", specs, False, steps=3, noncontiguous=True))
    params, opt = fused
    _set_grads(params, specs, "cuda", np.random.default_rng(4))
    with count_launches() as log:
        opt.step()
    arrays = 2 + len([k for k, v in opt.state[params[0]].items() if isinstance(v, ag.Tensor)])
    per_launch = min(kernels._MAX_SLOTS, (kernels._ARG_BYTES - 8 * 10) // (arrays * 48 + 8))   # all 2-d
    n = len(specs) - 1                                            # the empty parameter launches nothing
    assert 1 < -(-n // kernels._MAX_SLOTS) <= log.launches <= -(-n // per_launch) < n


@pytest.mark.gpu
def test_cuda_kernels_build_once_per_dtype_options_and_count():
    """Every kernel body is one the CuPy in use accepts (on the stand-in: inside its C subset), built once."""
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing")
    backend = ag.device("cuda").backend
    sources = [("adamax", kernels._adamax_source, 2), ("nadam", kernels._nadam_source, 3),
               ("radam", kernels._radam_source, 4), ("adadelta", kernels._adadelta_source, 2),
               ("asgd", kernels._asgd_source, 2), ("rprop", kernels._rprop_source, 1)]
    for family, source, n in sources:
        for dtype in ("float16", "float32", "float64"):
            for bits in range(2 ** n):
                flags = tuple(bool(bits >> i & 1) for i in range(n))
                for k in (1, 3):
                    kern = backend._optim_kernel(family, np.dtype(dtype), source, flags, k)
                    assert kern is not None
                    assert backend._optim_kernel(family, np.dtype(dtype), source, flags, k) is kern


def test_the_kernels_declare_their_extra_locals():
    ins, outs, op = kernels._multi_source(*kernels._rprop_source(True)[:3], 2, "float64",
                                          kernels._rprop_source(True)[3])
    assert op.startswith("ptrdiff_t j; double g, p, prev, size, sp, f;")
    assert ins.endswith("float64 lo, float64 hi, float64 zero, float64 one, float64 mone")
    assert "g = (-g); sp = g * prev;" in op


# -- LBFGS: one flat vector; its step p += t d[p's slice] is one multi-tensor SGD update ------------------
def _lbfgs_params(device, dtypes):
    specs = [((3, 4), dtypes[0], True), ((), dtypes[1], True), ((0,), dtypes[0], True),
             ((2, 5), dtypes[1], True)]
    return _params(specs, device, 0, noncontiguous=True)


@pytest.mark.parametrize("dtypes", [("float64", "float64"), ("float32", "float32"), ("float32", "float64")],
                         ids=["float64", "float32", "mixed"])
def test_lbfgs_adds_its_flat_step_to_every_parameter(dtypes, device, monkeypatch):
    params = _lbfgs_params(device, dtypes)
    before = [p.numpy().copy() for p in params]
    opt = optim.LBFGS(params)
    xp = params[0].device.backend.xp
    dtype = np.result_type(*dtypes)
    update = xp.asarray(np.random.default_rng(0).standard_normal(sum(p.data.size for p in params)).astype(dtype))
    calls = []
    backend = params[0].device.backend
    real = backend.sgd_step
    monkeypatch.setattr(backend, "sgd_step", lambda *a, **k: (calls.append(len(a[0])), real(*a, **k)))
    versions = [p.version_counter()[0] for p in params]
    opt._add_grad(0.3, update)
    assert calls == ([] if dtypes[0] != dtypes[1] else [4])      # one call for all, unless dtypes differ
    flat, offset = ag.Tensor(update).numpy(), 0
    for p, b in zip(params, before):
        want = (b + 0.3 * flat[offset:offset + b.size].reshape(b.shape)).astype(p.numpy().dtype)
        np.testing.assert_allclose(p.numpy(), want, rtol=1e-6 if "float32" in dtypes else 1e-13, atol=1e-7)
        offset += b.size
    assert [p.version_counter()[0] for p in params] == [v + 1 for v in versions]


@pytest.mark.gpu
def test_lbfgs_step_is_one_launch_on_cuda():
    count_launches = _launch_counter()
    params = [nn.Parameter(ag.ones(*s, device="cuda")) for s in [(3, 4), (5,), (2, 2, 2), (1,)] * 3]
    opt = optim.LBFGS(params)
    update = ag.ones(sum(p.numel() for p in params), device="cuda").data
    with count_launches() as log:
        opt._add_grad(0.5, update)
    assert log.launches == 1
    assert all(float(p.sum().item()) == 1.5 * p.numel() for p in params)


@pytest.mark.parametrize("cls, kw", [CASES[3], CASES[8], CASES[13], CASES[18], CASES[24], CASES[28]],
                         ids=[IDS[3], IDS[8], IDS[13], IDS[18], IDS[24], IDS[28]])
def test_fused_update_of_float16_parameters(cls, kw, device):
    """float16 (its own kernel on CUDA, half locals) within a few float16 roundings of the step-by-step update."""
    specs = [((3, 5), "float16", True), ((), "float16", True), ((7,), "float16", True)]
    (pa, oa), (pb, ob) = (_run(cls, kw, device, specs, fused, steps=5) for fused in (True, False))
    for p, q in zip(pa, pb):
        assert p.dtype == ag.float16
        np.testing.assert_allclose(p.numpy().astype(np.float64), q.numpy().astype(np.float64), rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("cls, kw", [CASES[3], CASES[8], CASES[13], CASES[18], CASES[24], CASES[28]],
                         ids=[IDS[3], IDS[8], IDS[13], IDS[18], IDS[24], IDS[28]])
def test_fused_update_of_bfloat16_parameters(cls, kw, device):
    """bfloat16 (the array passes on both devices: no kernel for it) within bfloat16 rounding of the
    step-by-step update; Rprop's sign changes zero the gradient there too (etaminus is not a bfloat16)."""
    results = []
    for fused in (True, False):
        ag.manual_seed(0)
        params = [nn.Parameter(ag.randn(*shape, device=device).to(ag.bfloat16)) for shape in [(3, 4), (), (5,)]]
        opt = cls(params, **kw)
        for step in range(5):
            for p in params:
                p.grad = ag.ones_like(p) * (0.5 - step % 2)      # alternating signs: Rprop's both branches
            for group in opt.param_groups:
                (opt._update_group if fused else opt._reference_update)(group)
        results.append([p.float().numpy() for p in params])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-2, atol=1e-2)


def test_the_optimizer_benchmark_times_both_updates_of_every_optimizer():
    from benchmarks import optim_fused
    got = optim_fused.times(4, 1, number=1)
    assert list(got) == [name for name, _ in optim_fused.CASES] and all(a > 0 and b > 0 for a, b in got.values())


@pytest.mark.gpu
def test_the_optimizer_benchmark_counts_one_launch_a_fused_step():
    _launch_counter()
    from benchmarks import optim_fused
    got = optim_fused.launches()
    assert all(fused == 1 < ref for ref, fused in got.values()), got


def _combinations():
    """Every combination of the options that change an update's maths (each kernel variant and NumPy branch)."""
    import itertools
    flags = {optim.Adamax: dict(weight_decay=(0.0, 0.1), maximize=(False, True)),
             optim.NAdam: dict(weight_decay=(0.0, 0.1), decoupled_weight_decay=(False, True), maximize=(False, True)),
             optim.RAdam: dict(weight_decay=(0.0, 0.1), decoupled_weight_decay=(False, True), maximize=(False, True)),
             optim.Adadelta: dict(weight_decay=(0.0, 0.1), maximize=(False, True)),
             optim.ASGD: dict(weight_decay=(0.0, 0.1), maximize=(False, True), t0=(1e6, 2)),
             optim.Rprop: dict(maximize=(False, True), step_sizes=((1e-6, 50), (0.05, 0.2)))}
    for cls, options in flags.items():
        for values in itertools.product(*options.values()):
            yield cls, dict(lr=0.05, **dict(zip(options, values)))


COMBINATIONS = list(_combinations())


@pytest.mark.parametrize("cls, kw", COMBINATIONS,
                         ids=[f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for c, kw in COMBINATIONS])
def test_every_combination_of_options_equals_the_step_by_step_update(cls, kw, device):
    _assert_same(SPECS, _run(cls, kw, device, SPECS, True), _run(cls, kw, device, SPECS, False))
