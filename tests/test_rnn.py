"""Recurrent layers and cells against PyTorch: outputs, final states, gradients of the input, the initial
states and every parameter by name, state dicts loaded by name; gradcheck and gradgradcheck in float64;
dropout between layers; errors."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn

torch = pytest.importorskip("torch")

KINDS = {"rnn_tanh": ("RNN", {}), "rnn_relu": ("RNN", {"nonlinearity": "relu"}), "lstm": ("LSTM", {}),
         "gru": ("GRU", {})}
# (num_layers, bias, batch_first, bidirectional, with h0, unbatched): every value of each argument, in pairs
CONFIGS = [(1, True, False, False, False, False), (2, True, True, True, True, False),
           (2, False, False, True, False, False), (1, False, True, False, True, False),
           (2, True, False, False, True, True), (1, True, True, True, False, True)]
T, B, F_IN, H = 4, 3, 5, 6


def _host(t):
    return t.detach().cpu().numpy()


def _load(ours, theirs, device):
    """Our module with PyTorch's state dict, loaded by name (tensors converted through NumPy)."""
    ours.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours.to(device)


def _states(cls, rng, shape, device):
    n = 2 if cls == "LSTM" else 1
    arrays = [rng.standard_normal(shape) for _ in range(n)]
    ours = [ag.tensor(a, device=device, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    return (tuple(ours), tuple(theirs)) if cls == "LSTM" else (ours[0], theirs[0])


def _loss(lib, out, h):
    """A loss that weights every output and final state differently, so each gradient is checked."""
    hs = h if isinstance(h, tuple) else (h,)
    total = (out * out).sum() + out.sum()
    for k, s in enumerate(hs):
        total = total + ((s ** 3) * (k + 2)).sum()
    return total


def _check_grads(ours_inputs, theirs_inputs, ours_m, theirs_m):
    for a, b in zip(ours_inputs, theirs_inputs):
        np.testing.assert_allclose(_host(a.grad), b.grad.numpy(), rtol=1e-6, atol=1e-9)
    theirs_p = dict(theirs_m.named_parameters())
    names = [n for n, _ in ours_m.named_parameters()]
    assert names == list(theirs_p)                          # the same names, in the same order
    for n, p in ours_m.named_parameters():
        np.testing.assert_allclose(_host(p.grad), theirs_p[n].grad.numpy(), rtol=1e-6, atol=1e-9, err_msg=n)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "L{}-bias{}-bf{}-bi{}-h0{}-unb{}".format(*map(int, c)))
@pytest.mark.parametrize("kind", KINDS)
def test_layer_matches_pytorch(kind, config, device):
    cls, kw = KINDS[kind]
    layers, bias, batch_first, bidir, with_h0, unbatched = config
    torch.manual_seed(0)
    args = dict(num_layers=layers, bias=bias, batch_first=batch_first, bidirectional=bidir, **kw)
    theirs = getattr(torch.nn, cls)(F_IN, H, **args).double()
    ours = _load(getattr(nn, cls)(F_IN, H, dtype=ag.float64, **args), theirs, device)
    rng = np.random.default_rng(1)
    shape = (T, F_IN) if unbatched else (B, T, F_IN) if batch_first else (T, B, F_IN)
    xa = rng.standard_normal(shape)
    x, tx = ag.tensor(xa, device=device, requires_grad=True), torch.tensor(xa, requires_grad=True)
    inputs_o, inputs_t = [x], [tx]
    if with_h0:
        hshape = (layers * (2 if bidir else 1),) + (() if unbatched else (B,)) + (H,)
        h0, th0 = _states(cls, rng, hshape, device)
        out, h = ours(x, h0)
        tout, th = theirs(tx, th0)
        inputs_o += list(h0) if cls == "LSTM" else [h0]
        inputs_t += list(th0) if cls == "LSTM" else [th0]
    else:
        out, h = ours(x)
        tout, th = theirs(tx)
    assert str(out.device).startswith(device)
    np.testing.assert_allclose(_host(out), tout.detach().numpy(), rtol=1e-7, atol=1e-10)
    for a, b in zip(h if cls == "LSTM" else (h,), th if cls == "LSTM" else (th,)):
        np.testing.assert_allclose(_host(a), b.detach().numpy(), rtol=1e-7, atol=1e-10)
    _loss(ag, out, h).backward()
    _loss(torch, tout, th).backward()
    _check_grads(inputs_o, inputs_t, ours, theirs)


@pytest.mark.parametrize("unbatched", [False, True], ids=["batched", "unbatched"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("kind", ["rnn_tanh", "rnn_relu", "lstm", "gru"])
def test_cell_matches_pytorch(kind, bias, unbatched, device):
    cls, kw = KINDS[kind]
    torch.manual_seed(0)
    theirs = getattr(torch.nn, cls + "Cell")(F_IN, H, bias=bias, **kw).double()
    ours = _load(getattr(nn, cls + "Cell")(F_IN, H, bias=bias, dtype=ag.float64, **kw), theirs, device)
    rng = np.random.default_rng(2)
    lead = () if unbatched else (B,)
    xa = rng.standard_normal(lead + (F_IN,))
    x, tx = ag.tensor(xa, device=device, requires_grad=True), torch.tensor(xa, requires_grad=True)
    h0, th0 = _states(cls, rng, lead + (H,), device)
    for given in (False, True):                 # the state is zeros when not given
        out = ours(x, h0) if given else ours(x)
        tout = theirs(tx, th0) if given else theirs(tx)
        outs, touts = (out, tout) if cls == "LSTM" else ((out,), (tout,))
        for a, b in zip(outs, touts):
            np.testing.assert_allclose(_host(a), b.detach().numpy(), rtol=1e-7, atol=1e-10)
    _loss(ag, outs[0], tuple(outs[1:])).backward()
    _loss(torch, touts[0], tuple(touts[1:])).backward()
    _check_grads([x] + (list(h0) if cls == "LSTM" else [h0]), [tx] + (list(th0) if cls == "LSTM" else [th0]),
                 ours, theirs)


@pytest.mark.parametrize("cls", ["RNN", "LSTM", "GRU"])
def test_parameter_names_shapes_and_default_init(cls):
    ag.manual_seed(0)
    ours = getattr(nn, cls)(10, 20, num_layers=2, bidirectional=True)
    theirs = getattr(torch.nn, cls)(10, 20, num_layers=2, bidirectional=True)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    bound = 1 / np.sqrt(20)
    values = np.concatenate([p.numpy().ravel() for p in ours.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.95 * bound and abs(values.mean()) < 0.01
    cell = getattr(nn, cls + "Cell")(10, 20)
    tcell = getattr(torch.nn, cls + "Cell")(10, 20)
    assert [(n, tuple(p.shape)) for n, p in cell.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tcell.named_parameters()]


def test_pytorch_state_dict_loads_by_name_and_gives_the_same_outputs():
    torch.manual_seed(3)
    theirs = torch.nn.LSTM(F_IN, H, num_layers=2, batch_first=True)       # float32, as saved by PyTorch
    ours = nn.LSTM(F_IN, H, num_layers=2, batch_first=True)
    missing = ours.load_state_dict({k: ag.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    assert missing is None or not any(missing)
    x = np.random.default_rng(4).standard_normal((B, T, F_IN)).astype(np.float32)
    out, (h, c) = ours(ag.tensor(x))
    tout, (th, tc) = theirs(torch.tensor(x))
    for a, b in ((out, tout), (h, th), (c, tc)):
        assert a.dtype == ag.float32
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)


def _functional(m):
    """fn(x, *params) calling m with the given tensors as its parameters (for gradcheck)."""
    names = [n for n, _ in m.named_parameters()]

    def fn(x, *ps):
        saved = dict(m._parameters)
        m._parameters.update(zip(names, ps))
        try:
            out, h = m(x)
        finally:
            m._parameters.update(saved)
        return (out,) + (h if isinstance(h, tuple) else (h,))
    return fn


@pytest.mark.parametrize("cls,bidir", [("LSTM", True), ("GRU", False), ("RNN", False)])
def test_gradcheck_and_gradgradcheck_tiny_layers(cls, bidir):
    ag.manual_seed(5)
    m = getattr(nn, cls)(2, 3, num_layers=1, bidirectional=bidir, dtype=ag.float64)
    x = ag.randn(3, 2, 2, dtype=ag.float64, requires_grad=True)
    inputs = [x] + [p.detach().requires_grad_() for p in m.parameters()]
    assert ag.autograd.gradcheck(_functional(m), inputs)
    assert ag.autograd.gradgradcheck(_functional(m), inputs)


def test_gradcheck_initial_states_of_a_two_layer_lstm():
    ag.manual_seed(6)
    m = nn.LSTM(2, 2, num_layers=2, dtype=ag.float64)
    x = ag.randn(3, 1, 2, dtype=ag.float64, requires_grad=True)
    h0 = ag.randn(2, 1, 2, dtype=ag.float64, requires_grad=True)
    c0 = ag.randn(2, 1, 2, dtype=ag.float64, requires_grad=True)
    assert ag.autograd.gradcheck(lambda x, h, c: (lambda o: (o[0],) + o[1])(m(x, (h, c))), [x, h0, c0])


def test_dropout_acts_between_layers_only_while_training():
    ag.manual_seed(7)
    m = nn.GRU(4, 5, num_layers=2, dropout=0.5)
    x = ag.randn(3, 2, 4)
    m.eval()
    out1, _ = m(x)
    out2, _ = m(x)
    np.testing.assert_array_equal(out1.numpy(), out2.numpy())
    m.train()
    out3, _ = m(x)
    assert not np.allclose(out3.numpy(), out1.numpy())
    # the last layer's output is never dropped: no exact zeros appear in it
    assert (out3.numpy() != 0).all()
    with pytest.warns(UserWarning, match="num_layers=1"):
        nn.LSTM(4, 5, dropout=0.2)


def test_training_reduces_the_loss():
    ag.manual_seed(8)
    m, head = nn.LSTM(1, 8, batch_first=True), nn.Linear(8, 1)
    opt = ag.optim.Adam(list(m.parameters()) + list(head.parameters()), lr=0.05)
    t = np.linspace(0, 6, 21, dtype=np.float32)
    x, y = ag.tensor(np.sin(t[:-1])[None, :, None]), ag.tensor(np.sin(t[1:])[None, :, None])
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = ((head(m(x)[0]) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.1 * losses[0]


def test_errors_name_the_layer_and_what_was_expected():
    m = nn.LSTM(4, 5, num_layers=2)
    with pytest.raises(ValueError, match=r"LSTM: input has 3 features .* expected input_size=4"):
        m(ag.randn(2, 3, 3))
    with pytest.raises(ValueError, match=r"LSTM: expected a 2-D \(unbatched\) or 3-D"):
        m(ag.randn(2, 3, 3, 4))
    with pytest.raises(TypeError, match="LSTM: expected the input to be a Tensor"):
        m(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=r"LSTM: expected h0 of shape \(2, 3, 5\), got \(1, 3, 5\)"):
        m(ag.randn(2, 3, 4), (ag.zeros(1, 3, 5), ag.zeros(2, 3, 5)))
    with pytest.raises(TypeError, match=r"LSTM: expected hx to be a tuple \(h0, c0\)"):
        m(ag.randn(2, 3, 4), ag.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="GRU: expected a non-empty input"):
        nn.GRU(4, 5)(ag.randn(0, 3, 4))
    with pytest.raises(ValueError, match="RNN: unknown nonlinearity 'gelu'"):
        nn.RNN(4, 5, nonlinearity="gelu")
    with pytest.raises(ValueError, match="GRU: hidden_size must be a positive int"):
        nn.GRU(4, 0)
    with pytest.raises(ValueError, match="LSTMCell: input has 3 features"):
        nn.LSTMCell(4, 5)(ag.randn(2, 3))
    with pytest.raises(ValueError, match=r"GRUCell: expected hx of shape \(2, 5\)"):
        nn.GRUCell(4, 5)(ag.randn(2, 4), ag.zeros(3, 5))


def test_repr_follows_pytorch():
    assert repr(nn.LSTM(4, 5, num_layers=2, batch_first=True)) == "LSTM(4, 5, num_layers=2, batch_first=True)"
    assert repr(nn.RNN(4, 5, nonlinearity="relu")) == "RNN(4, 5, nonlinearity='relu')"
    assert repr(nn.GRUCell(4, 5, bias=False)) == "GRUCell(4, 5, bias=False)"


def test_an_in_place_edit_of_the_lstm_output_is_refused_by_backward():
    m = nn.LSTM(3, 4)
    out, _ = m(ag.randn(5, 2, 3, requires_grad=True))
    out.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        out.sum().backward()


def test_lstm_work_arrays_are_reused_only_once_released():
    # the CPU fast path recycles its per-sequence arrays: one a caller (or a saved graph) still holds
    # must never be handed out again, and recycled ones must give the same results
    ag.manual_seed(0)
    lstm = nn.LSTM(4, 8, num_layers=2)
    x = ag.tensor(np.random.default_rng(0).normal(size=(9, 3, 4)), requires_grad=True)
    out1, (h1, c1) = lstm(x)
    kept = [t.numpy().copy() for t in (out1, h1, c1)]
    out2, _ = lstm(x * 2.0)                            # while out1 and its graph are alive
    for t, k in zip((out1, h1, c1), kept):
        np.testing.assert_array_equal(t.numpy(), k)
    out1.sum().backward()
    g1 = x.grad.numpy().copy()
    del out1, out2, h1, c1
    for _ in range(2):                                 # released: reused, same values and gradients
        x.grad = None
        out, (h, c) = lstm(x)
        np.testing.assert_array_equal(out.numpy(), kept[0])
        out.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), g1)
