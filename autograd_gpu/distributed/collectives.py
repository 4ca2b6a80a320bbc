"""Collectives on Tensors, in place, over the process group: all_reduce, broadcast, all_gather,
reduce_scatter, and barrier.

Before moving any data, every rank sends a 16-byte digest of its call (the collective, shapes, dtype,
device type, op or root, and whether it found a problem in its own arguments) with one Allgather of
two int64s: a few microseconds. Only when the digests differ do the ranks exchange the full
signatures (pickled) to say what differs. Either way every rank raises the same error at once,
instead of MPI reading mismatched buffers (garbage) or waiting for a message that never comes.
barrier() is that exchange alone (an Allgather completes on no rank before every rank has joined it),
so a rank in barrier() and another in all_reduce() both raise, naming both calls.

CPU tensors go to MPI as they are (no copy when contiguous); CUDA tensors go to NCCL under the
"nccl" backend, and through a host copy to MPI otherwise.
"""
import functools
import zlib

from ..tensor import Tensor
from .process_group import group

__all__ = ["ReduceOp", "all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier"]


class ReduceOp:
    """How all_reduce and reduce_scatter combine the ranks' values. AVG is for floating-point tensors;
    on bool tensors SUM and MAX are "any", MIN is "all"."""
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"


_OPS = (ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX, ReduceOp.MIN)


def all_reduce(tensor, op=ReduceOp.SUM):
    """Replace ``tensor`` on every rank by the reduction (``op``) of all ranks' tensors."""
    g = group()
    digest = _known_good(tensor, op)
    if digest is None:
        _agree(g, "all_reduce", [tensor], _tensor_problem(tensor, "tensor") or _op_problem(op, tensor), op)
        _remember_good(tensor, op)
    elif not g.mpi.all_equal(digest, False, "all_reduce"):      # one exchange on every path, so the ranks stay in step
        _disagree(g, "all_reduce", [tensor], None, op)
    a = tensor.data
    if tensor.device.type == "cpu" and a.flags.c_contiguous:
        g.mpi.allreduce(a.reshape(-1), _base_op(op))     # the common case: MPI reduces the tensor's own memory
        if op == ReduceOp.AVG:
            a /= g.size
        tensor._bump_version()
        return
    transport, flat, own = _wire(g, tensor)
    transport.allreduce(flat, _base_op(op))
    _average(flat, op, g.size)
    _write_back(tensor, flat, own)


def broadcast(tensor, src=0):
    """Copy rank ``src``'s ``tensor`` into ``tensor`` on every rank."""
    g = group()
    problem = _tensor_problem(tensor, "tensor")
    if problem is None and (not isinstance(src, int) or isinstance(src, bool) or not 0 <= src < g.size):
        problem = (ValueError, f"src must be a rank in 0..{g.size - 1}, got {src!r}")
    _agree(g, "broadcast", [tensor], problem, src)
    transport, flat, own = _wire(g, tensor)
    transport.broadcast(flat, src)
    _write_back(tensor, flat, own)


def all_gather(tensor_list, tensor):
    """Fill ``tensor_list[r]`` with rank r's ``tensor``, on every rank (a list of world-size tensors
    shaped like ``tensor``)."""
    g = group()
    problem = _tensor_problem(tensor, "tensor") or _list_problem(tensor_list, tensor, g.size, "tensor_list")
    _agree(g, "all_gather", [tensor], problem, None)
    transport, send, _ = _wire(g, tensor)
    recv = _empty_like_wire(send, g.size)
    transport.all_gather(send, recv)
    n = send.size
    for r, out in enumerate(tensor_list):
        _write_back(out, recv[r * n:(r + 1) * n], False)


def barrier():
    """Wait until every rank has reached this call (it is the agreement exchange alone)."""
    _agree(group(), "barrier", [], None, None)


def reduce_scatter(output, input_list, op=ReduceOp.SUM):
    """``output`` on rank r becomes the reduction over ranks of their ``input_list[r]`` (a list of
    world-size tensors shaped like ``output``)."""
    g = group()
    problem = (_tensor_problem(output, "output") or _list_problem(input_list, output, g.size, "input_list")
               or _op_problem(op, output))
    _agree(g, "reduce_scatter", [output], problem, op)
    parts = [_wire(g, t)[1] for t in input_list]
    transport, recv, own = _wire(g, output)
    xp = _xp_of(recv)
    send = xp.concatenate(parts)
    transport.reduce_scatter(send, recv, _base_op(op))
    _average(recv, op, g.size)
    _write_back(output, recv, own)


# -- argument checks, agreed on by every rank ---------------------------------------------------------
# all_reduce is the collective a training loop calls over and over with the same few signatures; a call
# whose arguments were found valid (and agreed on) before costs one dict lookup here instead of the checks,
# and still one digest exchange with the other ranks (they may have moved on to another call).
_GOOD: dict[tuple, int] = {}      # (shape, dtype, device type, op) -> the call's _digest


def _known_good(t, op):
    """The digest of an all_reduce call validated before, else None."""
    try:
        return _GOOD.get((t.data.shape, t.data.dtype, t.device.type, op)) if isinstance(t, Tensor) else None
    except TypeError:                     # an unhashable op: the checks will say what is wrong with it
        return None


