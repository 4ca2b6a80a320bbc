"""RMSprop, optionally centered and with momentum (PyTorch's update rule)."""
from .optimizer import Optimizer, real_view
from ..tensor import Tensor
from .._trace_hooks import active, host_values

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """s = alpha s + (1 - alpha) g^2;  avg = sqrt(s - gbar^2) (centered, gbar = running mean of g) or
    sqrt(s), plus eps;  b = momentum b + g / avg, p -= lr b (momentum > 0), else p -= lr g / avg.

    PyTorch's switches ``capturable``, ``foreach``, ``differentiable`` are taken in PyTorch's positions and kept
    in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum,
                                      centered=centered, capturable=capturable, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    _dynamic_state = ("step",)       # counted by host_values, so not part of ag.compile's signature
    _ranges = (("lr", "learning rate"), ("eps", "epsilon value"), ("momentum", "momentum value"),
               ("weight_decay", "weight_decay value"), ("alpha", "alpha value"))

    def _update_group(self, group):
        """One fused update per (device, dtype) of the group (backend.rmsprop_step); while ag.compile traces,
        the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        momentum, centered = group["momentum"], group["centered"]

        def prepare(p, state):
            if not state:
                self._init_state(state, p, momentum, centered)
            _count_step(state)
            return None, None, (state["square_avg"].data, state["grad_avg"].data if centered else None,
                                state["momentum_buffer"].data if momentum > 0 else None)

        def update(backend, _, params, grads, s, gbar, bufs):
            backend.rmsprop_step(params, grads, s, gbar, bufs, group["lr"], group["alpha"], group["eps"],
                                 group["weight_decay"], momentum, group["maximize"])
        self._fused_update(group, prepare, update)

    @staticmethod
    def _init_state(state, p, momentum, centered):
        xp = p.device.backend.xp
        state["step"] = 0
        state["square_avg"] = Tensor._make(xp.zeros_like(p.data), p.device)
        if momentum > 0:
            state["momentum_buffer"] = Tensor._make(xp.zeros_like(p.data), p.device)
        if centered:
            state["grad_avg"] = Tensor._make(xp.zeros_like(p.data), p.device)

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        lr, alpha, eps, wd = group["lr"], group["alpha"], group["eps"], group["weight_decay"]
        momentum, centered = group["momentum"], group["centered"]
        init = lambda state, p, group: self._init_state(state, p, momentum, centered)    # noqa: E731
        for p, xp, a, g, state in self._reference_params(group, init):
            host_values(_count_step, state)     # on the host: under ag.compile every replay counts again
            if wd != 0:
                g = g + wd * a
            s = real_view(state["square_avg"].data)
            s *= alpha
            avg = xp.multiply(g, g, out=xp.empty_like(a))     # out=: a 0-d product would be a scalar
            avg *= 1 - alpha
            s += avg
            if centered:
                gbar = real_view(state["grad_avg"].data)
                gbar *= alpha
                gbar += (1 - alpha) * g
                xp.multiply(gbar, gbar, out=avg)
                xp.subtract(s, avg, out=avg)
                xp.sqrt(avg, out=avg)
            else:
                xp.sqrt(s, out=avg)
            avg += eps
            if momentum > 0:
                buf = real_view(state["momentum_buffer"].data)
                buf *= momentum
                buf += g / avg
                a -= lr * buf
            else:
                xp.divide(g, avg, out=avg)
                avg *= lr
                a -= avg


def _count_step(state):
    state["step"] = state.get("step", 0) + 1
    return ()
