"""Rprop: resilient backpropagation (PyTorch's update rule)."""
from .optimizer import Optimizer, check_range, real_view
from .._trace_hooks import active, host_values

__all__ = ["Rprop"]


class Rprop(Optimizer):
    """Per element: where g and the previous g agree in sign the step size grows by etas[1], where they
    differ it shrinks by etas[0] (and that gradient counts as 0), clipped to step_sizes;
    p -= sign(g) * step size. ``lr`` is the initial step size.

    PyTorch's switches ``capturable``, ``foreach``, ``differentiable`` are taken in PyTorch's positions and kept
    in each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``capturable`` is accepted (the step count lives on the host; ag.compile replays it),
    ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *, capturable=False, foreach=None,
                 maximize=False, differentiable=False):
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes), capturable=capturable,
                                      foreach=foreach, maximize=maximize, differentiable=differentiable))

    _dynamic_state = ("step",)
    _ranges = (("lr", "learning rate"),)

    def _check_group(self, g):
        super()._check_group(g)
        etas = g["etas"]
        if not isinstance(etas, (tuple, list)) or len(etas) != 2:
            raise TypeError(f"Invalid eta values: expected a pair (etaminus, etaplus), got {etas!r}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]} (expected 0 < etaminus < 1 < etaplus)")
        sizes = g["step_sizes"]
        if not isinstance(sizes, (tuple, list)) or len(sizes) != 2:
            raise TypeError(f"Invalid step_sizes: expected a pair (min, max), got {sizes!r}")
        check_range(sizes[0], "minimal step size")
        check_range(sizes[1], "maximal step size", sizes[0], None)

    def _init_state(self, state, p, group):
        state["step"] = 0
        state["prev"] = self._zeros_state(p)
        state["step_size"] = self._zeros_state(p, fill=group["lr"])

    def _update_group(self, group):
        """One fused update per (device, dtype) of the group (backend.rprop_step); while ag.compile traces,
        the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        (etaminus, etaplus), (lo, hi) = group["etas"], group["step_sizes"]

        def prepare(p, state):
            if not state:
                self._init_state(state, p, group)
            _count_step(state)
            return None, None, (state["prev"].data, state["step_size"].data)

        def update(backend, _, params, grads, prevs, sizes):
            backend.rprop_step(params, grads, prevs, sizes, etaminus, etaplus, lo, hi, group["maximize"])
        self._fused_update(group, prepare, update)

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        (etaminus, etaplus), (lo, hi) = group["etas"], group["step_sizes"]
        for p, xp, a, g, state in self._reference_params(group, self._init_state):
            host_values(_count_step, state)
            prev, size = real_view(state["prev"].data), real_view(state["step_size"].data)
            sign = xp.sign(g * prev)
            factor = xp.where(sign > 0, etaplus, xp.where(sign < 0, etaminus, 1.0)).astype(a.dtype, copy=False)
            size *= factor
            xp.clip(size, lo, hi, out=size)
            # a sign change: no step (tested on the sign: bfloat16's factor never equals the float etaminus)
            g = xp.where(sign < 0, 0, g).astype(a.dtype, copy=False)
            a -= xp.sign(g) * size
            prev[...] = g


def _count_step(state):
    """Count one step (on the host: under ag.compile every replay counts again)."""
    state["step"] = state.get("step", 0) + 1
    return ()
