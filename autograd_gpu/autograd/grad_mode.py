"""no_grad, enable_grad, set_grad_enabled: thread-local switches for graph recording."""
import functools
import threading
from threading import get_ident as _get_ident

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled"]


class _State(threading.local):
    enabled = True     # class attribute: every new thread starts with recording on
    anomaly = False    # detect_anomaly() is active in this thread


state = _State()


def is_grad_enabled():
    """True unless gradient recording is off in this thread (``no_grad``, ``set_grad_enabled(False)``).

    >>> with ag.no_grad():
    ...     ag.is_grad_enabled()
    False
    """
    return state.enabled


class _GradModeContext:
    """Context manager and decorator that sets grad mode and restores the previous one on exit.

    The modes to restore are kept per thread, so one instance (a module-level ``no_grad()``, say) can
    be entered by several threads at once without one thread restoring another's mode."""

    def __init__(self, mode):
        self.mode = mode
        # thread id -> that thread's modes to restore. A dict rather than a threading.local: making and
        # freeing a threading.local cost ~14 us in a training step (2 us alone), for every `with no_grad()`
        self._stacks = {}

    @property
    def prev(self):
        tid = _get_ident()
        stack = self._stacks.get(tid)
        if stack is None:
            stack = self._stacks[tid] = []
        return stack

    def __enter__(self):
        self.prev.append(state.enabled)
        state.enabled = self.mode

    def __exit__(self, *exc):
        tid = _get_ident()
        stack = self._stacks[tid]
        state.enabled = stack.pop()
        if not stack:
            del self._stacks[tid]          # (a thread's entry lives only while it is inside)
        return False

    def __call__(self, fn):
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = state.enabled
            state.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled = prev
        return wrapper


class no_grad(_GradModeContext):
    """Turn graph recording off (in this thread only).

    >>> w = ag.ones(2, requires_grad=True)
    >>> with ag.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    def __init__(self):
        super().__init__(False)


class enable_grad(_GradModeContext):
    """Turn graph recording on (in this thread only), e.g. inside a no_grad block."""

    def __init__(self):
        super().__init__(True)


class set_grad_enabled(_GradModeContext):
    """Set recording on or off; takes effect at once (as a call) and also works as a context manager."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: expected a bool, got {type(mode).__name__}")
        super().__init__(mode)
        self.prev.append(state.enabled)
        state.enabled = mode

    def __enter__(self):
        pass   # already set in __init__, like torch.set_grad_enabled

    def __call__(self, fn):
        state.enabled = self.prev.pop()   # as a decorator it must not change the mode now
        return super().__call__(fn)
