"""detect_anomaly: raise at the first backward op that produces NaN or Inf, naming the op and the
line of user code where its forward ran.

While it is on (in this thread), every recorded op keeps the stack of its forward call, and the
engine checks each gradient a backward produces (one device-to-host read per gradient, so it is a
debugging tool: expect backward to be several times slower)."""
import os
import traceback

from .grad_mode import state
from . import function as _function

__all__ = ["detect_anomaly", "is_anomaly_enabled"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class detect_anomaly:
    """Context manager (and decorator) turning anomaly detection on in this thread."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        self.prev = []

    def __enter__(self):
        self.prev.append(state.anomaly)
        state.anomaly = self.check_nan
        _function._anomaly[0] += 1
        return self

    def __exit__(self, *exc):
        state.anomaly = self.prev.pop()
        _function._anomaly[0] -= 1
        return False

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


def is_anomaly_enabled():
    """True inside ``detect_anomaly()``."""
    return state.anomaly


def user_frame(stack):
    """The innermost frame of a recorded stack that is outside this package: where the user's code
    called the op."""
    for frame in reversed(stack):
        if not os.path.abspath(frame.filename).startswith(_PACKAGE_DIR + os.sep):
            return frame
    return stack[-1] if stack else None


def _all_finite(xp, a):
    return xp.isfinite(a).all()


def _any_nan(xp, a):
    return xp.isnan(a).any()


def check_gradients(node, grads):
    """Raise RuntimeError if a gradient that node's backward returned holds NaN or Inf."""
    for i, g in enumerate(grads):
        if g is None:
            continue
        xp = node.xp
        backend = node.device.backend
        # on g's GPU whichever is current
        if not backend.read_back(backend.call(_all_finite, xp, g.data), "detect_anomaly's finiteness check"):
            kind = "nan" if backend.read_back(backend.call(_any_nan, xp, g.data), "detect_anomaly") else "inf"
            where = ""
            trace = node.__dict__.get("_trace")
            if trace:
                f = user_frame(trace)
                where = (f"\nIts forward was called at {f.filename}:{f.lineno}, in {f.name}"
                         + (f":\n    {f.line}" if f.line else "")
                         + "\nForward call stack (most recent call last):\n"
                         + "".join(traceback.format_list(trace[-8:])))
            raise RuntimeError(f"detect_anomaly: {node.name()} backward returned {kind} values in the gradient "
                               f"for its input {i} (shape {tuple(g.data.shape)}).{where}")
