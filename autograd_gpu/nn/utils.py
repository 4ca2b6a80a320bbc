"""Gradient clipping and parameter/vector conversion, working on the raw arrays in place."""
import math

from ..tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters", "zero_grads"]


def _tensors(parameters, op):
    if isinstance(parameters, Tensor):
        return [parameters]
    try:
        params = list(parameters)
    except TypeError:
        raise TypeError(f"{op}: expected a Tensor or an iterable of Tensors, got {type(parameters).__name__}") from None
    for p in params:
        if not isinstance(p, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(p).__name__}")
    return params


def _grad_norm(g, norm_type):
    """The norm of one gradient array as a 0-d float64 array on its device (no host sync)."""
    xp = g.device.backend.xp
    a = g.data
    if norm_type == math.inf:
        return xp.abs(a).max() if a.size else xp.zeros((), dtype=a.dtype)
    if norm_type == 2.0:
        return xp.sqrt(xp.vdot(a.ravel(), a.ravel()).real)
    return (xp.abs(a) ** norm_type).sum() ** (1.0 / norm_type)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale all gradients together so that their joint norm is at most ``max_norm``; returns the joint
    norm before clipping as a 0-d Tensor (on the gradients' device)."""
    grads = [p.grad for p in _tensors(parameters, "clip_grad_norm_") if p.grad is not None]
    norm_type = float(norm_type)
    if not grads:
        from ..creation import tensor
        return tensor(0.0)
    dev = grads[0].device
    xp = dev.backend.xp
    norms = []
    for g in grads:
        n = _grad_norm(g, norm_type)
        norms.append(n if g.device is dev else dev.backend.asarray(g.device.backend.to_host(n)))
    stacked = xp.stack([xp.asarray(n, dtype=grads[0].dtype) for n in norms])
    total = stacked.max() if norm_type == math.inf else (xp.abs(stacked) ** norm_type).sum() ** (1.0 / norm_type)
    if error_if_nonfinite and not dev.backend.read_back(xp.isfinite(total), "clip_grad_norm_(error_if_nonfinite=True)"):
        raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
                           "non-finite, so they cannot be clipped; pass error_if_nonfinite=False to skip this check")
    # multiply by min(1, coef) unconditionally: no device-to-host sync to decide whether to clip
    coef = xp.minimum(max_norm / (total + 1e-6), 1.0)
    for g in grads:
        c = coef if g.device is dev else g.device.backend.asarray(dev.backend.to_host(coef))
        g.data *= c.astype(g.dtype)
        g._bump_version()
    return Tensor._make(total, dev)


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient element into [-clip_value, clip_value], in place."""
    clip_value = float(clip_value)
    for p in _tensors(parameters, "clip_grad_value_"):
        if p.grad is not None:
            xp = p.grad.device.backend.xp
            xp.clip(p.grad.data, -clip_value, clip_value, out=p.grad.data)
            p.grad._bump_version()


def parameters_to_vector(parameters):
    """All parameters flattened and concatenated into one 1-D tensor (differentiable)."""
    from ..ops.shape import cat
    return cat([p.reshape(-1) for p in _tensors(parameters, "parameters_to_vector")])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D ``vec`` into the parameters, in place."""
    if not isinstance(vec, Tensor) or vec.ndim != 1:
        raise TypeError(f"vector_to_parameters: expected a 1-D Tensor, got {type(vec).__name__}")
    params = _tensors(parameters, "vector_to_parameters")
    total = sum(p.numel() for p in params)
    if vec.numel() != total:
        raise ValueError(f"vector_to_parameters: the vector has {vec.numel()} elements but the parameters have "
                         f"{total}")
    i = 0
    for p in params:
        n = p.numel()
        p.data[...] = vec.data[i:i + n].reshape(p.shape).astype(p.dtype)
        p._bump_version()
        i += n


def zero_grads(parameters, set_to_none=True):
    """Reset the gradients of ``parameters``: to None (default) or to zeros in place (a gradient that is
    part of a graph, from create_graph=True, is detached first). Module.zero_grad and
    Optimizer.zero_grad both call this. The default launches nothing on CUDA (the next backward hands
    its gradients over as they are); zeros cost one fill a gradient, and each backward then adds into
    them, one launch a parameter more."""
    for p in parameters:
        g = p._grad
        if g is None:
            continue
        if set_to_none:
            p._grad = None                 # (what the .grad setter does with None)
        else:
            if g.grad_fn is not None or g.requires_grad:
                g = p.grad = g.detach()
            g.data.fill(0)
            g._bump_version()
