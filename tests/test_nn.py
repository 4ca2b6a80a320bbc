"""nn: Module registration and traversal, state dicts, modes, devices and dtypes, containers, repr,
init, gradient clipping, and every layer (shapes, parameter counts, default init, outputs)."""
import copy
import math
from collections import OrderedDict

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
from autograd_gpu.nn import init
from autograd_gpu.nn.utils import clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters
from autograd_gpu.testing.helpers import assert_close

try:
    import torch
except ImportError:  # the torch comparisons are extras; the NumPy references are the real checks
    torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")


def count(module):
    return sum(p.numel() for p in module.parameters())


class Net(nn.Module):
    """A small model with a nested child, a shared child, a buffer and a non-persistent buffer."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 3)
        self.block = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
        self.scale = nn.Parameter(ag.ones(1))
        self.register_buffer("steps", ag.zeros((), dtype=ag.int64))
        self.register_buffer("cache", ag.zeros(2), persistent=False)

    def forward(self, x):
        return self.block(self.fc1(x)) * self.scale


# -- registration and traversal ----------------------------------------------------------------
def test_attributes_register_parameters_modules_and_buffers_in_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["scale", "fc1.weight", "fc1.bias", "block.0.weight",
                                                      "block.0.bias"]
    assert [n for n, _ in net.named_modules()] == ["", "fc1", "block", "block.0", "block.1"]
    assert [n for n, _ in net.named_children()] == ["fc1", "block"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "cache"]
    assert list(net.parameters(recurse=False)) == [net.scale]
    assert len(list(net.modules())) == 5 and len(list(net.children())) == 2
    assert count(net) == 1 + 4 * 3 + 3 + 3 * 3 + 3


def test_parameter_requires_grad_and_shares_memory_with_its_tensor():
    t = ag.ones(3)
    p = nn.Parameter(t)
    assert p.requires_grad and p.is_leaf and isinstance(p, ag.Tensor)
    assert p.data is t.data
    assert not nn.Parameter(ag.ones(2), requires_grad=False).requires_grad
    assert nn.Parameter([1.0, 2.0]).dtype == ag.float32
    assert repr(p).startswith("Parameter containing:\nTensor(")


def test_shared_modules_and_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.modules())) == 3
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


def test_setattr_replaces_and_deletes_registrations():
    m = nn.Linear(2, 2)
    m.bias = None
    assert [n for n, _ in m.named_parameters()] == ["weight"] and "bias" not in m.state_dict()
    with pytest.raises(TypeError, match="nn.Parameter or None expected"):
        m.weight = ag.ones(2, 2)
    m.extra = nn.Linear(1, 1)
    assert "extra.weight" in dict(m.named_parameters())
    del m.extra
    assert "extra.weight" not in dict(m.named_parameters())
    with pytest.raises(AttributeError, match="no attribute 'extra'"):
        m.extra


def test_registration_errors():
    m = nn.Module()
    with pytest.raises(KeyError, match="empty or contain"):
        m.register_buffer("a.b", ag.zeros(1))
    with pytest.raises(TypeError, match="Tensor or None expected"):
        m.register_buffer("x", [1.0])
    with pytest.raises(TypeError, match="nn.Parameter or None expected"):
        m.register_parameter("w", ag.zeros(1))
    with pytest.raises(TypeError, match="is not a Module"):
        m.add_module("child", 3)
    m.thing = 1
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("thing", ag.zeros(1))


def test_forgetting_super_init_is_explained():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(ag.ones(1))

    with pytest.raises(AttributeError, match="super\\(\\).__init__\\(\\)"):
        Bad()


def test_module_without_forward_raises():
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


def test_get_submodule_and_apply():
    net = Net()
    assert net.get_submodule("block.0") is net.block[0]
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Linear", "ReLU", "Sequential", "Net"]


# -- state dicts ---------------------------------------------------------------------------------
def test_state_dict_holds_parameters_and_persistent_buffers_detached():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["scale", "steps", "fc1.weight", "fc1.bias", "block.0.weight", "block.0.bias"]
    assert not sd["fc1.weight"].requires_grad and sd["fc1.weight"].data is net.fc1.weight.data


def test_state_dict_round_trip_including_buffers():
    ag.manual_seed(0)
    a = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    a(ag.randn(8, 3))                                            # updates the running statistics
    b = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    weight = b[0].weight
    result = b.load_state_dict(a.state_dict())
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b[0].weight is weight                                 # copied in place
    for k, v in a.state_dict().items():
        np.testing.assert_array_equal(b.state_dict()[k].numpy(), v.numpy())
    assert b[1].num_batches_tracked.item() == 1
    a.eval(), b.eval()
    x = ag.randn(5, 3)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_load_state_dict_accepts_numpy_arrays_and_casts():
    m = nn.Linear(2, 2)
    m.load_state_dict({"weight": np.eye(2), "bias": np.array([1, 2])})
    assert m.weight.dtype == ag.float32 and m.bias.tolist() == [1.0, 2.0]


def test_load_state_dict_strict_errors_list_missing_and_unexpected_keys():
    m = nn.Sequential(nn.Linear(2, 2))
    sd = m.state_dict()
    del sd["0.bias"]
    sd["0.extra"] = ag.zeros(1)
    with pytest.raises(RuntimeError) as e:
        m.load_state_dict(sd)
    msg = str(e.value)
    assert "Error(s) in loading state_dict for Sequential" in msg
    assert 'Missing key(s) in state_dict: "0.bias"' in msg and 'Unexpected key(s) in state_dict: "0.extra"' in msg
    missing, unexpected = m.load_state_dict(sd, strict=False)
    assert missing == ["0.bias"] and unexpected == ["0.extra"]


def test_load_state_dict_shape_mismatch_names_key_and_shapes():
    m = nn.Linear(2, 3)
    with pytest.raises(RuntimeError, match=r"size mismatch for weight: copying a param with shape \(2, 2\) from "
                                           r"checkpoint, the shape in current model is \(3, 2\)"):
        m.load_state_dict({"weight": ag.zeros(2, 2), "bias": ag.zeros(3)}, strict=False)


def test_load_state_dict_rejects_non_dicts():
    with pytest.raises(TypeError, match="expected a dict"):
        nn.Linear(1, 1).load_state_dict([1, 2])


# -- modes, devices, dtypes ------------------------------------------------------------------------
def test_train_and_eval_propagate_to_children():
    net = Net()
    assert net.training and net.block[1].training
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="bool"):
        net.train("no")


def test_to_dtype_keeps_parameter_identity_and_casts_grads_and_float_buffers():
    bn = nn.BatchNorm1d(3)
    w = bn.weight
    bn.weight.grad = ag.ones(3)
    assert bn.to(ag.float64) is bn
    assert bn.weight is w and w.dtype == ag.float64 and w.grad.dtype == ag.float64
    assert bn.running_mean.dtype == ag.float64 and bn.num_batches_tracked.dtype == ag.int64
    assert bn.float().weight.dtype == ag.float32
    with pytest.raises(TypeError, match="floating-point"):
        bn.to(ag.int32)


def test_to_device_moves_parameters_buffers_and_grads(device):
    net = Net()
    net.fc1.weight.grad = ag.ones(3, 4)
    net.to(device)
    assert all(str(t.device).startswith(device) for t in list(net.parameters()) + list(net.buffers()))
    assert str(net.fc1.weight.grad.device).startswith(device)
    out = net(ag.randn(2, 4, device=device))
    assert str(out.device).startswith(device)
    net.cpu()
    assert net.fc1.weight.device.type == "cpu"


def test_optimizer_keeps_working_after_to():
    m = nn.Linear(2, 1)
    opt = optim.SGD(m.parameters(), lr=0.1)
    m.double()
    m(ag.ones(1, 2, dtype=ag.float64)).sum().backward()
    before = m.bias.item()
    opt.step()
    assert m.bias.item() == pytest.approx(before - 0.1)


def test_zero_grad():
    m = nn.Linear(2, 2)
    m(ag.ones(1, 2)).sum().backward()
    g = m.weight.grad
    m.zero_grad(set_to_none=False)
    assert m.weight.grad is g and not g.numpy().any()
    m.zero_grad()
    assert m.weight.grad is None and m.bias.grad is None


def test_deepcopy_gives_independent_parameters():
    net = Net()
    net.fc1.weight.grad = ag.ones(3, 4)
    twin = copy.deepcopy(net)
    assert twin.fc1.weight is not net.fc1.weight and isinstance(twin.fc1.weight, nn.Parameter)
    np.testing.assert_array_equal(twin.fc1.weight.numpy(), net.fc1.weight.numpy())
    assert twin.fc1.weight.grad.tolist() == net.fc1.weight.grad.tolist()
    twin.fc1.weight.data += 1
    assert not np.allclose(twin.fc1.weight.numpy(), net.fc1.weight.numpy())
    assert [n for n, _ in twin.named_parameters()] == [n for n, _ in net.named_parameters()]


def test_repr_is_nested_like_pytorch():
    net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Sequential(nn.Dropout(0.1)))
    assert repr(net) == ("Sequential(\n"
                         "  (0): Linear(in_features=2, out_features=3, bias=True)\n"
                         "  (1): ReLU()\n"
                         "  (2): Sequential(\n"
                         "    (0): Dropout(p=0.1, inplace=False)\n"
                         "  )\n"
                         ")")
    assert repr(nn.Conv2d(1, 2, 3, padding=1)) == "Conv2d(1, 2, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"


# -- containers ---------------------------------------------------------------------------------------
def test_sequential_indexing_slicing_len_iteration_and_append():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b)
    seq.append(c)
    assert len(seq) == 3 and list(seq) == [a, b, c] and seq[-1] is c
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == [b, c]
    assert seq(ag.ones(4, 2)).shape == (4, 1)
    del seq[0]
    assert [n for n, _ in seq.named_children()] == ["0", "1"] and seq[0] is b
    seq[0] = nn.Tanh()
    assert isinstance(seq[0], nn.Tanh)
    with pytest.raises(IndexError, match="out of range"):
        seq[5]


def test_sequential_from_ordered_dict_keeps_names():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert list(seq.state_dict()) == ["fc.weight", "fc.bias"] and seq.act is seq[1]


def test_module_list_and_module_dict():
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    layers.append(nn.Linear(2, 1))
    layers.insert(0, nn.ReLU())
    assert len(layers) == 5 and isinstance(layers[0], nn.ReLU) and isinstance(layers[1:3], nn.ModuleList)
    holder = nn.Module()
    holder.layers = layers
    assert len(list(holder.parameters())) == 8
    d = nn.ModuleDict({"enc": nn.Linear(2, 2), "act": nn.ReLU()})
    d["dec"] = nn.Linear(2, 1)
    assert list(d.keys()) == ["enc", "act", "dec"] and "act" in d and len(d) == 3
    assert list(d.state_dict()) == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    assert isinstance(d.pop("act"), nn.ReLU) and "act" not in d


# -- init -------------------------------------------------------------------------------------------
def test_calculate_gain_table():
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("conv2d") == init.calculate_gain("sigmoid") == 1.0
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="unsupported nonlinearity"):
        init.calculate_gain("swish")


@pytest.mark.parametrize("fn, kw, bound, std", [
    (init.xavier_uniform_, {}, math.sqrt(6 / (200 + 300)), math.sqrt(2 / (200 + 300))),
    (init.xavier_normal_, {"gain": 2.0}, None, 2 * math.sqrt(2 / (200 + 300))),
    (init.kaiming_uniform_, {"nonlinearity": "relu"}, math.sqrt(6 / 200), math.sqrt(2 / 200)),
    (init.kaiming_normal_, {"mode": "fan_out", "nonlinearity": "relu"}, None, math.sqrt(2 / 300)),
    (init.uniform_, {"a": -0.5, "b": 0.5}, 0.5, math.sqrt(1 / 12)),
    (init.normal_, {"mean": 0.0, "std": 0.3}, None, 0.3),
], ids=lambda v: getattr(v, "__name__", None))
def test_init_statistics(fn, kw, bound, std, device):
    ag.manual_seed(0)
    t = ag.empty(300, 200, device=device)          # fan_in 200, fan_out 300
    assert fn(t, **kw) is t
    a = t.numpy()
    if bound is not None:
        assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    assert a.std() == pytest.approx(std, rel=0.02) and abs(a.mean()) < 0.02 * std * 10


def test_trunc_normal_stays_in_bounds():
    t = init.trunc_normal_(ag.empty(10000), mean=0.0, std=1.0, a=-0.5, b=1.0)
    a = t.numpy()
    assert a.min() >= -0.5 and a.max() <= 1.0 and a.min() < -0.49 and a.max() > 0.99


def test_constant_ones_zeros_eye_orthogonal():
    assert init.constant_(ag.empty(2), 3.0).tolist() == [3.0, 3.0]
    assert init.ones_(ag.empty(2)).tolist() == [1.0, 1.0] and init.zeros_(ag.empty(1)).tolist() == [0.0]
    assert init.eye_(ag.empty(2, 3)).tolist() == [[1, 0, 0], [0, 1, 0]]
    q = init.orthogonal_(ag.empty(3, 5, dtype=ag.float64)).numpy()
    np.testing.assert_allclose(q @ q.T, np.eye(3), atol=1e-12)


def test_manual_seed_reproduces_initialisation():
    ag.manual_seed(123)
    a = nn.Linear(5, 5).weight.numpy().copy()
    ag.manual_seed(123)
    np.testing.assert_array_equal(nn.Linear(5, 5).weight.numpy(), a)


def test_init_works_in_place_outside_the_graph():
    p = nn.Parameter(ag.ones(3, 4))
    data, v = p.data, p.version_counter()[0]
    init.kaiming_uniform_(p, a=math.sqrt(5))
    assert p.data is data and p.version_counter()[0] == v + 1 and p.grad_fn is None
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(ag.empty(3))


# -- utils --------------------------------------------------------------------------------------------
def params_with_grads(device, *grads):
    ps = []
    for g in grads:
        p = nn.Parameter(ag.zeros(len(g), device=device))
        p.grad = ag.tensor(g, device=device)
        ps.append(p)
    return ps


def test_clip_grad_norm_scales_to_max_norm_and_returns_the_total(device):
    ps = params_with_grads(device, [3.0, 0.0], [0.0, 4.0])
    total = clip_grad_norm_(ps, max_norm=1.0)
    assert isinstance(total, ag.Tensor) and total.item() == pytest.approx(5.0)
    assert ps[0].grad.tolist() == pytest.approx([0.6, 0.0], rel=1e-5)
    assert ps[1].grad.tolist() == pytest.approx([0.0, 0.8], rel=1e-5)


def test_clip_grad_norm_leaves_small_gradients_alone_and_supports_inf_norm():
    ps = params_with_grads("cpu", [0.3, -0.4])
    assert clip_grad_norm_(ps, 1.0).item() == pytest.approx(0.5)
    assert ps[0].grad.tolist() == pytest.approx([0.3, -0.4])
    ps = params_with_grads("cpu", [1.0, -3.0], [2.0])
    assert clip_grad_norm_(ps, 1.5, norm_type=math.inf).item() == 3.0
    assert ps[0].grad.tolist() == pytest.approx([0.5, -1.5], rel=1e-5)
    nonfinite = params_with_grads("cpu", [math.inf])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_(nonfinite, 1.0, error_if_nonfinite=True)


def test_clip_grad_value_and_vector_conversion():
    ps = params_with_grads("cpu", [3.0, -0.5], [-2.0])
    clip_grad_value_(ps, 1.0)
    assert ps[0].grad.tolist() == [1.0, -0.5] and ps[1].grad.tolist() == [-1.0]
    vec = parameters_to_vector(ps)
    assert vec.shape == (3,)
    vector_to_parameters(ag.tensor([1.0, 2.0, 3.0]), ps)
    assert ps[0].tolist() == [1.0, 2.0] and ps[1].tolist() == [3.0]


# =====================================================================================================
# layers
# =====================================================================================================
def test_linear_shapes_count_and_default_init_bounds(device):
    ag.manual_seed(0)
    m = nn.Linear(400, 300, device=device)
    assert m.weight.shape == (300, 400) and m.bias.shape == (300,) and count(m) == 400 * 300 + 300
    bound = 1 / math.sqrt(400)                   # kaiming_uniform_(a=sqrt(5)) on fan_in 400
    w, b = m.weight.numpy(), m.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.99 * bound
    assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    assert np.abs(b).max() <= bound
    x = ag.randn(7, 400, device=device)
    assert_close(m(x), x.numpy() @ w.T + b, rtol=1e-4, atol=1e-5)
    assert m(ag.randn(2, 5, 400, device=device)).shape == (2, 5, 300)
    assert count(nn.Linear(3, 2, bias=False)) == 6


def test_identity_and_flatten():
    x = ag.randn(2, 3, 4, 5)
    assert nn.Identity(54, unused=1)(x) is x
    assert nn.Flatten()(x).shape == (2, 60)
    assert nn.Flatten(0, 1)(x).shape == (6, 4, 5)


def conv_out(n, k, s=1, p=0, d=1):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


@pytest.mark.parametrize("cin, cout, k, s, p, d, g", [(3, 8, 3, 1, 1, 1, 1), (4, 6, 3, 2, 0, 1, 2),
                                                      (4, 4, (3, 2), (2, 1), (1, 0), (2, 1), 4)])
def test_conv2d_shapes_count_and_init(cin, cout, k, s, p, d, g, device):
    m = nn.Conv2d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, device=device)
    kh, kw = (k, k) if isinstance(k, int) else k
    assert m.weight.shape == (cout, cin // g, kh, kw) and count(m) == cout * cin // g * kh * kw + cout
    fan_in = cin // g * kh * kw
    assert np.abs(m.weight.numpy()).max() <= 1 / math.sqrt(fan_in)
    assert np.abs(m.bias.numpy()).max() <= 1 / math.sqrt(fan_in)
    x = ag.randn(2, cin, 11, 9, device=device)
    pp, ss, dd = [(v, v) if isinstance(v, int) else v for v in (p, s, d)]
    assert m(x).shape == (2, cout, conv_out(11, kh, ss[0], pp[0], dd[0]), conv_out(9, kw, ss[1], pp[1], dd[1]))


def test_conv1d_shapes_and_count(device):
    m = nn.Conv1d(3, 5, 4, stride=2, padding=1, device=device)
    assert m.weight.shape == (5, 3, 4) and count(m) == 5 * 3 * 4 + 5
    assert m(ag.randn(2, 3, 17, device=device)).shape == (2, 5, conv_out(17, 4, 2, 1))


@pytest.mark.parametrize("k, d", [(3, 1), (4, 1), (3, 2)])
def test_conv_padding_same_keeps_the_size(k, d):
    assert nn.Conv2d(2, 3, k, padding="same", dilation=d)(ag.randn(1, 2, 7, 6)).shape == (1, 3, 7, 6)
    assert nn.Conv1d(2, 3, k, padding="same", dilation=d)(ag.randn(1, 2, 9)).shape == (1, 3, 9)
    assert nn.Conv2d(2, 3, k, padding="valid")(ag.randn(1, 2, 7, 6)).shape == (1, 3, 8 - k, 7 - k)


def test_conv_argument_errors():
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="padding_mode"):
        nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect")         # PyTorch's transposed ones: only 'zeros'


def test_pooling_shapes(device):
    x = ag.randn(2, 3, 9, 8, device=device)
    assert nn.MaxPool2d(2)(x).shape == (2, 3, 4, 4)
    assert nn.MaxPool2d(3, stride=2, padding=1)(x).shape == (2, 3, 5, 4)
    assert nn.AvgPool2d(2, stride=1)(x).shape == (2, 3, 8, 7)
    assert count(nn.MaxPool2d(2)) == 0
    x1 = ag.randn(2, 3, 9, device=device)
    assert nn.MaxPool1d(2)(x1).shape == (2, 3, 4) and nn.AvgPool1d(3, stride=2, padding=1)(x1).shape == (2, 3, 5)


def test_pooling_values():
    a = np.arange(16.0).reshape(1, 1, 4, 4)
    assert_close(nn.MaxPool2d(2)(ag.tensor(a)), np.array([[[[5.0, 7.0], [13.0, 15.0]]]]))
    assert_close(nn.AvgPool2d(2)(ag.tensor(a)), np.array([[[[2.5, 4.5], [10.5, 12.5]]]]))


def ref_adaptive_avg_pool(a, oh, ow):
    """PyTorch's definition: window i spans [floor(i * n / o), ceil((i + 1) * n / o))."""
    h, w = a.shape[-2:]
    out = np.empty(a.shape[:-2] + (oh, ow), dtype=a.dtype)
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[..., i, j] = a[..., h0:h1, w0:w1].mean(axis=(-2, -1))
    return out


