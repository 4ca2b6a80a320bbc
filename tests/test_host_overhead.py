"""Host Python around the fused kernels (issue 23): the recurrent layers run all time steps of one layer and
direction in one backend call (backends/kernels/rnn.py: lstm/gru/rnn_forward_steps and *_backward_steps),
which must give exactly what the per-step methods give step by step (float32 and float64, both devices, both
directions, incoming gradients given or not, GRU with and without b_hh, the mixed-dtype fallback), and on
CUDA must make no Python call inside the package per time step (so the checks, kernel lookups and device
entries are not repeated every step)."""
import sys

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn

T, B, H = 5, 3, 4
KINDS = ("lstm", "gru", "gru_nobias", "rnn_tanh", "rnn_relu")


def _backend(device):
    return ag.zeros(1, device=device).device.backend


def _arrays(backend, kind, dtype, seed=0):
    """The inputs one layer and direction's steps take, as arrays of ``backend`` (h0, c0 in float64 where
    ``dtype`` is "mixed": the per-step methods then take the unfused path for the first step)."""
    rng = np.random.default_rng(seed)
    dt = np.float32 if dtype == "mixed" else np.dtype(dtype)
    hdt = np.float64 if dtype == "mixed" else dt
    G = {"lstm": 4, "gru": 3, "gru_nobias": 3}.get(kind, 1) * H

    def arr(shape, d=dt, scale=0.5):
        return backend.asarray((rng.standard_normal(shape) * scale).astype(d))
    return {"gx": arr((T, B, G)), "h0": arr((B, H), hdt), "c0": arr((B, H), hdt), "w": arr((H, G)),
            "w_back": arr((G, H)), "b": arr((G,)), "dout": arr((T, B, H)), "dh": arr((B, H)), "dc": arr((B, H))}


def _host(backend, a):
    return None if a is None else np.asarray(backend.to_host(a)) if not isinstance(a, (int, float)) else a


def _run(backend, kind, a, steps, per_step, grads):
    """Forward then backward over ``steps``: through the *_steps methods, or (``per_step``) through the step
    methods one call per step, as nn/layers/rnn.py made them before. Returns every array written or returned."""
    xp, dt = backend.xp, a["gx"].dtype
    dout = a["dout"] if grads else None
    dh, dc = (a["dh"], a["dc"]) if grads else (0, 0)
    h, c, w, wb, gx = a["h0"], a["c0"], a["w"], a["w_back"], a["gx"]
    OUT = xp.empty((T, B, H), dtype=dt)
    if kind == "lstm":
        A, C, TC, DA = (xp.empty(s, dtype=dt) for s in ((T, B, 4 * H), (T, B, H), (T, B, H), (T, B, 4 * H)))
        if per_step:
            for t in steps:
                backend.lstm_step_forward(h, w, gx[t], c, A[t], C[t], TC[t], OUT[t])
                h, c = OUT[t], C[t]
            hn, cn = h, c
            for k in range(len(steps) - 1, -1, -1):
                t = steps[k]
                dh, dc = backend.lstm_step_backward(dh, 0 if dout is None else dout[t], dc, A[t], TC[t],
                                                    C[steps[k - 1]] if k else a["c0"], wb, DA[t])
        else:
            hn, cn = backend.lstm_forward_steps(h, w, gx, c, A, C, TC, OUT, steps)
            dh, dc = backend.lstm_backward_steps(dh, dout, dc, A, TC, C, a["c0"], wb, DA, steps)
        return [OUT, A, C, TC, DA, hn, cn, dh, dc]
    if kind.startswith("gru"):
        b = a["b"] if kind == "gru" else 0
        S, DGX, DGH = (xp.empty((T, B, n * H), dtype=dt) for n in (4, 3, 3))
        if per_step:
            for t in steps:
                backend.gru_step_forward(h, w, b, gx[t], S[t], OUT[t])
                h = OUT[t]
            hn, dhz = h, 0
            for k in range(len(steps) - 1, -1, -1):
                t = steps[k]
                dh, dhz = backend.gru_step_backward(dh, 0 if dout is None else dout[t], dhz, S[t],
                                                    OUT[steps[k - 1]] if k else a["h0"], wb, DGX[t], DGH[t])
        else:
            hn = backend.gru_forward_steps(h, w, b, gx, S, OUT, steps)
            dh, dhz = backend.gru_backward_steps(dh, dout, S, OUT, a["h0"], wb, DGX, DGH, steps)
        return [OUT, S, DGX, DGH, hn, dh, dhz]
    relu, DA = kind == "rnn_relu", xp.empty((T, B, H), dtype=dt)
    if per_step:
        for t in steps:
            backend.rnn_step_forward(h, w, gx[t], OUT[t], relu)
            h = OUT[t]
        hn = h
        for k in range(len(steps) - 1, -1, -1):
            t = steps[k]
            dh = backend.rnn_step_backward(dh, 0 if dout is None else dout[t], OUT[t], wb, DA[t], relu)
    else:
        hn = backend.rnn_forward_steps(h, w, gx, OUT, steps, relu)
        dh = backend.rnn_backward_steps(dh, dout, OUT, wb, DA, steps, relu)
    return [OUT, DA, hn, dh]


@pytest.mark.parametrize("grads", [True, False], ids=["grads-given", "no-grads"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "mixed"])
@pytest.mark.parametrize("kind", KINDS)
def test_steps_methods_equal_the_per_step_calls(kind, dtype, reverse, grads, device):
    backend = _backend(device)
    steps = range(T - 1, -1, -1) if reverse else range(T)
    a = _arrays(backend, kind, dtype)
    want = _run(backend, kind, a, steps, True, grads)
    got = _run(backend, kind, a, steps, False, grads)
    assert len(want) == len(got)
    for i, (x, y) in enumerate(zip(want, got)):
        x, y = _host(backend, x), _host(backend, y)
        if isinstance(x, (int, float)):
            assert x == y, i
            continue
        assert x.dtype == y.dtype and x.shape == y.shape, (i, x.dtype, y.dtype, x.shape, y.shape)
        np.testing.assert_array_equal(x, y, err_msg=f"array {i} of {kind} differs")


def _package_calls(fn):
    """Python calls whose code is in autograd_gpu/ (the CuPy stand-in under testing/ excluded) during fn()."""
    import os
    root = os.path.dirname(os.path.abspath(ag.__file__)) + os.sep
    excluded = os.path.join(root, "testing") + os.sep
    n = [0]

    def profile(frame, event, arg):
        if event == "call":
            f = frame.f_code.co_filename
            if f.startswith(root) and not f.startswith(excluded):
                n[0] += 1
    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(old)
    return n[0]


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN"])
def test_cuda_recurrence_makes_no_python_call_of_ours_per_time_step(mode):
    """A layer's forward and backward on CUDA make as many calls inside the package at 9 time steps as at 2:
    each time step is CuPy's work only (its product and its cell kernel)."""
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs these on the CuPy stand-in)")
    ag.manual_seed(0)
    m = getattr(nn, mode)(3, 4, num_layers=2, bidirectional=True).to("cuda")
    counts = []
    for steps in (2, 9):
        x = ag.randn(steps, 2, 3, device="cuda", requires_grad=True)

        def step():
            out, _ = m(x)
            (out * out).sum().backward()
        step()                                      # warm: kernels built, caches filled
        counts.append(_package_calls(step))
    assert counts[0] == counts[1], f"{mode}: {counts[0]} calls at 2 steps, {counts[1]} at 9"
