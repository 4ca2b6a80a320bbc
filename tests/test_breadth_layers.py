"""The structural functional ops and layers of the breadth issue against PyTorch (where torch is installed):
conv_transpose1d/2d, conv3d, group/instance/RMS/local-response norms, interpolate, pad, pixel (un)shuffle,
unfold/fold, the adaptive pools, grid_sample/affine_grid, embedding_bag and the channel dropouts: values and
gradients of every input on each device; each layer with a PyTorch state dict loaded by name, then forward and
backward against PyTorch's, and its default parameters' shapes and initialisation ranges."""
import math

import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn as nn
import autograd_gpu.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _compare(ag_fn, torch_fn, arrays, device, rtol=1e-9, atol=1e-9, ints=()):
    """Value and the gradient of sum(y * g) of each float input, float64, on ``device``."""
    rng = np.random.default_rng(0)
    ts = [torch.tensor(a, requires_grad=i not in ints) if i not in ints else torch.tensor(a)
          for i, a in enumerate(arrays)]
    xs = [ag.tensor(a, device=device, requires_grad=i not in ints) for i, a in enumerate(arrays)]
    ref = torch_fn(*ts)
    got = ag_fn(*xs)
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol)
    g = rng.standard_normal(ref.shape)
    (ref * torch.tensor(g)).sum().backward()
    (got * ag.tensor(g, device=device)).sum().backward()
    for i, (t, x) in enumerate(zip(ts, xs)):
        if i in ints:
            continue
        if x.grad is None:          # no path to this input (grid_sample's nearest grid): PyTorch's zeros
            assert not t.grad.numpy().any(), f"input {i}"
            continue
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"input {i}")


def _r(*shape, seed=0):
    return np.random.default_rng(seed + len(shape)).standard_normal(shape)


