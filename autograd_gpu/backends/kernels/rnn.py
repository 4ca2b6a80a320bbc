"""Fused kernels: the LSTM / GRU / RNN cells, forward and backward per time step. See backends/kernels/__init__.py for the contract.

Each method is one time step of one layer and direction: the recurrent product (``h @ W_hh^T`` forward,
``dgates @ W_hh`` backward) and the cell's elementwise work around it. The NumPy implementation works in
place on the caller's per-sequence buffers (the CPU path nn/layers/rnn.py had before, moved here
unchanged, MKL's packed product included); the CuPy one makes one cuBLAS product and one
ElementwiseKernel per step each way (the cell as one kernel, as Chainer's LSTM does), where CuPy's
ufuncs made ~13 launches forward and ~19 backward per LSTM step.

The layers call the ``*_steps`` methods: all time steps of one layer and direction in one call, which on
CUDA checks the dtypes, looks its kernel up and enters the device once per sequence, then makes the step
methods' launches at each step (the host's Python per step is CuPy's own); their NumPy twins loop the
step methods. The LSTM's and GRU's CUDA loops pass the sequence's arrays whole to their cell kernels with
the step's offset (_LSTM_FWD_SEQ, _LSTM_BWD_SEQ, _GRU_FWD, _GRU_BWD), so a step makes one view (its
product's operand), not three to five: a CuPy view costs the host several us (on the stand-in the
benchmarks' LSTM step makes 137 views where it made 645; a 2-layer GRU over 20 steps 86 where 324).

Arguments the layer has none of (no incoming gradient for h_n, c_n or the outputs) are passed as the
number 0, which both implementations broadcast; nothing a method reads is written.

Gate arrays (B, k*H) are passed to a CuPy kernel whole, as raw parameters (no per-gate views). No input may
share memory with an output (CuPy would copy the input first: a launch), so the products' results and
the running gradients are fresh arrays, never the buffers the kernels write.
"""
import re


