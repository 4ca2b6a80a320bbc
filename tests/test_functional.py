"""nn.functional beyond the op table: losses against explicit NumPy references, running statistics,
dropout's randomness, numerical stability, convolution against a direct loop, gradient routing, and
the errors users see. Every test runs on each device of the ``device`` fixture."""
import math
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F


def _t(a, device, requires_grad=False, dtype=None):
    return ag.tensor(np.asarray(a), dtype=dtype, device=device, requires_grad=requires_grad)


def _ce_loop_ref(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """PyTorch's documented cross entropy for class indices, one sample at a time."""
    n, c = x.shape
    w = np.ones(c) if weight is None else np.asarray(weight, float)
    losses, smooth, wsum = [], [], 0.0
    for i in range(n):
        if t[i] == ignore_index:
            losses.append(0.0)
            smooth.append(0.0)
            continue
        logp = x[i] - (x[i].max() + math.log(np.exp(x[i] - x[i].max()).sum()))
        losses.append(-w[t[i]] * logp[t[i]])
        smooth.append(-(w * logp).sum())
        wsum += w[t[i]]
    losses, smooth = np.array(losses), np.array(smooth)
    if reduction == "none":
        return (1 - label_smoothing) * losses + label_smoothing / c * smooth
    if reduction == "sum":
        return (1 - label_smoothing) * losses.sum() + label_smoothing / c * smooth.sum()
    return (1 - label_smoothing) * losses.sum() / wsum + label_smoothing / c * smooth.sum() / wsum


# --------------------------------------------------------------------------- cross entropy
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kw", [{}, {"weight": [0.2, 1.0, 3.0, 0.5, 1.5]}, {"ignore_index": 2},
                                {"label_smoothing": 0.25},
                                {"weight": [0.2, 1.0, 3.0, 0.5, 1.5], "ignore_index": 0, "label_smoothing": 0.1}])
def test_cross_entropy_matches_reference(device, reduction, kw):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 5))
    t = np.array([0, 2, 4, 1, 2, 3, 0, 4])
    args = dict(kw)
    if "weight" in args:
        args["weight"] = _t(args["weight"], device, dtype=ag.float64)
    got = F.cross_entropy(_t(x, device), _t(t, device), reduction=reduction, **args)
    np.testing.assert_allclose(got.numpy(), _ce_loop_ref(x, t, reduction=reduction, **kw), rtol=1e-10, atol=1e-12)


def test_cross_entropy_probability_targets(device):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3))
    p = rng.dirichlet(np.ones(3), 4)
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    got = F.cross_entropy(_t(x, device), _t(p, device))
    np.testing.assert_allclose(got.item(), -(p * logp).sum(1).mean(), rtol=1e-12)
    smoothed = F.cross_entropy(_t(x, device), _t(p, device), label_smoothing=0.3, reduction="sum")
    np.testing.assert_allclose(smoothed.item(), -((p * 0.7 + 0.1) * logp).sum(), rtol=1e-12)


def test_cross_entropy_gradient_is_softmax_minus_target(device):
    rng = np.random.default_rng(2)
    x = _t(rng.standard_normal((3, 4)), device, requires_grad=True)
    t = np.array([1, 0, 3])
    F.cross_entropy(x, _t(t, device), reduction="sum").backward()
    p = np.exp(x.numpy()) / np.exp(x.numpy()).sum(1, keepdims=True)
    np.testing.assert_allclose(x.grad.numpy(), p - np.eye(4)[t], rtol=1e-10, atol=1e-12)


@pytest.mark.gpu
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.device_index
def test_cross_entropy_on_the_second_gpu_while_the_first_is_current(weight):
    if not ag.cuda.is_available() or ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the stand-in's two)")
    rng = np.random.default_rng(2)
    x0, t0 = rng.standard_normal((3, 4)), np.array([1, 0, 3])
    w0 = rng.random(4) + 0.5 if weight else None
    grads = []
    for device in ("cpu", "cuda:1"):
        x = _t(x0, device, requires_grad=True)
        w = _t(w0, device) if weight else None
        with ag.cuda.device(0):
            loss = F.cross_entropy(x, _t(t0, device), weight=w, ignore_index=0)
            loss.backward()
        grads.append((loss.item(), x.grad.numpy()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-10)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-10, atol=1e-12)