CASES = {
    "conv_transpose2d": (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                         lambda x, w, b: TF.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                         [_r(2, 4, 5, 6), _r(4, 3, 3, 3), _r(3)]),
    "conv_transpose2d_groups_dilation": (
        lambda x, w: F.conv_transpose2d(x, w, stride=(3, 2), padding=(0, 2), output_padding=(2, 1), groups=2,
                                        dilation=(1, 2)),
        lambda x, w: TF.conv_transpose2d(x, w, stride=(3, 2), padding=(0, 2), output_padding=(2, 1), groups=2,
                                         dilation=(1, 2)),
        [_r(2, 4, 3, 4), _r(4, 3, 2, 3)]),
    "conv_transpose1d": (lambda x, w, b: F.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2, dilation=2),
                         lambda x, w, b: TF.conv_transpose1d(x, w, b, stride=3, padding=1, output_padding=2,
                                                             dilation=2),
                         [_r(2, 3, 5), _r(3, 2, 3), _r(2)]),
    "conv3d": (lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2),
               lambda x, w, b: TF.conv3d(x, w, b, stride=(1, 2, 1), padding=(1, 0, 1), dilation=(2, 1, 1), groups=2),
               [_r(2, 4, 5, 6, 4), _r(6, 2, 2, 3, 2), _r(6)]),
    "conv3d_same": (lambda x, w: F.conv3d(x, w, padding="same"), lambda x, w: TF.conv3d(x, w, padding="same"),
                    [_r(1, 2, 4, 5, 3), _r(3, 2, 2, 3, 2)]),
    "group_norm": (lambda x, w, b: F.group_norm(x, 3, w, b), lambda x, w, b: TF.group_norm(x, 3, w, b),
                   [_r(2, 6, 4, 3), _r(6), _r(6)]),
    "instance_norm": (lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
                      lambda x, w, b: TF.instance_norm(x, weight=w, bias=b), [_r(2, 3, 5, 4), _r(3), _r(3)]),
    "rms_norm": (lambda x, w: F.rms_norm(x, (5,), w), lambda x, w: TF.rms_norm(x, (5,), w), [_r(3, 4, 5), _r(5)]),
    "rms_norm_eps": (lambda x: F.rms_norm(x, (4, 5), eps=1e-3), lambda x: TF.rms_norm(x, (4, 5), eps=1e-3),
                     [_r(3, 4, 5)]),
    "local_response_norm": (lambda x: F.local_response_norm(x, 3, 0.1, 0.6, 1.5),
                            lambda x: TF.local_response_norm(x, 3, 0.1, 0.6, 1.5), [_r(2, 6, 3, 4)]),
    "local_response_norm_3d": (lambda x: F.local_response_norm(x, 4), lambda x: TF.local_response_norm(x, 4),
                               [_r(2, 5, 7)]),
    "pad_reflect": (lambda x: F.pad(x, (2, 1, 3, 0), mode="reflect"), lambda x: TF.pad(x, (2, 1, 3, 0), mode="reflect"),
                    [_r(2, 3, 4, 5)]),
    "pad_replicate": (lambda x: F.pad(x, (2, 3), mode="replicate"), lambda x: TF.pad(x, (2, 3), mode="replicate"),
                      [_r(2, 3, 4)]),
    "pad_circular": (lambda x: F.pad(x, (1, 2, 2, 1), mode="circular"),
                     lambda x: TF.pad(x, (1, 2, 2, 1), mode="circular"), [_r(1, 2, 3, 4)]),
    "pad_constant": (lambda x: F.pad(x, (1, -1, 0, 2, 1, 1), value=0.5),
                     lambda x: TF.pad(x, (1, -1, 0, 2, 1, 1), value=0.5), [_r(2, 3, 4)]),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 3), lambda x: TF.pixel_shuffle(x, 3), [_r(2, 18, 2, 3)]),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), lambda x: TF.pixel_unshuffle(x, 2), [_r(2, 3, 4, 6)]),
    "unfold": (lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
               lambda x: TF.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [_r(2, 3, 5, 6)]),
    "fold": (lambda x: F.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
             lambda x: TF.fold(x, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [_r(2, 18, 12)]),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 4), lambda x: TF.adaptive_avg_pool1d(x, 4),
                            [_r(2, 3, 7)]),
    "adaptive_max_pool2d": (lambda x: F.adaptive_max_pool2d(x, (3, 2)), lambda x: TF.adaptive_max_pool2d(x, (3, 2)),
                            [_r(2, 3, 7, 5)]),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2, 1), lambda x: TF.max_pool1d(x, 3, 2, 1), [_r(2, 3, 8)]),
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1, count_include_pad=False),
                   lambda x: TF.avg_pool1d(x, 3, 2, 1, count_include_pad=False), [_r(2, 3, 8)]),
    "affine_grid": (lambda t: F.affine_grid(t, (2, 3, 4, 5), align_corners=False),
                    lambda t: TF.affine_grid(t, (2, 3, 4, 5), align_corners=False), [_r(2, 2, 3)]),
    "embedding_bag_sum_weights": (
        lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
        lambda w, i, o, p: TF.embedding_bag(i, w, o, mode="sum", per_sample_weights=p),
        [_r(7, 3), np.array([1, 2, 4, 5, 4, 3, 2]), np.array([0, 2, 2, 5]), _r(7)], 1e-9, 1e-9, (1, 2)),
    "embedding_bag_mean_padding": (
        lambda w, i: F.embedding_bag(i, w, padding_idx=2), lambda w, i: TF.embedding_bag(i, w, padding_idx=2),
        [_r(5, 4), np.array([[0, 2, 1], [2, 2, 2], [4, 3, 2]])], 1e-9, 1e-9, (1,)),
    "embedding_bag_max": (
        lambda w, i, o: F.embedding_bag(i, w, o, mode="max", include_last_offset=True),
        lambda w, i, o: TF.embedding_bag(i, w, o, mode="max", include_last_offset=True),
        [_r(6, 3), np.array([1, 0, 5, 3, 2]), np.array([0, 3, 3, 5])], 1e-9, 1e-9, (1, 2)),
}
for _mode in ("nearest", "bilinear", "bicubic"):
    for _ac in ((None,) if _mode == "nearest" else (False, True)):
        for _kw in ({"size": (7, 3)}, {"scale_factor": 1.7}, {"scale_factor": (2, 0.5)}):
            def _a(x, m=_mode, ac=_ac, kw=_kw):
                return F.interpolate(x, mode=m, align_corners=ac, **kw)

            def _t(x, m=_mode, ac=_ac, kw=_kw):
                return TF.interpolate(x, mode=m, align_corners=ac, **kw)
            CASES[f"interpolate_{_mode}_{_ac}_{'_'.join(map(str, _kw))}"] = (_a, _t, [_r(2, 3, 5, 4)])
CASES["interpolate_linear"] = (lambda x: F.interpolate(x, size=9, mode="linear", align_corners=True),
                               lambda x: TF.interpolate(x, size=9, mode="linear", align_corners=True), [_r(2, 3, 5)])