class NumpyRNN:
    """NumPy implementations (mixed into NumpyBackend). Written against ``self.xp``: CupyRNN falls back
    to them for the dtypes its kernels are not built for (float16)."""

    # -- LSTM (gates i, f, g, o) -----------------------------------------------------------------------
    def lstm_step_forward(self, h, w, gx, c, gates, c_out, tc_out, h_out):
        """One LSTM step: a = gx + h @ W_hh^T with ``w = pack_matmul(W_hh^T, rows)``; gates <- (sigmoid(a_i),
        sigmoid(a_f), tanh(a_g), sigmoid(a_o)); c_out <- f * c + i * g; tc_out <- tanh(c_out);
        h_out <- o * tc_out. The same values as the unfused ops (nn/layers/rnn.py's _lstm_forward).
        h, c (B, H); gx, gates (B, 4H); the outputs are written, gates in place of the product."""
        xp, H = self.xp, h.shape[-1]
        a = gates
        self.matmul_packed(h, w, H, 4 * H, out=a)
        a += gx
        g = xp.tanh(a[:, 2 * H:3 * H])
        a *= 0.5                              # sigmoid = tanh(a/2)/2 + 1/2 in place on the whole contiguous
        xp.tanh(a, out=a)                     # row (no overflow to silence); g's slot rewritten after: 2x
        a *= 0.5                              # faster than three strided slices
        a += 0.5
        a[:, 2 * H:3 * H] = g
        xp.multiply(a[:, H:2 * H], c, out=c_out)
        c_out += a[:, :H] * a[:, 2 * H:3 * H]
        xp.tanh(c_out, out=tc_out)
        xp.multiply(a[:, 3 * H:], tc_out, out=h_out)

    def lstm_step_backward(self, dh, dout, dc, gates, tc, c_prev, w, da):
        """The LSTM step's backward: with dh_t = dh + dout (the gradient reaching h_t from the next step
        and from the output) and dc_t = dc + dh_t * o * (1 - tc^2), da <- (dc_t g i (1-i), dc_t c_prev f (1-f),
        dc_t i (1-g^2), dh_t tc o (1-o)); returns (da @ W_hh, dc_t * f), the gradients of h_{t-1} and
        c_{t-1}. ``w = pack_matmul(W_hh, rows)``; gates, tc as lstm_step_forward wrote them; dh, dout, dc
        arrays or 0. The same values as the unfused ops (nn/layers/rnn.py's _lstm_backward)."""
        xp, H = self.xp, tc.shape[-1]
        a = gates
        i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
        dh = dh + dout
        u = tc * tc
        xp.subtract(1, u, out=u)
        u *= o
        u *= dh
        u += dc
        dc = u                                              # ours: updated in place below
        xp.multiply(dc, g, out=da[:, :H])
        xp.multiply(dc, c_prev, out=da[:, H:2 * H])
        xp.multiply(dc, i, out=da[:, 2 * H:3 * H])
        xp.multiply(dh, tc, out=da[:, 3 * H:])
        d = 1 - a                                           # sigmoid' = s (1 - s), on whole rows; then
        d *= a                                              # g's slot: tanh' = 1 - g^2
        dg = d[:, 2 * H:3 * H]
        xp.multiply(g, g, out=dg)
        xp.subtract(1, dg, out=dg)
        da *= d
        dc *= f
        return self.matmul_packed(da, w, 4 * H, H), dc

    # -- Elman RNN (tanh or relu) ----------------------------------------------------------------------
    def rnn_step_forward(self, h, w, gx, h_out, relu):
        """One Elman step: h_out <- act(gx + h @ W_hh^T), act relu if ``relu`` else tanh; ``w =
        pack_matmul(W_hh^T, rows)``. The same values as the unfused ops (nn/layers/rnn.py's _rnn_forward)."""
        H = h.shape[-1]
        self.matmul_packed(h, w, H, H, out=h_out)
        h_out += gx
        if relu:
            self.xp.maximum(h_out, 0, out=h_out)
        else:
            self.xp.tanh(h_out, out=h_out)

    def rnn_step_backward(self, dh, dout, h, w, da, relu):
        """The Elman step's backward: da <- (dh + dout) * act'(h) (1 - h^2 for tanh, h > 0 for relu, h the
        step's output); returns da @ W_hh, the gradient of h_{t-1}. ``w = pack_matmul(W_hh, rows)``; dh,
        dout arrays or 0. The same values as the unfused ops (nn/layers/rnn.py's _rnn_backward)."""
        xp, H = self.xp, h.shape[-1]
        if relu:
            xp.greater(h, 0, out=da)
        else:
            xp.multiply(h, h, out=da)
            xp.subtract(1, da, out=da)
        da *= dh + dout
        return self.matmul_packed(da, w, H, H)

    # -- GRU (gates r, z, n) ---------------------------------------------------------------------------
    def gru_step_forward(self, h, w, b, gx, gates, h_out):
        """One GRU step: gh = h @ W_hh^T + b_hh (``w = pack_matmul(W_hh^T, rows)``, b (3H,) or 0);
        r, z = sigmoid(gx_rz + gh_rz), n = tanh(gx_n + r * gh_n), h_out <- n + z * (h - n);
        gates (B, 4H) <- (r, z, n, gh_n), what the backward reads. The same values as the unfused ops
        (nn/layers/rnn.py's _gru_forward)."""
        xp, H = self.xp, h.shape[-1]
        gh = self.matmul_packed(h, w, H, 3 * H)
        gh += b
        s = gates
        xp.add(gx[:, :2 * H], gh[:, :2 * H], out=s[:, :2 * H])
        rz = s[:, :2 * H]
        rz *= 0.5                                           # sigmoid = tanh(a/2)/2 + 1/2, in place
        xp.tanh(rz, out=rz)
        rz *= 0.5
        rz += 0.5
        r, z, n, ghn = s[:, :H], s[:, H:2 * H], s[:, 2 * H:3 * H], s[:, 3 * H:]
        ghn[...] = gh[:, 2 * H:]
        xp.multiply(r, ghn, out=n)
        n += gx[:, 2 * H:]
        xp.tanh(n, out=n)
        xp.subtract(h, n, out=h_out)
        h_out *= z
        h_out += n

    def gru_step_backward(self, dh, dout, dhz, gates, h, w, dgx, dgh):
        """The GRU step's backward: with dh_t = dh + dhz + dout (dhz: the previous call's z * dh_t, the
        direct path h_{t-1} -> h_t), dn = dh_t (1-z)(1-n^2), dr = dn gh_n r (1-r), dz = dh_t (h-n) z (1-z):
        dgx <- (dr, dz, dn), dgh <- (dr, dz, dn r); returns (dgh @ W_hh, dh_t * z): the gradient of h_{t-1}
        is their sum. h is h_{t-1}; ``w = pack_matmul(W_hh, rows)``; dh, dout, dhz arrays or 0. The same
        values as the unfused ops (nn/layers/rnn.py's _gru_backward)."""
        xp, H = self.xp, h.shape[-1]
        r, z, n, ghn = gates[:, :H], gates[:, H:2 * H], gates[:, 2 * H:3 * H], gates[:, 3 * H:]
        dh = dh + dhz
        dh = dh + dout
        dr, dz, dn = dgx[:, :H], dgx[:, H:2 * H], dgx[:, 2 * H:]
        xp.multiply(n, n, out=dn)                           # dn = dh (1 - z)(1 - n^2)
        xp.subtract(1, dn, out=dn)
        dn *= dh
        dn -= dn * z
        xp.subtract(1, r, out=dr)                           # dr = dn ghn r (1 - r)
        dr *= r
        dr *= ghn
        dr *= dn
        xp.subtract(1, z, out=dz)                           # dz = dh (h - n) z (1 - z)
        dz *= z
        dz *= h - n
        dz *= dh
        dgh[:, :2 * H] = dgx[:, :2 * H]
        xp.multiply(dn, r, out=dgh[:, 2 * H:])
        return self.matmul_packed(dgh, w, 3 * H, H), dh * z


    # -- a whole direction: the step methods above over ``steps`` (the time indices in the order they run) ---
    # One backend call per layer and direction (nn/layers/rnn.py's fast paths), so that CupyRNN checks the
    # dtypes, looks its kernel up and enters the device once, not every step. These loops call the step
    # methods through ``self``: CuPy's fallback (float16, mixed dtypes) takes its per-step path unchanged, and
    # under ag.compile's trace the step methods are the traced NumPy twins on either device.
    def lstm_forward_steps(self, h, w, gx, c, A, C, TC, OUT, steps):
        """lstm_step_forward at every t of ``steps``: gx (T, B, 4H); step t reads h, c (the initial
        states, then the previous step's OUT, C) and writes A[t], C[t], TC[t], OUT[t]. Returns (h_n, c_n),
        the last step's OUT and C (views)."""
        for t in steps:
            self.lstm_step_forward(h, w, gx[t], c, A[t], C[t], TC[t], OUT[t])
            h, c = OUT[t], C[t]
        return h, c

    def lstm_backward_steps(self, dh, dout, dc, A, TC, C, c0, w, DA, steps):
        """lstm_step_backward at every t of ``steps`` in reverse: dout (T, B, H) or None, dh, dc the
        gradients of h_n, c_n (arrays or 0); c_{t-1} is the previous step's C (c0 before the first); writes
        DA[t]. Returns the gradients of h0 and c0."""
        for k in range(len(steps) - 1, -1, -1):
            t = steps[k]
            dh, dc = self.lstm_step_backward(dh, 0 if dout is None else dout[t], dc, A[t], TC[t],
                                             C[steps[k - 1]] if k else c0, w, DA[t])
        return dh, dc

    def rnn_forward_steps(self, h, w, gx, OUT, steps, relu):
        """rnn_step_forward at every t of ``steps``: gx, OUT (T, B, H). Returns h_n (a view of OUT)."""
        for t in steps:
            self.rnn_step_forward(h, w, gx[t], OUT[t], relu)
            h = OUT[t]
        return h

    def rnn_backward_steps(self, dh, dout, OUT, w, DA, steps, relu):
        """rnn_step_backward at every t of ``steps`` in reverse (dout (T, B, H) or None, dh an array or
        0); writes DA[t]. Returns the gradient of h0."""
        for k in range(len(steps) - 1, -1, -1):
            t = steps[k]
            dh = self.rnn_step_backward(dh, 0 if dout is None else dout[t], OUT[t], w, DA[t], relu)
        return dh

    def gru_forward_steps(self, h, w, b, gx, S, OUT, steps):
        """gru_step_forward at every t of ``steps``: gx (T, B, 3H), S (T, B, 4H), OUT (T, B, H). Returns h_n
        (a view of OUT)."""
        for t in steps:
            self.gru_step_forward(h, w, b, gx[t], S[t], OUT[t])
            h = OUT[t]
        return h

    def gru_backward_steps(self, dh, dout, S, OUT, h0, w, DGX, DGH, steps):
        """gru_step_backward at every t of ``steps`` in reverse (h_{t-1} the previous step's OUT, h0 before
        the first; dout (T, B, H) or None, dh an array or 0); writes DGX[t], DGH[t]. Returns (dh, dhz), whose
        sum is the gradient of h0."""
        dhz = 0
        for k in range(len(steps) - 1, -1, -1):
            t = steps[k]
            dh, dhz = self.gru_step_backward(dh, 0 if dout is None else dout[t], dhz, S[t],
                                             OUT[steps[k - 1]] if k else h0, w, DGX[t], DGH[t])
        return dh, dhz