def test_cross_entropy_spatial_targets_match_flattened(device):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    t = rng.integers(0, 3, (2, 4, 5))
    got = F.cross_entropy(_t(x, device), _t(t, device))
    flat = F.cross_entropy(_t(x.transpose(0, 2, 3, 1).reshape(-1, 3), device), _t(t.reshape(-1), device))
    assert got.dtype == ag.float32
    np.testing.assert_allclose(got.numpy(), flat.numpy(), rtol=1e-6)


def test_cross_entropy_all_targets_ignored_is_nan_like_pytorch(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        loss = F.cross_entropy(_t(np.zeros((2, 3)), device), _t([1, 1], device), ignore_index=1)
    assert math.isnan(loss.item())


def test_cross_entropy_target_out_of_range_raises(device):
    with pytest.raises(IndexError, match="cross_entropy: target 3 is out of range"):
        F.cross_entropy(_t(np.zeros((2, 3)), device), _t([0, 3], device)).item()   # a GPU raises at the read
    with pytest.raises(IndexError, match="target -1"):
        F.cross_entropy(_t(np.zeros((2, 3)), device), _t([0, -1], device)).item()


def test_cross_entropy_target_shape_mismatch_raises(device):
    x = _t(np.zeros((4, 3)), device)
    with pytest.raises(ValueError, match=r"cross_entropy: expected a target of shape \(4,\).*got \(3,\)"):
        F.cross_entropy(x, _t([0, 1, 2], device))
    with pytest.raises(ValueError, match=r"expected probability targets of the input's shape \(4, 3\)"):
        F.cross_entropy(x, _t(np.full((4, 2), 0.5), device))
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none'"):
        F.cross_entropy(x, _t([0, 1, 2, 0], device), reduction="avg")


def test_nll_loss_weighted_mean_divides_by_target_weights(device):
    logp = np.log(np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]]))
    w = np.array([1.0, 3.0])
    t = np.array([1, 0, 1])
    got = F.nll_loss(_t(logp, device), _t(t, device), weight=_t(w, device))
    want = -(3 * logp[0, 1] + 1 * logp[1, 0] + 3 * logp[2, 1]) / 7
    np.testing.assert_allclose(got.item(), want, rtol=1e-12)


# --------------------------------------------------------------------------- stability
def test_softmax_and_log_softmax_are_finite_for_huge_logits(device):
    x = _t(np.array([[1e4, 0.0, -1e4], [1e4, 1e4, 1e4]], np.float32), device, requires_grad=True)
    p, lp = F.softmax(x, dim=1), F.log_softmax(x, dim=1)
    assert np.isfinite(p.numpy()).all() and np.isfinite(lp.numpy()).all()
    np.testing.assert_allclose(p.numpy(), [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]], atol=1e-6)
    np.testing.assert_allclose(lp.numpy()[0], [0, -1e4, -2e4], rtol=1e-6)
    (lp[:, 0].sum() + p[:, 1].sum()).backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_cross_entropy_is_finite_for_huge_logits(device):
    x = _t(np.array([[1e4, -1e4, 0.0]], np.float32), device, requires_grad=True)
    loss = F.cross_entropy(x, _t([1], device))
    np.testing.assert_allclose(loss.item(), 2e4, rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1, -1, 0]], atol=1e-6)


def test_log_softmax_of_masked_entries(device):
    x = _t(np.array([[0.0, -np.inf, 1.0]]), device)
    lp = F.log_softmax(x, -1).numpy()
    assert lp[0, 1] == -np.inf and np.isfinite(lp[0, [0, 2]]).all()


def test_binary_cross_entropy_clamps_log_at_minus_100(device):
    x = _t([0.0, 1.0, 0.0, 1.0], device, requires_grad=True)
    t = _t([1.0, 0.0, 0.0, 1.0], device)
    loss = F.binary_cross_entropy(x, t, reduction="none")
    np.testing.assert_allclose(loss.numpy(), [100, 100, 0, 0], atol=1e-5)
    loss.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


