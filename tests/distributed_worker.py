"""Checks run inside a real MPI job by tests/test_distributed.py:
``mpiexec -n N python tests/distributed_worker.py CHECK [CHECK ...]``.

Every rank runs every named check; rank 0 prints one line ``RESULT {json}`` mapping each check to
"ok" or the first failure on any rank. ``fault`` instead makes rank 1 raise while rank 0 waits in a
collective (the job must end, not hang). With AG_CUDA=standin the CUDA checks run on the CuPy
stand-in."""
import json
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if os.environ.get("AG_CUDA") == "standin":
    from autograd_gpu.testing import cupy_standin
    cupy_standin.install()

import autograd_gpu as ag                      # noqa: E402
import autograd_gpu.distributed as dist         # noqa: E402
from autograd_gpu.distributed import ReduceOp   # noqa: E402

CHECKS = {}


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def rank_values(shape, dtype, rank, salt=0):
    """Deterministic, rank-dependent values any rank can recompute for any other rank."""
    n = int(np.prod(shape)) if shape else 1
    a = (np.arange(n) * 7 + 3 * rank + salt) % 11
    if dtype == np.bool_:
        return (a % 3 == 0).reshape(shape)
    if np.dtype(dtype).kind == "f":
        a = a / 4.0 - 1.0
    return a.astype(dtype).reshape(shape)


def reference(op, arrays):
    if op == ReduceOp.SUM:
        out = arrays[0].copy()
        for a in arrays[1:]:
            out = out | a if out.dtype == np.bool_ else out + a
        return out
    if op == ReduceOp.AVG:
        return (np.sum([a.astype(np.float64) for a in arrays], axis=0) / len(arrays)).astype(arrays[0].dtype)
    f = np.maximum if op == ReduceOp.MAX else np.minimum
    out = arrays[0]
    for a in arrays[1:]:
        out = f(out, a)
    return out


def expect_equal(got, want, what, dtype):
    got = got.numpy() if isinstance(got, ag.Tensor) else got
    tol = {np.float16: 1e-3, np.float32: 1e-6}.get(dtype, 0)
    if got.shape != want.shape or got.dtype != want.dtype or not np.allclose(got, want, rtol=tol, atol=tol):
        raise AssertionError(f"{what}: got {got.dtype}{got.shape} {got.ravel()[:5]}, want {want.dtype}"
                             f"{want.shape} {want.ravel()[:5]}")


DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]
SHAPES = [(), (0,), (7,), (3, 5)]


def collectives_on(device):
    r, w = dist.get_rank(), dist.get_world_size()
    cases = [(d, s) for d in DTYPES for s in SHAPES] + [(np.float32, (1 << 20,)), (np.int64, (1 << 20,))]
    for dtype, shape in cases:
        ops = [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN] + ([ReduceOp.AVG] if np.dtype(dtype).kind == "f" else [])
        every = [rank_values(shape, dtype, k) for k in range(w)]
        what = f"{np.dtype(dtype).name}{shape} on {device}"
        for op in ops:
            t = ag.tensor(every[r], device=device)
            dist.all_reduce(t, op)
            expect_equal(t, reference(op, every), f"all_reduce {op} {what}", dtype)
        t = ag.tensor(every[r], device=device)
        dist.broadcast(t, src=w - 1)
        expect_equal(t, every[w - 1], f"broadcast {what}", dtype)
        out = [ag.zeros(shape, dtype=dtype, device=device) for _ in range(w)]
        dist.all_gather(out, ag.tensor(every[r], device=device))
        for k in range(w):
            expect_equal(out[k], every[k], f"all_gather[{k}] {what}", dtype)
        for op in ops:
            inputs = [ag.tensor(rank_values(shape, dtype, r, salt=k), device=device) for k in range(w)]
            out = ag.zeros(shape, dtype=dtype, device=device)
            dist.reduce_scatter(out, inputs, op)
            want = reference(op, [rank_values(shape, dtype, k, salt=r) for k in range(w)])
            expect_equal(out, want, f"reduce_scatter {op} {what}", dtype)
    # a non-contiguous view is reduced into its own memory
    base = ag.tensor(rank_values((4, 6), np.float32, r), device=device)
    view = base.T
    dist.all_reduce(view)
    expect_equal(base, reference(ReduceOp.SUM, [rank_values((4, 6), np.float32, k) for k in range(w)]),
                 "all_reduce through a transposed view", np.float32)