@pytest.mark.parametrize("in_hw, out_size", [((8, 6), (4, 3)), ((7, 5), (3, 2)), ((5, 9), 4), ((6, 6), (None, 4)),
                                             ((3, 3), 5), ((4, 5), 1)])
def test_adaptive_avg_pool_matches_the_window_formula(in_hw, out_size, device):
    a = np.random.default_rng(0).normal(size=(2, 3) + in_hw)
    got = nn.AdaptiveAvgPool2d(out_size)(ag.tensor(a, device=device))
    oh, ow = (out_size, out_size) if isinstance(out_size, int) else out_size
    assert_close(got, ref_adaptive_avg_pool(a, oh or in_hw[0], ow or in_hw[1]))


def test_adaptive_avg_pool_gradient():
    x = ag.tensor(np.random.default_rng(1).normal(size=(1, 2, 7, 5)), requires_grad=True)
    assert ag.autograd.gradcheck(nn.AdaptiveAvgPool2d((3, 2)), (x,))
    assert nn.AdaptiveAvgPool2d(2)(ag.randn(3, 6, 6)).shape == (3, 2, 2)


def test_batchnorm_training_uses_batch_stats_and_updates_running_stats(device):
    bn = nn.BatchNorm1d(3, device=device)
    assert count(bn) == 6 and bn.weight.tolist() == [1.0] * 3 and bn.bias.tolist() == [0.0] * 3
    a = np.random.default_rng(0).normal(2.0, 3.0, size=(16, 3)).astype(np.float32)
    out = bn(ag.tensor(a, device=device))
    expected = (a - a.mean(0)) / np.sqrt(a.var(0) + 1e-5)
    assert_close(out, expected, rtol=1e-4, atol=1e-4)
    assert_close(bn.running_mean, 0.1 * a.mean(0), rtol=1e-5)
    assert_close(bn.running_var, 0.9 + 0.1 * a.var(0, ddof=1), rtol=1e-5)
    assert bn.num_batches_tracked.item() == 1 and bn.num_batches_tracked.dtype == ag.int64
    bn.eval()
    expected_eval = (a - bn.running_mean.numpy()) / np.sqrt(bn.running_var.numpy() + 1e-5)
    assert_close(bn(ag.tensor(a, device=device)), expected_eval, rtol=1e-4, atol=1e-4)
    assert bn.num_batches_tracked.item() == 1