CASES["interpolate_nearest_1d"] = (lambda x: F.interpolate(x, scale_factor=2.5), lambda x: TF.interpolate(
    x, scale_factor=2.5), [_r(2, 3, 5)])
for _mode in ("bilinear", "nearest"):
    for _pm in ("zeros", "border", "reflection"):
        for _ac in (False, True):
            def _a(x, g, m=_mode, pm=_pm, ac=_ac):
                return F.grid_sample(x, g * 1.3, mode=m, padding_mode=pm, align_corners=ac)

            def _t(x, g, m=_mode, pm=_pm, ac=_ac):
                return TF.grid_sample(x, g * 1.3, mode=m, padding_mode=pm, align_corners=ac)
            CASES[f"grid_sample_{_mode}_{_pm}_{_ac}"] = (_a, _t, [_r(2, 3, 4, 5), np.clip(_r(2, 3, 6, 2), -1.2, 1.2)])


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_matches_pytorch(name, device):
    fn, tfn, arrays, *rest = CASES[name]
    _compare(fn, tfn, arrays, device, *rest)


def test_conv_transpose2d_is_the_adjoint_of_conv2d(device):
    x = ag.tensor(_r(2, 3, 7, 6), device=device)
    w = ag.tensor(_r(4, 3, 3, 2), device=device)
    y = ag.tensor(_r(2, 4, 4, 3), device=device)
    kw = dict(stride=2, padding=1, dilation=(1, 2))
    lhs = (F.conv2d(x, w, **kw) * y).sum().item()
    rhs = (x * F.conv_transpose2d(y, w, output_padding=(0, 1), **kw)).sum().item()
    assert math.isclose(lhs, rhs, rel_tol=1e-9)


def test_unfold_fold_round_trip_counts_overlaps(device):
    x = ag.ones((1, 2, 4, 4), device=device)
    cnt = F.fold(F.unfold(x, 2, stride=1), (4, 4), 2, stride=1)
    ref = TF.fold(TF.unfold(torch.ones(1, 2, 4, 4), 2), (4, 4), 2)
    np.testing.assert_allclose(cnt.numpy(), ref.numpy())


def test_adaptive_max_pool2d_indices(device):
    a = _r(2, 3, 7, 5)
    y, i = F.adaptive_max_pool2d(ag.tensor(a, device=device), (3, 2), return_indices=True)
    ty, ti = TF.adaptive_max_pool2d(torch.tensor(a), (3, 2), return_indices=True)
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


def test_channel_dropout_masks_whole_channels(device):
    ag.manual_seed(0)
    x = ag.ones((4, 8, 3, 5), device=device)
    y = F.dropout2d(x, 0.5).numpy()
    per_channel = y.reshape(4, 8, -1)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    assert 0 < (per_channel == 0).all(-1).sum() < 32
    y1 = F.dropout1d(ag.ones((6, 10, 7), device=device), 0.3).numpy()
    assert np.all((y1 == 0).all(-1) | np.isclose(y1, 1 / 0.7).all(-1))
    np.testing.assert_array_equal(F.dropout2d(x, 0.5, training=False).numpy(), x.numpy())