# CUDA C of the cells, one thread per (row, unit): the loop runs over the (B, H) arrays, i = b * H + j.
# Gate arrays (B, k*H) are raw parameters read and written at b * k*H + gate * H + j (CuPy's raw indexing
# is C-order whatever the strides), so a call passes each whole array, not k strided views: a kernel
# call's host cost grows with its arguments. Every intermediate is a local (an output parameter is a
# reference into global memory).
#
# The LSTM cell over a whole sequence's arrays (CupyRNN.lstm_*_steps): gx, gates (T, B, 4H) and c, tc, h, da
# (T, B, H) passed whole as raw parameters with the step's offset ``off`` = t * B * H (the gates' = 4 * off),
# and c_{t-1} as ``cp`` at ``cp_off`` (the previous step's C, or c0 at 0). A step then makes no view of them:
# a CuPy view costs the host several us (the H200 profile: the fast loop's own time was ~40 us a step with
# five views each way), where the step's product needs one (its h or da). One step alone (lstm_step_*) is
# the same kernel on that step's arrays at offset 0.
_LSTM_FWD_SEQ = ("raw T gx, raw T hw, raw T cp, int64 cp_off, int64 off, int64 H",
                 "raw T gates, raw T c, raw T tc, raw T h",
                 """
                 ptrdiff_t k = (i / H) * 4 * H + i % H;
                 ptrdiff_t g = 4 * off + k;
                 T si = 1 / (1 + exp(-(gx[g] + hw[k])));
                 T sf = 1 / (1 + exp(-(gx[g + H] + hw[k + H])));
                 T sg = tanh(gx[g + 2 * H] + hw[k + 2 * H]);
                 T so = 1 / (1 + exp(-(gx[g + 3 * H] + hw[k + 3 * H])));
                 T cn = sf * cp[cp_off + i] + si * sg;
                 T tn = tanh(cn);
                 gates[g] = si;
                 gates[g + H] = sf;
                 gates[g + 2 * H] = sg;
                 gates[g + 3 * H] = so;
                 c[off + i] = cn;
                 tc[off + i] = tn;
                 h[off + i] = so * tn;
                 """, "ag_lstm_fwd_seq")


