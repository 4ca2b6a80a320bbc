"""Optimizer: parameter groups, per-parameter state, zero_grad, state_dict/load_state_dict.

Subclasses update parameters on their raw arrays in place (``p.data``, ``p.grad.data`` and state
buffers, with the parameter's array namespace): nothing is recorded in the graph, and each
parameter's version counter is bumped once per step so that stale saved values are detected.
"""
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from ..autograd.grad_mode import enable_grad
from ..tensor import Tensor
from ..dtypes import is_floating

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


def real_view(a, writable=True):
    """A complex array as float pairs (re, im interleaved, flattened) sharing its memory: optimizers
    update a complex parameter as two real numbers per element, as PyTorch's do (view_as_real), so
    Adam's g * g is |re|^2 and |im|^2, not a complex square. Real arrays are returned as they are."""
    if a.dtype.kind != "c":
        return a
    if not a.flags.c_contiguous:
        if writable:
            raise RuntimeError("optimizer: a complex parameter (or its state) must be contiguous to be "
                               "updated as pairs of real numbers; make it with .contiguous()")
        a = a.copy()
    return a.reshape(-1).view(a.real.dtype)


def apply_weight_decay(a, g, wd, decoupled, decay):
    """The Adam family's weight decay on a parameter's array ``a`` and gradient ``g``: with ``decoupled``
    (AdamW's) ``a`` scaled in place by ``decay`` (1 - lr wd, from the host), else ``wd * a`` added to ``g``.
    Returns the gradient to use."""
    if wd == 0:
        return g
    if decoupled:
        a *= decay
        return g
    return g + wd * a


def as_state_tensor(value):
    """A state-dict entry that is an array of any library (a Tensor, a NumPy or CuPy array, a PyTorch tensor
    straight from ``torch.optim``'s state_dict) as a Tensor; None for anything else (numbers, lists, None)."""
    if isinstance(value, Tensor):
        return value.detach()
    if any(hasattr(value, a) for a in ("__array_interface__", "__cuda_array_interface__", "__dlpack__")):
        return Tensor(value)
    return None


def _copy_state_value(value, param):
    """A state entry from a state dict, copied onto ``param``'s device (floats cast to its dtype)."""
    t = as_state_tensor(value)
    if t is None:
        return value
    value = t
    dtype = param.dtype if is_floating(value.dtype) else None
    out = value.to(device=param.device, dtype=dtype)
    return out._copy() if out.data is value.data or out is value else out


def _state_value(name, value, param, index):
    """A loaded state entry, checked against its parameter: "step" a non-negative int, tensors of the
    parameter's shape (every per-parameter buffer here is), so a mismatch fails now, not at step()."""
    if name == "step":
        t = as_state_tensor(value)            # PyTorch keeps it as a 0-d float tensor
        v = t.item() if t is not None and t.data.size == 1 else value
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or v != int(v):
            raise ValueError(f"load_state_dict: state 'step' of parameter {index} must be a non-negative "
                             f"integer, got {value!r}")
        return int(v)
    out = _copy_state_value(value, param)
    if isinstance(out, Tensor) and out.shape != param.shape:
        raise ValueError(f"load_state_dict: state '{name}' of parameter {index} has shape {out.shape}, but the "
                         f"parameter has shape {param.shape}")
    return out

# an entry of Optimizer._ranges: check_range's arguments, (option, its name in messages[, low[, high[, strict_high]]])
_Range = (tuple[str, str] | tuple[str, str, float] | tuple[str, str, float, float | None]
          | tuple[str, str, float, float | None, bool])


