"""Fused kernels: cross-entropy / nll / log-softmax / softmax forward and backward. See backends/kernels/__init__.py
for the contract.

The losses take 2-D input (N, C) with N, C > 0 and the pair ``(t, ignore)`` that ``class_targets`` returns
for class indices (N,) (checked there; opaque to the caller: on the CPU the targets with the ignored ones at
0 and the mask of the others, on a GPU the targets themselves and ignore_index, which the kernels compare
with); no class weights or label smoothing (the ops fall back to their composed form otherwise).
``reduction`` is PyTorch's 'mean', 'sum' or 'none'; ignored targets contribute nothing and 'mean' divides
by the number of the others (every target ignored: nan, with a zero gradient). The forward returns
``(loss, *state)``; the backward takes ``state`` (opaque arrays) and returns the input's gradient.
``class_targets`` checks the targets: on the CPU at once, on a GPU in two launches (CupyLosses.class_targets,
no sync), raised at the next synchronisation.
"""
import numpy as np

_BIG = 1 << 62          # the check's key: a negative target t becomes _BIG - t, above every class index


# --------------------------------------------------------------------------- NumPy
def _shifted(xp, a, dim):
    """a - max(a) along dim (a row that is all -inf or holds +inf shifts by 0, as the composed ops did)."""
    if xp is np and a.ndim == 2 and dim in (1, -1) and a.shape[1] <= 64 and a.shape[0] >= 16:
        # NumPy reduces short rows one by one (7.4 us for (128, 10) float32); the transposed copy
        # reduced along its first axis is one vectorised pass (1.7 us), with the same maxima
        m = xp.ascontiguousarray(a.T).max(axis=0)[:, None]
    else:
        m = a.max(axis=dim, keepdims=True)
    return a - xp.where(xp.isfinite(m), m, 0)


def _scale(xp, coef, count, reduction):
    """Each element's factor in the reduced loss: coef (valid targets 1, ignored 0), divided by their
    ``count`` (coef's sum) for 'mean' (a zero count: zeros, so the gradient is 0, not nan; no branch on the
    count, which a GPU or ag.compile's trace would have to read back)."""
    if reduction != "mean":
        return coef
    return coef / xp.maximum(count, 1)


def _reduce(losses, count, reduction):
    if reduction == "none":
        return losses
    out = losses.sum()
    if reduction == "mean":
        with np.errstate(invalid="ignore", divide="ignore"):
            out = out / count                  # every target ignored: nan, as in PyTorch
    return out


