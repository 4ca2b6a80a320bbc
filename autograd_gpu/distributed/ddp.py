"""DistributedDataParallel: data parallelism with gradients averaged in buckets while backward runs.

At construction every rank checks that it wraps the same model (parameter and buffer names, shapes,
dtypes) with the same options (bucket_cap_mb, find_unused_parameters, broadcast_buffers), and takes
rank 0's parameters and buffers. Parameters are grouped into buckets of up to ``bucket_cap_mb``,
in reverse registration order (roughly the order backward finishes their gradients), one dtype and
device per bucket. Each parameter has a post-accumulate-grad hook: the engine calls it as soon as
that parameter's .grad is final, the hook copies the gradient into its bucket, and a full bucket
starts a non-blocking all-reduce (MPI Iallreduce, or NCCL on a side stream), so communication
overlaps the rest of backward. Buckets start strictly in index order, so every rank issues the same
collectives in the same order whatever order its gradients arrive in.

Waiting happens in a callback the engine runs when backward() returns (``queue_callback``): there
any bucket still incomplete is filled (from the parameter's .grad when it has one, else zeros) and
started, every request is waited for, the sums are divided by the world size and copied back into
each .grad. So when backward() returns, gradients are averaged and the optimizer can step. A second
backward through the same forward (retain_graph) reduces again, so .grad holds the sum of both passes'
averages, as it would in one process on the global batch.

Each backward begins (before its first bucket starts) with the group's agreement exchange, so a rank
in backward while another is in barrier(), all_reduce() or another model's backward raises on both,
and the bucket waits go through the group's Watch (a deadline; ranks that left). ``join()`` lets ranks
with fewer batches shadow the collectives of those still training (PyTorch's uneven-inputs context).
"""
import contextlib

from ..nn import parallel as _nn_parallel
from ..nn.module import Module, state_version
from ..tensor import Tensor
from ..autograd.engine import queue_callback, current_backward
from ..autograd.grad_mode import is_grad_enabled
from ..backends import get_backend
from ..creation import zeros
from .collectives import broadcast, _agree
from .mpi_transport import MpiTransport
from .process_group import group

_made = [0]       # DDP instances made by this process (the same count on every rank): names a backward

__all__ = ["DistributedDataParallel"]


class _Bucket:
    def __init__(self, index, dtype, device):
        self.index, self.dtype, self.device = index, dtype, device
        self.params = []               # (slot, name, param, offset)
        self.size = 0
        self.flat = None               # the bucket's gradients, one contiguous array on its device
        self.pending = 0               # parameters whose gradient has not arrived in this backward
        self.filled = []
        self.request = self.host = None