@check
def collectives():
    collectives_on("cpu")


@check
def mismatches_refused_on_every_rank():
    r, w = dist.get_rank(), dist.get_world_size()

    def refused(call, exc_types, words):
        try:
            call()
        except exc_types as e:
            if not all(word in str(e) for word in words):
                raise AssertionError(f"message lacks {words}: {e}")
            return
        raise AssertionError(f"rank {r}: no error")

    refused(lambda: dist.all_reduce(ag.zeros(3 + r)), RuntimeError, ["all_reduce", "(3,)", "(4,)"])
    refused(lambda: dist.broadcast(ag.zeros(3, dtype=ag.float32 if r else ag.float64)), RuntimeError,
            ["float32", "float64"])
    refused(lambda: dist.all_reduce(ag.zeros(2), ReduceOp.MAX if r else ReduceOp.MIN), RuntimeError, ["max"])
    refused(lambda: dist.all_reduce(ag.zeros(2, dtype=ag.int64), ReduceOp.AVG), TypeError, ["AVG"])
    # one rank's own argument error: that rank gets its error, the others are told which rank
    bad = [ag.zeros(2) for _ in range(w - (1 if r == 1 else 0))]
    refused(lambda: dist.all_gather(bad, ag.zeros(2)), ValueError if r == 1 else RuntimeError, ["rank 1"]
            if r != 1 else ["world_size"])
    refused(lambda: dist.broadcast(ag.zeros(2), src=w), ValueError, ["src"])
    # different collectives on the same tensor: refused, not a hang
    refused(lambda: dist.all_reduce(ag.zeros(2)) if r else dist.broadcast(ag.zeros(2)), RuntimeError,
            ["all_reduce", "broadcast"])
    # calls each rank has seen succeed before (all_reduce's fast path) still disagree when they differ,
    # and so does a call seen before on one rank against a first-seen call on another
    dist.all_reduce(ag.zeros(3))
    dist.all_reduce(ag.zeros(4))
    refused(lambda: dist.all_reduce(ag.zeros(3 + r)), RuntimeError, ["all_reduce", "(3,)", "(4,)"])
    refused(lambda: dist.all_reduce(ag.zeros(3 if r else 7)), RuntimeError, ["(3,)", "(7,)"])
    refused(lambda: dist.all_reduce(ag.zeros(3), "sum" if r else "bogus"), (RuntimeError, ValueError),
            ["rank 0" if r else "bogus"])
    # the group still works afterwards
    t = ag.ones(2)
    dist.all_reduce(t)
    expect_equal(t, np.full(2, float(w), np.float32), "all_reduce after refusals", np.float32)


class Net(ag.nn.Module):
    def __init__(self, extra):
        super().__init__()
        self.body = ag.nn.Sequential(ag.nn.Linear(4, 8), ag.nn.Tanh(), ag.nn.Linear(8, 8), ag.nn.Tanh(),
                                     ag.nn.Linear(8, 3))
        if extra:
            self.unused = ag.nn.Linear(3, 3)       # not called by forward

    def forward(self, x):
        return self.body(x)


def make_model(seed, extra=False):
    ag.manual_seed(seed)
    return Net(extra)


def global_batch(n=12):
    rng = np.random.default_rng(123)
    return rng.standard_normal((n, 4)).astype(np.float32), rng.standard_normal((n, 3)).astype(np.float32)