def _lstm_bwd_seq(with_dout):
    """The LSTM cell's backward over the sequence's arrays (as _LSTM_FWD_SEQ); ``dout`` (T, B, H) raw at
    ``off``, or no dout parameter at all (no gradient reached the outputs)."""
    return ("T dh_in, " + ("raw T dout, " if with_dout else "")
            + "T dc_in, raw T gates, raw T tc, raw T cp, int64 cp_off, int64 off, int64 H",
            "raw T da, T dc_prev",
            """
            ptrdiff_t g = 4 * off + (i / H) * 4 * H + i % H;
            T gi = gates[g];
            T gf = gates[g + H];
            T gg = gates[g + 2 * H];
            T go = gates[g + 3 * H];
            T t = tc[off + i];
            T dh = dh_in""" + (" + dout[off + i]" if with_dout else "") + """;
            T dc = dc_in + dh * go * (1 - t * t);
            da[g] = dc * gg * gi * (1 - gi);
            da[g + H] = dc * cp[cp_off + i] * gf * (1 - gf);
            da[g + 2 * H] = dc * gi * (1 - gg * gg);
            da[g + 3 * H] = dh * t * go * (1 - go);
            dc_prev = dc * gf;
            """, "ag_lstm_bwd_seq" + ("_dout" if with_dout else ""))