class DistributedDataParallel(Module):
    """Wrap ``module`` (as ``.module``) for data-parallel training: call it as the module, and after
    ``loss.backward()`` every parameter's .grad is the average over ranks. ``no_sync()`` keeps the
    gradients of the backward passes of forwards run inside it local (gradient accumulation).

    With ``find_unused_parameters=True`` parameters that get no gradient in a backward are reduced as
    zeros (their .grad stays None if no rank used them); with False such a parameter is an error,
    raised after the collectives complete, so no rank is left waiting. ``broadcast_buffers`` (default,
    as in PyTorch): every forward first takes rank 0's buffers. ``event_log``: set it to a list to
    record ("allreduce_start" | "allreduce_end", bucket index) as they happen."""

    def __init__(self, module, bucket_cap_mb=25, find_unused_parameters=False, broadcast_buffers=True):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected a Module, got {type(module).__name__}")
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)):
            raise TypeError(f"DistributedDataParallel: bucket_cap_mb must be a number (megabytes), got "
                            f"{type(bucket_cap_mb).__name__}")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb!r}")
        g = group()
        self.module = module
        d = self.__dict__                     # plain attributes, kept out of the Module registries
        d["find_unused_parameters"] = bool(find_unused_parameters)
        d["broadcast_buffers"] = bool(broadcast_buffers)
        d["event_log"] = None
        d["_group"] = g
        d["_index"] = _made[0]
        _made[0] += 1
        d["_params"] = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        d["_position"] = {id(p): i for i, (_, p) in enumerate(self._params)}
        options = {"bucket_cap_mb": float(bucket_cap_mb), "find_unused_parameters": self.find_unused_parameters,
                   "broadcast_buffers": self.broadcast_buffers}
        _check_same_setup(g, self._params, list(module.named_buffers()), options)
        for t in list(module.parameters()) + list(module.buffers()):
            broadcast(t.detach(), 0)
        w = g.watch                           # DDP's traffic on its own communicator
        n = w.start("DistributedDataParallel's construction")
        comm, req = g.mpi.comm.Idup()
        w.wait(req, n, "DistributedDataParallel's construction")
        d["_mpi"] = MpiTransport(comm, w)
        d["_buckets"] = _make_buckets(self._params, bucket_cap_mb * 2 ** 20)
        d["_require_sync"] = True
        d["_armed"] = False
        d["_agreed"] = False                  # this backward's agreement exchange is done
        d["_queued"] = None                   # the backward() whose end runs _finish
        d["_next"] = 0
        d["_join"] = None                     # inside join(): its state
        for b in self._buckets:
            for slot, _, p, _ in b.params:
                p.register_post_accumulate_grad_hook(self._hook(b, slot))

    def forward(self, *args, **kwargs):
        src = 0
        if self._join is not None:            # tell the ranks that ran out of inputs what to shadow
            src = self._join.active_forward(is_grad_enabled() and self._require_sync)
        if self.broadcast_buffers:            # as PyTorch: every forward starts from rank 0's buffers
            for t in self.module.buffers():   # (BatchNorm's running statistics would drift apart)
                broadcast(t.detach(), src)
        out = self.module(*args, **kwargs)
        if is_grad_enabled() and not self._require_sync:
            self.__dict__["_armed"] = False
            state_version[0] += 1          # written past __setattr__: ag.compile's recheck must see it
        elif is_grad_enabled():
            self._prepare()
            for t in _tensors(out):           # the first gradient to reach an output queues the final wait
                if t.requires_grad and t.grad_fn is not None:
                    t.register_hook(self._on_backward_start)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Inside: forwards prepare no reduction, so their backward passes only accumulate locally;
        the first backward of a forward outside reduces the accumulated gradients."""
        old = self._require_sync
        self.__dict__["_require_sync"] = False
        state_version[0] += 1              # written past __setattr__: ag.compile's recheck must see it
        try:
            yield
        finally:
            self.__dict__["_require_sync"] = old
            state_version[0] += 1

    def join(self, divide_by_initial_world_size=True, enable=True, throw_on_early_termination=False):
        """A context manager for uneven inputs, as PyTorch's: run the training loop inside it; a rank
        whose loop ends first waits at the end of the block and shadows the collectives of the ranks
        still training (their buffer broadcasts and gradient reductions, with zeros for its gradients)
        until every rank has ended, then every rank takes the parameters and buffers of the rank that
        ran longest. Gradients are averaged over the whole world (zeros counted) with
        ``divide_by_initial_world_size=True``, else over the ranks still training.
        ``throw_on_early_termination=True``: every rank raises as soon as one runs out of inputs.
        Each forward inside costs one small extra collective."""
        if self._join is not None:
            raise RuntimeError("DistributedDataParallel.join: already inside join() of this model")
        return _Join(self, bool(divide_by_initial_world_size), bool(enable), bool(throw_on_early_termination))

    # -- one backward --------------------------------------------------------------------------
    def _prepare(self):
        d = self.__dict__
        d["_armed"], d["_queued"], d["_next"], d["_agreed"] = True, None, 0, False
        state_version[0] += 1
        for b in self._buckets:
            if b.request is not None:     # started by a backward that raised: its buffer is still MPI's
                b.request.Wait()
            b.pending = len(b.params)
            b.filled = [False] * len(b.params)
            b.request = b.host = None

    def _on_backward_start(self, grad):
        """The gradient reached an output of a synchronising forward: a backward through it begins.
        A second backward through the same graph (retain_graph), or a retry after one that raised,
        starts over: every bucket is filled again from the .grads, which then hold the earlier
        (already averaged, so equal on every rank) gradient plus this pass's, so the average is right."""
        run = current_backward()
        if run is None or not run.writes_grad:        # autograd.grad() writes no .grad: nothing to reduce
            return
        if self._queued is not run and (not self._armed or self._queued is not None):
            self._prepare()
        self._queue_finish()

    def _queue_finish(self):
        # by identity, not a flag: a backward that raised dropped its callbacks, and the next one
        # (retain_graph) must queue _finish again
        run = current_backward()
        if self._armed and self._queued is not run:
            queue_callback(self._finish)
            self.__dict__["_queued"] = run
            state_version[0] += 1

    def _hook(self, bucket, slot):
        def on_grad_ready(param):
            if not self._armed or bucket.filled[slot]:
                return
            self._queue_finish()
            self._fill(bucket, slot, param.grad)
            self._launch_ready()
        return on_grad_ready

    def _fill(self, bucket, slot, grad):
        _, _, p, off = bucket.params[slot]
        view = bucket.flat[off:off + p.data.size].reshape(p.shape)
        if grad is None:
            view.fill(0)
        else:
            p.xp.copyto(view, grad.data)
        bucket.filled[slot] = True
        bucket.pending -= 1

    def _agree_on_backward(self):
        """Once per backward, before its first bucket: every rank must be in this model's backward
        (a rank in barrier(), another collective or another model's backward raises on every rank)."""
        self.__dict__["_agreed"] = True
        state_version[0] += 1              # written past __setattr__: ag.compile's recheck must see it
        _agree(self._group, "DistributedDataParallel backward", [], None, f"model {self._index}")

    def _launch_ready(self):
        """Start the complete buckets, in index order only."""
        buckets = self._buckets
        if not self._agreed and self._next < len(buckets) and buckets[self._next].pending == 0:
            self._agree_on_backward()
        while self._next < len(buckets) and buckets[self._next].pending == 0:
            b = buckets[self._next]
            self._log("allreduce_start", b.index)
            self._start(b)
            self.__dict__["_next"] += 1
            state_version[0] += 1

    def _start(self, b):
        """Start the sum of bucket ``b``'s flat array over the ranks."""
        g = self._group
        if b.device.type == "cpu":
            b.request = self._mpi.iallreduce(b.flat, "sum", _what(b))
        elif g.nccl is not None:
            b.request = g.nccl.iallreduce(b.flat, "sum")
        else:                                             # CUDA over MPI: through a host copy
            b.host = b.device.backend.to_host(b.flat)
            b.request = self._mpi.iallreduce(b.host, "sum", _what(b))

    def _finish(self):
        """End of backward: complete and start what is left, wait, average, write the .grads back."""
        d = self.__dict__
        d["_queued"] = None
        if not self._armed:
            return
        d["_armed"] = False
        state_version[0] += 1
        missing = []
        for b in self._buckets:
            for slot, name, p, _ in b.params:
                if not b.filled[slot]:
                    missing.append(name)
                    self._fill(b, slot, p.grad)      # a .grad from no_sync() backward passes still counts
        if not self._agreed:
            self._agree_on_backward()
        self._launch_ready()
        used = None
        if self.find_unused_parameters:               # which parameters have a gradient on some rank
            xp = get_backend("cpu").xp
            used = xp.asarray([p.grad is not None for _, p in self._params], dtype=xp.uint8)
            self._mpi.allreduce(used, "max", _USED)
        size = self._group.size if self._join is None else self._join.divisor
        for b in self._buckets:
            b.request.Wait()
            b.request = None                            # done: the next _prepare has nothing to wait for
            if b.host is not None:                      # staged through the host: back to the GPU
                b.device.backend.xp.copyto(b.flat, b.device.backend.asarray(b.host))
                b.host = None
            b.flat /= size
            self._log("allreduce_end", b.index)
            for _, _, p, off in b.params:
                if used is None or used[self._position[id(p)]]:
                    _set_grad(p, b.flat[off:off + p.data.size].reshape(p.shape))
        if missing and not self.find_unused_parameters:
            raise RuntimeError(
                f"DistributedDataParallel: parameter(s) {', '.join(missing)} received no gradient in this "
                "backward; their gradients were reduced as zeros so that no rank hangs, but this is an "
                "error: make every parameter contribute to the loss, or pass find_unused_parameters=True")

    def _shadow_backward(self):
        """join(): a rank out of inputs takes part in the backward of the ranks still training, with
        zeros for its gradients; its own .grads are left alone."""
        self._agree_on_backward()
        for b in self._buckets:
            if b.request is not None:
                b.request.Wait()
            b.flat.fill(0)
            self._start(b)
        if self.find_unused_parameters:
            xp = get_backend("cpu").xp
            self._mpi.allreduce(xp.zeros(len(self._params), dtype=xp.uint8), "max", _USED)
        for b in self._buckets:
            b.request.Wait()
            b.request = b.host = None

    def _log(self, what, index):
        if self.event_log is not None:
            self.event_log.append((what, index))