def train(model, xs, ys, steps, device, micro=1, sync_model=None):
    """SGD with momentum; each step's batch split in ``micro`` parts accumulated (all but the last
    inside no_sync() when ``sync_model`` is DDP)."""
    net = sync_model or model
    opt = ag.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(steps):
        opt.zero_grad()
        parts = np.array_split(np.arange(len(xs)), micro)
        for i, idx in enumerate(parts):
            x, y = ag.tensor(xs[idx], device=device), ag.tensor(ys[idx], device=device)
            if sync_model is not None and i < micro - 1:
                with sync_model.no_sync():
                    (ag.nn.functional.mse_loss(net(x), y) / micro).backward()
            else:
                (ag.nn.functional.mse_loss(net(x), y) / micro).backward()
        opt.step()
    return [p.numpy() for p in model.parameters()]


def ddp_matches_single_process(device, micro=1):
    r, w = dist.get_rank(), dist.get_world_size()
    xs, ys = global_batch()
    reference_params = train(make_model(0).to(device), xs, ys, 10, device, micro)
    model = make_model(0 if r == 0 else 100 + r).to(device)   # every rank starts from its own seed...
    ddp = ag.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0002)   # ...rank 0's wins
    if len(ddp._buckets) < 3:
        raise AssertionError(f"expected several buckets, got {len(ddp._buckets)}")
    shard = slice(r * len(xs) // w, (r + 1) * len(xs) // w)
    got = train(model, xs[shard], ys[shard], 10, device, micro, sync_model=ddp)
    for k, (a, b) in enumerate(zip(got, reference_params)):
        if not np.allclose(a, b, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"parameter {k}: DDP differs from one process by {np.abs(a - b).max()}")
    flat = ag.tensor(np.concatenate([p.ravel() for p in got]))
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, ReduceOp.MAX)
    dist.all_reduce(lo, ReduceOp.MIN)
    if not np.array_equal(hi.numpy(), lo.numpy()):
        raise AssertionError("ranks ended with different parameters")


@check
def ddp_equals_single_process():
    ddp_matches_single_process("cpu")


@check
def ddp_no_sync_accumulation_equals_single_process():
    ddp_matches_single_process("cpu", micro=2)
    r = dist.get_rank()
    model = make_model(0)
    ddp = ag.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0002)
    ddp.event_log = []
    x = ag.tensor(global_batch()[0][r:r + 2])
    with ddp.no_sync():
        ddp(x).sum().backward()
    g = model.body[0].weight.grad
    hi, lo = g.clone(), g.clone()
    dist.all_reduce(hi, ReduceOp.MAX)
    dist.all_reduce(lo, ReduceOp.MIN)
    if ddp.event_log or np.array_equal(hi.numpy(), lo.numpy()):
        raise AssertionError(f"no_sync() reduced: {ddp.event_log}")


@check
def ddp_first_bucket_reduced_before_backward_ends():
    model = make_model(0)
    ddp = ag.distributed.DistributedDataParallel(model, bucket_cap_mb=0.0002)
    ddp.event_log = log = []
    x = ag.randn(6, 4, requires_grad=True)
    # x's gradient is the last thing backward computes: it needs the first layer's backward
    x.register_hook(lambda g: log.append(("input_grad", None)))
    ddp(x).sum().backward()
    names = [e[0] for e in log]
    first = log.index(("allreduce_start", 0))
    if not first < names.index("input_grad") < names.index("allreduce_end"):
        raise AssertionError(f"events out of order: {log}")
    if names.count("allreduce_start") != len(ddp._buckets) or names.count("allreduce_end") != len(ddp._buckets):
        raise AssertionError(f"every bucket must be reduced once: {log}")