def test_binary_cross_entropy_rejects_non_probabilities(device):
    with pytest.raises(ValueError, match="binary_cross_entropy: all elements of input should be probabilities"):
        F.binary_cross_entropy(_t([0.5, 1.5], device), _t([1.0, 0.0], device)).item()


def test_bce_with_logits_is_stable_and_matches_bce_of_sigmoid(device):
    z = np.array([-200.0, -3.0, 0.0, 2.0, 200.0])
    t = np.array([1.0, 0.0, 1.0, 0.5, 0.0])
    got = F.binary_cross_entropy_with_logits(_t(z, device), _t(t, device), reduction="none").numpy()
    np.testing.assert_allclose(got, np.logaddexp(0, z) - z * t, rtol=1e-12)
    mid = slice(1, 4)
    ref = F.binary_cross_entropy(F.sigmoid(_t(z[mid], device)), _t(t[mid], device), reduction="none")
    np.testing.assert_allclose(got[mid], ref.numpy(), rtol=1e-10)


# --------------------------------------------------------------------------- batch norm
def test_batch_norm_training_updates_running_stats_like_pytorch(device):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 3, 2, 2))
    rm, rv = _t(np.zeros(3), device), _t(np.ones(3), device)
    y = F.batch_norm(_t(x, device), rm, rv, training=True, momentum=0.2)
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    n = 6 * 2 * 2
    np.testing.assert_allclose(rm.numpy(), 0.2 * mean, rtol=1e-12)
    np.testing.assert_allclose(rv.numpy(), 0.8 + 0.2 * var * n / (n - 1), rtol=1e-12)   # unbiased
    want = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-10, atol=1e-12)


def test_batch_norm_eval_uses_running_stats(device):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 2))
    rm, rv = np.array([0.5, -1.0]), np.array([2.0, 0.25])
    w, b = np.array([1.5, -0.5]), np.array([0.1, 0.2])
    y = F.batch_norm(_t(x, device), _t(rm, device), _t(rv, device), _t(w, device), _t(b, device), eps=1e-3)
    np.testing.assert_allclose(y.numpy(), (x - rm) / np.sqrt(rv + 1e-3) * w + b, rtol=1e-12)


def test_batch_norm_errors(device):
    x = _t(np.zeros((1, 3)), device)
    with pytest.raises(ValueError, match="more than 1 value per channel when training"):
        F.batch_norm(x, None, None, training=True)
    with pytest.raises(ValueError, match="running_mean and running_var are required"):
        F.batch_norm(x, None, None, training=False)
    with pytest.raises(ValueError, match=r"expected running_mean of shape \(3,\)"):
        F.batch_norm(x, _t(np.zeros(2), device), _t(np.ones(3), device))


def test_layer_norm_shape_error(device):
    with pytest.raises(ValueError, match=r"layer_norm: expected an input whose trailing dims are normalized_shape \(4,\)"):
        F.layer_norm(_t(np.zeros((2, 3)), device), 4)


# --------------------------------------------------------------------------- dropout
def test_dropout_is_reproducible_with_manual_seed(device):
    x = ag.ones(1000, device=device)
    ag.manual_seed(123)
    a = F.dropout(x, 0.3).numpy()
    ag.manual_seed(123)
    b = F.dropout(x, 0.3).numpy()
    np.testing.assert_array_equal(a, b)
    kept = a[a != 0]
    np.testing.assert_allclose(kept, 1 / 0.7, rtol=1e-6)         # survivors scaled by 1 / (1 - p)
    assert 0.2 < (a == 0).mean() < 0.4


def test_dropout_identity_cases(device):
    x = _t(np.arange(6.0), device)
    assert F.dropout(x, 0.0) is x
    assert F.dropout(x, 0.9, training=False) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros(6))
    with pytest.raises(ValueError, match=r"dropout: expected a probability p in \[0, 1\]"):
        F.dropout(x, 1.5)


def test_dropout_gradient_is_the_scaled_mask(device):
    x = ag.ones(200, device=device, requires_grad=True)
    ag.manual_seed(0)
    y = F.dropout(x, 0.5)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.numpy())


# --------------------------------------------------------------------------- convolution and pooling
def _conv_loop(x, w, b, stride, padding, dilation, groups):
    """out[n, o, i, j] = b[o] + sum over c, ki, kj of xpad[n, c, i*s + ki*d, j*s + kj*d] * w[o, c, ki, kj]."""
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h - dilation * (kh - 1) - 1) // stride + 1
    ow = (wd - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for nn in range(n):
        for oo in range(o):
            g = oo // (o // groups)
            for i in range(oh):
                for j in range(ow):
                    s = b[oo]
                    for cc in range(cg):
                        for ki in range(kh):
                            for kj in range(kw):
                                s += x[nn, g * cg + cc, i * stride + ki * dilation, j * stride + kj * dilation] * w[oo, cc, ki, kj]
                    out[nn, oo, i, j] = s
    return out


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, 1, 1, 2)])
def test_conv2d_matches_direct_loop(device, stride, padding, dilation, groups):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 4, 6, 7))
    w = rng.standard_normal((4, 4 // groups, 3, 2))
    b = rng.standard_normal(4)
    got = F.conv2d(_t(x, device), _t(w, device), _t(b, device), stride, padding, dilation, groups)
    np.testing.assert_allclose(got.numpy(), _conv_loop(x, w, b, stride, padding, dilation, groups), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_weight_gradient_without_kept_columns(device, monkeypatch, stride):
    from autograd_gpu.ops import conv
    rng = np.random.default_rng(10)
    x, w = rng.standard_normal((2, 3, 6, 6)), rng.standard_normal((4, 3, 3, 3))
    grads = []
    for limit in (1 << 30, 0):              # columns kept for backward, then recomputed there
        monkeypatch.setattr(conv, "_KEEP_COLS_BYTES", limit)
        wt = _t(w, device, requires_grad=True)
        F.conv2d(_t(x, device), wt, stride=stride, padding=1).sum().backward()
        grads.append(wt.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12)


def test_conv2d_keeps_float32(device):
    x = ag.randn(2, 3, 8, 8, device=device, requires_grad=True)
    w = ag.randn(4, 3, 3, 3, device=device, requires_grad=True)
    y = F.conv2d(x, w, padding=1)
    y.sum().backward()
    assert y.dtype == x.grad.dtype == w.grad.dtype == ag.float32


def test_conv1d_equals_conv2d_over_unit_height(device):
    rng = np.random.default_rng(7)
    x, w = rng.standard_normal((2, 3, 9)), rng.standard_normal((5, 3, 3))
    y1 = F.conv1d(_t(x, device), _t(w, device), stride=2, padding=1)
    y2 = F.conv2d(_t(x[:, :, None], device), _t(w[:, :, None], device), stride=(1, 2), padding=(0, 1))
    np.testing.assert_allclose(y1.numpy(), y2.numpy()[:, :, 0])


def test_conv2d_second_derivative_through_a_small_cnn(device):
    rng = np.random.default_rng(8)
    x = _t(rng.standard_normal((1, 2, 5, 5)), device, requires_grad=True)
    w = _t(rng.standard_normal((2, 2, 3, 3)), device, requires_grad=True)

    def f(x, w):
        return F.max_pool2d(ag.tanh(F.conv2d(x, w, padding=1)), 2).sum(dim=(1, 2, 3))

    assert ag.autograd.gradgradcheck(f, (x, w))


def test_conv2d_shape_errors(device):
    w = _t(np.zeros((4, 3, 3, 3)), device)
    with pytest.raises(ValueError, match=r"conv2d: expected a 4-D input \(N, C, H, W\) or a 3-D unbatched one, got shape \(3, 8\)"):
        F.conv2d(_t(np.zeros((3, 8)), device), w)
    with pytest.raises(ValueError, match=r"conv2d: expected input with 3 channels .* got 2 channels"):
        F.conv2d(_t(np.zeros((1, 2, 8, 8)), device), w)
    with pytest.raises(ValueError, match=r"conv2d: expected a 4-D weight"):
        F.conv2d(_t(np.zeros((1, 3, 8, 8)), device), _t(np.zeros((4, 3, 3)), device))
    with pytest.raises(ValueError, match="smaller than the dilated kernel"):
        F.conv2d(_t(np.zeros((1, 3, 2, 2)), device), w)
    with pytest.raises(ValueError, match="out_channels \\(4\\) must be divisible by groups \\(3\\)"):
        F.conv2d(_t(np.zeros((1, 3, 5, 5)), device), _t(np.zeros((4, 1, 3, 3)), device), groups=3)
    with pytest.raises(ValueError, match="padding='same' is not supported for strided"):
        F.conv2d(_t(np.zeros((1, 3, 5, 5)), device), w, stride=2, padding="same")


def test_max_pool2d_routes_gradient_to_first_max_and_accumulates(device):
    x = _t(np.zeros((1, 1, 3, 3)), device, requires_grad=True)
    F.max_pool2d(x, 2, stride=1).sum().backward()      # all ties: each window picks its top-left
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    x = _t(np.array([[[[0, 0, 0], [0, 5, 0], [0, 0, 0]]]], float), device, requires_grad=True)
    F.max_pool2d(x, 2, stride=1).sum().backward()      # one maximum shared by four windows
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], [[0, 0, 0], [0, 4, 0], [0, 0, 0]])


def test_max_pool2d_return_indices(device):
    x = _t(np.array([[[[1, 9, 2, 0], [3, 4, 8, 7]]]], float), device)
    y, idx = F.max_pool2d(x, 2, return_indices=True)
    np.testing.assert_array_equal(y.numpy(), [[[[9, 8]]]])
    np.testing.assert_array_equal(idx.numpy(), [[[[1, 6]]]])
    assert idx.dtype == ag.int64


def test_pooling_errors(device):
    with pytest.raises(RuntimeError, match="max_pool2d: expected a 4-D input"):
        F.max_pool2d(_t(np.zeros((4, 4)), device), 2)
    with pytest.raises(ValueError, match="padding should be at most half the kernel size"):
        F.max_pool2d(_t(np.zeros((1, 1, 4, 4)), device), 2, padding=2)
    with pytest.raises(ValueError, match="too small for kernel"):
        F.avg_pool2d(_t(np.zeros((1, 1, 2, 2)), device), 3)


def test_avg_pool2d_counts_padding_by_default(device):
    x = _t(np.ones((1, 1, 2, 2)), device)
    np.testing.assert_allclose(F.avg_pool2d(x, 2, padding=1).numpy()[0, 0], [[0.25, 0.25], [0.25, 0.25]])
    np.testing.assert_allclose(F.avg_pool2d(x, 2, padding=1, count_include_pad=False).numpy()[0, 0], np.ones((2, 2)))


# --------------------------------------------------------------------------- linear, embedding, one_hot, activations
def test_linear_folds_leading_dims(device):
    rng = np.random.default_rng(9)
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((5, 4)), rng.standard_normal(5)
    xt, wt, bt = _t(x, device, True), _t(w, device, True), _t(b, device, True)
    y = F.linear(xt, wt, bt)
    np.testing.assert_allclose(y.numpy(), x @ w.T + b, rtol=1e-12)
    y.sum().backward()
    np.testing.assert_allclose(bt.grad.numpy(), np.full(5, 6.0))
    np.testing.assert_allclose(wt.grad.numpy(), np.broadcast_to(x.reshape(-1, 4).sum(0), (5, 4)), rtol=1e-12)
    with pytest.raises(ValueError, match=r"linear: input of shape \(2, 3, 4\) has 4 features but the weight of shape \(5, 3\) expects 3"):
        F.linear(xt, _t(np.zeros((5, 3)), device))


def test_embedding_gradient_accumulates_and_skips_padding_idx(device):
    w = _t(np.arange(12.0).reshape(4, 3), device, requires_grad=True)
    idx = _t([[0, 2, 2], [1, 0, 2]], device)
    y = F.embedding(idx, w, padding_idx=0)
    np.testing.assert_array_equal(y.numpy()[0, 1], [6, 7, 8])
    y.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy()[:, 0], [0, 1, 3, 0])
    with pytest.raises(IndexError, match=r"embedding: index 4 is out of range \[0, 4\)"):
        F.embedding(_t([4], device), w).numpy()
    with pytest.raises(TypeError, match="embedding: expected input of an integer dtype"):
        F.embedding(_t([1.0], device), w)