class _Join:
    """DistributedDataParallel.join()'s context. Each forward of a rank still training, and each round
    of a rank that ran out of inputs, is one Allgather (on DDP's communicator) of two bytes per rank:
    (still training, this forward's backward reduces gradients). A rank that ran out shadows what the
    flags announce: the buffer broadcast from the highest rank still training, then the backward's
    agreement exchange and bucket reductions (of zeros). When no rank is training, every rank takes
    the parameters and buffers of the highest rank among the last ones that trained."""

    def __init__(self, ddp, divide_by_initial_world_size, enable, throw_on_early_termination):
        self.ddp, self.divide, self.enable, self.throw = ddp, divide_by_initial_world_size, enable, \
            throw_on_early_termination
        g = ddp._group
        self.rank, self.size = g.rank, g.size
        self.divisor = g.size
        self.last_active = list(range(g.size))
        xp = get_backend("cpu").xp
        self._send, self._recv = xp.zeros(2, dtype="uint8"), xp.zeros(2 * g.size, dtype="uint8")

    def __enter__(self):
        if self.enable:
            if self.ddp._join is not None:
                raise RuntimeError("DistributedDataParallel.join: already inside join() of this model")
            self.ddp.__dict__["_join"] = self
            state_version[0] += 1
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self.enable:
            return False
        try:
            if exc_type is None:
                self._shadow()
        finally:
            self.ddp.__dict__["_join"] = None
            state_version[0] += 1
        return False

    def _exchange(self, active, will_sync):
        self._send[0], self._send[1] = active, will_sync
        self.ddp._mpi.all_gather(self._send, self._recv, "DistributedDataParallel.join()'s exchange of which "
                                 "ranks still have inputs")
        flags = self._recv.tolist()
        actives = [r for r in range(self.size) if flags[2 * r]]
        syncing = [r for r in actives if flags[2 * r + 1]]
        if syncing and len(syncing) != len(actives):
            others = [r for r in actives if r not in syncing]
            raise RuntimeError("DistributedDataParallel.join: the ranks still training disagree on whether this "
                               f"forward's backward averages gradients: rank(s) {syncing} do, rank(s) {others} do "
                               "not (no_sync() or no_grad() on some ranks only)")
        if actives:
            self.last_active = actives
        return actives, bool(syncing)

    def active_forward(self, will_sync):
        """A forward of a rank still training: say so; returns the rank whose buffers everyone takes."""
        actives, _ = self._exchange(1, 1 if will_sync else 0)
        if self.throw and len(actives) < self.size:
            gone = [r for r in range(self.size) if r not in actives]
            raise RuntimeError(f"DistributedDataParallel.join: rank(s) {gone} ran out of inputs "
                               "(throw_on_early_termination=True)")
        self.divisor = self.size if self.divide else len(actives)
        return max(actives)

    def _shadow(self):
        ddp = self.ddp
        while True:
            actives, syncing = self._exchange(0, 0)
            if not actives:
                break
            if self.throw:
                raise RuntimeError(f"DistributedDataParallel.join: rank {self.rank} ran out of inputs while "
                                   f"rank(s) {actives} still have some (throw_on_early_termination=True)")
            if ddp.broadcast_buffers:
                for t in ddp.module.buffers():
                    broadcast(t.detach(), max(actives))
            if syncing:
                ddp._shadow_backward()
        src = max(self.last_active)           # the last to run out: its model is every rank's model
        for t in list(ddp.module.parameters()) + list(ddp.module.buffers()):
            broadcast(t.detach(), src)