def test_batchnorm2d_per_channel_and_state_dict_keys():
    bn = nn.BatchNorm2d(4)
    a = np.random.default_rng(0).normal(size=(2, 4, 3, 5)).astype(np.float32)
    mean, var = a.mean((0, 2, 3), keepdims=True), a.var((0, 2, 3), keepdims=True)
    assert_close(bn(ag.tensor(a)), (a - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    with pytest.raises(ValueError, match="4-D"):
        bn(ag.randn(2, 4))
    with pytest.raises(ValueError, match="channels"):
        bn(ag.randn(2, 3, 2, 2))


def test_batchnorm_momentum_none_is_a_cumulative_average():
    bn = nn.BatchNorm1d(2, momentum=None)
    batches = [np.random.default_rng(i).normal(size=(8, 2)).astype(np.float32) for i in range(3)]
    for b in batches:
        bn(ag.tensor(b))
    assert_close(bn.running_mean, np.mean([b.mean(0) for b in batches], axis=0), rtol=1e-5, atol=1e-6)


def test_batchnorm_without_running_stats_or_affine():
    bn = nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    assert count(bn) == 0 and list(bn.state_dict()) == []
    a = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    bn.eval()                                     # still normalises with the batch statistics
    assert_close(bn(ag.tensor(a)), (a - a.mean(0)) / np.sqrt(a.var(0) + 1e-5), rtol=1e-4, atol=1e-4)


def test_layernorm(device):
    ln = nn.LayerNorm((3, 4), device=device)
    assert count(ln) == 24 and ln.weight.shape == (3, 4)
    a = np.random.default_rng(0).normal(size=(2, 3, 4)).astype(np.float32)
    m, v = a.mean((1, 2), keepdims=True), a.var((1, 2), keepdims=True)
    assert_close(ln(ag.tensor(a, device=device)), (a - m) / np.sqrt(v + 1e-5), rtol=1e-4, atol=1e-5)
    assert count(nn.LayerNorm(5, elementwise_affine=False)) == 0 and count(nn.LayerNorm(5, bias=False)) == 5


def test_dropout_in_train_and_eval(device):
    ag.manual_seed(0)
    d = nn.Dropout(0.25)
    x = ag.ones(100, 100, device=device)
    y = d(x).numpy()
    kept = y != 0
    assert kept.mean() == pytest.approx(0.75, abs=0.02)
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    d.eval()
    np.testing.assert_array_equal(d(x).numpy(), x.numpy())
    with pytest.raises(ValueError, match="p must be in"):
        nn.Dropout(1.5)


def test_embedding_lookup_init_and_padding_idx(device):
    ag.manual_seed(0)
    e = nn.Embedding(1000, 16, device=device)
    assert count(e) == 16000 and e.weight.numpy().std() == pytest.approx(1.0, rel=0.03)
    idx = ag.tensor([[1, 2], [2, 999]], device=device)
    out = e(idx)
    assert out.shape == (2, 2, 16)
    assert_close(out, e.weight.numpy()[[[1, 2], [2, 999]]])
    p = nn.Embedding(5, 3, padding_idx=0, device=device)
    assert p.weight.numpy()[0].tolist() == [0.0, 0.0, 0.0]
    p(ag.tensor([0, 1, 0], device=device)).sum().backward()
    assert p.weight.grad.numpy()[0].tolist() == [0.0] * 3 and p.weight.grad.numpy()[1].tolist() == [1.0] * 3


ACTIVATIONS = [
    (nn.ReLU(), lambda a: np.maximum(a, 0)),
    (nn.LeakyReLU(0.2), lambda a: np.where(a > 0, a, 0.2 * a)),
    (nn.GELU(), lambda a: a * 0.5 * (1 + np.vectorize(math.erf)(a / math.sqrt(2)))),
    (nn.SiLU(), lambda a: a / (1 + np.exp(-a))),
    (nn.Tanh(), np.tanh),
    (nn.Sigmoid(), lambda a: 1 / (1 + np.exp(-a))),
    (nn.ELU(), lambda a: np.where(a > 0, a, np.expm1(a))),
    (nn.Softplus(), lambda a: np.log1p(np.exp(a))),
    (nn.Softmax(dim=1), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True)),
    (nn.LogSoftmax(dim=-1), lambda a: a - np.log(np.exp(a).sum(-1, keepdims=True))),
]


@pytest.mark.parametrize("module, ref", ACTIVATIONS, ids=lambda v: type(v).__name__)
def test_activation_modules(module, ref, device):
    a = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float64)
    assert_close(module(ag.tensor(a, device=device)), ref(a), rtol=1e-6, atol=1e-7)
    assert count(module) == 0


