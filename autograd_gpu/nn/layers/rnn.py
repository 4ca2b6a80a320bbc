"""Recurrent layers with PyTorch's arguments, parameter names, gate orders and initialisation:
RNN, LSTM, GRU and their single-step cells RNNCell, LSTMCell, GRUCell.

How a layer runs: the input projection of every time step is one matmul up front (x @ W_ih^T + b);
then one node per layer and direction (_Recurrence) runs the time loop on the backend's arrays, one
backend call per step (backends/kernels/rnn.py: the product for all gates and the cell, fused into one
kernel on CUDA), and its backward runs backpropagation through time the same way, with the weight
gradient as one matmul over all steps. A node per sequence instead of ~15 per step is what makes the
Python loop cheap (the engine's per-op cost is several microseconds). The backward is one op,
RecurrenceBackward, called through Function.of: with nothing recorded its array maths runs; under
create_graph=True the same op is recorded, and its own backward differentiates the step maths written
once as reference against a small namespace (_Arrays or _Tensors), rerun on Tensors, so second and
higher derivatives work; the tests hold the fused path to it and both to PyTorch."""
import math
import sys
import threading
import warnings

from ..module import Module
from ...dtypes import is_floating
from ..parameter import Parameter
from .. import init
from .. import functional as F
from ... import creation
from ...tensor import Tensor
from ...autograd.function import Function
from ...autograd.grad_mode import state, enable_grad
from ...autograd.engine import grad as _engine_grad
from ..._trace_hooks import active as tracing
from ...ops.shape import cat, stack
from ...ops import batching

__all__ = ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# --------------------------------------------------------------------------- the two namespaces
class _Arrays:
    """The step maths on one backend's arrays: the unfused reference the tests hold the fused steps to."""

    def __init__(self, backend):
        self.b, self.xp = backend, backend.xp

    def sigmoid(self, a):
        return self.b.sigmoid(a)

    def tanh(self, a):
        return self.xp.tanh(a)

    def relu(self, a):
        return self.xp.maximum(a, 0)

    def cat(self, xs):
        return self.xp.concatenate(xs, axis=-1)

    def stack(self, xs):
        return self.xp.stack(xs)

    def zeros_like(self, a):
        return self.xp.zeros_like(a)

    def t(self, w):
        return self.xp.ascontiguousarray(w.T)     # h @ w.T with w.T a view is ~3x slower in NumPy's matmul

    def mm(self, a, b):
        return self.b.matmul(a, b)                # the backend's: float16 goes through float32 on the CPU

    def addmm(self, a, h, wt):
        r = self.b.matmul(h, wt)                  # the backend's: float16 goes through float32 on the CPU
        r += a                                    # in place: one temporary fewer per step
        return r


class _Tensors:
    """The same maths on Tensors, recorded (backward with create_graph=True)."""
    sigmoid, tanh, relu = staticmethod(lambda a: a.sigmoid()), staticmethod(lambda a: a.tanh()), \
        staticmethod(lambda a: a.relu())

    @staticmethod
    def cat(xs):
        return cat(xs, dim=-1)

    @staticmethod
    def stack(xs):
        return stack(xs)

    @staticmethod
    def zeros_like(a):
        return creation.zeros_like(a)

    @staticmethod
    def t(w):
        return w.T

    @staticmethod
    def mm(a, b):
        return a @ b

    @staticmethod
    def addmm(a, h, wt):
        return a + h @ wt


# --------------------------------------------------------------------------- one step, forward and backward
# Each forward runs the steps in ``steps`` order and returns (outputs by time index, last h, last c,
# records for backward); each backward walks the records back and returns the gradients of the
# per-step gate inputs (by time index), of h0, c0, w_hh and b_hh.

def _rnn_forward(L, mode, gx, h, c, w_hh, b_hh, steps):
    act = L.tanh if mode == "RNN_TANH" else L.relu
    wt, outs, rec = L.t(w_hh), [None] * len(steps), []
    for t in steps:
        h_prev = h
        h = act(L.addmm(gx[t], h, wt))
        outs[t] = h
        rec.append((h, h_prev))
    return outs, h, None, rec


