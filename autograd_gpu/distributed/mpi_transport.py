"""Collectives on host (NumPy) arrays through mpi4py's buffer interface: uppercase calls, explicit MPI
datatypes, no pickling (except the small metadata of gather_objects). Every buffer is a contiguous 1-D
array; the callers (collectives.py, ddp.py) flatten, stage and check. Reductions take "sum", "max" or
"min" (averaging is a sum then a division, done by the caller).

No call here blocks inside MPI. Each collective is posted with MPI's non-blocking call (Iallreduce,
Ibcast, Iallgather, ...) and waited for by the group's ``Watch``: it polls the request and, while it
waits, (1) the control channel, where a rank that leaves the group (its process exits, or it calls
destroy_process_group) says so, and (2) a deadline, the ``timeout`` of init_process_group. A collective
that a departed rank never took part in raises a RuntimeError naming that rank; one still incomplete
at the deadline ends the whole job (MPI_Abort) with a message naming the collective."""
import pickle
import sys
import time

_INSTALL = 'pip install -e ".[distributed]" in a checkout of autograd_gpu (or pip install mpi4py mpich)'

DEFAULT_TIMEOUT = 1800.0          # seconds: PyTorch's default process-group timeout (30 minutes)
EXITED, DESTROYED = 0, 1          # how a rank left the group
_ACK = 2                          # "I was waiting for you and will fail": the answer to a leaving rank
_HOW = {EXITED: "exited (its script returned, called sys.exit() or otherwise ended) while the process group "
                "was initialised",
        DESTROYED: "called destroy_process_group()"}
_SPIN = 64                        # Tests before the first look at the clock (a few microseconds)
_BUSY = 0.002                     # seconds of polling (yielding the CPU) before sleeping between polls
_MAX_SLEEP = 0.001
_GRACE = 1.0                      # seconds a leaving rank waits to hear whether the others also leave
_LINGER = 10.0                    # ... and, told it is awaited, for the failing rank to end the job