@check
def ddp_unused_parameters():
    r, w = dist.get_rank(), dist.get_world_size()
    model = make_model(0, extra=True)
    ddp = ag.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0002, find_unused_parameters=True)
    x = ag.tensor(global_batch()[0][:4])
    out = ddp(x)
    if r == 0:                                   # the extra layer is used on rank 0 only
        out = model.unused(out)
    out.sum().backward()
    g = model.unused.weight.grad
    if g is None:
        raise AssertionError("a parameter used on one rank must get the averaged gradient on every rank")
    total = g.clone()
    dist.all_reduce(total, ReduceOp.MAX)
    if not np.array_equal(total.numpy(), g.numpy()):
        raise AssertionError("ranks disagree on a parameter used by one rank")
    model.zero_grad()
    ddp(x).sum().backward()                      # unused everywhere: stays None
    if model.unused.weight.grad is not None or model.body[0].weight.grad is None:
        raise AssertionError("a parameter unused on every rank must keep grad None")
    strict = ag.nn.parallel.DistributedDataParallel(make_model(0, extra=True), bucket_cap_mb=0.0002)
    try:
        strict(x).sum().backward()
    except RuntimeError as e:
        if "unused.weight" not in str(e) or "find_unused_parameters=True" not in str(e):
            raise AssertionError(f"unclear error: {e}")
    else:
        raise AssertionError("an unused parameter without find_unused_parameters must raise")
    t = ag.ones(1)                               # and every rank can go on
    dist.all_reduce(t)
    expect_equal(t, np.full(1, float(w), np.float32), "all_reduce after the error", np.float32)


def averaged_by_hand(loss_fn):
    """Every parameter's gradient of loss_fn(model) on this rank's data, averaged over ranks with
    all_reduce: what DDP must give."""
    model = make_model(0)
    loss_fn(model).backward()
    out = []
    for p in model.parameters():
        g = p.grad.clone()
        dist.all_reduce(g, ReduceOp.AVG)
        out.append(g.numpy())
    return out


def expect_grads(model, want, what):
    for k, (p, g) in enumerate(zip(model.parameters(), want)):
        if p.grad is None or not np.allclose(p.grad.numpy(), g, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"{what}: parameter {k} has {None if p.grad is None else p.grad.numpy()}, want {g}")


def my_rows():
    """This rank's three rows of the global batch."""
    r = dist.get_rank()
    return global_batch()[0][3 * r:3 * r + 3]


def backward_that_raises(loss, param):
    """loss.backward(retain_graph=True) with a hook on param that raises: the error must reach the caller."""
    h = param.register_hook(lambda g: (_ for _ in ()).throw(ValueError("on purpose")))
    try:
        loss.backward(retain_graph=True)
    except ValueError:
        pass
    else:
        raise AssertionError("the hook should have raised")
    finally:
        h.remove()


@check
def ddp_gradient_penalty_with_autograd_grad():
    # grad() writes no .grad: it must not run DDP's end-of-backward reduction (which raised "received
    # no gradient" and wrote averaged zeros into every .grad); the backward after it reduces
    x0 = my_rows()

    def loss(net):
        x = ag.tensor(x0, requires_grad=True)
        out = net(x)
        (gx,) = ag.autograd.grad(out.sum(), x, create_graph=True)
        return out.sum() + (gx * gx).sum()
    want = averaged_by_hand(loss)
    model = make_model(0)
    ddp = ag.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0002)
    loss(ddp).backward()
    expect_grads(model, want, "gradient penalty")


@check
def ddp_backward_retried_after_an_exception():
    # a backward that raises drops its queued callbacks; the retry (retain_graph) must reduce again
    x0 = my_rows()
    want = averaged_by_hand(lambda net: net(ag.tensor(x0)).sum())
    model = make_model(0)
    ddp = ag.nn.parallel.DistributedDataParallel(model)      # one bucket: nothing started before the error
    loss = ddp(ag.tensor(x0)).sum()
    backward_that_raises(loss, model.body[0].bias)            # that bias is finished last
    model.zero_grad()
    loss.backward()
    expect_grads(model, want, "retried backward")


@check
def ddp_second_backward_through_one_forward_is_averaged():
    # retain_graph: the second backward reduces too, so .grad is the sum of both passes' averages
    x0 = my_rows()
    once = averaged_by_hand(lambda net: net(ag.tensor(x0)).sum())
    model = make_model(0)
    ddp = ag.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0002)
    loss = ddp(ag.tensor(x0)).sum()
    loss.backward(retain_graph=True)
    loss.backward(ag.tensor(2.0))
    expect_grads(model, [3 * g for g in once], "second backward")


