"""Adagrad with learning-rate decay and weight decay (PyTorch's update rule)."""
from .optimizer import Optimizer, real_view
from ..tensor import Tensor
from .._trace_hooks import active, host_values

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """clr = lr / (1 + (t - 1) lr_decay);  s += g^2;  p -= clr g / (sqrt(s) + eps).

    PyTorch's switches ``foreach``, ``differentiable``, ``fused`` are taken in PyTorch's positions and kept in
    each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
                                      initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable, fused=fused))

    def _init_state(self, p, group):
        xp = p.device.backend.xp
        state = self.state[p]
        state["step"] = 0
        v = group["initial_accumulator_value"]
        if p.data.dtype.kind == "c":           # both parts start at v, as in PyTorch
            v = complex(v, v)
        state["sum"] = Tensor._make(xp.full(p.data.shape, v, dtype=p.data.dtype), p.device)
        return state

    def add_param_group(self, param_group):
        """As in PyTorch, Adagrad's state (step 0, sum = initial_accumulator_value) exists from the start."""
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        for p in group["params"]:
            if not self.state.get(p):
                self._init_state(p, group)

    _dynamic_state = ("step",)       # counted by host_values, so not part of ag.compile's signature
    _ranges = (("lr", "learning rate"), ("lr_decay", "lr_decay value"), ("weight_decay", "weight_decay value"),
               ("initial_accumulator_value", "initial_accumulator_value"), ("eps", "epsilon value"))

    def _update_group(self, group):
        """One fused update per (device, dtype, step count) of the group (backend.adagrad_step); while
        ag.compile traces, the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        lr, lr_decay = group["lr"], group["lr_decay"]

        def prepare(p, state):
            state = state or self._init_state(p, group)
            clr, = _count_step(state, lr, lr_decay)  # the decayed rate: one bucket per step count
            return state["step"], clr, (state["sum"].data,)

        def update(backend, clr, params, grads, sums):
            backend.adagrad_step(params, grads, sums, clr, group["weight_decay"], group["eps"], group["maximize"])
        self._fused_update(group, prepare, update)

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        lr, lr_decay, wd, eps, maximize = (group["lr"], group["lr_decay"], group["weight_decay"], group["eps"],
                                           group["maximize"])
        for p in group["params"]:
            if p.grad is None:
                continue
            xp = p.device.backend.xp
            a, g = p.data, p.grad.data
            if a.dtype.kind == "c":                  # complex: each real and imaginary part on its own
                a, g = real_view(a), real_view(g, writable=False)
            if maximize:
                g = -g
            state = self.state[p] or self._init_state(p, group)
            clr, = host_values(_count_step, state, lr, lr_decay, dtype=a.dtype, device=p.device)
            if wd != 0:
                g = g + wd * a
            s = real_view(state["sum"].data)
            tmp = xp.multiply(g, g, out=xp.empty_like(a))     # out=: a 0-d product would be a scalar
            s += tmp
            xp.sqrt(s, out=tmp)
            tmp += eps
            xp.divide(g, tmp, out=tmp)
            tmp *= clr
            a -= tmp
            p._bump_version()


def _count_step(state, lr, lr_decay):
    """Count one step (on the host: under ag.compile every replay counts again); its learning rate."""
    state["step"] = t = state.get("step", 0) + 1
    return (lr / (1 + (t - 1) * lr_decay),)