class NumpyLosses:
    """NumPy implementations (mixed into NumpyBackend)."""

    def log_softmax(self, x, dim):
        """x - logsumexp(x) along dim, shifted by the max (= LogSoftmax's composed arithmetic)."""
        if x.shape[dim] == 0:
            return x.copy()
        xp = self.xp
        s = _shifted(xp, x, dim)
        e = xp.exp(s)
        s -= xp.log(e.sum(axis=dim, keepdims=True))
        return s

    def log_softmax_backward(self, grad, y, dim):
        """grad - exp(y) * sum(grad) along dim, for y = log_softmax(x)."""
        out = self.xp.exp(y)
        out *= grad.sum(axis=dim, keepdims=True)
        return self.xp.subtract(grad, out, out=out)

    def softmax(self, x, dim):
        """exp(x) / sum(exp(x)) along dim, shifted by the max."""
        if x.shape[dim] == 0:
            return x.copy()
        e = self.xp.exp(_shifted(self.xp, x, dim))
        e /= e.sum(axis=dim, keepdims=True)
        return e

    def softmax_backward(self, grad, y, dim):
        """y * (grad - sum(grad * y)) along dim, for y = softmax(x): (grad y) - y sum(grad y)."""
        gy = grad * y
        s = gy.sum(axis=dim, keepdims=True)
        s = y * s
        return self.xp.subtract(gy, s, out=gy)


    def class_targets(self, t, ignore_index, n, exc_type, message):
        """The fused losses' targets ``(t, ignore)`` for class indices ``t``: here (t with the entries equal
        to ignore_index at 0, the mask of the others), checked with check_range (``exc_type(message)`` unless
        every target not ignored is in [0, n)); new arrays, never ``t`` itself."""
        valid = t != ignore_index
        safe = self.xp.where(valid, t, 0)
        self.check_range(safe, 0, n, exc_type, message)
        return safe, valid

    def target_mask(self, t, ignore):
        """(the targets with the ignored ones at 0, the mask of the others) of class_targets' pair."""
        return t, ignore

    def nll_loss(self, logp, t, ignore, reduction):
        """-logp[i, t_i] reduced (NllLoss's arithmetic), for class_targets' pair ``(t, ignore)`` (ignored
        targets contribute nothing); returns (loss, *state) for nll_loss_backward."""
        safe, valid = t, ignore
        xp = self.xp
        coef = valid.astype(logp.dtype)
        losses = logp[xp.arange(len(safe)), safe]     # a new array (take_along_axis would build its index in Python)
        xp.negative(losses, out=losses)
        # an ignored target adds 0 (its placeholder class 0 may hold -inf: times 0 that would be nan)
        losses = xp.where(valid, losses, 0)
        count = coef.sum()                            # the valid targets, summed once for the loss and its scale
        return _reduce(losses, count, reduction), safe[:, None], _scale(xp, coef, count, reduction)

    def nll_loss_backward(self, grad, logp, t, ignore, state, reduction):
        """-grad * scale_i at each row's target column, zeros elsewhere (state: nll_loss's arrays)."""
        idx, scale = state
        xp = self.xp
        out = xp.zeros(logp.shape, dtype=scale.dtype)
        out[xp.arange(len(idx)), idx[:, 0]] = grad * -scale       # one target per row: no accumulation
        return out

    def cross_entropy(self, x, t, ignore, reduction):
        """nll_loss(log_softmax(x, 1), t) (the same arithmetic); returns (loss, *state)."""
        logp = self.log_softmax(x, 1)
        loss, idx, scale = self.nll_loss(logp, t, ignore, reduction)
        return loss, logp, idx, scale

    def cross_entropy_backward(self, grad, x, t, ignore, state, reduction):
        """(softmax(x) - onehot(t)) * grad * scale_i: nll_loss's then log_softmax's backward, in two passes."""
        logp, idx, scale = state
        g = grad * scale
        xp = self.xp
        out = xp.exp(logp)
        out *= g.reshape(idx.shape)
        out[xp.arange(len(idx)), idx[:, 0]] -= g                   # one target per row
        return out


# --------------------------------------------------------------------------- CuPy
_names = {}            # dtype -> its name: NumPy's dtype.name is Python code (~1.8 us), a dict get is not


def _name(dt):
    n = _names.get(dt)
    if n is None:
        n = _names[dt] = dt.name
    return n


_kernels = {}           # (cupy module, kernel, dtypes) -> the kernel, built once
_CTYPE = {"float32": "float", "float64": "double"}

# the max shift, as the CPU's: a row whose max is not finite shifts by 0 (m - m is 0 only for finite m)
_M = "(m - m == 0 ? m : 0)"


def _kernel(cp, kind, dts, make):
    key = (cp, kind, dts)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = make(*dts)
    return k


def _ew(cp, kind, dts, ins, out, body):
    """An ElementwiseKernel; ``{0}``, ``{1}`` are the dtypes ``dts`` in its parameters, their C types in its body."""
    return _kernel(cp, kind, dts, lambda *d: cp.ElementwiseKernel(ins.format(*d), out.format(*d),
                                                                     body.format(*(_CTYPE.get(t, t) for t in d)),
                                                                     f"ag_{kind}"))


def _red(cp, kind, dts, ins, out, expr):
    """A sum of ``expr`` (ReductionKernel), accumulated in the output's dtype."""
    def make(*d):
        otype, oname = out.format(*d).split()
        # reduce_type is pasted into the CUDA source: a C type name (float16 sums in float, as CuPy's do)
        return cp.ReductionKernel(ins.format(*d), f"{otype} {oname}", expr, "a + b", f"{oname} = a", "0",
                                  f"ag_{kind}", reduce_type=_CTYPE.get(otype, "float"))
    return _kernel(cp, kind, dts, make)


