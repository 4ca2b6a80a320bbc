"""The fused optimizer updates (backend.sgd_step / adam_step / rmsprop_step / adagrad_step, one call per
device and dtype of a group) equal the step-by-step update they replace (``_reference_update``, which
ag.compile still records), for every optimizer and option, float32 and float64, both devices, parameters
of several shapes and dtypes in one group, parameters without a gradient and several groups."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
from autograd_gpu.backends.kernels import optim as kernels

CASES = [
    (optim.SGD, dict(lr=0.1)),
    (optim.SGD, dict(lr=0.1, weight_decay=0.1)),
    (optim.SGD, dict(lr=0.1, maximize=True)),
    (optim.SGD, dict(lr=0.1, momentum=0.9)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.3)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    (optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.05, maximize=True)),
    (optim.SGD, dict(lr=0.1, momentum=0.8, dampening=0.5, weight_decay=0.05, maximize=True)),
    (optim.Adam, dict(lr=0.01)),
    (optim.Adam, dict(lr=0.01, weight_decay=0.1)),
    (optim.Adam, dict(lr=0.01, amsgrad=True)),
    (optim.Adam, dict(lr=0.01, maximize=True)),
    (optim.Adam, dict(lr=0.01, betas=(0.8, 0.9), eps=1e-3, weight_decay=0.1, amsgrad=True, maximize=True)),
    (optim.AdamW, dict(lr=0.01)),
    (optim.AdamW, dict(lr=0.01, weight_decay=0.2, amsgrad=True, maximize=True)),
    (optim.RMSprop, dict(lr=0.01)),
    (optim.RMSprop, dict(lr=0.01, centered=True)),
    (optim.RMSprop, dict(lr=0.01, momentum=0.9)),
    (optim.RMSprop, dict(lr=0.01, weight_decay=0.1, maximize=True)),
    (optim.RMSprop, dict(lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1, maximize=True)),
    (optim.Adagrad, dict(lr=0.1)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.1)),
    (optim.Adagrad, dict(lr=0.1, weight_decay=0.1, maximize=True)),
    (optim.Adagrad, dict(lr=0.1, lr_decay=0.05, initial_accumulator_value=0.5, eps=1e-3, weight_decay=0.1)),
]
IDS = [f"{c.__name__}-{'-'.join(f'{k}={v}' for k, v in kw.items())}" for c, kw in CASES]

# (shape, dtype, has a gradient): odd shapes (0-d, one row, empty), a parameter without a gradient
SPECS = [((3, 5), "float64", True), ((), "float64", True), ((1, 7), "float64", True), ((0, 4), "float64", True),
         ((4,), "float64", False), ((2, 3), "float32", True), ((6,), "float32", True)]
TOL = {"float64": dict(rtol=1e-12, atol=1e-12), "float32": dict(rtol=2e-6, atol=2e-6),
       "complex128": dict(rtol=1e-12, atol=1e-12)}


def _values(shape, dtype, rng):
    a = rng.standard_normal(shape)
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


def _params(specs, device, seed, noncontiguous=False):
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype, _ in specs:
        p = nn.Parameter(ag.tensor(_values(shape, dtype, rng), device=device))
        if noncontiguous and len(shape) == 2:         # every other column of a wider array
            wide = ag.tensor(np.repeat(p.numpy(), 2, axis=1), device=device).data
            p.data = wide[:, ::2]
            assert not p.data.flags.c_contiguous
        out.append(p)
    return out


def _set_grads(params, specs, device, rng, noncontiguous=False):
    for p, (shape, dtype, has_grad) in zip(params, specs):
        g = ag.tensor(_values(shape, dtype, rng), device=device) if has_grad else None
        if g is not None and noncontiguous and len(shape) == 2:     # a transposed copy, transposed back
            g = ag.tensor(g.numpy().T.copy(), device=device).T
            assert not g.data.flags.c_contiguous
        p.grad = g


def _step(opt, fused):
    for group in opt.param_groups:
        (opt._update_group if fused else opt._reference_update)(group)


def _run(cls, kw, device, specs, fused, groups=None, steps=3, noncontiguous=False):
    params = _params(specs, device, 0, noncontiguous)
    if groups is None:
        opt = cls(params, **kw)
    else:   # groups: [(indices, options)]
        opt = cls([dict(params=[params[i] for i in idx], **o) for idx, o in groups], **kw)
    rng = np.random.default_rng(1)
    for _ in range(steps):
        _set_grads(params, specs, device, rng, noncontiguous)
        _step(opt, fused)
    return params, opt


def _assert_same(specs, a, b):
    (pa, oa), (pb, ob) = a, b
    for p, q, (_, dtype, _) in zip(pa, pb, specs):
        np.testing.assert_allclose(p.numpy(), q.numpy(), **TOL[dtype])
        sa, sb = oa.state.get(p, {}), ob.state.get(q, {})
        assert sa.keys() == sb.keys()
        for k in sa:
            if isinstance(sa[k], ag.Tensor):
                np.testing.assert_allclose(sa[k].numpy(), sb[k].numpy(), **TOL[dtype])
            else:
                assert sa[k] == sb[k], k


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
    other = dict(lr=kw["lr"] / 2, weight_decay=0.02, maximize=not kw.get("maximize", False))
    groups = [([0, 1, 5], {}), ([2, 3, 4, 6], other)]
    _assert_same(SPECS, _run(cls, kw, device, SPECS, True, groups), _run(cls, kw, device, SPECS, False, groups))


@pytest.mark.parametrize("cls, kw", [c for c in CASES if c[0] is not optim.SGD or "momentum" not in c[1]],
                         ids=[i for c, i in zip(CASES, IDS) if c[0] is not optim.SGD or "momentum" not in c[1]])
def test_fused_update_of_complex_parameters(cls, kw, device):
    specs = [((3, 2), "complex128", True), ((4,), "complex128", True)]
    _assert_same(specs, _run(cls, kw, device, specs, True), _run(cls, kw, device, specs, False))


def test_parameters_with_different_step_counts_share_a_group(device):
    """A parameter that skipped steps has its own bias correction (Adam) and learning rate (Adagrad)."""
    specs = [((3,), "float64", True), ((2, 2), "float64", True)]
    for cls in (optim.Adam, optim.Adagrad):
        results = []
        for fused in (True, False):
            params = _params(specs, device, 0)
            opt = cls(params, lr=0.1)
            rng = np.random.default_rng(2)
            for i in range(4):
                _set_grads(params, [(s, d, g and (k == 0 or i % 2 == 0)) for k, (s, d, g) in enumerate(specs)],
                           device, rng)
                _step(opt, fused)
            results.append((params, opt))
        _assert_same(specs, *results)
        assert [results[0][1].state[p]["step"] for p in results[0][0]] == [4, 2]


def test_step_uses_the_fused_update_and_bumps_each_version_once(device, monkeypatch):
    p, q = nn.Parameter(ag.ones(3, device=device)), nn.Parameter(ag.ones(2, device=device))
    opt = optim.Adam([p, q], lr=0.1)
    calls = []
    backend = p.device.backend
    real = backend.adam_step
    monkeypatch.setattr(backend, "adam_step", lambda *a, **k: (calls.append(len(a[0])), real(*a, **k)))
    p.grad = ag.ones(3, device=device)
    v0, w0 = p.version_counter()[0], q.version_counter()[0]
    opt.step()
    assert calls == [1] and p.version_counter()[0] == v0 + 1     # q has no gradient: untouched, no state
    assert q.version_counter()[0] == w0 and q not in opt.state
    q.grad = ag.ones(2, device=device)
    opt.step()
    assert calls == [1, 1, 1]       # p at step 2, q at step 1: two buckets
    p.grad = ag.ones(3, device=device)
    q.grad = ag.ones(2, device=device)
    opt.zero_grad()
    assert p.grad is None and q.grad is None


def _launch_counter():
    from autograd_gpu.backends import cupy_backend
    if not cupy_backend.simulated():
        pytest.skip("counts launches on the CuPy stand-in")
    from autograd_gpu.testing import cupy_standin
    return cupy_standin.count_launches


@pytest.mark.gpu
@pytest.mark.parametrize("cls, kw", CASES, ids=IDS)
def test_one_launch_per_dtype_bucket_on_cuda(cls, kw):
    """On the stand-in's launch counter: one kernel per (device, dtype) bucket of a group, whatever the
    number of parameters (the step-by-step update made 2 (SGD) to 16 (RMSprop) per parameter, the
    per-parameter kernel one each); zero_grad() launches nothing."""
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
@pytest.mark.parametrize("cls, kw", [CASES[6], CASES[12], CASES[19], CASES[23]], ids=[IDS[6], IDS[12], IDS[19], IDS[23]])
def test_many_parameters_take_one_launch_per_chunk_and_equal_the_step_by_step_update(cls, kw):
    """More parameters than one kernel's argument space holds (CUDA's 4 KiB, or _MAX_SLOTS) take one launch
    per chunk; mixed shapes and non-contiguous ones in the same chunks, equal to the reference."""
    count_launches = _launch_counter()
    specs = [((i % 5 + 2, i % 3 + 2), "float32", True) for i in range(2 * kernels._MAX_SLOTS + 3)] + \
        [((0,), "float32", True), ((), "float32", True)]
    fused = _run(cls, kw, "cuda", specs, True, noncontiguous=True)
    _assert_same(specs, fused, _run(cls, kw, "cuda", specs, False, noncontiguous=True))
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
    sources = [("sgd", kernels._sgd_source, 6), ("adam", kernels._adam_source, 4),
               ("rmsprop", kernels._rmsprop_source, 4), ("adagrad", kernels._adagrad_source, 2)]
    for family, source, n in sources:
        for dtype in ("float16", "float32", "float64"):
            for bits in range(2 ** n):
                flags = tuple(bool(bits >> i & 1) for i in range(n))
                for k in (1, 3):
                    kern = backend._optim_kernel(family, np.dtype(dtype), source, flags, k)
                    assert kern is not None and backend._optim_kernel(family, np.dtype(dtype), source, flags, k) is kern


def test_the_bucket_kernel_is_a_table_of_offsets_over_raw_arrays():
    ins, outs, op = kernels._multi_source(*kernels._adam_source(True, False, False, True), 3, "float32")
    assert ins.startswith("raw float32 g0, raw float32 g1, raw float32 g2, int64 o1, int64 o2, float32 b1")
    assert outs == ", ".join(f"raw float32 {n}{q}" for q in range(3) for n in ("p", "m", "v", "vmax"))
    assert "if (i < o1) { j = i; g = g0[j];" in op and "else { j = i - o2; g = g2[j];" in op
    assert "else { p2[j] = p; m2[j] = m; v2[j] = v; vmax2[j] = vmax; }" in op
