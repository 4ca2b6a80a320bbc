"""NAdam: Adam with Nesterov momentum and momentum decay (PyTorch's update rule)."""

from .optimizer import Optimizer, real_view, apply_weight_decay
from .adamax import _check_betas
from .._trace_hooks import active, host_values

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """mu_t = b1 (1 - 0.96^(t psi) / 2) (psi = momentum_decay);  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
    d = sqrt(v / (1 - b2^t)) + eps;  p -= lr (1 - mu_t) / (1 - prod mu) g / d + lr mu_{t+1} / (1 - prod mu
    * mu_{t+1}) m / d. Weight decay adds wd * p to g, or with ``decoupled_weight_decay`` scales p by 1 - lr wd.

    PyTorch's switches ``foreach``, ``capturable``, ``differentiable`` are taken in PyTorch's positions and kept
    in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay, decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize, capturable=capturable,
                                      differentiable=differentiable))

    _dynamic_state = ("step", "mu_product")
    _dynamic_options = ("lr",)
    _ranges = (("lr", "learning rate"), ("eps", "epsilon value"), ("weight_decay", "weight_decay value"),
               ("momentum_decay", "momentum_decay value"))

    def _check_group(self, g):
        super()._check_group(g)
        _check_betas(g["betas"])

    def _init_state(self, state, p, group):
        state["step"] = 0
        state["mu_product"] = 1.0
        state["exp_avg"] = self._zeros_state(p)
        state["exp_avg_sq"] = self._zeros_state(p)

    def _update_group(self, group):
        """One fused update per (device, dtype, step coefficients) of the group (backend.nadam_step); while
        ag.compile traces, the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        self._moments_update(group, _count_step, "nadam_step")   # a bucket per step coefficients

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        decoupled = group["decoupled_weight_decay"]
        for p, xp, a, g, state in self._reference_params(group, self._init_state):
            decay, bias2, c_grad, c_avg = host_values(_count_step, state, group, dtype=a.dtype, device=p.device)
            g = apply_weight_decay(a, g, wd, decoupled, decay)
            m, v = real_view(state["exp_avg"].data), real_view(state["exp_avg_sq"].data)
            m += (1 - beta1) * (g - m)
            v *= beta2
            v += (1 - beta2) * (g * g)
            d = xp.sqrt(v / bias2)
            d += eps
            a -= c_grad * (g / d)
            a -= c_avg * (m / d)


def _count_step(state, group):
    """Count one step and advance the momentum product; (1 - lr wd, 1 - b2^t, and the two step sizes)."""
    state["step"] = t = state.get("step", 0) + 1
    lr, (beta1, beta2), psi = group["lr"], group["betas"], group["momentum_decay"]
    mu = beta1 * (1 - 0.5 * 0.96 ** (t * psi))
    mu_next = beta1 * (1 - 0.5 * 0.96 ** ((t + 1) * psi))
    state["mu_product"] = prod = state.get("mu_product", 1.0) * mu
    return (1 - lr * group["weight_decay"], 1 - beta2 ** t, lr * (1 - mu) / (1 - prod),
            lr * mu_next / (1 - prod * mu_next))