class CupyLosses:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached. Launches per
    call (N, C > 0): log_softmax/softmax 3 forward (row max, row sum, result), 2 backward (row sum, result);
    nll_loss 1 forward (+ 1 count for 'mean'), 1 backward; cross_entropy 3 forward (row max, row sum, loss;
    + 1 count for 'mean'), 1 backward; class_targets 2 (the check: a reduction and a flag). The kernels take
    the targets and ignore_index and test t != ignore_index themselves (no mask, no targets with the
    ignored ones at 0)."""

    def _index_targets(self, t):
        """t as int32 or int64 (the kernels are built for those; other integer dtypes are cast, one launch)."""
        return t if _name(t.dtype) in ("int32", "int64") else t.astype(np.int64)

    # -- index checks, written into the pending-check array (cupy_backend.assert_all's slot) ----------------
    def check_range(self, a, low, high, exc_type, message):
        """Backend.check_range in three launches instead of base.py's sixteen: one key per entry (a when
        a >= low, _BIG + low - a below), its max, and one 2-element kernel that records (code, offending
        entry: the lowest when one is below low, else the highest) when the max is >= high and no other
        check failed first. Signed integer arrays; others take base.py's way."""
        if a.dtype.kind != "i" or _name(a.dtype) not in ("int8", "int16", "int32", "int64"):
            return super().check_range(a, low, high, exc_type, message)
        if not a.size:
            return
        cp = self.xp
        code = self._check_code(exc_type, message)
        with self._cuda_device:
            key = _ew(cp, "range_key", (_name(a.dtype),), "{0} a, int64 low, int64 big", "int64 k",
                      "k = a < low ? big + (low - a) : a")(a, low, _BIG)
            self._range_flag(key.max(), low, high, code)

    def _check_code(self, exc_type, message):
        code = self._codes.get((exc_type, message))
        if code is None:
            code = self._codes[(exc_type, message)] = len(self._messages)
            self._messages.append((exc_type, message))
        return code

    def _range_flag(self, kmax, low, high, code):
        """check_range's last launch: records (code, the offending entry) in the pending-check array when the
        largest key ``kmax`` (0-d int64) is >= high and no other check failed first."""
        cp = self.xp
        with self._cuda_device:
            slot = self._loss_const("slot", 2)
            # e0, the first slot as it was: CuPy copies an input overlapping the output before the launch (a
            # device copy), so slot 1 sees the old code too and the first failing check keeps its message
            flag = _ew(cp, "range_flag", (), "int64 e, int64 e0, int64 slot, int64 k, int64 low, int64 high, "
                       "int64 big, int64 code", "int64 r",
                       "r = (k >= high && e0 == 0) ? (slot == 0 ? code : (k >= big ? low - (k - big) : k)) : e")
            err = self._err
            if err is None:                  # the first check since the last read: both slots written whole
                self._err = flag(0, 0, slot, kmax, low, high, _BIG, code, self._err_buf)
            else:
                flag(err, err[:1], slot, kmax, low, high, _BIG, code, err)

    def class_targets(self, t, ignore_index, n, exc_type, message):
        """The fused losses' targets ``(t, ignore)``: here ``t`` (cast to int64 unless int32 or int64: one
        launch) and ``ignore_index``, which the loss kernels compare with. Checked as check_range checks the
        targets with the ignored ones at 0, in two launches: one reduction of the key straight from t (an
        ignored target 0, t < 0 _BIG - t, else t) to its max, and check_range's flag kernel; the same
        message and offending entry. The kernels read t and never write it."""
        t = self._index_targets(t)
        if t.size:
            cp = self.xp
            code = self._check_code(exc_type, message)
            with self._cuda_device:
                key = _kernel(cp, "target_key", (_name(t.dtype),), lambda d: cp.ReductionKernel(
                    f"{d} t, int64 ignore, int64 big", "int64 k", "t == ignore ? 0 : (t < 0 ? big - t : t)",
                    "max(a, b)", "k = a", "0", "ag_target_key", reduce_type="long long"))(t, ignore_index, _BIG)
            self._range_flag(key, 0, n, code)
        return t, ignore_index

    def target_mask(self, t, ignore):
        """(the targets with the ignored ones at 0, the mask of the others) of class_targets' pair. 2 launches."""
        valid = t != ignore
        return self.xp.where(valid, t, 0), valid


    def _loss_const(self, what, n):
        """arange(n) (int64) on this device, made once: the class index j of a (1, C) operand."""
        cache = self.__dict__.setdefault("_loss_consts", {})
        a = cache.get((what, n))
        if a is None:
            with self._cuda_device:
                a = cache[(what, n)] = self.xp.arange(n, dtype=np.int64)
        return a

    def _count(self, t, ignore, dt):
        """The number of targets not ignored, as a 0-d array of dt (one launch)."""
        return _red(self.xp, "count_valid", (dt, _name(t.dtype)), "{1} t, int64 ign", "{0} y", "t != ign ? 1 : 0")(
            t, ignore)

    # -- log_softmax / softmax -----------------------------------------------------------------------------
    def _row_stats(self, x, dim):
        """(max along dim, sum of exp(x - shift) along dim), both keepdims."""
        cp = self.xp
        dt = _name(x.dtype)
        m = x.max(axis=dim, keepdims=True)
        s = _red(cp, "sumexp", (dt,), "{0} x, {0} m", "{0} y", f"exp(x - {_M})")(x, m, axis=dim, keepdims=True)
        return m, s

    def log_softmax(self, x, dim):
        """x - logsumexp(x) along dim, shifted by the max (= LogSoftmax's composed arithmetic). 3 launches."""
        if x.shape[dim] == 0 or x.size == 0:
            return x.copy()
        m, s = self._row_stats(x, dim)
        return _ew(self.xp, "log_softmax", (_name(x.dtype),), "{0} x, {0} m, {0} s", "{0} y",
                   f"y = x - {_M} - log(s)")(x, m, s)

    def log_softmax_backward(self, grad, y, dim):
        """grad - exp(y) * sum(grad) along dim, for y = log_softmax(x). 2 launches."""
        gs = grad.sum(axis=dim, keepdims=True)
        return _ew(self.xp, "log_softmax_bw", (_name(y.dtype),), "{0} g, {0} y, {0} gs", "{0} r",
                   "r = g - exp(y) * gs")(grad, y, gs)

    def softmax(self, x, dim):
        """exp(x) / sum(exp(x)) along dim, shifted by the max. 3 launches."""
        if x.shape[dim] == 0 or x.size == 0:
            return x.copy()
        m, s = self._row_stats(x, dim)
        return _ew(self.xp, "softmax", (_name(x.dtype),), "{0} x, {0} m, {0} s", "{0} y",
                   f"y = exp(x - {_M}) / s")(x, m, s)

    def softmax_backward(self, grad, y, dim):
        """y * (grad - sum(grad * y)) along dim, for y = softmax(x). 2 launches."""
        dt = _name(y.dtype)
        gs = _red(self.xp, "dot_rows", (dt,), "{0} g, {0} y", "{0} r", "g * y")(grad, y, axis=dim, keepdims=True)
        return _ew(self.xp, "softmax_bw", (dt,), "{0} g, {0} y, {0} gs", "{0} r", "r = y * (g - gs)")(grad, y, gs)

    # -- nll_loss / cross_entropy ---------------------------------------------------------------------------
    def _reduce_args(self, t, ignore, reduction, dt):
        """(reduction axis, divisor) of the loss kernels: 'mean' divides by the count of valid targets."""
        if reduction == "none":
            return 1, 1
        return None, (self._count(t, ignore, dt) if reduction == "mean" else 1)

    def nll_loss(self, logp, t, ignore, reduction):
        """-logp[i, t_i] reduced, in one reduction over (N, C) (+ the count of valid targets for 'mean');
        returns (loss, *state) for nll_loss_backward (t, ignore: class_targets' targets and ignore_index)."""
        t = self._index_targets(t)
        cp, dt, it = self.xp, _name(logp.dtype), _name(t.dtype)
        n, c = logp.shape
        tc = t.reshape(n, 1)
        j = self._loss_const("classes", c)
        axis, div = self._reduce_args(t, ignore, reduction, dt)
        loss = _red(cp, "nll", (dt, it), "{0} p, {1} t, int64 j, int64 ign, {0} n, {0} nan", "{0} y",
                    "(j == t && t != ign) ? -p / n : (n == 0 ? nan : 0)")(logp, tc, j, ignore, div,
                                                                           float("nan"), axis=axis)
        return loss, (None if div.__class__ is int else div)

    def nll_loss_backward(self, grad, logp, t, ignore, state, reduction):
        """-grad / n at each valid row's target column, zeros elsewhere. 1 launch."""
        t = self._index_targets(t)
        div, = state
        n, c = logp.shape
        g = grad.reshape(n, 1) if reduction == "none" else grad
        return _ew(self.xp, "nll_bw", (_name(logp.dtype), _name(t.dtype)), "{0} g, {1} t, int64 j, int64 ign, {0} n",
                   "{0} r", "r = (j == t && t != ign) ? -g / n : 0")(
                       g, t.reshape(n, 1), self._loss_const("classes", c), ignore, 1 if div is None else div)

    def cross_entropy(self, x, t, ignore, reduction):
        """nll_loss(log_softmax(x, 1), t) without log_softmax's result: the row max, the row sum of exp and
        one reduction of -(x - m - log(s))[i, t_i] (+ the count for 'mean'), the two ops' arithmetic, so the
        loss is theirs bit for bit; returns (loss, m, s, count)."""
        t = self._index_targets(t)
        cp, dt, it = self.xp, _name(x.dtype), _name(t.dtype)
        n, c = x.shape
        tc = t.reshape(n, 1)
        j = self._loss_const("classes", c)
        m, s = self._row_stats(x, 1)
        axis, div = self._reduce_args(t, ignore, reduction, dt)
        loss = _red(cp, "cross_entropy", (dt, it),
                    "{0} x, {0} m, {0} s, {1} t, int64 j, int64 ign, {0} n, {0} nan", "{0} y",
                    f"(j == t && t != ign) ? -(x - {_M} - log(s)) / n : (n == 0 ? nan : 0)")(
                        x, m, s, tc, j, ignore, div, float("nan"), axis=axis)
        return loss, m, s, (None if div.__class__ is int else div)

    def cross_entropy_backward(self, grad, x, t, ignore, state, reduction):
        """(softmax(x) - onehot(t)) * grad / n on valid rows, 0 on ignored ones. 1 launch. Written as
        nll_loss_backward then log_softmax_backward (gs, the row's sum, is its one nonzero term), so the
        gradient is the two ops' bit for bit."""
        t = self._index_targets(t)
        m, s, div = state
        n, c = x.shape
        g = grad.reshape(n, 1) if reduction == "none" else grad
        return _ew(self.xp, "cross_entropy_bw", (_name(x.dtype), _name(t.dtype)),
                   "{0} g, {0} x, {0} m, {0} s, {1} t, int64 j, int64 ign, {0} n", "{0} r",
                   f"{{0}} gs = t != ign ? -g / n : 0; r = (j == t ? gs : 0) - exp(x - {_M} - log(s)) * gs")(
                       g, x, m, s, t.reshape(n, 1), self._loss_const("classes", c), ignore,
                       1 if div is None else div)


def _float16_through_numpy_twin(cls):
    """float16 logits run the NumPy twin (written against self.xp: CuPy ufuncs, float32 where it sums):
    CuPy's float16 has no arithmetic of its own, so ``c ? h : 0`` mixes types C cannot convert both ways."""
    # name -> where class_targets' pair (t, ignore) sits in the arguments: the twin takes NumPy's pair
    # (safe targets, valid mask), which target_mask makes from CuPy's (targets, ignore_index)
    for name, pair in (("log_softmax", None), ("log_softmax_backward", None), ("softmax", None),
                       ("softmax_backward", None), ("nll_loss", 1), ("nll_loss_backward", 2),
                       ("cross_entropy", 1), ("cross_entropy_backward", 2)):
        fused, twin = vars(cls)[name], getattr(NumpyLosses, name)

        def method(self, *args, _fused=fused, _twin=twin, _pair=pair, **kwargs):
            if any(getattr(a, "dtype", None) is not None and a.dtype.char == "e" for a in args):
                if _pair is not None and not hasattr(args[_pair + 1], "dtype"):   # CuPy's pair: ignore_index
                    args = args[:_pair] + tuple(self.target_mask(*args[_pair:_pair + 2])) + args[_pair + 2:]
                return _twin(self, *args, **kwargs)
            return _fused(self, *args, **kwargs)
        method.__name__, method.__doc__ = name, fused.__doc__
        setattr(cls, name, method)


_float16_through_numpy_twin(CupyLosses)