def _remember_good(t, op):
    if len(_GOOD) < 1024:
        _GOOD[(t.data.shape, t.data.dtype, t.device.type, op)] = _digest("all_reduce", _sig([t]), op)


def _sig(tensors):
    return tuple((t.shape, t.dtype.str, t.device.type) for t in tensors)     # dtype.str: fast


def _tensor_problem(t, name):
    if not isinstance(t, Tensor):
        return (TypeError, f"{name} must be a Tensor, got {type(t).__name__}")
    return None


def _op_problem(op, t):
    if op not in _OPS:
        return (ValueError, f"op must be one of ReduceOp.SUM, AVG, MAX, MIN, got {op!r}")
    kind = t.dtype.kind
    if op == ReduceOp.AVG and kind not in "fc":
        return (TypeError, f"ReduceOp.AVG needs a floating-point tensor, got {t.dtype}")
    if op in (ReduceOp.MAX, ReduceOp.MIN) and kind == "c":
        return (TypeError, f"ReduceOp.{op.upper()} is not defined for complex tensors ({t.dtype})")
    return None


def _list_problem(tensors, like, size, name):
    if not isinstance(tensors, (list, tuple)) or not all(isinstance(t, Tensor) for t in tensors):
        return (TypeError, f"{name} must be a list of Tensors")
    if len(tensors) != size:
        return (ValueError, f"{name} must hold world_size = {size} tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        if t.shape != like.shape or t.dtype != like.dtype or t.device != like.device:
            return (ValueError, f"{name}[{i}] is {_describe(t)} but the tensor is {_describe(like)}; "
                                "every entry must match it")
    return None


def _describe(t):
    return f"shape {tuple(t.shape)} {t.dtype} on {t.device.type}"


def _agree(g, what, tensors, problem, arg):
    """Raise on every rank if any rank's call is wrong or the calls differ: one Allgather of a digest
    of each call, then, only when they differ, one of the full signatures for the message."""
    if not g.mpi.all_equal(_digest(what, None if problem else _sig(tensors), arg), bool(problem), what):
        _disagree(g, what, tensors, problem, arg)


def _disagree(g, what, tensors, problem, arg):
    """The digests differed: exchange the full signatures and raise, on every rank, what is wrong."""
    sig = None if problem else tuple((tuple(t.shape), t.dtype.name, t.device.type) for t in tensors)
    calls = g.mpi.gather_objects((what, sig, arg, problem[1] if problem else None), what)
    if problem:
        raise problem[0](f"{what}: {problem[1]} (refused on every rank)")
    bad = [(r, p) for r, (_, _, _, p) in enumerate(calls) if p]
    if bad:
        r, p = bad[0]
        raise RuntimeError(f"{what}: refused on every rank because rank {r}'s call is wrong: {p}")
    detail = "; ".join(f"rank {r}: {_show(*c[:3])}" for r, c in enumerate(calls))
    raise RuntimeError(f"{what}: the ranks' calls differ: every rank must call the same collective on tensors "
                       f"of the same shape, dtype and device type (and the same op/src); got {detail}")


@functools.lru_cache(maxsize=1024)
def _digest(what, sig, arg):
    """A 63-bit digest of a call that is the same in every process (Python's hash() is salted per
    process, so it cannot be compared across ranks); CRC-32 and Adler-32 of its text, and its length.
    Cached: a training loop repeats the same few calls."""
    r = repr((what, sig, arg)).encode()
    return (zlib.crc32(r) << 31) ^ zlib.adler32(r) ^ len(r)


def _show(what, sig, arg):
    if not sig:                                   # barrier, DistributedDataParallel's backward
        return what + ("" if arg is None else f" ({arg})")
    shape, dtype, dev = sig[0]
    return f"{what} of shape {shape} {dtype} on {dev}" + ("" if arg is None else f", {arg!r}")


# -- moving data to and from the transports ------------------------------------------------------------
def _wire(g, t):
    """(transport, a contiguous 1-D array holding t's values, whether that array is t's own memory)."""
    a = t.data
    if t.device.type == "cuda" and g.nccl is None:
        return g.mpi, t.device.backend.to_host(a).reshape(-1), False     # staged through host memory
    transport = g.nccl if t.device.type == "cuda" else g.mpi
    if a.flags.c_contiguous:
        return transport, a.reshape(-1), True
    return transport, t.xp.ascontiguousarray(a).reshape(-1), False


def _write_back(t, flat, own):
    """Make ``t`` hold ``flat``'s values (already so when ``own``); in-place writes bump the version."""
    if not own:
        t.xp.copyto(t.data, t.device.backend.asarray(flat).reshape(t.shape))
    t._bump_version()


def _xp_of(a):
    from ..backends import backend_of_array
    return backend_of_array(a).xp


def _empty_like_wire(a, n):
    return _xp_of(a).empty(a.size * n, dtype=a.dtype)


def _base_op(op):
    return ReduceOp.SUM if op == ReduceOp.AVG else op


def _average(flat, op, size):
    if op == ReduceOp.AVG:
        flat /= size