def _rnn_backward(L, mode, rec, steps, dout, dh, dc, w_hh):
    dgs = [None] * len(steps)
    for k in range(len(steps) - 1, -1, -1):
        t = steps[k]
        h, _ = rec[k]
        if dout is not None:
            dh = dh + dout[t]
        da = dh * (1 - h * h) if mode == "RNN_TANH" else dh * (h > 0)
        dgs[t] = da
        dh = L.mm(da, w_hh)
    return dgs, dgs, dh, None


def _lstm_forward(L, mode, gx, h, c, w_hh, b_hh, steps):
    H = h.shape[-1]
    wt, outs, rec = L.t(w_hh), [None] * len(steps), []
    for t in steps:
        a = L.addmm(gx[t], h, wt)                           # gates i, f, g, o
        s = L.sigmoid(a)                                    # on all four: one call beats three slices
        i, f, o = s[:, :H], s[:, H:2 * H], s[:, 3 * H:]
        g = L.tanh(a[:, 2 * H:3 * H])
        c_prev, h_prev = c, h
        c = f * c + i * g
        tc = L.tanh(c)
        h = o * tc
        outs[t] = h
        rec.append((i, f, g, o, tc, c_prev, h_prev))
    return outs, h, c, rec


def _lstm_backward(L, mode, rec, steps, dout, dh, dc, w_hh):
    dgs = [None] * len(steps)
    for k in range(len(steps) - 1, -1, -1):
        t = steps[k]
        i, f, g, o, tc, c_prev, _ = rec[k]
        if dout is not None:
            dh = dh + dout[t]
        dc = dc + dh * o * (1 - tc * tc)
        da = L.cat([dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g), dh * tc * o * (1 - o)])
        dc = dc * f
        dgs[t] = da
        dh = L.mm(da, w_hh)
    return dgs, dgs, dh, dc


def _gru_forward(L, mode, gx, h, c, w_hh, b_hh, steps):
    H = h.shape[-1]
    wt, outs, rec = L.t(w_hh), [None] * len(steps), []
    for t in steps:
        x = gx[t]
        gh = L.mm(h, wt) if b_hh is None else L.addmm(b_hh, h, wt)
        rz = L.sigmoid(x[:, :2 * H] + gh[:, :2 * H])
        r, z = rz[:, :H], rz[:, H:]
        ghn = gh[:, 2 * H:]
        n = L.tanh(x[:, 2 * H:] + r * ghn)                 # PyTorch's n: r multiplies W_hn h + b_hn
        h_prev = h
        h = n + z * (h - n)                                 # (1 - z) * n + z * h
        outs[t] = h
        rec.append((r, z, n, ghn, h_prev))
    return outs, h, None, rec


def _gru_backward(L, mode, rec, steps, dout, dh, dc, w_hh):
    dgx, dgh = [None] * len(steps), [None] * len(steps)
    for k in range(len(steps) - 1, -1, -1):
        t = steps[k]
        r, z, n, ghn, h_prev = rec[k]
        if dout is not None:
            dh = dh + dout[t]
        dn = dh * (1 - z) * (1 - n * n)
        dr = dn * ghn * r * (1 - r)
        dz = dh * (h_prev - n) * z * (1 - z)
        dgx[t] = L.cat([dr, dz, dn])
        dgh[t] = L.cat([dr, dz, dn * r])
        dh = dh * z + L.mm(dgh[t], w_hh)
    return dgx, dgh, dh, None