def import_mpi():
    """mpi4py's MPI module (importing it initialises MPI), or a RuntimeError saying how to install it."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise RuntimeError(f"ag.distributed needs mpi4py and an MPI library, which are not installed ({e}); "
                           f"install them with {_INSTALL}, then launch with mpiexec -n N python script.py") from None
    return MPI


def abort_job(message):
    """Print ``message`` on stderr, flush, give MPICH's launcher a moment to forward it (output that
    races an abort can be dropped), and end every rank of the job with status 1."""
    sys.stderr.write(message.rstrip("\n") + "\n")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    time.sleep(0.3)
    import_mpi().COMM_WORLD.Abort(1)


def wait_until(req, deadline, what, rank):
    """Wait for ``req`` with no Watch yet (init_process_group's own set-up), aborting the job at
    ``deadline`` (time.monotonic() seconds)."""
    while not req.Test():
        if time.monotonic() >= deadline:
            abort_job(f"[rank {rank}] ag.distributed: {what} did not complete within init_process_group's "
                      "timeout: not every rank of the job called init_process_group(); aborting the MPI job")
        time.sleep(1e-4)


def seconds(timeout):
    """init_process_group's ``timeout`` (a datetime.timedelta or a number of seconds; None: the
    default) as a positive float of seconds."""
    import datetime
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, datetime.timedelta):
        value = timeout.total_seconds()
    elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
        value = float(timeout)
    else:
        raise TypeError("init_process_group: timeout must be a datetime.timedelta or a number of seconds, "
                        f"got {type(timeout).__name__}")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"init_process_group: timeout must be a positive, finite duration, got {timeout!r}")
    return value


class Watch:
    """The process group's waits: every collective on its communicators is numbered (the same number on
    every rank, since every rank posts the same collectives in the same order) and waited for here.

    A rank that leaves sends each other rank, on the control communicator, ``[token, rank, done, how]``:
    ``done`` is the number of collectives it completed (every one numbered below it). A rank waiting in
    collective number n >= done of a departed rank can never complete it, and raises; below that it
    keeps waiting, because the departed rank did its part. ``token`` tells this group from an earlier
    one whose late messages MPI may deliver to a new communicator (MPI reuses their context ids).

    A rank that raises this way answers the leaving one (``_ACK``). A rank leaving at exit waits up to
    ``_GRACE`` s to hear that every other rank left too (a normal end) or such an answer; with an
    answer it stays alive until the job ends (at most ``_LINGER`` s), because MPICH's launcher ends
    every rank as soon as one exits with a non-zero status (sys.exit(3)), which would cut the failing
    rank's message short. Hearing neither, it prints a note naming the ranks still in the group, and
    exits. destroy_process_group() does not wait: the process goes on."""
    TAG = 24024

    def __init__(self, MPI, ctl, timeout, token):
        from ..backends import get_backend
        xp = get_backend("cpu").xp
        self.MPI, self.ctl, self.timeout, self.token = MPI, ctl, timeout, token
        self.rank, self.size = ctl.Get_rank(), ctl.Get_size()
        self.seq = 0                 # collectives this process has posted on the group's communicators
        self.pending = {}            # number -> request: posted, handed to the caller, not yet waited for
        self.failed = None           # the lowest number this process gave up waiting for
        self.failure = None          # and why (the first such error's message)
        self.left = {}               # rank -> (done, how) of ranks that left the group
        self.acked = set()           # leaving ranks told that this one waits for them
        self.awaited_by = set()      # while leaving: ranks that said they wait for this one
        self.closed = False
        self._sent = []              # buffers of messages in flight (MPI reads them until they complete)
        self._xp = xp
        self._box = xp.zeros(4, dtype="int64")
        self._rx = ctl.Irecv([self._box, MPI.INT64_T], source=MPI.ANY_SOURCE, tag=self.TAG)

    # -- numbering and waiting -----------------------------------------------------------------------
    def start(self, what):
        """The number of the collective about to be posted; raises when it cannot complete because a
        rank has left (news of one that leaves now is read while waiting)."""
        n = self.seq
        if self.left or self.closed:
            if self.closed:
                raise RuntimeError(f"ag.distributed: {what}: the process group was destroyed; call "
                                   "init_process_group() again")
            self._check(n, what)
        self.seq = n + 1
        return n

    def wait(self, req, n, what):
        """Wait for ``req`` (collective number ``n``, described by ``what`` in messages)."""
        test = req.Test
        if test():
            return
        for _ in range(_SPIN):
            if test():
                return
        self._wait_long(test, n, what)

    def _wait_long(self, test, n, what):
        start = time.monotonic()
        deadline = start + self.timeout
        rx, delay = self._rx, 0.0
        while True:
            if rx.Test():
                self._heard()
                rx = self._rx
            if self.left:
                self._check(n, what)
            if test():
                return
            now = time.monotonic()
            if now >= deadline:
                self._timed_out(n, what, now - start)
            time.sleep(delay)
            if now - start > _BUSY:
                delay = min(max(2 * delay, 5e-5), _MAX_SLEEP)

    def _heard(self):
        while True:
            token, r, done, how = (int(v) for v in self._box)
            if token == self.token and r != self.rank and 0 <= r < self.size:
                if how == _ACK:
                    self.awaited_by.add(r)
                else:
                    self.left[r] = (done, how)
            self._rx = self.ctl.Irecv([self._box, self.MPI.INT64_T], source=self.MPI.ANY_SOURCE, tag=self.TAG)
            if not self._rx.Test():
                return

    def _check(self, n, what):
        for r in sorted(self.left):
            done, how = self.left[r]
            if n >= done:
                self.failed = n if self.failed is None else min(self.failed, n)
                message = (
                    f"ag.distributed: {what}: rank {r} left the process group before taking part in this "
                    f"collective (rank {r} {_HOW.get(how, 'left')}; it completed {done} collective(s) of the "
                    f"group, this is number {n + 1}), so it can never complete. Every rank must run the same "
                    "collectives; for uneven inputs under DistributedDataParallel use ddp.join()")
                self.failure = self.failure or message
                if r not in self.acked:
                    self.acked.add(r)
                    self._send(r, n, _ACK)
                raise RuntimeError(message)

    def _timed_out(self, n, what, waited):
        gone = "".join(f"; rank {r} has left the group ({_HOW.get(h, 'left')})" for r, (_, h) in
                       sorted(self.left.items()))
        abort_job(f"[rank {self.rank}] ag.distributed: {what} (collective number {n + 1} of the process group) "
                  f"did not complete within the timeout of {_fmt(self.timeout)} set by "
                  f"init_process_group(timeout=...): waited {waited:.1f} s for the other rank(s), which did not "
                  f"reach it (a rank stuck, still computing, or in another collective){gone}; aborting the "
                  "MPI job")

    # -- non-blocking requests handed to the caller (DDP's buckets) ---------------------------------
    def hand_out(self, req, n, what):
        self.pending[n] = req
        return _Request(self, req, n, what)

    # -- leaving ---------------------------------------------------------------------------------------
    def leave(self, how):
        """Tell every other rank that this one leaves: first finish (briefly) what this process started,
        then send [token, rank, done, how]. Never raises: it runs at exit."""
        if self.closed:
            return
        self.closed = True
        try:
            deadline = time.monotonic() + min(self.timeout, 5.0)
            for n in sorted(self.pending):
                req = self.pending[n]
                while not req.Test():
                    if self._rx.Test():
                        self._heard()
                    if any(n >= d for d, _ in self.left.values()) or time.monotonic() >= deadline:
                        break
                    time.sleep(1e-4)
                else:
                    del self.pending[n]
                    continue
                break
            done = min([self.seq, *self.pending] + ([] if self.failed is None else [self.failed]))
            for r in range(self.size):
                if r != self.rank:
                    self._send(r, done, how)
            # at exit, wait until every other rank has left too, or one says it waits for this one
            deadline = time.monotonic() + (_GRACE if how == EXITED else 0.0)
            while time.monotonic() < deadline and len(self.left) < self.size - 1 and not self.awaited_by:
                if self._rx.Test():
                    self._heard()
                else:
                    time.sleep(1e-3)
            if self.awaited_by:          # its message and MPI_Abort come next: do not cut them short
                deadline = time.monotonic() + min(self.timeout, _LINGER)
                while time.monotonic() < deadline:
                    time.sleep(1e-2)
            elif how == EXITED and len(self.left) < self.size - 1:
                still = [r for r in range(self.size) if r != self.rank and r not in self.left]
                sys.stderr.write(f"[rank {self.rank}] ag.distributed: this process exits with the process group "
                                 f"initialised; rank(s) {still} are still in it, and their next collective "
                                 "with this rank will fail (call destroy_process_group() on every rank to "
                                 "leave without this note)\n")
                sys.stderr.flush()
            deadline = time.monotonic() + 1.0
            while self._sent and time.monotonic() < deadline:
                self._sent = [m for m in self._sent if not m[0].Test()]
                time.sleep(1e-4)
            if not self._rx.Test():
                self._rx.Cancel()
                self._rx.Wait()
        except Exception:
            pass

    def _send(self, dest, done, how):
        msg = self._xp.asarray([self.token, self.rank, done, how], dtype="int64")
        self._sent.append((self.ctl.Isend([msg, self.MPI.INT64_T], dest=dest, tag=self.TAG), msg))


class _Request:
    """A non-blocking collective in flight; ``Wait()`` goes through the Watch."""
    __slots__ = ("watch", "req", "n", "what")

    def __init__(self, watch, req, n, what):
        self.watch, self.req, self.n, self.what = watch, req, n, what

    def Wait(self):
        self.watch.wait(self.req, self.n, self.what)
        self.watch.pending.pop(self.n, None)


def _fmt(s):
    return f"{s:g} s"


class MpiTransport:
    """One MPI communicator (a duplicate of COMM_WORLD's, so our traffic never mixes with the user's),
    whose waits go through the group's ``watch``."""

    def __init__(self, comm, watch):
        MPI = self.MPI = import_mpi()
        self.comm, self.watch = comm, watch
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        # predefined datatypes only: MPI defines its reductions on those, not on derived ones
        names = {"bool": MPI.C_BOOL, "int8": MPI.INT8_T, "int16": MPI.INT16_T, "int32": MPI.INT32_T,
                 "int64": MPI.INT64_T, "uint8": MPI.UINT8_T, "uint16": MPI.UINT16_T,
                 "uint32": MPI.UINT32_T, "uint64": MPI.UINT64_T, "float32": MPI.FLOAT,
                 "float64": MPI.DOUBLE, "complex64": MPI.C_FLOAT_COMPLEX,
                 "complex128": MPI.C_DOUBLE_COMPLEX,
                 "float16": MPI.UINT16_T}    # moved as 16-bit words; reduced through float32 (below)
        from ..backends import dtype, get_backend
        host = self._host = get_backend("cpu").xp                    # MPI buffers live in host memory
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

    def allreduce(self, a, op, what="all_reduce"):
        """Reduce ``a`` over all ranks, in place."""
        dt = a.dtype
        t = self._types.get(dt)
        if t is not None and dt.kind in "fc" and dt.itemsize > 2:   # the common case
            w = self.watch
            n = w.start(what)
            w.wait(self.comm.Iallreduce(self._in_place, [a, t], op=self._ops[op]), n, what)
            return
        if dt.itemsize == 2 and dt.kind == "f":
            # float16 is summed in float32 (portable across MPI libraries, and rounded once at the end)
            wide = a.astype("float32")
            self.allreduce(wide, op, what)
            a[...] = wide
            return
        spec, mop = self._spec(a), self._op(op, dt)
        self._run(lambda: self.comm.Iallreduce(self._in_place, spec, op=mop), what)

    def iallreduce(self, a, op, what="all_reduce"):
        """Start reducing ``a`` in place; returns a request whose ``.Wait()`` finishes it. ``a`` must
        stay untouched until then. No float16 here (DDP keeps float16 gradients in float32 buckets)."""
        n = self.watch.start(what)
        req = self.comm.Iallreduce(self._in_place, self._spec(a), op=self._op(op, a.dtype))
        return self.watch.hand_out(req, n, what)

    def broadcast(self, a, src, what="broadcast"):
        spec = self._spec(a)
        self._run(lambda: self.comm.Ibcast(spec, root=src), what)

    def all_gather(self, send, recv, what="all_gather"):
        """``recv`` (size * len(send) elements) gets every rank's ``send`` in rank order."""
        s, r = self._spec(send), self._spec(recv)
        self._run(lambda: self.comm.Iallgather(s, r), what)

    def reduce_scatter(self, send, recv, op, what="reduce_scatter"):
        """``send`` holds size blocks of len(recv); rank r gets the reduction of block r in ``recv``."""
        if send.dtype.itemsize == 2 and send.dtype.kind == "f":
            wide = send.astype("float32")
            out = recv.astype("float32")
            self.reduce_scatter(wide, out, op, what)
            recv[...] = out
            return
        s, r, mop = self._spec(send), self._spec(recv), self._op(op, send.dtype)
        self._run(lambda: self.comm.Ireduce_scatter_block(s, r, op=mop), what)

    def _run(self, post, what):
        w = self.watch
        n = w.start(what)
        w.wait(post(), n, what)

    def all_equal(self, digest, flagged, what="the agreement on a collective call"):
        """True when every rank passed the same ``digest`` and none is ``flagged``: one Allgather of two
        int64s per rank into buffers kept for it (no pickling, no allocation)."""
        mine = self._mine
        mine[0] = digest
        mine[1] = 1 if flagged else 0
        w = self.watch
        n = w.start(what)
        w.wait(self.comm.Iallgather(*self._digest_specs), n, what)
        return self._digests.tolist() == [digest, 0] * self.size

    def gather_objects(self, obj, what="an exchange of call signatures"):
        """Every rank's small Python object (pickled: only for signatures and metadata)."""
        MPI, xp = self.MPI, self._host
        data = xp.frombuffer(pickle.dumps(obj), dtype="uint8")
        counts = xp.empty(self.size, dtype="int64")
        self.all_gather(xp.asarray([data.size], dtype="int64"), counts, what)
        counts = [int(c) for c in counts]
        displs = [sum(counts[:r]) for r in range(self.size)]
        out = xp.empty(max(sum(counts), 1), dtype="uint8")
        self._run(lambda: self.comm.Iallgatherv([data, MPI.BYTE], [out, (counts, displs), MPI.BYTE]), what)
        return [pickle.loads(out[d:d + c].tobytes()) for d, c in zip(displs, counts)]

    def barrier(self, what="barrier"):
        self._run(self.comm.Ibarrier, what)

    def free(self):
        self.comm.Free()
