"""Adam and AdamW (decoupled weight decay), with optional AMSGrad (PyTorch's update rule)."""
import math

from .optimizer import Optimizer, check_range, real_view, apply_weight_decay
from .._trace_hooks import active, host_values
from ..tensor import Tensor

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2  (v_max = max(v_max, v) with amsgrad);
    p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps). Weight decay adds wd * p to g, or
    with ``decoupled_weight_decay`` (AdamW) first scales p by 1 - lr * wd.

    PyTorch's switches ``foreach``, ``capturable``, ``differentiable``, ``fused`` are taken in PyTorch's
    positions and kept in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call
    per device and dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, *,
                 foreach=None, maximize=False, capturable=False, differentiable=False, fused=None,
                 decoupled_weight_decay=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    _ranges = (("lr", "learning rate"), ("eps", "epsilon value"), ("weight_decay", "weight_decay value"))
    _dynamic_state = ("step",)       # counted by host_values, so not part of ag.compile's signature
    _dynamic_options = ("lr",)       # read through host_values too

    def _check_group(self, g):
        super()._check_group(g)
        betas = g["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"Invalid betas: expected a pair of numbers, got {betas!r}")
        check_range(betas[0], "beta parameter at index 0", 0.0, 1.0)
        check_range(betas[1], "beta parameter at index 1", 0.0, 1.0)

    def _update_group(self, group):
        """One fused update per (device, dtype, step count) of the group (backend.adam_step); while ag.compile
        traces, the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        amsgrad = group["amsgrad"]
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]

        def prepare(p, state):
            if not state:
                self._init_state(state, p, amsgrad)
            numbers = _count_step(state, group)     # the bias corrections: one bucket per step count
            return state["step"], numbers, (state["exp_avg"].data, state["exp_avg_sq"].data,
                                             state["max_exp_avg_sq"].data if amsgrad else None)

        def update(backend, numbers, params, grads, m, v, vmax):
            step_size, bias2, decay = numbers
            backend.adam_step(params, grads, m, v, vmax, beta1, beta2, eps, wd, group["decoupled_weight_decay"],
                              group["maximize"], step_size, bias2, decay)
        self._fused_update(group, prepare, update)

    @staticmethod
    def _init_state(state, p, amsgrad):
        xp = p.device.backend.xp
        state["step"] = 0
        state["exp_avg"] = Tensor._make(xp.zeros_like(p.data), p.device)
        state["exp_avg_sq"] = Tensor._make(xp.zeros_like(p.data), p.device)
        if amsgrad:
            state["max_exp_avg_sq"] = Tensor._make(xp.zeros_like(p.data), p.device)

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        (beta1, beta2), eps = group["betas"], group["eps"]
        wd, amsgrad, decoupled = group["weight_decay"], group["amsgrad"], group["decoupled_weight_decay"]
        init = lambda state, p, group: self._init_state(state, p, amsgrad)    # noqa: E731
        for p, xp, a, g, state in self._reference_params(group, init):
            # the step count lives on the host: under ag.compile every replay counts again (host_values)
            # the learning rate too: a scheduler's change needs no new trace
            step_size, bias2, decay = host_values(_count_step, state, group, dtype=a.dtype, device=p.device)
            g = apply_weight_decay(a, g, wd, decoupled, decay)
            m, v = real_view(state["exp_avg"].data), real_view(state["exp_avg_sq"].data)
            m *= beta1
            m += (1 - beta1) * g
            v *= beta2
            tmp = xp.multiply(g, g, out=xp.empty_like(a))     # out=: a 0-d product would be a scalar
            tmp *= 1 - beta2
            v += tmp
            if amsgrad:
                vmax = real_view(state["max_exp_avg_sq"].data)
                xp.maximum(vmax, v, out=vmax)
                v = vmax
            xp.sqrt(v, out=tmp)
            tmp /= bias2
            tmp += eps
            xp.divide(m, tmp, out=tmp)
            tmp *= step_size
            a -= tmp


def _count_step(state, group):
    """Count one step; the bias corrections of step t, lr / (1 - b1^t) and sqrt(1 - b2^t), and the
    decoupled weight decay factor 1 - lr * wd."""
    state["step"] = t = state.get("step", 0) + 1
    lr, (beta1, beta2) = group["lr"], group["betas"]
    return lr / (1 - beta1 ** t), math.sqrt(1 - beta2 ** t), 1 - lr * group["weight_decay"]


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * wd before the Adam step); weight_decay 1e-2.

    PyTorch's switches ``foreach``, ``capturable``, ``differentiable``, ``fused`` are taken in PyTorch's
    positions and kept in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call
    per device and dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 maximize=False, foreach=None, capturable=False, differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