def test_activation_reprs():
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn.GELU(approximate="tanh")) == "GELU(approximate='tanh')"
    assert repr(nn.Softmax(dim=1)) == "Softmax(dim=1)"


# -- losses -------------------------------------------------------------------------------------------
def logits_and_targets(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(6, 4)), rng.integers(0, 4, size=6)


def log_softmax(a):
    return a - np.log(np.exp(a).sum(-1, keepdims=True))


def test_cross_entropy_and_nll_losses(device):
    a, t = logits_and_targets()
    x, y = ag.tensor(a, device=device), ag.tensor(t, device=device)
    nll = -log_softmax(a)[np.arange(6), t]
    assert_close(nn.CrossEntropyLoss()(x, y), np.array(nll.mean()))
    assert_close(nn.CrossEntropyLoss(reduction="sum")(x, y), np.array(nll.sum()))
    assert_close(nn.CrossEntropyLoss(reduction="none")(x, y), nll)
    assert_close(nn.NLLLoss()(ag.tensor(log_softmax(a), device=device), y), np.array(nll.mean()))
    w = np.array([1.0, 2.0, 0.5, 1.5])
    loss = nn.CrossEntropyLoss(weight=ag.tensor(w)).to(device)
    assert "weight" in dict(loss.named_buffers())
    assert_close(loss(x, y), np.array((w[t] * nll).sum() / w[t].sum()))
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_regression_and_binary_losses(device):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(4, 3)), rng.uniform(size=(4, 3))
    x, y = ag.tensor(a, device=device), ag.tensor(b, device=device)
    assert_close(nn.MSELoss()(x, y), np.array(((a - b) ** 2).mean()))
    assert_close(nn.L1Loss(reduction="sum")(x, y), np.array(np.abs(a - b).sum()))
    p = 1 / (1 + np.exp(-a))
    bce = -(b * np.log(p) + (1 - b) * np.log(1 - p))
    assert_close(nn.BCELoss()(ag.tensor(p, device=device), y), np.array(bce.mean()), rtol=1e-6)
    assert_close(nn.BCEWithLogitsLoss()(x, y), np.array(bce.mean()), rtol=1e-6)
    pw = np.array([1.0, 2.0, 3.0])
    expected = -(pw * b * np.log(p) + (1 - b) * np.log(1 - p)).mean()
    assert_close(nn.BCEWithLogitsLoss(pos_weight=ag.tensor(pw, device=device))(x, y), np.array(expected), rtol=1e-6)


