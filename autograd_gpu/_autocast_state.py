"""Autocast's state: which device types run which ops in low precision, in this thread.

A leaf (it imports nothing of the package): the ops that cast their inputs (ops/_autocast.py) read it
below amp.py, which holds the public ``autocast`` context manager that writes it and GradScaler.
"""
import threading

__all__ = ["state", "low_dtype"]


class _State(threading.local):
    active = ()           # ((device_type, dtype), ...) of the enclosing autocast blocks, innermost last


state = _State()


def low_dtype(device):
    """The low-precision dtype autocast runs ``device``'s low-precision ops in, or None when it is off there."""
    for d, dt in state.active:
        if d == device.type:
            return dt
    return None
