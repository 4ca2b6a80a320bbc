"""L-BFGS with an optional strong-Wolfe line search (PyTorch's algorithm, step for step)."""
from .optimizer import Optimizer, real_view, _copy_state_value, as_state_tensor
from ..autograd.grad_mode import enable_grad, no_grad
from ..tensor import Tensor
from .._trace_hooks import active

__all__ = ["LBFGS"]


class LBFGS(Optimizer):
    """Limited-memory BFGS: each ``step(closure)`` runs up to ``max_iter`` iterations, each a direction
    from the last ``history_size`` curvature pairs and a step of ``lr`` (the first one scaled by
    1 / sum|g|), or the step the strong-Wolfe line search finds (``line_search_fn="strong_wolfe"``).
    ``closure()`` zeroes the gradients, computes the loss, calls backward and returns the loss.
    One parameter group only; the state holds flat vectors over all parameters."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group):
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    # -- flat vectors over all parameters -------------------------------------------------------
    def _xp(self):
        return self._params[0].device.backend.xp

    def _gather_flat_grad(self):
        xp = self._xp()
        views = []
        for p in self._params:
            a = real_view(p.data, writable=False)
            if p.grad is None:
                views.append(xp.zeros(a.size, dtype=a.dtype))
            else:
                views.append(real_view(p.grad.data, writable=False).reshape(-1))
        return xp.concatenate(views) if len(views) > 1 else views[0].copy()

    # Why no multi-tensor update kernel of its own, as the other optimizers have: L-BFGS works on one flat
    # vector over all parameters (gathered by one concatenate), so its two-loop recursion and line search are
    # already one array op over every parameter at a time, and each iteration reads scalars back to the host
    # (dot products, the curvature test, the line search's conditions), so a kernel could not run ahead of
    # the host anyway. The one per-parameter loop is the step itself, p += t d[p's slice]: that goes to the
    # backend's multi-tensor SGD update (one kernel launch for all parameters on CUDA) when the parameters
    # share the flat vector's dtype.
    def _add_grad(self, step_size, update):
        arrays, slices, offset = [], [], 0
        for p in self._params:
            a = real_view(p.data)
            arrays.append(a)
            slices.append(update[offset:offset + a.size].reshape(a.shape))
            offset += a.size
        if active() is None and all(a.dtype == update.dtype for a in arrays):
            self._params[0].device.backend.sgd_step(arrays, slices, None, -float(step_size))
        else:                       # mixed dtypes (the flat vector is promoted), or ag.compile tracing
            for a, u in zip(arrays, slices):
                a += step_size * u
        for p in self._params:
            p._bump_version()

    def _clone_param(self):
        return [p.data.copy() for p in self._params]

    def _set_param(self, params_data):
        xp = self._xp()
        for p, d in zip(self._params, params_data):
            xp.copyto(p.data, d)
            p._bump_version()

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def _update_group(self, group):
        raise RuntimeError("LBFGS.step needs a closure that re-evaluates the model and returns the loss")

    def step(self, closure=None):
        """Run up to ``max_iter`` L-BFGS iterations; ``closure`` re-evaluates the loss (and its gradients).
        Returns the loss of the first evaluation."""
        if closure is None or not callable(closure):
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the model and returns the loss, got "
                               f"{type(closure).__name__}")
        closure = enable_grad()(closure)
        with no_grad():
            return self._step(closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        xp = self._xp()
        dev = self._params[0].device

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1

        flat_grad = self._gather_flat_grad()
        if float(xp.abs(flat_grad).max()) <= tolerance_grad:
            return orig_loss

        arr = _array
        d, t = arr(state.get("d")), state.get("t")
        old_dirs = [arr(v) for v in state.get("old_dirs", [])]
        old_stps = [arr(v) for v in state.get("old_stps", [])]
        ro, H_diag = list(state.get("ro", [])), state.get("H_diag")
        prev_flat_grad, prev_loss = arr(state.get("prev_flat_grad")), state.get("prev_loss")
        al = list(state.get("al") or [None] * history_size)

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the direction
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = float(xp.dot(y, s))
                if ys > 1e-10:
                    if len(old_dirs) == history_size:      # the memory is full: forget the oldest pair
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / float(xp.dot(y, y))
                num_old = len(old_dirs)
                if len(al) < history_size:
                    al = al + [None] * (history_size - len(al))
                q = -flat_grad                             # the two-loop recursion
                for i in range(num_old - 1, -1, -1):
                    al[i] = float(xp.dot(old_stps[i], q)) * ro[i]
                    q -= al[i] * old_dirs[i]
                d = r = q * H_diag
                for i in range(num_old):
                    be_i = float(xp.dot(old_dirs[i], r)) * ro[i]
                    r += (al[i] - be_i) * old_stps[i]

            prev_flat_grad = flat_grad.copy()
            prev_loss = loss

            # the step
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / float(xp.abs(flat_grad).sum())) * lr
            else:
                t = lr
            gtd = float(xp.dot(flat_grad, d))
            if gtd > -tolerance_change:                    # not a descent direction
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = self._clone_param()

                def obj_func(x, t, d):
                    return self._directional_evaluate(closure, x, t, d)
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(xp, obj_func, x_init, t, d, loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:                      # re-evaluate (the last iteration needs no gradient)
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = float(xp.abs(flat_grad).max()) <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            # the stopping conditions
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if float(xp.abs(d * t).max()) <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        wrap = (lambda a: None if a is None else Tensor._make(a, dev))
        state["d"], state["t"] = wrap(d), t
        state["old_dirs"], state["old_stps"] = [wrap(v) for v in old_dirs], [wrap(v) for v in old_stps]
        state["ro"], state["H_diag"], state["al"] = ro, H_diag, al
        state["prev_flat_grad"], state["prev_loss"] = wrap(prev_flat_grad), prev_loss
        return orig_loss

    # -- saving and loading: flat vectors and lists of them ---------------------------------------
    def state_dict(self):
        sd = super().state_dict()
        for st in sd["state"].values():
            for k, v in st.items():
                if isinstance(v, list):
                    st[k] = [x.detach()._copy() if isinstance(x, Tensor) else x for x in v]
        return sd

    def _load_state_value(self, name, value, param, index):
        if name in _SCALAR_STATE:           # numbers; PyTorch's state dict holds some as 0-d tensors
            if isinstance(value, (list, tuple)):
                return [_number(x) for x in value]
            return _number(value)
        if isinstance(value, (list, tuple)):
            return [_flat_value(x, param) for x in value]
        return _flat_value(value, param)


# the state entries that are numbers (or lists of numbers), not flat vectors
_SCALAR_STATE = ("t", "H_diag", "prev_loss", "ro", "al", "func_evals", "n_iter")


def _number(v):
    """A scalar of the L-BFGS state as a Python number (a one-element tensor, as PyTorch saves t, ro, al and
    H_diag, becomes a float; None and ints stay)."""
    t = as_state_tensor(v)               # a Tensor, or an array of another library (PyTorch's own state dict)
    if t is not None:
        if t.data.size != 1:
            raise ValueError(f"LBFGS.load_state_dict: expected a number, got a tensor of shape {tuple(t.shape)}")
        return float(t.item())
    return v


def _array(v):
    return v.data if isinstance(v, Tensor) else v


def _flat_value(value, param):
    """A flat vector (or a number) of the L-BFGS state, onto the parameters' device and dtype."""
    out = _copy_state_value(value, param)
    if isinstance(out, Tensor) and out.data.dtype.kind == "c":
        raise ValueError("LBFGS.load_state_dict: the flat state vectors are real")
    return out


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), kept inside ``bounds``."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square ** 0.5
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(xp, obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step t along d satisfying the strong Wolfe conditions (bracketing, then zoom by cubic
    interpolation), as PyTorch's LBFGS does; (loss, flat gradient, t, evaluations)."""
    d_norm = float(xp.abs(d).max())
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = float(xp.dot(g_new, d))

    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)                 # extrapolate
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(xp.dot(g_new, d))
        ls_iter += 1

    if ls_iter == max_ls:                                  # reached the limit of evaluations
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom until the interval is small enough or a point satisfies the conditions
    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        # too close to a bound, or progress too slow: move away from the bound
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = float(xp.dot(g_new, d))
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new        # Armijo fails or not the lowest
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True                                          # Wolfe conditions hold
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos], bracket_gtd[high_pos] = bracket_g[low_pos], bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new

    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals
