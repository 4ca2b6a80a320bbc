"""``cupy.cuda.nccl`` of the stand-in: CuPy's NCCL bindings with their exact signatures (raw device
pointers, element counts, NCCL's datatype and reduction codes, a stream pointer), carried out over MPI
between the processes of an ``mpiexec`` job, so the project's NCCL path runs in CI without a GPU.

Strict where NCCL code goes wrong: a pointer must be an int (``array.data.ptr``, never an array), the
count is in elements of the datatype, every rank must pass the same unique id and agree on the world
size, and the buffer read is exactly ``count`` contiguous elements at the pointer, so passing a
strided view's pointer reduces the wrong memory here as it would on a GPU. The work is done when it is
queued (the stand-in's streams are always idle). mpi4py is imported only when a communicator is made.
"""
import ctypes

import numpy as np

available = True

NCCL_INT8, NCCL_CHAR, NCCL_UINT8, NCCL_INT32, NCCL_INT, NCCL_UINT32 = 0, 0, 1, 2, 2, 3
NCCL_INT64, NCCL_UINT64, NCCL_FLOAT16, NCCL_HALF, NCCL_FLOAT32, NCCL_FLOAT = 4, 5, 6, 6, 7, 7
NCCL_FLOAT64, NCCL_DOUBLE, NCCL_BFLOAT16 = 8, 8, 9
NCCL_SUM, NCCL_PROD, NCCL_MAX, NCCL_MIN, NCCL_AVG = 0, 1, 2, 3, 4

_DTYPES = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64,
           6: np.float16, 7: np.float32, 8: np.float64}
_INVALID_ARGUMENT, _INVALID_USAGE = 4, 5
_MESSAGES = {_INVALID_ARGUMENT: "NCCL_ERROR_INVALID_ARGUMENT", _INVALID_USAGE: "NCCL_ERROR_INVALID_USAGE"}


class NcclError(RuntimeError):
    def __init__(self, status, detail=""):
        self.status = status
        super().__init__(f"{_MESSAGES.get(status, status)}: {detail} (CuPy stand-in)")


def get_version():
    return 22703


def get_build_version():
    return 22703


def get_unique_id():
    """128 signed chars, as CuPy returns ncclUniqueId.internal."""
    return tuple(int(b) for b in np.random.default_rng().integers(-128, 128, 128))


def _int(value, what):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"NcclCommunicator: {what} must be an int, got {type(value).__name__} "
                        "(pass array.data.ptr and stream.ptr, as with CuPy)")
    return int(value)


def _view(ptr, count, datatype):
    """``count`` contiguous elements of ``datatype`` at the device pointer ``ptr``."""
    ptr, count, datatype = _int(ptr, "a buffer pointer"), _int(count, "count"), _int(datatype, "datatype")
    if datatype not in _DTYPES:
        raise NcclError(_INVALID_ARGUMENT, f"datatype {datatype} is not one the stand-in knows")
    if count < 0 or (ptr == 0 and count):
        raise NcclError(_INVALID_ARGUMENT, f"pointer {ptr:#x} with count {count}")
    dtype = np.dtype(_DTYPES[datatype])
    if count == 0:
        return np.empty(0, dtype)
    raw = (ctypes.c_char * (count * dtype.itemsize)).from_address(ptr)
    return np.frombuffer(raw, dtype=dtype)


class NcclCommunicator:
    """One rank of a communicator of ``ndev`` ranks that share ``commId``."""

    def __init__(self, ndev, commId, rank):
        from mpi4py import MPI
        ndev, rank = _int(ndev, "ndev"), _int(rank, "rank")
        if not isinstance(commId, tuple) or len(commId) != 128:
            raise TypeError("NcclCommunicator: commId must be the 128-tuple from get_unique_id()")
        if not 0 <= rank < ndev:
            raise NcclError(_INVALID_ARGUMENT, f"rank {rank} of a communicator of {ndev}")
        world = MPI.COMM_WORLD
        ids = world.allgather((commId, ndev))
        if any(i != ids[0] for i in ids) or ndev != world.Get_size():
            raise NcclError(_INVALID_USAGE, f"ranks disagree on the unique id or size: ndev {ndev}, "
                                            f"{world.Get_size()} processes")
        self._mpi = MPI
        self._comm = world.Split(0, rank)
        self._rank, self._size = rank, ndev

    def _live(self):
        if self._comm is None:
            raise NcclError(_INVALID_ARGUMENT, "the communicator was destroyed")
        return self._comm

    def _op(self, op, dtype):
        m = self._mpi
        ops = {NCCL_SUM: m.SUM, NCCL_PROD: m.PROD, NCCL_MAX: m.MAX, NCCL_MIN: m.MIN, NCCL_AVG: m.SUM}
        if _int(op, "op") not in ops:
            raise NcclError(_INVALID_ARGUMENT, f"reduction op {op}")
        return ops[op]

    def _reduce(self, send, recv, op, scatter=False):
        """MPI has no float16: reduce float16 in float32 and round, as NCCL's result is float16."""
        work = send.astype(np.float32) if send.dtype == np.float16 else send
        out = np.empty(recv.size, work.dtype)
        if scatter:
            self._live().Reduce_scatter_block(work, out, op=self._op(op, work.dtype))
        else:
            self._live().Allreduce(work, out, op=self._op(op, work.dtype))
        if op == NCCL_AVG:
            out = out / self._size if out.dtype.kind == "f" else out // self._size
        recv[...] = out

    def allReduce(self, sendbuf, recvbuf, count, datatype, op, stream):
        _int(stream, "stream")
        send, recv = _view(sendbuf, count, datatype), _view(recvbuf, count, datatype)
        self._reduce(send.copy(), recv, op)

    def reduceScatter(self, sendbuf, recvbuf, recvcount, datatype, op, stream):
        _int(stream, "stream")
        send = _view(sendbuf, _int(recvcount, "recvcount") * self._size, datatype)
        self._reduce(send.copy(), _view(recvbuf, recvcount, datatype), op, scatter=True)

    def broadcast(self, sendbuff, recvbuff, count, datatype, root, stream):
        _int(stream, "stream")
        if not 0 <= _int(root, "root") < self._size:
            raise NcclError(_INVALID_ARGUMENT, f"root {root} of a communicator of {self._size}")
        recv = _view(recvbuff, count, datatype)
        data = _view(sendbuff, count, datatype).copy() if self._rank == root else np.empty_like(recv)
        self._live().Bcast(data, root=root)
        recv[...] = data

    def bcast(self, buff, count, datatype, root, stream):
        self.broadcast(buff, buff, count, datatype, root, stream)

    def allGather(self, sendbuf, recvbuf, count, datatype, stream):
        _int(stream, "stream")
        send = _view(sendbuf, count, datatype).copy()
        recv = _view(recvbuf, _int(count, "count") * self._size, datatype)
        out = np.empty_like(recv)
        self._live().Allgather(send, out)
        recv[...] = out

    def rank_id(self):
        return self._rank

    def size(self):
        return self._size

    def device_id(self):
        from ._core import current_device_id
        return current_device_id()

    def destroy(self):
        if self._comm is not None:
            self._comm.Free()
            self._comm = None

    def abort(self):
        self.destroy()