def _set_grad(p, averaged):
    if p.grad is None:
        p.grad = Tensor._make(averaged.astype(p.dtype), p.device)     # a copy
    else:
        p.xp.copyto(p.grad.data, averaged)
        p.grad._bump_version()


def _make_buckets(params, cap_bytes):
    """Buckets of parameters in reverse registration order, each of one dtype and device and at most
    ``cap_bytes`` (a parameter larger than that gets a bucket of its own)."""
    buckets, open_ = [], {}
    for name, p in reversed(params):
        key = (p.dtype, p.device)
        b = open_.get(key)
        if b is None or (b.params and (b.size + p.data.size) * p.dtype.itemsize > cap_bytes):
            b = open_[key] = _Bucket(len(buckets), p.dtype, p.device)
            buckets.append(b)
        b.params.append((len(b.params), name, p, b.size))
        b.size += p.data.size
    for b in buckets:
        # float16 gradients are summed in float32 (MPI libraries differ on float16 reductions)
        dtype = "float32" if b.dtype.name == "float16" else b.dtype
        b.flat = zeros(b.size, dtype=dtype, device=b.device).data
    return buckets


def _what(b):
    return f"DistributedDataParallel's gradient all-reduce (bucket {b.index})"


_USED = "DistributedDataParallel's all-reduce of which parameters got gradients (find_unused_parameters)"