def test_alpha_dropout_keeps_selu_statistics(device):
    ag.manual_seed(1)
    x = ag.tensor(np.random.default_rng(0).standard_normal(200000), device=device)
    y = F.alpha_dropout(x, 0.2, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    alpha, p = 1.7580993408473766, 0.2
    dropped = np.isclose(y, alpha * (p - 1) / math.sqrt((alpha * alpha * p + 1) * (1 - p)))
    assert 0.18 < dropped.mean() < 0.22
    np.testing.assert_array_equal(F.alpha_dropout(x, 0.2).numpy(), x.numpy())     # training=False by default


@pytest.mark.parametrize("bad, match", [
    (lambda: F.pad(ag.zeros((2, 3)), (3, 0), mode="reflect"), "smaller than the padded dim"),
    (lambda: F.pad(ag.zeros((2, 3)), (1,)), "even number"),
    (lambda: F.interpolate(ag.zeros((1, 1, 3)), size=4, mode="bilinear"), "4-D input"),
    (lambda: F.interpolate(ag.zeros((1, 1, 3)), size=4, align_corners=True), "align_corners"),
    (lambda: F.interpolate(ag.zeros((1, 1, 3)), size=4, scale_factor=2), "exactly one"),
    (lambda: F.conv_transpose2d(ag.zeros((1, 3, 4, 4)), ag.zeros((2, 2, 3, 3))), "in_channels = 3"),
    (lambda: F.conv_transpose2d(ag.zeros((1, 2, 4, 4)), ag.zeros((2, 2, 3, 3)), stride=2, output_padding=2),
     "output_padding"),
    (lambda: F.group_norm(ag.zeros((2, 6, 3)), 4), "dividing the 6 channels"),
    (lambda: F.rms_norm(ag.zeros((2, 6)), (5,)), "normalized_shape"),
    (lambda: F.fold(ag.zeros((1, 8, 5)), (4, 4), 2), "blocks"),
    (lambda: F.grid_sample(ag.zeros((1, 1, 3, 3)), ag.zeros((1, 2, 2, 3))), "grid"),
    (lambda: F.embedding_bag(ag.tensor([0, 1]), ag.zeros((3, 2)), mode="median"), "mode"),
    (lambda: F.pixel_shuffle(ag.zeros((1, 5, 2, 2)), 2), r"C \* 4"),
])
def test_bad_arguments_name_what_was_expected(bad, match):
    with pytest.raises((ValueError, TypeError, NotImplementedError), match=match):
        bad()


# --------------------------------------------------------------------------- layers
def _load(mod, tmod, device):
    sd = {k: ag.tensor(v.detach().numpy(), device=device) for k, v in tmod.state_dict().items()}
    assert set(sd) == set(mod.state_dict()), (sorted(sd), sorted(mod.state_dict()))
    for k, v in mod.state_dict().items():
        assert tuple(v.shape) == tuple(sd[k].shape), k
    mod.load_state_dict(sd)
    return mod.to(device)


LAYERS = {
    "ConvTranspose2d": (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                        lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                        [(2, 4, 5, 5)]),
    "ConvTranspose1d": (lambda: nn.ConvTranspose1d(3, 2, 4, stride=2), lambda: torch.nn.ConvTranspose1d(3, 2, 4, stride=2),
                        [(2, 3, 6)]),
    "Conv3d": (lambda: nn.Conv3d(2, 4, (2, 3, 3), padding=1), lambda: torch.nn.Conv3d(2, 4, (2, 3, 3), padding=1),
               [(2, 2, 3, 5, 4)]),
    "GroupNorm": (lambda: nn.GroupNorm(2, 6), lambda: torch.nn.GroupNorm(2, 6), [(3, 6, 4, 2)]),
    "InstanceNorm1d": (lambda: nn.InstanceNorm1d(3, affine=True), lambda: torch.nn.InstanceNorm1d(3, affine=True),
                       [(2, 3, 7)]),
    "InstanceNorm2d": (lambda: nn.InstanceNorm2d(3, track_running_stats=True),
                       lambda: torch.nn.InstanceNorm2d(3, track_running_stats=True), [(2, 3, 4, 5)]),
    "RMSNorm": (lambda: nn.RMSNorm(8), lambda: torch.nn.RMSNorm(8), [(2, 5, 8)]),
    "LocalResponseNorm": (lambda: nn.LocalResponseNorm(3), lambda: torch.nn.LocalResponseNorm(3), [(2, 5, 3, 3)]),
    "Upsample": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"),
                 lambda: torch.nn.Upsample(scale_factor=2, mode="bilinear"), [(1, 2, 3, 4)]),
    "PixelShuffle": (lambda: nn.PixelShuffle(2), lambda: torch.nn.PixelShuffle(2), [(1, 8, 2, 3)]),
    "PixelUnshuffle": (lambda: nn.PixelUnshuffle(2), lambda: torch.nn.PixelUnshuffle(2), [(1, 2, 4, 6)]),
    "Unfold": (lambda: nn.Unfold(2, padding=1), lambda: torch.nn.Unfold(2, padding=1), [(2, 3, 4, 4)]),
    "Fold": (lambda: nn.Fold((4, 5), 2), lambda: torch.nn.Fold((4, 5), 2), [(2, 8, 12)]),
    "AdaptiveAvgPool1d": (lambda: nn.AdaptiveAvgPool1d(3), lambda: torch.nn.AdaptiveAvgPool1d(3), [(2, 3, 8)]),
    "AdaptiveMaxPool2d": (lambda: nn.AdaptiveMaxPool2d((2, 3)), lambda: torch.nn.AdaptiveMaxPool2d((2, 3)),
                          [(2, 3, 5, 7)]),
    "MaxPool1d": (lambda: nn.MaxPool1d(2), lambda: torch.nn.MaxPool1d(2), [(2, 3, 8)]),
    "AvgPool1d": (lambda: nn.AvgPool1d(3, 1, 1), lambda: torch.nn.AvgPool1d(3, 1, 1), [(2, 3, 8)]),
    "Unflatten": (lambda: nn.Unflatten(1, (2, -1)), lambda: torch.nn.Unflatten(1, (2, -1)), [(3, 8)]),
    "ZeroPad2d": (lambda: nn.ZeroPad2d((1, 2, 0, 1)), lambda: torch.nn.ZeroPad2d((1, 2, 0, 1)), [(1, 2, 3, 3)]),
    "ConstantPad1d": (lambda: nn.ConstantPad1d(2, 3.5), lambda: torch.nn.ConstantPad1d(2, 3.5), [(2, 3, 4)]),
    "ConstantPad2d": (lambda: nn.ConstantPad2d((1, 0, 2, 1), -1.0), lambda: torch.nn.ConstantPad2d((1, 0, 2, 1), -1.0),
                      [(2, 3, 4)]),
    "ReflectionPad1d": (lambda: nn.ReflectionPad1d((2, 1)), lambda: torch.nn.ReflectionPad1d((2, 1)), [(2, 3, 4)]),
    "ReflectionPad2d": (lambda: nn.ReflectionPad2d(2), lambda: torch.nn.ReflectionPad2d(2), [(1, 2, 3, 4)]),
    "ReplicationPad2d": (lambda: nn.ReplicationPad2d((3, 0, 1, 2)), lambda: torch.nn.ReplicationPad2d((3, 0, 1, 2)),
                         [(1, 2, 3, 4)]),
    "CircularPad2d": (lambda: nn.CircularPad2d(1), lambda: torch.nn.CircularPad2d(1), [(1, 2, 3, 4)]),
    "Dropout1d": (lambda: nn.Dropout1d(0.3).eval(), lambda: torch.nn.Dropout1d(0.3).eval(), [(2, 3, 4)]),
    "Dropout2d": (lambda: nn.Dropout2d(0.3).eval(), lambda: torch.nn.Dropout2d(0.3).eval(), [(2, 3, 4, 2)]),
    "AlphaDropout": (lambda: nn.AlphaDropout(0.3).eval(), lambda: torch.nn.AlphaDropout(0.3).eval(), [(2, 3)]),
    "Bilinear": (lambda: nn.Bilinear(3, 4, 5), lambda: torch.nn.Bilinear(3, 4, 5), [(6, 3), (6, 4)]),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_layer_with_pytorch_state_dict_matches_pytorch(name, device):
    make, tmake, shapes = LAYERS[name]
    torch.manual_seed(0)
    tmod = tmake().double()
    mod = make()
    mod = _load(mod.to(dtype=ag.float64) if hasattr(mod, "to") else mod, tmod, device)
    arrays = [_r(*s, seed=i) for i, s in enumerate(shapes)]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    xs = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    ref, got = tmod(*ts), mod(*xs)
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-9, atol=1e-9)
    g = _r(*ref.shape, seed=7)
    (ref * torch.tensor(g)).sum().backward()
    (got * ag.tensor(g, device=device)).sum().backward()
    for t, x in zip(ts, xs):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-9, atol=1e-9)
    tparams = dict(tmod.named_parameters())
    for k, p in mod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tparams[k].grad.numpy(), rtol=1e-9, atol=1e-9, err_msg=k)
    for k, b in tmod.named_buffers():           # running statistics updated as PyTorch's
        np.testing.assert_allclose(dict(mod.named_buffers())[k].numpy(), b.numpy(), rtol=1e-9, atol=1e-9)


