"""The process group: one per process, made by init_process_group() over MPI's COMM_WORLD.

Ranks talk over MPI (mpi4py) and, with the "nccl" backend, CUDA tensors go through NCCL instead.
init_process_group also installs a sys.excepthook so that an uncaught exception on any rank prints
its traceback, flushes, and aborts the whole MPI job, and an exit hook (atexit) through which a rank
whose process ends with the group initialised (a return, sys.exit(), an exception someone caught)
tells the others: their next collective raises, naming it. Every wait has a deadline, the group's
``timeout``; a collective still incomplete then aborts the job, naming it. No rank waits forever.
"""
import atexit
import sys
import time
import traceback

from .mpi_transport import MpiTransport, Watch, import_mpi, seconds, wait_until, abort_job, EXITED, DESTROYED
from .nccl_transport import NcclTransport, nccl_importable

__all__ = ["init_process_group", "is_initialized", "get_rank", "get_world_size", "get_backend", "barrier",
           "destroy_process_group"]


class _Group:
    def __init__(self, backend, mpi, nccl, watch):
        self.backend, self.mpi, self.nccl, self.watch = backend, mpi, nccl, watch
        self.rank, self.size = mpi.rank, mpi.size
        self.timeout = watch.timeout


_group = None
_previous_hook = None
_made = 0                     # groups made by this process: the token that tells their messages apart
_exit_hook_installed = False


def init_process_group(backend=None, timeout=None):
    """Join the job started by ``mpiexec -n N python script.py``. ``backend``: "mpi" (every tensor
    over MPI; CUDA tensors are staged through host memory), "nccl" (CUDA tensors over NCCL, CPU ones
    over MPI), or None: "nccl" when the default device is CUDA and NCCL can be loaded, else "mpi".
    ``timeout`` (a datetime.timedelta or seconds; default 30 minutes, as PyTorch's): how long any
    collective, and this call itself, may wait for the other ranks before the job is aborted with a
    message naming the collective."""
    global _group, _previous_hook, _made, _exit_hook_installed
    if _group is not None:
        raise RuntimeError("init_process_group: the process group is already initialized; call "
                           "destroy_process_group() first to make a new one")
    if backend not in (None, "mpi", "nccl"):
        raise ValueError(f"init_process_group: backend must be 'mpi', 'nccl' or None, got {backend!r}")
    limit = seconds(timeout)
    MPI = import_mpi()
    if backend is None:
        from ..device import get_default_device
        backend = "nccl" if get_default_device().type == "cuda" and nccl_importable() else "mpi"
    world = MPI.COMM_WORLD
    deadline = time.monotonic() + limit
    comm, req = world.Idup()                  # non-blocking: a rank that never comes is a timeout, not a hang
    wait_until(req, deadline, "init_process_group", world.Get_rank())
    ctl, req = world.Idup()                   # the control channel: ranks that leave say so on it
    wait_until(req, deadline, "init_process_group", world.Get_rank())
    watch = Watch(MPI, ctl, limit, token=_made)
    _made += 1
    mpi = MpiTransport(comm, watch)
    nccl = None
    if backend == "nccl":
        from ..backends.cupy_backend import require_cuda
        nccl = NcclTransport(mpi, require_cuda())
    _group = _Group(backend, mpi, nccl, watch)
    _previous_hook = sys.excepthook
    sys.excepthook = _abort_on_exception
    if not _exit_hook_installed:
        atexit.register(_leave_at_exit)
        _exit_hook_installed = True
    return None


def _leave_at_exit():
    """The process ends with the group initialised: tell the other ranks (their next collective that
    this rank has not joined raises, naming it). A process that saw a collective fail (the error was
    caught, or raised in an atexit callback, whose errors Python only prints) ends the job with
    status 1 instead of 0."""
    g = _group
    if g is None:
        return
    g.watch.leave(EXITED)
    if g.watch.failure is not None:
        abort_job(f"[rank {g.rank}] ag.distributed: exiting after a collective of the process group failed "
                  f"({g.watch.failure}); ending the MPI job with status 1")


def _abort_on_exception(exc_type, exc, tb):
    """Print this rank's traceback, flush (MPICH's launcher can drop output racing an abort), then end
    every rank of the job."""
    rank = _group.rank if _group is not None else "?"
    sys.stderr.write(f"[rank {rank}] uncaught exception; aborting the MPI job\n")
    traceback.print_exception(exc_type, exc, tb, file=sys.stderr)
    abort_job(f"[rank {rank}] aborting the MPI job")


def group():
    """The process group, or a RuntimeError when init_process_group() has not been called."""
    if _group is None:
        raise RuntimeError("ag.distributed: the default process group is not initialized; call "
                           "ag.distributed.init_process_group() first (and launch with mpiexec -n N)")
    return _group


def is_initialized():
    """True between ``init_process_group`` and ``destroy_process_group``."""
    return _group is not None


def get_rank():
    """This process's rank, 0 .. world_size - 1."""
    return group().rank


def get_world_size():
    """The number of ranks in the default process group."""
    return group().size


def get_backend():
    """"mpi" or "nccl": the backend the group was made with."""
    return group().backend


def barrier():
    """Wait until every rank has reached this call. It is a collective like the others: the ranks
    agree on the call first, so a rank in barrier() while another is in all_reduce raises on both."""
    from .collectives import barrier as agreed_barrier
    agreed_barrier()


def destroy_process_group():
    """Leave the group (the other ranks' next collective raises, naming this rank, unless they also
    leave), free the communicators and restore sys.excepthook; MPI itself stays up until the process
    exits."""
    global _group
    g = group()
    g.watch.leave(DESTROYED)
    g.watch.ctl.Free()
    if g.nccl is not None:
        g.nccl.free()
    g.mpi.free()
    _group = None
    if sys.excepthook is _abort_on_exception:
        sys.excepthook = _previous_hook