# The array paths (first-order backward, no graph recorded): every per-sequence array is allocated once (gate
# activations, cells, outputs, gate gradients) and each time step is one backend step each way
# (backends/kernels/rnn.py): on the CPU the product (MKL's packed format) and in-place NumPy work, so a step
# makes no allocation of (B, 4H) floats (glibc serves those with mmap: page faults each time); on CUDA one
# cuBLAS product and one fused cell kernel. The weight gradient is one product over all steps after the
# loop, reading h_{t-1} from the outputs. The loop over the steps of one layer and direction is itself one
# backend call (``lstm_forward_steps`` and the others), so CUDA checks dtypes, finds its kernel and enters the
# device once per sequence, not per step. _lstm_forward/_lstm_backward and the others above stay the
# reference (and, through _recorded_backward, RecurrenceBackward's own backward).
class _Recycled:
    """Work arrays of the LSTM's fast path handed out again once nothing but this list refers to them (no
    tensor, view or saved context: CPython's reference count says so), on the CPU only. A fresh array's
    pages fault in as they are first written, here inside the per-step BLAS calls on both cores, which
    made a 2-layer LSTM step (T 64, B 32, H 256) spend ~30 ms of its ~100 in the kernel; recycled arrays
    were written before. Holds at most ``max_bytes`` (the least recently used go first)."""

    def __init__(self, max_bytes=256 << 20):
        self._arrays, self._max_bytes, self._lock = [], max_bytes, threading.Lock()

    def empty(self, backend, shape, dtype):
        xp = backend.xp
        if backend.name != "numpy" or tracing() is not None:      # ag.compile records fresh arrays
            return xp.empty(shape, dtype=dtype)
        with self._lock:              # two threads must not both take the same free array
            arrays = self._arrays
            for i in range(len(arrays)):
                if _refs(arrays, i) == _FREE and arrays[i].shape == shape and arrays[i].dtype == dtype:
                    a = arrays.pop(i)
                    arrays.append(a)                               # most recently used last
                    return a
            a = xp.empty(shape, dtype=dtype)
            if a.nbytes <= self._max_bytes:
                self._arrays.append(a)
                while sum(b.nbytes for b in self._arrays) > self._max_bytes:
                    self._arrays.pop(0)
            return a


def _refs(arrays, i):
    """The reference count of arrays[i] (as CPython reports it from here)."""
    return sys.getrefcount(arrays[i])


_FREE = (lambda arrays: _refs(arrays, 0))([object()])   # an item only its list holds, counted the same way
_recycled = _Recycled()



def _packed(backend, w, rows, dtype):
    """w prepared for ``matmul_packed`` at every step: packed once, where it has the other operand's dtype
    (a matrix packed in one dtype takes no other: mixed dtypes promote, unpacked). ``dtype`` None: not
    packed (tested with ``is``: NumPy's ``dtype == None`` is true for float64)."""
    return backend.pack_matmul(w, rows) if dtype is not None and w.dtype == dtype else w


def _weight_grad(backend, D, OUT, h0, steps):
    """sum over steps of D_t^T h_{t-1}: the recurrent weight's gradient, h_{t-1} read from the outputs."""
    first, G, H = steps[0], D.shape[-1], h0.shape[-1]
    dw = backend.matmul(D[first].T, h0)
    if len(steps) > 1:
        rest, prev = (D[1:], OUT[:-1]) if first == 0 else (D[:-1], OUT[1:])
        dw += backend.matmul(rest.reshape(-1, G).T, prev.reshape(-1, H))
    return dw


def _lstm_forward_fast(backend, gx, h, c, w_hh, steps):
    xp, (T, B, G), H = backend.xp, gx.shape, h.shape[-1]
    wt = _packed(backend, xp.ascontiguousarray(w_hh.T), B, h.dtype if h.dtype == gx.dtype else None)
    A, C = _recycled.empty(backend, (T, B, G), gx.dtype), _recycled.empty(backend, (T, B, H), gx.dtype)
    TC, OUT = _recycled.empty(backend, (T, B, H), gx.dtype), _recycled.empty(backend, (T, B, H), gx.dtype)
    h, c = backend.lstm_forward_steps(h, wt, gx, c, A, C, TC, OUT, steps)
    return OUT, h.copy(), c, (A, C, TC, OUT)      # c_n: the last step's cell, which no step reads back


def _lstm_backward_fast(backend, rec, steps, h0, c0, w_hh, dout, dh, dc, need_w):
    A, C, TC, OUT = rec
    DA = _recycled.empty(backend, A.shape, A.dtype)
    w = _packed(backend, w_hh, h0.shape[0], A.dtype)       # dh = da @ w_hh every step
    dh, dc = backend.lstm_backward_steps(0 if dh is None else dh, dout, 0 if dc is None else dc, A, TC, C, c0, w,
                                         DA, steps)
    return DA, dh, dc, _weight_grad(backend, DA, OUT, h0, steps) if need_w else None


def _rnn_forward_fast(backend, mode, gx, h, w_hh, steps):
    xp, (T, B, H) = backend.xp, gx.shape
    wt = _packed(backend, xp.ascontiguousarray(w_hh.T), B, h.dtype if h.dtype == gx.dtype else None)
    OUT, relu = _recycled.empty(backend, (T, B, H), gx.dtype), mode == "RNN_RELU"
    h = backend.rnn_forward_steps(h, wt, gx, OUT, steps, relu)
    return OUT, h.copy(), None, (OUT,)           # h_n a copy: an in-place edit of it must not change the output


def _rnn_backward_fast(backend, mode, rec, steps, h0, w_hh, dout, dh, need_w):
    OUT, = rec
    DA, relu = _recycled.empty(backend, OUT.shape, OUT.dtype), mode == "RNN_RELU"
    w, dh = _packed(backend, w_hh, h0.shape[0], OUT.dtype), 0 if dh is None else dh
    dh = backend.rnn_backward_steps(dh, dout, OUT, w, DA, steps, relu)
    return DA, dh, _weight_grad(backend, DA, OUT, h0, steps) if need_w else None


def _gru_forward_fast(backend, gx, h, w_hh, b_hh, steps):
    xp, (T, B, _), H = backend.xp, gx.shape, h.shape[-1]
    wt = _packed(backend, xp.ascontiguousarray(w_hh.T), B, h.dtype if h.dtype == gx.dtype else None)
    S = _recycled.empty(backend, (T, B, 4 * H), gx.dtype)            # r, z, n, W_hn h + b_hn per step
    OUT, b = _recycled.empty(backend, (T, B, H), gx.dtype), 0 if b_hh is None else b_hh
    h = backend.gru_forward_steps(h, wt, b, gx, S, OUT, steps)
    return OUT, h.copy(), None, (S, OUT)


def _gru_backward_fast(backend, rec, steps, h0, w_hh, dout, dh, need_w, need_b):
    S, OUT = rec
    DGX, DGH = (_recycled.empty(backend, (*OUT.shape[:2], 3 * OUT.shape[-1]), OUT.dtype) for _ in range(2))
    w = _packed(backend, w_hh, h0.shape[0], OUT.dtype)
    dh, dhz = backend.gru_backward_steps(0 if dh is None else dh, dout, S, OUT, h0, w, DGX, DGH, steps)
    dw = _weight_grad(backend, DGH, OUT, h0, steps) if need_w else None
    db = DGH.reshape(-1, DGH.shape[-1]).sum(0) if need_b else None
    return DGX, dh + dhz, dw, db


_STEP = {"RNN_TANH": (_rnn_forward, _rnn_backward), "RNN_RELU": (_rnn_forward, _rnn_backward),
         "LSTM": (_lstm_forward, _lstm_backward), "GRU": (_gru_forward, _gru_backward)}


