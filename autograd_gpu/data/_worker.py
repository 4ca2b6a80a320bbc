"""What runs inside a DataLoader worker process, and what crosses between it and the main process.

A worker seeds its random generators (as PyTorch does: ``seed = base_seed + worker_id`` for Python's
``random`` and ag's generators, NumPy's global generator from a SeedSequence of the two), sets
``get_worker_info()``, calls ``worker_init_fn(worker_id)``, then answers tasks ``(epoch, idx, index)``
from its index queue with ``(epoch, idx, worker_id, kind, payload)`` on the shared result queue until
it gets None, the loader's done event is set, or its parent process is gone.

Batches cross as bytes pickled here (``dumps``): a Tensor becomes its host array, device and
requires_grad flag, and is made again in the main process on the same device (Tensors refuse plain
pickling). The same pickler carries the dataset to workers started with 'spawn' or 'forkserver'.
Where there is a /dev/shm (Linux), the data of arrays of 64 KiB or more travels out of band
(pickle protocol 5) in one shared-memory file per batch: the worker writes it, the main process maps
it and unlinks it at once, and the batch's arrays are views of that mapping (freed with them) instead
of copies read through a pipe. Files of batches never received are removed when the loader shuts
its workers down (and by a worker that finds its main process gone).
"""
import glob
import mmap
import io
import os
import pickle
import queue
import random
import sys
import traceback
from typing import Any, Optional

from ..tensor import Tensor
from ..device import device as _parse_device
from ..backends import get_backend, to_numpy
from ..backends import cupy_backend as _cupy_backend
from ._fetch import make_fetcher, Exhausted

__all__ = ["WorkerInfo", "get_worker_info"]

SHM_DIR = "/dev/shm"
SHM_MIN_BYTES = 1 << 16  # smaller buffers stay in the pickle
POLL_S = 0.25            # how often a blocked worker (or the main process) checks that the other side lives
BATCH, END, ERROR = "batch", "end", "error"

_worker_info: Optional["WorkerInfo"] = None


class WorkerInfo:
    """Inside a worker: ``id`` (0..num_workers-1), ``num_workers``, ``seed`` (this worker's seed,
    base_seed + id) and ``dataset`` (this process's copy of the loader's dataset). Read-only."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id: int, num_workers: int, seed: int, dataset: Any) -> None:
        for k, v in (("id", id), ("num_workers", num_workers), ("seed", seed), ("dataset", dataset)):
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        raise AttributeError(f"WorkerInfo is read-only: cannot set {name!r}")

    def __repr__(self):
        return (f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed}, "
                f"dataset={type(self.dataset).__name__})")


def get_worker_info() -> Optional[WorkerInfo]:
    """In a DataLoader worker process, its WorkerInfo (id, num_workers, seed, dataset); None in the main
    process. An IterableDataset shards its stream with it; a worker_init_fn can configure
    ``info.dataset``, the worker's own copy."""
    return _worker_info


# --- transport ------------------------------------------------------------------------------------------

class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return _reduce_tensor(obj)
        return NotImplemented


def _reduce_tensor(t):
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError(f"DataLoader: a batch holds a tensor that requires grad and is not a leaf (made by "
                           f"{type(t.grad_fn).__name__}); its graph cannot leave the worker process. detach() it in "
                           "the dataset or collate_fn, or use num_workers=0")
    return _rebuild_tensor, (to_numpy(t.data), str(t.device), bool(t.requires_grad))


def _rebuild_tensor(array, device, requires_grad):
    dev = _parse_device(device)
    t = Tensor._make(array if dev.type == "cpu" else dev.backend.asarray(array), dev)
    return t.requires_grad_(True) if requires_grad else t