def test_one_hot(device):
    y = F.one_hot(_t([2, 0, 1], device))
    assert y.dtype == ag.int64 and not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), np.eye(3, dtype=np.int64)[[2, 0, 1]])
    assert F.one_hot(_t([[1]], device), num_classes=4).shape == (1, 1, 4)
    with pytest.raises(ValueError, match=r"one_hot: class value 2 is out of range \[0, 2\)"):
        F.one_hot(_t([2], device), 2).numpy()


def test_activation_reexports_and_inplace(device):
    x = _t([-1.0, 2.0], device)
    np.testing.assert_array_equal(F.relu(x).numpy(), [0, 2])
    np.testing.assert_allclose(F.leaky_relu(x, 0.1).numpy(), [-0.1, 2])
    assert F.relu(x, inplace=True) is x and x.numpy().tolist() == [0.0, 2.0]
    for f in (F.gelu, F.silu, F.sigmoid, F.tanh, F.elu, F.softplus):
        assert f(x).shape == (2,)


def test_mse_and_l1_warn_on_broadcast(device):
    with pytest.warns(UserWarning, match="target size"):
        F.mse_loss(_t(np.zeros((3, 1)), device), _t(np.zeros(3), device))
    np.testing.assert_allclose(F.l1_loss(_t([1.0, -2.0], device), _t([0.0, 0.0], device), reduction="sum").item(), 3.0)


