"""ASGD: averaged stochastic gradient descent (PyTorch's update rule)."""
from .optimizer import Optimizer, real_view
from .._trace_hooks import active, host_values

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """p *= 1 - lambd eta;  p -= eta g;  ax += mu (p - ax);  then eta = lr / (1 + lambd lr t)^alpha and
    mu = 1 / max(1, t - t0)  (g += wd * p first). ``state["ax"]`` is the averaged parameter.

    PyTorch's switches ``foreach``, ``differentiable``, ``capturable`` are taken in PyTorch's positions and kept
    in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0.0, foreach=None,
                 maximize=False, differentiable=False, capturable=False):
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    _dynamic_state = ("step", "eta", "mu")
    _ranges = (("lr", "learning rate"), ("weight_decay", "weight_decay value"))

    def _init_state(self, state, p, group):
        state["step"] = 0
        state["eta"] = float(group["lr"])
        state["mu"] = 1.0
        state["ax"] = self._zeros_state(p)

    def _update_group(self, group):
        """One fused update per (device, dtype, eta and mu) of the group (backend.asgd_step); while
        ag.compile traces, the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        wd = group["weight_decay"]

        def prepare(p, state):
            if not state:
                self._init_state(state, p, group)
            numbers = _count_step(state, group)     # (1 - lambd eta, eta, mu): a bucket per value
            return numbers, numbers, (state["ax"].data,)

        def update(backend, numbers, params, grads, axs):
            backend.asgd_step(params, grads, axs, *numbers, wd, group["maximize"])
        self._fused_update(group, prepare, update)

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        wd = group["weight_decay"]
        for p, xp, a, g, state in self._reference_params(group, self._init_state):
            shrink, eta, mu = host_values(_count_step, state, group, dtype=a.dtype, device=p.device)
            if wd != 0:
                g = g + wd * a
            a *= shrink
            a -= eta * g
            ax = real_view(state["ax"].data)
            ax += mu * (a - ax)                 # mu is 1 until t0 steps: ax follows p


def _count_step(state, group):
    """Count one step; this step's (1 - lambd eta, eta, mu), then the next eta and mu."""
    state["step"] = t = state.get("step", 0) + 1
    eta, mu = state["eta"], state["mu"]
    lr, lambd = group["lr"], group["lambd"]
    state["eta"] = lr / ((1 + lambd * lr * t) ** group["alpha"])
    state["mu"] = 1 / max(1, t - group["t0"])
    return 1 - lambd * eta, eta, mu
