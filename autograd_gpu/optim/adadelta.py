"""Adadelta (PyTorch's update rule)."""
from .optimizer import Optimizer, real_view
from .._trace_hooks import active, host_values

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """s = rho s + (1 - rho) g^2;  d = sqrt(u + eps) / sqrt(s + eps) * g;  u = rho u + (1 - rho) d^2;
    p -= lr d  (g += wd * p first).

    PyTorch's switches ``foreach``, ``capturable``, ``differentiable`` are taken in PyTorch's positions and kept
    in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, foreach=foreach,
                                      capturable=capturable, maximize=maximize, differentiable=differentiable))

    _dynamic_state = ("step",)       # counted by host_values, so not part of ag.compile's signature
    _dynamic_options = ("lr",)       # read through host_values too
    _ranges = (("lr", "learning rate"), ("rho", "rho value", 0.0, 1.0, False), ("eps", "epsilon value"),
               ("weight_decay", "weight_decay value"))

    def _init_state(self, state, p, group):
        state["step"] = 0
        state["square_avg"] = self._zeros_state(p)
        state["acc_delta"] = self._zeros_state(p)

    def _update_group(self, group):
        """One fused update per (device, dtype) of the group (backend.adadelta_step); while ag.compile
        traces, the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        rho, eps, wd = group["rho"], group["eps"], group["weight_decay"]

        def prepare(p, state):
            if not state:
                self._init_state(state, p, group)
            numbers = _count_step(state, group)
            return numbers, numbers, (state["square_avg"].data, state["acc_delta"].data)

        def update(backend, numbers, params, grads, s, u):
            backend.adadelta_step(params, grads, s, u, numbers[0], rho, eps, wd, group["maximize"])
        self._fused_update(group, prepare, update)

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        rho, eps, wd = group["rho"], group["eps"], group["weight_decay"]
        for p, xp, a, g, state in self._reference_params(group, self._init_state):
            lr, = host_values(_count_step, state, group, dtype=a.dtype, device=p.device)
            if wd != 0:
                g = g + wd * a
            s, u = real_view(state["square_avg"].data), real_view(state["acc_delta"].data)
            s *= rho
            s += (1 - rho) * (g * g)
            d = xp.sqrt(u + eps)
            d /= xp.sqrt(s + eps)
            d *= g
            u *= rho
            u += (1 - rho) * (d * d)
            d *= lr
            a -= d


def _count_step(state, group):
    """Count one step (on the host: under ag.compile every replay counts again); the learning rate."""
    state["step"] = state.get("step", 0) + 1
    return (group["lr"],)