@check
def ddp_retry_after_an_exception_with_buckets_in_flight():
    # small buckets: some all-reduces start before the error; the retry must wait for them, refill every
    # bucket from this pass's gradients (here twice the first's) and reduce again, not reuse stale sums
    x0 = my_rows()
    once = averaged_by_hand(lambda net: net(ag.tensor(x0)).sum())
    model = make_model(0)
    ddp = ag.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0002)
    ddp.event_log = log = []
    loss = ddp(ag.tensor(x0)).sum()
    backward_that_raises(loss, model.body[0].bias)
    if ("allreduce_start", 0) not in log:
        raise AssertionError(f"no bucket started before the error, so this checks nothing: {log}")
    model.zero_grad()
    loss.backward(ag.tensor(2.0))
    expect_grads(model, [2 * g for g in once], "retry with buckets in flight")


@check
def ddp_broadcasts_buffers_at_every_forward():
    r = dist.get_rank()
    ag.manual_seed(0)
    net = ag.nn.Sequential(ag.nn.Linear(3, 4), ag.nn.BatchNorm1d(4))
    ddp = ag.nn.parallel.DistributedDataParallel(net)
    ddp(ag.tensor(rank_values((8, 3), np.float32, r)))          # each rank updates its own statistics
    mine = net[1].running_mean.numpy().copy()
    every = MPI.COMM_WORLD.allgather(mine)
    if np.allclose(every[0], every[-1]):
        raise AssertionError("the ranks' batches should give different running means")
    ddp(ag.tensor(rank_values((8, 3), np.float32, r, salt=1)))  # starts from rank 0's statistics
    seen = MPI.COMM_WORLD.allgather(net[1].num_batches_tracked.item())
    if seen != [2] * len(seen):
        raise AssertionError(f"num_batches_tracked per rank: {seen}")
    ddp_off = ag.nn.parallel.DistributedDataParallel(ag.nn.BatchNorm1d(2), broadcast_buffers=False)
    ddp_off(ag.tensor(rank_values((4, 2), np.float32, r)))
    ddp_off(ag.tensor(rank_values((4, 2), np.float32, r)))
    means = MPI.COMM_WORLD.allgather(ddp_off.module.running_mean.numpy())
    if np.allclose(means[0], means[-1]):
        raise AssertionError("broadcast_buffers=False must keep each rank's own statistics")
    # the second forward started from rank 0's statistics on every rank, then added this rank's batch
    expect_equal(net[1].running_mean, every[0] * 0.9 + _batch_mean(net, r), "running_mean", np.float32)


def _batch_mean(net, r):
    with ag.no_grad():
        h = net[0](ag.tensor(rank_values((8, 3), np.float32, r, salt=1))).numpy()
    return 0.1 * h.mean(axis=0)


@check
def ddp_refuses_different_models():
    r = dist.get_rank()
    model = ag.nn.Linear(3, 4 if r == 0 else 5)
    try:
        ag.nn.parallel.DistributedDataParallel(model)
    except RuntimeError as e:
        if "same model" not in str(e) or "rank 0 has" not in str(e):
            raise AssertionError(f"unclear error: {e}")
        return
    raise AssertionError("different models must be refused")