_LSTM_BWD_SEQ = {True: _lstm_bwd_seq(True), False: _lstm_bwd_seq(False)}
_RNN_FWD = {False: ("T x, T hw", "T h", "h = tanh(x + hw);", "ag_rnn_tanh_fwd"),
            True: ("T x, T hw", "T h", "T a = x + hw; h = a < 0 ? 0 : a;", "ag_rnn_relu_fwd")}  # NaN stays
_RNN_BWD = {False: ("T dh, T dout, T h", "T da", "da = (dh + dout) * (1 - h * h);", "ag_rnn_tanh_bwd"),
            True: ("T dh, T dout, T h", "T da", "da = (dh + dout) * (h > 0);", "ag_rnn_relu_bwd")}
# The GRU cell likewise: gx and its gradients dgx, dgh (T, B, 3H), the gates (T, B, 4H) and dout (T, B, H)
# passed whole at the step's offset ``off`` = t * B * H (3 * off, 4 * off for the wider ones), h_{t-1} in the
# backward as ``hp`` at ``hp_off``; the loop runs over the (B, H) arrays h (forward) and dhz_out (backward). A
# single step (gru_step_*) is the same kernel on that step's arrays at offset 0.
_GRU_FWD = {bias: ("raw T gx, raw T hw, " + ("raw T b, " if bias else "") + "T h_prev, int64 off, int64 H",
                   "raw T gates, T h",
                   """
                   ptrdiff_t j = i % H;
                   ptrdiff_t k = (i / H) * 3 * H + j;
                   ptrdiff_t x = 3 * off + k;
                   ptrdiff_t s = 4 * off + (i / H) * 4 * H + j;
                   """ + ("""
                   T br = b[j];
                   T bz = b[j + H];
                   T bn = b[j + 2 * H];
                   """ if bias else """
                   T br = 0;
                   T bz = 0;
                   T bn = 0;
                   """) + """
                   T r = 1 / (1 + exp(-(gx[x] + hw[k] + br)));
                   T z = 1 / (1 + exp(-(gx[x + H] + hw[k + H] + bz)));
                   T g = hw[k + 2 * H] + bn;
                   T n = tanh(gx[x + 2 * H] + r * g);
                   gates[s] = r;
                   gates[s + H] = z;
                   gates[s + 2 * H] = n;
                   gates[s + 3 * H] = g;
                   h = n + z * (h_prev - n);
                   """, f"ag_gru_fwd{'_b' if bias else ''}") for bias in (False, True)}


