"""Adamax: Adam with the infinity norm (PyTorch's update rule)."""
from .optimizer import Optimizer, check_range, real_view
from .._trace_hooks import active, host_values

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """m = b1 m + (1 - b1) g;  u = max(b2 u, |g| + eps);  p -= lr / (1 - b1^t) * m / u  (g += wd * p first).

    PyTorch's switches ``foreach``, ``differentiable``, ``capturable`` are taken in PyTorch's positions and kept
    in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, foreach=None, *,
                 maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    _dynamic_state = ("step",)
    _dynamic_options = ("lr",)
    _ranges = (("lr", "learning rate"), ("eps", "epsilon value"), ("weight_decay", "weight_decay value"))

    def _check_group(self, g):
        super()._check_group(g)
        _check_betas(g["betas"])

    def _init_state(self, state, p, group):
        state["step"] = 0
        state["exp_avg"] = self._zeros_state(p)
        state["exp_inf"] = self._zeros_state(p)

    def _update_group(self, group):
        """One fused update per (device, dtype, learning rate of the step) of the group (backend.adamax_step);
        while ag.compile traces, the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]

        def prepare(p, state):
            if not state:
                self._init_state(state, p, group)
            numbers = _count_step(state, group)     # lr / (1 - b1^t): one bucket per step count
            return numbers, numbers, (state["exp_avg"].data, state["exp_inf"].data)

        def update(backend, numbers, params, grads, m, u):
            backend.adamax_step(params, grads, m, u, numbers[0], beta1, beta2, eps, wd, group["maximize"])
        self._fused_update(group, prepare, update)

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        for p, xp, a, g, state in self._reference_params(group, self._init_state):
            clr, = host_values(_count_step, state, group, dtype=a.dtype, device=p.device)
            if wd != 0:
                g = g + wd * a
            m, u = real_view(state["exp_avg"].data), real_view(state["exp_inf"].data)
            m += (1 - beta1) * (g - m)                   # lerp, as PyTorch
            u *= beta2
            xp.maximum(u, xp.abs(g) + eps, out=u)
            a -= clr * (m / u)


def _check_betas(betas):
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"Invalid betas: expected a pair of numbers, got {betas!r}")
    check_range(betas[0], "beta parameter at index 0", 0.0, 1.0)
    check_range(betas[1], "beta parameter at index 1", 0.0, 1.0)


def _count_step(state, group):
    state["step"] = t = state.get("step", 0) + 1
    return (group["lr"] / (1 - group["betas"][0] ** t),)
