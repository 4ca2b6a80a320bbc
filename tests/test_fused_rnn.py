"""The recurrent layers' fused time steps (backends/kernels/rnn.py: one product and one cell kernel per step
each way on CUDA, the in-place NumPy steps on the CPU) give what the unfused ops give: the same layer written
out step by step in Tensor ops (PyTorch's equations), values and gradients of the input, the initial states
and every parameter; float32 and float64, both devices, one row, one step, bidirectional, two layers, with
and without initial states, outputs used or unused. gradcheck in float64 on small sizes."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn

KINDS = {"lstm": (nn.LSTM, {}), "gru": (nn.GRU, {}), "rnn_tanh": (nn.RNN, {}),
         "rnn_relu": (nn.RNN, {"nonlinearity": "relu"})}
# (T, B, num_layers, bidirectional, bias, initial states given, which results the loss uses)
CONFIGS = {"one-step-one-row": (1, 1, 1, False, True, False, "all"),
           "two-layers-bidir-states": (5, 3, 2, True, True, True, "all"),
           "one-row-no-bias-states": (4, 1, 1, False, False, True, "all"),
           "outputs-only": (3, 2, 2, False, True, True, "out"),
           "final-states-only": (3, 2, 1, True, True, False, "states")}
F_IN, H = 3, 4
TOL = {"float32": {"rtol": 2e-5, "atol": 2e-6}, "float64": {"rtol": 1e-11, "atol": 1e-12}}


def _reference(m, x, hx):
    """m's forward written out in Tensor ops, one step at a time: the unfused ops the fused steps replace."""
    dirs, lstm, (T, B) = 2 if m.bidirectional else 1, m.mode == "LSTM", x.shape[:2]
    h0, c0 = (hx if lstm else (hx, None)) if hx is not None else (None, None)
    zero = ag.zeros(B, m.hidden_size, dtype=x.dtype, device=x.device)
    inp, hs, cs = x, [], []
    for layer in range(m.num_layers):
        outs = []
        for d in range(dirs):
            w_ih, w_hh, b_ih, b_hh = m._weights(layer, d)
            k = layer * dirs + d
            h = zero if h0 is None else h0[k]
            c = zero if c0 is None else c0[k]
            seq = [None] * T
            for t in (range(T - 1, -1, -1) if d else range(T)):
                gi, gh = inp[t] @ w_ih.T, h @ w_hh.T
                if b_ih is not None:
                    gi, gh = gi + b_ih, gh + b_hh
                if lstm:
                    H_ = m.hidden_size
                    a = gi + gh
                    i, f = a[:, :H_].sigmoid(), a[:, H_:2 * H_].sigmoid()
                    g, o = a[:, 2 * H_:3 * H_].tanh(), a[:, 3 * H_:].sigmoid()
                    c = f * c + i * g
                    h = o * c.tanh()
                elif m.mode == "GRU":
                    H_ = m.hidden_size
                    r = (gi[:, :H_] + gh[:, :H_]).sigmoid()
                    z = (gi[:, H_:2 * H_] + gh[:, H_:2 * H_]).sigmoid()
                    n = (gi[:, 2 * H_:] + r * gh[:, 2 * H_:]).tanh()
                    h = (1 - z) * n + z * h
                else:
                    h = (gi + gh).tanh() if m.mode == "RNN_TANH" else (gi + gh).relu()
                seq[t] = h
            outs.append(ag.stack(seq))
            hs.append(h)
            cs.append(c)
        inp = outs[0] if dirs == 1 else ag.cat(outs, dim=-1)
    return inp, ag.stack(hs), ag.stack(cs) if lstm else None


def _setup(kind, config, dtype, device):
    cls, kw = KINDS[kind]
    T, B, layers, bidir, bias, states, _ = config
    ag.manual_seed(3)
    m = cls(F_IN, H, num_layers=layers, bidirectional=bidir, bias=bias, dtype=getattr(ag, dtype), **kw).to(device)
    rng = np.random.default_rng(4)
    t = lambda *shape: ag.tensor(rng.standard_normal(shape).astype(dtype), device=device,   # noqa: E731
                                 requires_grad=True)
    x = t(T, B, F_IN)
    n = layers * (2 if bidir else 1)
    hx = None
    if states:
        hx = (t(n, B, H), t(n, B, H)) if cls is nn.LSTM else t(n, B, H)
    weights = [t(T, B, (2 if bidir else 1) * H), t(n, B, H), t(n, B, H)]   # of out, h_n, c_n in the loss
    return m, x, hx, weights


def _loss(out, h_n, c_n, weights, uses):
    terms = []
    if uses in ("all", "out"):
        terms.append((out * weights[0].detach()).sum())
    if uses in ("all", "states"):
        terms.append((h_n * weights[1].detach()).sum())
        if c_n is not None:
            terms.append((c_n * weights[2].detach()).sum())
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def _leaves(m, x, hx):
    return [x] + ([] if hx is None else list(hx) if isinstance(hx, tuple) else [hx]) + list(m.parameters())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS)
