"""RAdam: Adam with a rectified adaptive learning rate (PyTorch's update rule)."""
import math

from .optimizer import Optimizer, real_view, apply_weight_decay
from .adamax import _check_betas
from .._trace_hooks import active, host_values

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """m, v as Adam;  rho_t = rho_inf - 2 t b2^t / (1 - b2^t) (rho_inf = 2 / (1 - b2) - 1);  while rho_t > 5,
    p -= lr r_t sqrt(1 - b2^t) / (1 - b1^t) m / (sqrt(v) + eps) with the rectification r_t, else
    p -= lr m / (1 - b1^t). Weight decay adds wd * p to g, or with ``decoupled_weight_decay`` scales p
    by 1 - lr wd.

    PyTorch's switches ``foreach``, ``capturable``, ``differentiable`` are taken in PyTorch's positions and kept
    in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable, differentiable=differentiable))

    _dynamic_state = ("step",)
    _dynamic_options = ("lr",)
    _ranges = (("lr", "learning rate"), ("eps", "epsilon value"), ("weight_decay", "weight_decay value"))

    def _check_group(self, g):
        super()._check_group(g)
        _check_betas(g["betas"])

    def _init_state(self, state, p, group):
        state["step"] = 0
        state["exp_avg"] = self._zeros_state(p)
        state["exp_avg_sq"] = self._zeros_state(p)

    def _update_group(self, group):
        """One fused update per (device, dtype, step coefficients) of the group (backend.radam_step: the
        rectified update once rho_t > 5, the plain one before); while ag.compile traces, the step-by-step
        update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        self._moments_update(group, _count_step, "radam_step")   # a bucket per step coefficients

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        decoupled = group["decoupled_weight_decay"]
        for p, xp, a, g, state in self._reference_params(group, self._init_state):
            # both branches as one expression (the host picks the coefficients; under ag.compile the
            # program stays one): p -= m * (adaptive / (sqrt(v) + eps) + plain)
            decay, adaptive, plain = host_values(_count_step, state, group, dtype=a.dtype, device=p.device)
            g = apply_weight_decay(a, g, wd, decoupled, decay)
            m, v = real_view(state["exp_avg"].data), real_view(state["exp_avg_sq"].data)
            m += (1 - beta1) * (g - m)
            v *= beta2
            v += (1 - beta2) * (g * g)
            d = xp.sqrt(v)
            d += eps
            a -= m * (adaptive / d + plain)


def _count_step(state, group):
    state["step"] = t = state.get("step", 0) + 1
    lr, (beta1, beta2) = group["lr"], group["betas"]
    bias1, bias2 = 1 - beta1 ** t, 1 - beta2 ** t
    rho_inf = 2 / (1 - beta2) - 1
    rho_t = rho_inf - 2 * t * (beta2 ** t) / bias2
    decay = 1 - lr * group["weight_decay"]
    if rho_t > 5.0:
        rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
        return decay, lr * rect * math.sqrt(bias2) / bias1, 0.0
    return decay, 0.0, lr / bias1