# -- attention ----------------------------------------------------------------------------------------
def np_softmax(a):
    e = np.exp(a - a.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def ref_mha(mha, q, k, v, attn_mask=None, key_padding_mask=None, average=True):
    """The same math in NumPy, sequence first: q (L, N, E), k (S, N, kdim), v (S, N, vdim)."""
    e, h = mha.embed_dim, mha.num_heads
    hd = e // h
    if mha.in_proj_weight is not None:
        wq, wk, wv = np.split(mha.in_proj_weight.numpy(), 3)
    else:
        wq, wk, wv = (getattr(mha, f"{c}_proj_weight").numpy() for c in "qkv")
    bq, bk, bv = np.split(mha.in_proj_bias.numpy(), 3)
    L, N, S = q.shape[0], q.shape[1], k.shape[0]
    Q = (q @ wq.T + bq).reshape(L, N, h, hd).transpose(1, 2, 0, 3)
    K = (k @ wk.T + bk).reshape(S, N, h, hd).transpose(1, 2, 0, 3)
    V = (v @ wv.T + bv).reshape(S, N, h, hd).transpose(1, 2, 0, 3)
    scores = Q @ K.transpose(0, 1, 3, 2) / math.sqrt(hd)                  # (N, h, L, S)
    if attn_mask is not None:
        scores = np.where(attn_mask, -np.inf, scores)
    if key_padding_mask is not None:
        scores = np.where(key_padding_mask[:, None, None, :], -np.inf, scores)
    w = np_softmax(scores)
    out = (w @ V).transpose(2, 0, 1, 3).reshape(L, N, e)
    out = out @ mha.out_proj.weight.numpy().T + mha.out_proj.bias.numpy()
    return out, (w.mean(1) if average else w)


def randomize(mha):
    """Non-zero biases so that the test sees them."""
    with ag.no_grad():
        for p in mha.parameters():
            init.uniform_(p, -0.5, 0.5)
    return mha


def test_multihead_attention_parameters_and_init():
    mha = nn.MultiheadAttention(8, 2)
    assert [n for n, _ in mha.named_parameters()] == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                      "out_proj.bias"]
    assert count(mha) == 3 * 8 * 8 + 3 * 8 + 8 * 8 + 8
    assert not mha.in_proj_bias.numpy().any() and not mha.out_proj.bias.numpy().any()
    assert np.abs(mha.in_proj_weight.numpy()).max() <= math.sqrt(6 / (8 + 24))
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.MultiheadAttention(10, 3)


def test_multihead_self_attention_matches_numpy(device):
    ag.manual_seed(0)
    mha = randomize(nn.MultiheadAttention(8, 2, dtype=ag.float64))
    x = np.random.default_rng(0).normal(size=(5, 3, 8))
    out, w = mha.to(device)(*(ag.tensor(x, device=device),) * 3)
    ref_out, ref_w = ref_mha(mha.cpu(), x, x, x)
    assert_close(out, ref_out) and assert_close(w, ref_w)


def test_multihead_cross_attention_with_masks_and_kdim_vdim():
    ag.manual_seed(1)
    mha = randomize(nn.MultiheadAttention(6, 3, kdim=4, vdim=5, dtype=ag.float64))
    assert mha.in_proj_weight is None and mha.k_proj_weight.shape == (6, 4)
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(4, 2, 6)), rng.normal(size=(7, 2, 4)), rng.normal(size=(7, 2, 5))
    attn_mask = rng.random((4, 7)) < 0.3
    attn_mask[:, 0] = False
    kpm = np.zeros((2, 7), dtype=bool)
    kpm[1, 5:] = True
    out, w = mha(ag.tensor(q), ag.tensor(k), ag.tensor(v), key_padding_mask=ag.tensor(kpm),
                 attn_mask=ag.tensor(attn_mask), average_attn_weights=False)
    ref_out, ref_w = ref_mha(mha, q, k, v, attn_mask, kpm, average=False)
    assert_close(out, ref_out)
    assert_close(w, ref_w)
    assert w.shape == (2, 3, 4, 7)


