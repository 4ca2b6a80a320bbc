"""Collectives on CUDA (CuPy) arrays through NCCL (``cupy.cuda.nccl``), enqueued on a CUDA stream.
The communicator's unique id is made on rank 0 and sent to the others over MPI. NCCL's library comes
from pip (``nvidia-nccl-cu12`` or ``-cu13``); where CuPy cannot load it, init fails and says so.

Written against CuPy's ``NcclCommunicator`` (allReduce, broadcast, allGather, reduceScatter: device
pointers, element counts, an NCCL datatype, a stream pointer). CI runs it in 2-rank jobs on the CuPy
stand-in, whose ``cupy.cuda.nccl`` has those signatures and carries the calls out over MPI; it has not
yet run on a GPU with the real library."""

from ..backends.cupy_backend import nccl_module

_HINT = ('NCCL is not available to CuPy; install its library with pip install nvidia-nccl-cu12 (CUDA 12) '
         'or nvidia-nccl-cu13 (CUDA 13), or use init_process_group("mpi"), which stages CUDA tensors '
         'through host memory')


def import_nccl():
    """cupy.cuda.nccl, or a RuntimeError with the install hint."""
    try:
        nccl = nccl_module()
    except Exception as e:            # ImportError, or the shared library failing to load
        raise RuntimeError(f"init_process_group('nccl'): {_HINT} ({type(e).__name__}: {e})") from None
    if not getattr(nccl, "available", False):
        raise RuntimeError(f"init_process_group('nccl'): {_HINT}")
    return nccl


def nccl_importable():
    try:
        import_nccl()
    except RuntimeError:
        return False
    return True


class NcclTransport:
    """One NCCL communicator over all ranks, for this process's current GPU."""

    def __init__(self, mpi, cupy):
        nccl = self.nccl = import_nccl()
        self.cp = cupy
        self.rank, self.size = mpi.rank, mpi.size
        uid = nccl.get_unique_id() if self.rank == 0 else None
        # a tuple of 128 ints, pickled: over the MPI transport, so its wait has the group's deadline
        uid = mpi.gather_objects(uid, "init_process_group('nccl') (the NCCL unique id)")[0]
        self.comm = nccl.NcclCommunicator(self.size, uid, self.rank)
        self.side_stream = cupy.cuda.Stream(non_blocking=True)   # DDP's bucket reductions
        self._types = {"int8": nccl.NCCL_INT8, "uint8": nccl.NCCL_UINT8, "bool": nccl.NCCL_UINT8,
                       "int32": nccl.NCCL_INT32, "uint32": nccl.NCCL_UINT32, "int64": nccl.NCCL_INT64,
                       "uint64": nccl.NCCL_UINT64, "float16": nccl.NCCL_FLOAT16,
                       "float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64}

    def _type(self, a):
        t = self._types.get(a.dtype.name)
        if t is None:
            raise TypeError(f"NCCL has no datatype for {a.dtype}; use the mpi backend for this tensor")
        return t

    def _op(self, op, dtype):
        n = self.nccl
        if dtype.kind == "b":                       # bool as uint8 0/1: max is "any", min is "all"
            return n.NCCL_MIN if op == "min" else n.NCCL_MAX
        return {"sum": n.NCCL_SUM, "max": n.NCCL_MAX, "min": n.NCCL_MIN}[op]

    def _stream(self, stream):
        return (stream or self.cp.cuda.get_current_stream()).ptr

    def allreduce(self, a, op, stream=None):
        self.comm.allReduce(a.data.ptr, a.data.ptr, a.size, self._type(a), self._op(op, a.dtype),
                            self._stream(stream))

    def iallreduce(self, a, op):
        """Start the reduction on the side stream, after the work already queued on the current one;
        the returned request's Wait() makes the current stream wait for it (no host sync)."""
        cp = self.cp
        current = cp.cuda.get_current_stream()
        self.side_stream.wait_event(current.record())
        self.allreduce(a, op, self.side_stream)
        return _StreamRequest(self.side_stream.record(), cp)

    def broadcast(self, a, src):
        self.comm.broadcast(a.data.ptr, a.data.ptr, a.size, self._type(a), src, self._stream(None))

    def all_gather(self, send, recv):
        self.comm.allGather(send.data.ptr, recv.data.ptr, send.size, self._type(send), self._stream(None))

    def reduce_scatter(self, send, recv, op):
        self.comm.reduceScatter(send.data.ptr, recv.data.ptr, recv.size, self._type(send),
                                self._op(op, send.dtype), self._stream(None))

    def free(self):
        self.comm.destroy()


class _StreamRequest:
    def __init__(self, event, cp):
        self.event, self.cp = event, cp

    def Wait(self):
        self.cp.cuda.get_current_stream().wait_event(self.event)