def dumps(obj):
    """``obj`` as pickle bytes, Tensors included (as host arrays with their device)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


loads = pickle.loads


def shm_available():
    return os.path.isdir(SHM_DIR) and os.access(SHM_DIR, os.W_OK)


def dumps_batch(obj, path):
    """``(pickle bytes, shm)``: shm is None, or ``(path, spans, size)`` when the large buffers were written
    to the shared-memory file ``path`` (None: everything in band)."""
    big = []

    def out_of_band(buf):
        raw = buf.raw()
        if path is None or raw.nbytes < SHM_MIN_BYTES:
            return True                           # in band
        big.append(raw)
        return False
    f = io.BytesIO()
    _Pickler(f, protocol=5, buffer_callback=out_of_band).dump(obj)
    if not big:
        return f.getvalue(), None
    spans, size = [], 0
    for raw in big:
        spans.append((size, raw.nbytes))
        size += -(-raw.nbytes // 64) * 64           # 64-byte aligned
    try:                                            # written, not mapped: a full /dev/shm is an OSError
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)   # (ENOSPC), not a SIGBUS
        try:
            for (off, n), raw in zip(spans, big):
                done = 0
                while done < n:
                    done += os.pwrite(fd, raw[done:], off + done)
            os.ftruncate(fd, size)
        finally:
            os.close(fd)
    except OSError:
        discard_batch((None, (path,)))
        return dumps(obj), None                     # this batch travels in the pickle
    return f.getvalue(), (path, spans, size)


def loads_batch(payload):
    """The batch ``dumps_batch`` made; its shared-memory file (if any) is mapped and unlinked."""
    data, shm = payload
    if shm is None:
        return pickle.loads(data)
    path, spans, size = shm
    fd = os.open(path, os.O_RDWR)
    try:
        mm = mmap.mmap(fd, size)
    finally:
        os.close(fd)
        os.unlink(path)
    view = memoryview(mm)
    return pickle.loads(data, buffers=[view[off:off + n] for off, n in spans])


def discard_batch(payload):
    """Remove the shared-memory file of a batch that will not be handed out."""
    shm = payload[1] if isinstance(payload, tuple) else None
    if shm is not None:
        try:
            os.unlink(shm[0])
        except OSError:
            pass


def remove_shm_files(prefix):
    for p in glob.glob(os.path.join(SHM_DIR, glob.escape(prefix) + "*")):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


class _KeyErrorMessage(str):
    """KeyError's str() is the repr of its argument; this keeps the traceback's line breaks readable."""

    def __repr__(self):
        return self


class WorkerError:
    """An exception raised in a worker, carried to the main process as its type and traceback text."""

    def __init__(self, worker_id, pid, where):
        exc_type, exc, _ = sys.exc_info()
        self.worker_id, self.pid, self.where = worker_id, pid, where
        self.type_name = exc_type.__name__
        self.text = "".join(traceback.format_exception(exc_type, exc, exc.__traceback__))
        try:                                       # a class defined inside a function does not pickle
            pickle.dumps(exc_type)
            self.exc_type = exc_type
        except Exception:
            self.exc_type = RuntimeError

    def reraise(self):
        msg = (f"Caught {self.type_name} in DataLoader worker process {self.worker_id} (pid {self.pid}) "
               f"{self.where}.\nOriginal {self.text}")
        if self.exc_type is KeyError:
            msg = _KeyErrorMessage(msg)
        try:
            exc = self.exc_type(msg)
        except Exception:                          # an exception type whose constructor wants other arguments
            exc = None
        if exc is None:
            raise RuntimeError(msg) from None
        raise exc


# --- the worker ------------------------------------------------------------------------------------------

class WorkerSpec:
    """Everything a worker needs, handed over once when it starts."""

    def __init__(self, dataset, iterable, collate_fn, batch_size, drop_last, worker_init_fn, base_seed,
                 num_workers, forked, shm_prefix):
        self.dataset, self.iterable, self.collate_fn = dataset, iterable, collate_fn
        self.batch_size, self.drop_last, self.worker_init_fn = batch_size, drop_last, worker_init_fn
        self.base_seed, self.num_workers, self.forked = base_seed, num_workers, forked
        self.shm_prefix = shm_prefix             # None: batches travel in the pickle


def seed_worker(base_seed, worker_id, forked):
    """Seed this process's generators as a PyTorch worker's: Python's ``random`` and ag's generators
    with base_seed + worker_id, NumPy's global generator with 4 words of a SeedSequence of (worker_id,
    base_seed) so that it does not repeat the others' streams. CUDA generators take the seed's low 32
    bits. A forked worker leaves the CUDA generators its parent made alone (a forked child must not
    touch its parent's CUDA context; on the CuPy stand-in they are reseeded); generators made in the
    worker start from the seed."""
    seed = base_seed + worker_id
    random.seed(seed)
    get_backend("cpu").seed(seed)
    cuda_seed = seed & 0xFFFFFFFF
    _cupy_backend.set_global_seed(cuda_seed)
    if forked and _cupy_backend.simulated():
        for i in range(_cupy_backend.device_count()):
            get_backend(f"cuda:{i}").seed(cuda_seed)
    np = get_backend("cpu").xp
    mask = 0xFFFFFFFF
    words = np.random.SeedSequence([worker_id, base_seed & mask, (base_seed >> 32) & mask]).generate_state(4)
    np.random.seed(words)
    return seed


def worker_loop(spec, index_queue, result_queue, done_event, epoch_value, worker_id):
    """The body of worker process ``worker_id`` (see the module docstring)."""
    global _worker_info
    pid, parent_pid = os.getpid(), os.getppid()
    try:
        init_error, fetcher = None, None
        try:                                   # answered, like worker_init_fn's, as the first task's error
            if isinstance(spec, bytes):
                spec = loads(spec)
            seed = seed_worker(spec.base_seed, worker_id, spec.forked)
            _worker_info = WorkerInfo(worker_id, spec.num_workers, seed, spec.dataset)
        except Exception:
            init_error = WorkerError(worker_id, pid, "while starting (unpickling the dataset, seeding)")
        try:
            if init_error is None and spec.worker_init_fn is not None:
                spec.worker_init_fn(worker_id)
            if init_error is None and not spec.iterable:
                fetcher = make_fetcher(spec.dataset, False, spec.collate_fn, spec.batch_size, spec.drop_last)
        except Exception:
            init_error = WorkerError(worker_id, pid, "in worker_init_fn")
        epoch, exhausted, sent = None, False, 0
        while not done_event.is_set():
            try:
                task = index_queue.get(timeout=POLL_S)
            except queue.Empty:
                task = ()
            if task is None or os.getppid() != parent_pid:    # shut down, or the main process is gone
                break
            if not task:
                continue
            task_epoch, idx, index = task
            if task_epoch < epoch_value.value:                # a task of an epoch the loader has left
                continue
            if init_error is not None:
                result_queue.put((task_epoch, idx, worker_id, ERROR, init_error))
                continue
            if spec.iterable and task_epoch != epoch:         # a new epoch: a fresh pass over the stream
                exhausted = False
                try:
                    fetcher = make_fetcher(spec.dataset, True, spec.collate_fn, spec.batch_size, spec.drop_last)
                except Exception:
                    fetcher, exhausted = None, True
                    result_queue.put((task_epoch, idx, worker_id, ERROR, WorkerError(worker_id, pid, "in iter(dataset)")))
                    epoch = task_epoch
                    continue
            epoch = task_epoch
            if exhausted:
                result_queue.put((task_epoch, idx, worker_id, END, None))
                continue
            try:
                batch = fetcher.fetch(index)
                path = None if spec.shm_prefix is None else f"{SHM_DIR}/{spec.shm_prefix}{worker_id}_{sent}"
                sent += 1
                msg = (task_epoch, idx, worker_id, BATCH, dumps_batch(batch, path))
                del batch
            except Exhausted:
                exhausted = True
                msg = (task_epoch, idx, worker_id, END, None)
            except Exception:
                msg = (task_epoch, idx, worker_id, ERROR, WorkerError(worker_id, pid, f"while making batch {idx}"))
            result_queue.put(msg)
    except KeyboardInterrupt:
        pass                                   # Ctrl-C reached the whole process group; the main process handles it
    if done_event.is_set() or os.getppid() != parent_pid:
        result_queue.cancel_join_thread()      # nobody reads what is still queued: do not wait to flush it
    if os.getppid() != parent_pid and getattr(spec, "shm_prefix", None):
        remove_shm_files(f"{spec.shm_prefix}{worker_id}_")       # nobody will map them
    result_queue.close()
