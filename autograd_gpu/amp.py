"""Mixed precision: autocast (float16 matrix products with float32 accumulation, float32 where range
or precision matters) and GradScaler (loss scaling so float16 gradients do not underflow).

Inside ``with ag.amp.autocast("cuda"):`` the ops PyTorch runs in low precision (matmul, linear,
conv1d/conv2d) cast their inputs to float16 (differentiably: the float32 parameters get float32
gradients) and return float16; the ops that need range or precision (softmax, log_softmax, the
losses, layer_norm, batch_norm) cast float16 inputs to float32. ``autocast(dtype=ag.bfloat16)`` does
the same with bfloat16. Everything else runs in the dtype
of its inputs, with NumPy's promotion when dtypes mix. Products accumulate in float32: cuBLAS does
so on the GPU; on the CPU the backend computes float16 products in float32 and rounds the result.

Limits: the state is per thread and per device type; casts of the same weight are not cached
between ops (each use casts again); ops outside the lists above are not autocast.
"""
import functools

from ._autocast_state import state as _state
from .dtypes import float16, bfloat16, float32, _dtype
from .tensor import Tensor

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "GradScaler"]


class autocast:
    """Context manager (and decorator) enabling autocast for tensors on ``device_type`` ("cuda" or
    "cpu"); dtype is the low precision: float16 (the default) or bfloat16 (float32's range, so no
    GradScaler is needed). Its state lives in _autocast_state.py, where the
    ops' casts (ops/_autocast.py) read it."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True):
        if device_type not in ("cuda", "cpu"):
            raise ValueError(f"autocast: expected device_type 'cuda' or 'cpu', got {device_type!r}")
        dt = float16 if dtype is None else _dtype(dtype)
        if dt != float16 and dt != bfloat16:
            raise ValueError(f"autocast: expected float16 or bfloat16 as the low precision, got {dt}")
        self.device_type, self.dtype, self.enabled = device_type, dt, bool(enabled)
        self.prev = []

    def __enter__(self):
        self.prev.append(_state.active)
        # a disabled block switches autocast off for its device type
        outer = tuple(a for a in _state.active if a[0] != self.device_type)
        _state.active = outer + (((self.device_type, self.dtype),) if self.enabled else ())
        return self

    def __exit__(self, *exc):
        _state.active = self.prev.pop()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapper


def is_autocast_enabled(device_type="cuda"):
    """True inside an enabled ``autocast`` block for ``device_type``."""
    return any(d == device_type for d, _ in _state.active)


def get_autocast_dtype(device_type="cuda"):
    """The lower-precision dtype of the innermost active ``autocast`` for ``device_type``."""
    for d, dt in reversed(_state.active):
        if d == device_type:
            return dt
    return None


class GradScaler:
    """Loss scaling for float16 training, with PyTorch's GradScaler semantics:

        scaler.scale(loss).backward(); scaler.step(optimizer); scaler.update()

    The loss is multiplied by ``scale`` so small float16 gradients survive; step() divides the
    gradients back (unscale_) and skips the optimizer step when any is inf or NaN; update() halves
    the scale after such a step and doubles it after ``growth_interval`` clean steps. Checking the
    gradients costs one device-to-host read per step (as in PyTorch)."""

    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        if not growth_factor > 1.0:
            raise ValueError(f"GradScaler: growth_factor must be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(f"GradScaler: backoff_factor must be in (0, 1), got {backoff_factor}")
        if not isinstance(growth_interval, int) or growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval must be a positive int, got {growth_interval!r}")
        self.enabled = bool(enabled)
        self._scale = float(init_scale)
        self.growth_factor, self.backoff_factor, self.growth_interval = growth_factor, backoff_factor, growth_interval
        self._growth_tracker = 0
        self._per_optimizer = {}           # id(optimizer) -> {"unscaled": bool, "found_inf": bool}

    def get_scale(self):
        """The current loss scale (1.0 when the scaler is disabled)."""
        return self._scale if self.enabled else 1.0

    def is_enabled(self):
        """Whether this scaler scales (False when built with ``enabled=False``)."""
        return self.enabled

    def scale(self, outputs):
        """outputs * scale (a Tensor, or nested lists/tuples of Tensors)."""
        if not self.enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if outputs.dtype == float16:          # scaling a float16 loss would overflow
                outputs = outputs.to(dtype=float32)
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise TypeError(f"GradScaler.scale: expected a Tensor or a list/tuple of Tensors, got {type(outputs).__name__}")

    def _state_of(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"unscaled": False, "found_inf": False})

    def unscale_(self, optimizer):
        """Divide the gradients of ``optimizer``'s parameters by the scale, in place (once per step),
        and note whether any is inf or NaN."""
        if not self.enabled:
            return
        st = self._state_of(optimizer)
        if st["unscaled"]:
            raise RuntimeError("GradScaler.unscale_: already called for this optimizer since the last update()")
        inv = 1.0 / self._scale
        flags = {}                         # device -> per-gradient "all finite" flags, read once at the end
        for group in optimizer.param_groups:
            for p in group["params"]:
                g = p.grad
                if g is None:
                    continue
                if g.dtype == float16:
                    raise ValueError("GradScaler: attempting to unscale float16 gradients; keep the parameters "
                                     "in float32 and let autocast cast them")
                xp = g.device.backend.xp
                g.data *= g.data.dtype.type(inv)
                g._bump_version()
                flags.setdefault(g.device, []).append(xp.isfinite(g.data).all())
        # one read per device, as PyTorch's GradScaler makes: whether to skip the step is decided on the host
        finite = all(d.backend.read_back(d.backend.xp.stack(f).all(), "GradScaler.unscale_") for d, f in flags.items())
        st["unscaled"], st["found_inf"] = True, not finite

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() unless the unscaled gradients hold inf or NaN; returns its result or None."""
        if not self.enabled:
            return optimizer.step(*args, **kwargs)
        st = self._state_of(optimizer)
        if not st["unscaled"]:
            self.unscale_(optimizer)
        return None if st["found_inf"] else optimizer.step(*args, **kwargs)

    def update(self, new_scale=None):
        """Adjust the scale for the next step: back off after a skipped step, grow after
        growth_interval clean ones (or set ``new_scale``)."""
        if not self.enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale.item() if isinstance(new_scale, Tensor) else new_scale)
        else:
            found_inf = any(st["found_inf"] for st in self._per_optimizer.values())
            if found_inf:
                self._scale *= self.backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self.growth_interval:
                    self._scale *= self.growth_factor
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def state_dict(self):
        """The scale and its growth settings, to save with a checkpoint (empty when disabled)."""
        return {"scale": self._scale, "growth_factor": self.growth_factor, "backoff_factor": self.backoff_factor,
                "growth_interval": self.growth_interval, "_growth_tracker": self._growth_tracker} if self.enabled else {}

    def load_state_dict(self, state):
        """Restore what ``state_dict`` returned; a missing key raises KeyError naming it."""
        if not self.enabled:
            return
        missing = {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} - set(state)
        if missing:
            raise ValueError(f"GradScaler.load_state_dict: missing keys {sorted(missing)}")
        self._scale = float(state["scale"])
        self.growth_factor, self.backoff_factor = state["growth_factor"], state["backoff_factor"]
        self.growth_interval, self._growth_tracker = state["growth_interval"], state["_growth_tracker"]
