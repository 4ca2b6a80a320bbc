"""SGD with momentum, dampening, Nesterov momentum and weight decay (PyTorch's update rule)."""
from .optimizer import Optimizer
from ..tensor import Tensor
from .._trace_hooks import active, host_values

__all__ = ["SGD"]


class SGD(Optimizer):
    """d = g + wd * p;  b = d (first step) or momentum * b + (1 - dampening) * d;
    d = d + momentum * b (nesterov) or b;  p -= lr * d.

    PyTorch's switches ``foreach``, ``fused``, ``differentiable`` are taken in PyTorch's positions and kept in
    each group: ``foreach``/``fused`` choose nothing (the update is already one fused call per device and
    dtype), ``differentiable=True`` raises NotImplementedError (check_implementation_flags).
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    _dynamic_options = ("lr",)     # read through host_values: not part of ag.compile's signature
    _ranges = (("lr", "learning rate"), ("momentum", "momentum value"), ("dampening", "dampening value"),
               ("weight_decay", "weight_decay value"))

    def _check_group(self, g):
        super()._check_group(g)
        if g["nesterov"] and (g["momentum"] <= 0 or g["dampening"] != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _update_group(self, group):
        """One fused update per (device, dtype) of the group (backend.sgd_step); while ag.compile traces,
        the step-by-step update, whose array ops it records."""
        if active() is not None:
            return self._reference_update(group)
        momentum = group["momentum"]
        buckets, updated = {}, []
        for p in group["params"]:
            if p.grad is None:
                continue
            buf, first = None, False
            if momentum != 0:
                state = self.state[p]
                b = state.get("momentum_buffer")
                if b is None:       # PyTorch's first step: the buffer is d itself (the kernel fills it)
                    b = state["momentum_buffer"] = Tensor._make(p.device.backend.xp.empty_like(p.data), p.device)
                    first = True
                buf = b.data
            key = (p.device, p.data.dtype, first)
            lists = buckets.get(key)
            if lists is None:
                lists = buckets[key] = ([], [], [])
            lists[0].append(p.data)
            lists[1].append(p.grad.data)
            lists[2].append(buf)
            updated.append(p)
        for (device, _, first), (params, grads, bufs) in buckets.items():
            device.backend.sgd_step(params, grads, bufs if momentum != 0 else None, group["lr"],
                                    group["weight_decay"], momentum, group["dampening"], group["nesterov"],
                                    group["maximize"], first)
        for p in updated:
            p._bump_version()

    def _reference_update(self, group):
        """The step-by-step update (what the fused one equals; ag.compile records its array ops)."""
        momentum, dampening = group["momentum"], group["dampening"]
        wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        neg_lr = {}                 # -lr by (dtype, device): read once a group (under ag.compile one step)
        for p in group["params"]:
            if p.grad is None:
                continue
            a, g = p.data, p.grad.data
            if maximize:
                g = -g
            if wd != 0:
                g = g + wd * a
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = Tensor._make(g.copy(), p.device)
                    b = buf.data
                else:
                    b = buf.data
                    b *= momentum
                    b += g if dampening == 0 else (1 - dampening) * g
                g = g + momentum * b if nesterov else b
            # the learning rate is read on the host: under ag.compile a scheduler's change needs no new trace
            key = (a.dtype, p.device)
            step = neg_lr.get(key)
            if step is None:
                lr_now, = host_values(_lr, group, dtype=a.dtype, device=p.device)
                step = neg_lr[key] = -lr_now
            p.device.backend.axpy(a, step, g)      # one pass: a -= lr * g
            p._bump_version()


def _lr(group):
    return (group["lr"],)