def _gru_bwd(with_dout):
    """The GRU cell's backward (see _GRU_FWD); ``dout`` (T, B, H) raw at ``off``, or no dout parameter."""
    return ("T dh_in, " + ("raw T dout, " if with_dout else "")
            + "T dhz_in, raw T gates, raw T hp, int64 hp_off, int64 off, int64 H",
            "raw T dgx, raw T dgh, T dhz_out",
            """
            ptrdiff_t k = 3 * off + (i / H) * 3 * H + i % H;
            ptrdiff_t s = 4 * off + (i / H) * 4 * H + i % H;
            T r = gates[s];
            T z = gates[s + H];
            T n = gates[s + 2 * H];
            T ghn = gates[s + 3 * H];
            T dh = dh_in + dhz_in""" + (" + dout[off + i]" if with_dout else "") + """;
            T dn = dh * (1 - z) * (1 - n * n);
            T dr = dn * ghn * r * (1 - r);
            T dz = dh * (hp[hp_off + i] - n) * z * (1 - z);
            dgx[k] = dr;
            dgx[k + H] = dz;
            dgx[k + 2 * H] = dn;
            dgh[k] = dr;
            dgh[k + H] = dz;
            dgh[k + 2 * H] = dn * r;
            dhz_out = dh * z;
            """, "ag_gru_bwd" + ("_dout" if with_dout else ""))


_GRU_BWD = {True: _gru_bwd(True), False: _gru_bwd(False)}

_kernels = {}                   # (CuPy module, source, dtype) -> its ElementwiseKernel, built on first use
_C_TYPES = {"float32": "float", "float64": "double"}


def _kernel(xp, spec, dtype):
    """The ElementwiseKernel of ``spec`` (in_params, out_params, body, name; ``T`` the element type) for
    float32 or float64: concrete types in the parameters, the C type in the body's declarations. Keyed by
    the dtype object (NumPy's ``dtype.name`` is Python code, ~1.8 us a call)."""
    key = (xp, spec, dtype)
    k = _kernels.get(key)
    if k is None:
        ins, outs, body, name = spec
        k = _kernels[key] = xp.ElementwiseKernel(_typed(ins, dtype.name), _typed(outs, dtype.name),
                                                 _typed(body, _C_TYPES[dtype.name]), f"{name}_{dtype.name}")
    return k


def _typed(src, t):
    return re.sub(r"\bT\b", t, src)


def _fused(*arrays):
    """Whether the CUDA kernels take these arrays: float32 or float64, all of one dtype (else the NumPy
    implementations run on CuPy's ufuncs: float16, mixed dtypes)."""
    dt = arrays[0].dtype
    return dt.char in "fd" and all(a.dtype == dt for a in arrays[1:] if not isinstance(a, (int, float)))


