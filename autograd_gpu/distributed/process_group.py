"""The process group: one per process, made by init_process_group() over MPI's COMM_WORLD.

Ranks talk over MPI (mpi4py) and, with the "nccl" backend, CUDA tensors go through NCCL instead.
init_process_group also installs a sys.excepthook so that an uncaught exception on any rank prints
its traceback, flushes, and aborts the whole MPI job: no rank waits forever for a dead peer.
"""
import sys
import traceback

from .mpi_transport import MpiTransport, import_mpi
from .nccl_transport import NcclTransport, nccl_importable

__all__ = ["init_process_group", "is_initialized", "get_rank", "get_world_size", "get_backend", "barrier",
           "destroy_process_group"]


class _Group:
    def __init__(self, backend, mpi, nccl):
        self.backend, self.mpi, self.nccl = backend, mpi, nccl
        self.rank, self.size = mpi.rank, mpi.size


_group = None
_previous_hook = None


def init_process_group(backend=None):
    """Join the job started by ``mpiexec -n N python script.py``. ``backend``: "mpi" (every tensor
    over MPI; CUDA tensors are staged through host memory), "nccl" (CUDA tensors over NCCL, CPU ones
    over MPI), or None: "nccl" when the default device is CUDA and NCCL can be loaded, else "mpi"."""
    global _group, _previous_hook
    if _group is not None:
        raise RuntimeError("init_process_group: the process group is already initialized; call "
                           "destroy_process_group() first to make a new one")
    if backend not in (None, "mpi", "nccl"):
        raise ValueError(f"init_process_group: backend must be 'mpi', 'nccl' or None, got {backend!r}")
    MPI = import_mpi()
    if backend is None:
        from ..device import get_default_device
        backend = "nccl" if get_default_device().type == "cuda" and nccl_importable() else "mpi"
    mpi = MpiTransport(MPI.COMM_WORLD.Dup())
    nccl = None
    if backend == "nccl":
        from ..backends.cupy_backend import require_cuda
        nccl = NcclTransport(mpi.comm, require_cuda())
    _group = _Group(backend, mpi, nccl)
    _previous_hook = sys.excepthook
    sys.excepthook = _abort_on_exception
    return None


def _abort_on_exception(exc_type, exc, tb):
    """Print this rank's traceback, flush (MPICH's launcher can drop output racing an abort), then end
    every rank of the job."""
    rank = _group.rank if _group is not None else "?"
    sys.stderr.write(f"[rank {rank}] uncaught exception; aborting the MPI job\n")
    traceback.print_exception(exc_type, exc, tb, file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    import_mpi().COMM_WORLD.Abort(1)


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
    """Wait until every rank has reached this call."""
    group().mpi.barrier()


def destroy_process_group():
    """Free the communicators and restore sys.excepthook; MPI itself stays up until the process exits."""
    global _group
    g = group()
    if g.nccl is not None:
        g.nccl.free()
    g.mpi.free()
    _group = None
    if sys.excepthook is _abort_on_exception:
        sys.excepthook = _previous_hook