def test_multihead_attention_batch_first_unbatched_and_no_weights():
    ag.manual_seed(2)
    mha = randomize(nn.MultiheadAttention(4, 2, batch_first=True, dtype=ag.float64))
    x = np.random.default_rng(2).normal(size=(3, 5, 4))                  # (N, L, E)
    out, w = mha(ag.tensor(x), ag.tensor(x), ag.tensor(x))
    ref_out, ref_w = ref_mha(mha, x.transpose(1, 0, 2), x.transpose(1, 0, 2), x.transpose(1, 0, 2))
    assert_close(out, ref_out.transpose(1, 0, 2))
    assert_close(w, ref_w)
    out1, w1 = mha(ag.tensor(x[0]), ag.tensor(x[0]), ag.tensor(x[0]))   # unbatched (L, E)
    assert_close(out1, ref_out.transpose(1, 0, 2)[0]) and w1.shape == (5, 5)
    out2, none = mha(ag.tensor(x), ag.tensor(x), ag.tensor(x), need_weights=False)
    assert none is None and out2.shape == (3, 5, 4)


def test_multihead_attention_is_causal_and_dropout():
    ag.manual_seed(4)
    mha = randomize(nn.MultiheadAttention(4, 2, dropout=0.5, dtype=ag.float64))
    x = ag.tensor(np.random.default_rng(4).normal(size=(5, 2, 4)))
    mha.eval()
    causal = ag.tensor(np.triu(np.ones((5, 5), dtype=bool), 1))
    out, w = mha(x, x, x, is_causal=True)
    out2, w2 = mha(x, x, x, attn_mask=causal)
    assert_close(out, out2.numpy()) and assert_close(w, w2.numpy())
    assert not np.triu(w.numpy(), 1).any()
    mha.train()                                    # dropout on the attention weights changes the result
    assert not np.allclose(mha(x, x, x)[0].numpy(), mha.eval()(x, x, x)[0].numpy())