def test_losses_with_every_target_ignored_are_nan_with_zero_gradients():
    import warnings
    x = ag.tensor(np.zeros((2, 3)), requires_grad=True)
    t = ag.tensor(np.array([-100, -100]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for loss in (F.cross_entropy(x, t), F.nll_loss(x, t), F.cross_entropy(x, t, label_smoothing=0.1)):
            x.grad = None
            loss.backward()
            assert np.isnan(loss.item()) and x.grad.tolist() == [[0.0] * 3] * 2


def test_binary_cross_entropy_rejects_nan_probabilities():
    with pytest.raises(ValueError, match="probabilities in \\[0, 1\\]"):
        F.binary_cross_entropy(ag.tensor([np.nan, 0.5]), ag.tensor([1.0, 0.0]))


def test_max_pool_window_of_minus_inf_routes_the_gradient_to_an_input():
    x = ag.tensor(np.full((1, 1, 2, 2), -np.inf), requires_grad=True)
    y, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    y.sum().backward()
    assert idx.tolist() == [[[[0]]]] and x.grad.numpy().ravel().tolist() == [1.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"}, {"ignore_index": 1}])
def test_cross_entropy_equals_log_softmax_then_nll_loss_exactly(device, kw):
    # cross_entropy's common case runs as one fused node; loss, gradient and gradient of the gradient
    # must be those of the two ops it fuses, bit for bit
    rng = np.random.default_rng(5)
    xa, t = rng.standard_normal((20, 6)), _t(rng.integers(0, 6, 20), device)
    results = []
    for fused in (True, False):
        x = _t(xa, device, requires_grad=True)
        loss = F.cross_entropy(x, t, **kw) if fused else F.nll_loss(F.log_softmax(x, 1), t, **kw)
        g, = ag.autograd.grad(loss.sum(), x, create_graph=True)
        gg, = ag.autograd.grad((g * g).sum(), x)
        results.append([loss.numpy(), g.numpy(), gg.numpy()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