class _Recurrence(Function):
    """One layer and direction over a whole sequence: gx (T, B, gates*H) the input projections,
    h0 (B, H), c0 (B, H) for LSTM else None, w_hh (gates*H, H), b_hh (GRU's, else folded into gx)
    -> (output (T, B, H), h_n[, c_n])."""
    # vmap: once per example. A rule could fold the vmap dims into B when only gx and h0/c0 are batched;
    # per-example weights (vmap over an ensemble) could not, and nothing batches an RNN under vmap yet.
    batch_rule = batching.loop
    materialize_grads = False     # an unused output (h_n, c_n, the outputs) reaches backward as None: no zeros made

    @staticmethod
    def forward(ctx, mode, gx, h0, c0, w_hh, b_hh, reverse):
        T = gx.shape[0]                                     # > 0: the layers refuse empty sequences
        ctx.mode, ctx.steps = mode, range(T - 1, -1, -1) if reverse else range(T)
        backend, steps = ctx.device.backend, ctx.steps
        if mode == "LSTM":
            out, h, c, ctx.rec = _lstm_forward_fast(backend, gx.data, h0.data, c0.data, w_hh.data, steps)
        elif mode == "GRU":
            out, h, c, ctx.rec = _gru_forward_fast(backend, gx.data, h0.data, w_hh.data,
                                                   None if b_hh is None else b_hh.data, steps)
        else:
            out, h, c, ctx.rec = _rnn_forward_fast(backend, mode, gx.data, h0.data, w_hh.data, steps)
        ctx.out_meta = out.shape, out.dtype
        out = ctx.wrap(out)
        ctx.save_for_backward(gx, h0, c0, w_hh, b_hh, out)   # backward reads h_{t-1} from out: an in-place
        return (out, ctx.wrap(h)) + ((ctx.wrap(c),) if mode == "LSTM" else ())   # edit of it is refused

    @staticmethod
    def backward(ctx, dout, dh, dc=None):
        if dout is None:            # only h_n (and c_n) used: the outputs' gradient is zero (one fill)
            dout = ctx.wrap(ctx.xp.zeros(*ctx.out_meta))
        return (None,) + RecurrenceBackward.of(ctx, dout, dh, dc, ctx) + (None,)


def _recorded_backward(mode, steps, need, dout, gx, h0, c0, w_hh, b_hh, dh, dc):
    """_Recurrence's gradients (dgx, dh0, dc0, dw_hh, db_hh; None where ``need``, its node's
    needs_input_grad, wants none) as recorded Tensor ops: the forward redone on Tensors, then
    backpropagation through time on them (_STEP's reference maths against _Tensors)."""
    L = _Tensors
    forward, back = _STEP[mode]
    rec = forward(L, mode, gx, h0, c0, w_hh, b_hh, steps)[3]
    dh = L.zeros_like(h0) if dh is None else dh
    if c0 is not None and dc is None:
        dc = L.zeros_like(c0)
    dgx, dgh, dh, dc = back(L, mode, rec, steps, dout, dh, dc, w_hh)
    dgx_all = L.stack(dgx)
    dgh_all = dgx_all if dgh is dgx else L.stack(dgh)
    dw = db = None
    if need[4]:                             # sum over steps of dgates_t^T @ h_{t-1}: one matmul
        hp = [None] * len(steps)
        for k, t in enumerate(steps):
            hp[t] = rec[k][-1]
        hp = L.stack(hp)
        dw = L.mm(dgh_all.reshape(-1, dgh_all.shape[-1]).T, hp.reshape(-1, hp.shape[-1]))
    if b_hh is not None and need[5]:
        db = dgh_all.reshape(-1, dgh_all.shape[-1]).sum(0)
    return tuple(g if n else None for g, n in zip((dgx_all, dh, dc, dw, db), need[1:6]))


_SAVED_AT = (0, 1, 2, 3, 4, 5, 7, 8)     # RecurrenceBackward's arguments that its forward saves (not out, node)