class Optimizer:
    """Base class: holds ``param_groups`` (dicts of "params" plus options) and ``state`` (per parameter)."""

    def __init__(self, params: Iterable[Tensor] | Iterable[dict[str, Any]], defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or dicts, "
                            f"but got {type(params).__name__}; pass [tensor] or model.parameters()")
        if isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs; use a list instead")
        groups: list[Any] = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group of parameters with its own options (missing options take the defaults)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"add_param_group: expected a dict, got {type(param_group).__name__}")
        params = param_group.get("params")
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the ordering "
                            "of tensors in sets will change between runs; use a list instead")
        elif params is None:
            raise ValueError("add_param_group: the group has no 'params' entry")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is {type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor (one made by an op); optimize the leaves it "
                                 "was computed from, or .detach().requires_grad_() it")
        group = {"params": params}
        for k, v in param_group.items():
            if k != "params":
                group[k] = v
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization parameter {name}")
            group.setdefault(name, default)
        self._check_group(group)
        ids = {id(p) for p in params}
        if len(ids) != len(params):
            raise ValueError("add_param_group: a parameter appears twice in the group")
        for g in self.param_groups:
            if any(id(p) in ids for p in g["params"]):
                raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters: to None (default) or to zeros in place."""
        from ..nn.utils import zero_grads
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """One update of every parameter that has a gradient; ``closure`` re-evaluates and returns the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._update_group(group)
        return loss

    # (option, its name in messages[, low, high]): each must satisfy check_range in every group
    _ranges: tuple[_Range, ...] = (("lr", "learning rate"),)

    def _check_group(self, group):
        """Raise ValueError/TypeError for options out of range (``_ranges``, and what a subclass adds);
        called for every group added and every group loaded, so a NaN learning rate never reaches an
        update."""
        for option, name, *bounds in self._ranges:
            check_range(group[option], name, *bounds)
        check_implementation_flags(type(self).__name__, group, self.defaults)

    def _update_group(self, group):
        raise NotImplementedError(f"{type(self).__name__} does not define _update_group(group)")

    def _fused_update(self, group, prepare, update):
        """A group's fused multi-tensor update: one backend call per bucket of parameters.

        For each parameter with a gradient, ``prepare(p, state) -> (key, numbers, state_arrays)`` sets up and
        advances its state; parameters whose (device, dtype, key) agree share a bucket (the numbers of its
        first), and ``update(backend, numbers, params, grads, *state_lists)`` updates the bucket in place (a
        list is None where prepare gave None for that state). Complex arrays go as real pairs (real_view)."""
        buckets, updated = {}, []
        for p in group["params"]:
            if p.grad is None:
                continue
            a, g = p.data, p.grad.data
            if a.dtype.kind == "c":                  # complex: each real and imaginary part on its own
                a, g = real_view(a), real_view(g, writable=False)
            key, numbers, arrays = prepare(p, self.state[p])
            bucket = buckets.get((p.device, a.dtype, key))
            if bucket is None:
                bucket = buckets[p.device, a.dtype, key] = (numbers, [], [], [None if x is None else []
                                                                              for x in arrays])
            bucket[1].append(a)
            bucket[2].append(g)
            for lst, x in zip(bucket[3], arrays):
                if lst is not None:
                    lst.append(real_view(x))
            updated.append(p)
        for (device, _, _), (numbers, params, grads, lists) in buckets.items():
            update(device.backend, numbers, params, grads, *lists)
        for p in updated:
            p._bump_version()

    def _moments_update(self, group, count_step, kernel):
        """_fused_update for an Adam-like rule on state ``exp_avg`` and ``exp_avg_sq`` (NAdam, RAdam): the
        step coefficients of ``count_step(state, group)`` (a bucket per value), then the backend method named
        ``kernel`` on each bucket with the group's betas, eps, weight decay and maximize."""
        (beta1, beta2), eps, wd = group["betas"], group["eps"], group["weight_decay"]
        decoupled = group["decoupled_weight_decay"]

        def prepare(p, state):
            if not state:
                self._init_state(state, p, group)
            numbers = count_step(state, group)
            return numbers, numbers, (state["exp_avg"].data, state["exp_avg_sq"].data)

        def update(backend, numbers, params, grads, m, v):
            getattr(backend, kernel)(params, grads, m, v, beta1, beta2, eps, wd, decoupled, group["maximize"],
                                     *numbers)
        self._fused_update(group, prepare, update)

    def _reference_params(self, group, init_state):
        """(p, xp, a, g, state) for each parameter of ``group`` that has a gradient, for an update written
        step by step on arrays (ag.compile records its array ops): ``a`` and ``g`` are the parameter's
        and gradient's arrays (complex ones as real pairs, real_view), ``g`` negated when the group
        maximizes, and ``state`` the parameter's state, set up by ``init_state(state, p, group)`` the
        first time. The caller updates ``a`` in place; each parameter's version is bumped after."""
        maximize = group.get("maximize", False)
        for p in group["params"]:
            if p.grad is None:
                continue
            a, g = p.data, p.grad.data
            if a.dtype.kind == "c":                  # complex: each real and imaginary part on its own
                a, g = real_view(a), real_view(g, writable=False)
            if maximize:
                g = -g
            state = self.state[p]
            if not state:
                init_state(state, p, group)
            yield p, p.device.backend.xp, a, g, state
            p._bump_version()

    def _zeros_state(self, p, fill=0.0):
        """A state buffer shaped like ``p`` (zeros, or ``fill``; a complex one ``fill`` in both parts), on its
        device."""
        xp = p.device.backend.xp
        if fill == 0:
            return Tensor._make(xp.zeros_like(p.data), p.device)
        if p.data.dtype.kind == "c":           # both parts, as the pairs real_view updates
            fill = complex(fill, fill)
        return Tensor._make(xp.full(p.data.shape, fill, dtype=p.data.dtype), p.device)

    # -- saving and loading ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: {name: value}}, "param_groups": [{options..., "params": [index, ...]}]}, with
        parameters numbered in group order as in PyTorch; state tensors are copies (a snapshot)."""
        index: dict[int, int] = {}           # id(parameter) -> its number
        groups: list[dict[str, Any]] = []
        for g in self.param_groups:
            for p in g["params"]:
                index.setdefault(id(p), len(index))
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = [index[id(p)] for p in g["params"]]
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                s = self.state.get(p)
                if s:
                    state[index[id(p)]] = {k: v.detach()._copy() if isinstance(v, Tensor) else v
                                           for k, v in s.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore options and state saved by state_dict(); the groups must match in number and size."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise TypeError("load_state_dict: expected a dict with 'state' and 'param_groups' (from "
                            "optimizer.state_dict())")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError(f"loaded state dict has {len(saved)} parameter groups, but the optimizer has "
                             f"{len(self.param_groups)}")
        for i, (s, g) in enumerate(zip(saved, self.param_groups)):
            if len(s["params"]) != len(g["params"]):
                raise ValueError(f"loaded state dict contains a parameter group ({i}) of {len(s['params'])} "
                                 f"parameters, but the optimizer's group has {len(g['params'])}")
        id_map = {}
        for s, g in zip(saved, self.param_groups):
            for k, p in zip(s["params"], g["params"]):
                id_map[int(k)] = p
        new_groups = []
        for s, g in zip(saved, self.param_groups):
            new = {k: (tuple(v) if isinstance(v, list) and k != "params" else v) for k, v in s.items()}
            for k, v in self.defaults.items():      # options newer than the saved dict keep their defaults
                new.setdefault(k, v)
            new["params"] = g["params"]
            self._check_group(new)
            new_groups.append(new)
        state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        for k, st in state_dict["state"].items():
            p = id_map.get(int(k))
            if p is None:
                continue
            state[p] = {name: self._load_state_value(name, v, p, k) for name, v in st.items()}
        self.state, self.param_groups = state, new_groups   # nothing changes unless everything checked

    def _load_state_value(self, name, value, param, index):
        """One loaded state entry, checked (an optimizer whose state is not per-element overrides it). A
        scalar kept on the host (NAdam's mu_product, ASGD's eta and mu: ``_dynamic_state``) given as a
        one-element tensor (PyTorch keeps them so) becomes a Python float."""
        if name != "step" and name in getattr(self, "_dynamic_state", ()):
            t = as_state_tensor(value)
            if t is not None and t.data.size == 1:
                return float(t.item())
        return _state_value(name, value, param, index)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k != "params":
                    lines.append(f"    {k}: {g[k]}")
        lines.append(")")
        return "\n".join(lines)


def check_implementation_flags(name, group, defaults):
    """Check the implementation switches of ``group`` that the optimizer ``name`` takes (those in ``defaults``).

    ``foreach`` and ``fused`` (None or a bool) choose nothing here: every update is already one fused
    multi-tensor call per device and dtype. They are checked as PyTorch checks them: ``fused=True`` with
    ``foreach=True`` or ``differentiable=True`` raises RuntimeError, and so does ``fused=True`` with a
    parameter that is not real floating point. ``capturable`` (a bool) is accepted on every device (the step
    count lives on the host; ag.compile replays it). ``differentiable=True`` raises NotImplementedError: the
    updates are applied to the parameters' arrays outside the autograd graph."""
    for flag in ("foreach", "fused"):
        if flag in defaults and group[flag] is not None and not isinstance(group[flag], bool):
            raise TypeError(f"{name}: {flag} must be None or a bool, got {group[flag]!r}")
    for flag in ("capturable", "differentiable"):
        if flag in defaults and not isinstance(group[flag], bool):
            raise TypeError(f"{name}: {flag} must be a bool, got {group[flag]!r}")
    differentiable = "differentiable" in defaults and group["differentiable"]
    if "fused" in defaults and group["fused"]:
        if differentiable:
            raise RuntimeError("`fused` does not support `differentiable`")
        if "foreach" in defaults and group["foreach"]:
            raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
        for p in group["params"]:
            if not is_floating(p.dtype):
                raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of "
                                   f"supported devices: ['cpu', 'cuda'] but {p.dtype} and {p.device.type}")
    if differentiable:
        raise NotImplementedError(
            f"{name}(differentiable=True): recording the optimizer's update in the autograd graph is not "
            "supported; the update is applied in place to the parameters' arrays outside the graph. To "
            "differentiate through an update (meta-learning, hyper-gradients), write it with Tensor ops, e.g. "
            "g, = ag.autograd.grad(loss, w, create_graph=True); w2 = w - lr * g (or ag.func.grad), and keep "
            "differentiable=False here")


def check_range(value, name, low=0.0, high=None, strict_high=True):
    """Raise ValueError unless low <= value (< high); NaN is out of every range."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"Invalid {name}: expected a number, got {type(value).__name__}")
    if not value >= low or (high is not None and not (value < high if strict_high else value <= high)):
        rng = f"[{low}, {high})" if high is not None else f">= {low}"
        raise ValueError(f"Invalid {name}: {value} (expected {rng})")