def sampler_by_hand(n, replicas, rank, perm, drop_last):
    """PyTorch's documented recipe, written out."""
    if drop_last and n % replicas:
        num = -(-(n - replicas) // replicas)
    else:
        num = -(-n // replicas)
    total = num * replicas
    idx = list(perm)
    if drop_last:
        idx = idx[:total]
    else:
        while len(idx) < total:
            idx += idx[:total - len(idx)]
    return idx[rank:total:replicas]


@check
def distributed_sampler():
    r, w = dist.get_rank(), dist.get_world_size()
    for n in (1, 2, 5, 10, 11, 12):
        for shuffle in (False, True):
            for drop_last in (False, True):
                for epoch in (0, 3):
                    s = ag.data.DistributedSampler(range(n), shuffle=shuffle, seed=7, drop_last=drop_last)
                    s.set_epoch(epoch)
                    perm = np.random.default_rng(7 + epoch).permutation(n) if shuffle else range(n)
                    want = sampler_by_hand(n, w, r, perm, drop_last)
                    got = list(s)
                    if got != want or len(s) != len(want):
                        raise AssertionError(f"n={n} shuffle={shuffle} drop_last={drop_last}: {got} != {want}")
                    out = [ag.zeros(len(got), dtype=ag.int64) for _ in range(w)]
                    dist.all_gather(out, ag.tensor(got, dtype=ag.int64))
                    shards = [o.numpy().tolist() for o in out]
                    covered = sorted(sum(shards, []))
                    if not drop_last and set(covered) != set(range(n)):
                        raise AssertionError(f"shards do not cover the dataset: {shards}")
                    if drop_last and len(set(covered)) != len(covered):
                        raise AssertionError(f"drop_last shards overlap: {shards}")
    ds = ag.data.TensorDataset(ag.arange(10.0))
    loader = ag.data.DataLoader(ds, batch_size=2, sampler=ag.data.DistributedSampler(ds, shuffle=False))
    got = [v for (b,) in loader for v in b.numpy().tolist()]
    if got != [float(i) for i in sampler_by_hand(10, w, r, range(10), False)]:
        raise AssertionError(f"DataLoader(sampler=) gave {got}")


@check
def cuda_over_mpi_on_the_standin():
    from autograd_gpu.testing.cupy_standin import count_transfers
    collectives_on("cuda")
    with count_transfers() as log:
        t = ag.ones(1000, device="cuda")
        dist.all_reduce(t)
    # one copy down to the host for MPI, one back (the stand-in counts them)
    if log.d2h != 1 or log.h2d < 1:
        raise AssertionError(f"expected one device-to-host copy and one back, got {log.d2h} and {log.h2d}")
    ddp_matches_single_process("cuda")


@check
def cuda_over_mpi():
    # a real GPU, staged through host memory (the stand-in variant above also counts the copies);
    # nccl_world_of_one runs the same checks over NCCL
    collectives_on("cuda")
    ddp_matches_single_process("cuda")


@check
def nccl_on_the_standin():
    # the stand-in's cupy.cuda.nccl has CuPy's signatures and is carried out over MPI: the project's
    # NCCL transport (pointers, counts, datatypes, streams) runs here with no copy through the host
    from autograd_gpu.testing.cupy_standin import count_transfers
    if dist.get_backend() != "nccl":
        raise AssertionError(f"expected the nccl backend, got {dist.get_backend()!r}")
    collectives_on("cuda")
    t = ag.ones(1000, device="cuda")
    with count_transfers() as log:
        dist.all_reduce(t)
    if log.d2h or log.h2d:
        raise AssertionError(f"NCCL must not stage through the host: {log.d2h} copies down, {log.h2d} up")
    expect_equal(t, np.full(1000, float(dist.get_world_size()), np.float32), "all_reduce of ones", np.float32)
    ddp_matches_single_process("cuda")


@check
def nccl_world_of_one():
    # main() picked the "nccl" backend for this check: one GPU is a world of one, still a real
    # NCCL communicator (collectives on the current stream, DDP's buckets on the side stream)
    if dist.get_backend() != "nccl":
        raise AssertionError(f"expected the nccl backend, got {dist.get_backend()!r}")
    cuda_over_mpi()


def fault():
    r = dist.get_rank()
    dist.barrier()
    if r == 1:
        raise ValueError("rank 1 failed on purpose")
    t = ag.ones(1)
    dist.all_reduce(t)          # rank 1 never joins: only the abort can end this
    print("rank 0 finished, which it must not", flush=True)


def main(names):
    dist.init_process_group("nccl" if any(n.startswith("nccl") for n in names) else None)
    global MPI
    from mpi4py import MPI
    if names == ["fault"]:
        fault()
        return
    results = {}
    for name in names:
        try:
            CHECKS[name]()
            mine = "ok"
        except Exception:
            mine = traceback.format_exc(limit=4)
        every = MPI.COMM_WORLD.allgather(mine)
        bad = [f"rank {k}: {m}" for k, m in enumerate(every) if m != "ok"]
        results[name] = bad[0] if bad else "ok"
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(results), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