class RecurrenceBackward(Function):
    """_Recurrence's gradients (dgx, dh0, dc0, dw_hh, db_hh; None where ``node``, the recurrence's node, needs
    none) as one op, from the output's gradient ``dout`` (T, B, H), the node's saved tensors and the gradients
    ``dh``, ``dc`` of h_n and c_n (Tensors or None). Its maths on arrays is backpropagation through time with
    one backend call per step (_lstm_backward_fast and the others, from the forward's work arrays
    ``node.rec``). Differentiable again: its own backward is the vector-Jacobian product of the same gradients
    written as recorded Tensor ops (_recorded_backward), taken by the engine; ``out`` (read for h_{t-1}) gets
    no gradient of its own, as the recorded maths recomputes it from gx, h0, c0 and w_hh."""
    batch_rule = batching.loop
    materialize_grads = False     # a gradient not wanted is None (and so is its gradient's gradient)

    @staticmethod
    def arrays(ctx, dout, gx, h0, c0, w_hh, b_hh, out, dh, dc, node):
        backend, mode, steps, need = ctx.device.backend, node.mode, node.steps, node.needs_input_grad
        dh, dc = None if dh is None else dh.data, None if dc is None else dc.data
        db = dc_0 = None
        if mode == "LSTM":
            dgx, dh, dc_0, dw = _lstm_backward_fast(backend, node.rec, steps, h0, c0, w_hh, dout, dh, dc, need[4])
        elif mode == "GRU":
            dgx, dh, dw, db = _gru_backward_fast(backend, node.rec, steps, h0, w_hh, dout, dh, need[4],
                                                 b_hh is not None and need[5])
        else:
            dgx, dh, dw = _rnn_backward_fast(backend, mode, node.rec, steps, h0, w_hh, dout, dh, need[4])
        return tuple(g if n else None for g, n in zip((dgx, dh, dc_0, dw, db), need[1:6]))

    @staticmethod
    def forward(ctx, dout, gx, h0, c0, w_hh, b_hh, out, dh, dc, node):
        ctx.mode, ctx.steps, ctx.need = node.mode, node.steps, node.needs_input_grad
        ctx.save_for_backward(dout, gx, h0, c0, w_hh, b_hh, dh, dc)
        data = [None if t is None else t.data for t in (dout, gx, h0, c0, w_hh, b_hh, out)]
        return _wrap_grads(ctx, RecurrenceBackward.arrays(ctx, *data, dh, dc, node))

    @staticmethod
    def backward(ctx, *ggs):
        needs, recording = ctx.needs_input_grad, state.enabled
        args, wanted, at = [], [], []
        for i, t in zip(_SAVED_AT, ctx.saved_tensors):
            if t is not None and needs[i]:
                # create_graph: a recorded copy of the input, where the engine stops (not the input itself,
                # whose own history may lead to the others: that would add their paths to these partials)
                t = t.clone() if recording else t.detach().requires_grad_(True)
                wanted.append(t)
                at.append(i)
            elif t is not None and not recording:
                t = t.detach()
            args.append(t)
        outs, grads = [], []
        with enable_grad():
            for g, gg in zip(_recorded_backward(ctx.mode, ctx.steps, ctx.need, *args), ggs):
                if g is not None and gg is not None and g.requires_grad:
                    outs.append(g)
                    grads.append(gg)
        result = [None] * 10
        if outs and wanted:
            for i, g in zip(at, _engine_grad(outs, wanted, grads, create_graph=recording, allow_unused=True)):
                result[i] = g
        return tuple(result)


def _wrap_grads(ctx, arrays):
    return tuple(None if a is None else ctx.wrap(a) for a in arrays)


# --------------------------------------------------------------------------- checks
def _check_input(name, x, input_size, batched_dims):
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected the input to be a Tensor, got {type(x).__name__}")
    if not is_floating(x.dtype):
        raise TypeError(f"{name}: expected a floating-point input, got dtype {x.dtype}")
    if x.ndim not in (batched_dims - 1, batched_dims):
        raise ValueError(f"{name}: expected a {batched_dims - 1}-D (unbatched) or {batched_dims}-D (batched) input, "
                         f"got shape {tuple(x.shape)}")
    if x.shape[0] == 0 or (x.ndim == batched_dims and x.shape[1] == 0):
        raise ValueError(f"{name}: expected a non-empty input, got shape {tuple(x.shape)}")
    if x.shape[-1] != input_size:
        raise ValueError(f"{name}: input has {x.shape[-1]} features (shape {tuple(x.shape)}), expected "
                         f"input_size={input_size}")


def _check_state(name, what, h, shape, x):
    if not isinstance(h, Tensor):
        raise TypeError(f"{name}: expected {what} to be a Tensor, got {type(h).__name__}")
    if tuple(h.shape) != tuple(shape):
        raise ValueError(f"{name}: expected {what} of shape {tuple(shape)}, got {tuple(h.shape)}")
    if h.dtype != x.dtype:
        raise TypeError(f"{name}: expected {what} of dtype {x.dtype} (the input's), got {h.dtype}")


