"""The fused losses (backend.cross_entropy / nll_loss / log_softmax / softmax, backends/kernels/losses.py):
equal to NumPy and to the composed ops, on both devices, for odd shapes; bad class indices still raise."""
import os

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F


def _t(a, device, requires_grad=False):
    return ag.tensor(np.asarray(a), device=device, requires_grad=requires_grad)


def _np_log_softmax(x):
    s = x - x.max(axis=1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=1, keepdims=True))


def _np_cross_entropy(x, t, ignore_index=-100, reduction="mean"):
    """(loss, d loss.sum() / dx) in float64."""
    x = x.astype(np.float64)
    logp = _np_log_softmax(x)
    valid = t != ignore_index
    safe = np.where(valid, t, 0)
    per = -logp[np.arange(len(t)), safe] * valid
    onehot = np.eye(x.shape[1])[safe]
    g = (np.exp(logp) - onehot) * valid[:, None]
    if reduction == "none":
        return per, g
    if reduction == "sum":
        return per.sum(), g
    n = valid.sum()
    return per.sum() / n, g / max(n, 1)


def _tol(dtype):
    return dict(rtol=1e-5, atol=1e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


SHAPES = [(7, 5), (1, 4), (3, 1), (16, 64)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cross_entropy_matches_numpy_values_and_gradients(device, dtype, reduction, shape):
    rng = np.random.default_rng(0)
    xa = (3 * rng.standard_normal(shape)).astype(dtype)
    ta = rng.integers(0, shape[1], shape[0])
    x = _t(xa, device, requires_grad=True)
    loss = F.cross_entropy(x, _t(ta, device), reduction=reduction)
    loss.sum().backward()
    want, gwant = _np_cross_entropy(xa, ta, reduction=reduction)
    assert loss.dtype == x.dtype and loss.shape == np.shape(want)
    np.testing.assert_allclose(loss.numpy(), want, **_tol(dtype))
    np.testing.assert_allclose(x.grad.numpy(), gwant, **_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_ignored_rows_matches_numpy(device, dtype, reduction):
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((6, 4)).astype(dtype)
    ta = np.array([0, -100, 3, 2, -100, 1])
    x = _t(xa, device, requires_grad=True)
    loss = F.cross_entropy(x, _t(ta, device), reduction=reduction)
    loss.sum().backward()
    want, gwant = _np_cross_entropy(xa, ta, reduction=reduction)
    np.testing.assert_allclose(loss.numpy(), want, **_tol(dtype))
    np.testing.assert_allclose(x.grad.numpy(), gwant, **_tol(dtype))
    assert not x.grad.numpy()[[1, 4]].any()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_fused_losses_equal_the_composed_ops_on_a_non_contiguous_input(device, reduction, ignore_index):
    rng = np.random.default_rng(2)
    base = rng.standard_normal((5, 12))
    ta = rng.integers(0, 6, 12)
    results = []
    for fused in (True, False):
        b = _t(base, device, requires_grad=True)
        x = b.T                                  # (12, 5) -> non-contiguous logits
        t = _t(ta % 5, device)
        if fused:
            loss = F.cross_entropy(x, t, ignore_index=ignore_index, reduction=reduction)
        else:                                    # the composition: log_softmax, then a one-hot pick
            logp = F.log_softmax(x, 1)
            valid = (ta % 5) != ignore_index
            hot = _t(np.eye(5)[np.where(valid, ta % 5, 0)] * valid[:, None], device)
            per = -(logp * hot).sum(1)
            loss = per if reduction == "none" else per.sum() if reduction == "sum" else per.sum() / float(valid.sum())
        loss.sum().backward()
        results.append((loss.numpy(), b.grad.numpy()))
    for a, c in zip(*results):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_matches_numpy_values_and_gradients(device, dtype, reduction):
    rng = np.random.default_rng(3)
    la = _np_log_softmax(rng.standard_normal((9, 4))).astype(dtype)
    ta = np.array([0, 3, -100, 1, 2, 2, -100, 0, 3])
    logp = _t(la, device, requires_grad=True)
    loss = F.nll_loss(logp, _t(ta, device), reduction=reduction)
    loss.sum().backward()
    valid = ta != -100
    safe = np.where(valid, ta, 0)
    per = -la.astype(np.float64)[np.arange(9), safe] * valid
    g = -np.eye(4)[safe] * valid[:, None]
    if reduction == "mean":
        want, g = per.sum() / valid.sum(), g / valid.sum()
    else:
        want = per.sum() if reduction == "sum" else per
    np.testing.assert_allclose(loss.numpy(), want, **_tol(dtype))
    np.testing.assert_allclose(logp.grad.numpy(), g, **_tol(dtype))


def test_losses_of_every_target_ignored_are_nan_with_a_zero_gradient(device):
    for f in (F.cross_entropy, lambda x, t: F.nll_loss(F.log_softmax(x, 1), t)):
        x = _t(np.ones((3, 4)), device, requires_grad=True)
        loss = f(x, _t([1, 1, 1], device), ignore_index=1) if f is F.cross_entropy else \
            F.nll_loss(x, _t([1, 1, 1], device), ignore_index=1)
        loss.backward()
        assert np.isnan(loss.item()) and not x.grad.numpy().any()


def test_cross_entropy_of_no_rows(device):
    x = _t(np.zeros((0, 4)), device, requires_grad=True)
    t = _t(np.zeros(0, dtype=np.int64), device)
    assert F.cross_entropy(x, t, reduction="sum").item() == 0.0
    assert F.cross_entropy(x, t, reduction="none").shape == (0,)
    F.cross_entropy(x, t, reduction="sum").backward()
    assert x.grad.shape == (0, 4)


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("bad,shown", [([0, 4, 1], "4"), ([0, -1, 1], "-1"), ([-3, 9, 1], "-3")])
def test_out_of_range_targets_raise_with_the_offending_index(device, op, bad, shown):
    x = _t(np.zeros((3, 4)), device)
    with pytest.raises(IndexError, match=rf"{op}: target {shown} is out of range \[0, 4\) for 4 classes"):
        getattr(F, op)(x, _t(bad, device)).item()              # a GPU raises at the read
    good = getattr(F, op)(x, _t([0, 1, 2], device)).item()                  # and the check is clear after
    assert good == pytest.approx(np.log(4) if op == "cross_entropy" else 0.0)


def test_an_ignored_target_is_not_out_of_range(device):
    x = _t(np.zeros((2, 3)), device)
    assert F.cross_entropy(x, _t([2, 7], device), ignore_index=7).item() == pytest.approx(np.log(3))


@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("bad,ignore,shown", [([-5, 9, 1], -5, "9"), ([2, -7, 5, 2], 2, "-7"), ([3, 4, 3], 3, "4"),
                                              ([-1, -2, 0], -1, "-2")])
def test_ignored_targets_are_skipped_by_the_check_and_the_others_reported(device, op, bad, ignore, shown):
    x = _t(np.zeros((len(bad), 4)), device)
    with pytest.raises(IndexError, match=rf"{op}: target {shown} is out of range \[0, 4\) for 4 classes "
                                         rf"\(ignore_index={ignore}\)"):
        getattr(F, op)(x, _t(bad, device), ignore_index=ignore).item()


@pytest.mark.parametrize("tdtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_every_integer_target_dtype_gives_the_same_loss_and_gradient(device, tdtype, reduction):
    """The kernels compare the targets with ignore_index themselves, in each target dtype: an ignore_index
    inside the class range (1) and outside it (9) both skip their rows; the caller's targets are unchanged."""
    a = np.random.default_rng(8).standard_normal((6, 5))
    for ignore, ta in ((1, np.array([1, 0, 4, 1, 2, 3])), (9, np.array([1, 0, 4, 9, 2, 9]))):
        valid = ta != ignore
        safe = np.where(valid, ta, 0)
        per = -_np_log_softmax(a)[np.arange(6), safe] * valid
        g = (np.exp(_np_log_softmax(a)) - np.eye(5)[safe]) * valid[:, None]
        want = per if reduction == "none" else per.sum()
        if reduction == "mean":
            want, g = want / valid.sum(), g / valid.sum()
        for op in ("cross_entropy", "nll_loss"):
            x = _t(a, device, requires_grad=True)
            t = _t(ta.astype(tdtype), device)
            inp = x if op == "cross_entropy" else F.log_softmax(x, 1)
            loss = getattr(F, op)(inp, t, ignore_index=ignore, reduction=reduction)
            loss.sum().backward()
            np.testing.assert_allclose(loss.numpy(), want, rtol=1e-12, atol=1e-14)
            np.testing.assert_allclose(x.grad.numpy(), g, rtol=1e-12, atol=1e-14)
            np.testing.assert_array_equal(t.numpy(), ta.astype(tdtype))
            assert t.dtype == np.dtype(tdtype)


def test_fused_cross_entropy_has_a_second_derivative_with_an_ignored_class(device):
    x = _t(np.random.default_rng(9).standard_normal((5, 3)), device, requires_grad=True)
    t = _t([0, 2, 1, 2, 1], device)
    assert ag.autograd.gradgradcheck(lambda a: F.cross_entropy(a, t, ignore_index=2), (x,))
    assert ag.autograd.gradgradcheck(lambda a: F.nll_loss(a, t, ignore_index=1, reduction="mean"), (x,))


def test_fused_cross_entropy_has_a_second_derivative(device):
    x = _t(np.random.default_rng(4).standard_normal((4, 3)), device, requires_grad=True)
    t = _t([0, 2, 1, -100], device)
    assert ag.autograd.gradcheck(lambda a: F.cross_entropy(a, t), (x,))
    assert ag.autograd.gradgradcheck(lambda a: F.cross_entropy(a, t), (x,))
    assert ag.autograd.gradgradcheck(lambda a: F.nll_loss(a, t, reduction="sum"), (x,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,dim", [((4, 6), 1), ((3, 1), 1), ((2, 3, 5), 2), ((5, 2), 0), ((0, 3), 1)], ids=str)
def test_softmax_and_log_softmax_match_numpy_forward_and_backward(device, dtype, shape, dim):
    rng = np.random.default_rng(5)
    xa = (4 * rng.standard_normal(shape)).astype(dtype)
    ga = rng.standard_normal(shape).astype(dtype)
    e = np.exp(xa - xa.max(axis=dim, keepdims=True)) if xa.size else xa
    p = e / e.sum(axis=dim, keepdims=True) if xa.size else xa
    logp = np.log(p) if xa.size else xa
    for f, y, gx in ((F.softmax, p, p * (ga - (ga * p).sum(axis=dim, keepdims=True))),
                     (F.log_softmax, logp, ga - p * ga.sum(axis=dim, keepdims=True))):
        x = _t(xa, device, requires_grad=True)
        out = f(x, dim)
        (out * _t(ga, device)).sum().backward()
        np.testing.assert_allclose(out.numpy(), y, **_tol(dtype))
        np.testing.assert_allclose(x.grad.numpy(), gx, **_tol(dtype))


def test_softmax_of_a_non_contiguous_input(device):
    a = np.random.default_rng(6).standard_normal((6, 4))
    x = _t(a, device).T
    np.testing.assert_allclose(F.softmax(x, 1).numpy(), F.softmax(_t(a.T.copy(), device), 1).numpy(), rtol=1e-14)


@pytest.mark.gpu
def test_cuda_cross_entropy_launches_few_kernels():
    from autograd_gpu.testing import cupy_standin
    if not cupy_standin.installed() or not hasattr(cupy_standin, "count_launches"):
        pytest.skip("counts the CuPy stand-in's launches (AG_CUDA=standin)")
    cuda = os.environ.get("AG_CUDA_DEVICE", "cuda")
    rng = np.random.default_rng(7)
    x = ag.tensor(rng.standard_normal((128, 10)).astype(np.float32), device=cuda, requires_grad=True)
    t = ag.tensor(rng.integers(0, 10, 128), device=cuda)
    F.cross_entropy(x, t).backward()                 # warm: constants made once
    with cupy_standin.count_launches() as fw:
        loss = F.cross_entropy(x, t)
    # the check: the key's max straight from the targets, the flag; the loss: row max, row sum of exp, count,
    # the reduction (no mask, no targets with the ignored ones at 0: the kernels compare with ignore_index)
    assert fw.launches <= 6, fw.names()
    with cupy_standin.count_launches() as bw:
        loss.backward()
    assert bw.names().get("ag_cross_entropy_bw") == 1 and bw.launches <= 3, bw.names()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_float16_losses_equal_the_cpu(device, reduction):
    """float16 logits take the composed twin on CUDA (CuPy's float16 has no arithmetic of its own, so the
    fused kernels' ``c ? h : 0`` would not compile): the same values and gradients as on the CPU, to two
    float16 ulps (CuPy sums float16 in float; NumPy rounds to float16 after each addition: on an H200 one
    element in five differed by an ulp)."""
    a = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float16)
    t = np.array([0, 1, 3, -100, 2])
    got, want = [], []
    for dev, out in ((device, got), ("cpu", want)):
        for loss in (lambda x, y: F.cross_entropy(x, y, reduction=reduction),
                     lambda x, y: F.nll_loss(F.log_softmax(x, 1), y, reduction=reduction)):
            x = ag.tensor(a, device=dev, requires_grad=True)
            val = loss(x, ag.tensor(t, device=dev))
            (val.sum() if reduction == "none" else val).backward()
            out += [val.numpy(), x.grad.numpy()]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2 ** -9, atol=2 ** -14)
