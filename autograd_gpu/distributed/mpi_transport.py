"""Collectives on host (NumPy) arrays through mpi4py's buffer interface: uppercase calls, explicit MPI
datatypes, no pickling. Every buffer is a contiguous 1-D array; the callers (collectives.py, ddp.py)
flatten, stage and check. Reductions take "sum", "max" or "min" (averaging is a sum then a division,
done by the caller)."""

_INSTALL = 'pip install -e ".[distributed]" in a checkout of autograd_gpu (or pip install mpi4py mpich)'


def import_mpi():
    """mpi4py's MPI module (importing it initialises MPI), or a RuntimeError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(f"ag.distributed needs mpi4py and an MPI library, which are not installed ({e}); "
                           f"install them with {_INSTALL}, then launch with mpiexec -n N python script.py") from None
    return MPI


class MpiTransport:
    """One MPI communicator (a duplicate of COMM_WORLD's, so our traffic never mixes with the user's)."""

    def __init__(self, comm):
        MPI = self.MPI = import_mpi()
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        # predefined datatypes only: MPI defines its reductions on those, not on derived ones
        names = {"bool": MPI.C_BOOL, "int8": MPI.INT8_T, "int16": MPI.INT16_T, "int32": MPI.INT32_T,
                       "int64": MPI.INT64_T, "uint8": MPI.UINT8_T, "uint16": MPI.UINT16_T,
                       "uint32": MPI.UINT32_T, "uint64": MPI.UINT64_T, "float32": MPI.FLOAT,
                       "float64": MPI.DOUBLE, "complex64": MPI.C_FLOAT_COMPLEX,
                       "complex128": MPI.C_DOUBLE_COMPLEX,
                       "float16": MPI.UINT16_T}    # moved as 16-bit words; reduced through float32 (below)
        from ..backends import dtype, get_backend
        host = get_backend("cpu").xp                                 # MPI buffers live in host memory
        self._types = {dtype(k): v for k, v in names.items()}      # keyed by dtype: dtype.name is slow
        self._mine, self._digests = host.empty(2, dtype="int64"), host.empty(2 * self.size, dtype="int64")
        self._digest_specs = ([self._mine, MPI.INT64_T], [self._digests, MPI.INT64_T])    # built once: per call
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}                       # they cost a microsecond
        self._in_place = MPI.IN_PLACE

    def _spec(self, a):
        t = self._types.get(a.dtype)
        if t is None:
            raise TypeError(f"ag.distributed: no MPI datatype for {a.dtype}")
        return [a, t]

    def _op(self, op, dtype):
        MPI = self.MPI
        if dtype.kind == "b":                      # bool: sum and max are "any", min is "all"
            return MPI.LAND if op == "min" else MPI.LOR
        return self._ops[op]

    def allreduce(self, a, op):
        """Reduce ``a`` over all ranks, in place."""
        dt = a.dtype
        t = self._types.get(dt)
        if t is not None and dt.kind in "fc" and dt.itemsize > 2:   # the common case, in one call
            self.comm.Allreduce(self._in_place, [a, t], op=self._ops[op])
            return
        if dt.itemsize == 2 and dt.kind == "f":
            return self._via_float32(self.allreduce, a, op)
        self.comm.Allreduce(self._in_place, self._spec(a), op=self._op(op, dt))

    def iallreduce(self, a, op):
        """Start reducing ``a`` in place; returns a request whose ``.Wait()`` finishes it. ``a`` must
        stay untouched until then. No float16 here (DDP keeps float16 gradients in float32 buckets)."""
        return self.comm.Iallreduce(self.MPI.IN_PLACE, self._spec(a), op=self._op(op, a.dtype))

    def broadcast(self, a, src):
        self.comm.Bcast(self._spec(a), root=src)

    def all_gather(self, send, recv):
        """``recv`` (size * len(send) elements) gets every rank's ``send`` in rank order."""
        self.comm.Allgather(self._spec(send), self._spec(recv))

    def reduce_scatter(self, send, recv, op):
        """``send`` holds size blocks of len(recv); rank r gets the reduction of block r in ``recv``."""
        if send.dtype.itemsize == 2 and send.dtype.kind == "f":
            wide = send.astype("float32")
            out = recv.astype("float32")
            self.comm.Reduce_scatter_block(self._spec(wide), self._spec(out), op=self._op(op, wide.dtype))
            recv[...] = out
            return
        self.comm.Reduce_scatter_block(self._spec(send), self._spec(recv), op=self._op(op, send.dtype))

    def _via_float32(self, fn, a, op):
        # float16 is summed in float32 (portable across MPI libraries, and rounded once at the end)
        wide = a.astype("float32")
        fn(wide, op)
        a[...] = wide

    def all_equal(self, digest, flagged):
        """True when every rank passed the same ``digest`` and none is ``flagged``: one Allgather of two
        int64s per rank into buffers kept for it (no pickling, no allocation)."""
        mine = self._mine
        mine[0] = digest
        mine[1] = 1 if flagged else 0
        self.comm.Allgather(*self._digest_specs)
        return self._digests.tolist() == [digest, 0] * self.size

    def gather_objects(self, obj):
        """Every rank's small Python object (pickled: only for signatures and metadata)."""
        return self.comm.allgather(obj)

    def barrier(self):
        self.comm.Barrier()

    def free(self):
        self.comm.Free()