def test_multihead_attention_is_differentiable():
    mha = randomize(nn.MultiheadAttention(4, 2, dtype=ag.float64))
    x = ag.tensor(np.random.default_rng(3).normal(size=(3, 2, 4)), requires_grad=True)
    assert ag.autograd.gradcheck(lambda t: mha(t, t, t)[0], (x,))
    mha(x, x, x)[0].sum().backward()
    assert all(p.grad is not None for p in mha.parameters())


# -- against PyTorch with copied weights (extra; skipped without torch) ----------------------------------
def copy_to_torch(ours, theirs):
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    return theirs


TORCH_LAYERS = [
    ("linear", lambda m: m.Linear(5, 3), (4, 5)),
    ("conv2d-groups", lambda m: m.Conv2d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 13, 12)),
    ("conv2d-same", lambda m: m.Conv2d(2, 3, 4, padding="same"), (2, 2, 9, 8)),
    ("conv1d-dilation", lambda m: m.Conv1d(3, 2, 3, dilation=2), (2, 3, 11)),
    ("layernorm", lambda m: m.LayerNorm(6), (3, 6)),
    ("cnn", lambda m: m.Sequential(m.Conv2d(2, 4, 3), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
                                   m.AdaptiveAvgPool2d(3), m.Flatten(), m.Linear(36, 5)), (2, 2, 13, 12)),
]


@needs_torch
@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("make, shape", [c[1:] for c in TORCH_LAYERS], ids=[c[0] for c in TORCH_LAYERS])
def test_layers_match_torch(make, shape):
    ag.manual_seed(0)
    ours = make(nn).double()
    theirs = copy_to_torch(ours, make(torch.nn).double())
    x = np.random.default_rng(0).normal(size=shape)
    for mode in ("train", "eval"):          # train first: BatchNorm's running statistics must agree after it
        getattr(ours, mode)(), getattr(theirs, mode)()
        np.testing.assert_allclose(ours(ag.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10,
                                   atol=1e-12)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k].numpy(), v.numpy(), rtol=1e-10)


@needs_torch
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_matches_torch(batch_first):
    ag.manual_seed(0)
    ours = randomize(nn.MultiheadAttention(8, 4, batch_first=batch_first, dtype=ag.float64))
    theirs = copy_to_torch(ours, torch.nn.MultiheadAttention(8, 4, batch_first=batch_first, dtype=torch.float64))
    rng = np.random.default_rng(0)
    q, kv = rng.normal(size=(5, 3, 8)), rng.normal(size=(6, 3, 8))             # (L, N, E), (S, N, E)
    if batch_first:
        q, kv = q.transpose(1, 0, 2), kv.transpose(1, 0, 2)
    kpm = np.zeros((3, 6), dtype=bool)
    kpm[0, -2:] = True
    mask = np.triu(np.ones((5, 6), dtype=bool), 1)
    out, w = ours(ag.tensor(q), ag.tensor(kv), ag.tensor(kv), key_padding_mask=ag.tensor(kpm),
                  attn_mask=ag.tensor(mask))
    tout, tw = theirs(torch.tensor(q), torch.tensor(kv), torch.tensor(kv), key_padding_mask=torch.tensor(kpm),
                      attn_mask=torch.tensor(mask))
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_sequential_linear_relu_pairs_equal_the_layers_called_one_by_one(device):
    # Sequential runs Linear then ReLU as one node: values and gradients must be the layers' own, exactly
    ag.manual_seed(0)
    m = nn.Sequential(nn.Linear(7, 9), nn.ReLU(), nn.Linear(9, 5), nn.ReLU(), nn.ReLU(), nn.Linear(5, 3),
                      nn.Tanh(), nn.Linear(3, 4)).to(device)
    xa = np.random.default_rng(0).standard_normal((6, 7)).astype(np.float32)
    results = []
    for fused in (True, False):
        m.zero_grad()
        x = ag.tensor(xa, device=device, requires_grad=True)
        h = x
        for layer in ([m] if fused else list(m)):
            h = layer(h)
        (h * h).sum().backward()
        results.append([h.numpy()] + [p.grad.numpy() for p in m.parameters()] + [x.grad.numpy()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
