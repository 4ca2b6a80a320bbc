"""``cupy.cuda`` of the stand-in: simulated devices (current device per thread), streams, events and
the runtime queries the backend and the benchmarks make."""
import threading

import numpy as np

from ._core import N_DEVICES, current_device_id, _set_current_device_id, record
from ._kernels import Graph  # noqa: F401  (cupy.cuda.Graph)
from . import nccl  # noqa: F401  (cupy.cuda.nccl: CuPy's NCCL bindings, carried out over MPI)


class CUDARuntimeError(RuntimeError):
    def __init__(self, status, msg):
        self.status = status
        super().__init__(msg)


def _check_id(i):
    if not isinstance(i, (int, np.integer)) or isinstance(i, bool) or not 0 <= i < N_DEVICES:
        raise CUDARuntimeError(101, f"cudaErrorInvalidDevice: invalid device ordinal ({i!r}; the stand-in "
                                    f"simulates {N_DEVICES} GPUs)")
    return int(i)


class Device:
    """``with Device(1): ...`` makes simulated GPU 1 current in this thread."""

    def __init__(self, device=None):
        self.id = current_device_id() if device is None else _check_id(device)
        self._prev = []

    def __enter__(self):
        self._prev.append(current_device_id())
        _set_current_device_id(self.id)
        return self

    def __exit__(self, *exc):
        _set_current_device_id(self._prev.pop())

    def use(self):
        _set_current_device_id(self.id)

    def synchronize(self):
        record("sync", "Device.synchronize")

    @property
    def compute_capability(self):
        return "90"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("cuda", self.id))

    def __int__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id} (simulated)>"


class MemoryPointer:
    def __init__(self, ptr, device_id, mem=None):
        self.ptr = ptr
        self.device_id = device_id
        self.mem = mem          # the allocation (the host buffer that every view of it keeps as base)

    @property
    def device(self):
        return Device(self.device_id)


_current = threading.local()          # device id -> the thread's current stream on it (CuPy's rule)


class Stream:
    """Streams exist so code that makes and uses them runs, the current one per thread and device as
    CuPy keeps it (``with stream``, ``use``); the simulated work is already done."""
    null: "Stream | None" = None     # the null stream, set below the class

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        self.ptr = 0 if null else id(self)
        self.device_id = current_device_id()

    def __enter__(self):
        if not hasattr(_current, "entered"):
            _current.entered = []               # (device, the stream current before), per thread
        _current.entered.append((self.device_id, get_current_stream(self.device_id)))
        _set_current_stream(self.device_id, self)
        return self

    def __exit__(self, *exc):
        _set_current_stream(*_current.entered.pop())

    def use(self):
        _set_current_stream(self.device_id, self)
        return self

    def synchronize(self):
        record("sync", "Stream.synchronize")

    def done(self):
        return True

    def record(self, event=None):
        return event or Event()

    def begin_capture(self, mode=None):
        """Capture the kernels run on this stream (in this thread) until ``end_capture`` (_kernels.py)."""
        from . import _kernels
        _kernels.begin(self)

    def end_capture(self):
        from . import _kernels
        return _kernels.end(self)

    def is_capturing(self):
        from . import _kernels
        cap = _kernels.capturing()
        return cap is not None and cap.stream is self

    def wait_event(self, event):
        pass


Stream.null = Stream(null=True)


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.done = True

    def record(self, stream=None):
        import time
        self._t = time.perf_counter()       # the simulated work is done when it is queued

    def synchronize(self):
        record("sync", "Event.synchronize")


def get_elapsed_time(start_event, end_event):
    """Milliseconds between two recorded events (host time: the stand-in's kernels run on the host)."""
    return (end_event._t - start_event._t) * 1e3


class MemoryPool:
    """``cupy.cuda.MemoryPool``: the stand-in allocates from NumPy; the pool only answers its queries."""

    def __init__(self, allocator=None):
        pass

    def malloc(self, size):
        raise NotImplementedError("cupy.cuda.MemoryPool.malloc: the CuPy stand-in allocates NumPy buffers")

    def used_bytes(self):
        return 0

    def free_all_blocks(self, stream=None):
        pass


class using_allocator:
    """``with cupy.cuda.using_allocator(pool.malloc):`` (the stand-in's arrays never use it)."""

    def __init__(self, allocator=None):
        self.allocator = allocator

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass


def get_current_stream(device_id=None):
    streams = getattr(_current, "streams", {})
    return streams.get(current_device_id() if device_id is None else device_id, Stream.null)


def _set_current_stream(device_id, stream):
    if not hasattr(_current, "streams"):
        _current.streams = {}
    _current.streams[device_id] = stream


def get_device_id():
    return current_device_id()


def is_available():
    return True


class runtime:
    """``cupy.cuda.runtime``: the device queries, answering for the simulated GPUs."""
    CUDARuntimeError = CUDARuntimeError

    @staticmethod
    def getDeviceCount():
        return N_DEVICES

    @staticmethod
    def getDevice():
        return current_device_id()

    @staticmethod
    def setDevice(i):
        _set_current_device_id(_check_id(i))

    @staticmethod
    def deviceSynchronize():
        record("sync", "runtime.deviceSynchronize")

    @staticmethod
    def getDeviceProperties(i):
        _check_id(i)
        return {"name": b"Simulated GPU (CuPy stand-in on NumPy)", "totalGlobalMem": 16 << 30,
                "multiProcessorCount": 1, "major": 9, "minor": 0, "clockRate": 0, "memoryClockRate": 0,
                "memoryBusWidth": 0}

    @staticmethod
    def runtimeGetVersion():
        return 12080

    @staticmethod
    def driverGetVersion():
        return 12080
