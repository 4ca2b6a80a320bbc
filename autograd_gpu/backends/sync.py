"""When the host waits for the GPU: the sync debug mode, and which reads are explicit.

A device-to-host read makes the host wait for every kernel queued before it. Reads the user asks for
(``.item()``, ``.numpy()``, ``.tolist()``, ``.cpu()``, printing, ``ag.cuda.synchronize()``) are
explicit and always allowed. A read that library code makes on its own (an op whose result size
depends on the data, such as boolean-mask indexing) is implicit: it goes through ``implicit(what)``,
which warns or raises according to the mode, as PyTorch's ``set_sync_debug_mode`` does.

On the CuPy stand-in every transfer is seen, so a read that library code makes without declaring it
is caught too (``on_simulated_transfer``).
"""
import threading
import warnings

MODES = ("default", "warn", "error")
_mode = [0]
_local = threading.local()


def set_sync_debug_mode(mode):
    """"default" (0): nothing; "warn" (1): warn on implicit syncs; "error" (2): raise RuntimeError."""
    if isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode < len(MODES):
        _mode[0] = mode
    elif isinstance(mode, str) and mode in MODES:
        _mode[0] = MODES.index(mode)
    else:
        raise ValueError(f"set_sync_debug_mode: expected one of {', '.join(repr(m) for m in MODES)} "
                         f"(or 0, 1, 2), got {mode!r}")


def get_sync_debug_mode():
    """The current sync debug mode: ``"default"``, ``"warn"`` or ``"error"``."""
    return MODES[_mode[0]]


class allowed:
    """Transfers inside are accounted for: explicit reads, or implicit ones already reported."""

    def __enter__(self):
        _local.depth = getattr(_local, "depth", 0) + 1

    def __exit__(self, *exc):
        _local.depth -= 1


def implicit(what):
    """Report an implicit synchronisation (``what`` names the op) according to the mode."""
    mode = _mode[0]
    if mode == 0 or getattr(_local, "depth", 0):
        return
    msg = (f"{what} synchronizes the host with the device (an implicit device-to-host read); "
           "reads you ask for (.item(), .numpy(), .cpu(), synchronize()) are always allowed")
    if mode == 1:
        warnings.warn(msg, RuntimeWarning, stacklevel=3)
    else:
        raise RuntimeError(msg + ". Raised because ag.cuda.set_sync_debug_mode('error') is on")


def on_simulated_transfer(kind, what):
    """The CuPy stand-in's hook: a device-to-host read that nobody declared is an implicit sync."""
    if kind == "d2h":
        implicit(f"{what} (a read outside .item(), .numpy() and the declared syncs)")