class CupyRNN:
    """CuPy implementations (mixed into CupyBackend): per step one cuBLAS product and one cached
    ElementwiseKernel each way (float32, float64; other dtypes take NumpyRNN's ufunc path)."""

    def lstm_step_forward(self, h, w, gx, c, gates, c_out, tc_out, h_out):
        if not _fused(h, w, gx, c, gates):
            return NumpyRNN.lstm_step_forward(self, h, w, gx, c, gates, c_out, tc_out, h_out)
        with self._cuda_device:                            # the sequence kernel on this step's arrays, offset 0
            _kernel(self.xp, _LSTM_FWD_SEQ, gates.dtype)(gx, self.matmul(h, w), c, 0, 0, h.shape[-1], gates, c_out,
                                                         tc_out, h_out, size=h_out.size)

    def lstm_step_backward(self, dh, dout, dc, gates, tc, c_prev, w, da):
        if not _fused(gates, w, tc, c_prev, da, dh, dout, dc):
            return NumpyRNN.lstm_step_backward(self, dh, dout, dc, gates, tc, c_prev, w, da)
        with self._cuda_device:                            # the sequence kernel on this step's arrays, offset 0
            dc_prev = self.xp.empty_like(tc)
            douts = () if isinstance(dout, (int, float)) else (dout,)     # 0: no gradient reached the output
            _kernel(self.xp, _LSTM_BWD_SEQ[bool(douts)], gates.dtype)(dh, *douts, dc, gates, tc, c_prev, 0, 0,
                                                                      tc.shape[-1], da, dc_prev)
            return self.matmul(da, w), dc_prev

    def rnn_step_forward(self, h, w, gx, h_out, relu):
        if not _fused(h, w, gx, h_out):
            return NumpyRNN.rnn_step_forward(self, h, w, gx, h_out, relu)
        with self._cuda_device:
            _kernel(self.xp, _RNN_FWD[bool(relu)], h.dtype)(gx, self.matmul(h, w), h_out)

    def rnn_step_backward(self, dh, dout, h, w, da, relu):
        if not _fused(h, w, da, dh, dout):
            return NumpyRNN.rnn_step_backward(self, dh, dout, h, w, da, relu)
        with self._cuda_device:
            _kernel(self.xp, _RNN_BWD[bool(relu)], h.dtype)(dh, dout, h, da)
            return self.matmul(da, w)

    def gru_step_forward(self, h, w, b, gx, gates, h_out):
        if not _fused(h, w, gx, gates, h_out, b):
            return NumpyRNN.gru_step_forward(self, h, w, b, gx, gates, h_out)
        with self._cuda_device:
            bias = not isinstance(b, (int, float))          # 0: the layer has no b_hh
            args = (gx, self.matmul(h, w)) + ((b,) if bias else ())
            _kernel(self.xp, _GRU_FWD[bias], gates.dtype)(*args, h, 0, h.shape[-1], gates, h_out)   # offset 0

    def gru_step_backward(self, dh, dout, dhz, gates, h, w, dgx, dgh):
        if not _fused(gates, w, h, dgx, dgh, dh, dout, dhz):
            return NumpyRNN.gru_step_backward(self, dh, dout, dhz, gates, h, w, dgx, dgh)
        with self._cuda_device:
            dhz_out = self.xp.empty_like(h)
            douts = () if isinstance(dout, (int, float)) else (dout,)     # 0: no gradient reached the output
            _kernel(self.xp, _GRU_BWD[bool(douts)], gates.dtype)(dh, *douts, dhz, gates, h, 0, 0, h.shape[-1], dgx,
                                                                 dgh, dhz_out)              # offset 0
            return self.matmul(dgh, w), dhz_out


    # -- a whole direction (NumpyRNN's *_steps): one dtype check, kernel lookup and device entry for all steps;
    # each step makes the launches of the step methods above (its product and its cell kernel), with the same
    # values. The product is CuPy's matmul, as CupyBackend.matmul calls it for two float matrices outside a
    # CUDA graph's capture (which takes self.matmul: cuBLAS by pointer); no input is written.
    def _mm(self):
        return self.matmul if self.capturing else self.xp.matmul

    def lstm_forward_steps(self, h, w, gx, c, A, C, TC, OUT, steps):
        if not _fused(h, w, gx, c, A, C, TC, OUT):
            return NumpyRNN.lstm_forward_steps(self, h, w, gx, c, A, C, TC, OUT, steps)
        kern, mm, (_, B, H) = _kernel(self.xp, _LSTM_FWD_SEQ, A.dtype), self._mm(), OUT.shape
        cp, cp_off, n = c, 0, B * H
        with self._cuda_device:
            for t in steps:
                off = t * n
                kern(gx, mm(h, w), cp, cp_off, off, H, A, C, TC, OUT, size=n)
                h, cp, cp_off = OUT[t], C, off          # the next product's h: the one view a step makes
        return h, (c if cp is c else C[steps[-1]])

    def lstm_backward_steps(self, dh, dout, dc, A, TC, C, c0, w, DA, steps):
        if not _fused(A, w, TC, C, c0, DA, dh, dc, 0 if dout is None else dout):
            return NumpyRNN.lstm_backward_steps(self, dh, dout, dc, A, TC, C, c0, w, DA, steps)
        xp, (_, B, H) = self.xp, TC.shape
        kern, mm, dt, n = _kernel(xp, _LSTM_BWD_SEQ[dout is not None], A.dtype), self._mm(), A.dtype, B * H
        douts = () if dout is None else (dout,)
        with self._cuda_device:
            # dc_{t-1} alternates between two buffers: a step reads the one the step after it wrote
            flip = (xp.empty((B, H), dtype=dt), xp.empty((B, H), dtype=dt))
            for k in range(len(steps) - 1, -1, -1):
                t = steps[k]
                cp, cp_off = (C, steps[k - 1] * n) if k else (c0, 0)
                dc_prev = flip[k & 1]
                kern(dh, *douts, dc, A, TC, cp, cp_off, t * n, H, DA, dc_prev)
                dh, dc = mm(DA[t], w), dc_prev          # the product's da: the one view a step makes
        return dh, dc

    def rnn_forward_steps(self, h, w, gx, OUT, steps, relu):
        if not _fused(h, w, gx, OUT):
            return NumpyRNN.rnn_forward_steps(self, h, w, gx, OUT, steps, relu)
        kern, mm = _kernel(self.xp, _RNN_FWD[bool(relu)], OUT.dtype), self._mm()
        with self._cuda_device:
            for t in steps:
                ht = OUT[t]
                kern(gx[t], mm(h, w), ht)
                h = ht
        return h

    def rnn_backward_steps(self, dh, dout, OUT, w, DA, steps, relu):
        if not _fused(OUT, w, DA, dh, 0 if dout is None else dout):
            return NumpyRNN.rnn_backward_steps(self, dh, dout, OUT, w, DA, steps, relu)
        kern, mm = _kernel(self.xp, _RNN_BWD[bool(relu)], OUT.dtype), self._mm()
        with self._cuda_device:
            for k in range(len(steps) - 1, -1, -1):
                t = steps[k]
                da = DA[t]
                kern(dh, 0 if dout is None else dout[t], OUT[t], da)
                dh = mm(da, w)
        return dh

    def gru_forward_steps(self, h, w, b, gx, S, OUT, steps):
        if not _fused(h, w, gx, S, OUT, b):
            return NumpyRNN.gru_forward_steps(self, h, w, b, gx, S, OUT, steps)
        bias = not isinstance(b, (int, float))              # 0: the layer has no b_hh
        kern, mm, H = _kernel(self.xp, _GRU_FWD[bias], S.dtype), self._mm(), h.shape[-1]
        n, bs = h.size, (b,) if bias else ()
        with self._cuda_device:
            for t in steps:
                ht = OUT[t]                                 # the next product's h: the one view a step makes
                kern(gx, mm(h, w), *bs, h, t * n, H, S, ht)
                h = ht
        return h

    def gru_backward_steps(self, dh, dout, S, OUT, h0, w, DGX, DGH, steps):
        if not _fused(S, w, OUT, h0, DGX, DGH, dh, 0 if dout is None else dout):
            return NumpyRNN.gru_backward_steps(self, dh, dout, S, OUT, h0, w, DGX, DGH, steps)
        xp, (_, B, H) = self.xp, OUT.shape
        kern, mm, dt, dhz = _kernel(xp, _GRU_BWD[dout is not None], S.dtype), self._mm(), S.dtype, 0
        douts, n = () if dout is None else (dout,), B * H
        with self._cuda_device:
            flip = (xp.empty((B, H), dtype=dt), xp.empty((B, H), dtype=dt))    # as lstm_backward_steps' dc
            for k in range(len(steps) - 1, -1, -1):
                t = steps[k]
                hp, hp_off = (OUT, steps[k - 1] * n) if k else (h0, 0)
                dhz_out = flip[k & 1]
                kern(dh, *douts, dhz, S, hp, hp_off, t * n, H, DGX, DGH, dhz_out)
                dh, dhz = mm(DGH[t], w), dhz_out            # the product's dgh: the one view a step makes
        return dh, dhz