@pytest.mark.parametrize("kind", KINDS)
def test_fused_steps_equal_the_unfused_ops(kind, config, dtype, device):
    m, x, hx, weights = _setup(kind, config, dtype, device)
    out, states = m(x, hx)
    h_n, c_n = states if isinstance(states, tuple) else (states, None)
    ref_out, ref_h, ref_c = _reference(m, x, hx)
    for got, want in ((out, ref_out), (h_n, ref_h), (c_n, ref_c)):
        if want is not None:
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(), **TOL[dtype])
    leaves = _leaves(m, x, hx)
    _loss(out, h_n, c_n, weights, config[-1]).backward()            # the fused backward (no graph recorded)
    want = ag.autograd.grad(_loss(ref_out, ref_h, ref_c, weights, config[-1]), leaves, allow_unused=True)
    for leaf, g in zip(leaves, want):
        got = leaf.grad.cpu().numpy()
        np.testing.assert_allclose(got, np.zeros_like(got) if g is None else g.cpu().numpy(), **TOL[dtype])


@pytest.mark.parametrize("kind", KINDS)
def test_fused_backward_equals_the_create_graph_path(kind, device):
    """create_graph=True records the backward as one RecurrenceBackward node (differentiable again: its own
    backward reruns the step maths on Tensors); without it Function.of runs the same steps on arrays: both
    give one gradient (tests/test_backward_once.py holds both, and the second derivative, to the step ops)."""
    m, x, hx, weights = _setup(kind, CONFIGS["two-layers-bidir-states"], "float64", device)
    leaves = _leaves(m, x, hx)
    loss = lambda: _loss(*(lambda o, s: (o,) + (s if isinstance(s, tuple) else (s, None)))(*m(x, hx)),  # noqa: E731
                         weights, "all")
    fused = ag.autograd.grad(loss(), leaves)
    recorded = ag.autograd.grad(loss(), leaves, create_graph=True)
    for a, b in zip(fused, recorded):
        np.testing.assert_allclose(a.cpu().numpy(), b.detach().cpu().numpy(), rtol=1e-12, atol=1e-13)


def test_non_contiguous_input_and_states(device):
    m, x, hx, _ = _setup("lstm", CONFIGS["two-layers-bidir-states"], "float64", device)
    xt = x.detach().transpose(0, 1).contiguous().transpose(0, 1)                 # (T, B, F) as a strided view
    h0 = hx[0].detach().transpose(0, 1).contiguous().transpose(0, 1)
    out, (h_n, c_n) = m(xt, (h0, hx[1]))
    ref = _reference(m, x, hx)
    for got, want in zip((out, h_n, c_n), ref):
        np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().cpu().numpy(), **TOL["float64"])


@pytest.mark.parametrize("kind", KINDS)
def test_gradcheck_of_the_fused_steps(kind, device):
    cls, kw = KINDS[kind]
    ag.manual_seed(7)
    m = cls(2, 3, num_layers=2, bidirectional=True, dtype=ag.float64, **kw).to(device)
    x = ag.randn(3, 2, 2, dtype=ag.float64, device=device, requires_grad=True)
    states = [ag.randn(4, 2, 3, dtype=ag.float64, device=device, requires_grad=True)
              for _ in range(2 if cls is nn.LSTM else 1)]

    def fn(x, *states):
        out, s = m(x, tuple(states) if cls is nn.LSTM else states[0])
        return (out,) + (s if isinstance(s, tuple) else (s,))
    assert ag.autograd.gradcheck(fn, [x] + states)


def test_float16_lstm_runs_the_unfused_ufuncs_and_stays_close_to_float32(device):
    """float16 has no fused kernel (CUDA) and its products go through float32 (CPU): the steps still run."""
    m, x, hx, weights = _setup("lstm", CONFIGS["one-row-no-bias-states"], "float32", device)
    out32, _ = m(x, hx)
    m16 = m.to(dtype=ag.float16)
    out16, _ = m16(x.detach().to(dtype=ag.float16), tuple(h.detach().to(dtype=ag.float16) for h in hx))
    np.testing.assert_allclose(out16.cpu().numpy().astype(np.float32), out32.detach().cpu().numpy(),
                               rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", KINDS)
def test_each_time_step_is_one_product_and_one_kernel_each_way(kind):
    """On CUDA a layer's time step launches the recurrent product and the fused cell kernel forward, the
    cell's backward kernel and the product for dh backward: 2 + 2 (counted on the CuPy stand-in; the ufunc
    steps made 13 + 17 for the LSTM, 13 + 25 for the GRU)."""
    from benchmarks import launches
    if not launches.available():
        pytest.skip("launches are counted on the CuPy stand-in (AG_CUDA=standin); real CuPy has no counter")
    cls, kw = KINDS[kind]

    def counts(T):
        ag.manual_seed(0)
        m = cls(F_IN, H, num_layers=2, **kw).to("cuda")
        x = ag.randn(T, 2, F_IN, device="cuda")
        forward = launches.count(lambda: m(x), warmup=1).launches
        backward = launches.count(lambda: (m(x)[0] * 2).sum().backward(), warmup=1).launches - forward
        return forward, backward
    (f2, b2), (f5, b5) = counts(2), counts(5)
    assert ((f5 - f2) / 6, (b5 - b2) / 6) == (2, 2)          # 3 more steps in each of 2 layers