def _check_sizes(name, input_size, hidden_size):
    for what, v in (("input_size", input_size), ("hidden_size", hidden_size)):
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name}: {what} must be a positive int, got {v!r}")


def _check_nonlinearity(name, nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"{name}: unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


# --------------------------------------------------------------------------- the layers
class RNNBase(Module):
    """The shared parts of RNN, LSTM and GRU: parameters per layer and direction named as in PyTorch
    (weight_ih_l{k}[_reverse], weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}), all drawn from
    U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), and the loop over layers and directions."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        _check_sizes(name, input_size, hidden_size)
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError(f"{name}: dropout must be a number in [0, 1], got {dropout!r}")
        if proj_size:
            raise ValueError(f"{name}: proj_size is not supported (got {proj_size!r})")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{name}: dropout={dropout} acts between layers, so with num_layers=1 it does nothing",
                          UserWarning, stacklevel=3)
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, 0
        kw, gates = {"device": device, "dtype": dtype}, _GATES[mode] * hidden_size
        dirs = 2 if bidirectional else 1
        for layer in range(num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                fan = input_size if layer == 0 else hidden_size * dirs
                setattr(self, "weight_ih" + sfx, Parameter(creation.empty(gates, fan, **kw)))
                setattr(self, "weight_hh" + sfx, Parameter(creation.empty(gates, hidden_size, **kw)))
                if bias:
                    setattr(self, "bias_ih" + sfx, Parameter(creation.empty(gates, **kw)))
                    setattr(self, "bias_hh" + sfx, Parameter(creation.empty(gates, **kw)))
        self.reset_parameters()

    def reset_parameters(self):
        """Re-draw every weight and bias from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self):
        """A no-op, for code written for PyTorch's cuDNN path."""

    def _weights(self, layer, d):
        sfx = f"_l{layer}" + ("_reverse" if d else "")
        get = lambda n: getattr(self, n + sfx, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def _run(self, x, h0, c0):
        """x (T, B, F), h0 and c0 (layers*dirs, B, H) or None -> (output (T, B, dirs*H), h_n, c_n or None)."""
        dirs, lstm, B = 2 if self.bidirectional else 1, self.mode == "LSTM", x.shape[1]
        zero = None
        if h0 is None or (lstm and c0 is None):
            zero = creation.zeros(B, self.hidden_size, dtype=x.dtype, device=x.device)
        hs, cs, inp = [], [], x
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, d)
                k = layer * dirs + d
                b_x = b_ih if b_ih is None or self.mode == "GRU" else b_ih + b_hh   # GRU keeps b_hn inside r*()
                gx = F.linear(inp, w_ih, b_x)
                res = _Recurrence.apply(self.mode, gx, zero if h0 is None else h0[k],
                                        (zero if c0 is None else c0[k]) if lstm else None,
                                        w_hh, b_hh if self.mode == "GRU" else None, bool(d))
                outs.append(res[0])
                hs.append(res[1])
                if lstm:
                    cs.append(res[2])
            inp = outs[0] if dirs == 1 else cat(outs, dim=-1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                inp = F.dropout(inp, self.dropout, True)
        return inp, stack(hs), stack(cs) if lstm else None

    def forward(self, input, hx=None):
        name, lstm = type(self).__name__, self.mode == "LSTM"
        _check_input(name, input, self.input_size, 3)
        batched = input.ndim == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        h0 = c0 = None
        if hx is not None:
            if lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{name}: expected hx to be a tuple (h0, c0), got {type(hx).__name__}")
                h0, c0 = hx
            else:
                h0 = hx
            layers = self.num_layers * (2 if self.bidirectional else 1)
            shape = (layers, x.shape[1], self.hidden_size) if batched else (layers, self.hidden_size)
            for what, h in (("h0", h0), ("c0", c0)) if lstm else (("h0", h0),):
                _check_state(name, what, h, shape, x)
            if not batched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1) if lstm else None
        out, h_n, c_n = self._run(x, h0, c0)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out, h_n, c_n = out.squeeze(1), h_n.squeeze(1), c_n.squeeze(1) if lstm else None
        return (out, (h_n, c_n)) if lstm else (out, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        for k, default in (("num_layers", 1), ("bias", True), ("batch_first", False), ("dropout", 0.0),
                           ("bidirectional", False)):
            if getattr(self, k) != default:
                s += f", {k}={getattr(self, k)}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu with nonlinearity='relu').
    forward(input, h0=None) -> (output, h_n); input (T, B, input_size), (B, T, input_size) with
    batch_first=True, or (T, input_size) unbatched; h0 and h_n (num_layers * dirs, B, hidden_size)."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        mode = _check_nonlinearity("RNN", nonlinearity)
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


class LSTM(RNNBase):
    """Long short-term memory, gates in PyTorch's order i, f, g, o (weight_ih_l0 is (4*hidden, input)).
    forward(input, (h0, c0)=None) -> (output, (h_n, c_n)); shapes as in RNN."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit, gates r, z, n as in PyTorch (n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),
    h' = (1 - z) * n + z * h). forward(input, h0=None) -> (output, h_n); shapes as in RNN."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
                         device=device, dtype=dtype)


# --------------------------------------------------------------------------- the cells
class RNNCellBase(Module):
    """One step of a recurrent layer: weight_ih (gates*hidden, input), weight_hh (gates*hidden, hidden),
    bias_ih, bias_hh, drawn from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)); input (B, input_size)
    or (input_size,) unbatched."""

    def __init__(self, mode, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        _check_sizes(type(self).__name__, input_size, hidden_size)
        self.mode, self.input_size, self.hidden_size, self.bias = mode, input_size, hidden_size, bias
        kw, gates = {"device": device, "dtype": dtype}, _GATES[mode] * hidden_size
        self.weight_ih = Parameter(creation.empty(gates, input_size, **kw))
        self.weight_hh = Parameter(creation.empty(gates, hidden_size, **kw))
        if bias:
            self.bias_ih = Parameter(creation.empty(gates, **kw))
            self.bias_hh = Parameter(creation.empty(gates, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def _step(self, input, states):
        """(h', [c']) for input (B, F) or (F,) and the states (each (B, H) or (H,), None for zeros)."""
        name = type(self).__name__
        _check_input(name, input, self.input_size, 2)
        batched = input.ndim == 2
        x = input if batched else input.unsqueeze(0)
        shape = (x.shape[0], self.hidden_size) if batched else (self.hidden_size,)
        given = []
        for what, h in states:
            if h is None:
                h = creation.zeros(*shape, dtype=x.dtype, device=x.device)
            else:
                _check_state(name, what, h, shape, x)
            given.append(h if batched else h.unsqueeze(0))
        b_ih, b_hh = self.bias_ih, self.bias_hh
        b_x = b_ih if b_ih is None or self.mode == "GRU" else b_ih + b_hh
        gx = F.linear(x, self.weight_ih, b_x).unsqueeze(0)
        res = _Recurrence.apply(self.mode, gx, given[0], given[1] if len(given) > 1 else None, self.weight_hh,
                                b_hh if self.mode == "GRU" else None, False)
        out = res[1:]
        return out if batched else tuple(o.squeeze(0) for o in out)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        if self.mode == "RNN_RELU":
            s += ", nonlinearity='relu'"
        return s


class RNNCell(RNNCellBase):
    """h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu). forward(input, hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        mode = _check_nonlinearity("RNNCell", nonlinearity)
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, bias, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(input, [("hx", hx)])[0]


class LSTMCell(RNNCellBase):
    """One LSTM step (gates i, f, g, o). forward(input, (h, c)=None) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: expected hx to be a tuple (h, c), got {type(hx).__name__}")
        h, c = (None, None) if hx is None else hx
        return self._step(input, [("h", h), ("c", c)])


class GRUCell(RNNCellBase):
    """One GRU step (gates r, z, n as in GRU). forward(input, hx=None) -> h'."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        return self._step(input, [("hx", hx)])[0]
