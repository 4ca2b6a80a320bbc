"""What code below ag.compile reports to its tracer: the on/off switch and the host-value hook.

A leaf (it imports nothing of the package), so that optimizers (optim/) and the LSTM (nn/layers/rnn.py)
can talk to the tracer without importing compile/, which sits above them. The tracer
(compile/tracer.py) registers itself here: it sets ``state.t`` while it traces in this thread, and
answers ``host_values`` calls through its own ``host_values`` method.
"""
import threading

__all__ = ["active", "host_values", "state"]


class _State(threading.local):
    t = None              # the Tracer running in this thread, or None: other threads (a data loader's
                          # workers) go through the patched backends untraced


state = _State()


def active():
    """The tracer running in this thread, or None (ag.compile is not recording here)."""
    return state.t


def host_values(fn, *args, dtype=None, device=None):
    """``fn(*args)``: Python numbers computed on the host from Python state (an optimizer's step count),
    as a tuple. Eagerly that is all; while a trace runs, the call is logged so that every replay calls
    ``fn`` again (its side effects on Python state included) and the numbers reach the recorded array
    work as 0-d arrays of ``dtype`` on ``device``, never as constants baked into the program."""
    t = state.t
    if t is None:
        return fn(*args)
    return t.host_values(fn, args, dtype, device)