def _check_same_setup(g, params, buffers, options):
    """Every rank wraps the same model (parameter and buffer names, shapes, dtypes) with the same
    options, or every rank raises saying what differs: options that differ make the ranks issue
    different collectives (bucket sizes, the unused-parameter reduction, buffer broadcasts)."""
    mine = {"options": options,
            "parameters": [(n, tuple(p.shape), p.dtype.name, p.device.type) for n, p in params],
            "buffers": [(n, tuple(b.shape), b.dtype.name, b.device.type) for n, b in buffers]}
    every = g.mpi.gather_objects(mine, "DistributedDataParallel's construction (the check that every rank "
                                       "wraps the same model)")
    first = every[0]
    for r, theirs in enumerate(every):
        for key, value in first["options"].items():
            if theirs["options"][key] != value:
                detail = "; ".join(f"rank {k} has {key}={e['options'][key]!r}" for k, e in enumerate(every))
                raise RuntimeError(f"DistributedDataParallel: every rank must pass the same options; {key} "
                                   f"differs: {detail}")
        for kind in ("parameters", "buffers"):
            if theirs[kind] != first[kind]:
                a_, b_ = first[kind], theirs[kind]
                diff = next((f"rank 0 has {a}, rank {r} has {b}" for a, b in zip(a_, b_) if a != b),
                            f"rank 0 has {len(a_)} {kind}, rank {r} has {len(b_)}")
                raise RuntimeError("DistributedDataParallel: every rank must wrap the same model (parameter "
                                   f"and buffer names, shapes, dtypes and device types); {kind} differ: {diff}")


def _tensors(out):
    if isinstance(out, Tensor):
        yield out
    elif isinstance(out, (list, tuple)):
        for o in out:
            yield from _tensors(o)
    elif isinstance(out, dict):
        for o in out.values():
            yield from _tensors(o)


_nn_parallel.DistributedDataParallel = DistributedDataParallel     # PyTorch's ag.nn.parallel name for it