def test_embedding_bag_layer_matches_pytorch(device):
    torch.manual_seed(0)
    tmod = torch.nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0).double()
    mod = _load(nn.EmbeddingBag(10, 4, mode="sum", padding_idx=0).to(dtype=ag.float64), tmod, device)
    idx, off = np.array([1, 0, 4, 9, 9, 2]), np.array([0, 3, 3])
    ref = tmod(torch.tensor(idx), torch.tensor(off))
    got = mod(ag.tensor(idx, device=device), ag.tensor(off, device=device))
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-12)
    ref.sum().backward()
    got.sum().backward()
    np.testing.assert_allclose(mod.weight.grad.numpy(), tmod.weight.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("make, tmake", [
    (lambda: nn.ConvTranspose2d(6, 4, (3, 2), groups=2), lambda: torch.nn.ConvTranspose2d(6, 4, (3, 2), groups=2)),
    (lambda: nn.ConvTranspose1d(5, 3, 4), lambda: torch.nn.ConvTranspose1d(5, 3, 4)),
    (lambda: nn.Conv3d(4, 6, 3, groups=2, bias=False), lambda: torch.nn.Conv3d(4, 6, 3, groups=2, bias=False)),
    (lambda: nn.GroupNorm(3, 6, affine=False), lambda: torch.nn.GroupNorm(3, 6, affine=False)),
    (lambda: nn.InstanceNorm2d(4, affine=True, track_running_stats=True),
     lambda: torch.nn.InstanceNorm2d(4, affine=True, track_running_stats=True)),
    (lambda: nn.RMSNorm((3, 4), elementwise_affine=True), lambda: torch.nn.RMSNorm((3, 4))),
    (lambda: nn.EmbeddingBag(7, 3), lambda: torch.nn.EmbeddingBag(7, 3)),
    (lambda: nn.Bilinear(4, 9, 2), lambda: torch.nn.Bilinear(4, 9, 2)),
])
def test_default_parameters_have_pytorchs_names_shapes_and_ranges(make, tmake):
    mod, tmod = make(), tmake()
    mine = {k: v.numpy() for k, v in mod.state_dict().items()}
    theirs = {k: v.detach().numpy() for k, v in tmod.state_dict().items()}
    assert {k: v.shape for k, v in mine.items()} == {k: v.shape for k, v in theirs.items()}
    for k, v in theirs.items():
        if v.size > 1 and v.dtype.kind == "f":
            lo, hi = v.min(), v.max()
            if lo == hi:                                    # constant init (norm weights ones, biases zeros)
                np.testing.assert_array_equal(mine[k], v, err_msg=k)
            elif k == "weight" and isinstance(mod, nn.EmbeddingBag):     # N(0, 1)
                assert abs(mine[k].std() - 1) < 0.5
            else:                                           # uniform on PyTorch's bound
                bound = max(abs(lo), abs(hi))
                assert np.abs(mine[k]).max() <= bound * 1.15, k
                assert v.size < 16 or np.abs(mine[k]).max() > bound * 0.5, k


VMAP = {
    "conv_transpose2d": lambda a, w: F.conv_transpose2d(a, w, stride=2, padding=1),
    "conv3d": lambda a, w: F.conv3d(a.unsqueeze(2), w.unsqueeze(2).transpose(0, 1)),
    "group_norm": lambda a, w: F.group_norm(a, 2),
    "rms_norm": lambda a, w: F.rms_norm(a, (6,)),
    "instance_norm": lambda a, w: F.instance_norm(a),
    "local_response_norm": lambda a, w: F.local_response_norm(a, 3),
    "interpolate_bicubic": lambda a, w: F.interpolate(a, size=(7, 3), mode="bicubic"),
    "interpolate_nearest": lambda a, w: F.interpolate(a, scale_factor=2),
    "pad_reflect": lambda a, w: F.pad(a, (1, 2, 2, 1), mode="reflect"),
    "unfold": lambda a, w: F.unfold(a, 2),
    "pixel_unshuffle": lambda a, w: F.pixel_unshuffle(a, 2),
    "adaptive_max_pool2d": lambda a, w: F.adaptive_max_pool2d(a, (3, 4)),
    "grid_sample": lambda a, w: F.grid_sample(a, ag.tanh(a[:, :2].permute(0, 2, 3, 1)) * 1.2,
                                              padding_mode="reflection"),
}


@pytest.mark.parametrize("name", sorted(VMAP))
def test_vmap_equals_the_loop(name):
    import warnings
    x = ag.tensor(_r(3, 2, 4, 4, 6))
    w = ag.tensor(_r(4, 3, 3, 3))
    fn = VMAP[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no per-example loop fallback
        v = ag.func.vmap(lambda a: fn(a, w))(x)
    np.testing.assert_allclose(v.numpy(), np.stack([fn(x[i], w).numpy() for i in range(3)]), rtol=1e-12, atol=1e-12)
