"""Distributed jobs that must end by themselves, with a message, instead of hanging (issue 24).

Each case is a real 2-rank job: pytest runs ``mpiexec -n 2 python tests/test_distributed_failures.py
CASE`` (this file is also the worker) with short group timeouts (10 s; 1.5 s where the timeout is the
case), and checks that the job ends within 60 s with a non-zero status and a message naming the
problem, and that no rank went on with wrong averaged gradients: every training step checks its averaged gradients against the ranks' local
gradients recomputed by hand and prints WRONG if they differ, CONTINUED if a rank ran past the fault.
Uneven inputs complete under ``ddp.join()`` (status 0, every rank with the reference model).
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve()
ROOT = HERE.parents[1]

if __name__ != "__main__":
    import pytest
    import autograd_gpu as ag
    from autograd_gpu.distributed import process_group

    beside = Path(sys.executable).with_name("mpiexec")
    MPIEXEC = str(beside) if beside.exists() else shutil.which("mpiexec")
    pytestmark = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or MPIEXEC is None,
                                    reason='needs mpi4py and mpiexec: pip install -e ".[distributed]"')


# -- the jobs, checked from pytest ------------------------------------------------------------------------
def run_case(case, n=2, cuda_backend=None):
    """Run ``case`` on ``n`` ranks; with ``cuda_backend`` ("mpi" or "nccl") on CUDA, on the CuPy stand-in."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), AG_CUDA="",
               AG_FAIL_BACKEND="")
    if cuda_backend:
        env.update(AG_CUDA="standin", AG_FAIL_BACKEND=cuda_backend)
    start = time.monotonic()
    proc = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(HERE), case], env=env, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start


# case -> words the job's output must contain
FAILURES = {
    # options that differ between ranks: refused at construction, on every rank
    "bucket_cap_mb_differs": ["same options", "bucket_cap_mb differs", "rank 0 has bucket_cap_mb=25.0",
                              "rank 1 has bucket_cap_mb=0.0001"],
    "find_unused_parameters_differs": ["same options", "find_unused_parameters differs",
                                       "rank 1 has find_unused_parameters=True"],
    "broadcast_buffers_differs": ["same options", "broadcast_buffers differs", "rank 1 has broadcast_buffers=False"],
    # one rank in all_reduce, the other in barrier: barrier is in the agreement
    "all_reduce_against_barrier": ["the ranks' calls differ", "rank 0: all_reduce of shape (2,)", "rank 1: barrier"],
    # a rank that leaves early, by every exit path
    "return_without_the_collective": ["all_reduce", "rank 1 left the process group", "exited"],
    "sys_exit_mid_training": ["rank 1 left the process group", "DistributedDataParallel"],
    "one_more_step_then_exit": ["rank 1 left the process group", "ddp.join()"],
    "one_more_step_then_barrier": ["the ranks' calls differ", "DistributedDataParallel backward", "rank 1: barrier"],
    "collective_in_an_atexit_callback": ["rank 1 left the process group", "ending the MPI job with status 1"],
    "destroy_on_one_rank": ["rank 1 left the process group", "called destroy_process_group()"],
    # a rank that does not come: the collective times out and the job is aborted, naming it
    "timeout_in_all_reduce": ["all_reduce", "did not complete within the timeout of 1.5 s", "aborting the MPI job"],
    "timeout_in_ddp_backward": ["DistributedDataParallel backward", "did not complete within the timeout of 1.5 s"],
    "timeout_in_init": ["init_process_group", "not every rank of the job called init_process_group()"],
    "join_throw_on_early_termination": ["ran out of inputs", "throw_on_early_termination=True"],
}
SLOW = {"timeout_in_all_reduce", "timeout_in_ddp_backward", "timeout_in_init"}     # 1.5 s timeouts


if __name__ != "__main__":
    @pytest.mark.parametrize("case", sorted(FAILURES))
    def test_the_job_ends_with_a_message_naming_the_problem(case):
        rc, out, took = run_case(case)
        assert rc != 0, f"exit status 0:\n{out[-4000:]}"
        missing = [w for w in FAILURES[case] if w not in out]
        assert not missing, f"the output lacks {missing}:\n{out[-4000:]}"
        assert "WRONG" not in out, out[-4000:]                 # no step averaged wrongly
        assert "CONTINUED" not in out, out[-4000:]             # no rank went on past the fault
        assert took < (20 if case in SLOW else 30), f"{case} took {took:.1f} s"

    @pytest.mark.parametrize("case, n", [("join_uneven_inputs", 2), ("join_uneven_inputs", 3),
                                         ("ranks_that_leave_at_exit_exit_0", 2), ("bad_arguments", 1)])
    def test_jobs_that_must_succeed(case, n):
        rc, out, _ = run_case(case, n)
        assert rc == 0, out[-4000:]
        assert "RESULT ok" in out and "WRONG" not in out, out[-4000:]
        if case == "ranks_that_leave_at_exit_exit_0":     # rank 1 left while rank 0 was still working
            assert "[rank 1] ag.distributed: this process exits with the process group initialised; " \
                   "rank(s) [0] are still in it" in out, out[-4000:]

    @pytest.mark.gpu
    @pytest.mark.parametrize("backend", ["mpi", "nccl"])
    @pytest.mark.parametrize("case", ["join_uneven_inputs", "sys_exit_mid_training", "one_more_step_then_barrier"])
    def test_cuda_models_on_the_standin(case, backend):
        from autograd_gpu.backends import cupy_backend
        if not cupy_backend.simulated():
            pytest.skip("runs on the CuPy stand-in: AG_CUDA=standin python -m pytest -m gpu")
        rc, out, _ = run_case(case, 2, cuda_backend=backend)
        if case == "join_uneven_inputs":
            assert rc == 0 and "RESULT ok" in out, out[-4000:]
        else:
            assert rc != 0 and all(w in out for w in FAILURES[case]), out[-4000:]
        assert "WRONG" not in out and "CONTINUED" not in out, out[-4000:]

    def test_timeout_is_checked_before_mpi_starts():
        for bad, exc in (("5", TypeError), (True, TypeError), (0, ValueError), (-1.0, ValueError),
                         (float("nan"), ValueError), (float("inf"), ValueError)):
            with pytest.raises(exc, match="timeout"):
                ag.distributed.init_process_group(timeout=bad)
        assert not ag.distributed.is_initialized()
        import datetime
        from autograd_gpu.distributed.mpi_transport import seconds
        assert seconds(datetime.timedelta(minutes=2)) == 120.0 and seconds(3) == 3.0 and seconds(None) == 1800.0

    def test_join_and_barrier_need_a_group():
        assert process_group._group is None
        with pytest.raises(RuntimeError, match="init_process_group"):
            ag.distributed.barrier()


# -- the worker: runs inside the job ----------------------------------------------------------------------
CASES = {}
BACKEND = os.environ.get("AG_FAIL_BACKEND") or None       # "mpi" / "nccl": CUDA models, else CPU ones
DEVICE = "cuda" if BACKEND else "cpu"


def case(timeout=10.0, init=True):
    def register(fn):
        CASES[fn.__name__] = (fn, timeout, init)
        return fn
    return register


def make_model(seed=0, bn=False, unused=False):
    import autograd_gpu as ag
    ag.manual_seed(seed)
    layers = [ag.nn.Linear(4, 8)] + ([ag.nn.BatchNorm1d(8)] if bn else []) + [ag.nn.Tanh(), ag.nn.Linear(8, 3)]
    model = ag.nn.Sequential(*layers)
    if unused:
        model.add_module("spare", ag.nn.Linear(3, 3))       # never called by forward
    return model.to(DEVICE)


def batch(rank, step):
    import autograd_gpu as ag
    rng = np.random.default_rng(1000 * step + rank)
    return (ag.tensor(rng.standard_normal((6, 4)).astype(np.float32), device=DEVICE),
            ag.tensor(rng.standard_normal((6, 3)).astype(np.float32), device=DEVICE))


def local_grads(model, rank, step):
    """Rank ``rank``'s own gradient at ``step`` from a copy of ``model`` (any rank can compute any rank's)."""
    import autograd_gpu as ag
    twin = make_model(bn=any(isinstance(m, ag.nn.BatchNorm1d) for m in model.modules()),
                      unused=hasattr(model, "spare"))
    twin.load_state_dict(model.state_dict())
    x, y = batch(rank, step)
    ((twin(x) - y) ** 2).mean().backward()
    return {n: (p.grad.numpy() if p.grad is not None else np.zeros(p.shape, np.float32))
            for n, p in twin.named_parameters()}


def step(ddp, opt, rank, k, present=(0, 1), divisor=2):
    """One training step; the averaged gradients are checked against the ranks' local ones."""
    want = [local_grads(ddp.module, r, k) for r in present]
    x, y = batch(rank, k)
    opt.zero_grad()
    loss = ((ddp(x) - y) ** 2).mean()
    loss.backward()
    for n, p in ddp.module.named_parameters():
        avg = sum(w[n] for w in want) / divisor
        got = p.grad.numpy() if p.grad is not None else np.zeros(p.shape, np.float32)   # used by no rank
        if not np.allclose(got, avg, rtol=1e-5, atol=1e-6):
            print(f"WRONG averaged gradient on rank {rank} at step {k} for {n}", flush=True)
    opt.step()
    print(f"rank {rank} step {k} ok", flush=True)


def train(ddp, rank, steps):
    import autograd_gpu as ag
    opt = ag.optim.SGD(ddp.parameters(), lr=0.1)
    world = ag.distributed.get_world_size()
    for k in range(steps):
        step(ddp, opt, rank, k, range(world), world)
    return opt


def ddp_of(model, **options):
    import autograd_gpu as ag
    return ag.nn.parallel.DistributedDataParallel(model, **options)


@case()
def bucket_cap_mb_differs(rank):
    ddp = ddp_of(make_model(), bucket_cap_mb=25 if rank == 0 else 0.0001)
    train(ddp, rank, 2)
    print("CONTINUED", flush=True)


@case()
def find_unused_parameters_differs(rank):
    ddp = ddp_of(make_model(unused=True), find_unused_parameters=rank == 1)
    train(ddp, rank, 2)
    print("CONTINUED", flush=True)


@case()
def broadcast_buffers_differs(rank):
    ddp = ddp_of(make_model(bn=True), broadcast_buffers=rank == 0)
    train(ddp, rank, 2)
    print("CONTINUED", flush=True)


@case()
def all_reduce_against_barrier(rank):
    import autograd_gpu as ag
    if rank == 0:
        ag.distributed.all_reduce(ag.ones(2))
    else:
        ag.distributed.barrier()
    print("CONTINUED", flush=True)


@case()
def return_without_the_collective(rank):
    import autograd_gpu as ag
    train(ddp_of(make_model()), rank, 2)
    if rank == 1:
        return                                 # exits 0 with the group initialised
    ag.distributed.all_reduce(ag.ones(2))
    print("CONTINUED", flush=True)


@case()
def sys_exit_mid_training(rank):
    import autograd_gpu as ag
    ddp = ddp_of(make_model())
    opt = ag.optim.SGD(ddp.parameters(), lr=0.1)
    for k in range(4):
        if rank == 1 and k == 2:
            sys.exit(3)                        # SystemExit: no excepthook, only the exit hook sees it
        step(ddp, opt, rank, k)
    print("CONTINUED", flush=True)


@case()
def one_more_step_then_exit(rank):
    train(ddp_of(make_model()), rank, 3 if rank == 0 else 2)     # uneven inputs, no join()
    if rank == 0:
        print("CONTINUED", flush=True)


@case()
def one_more_step_then_barrier(rank):
    import autograd_gpu as ag
    train(ddp_of(make_model()), rank, 3 if rank == 0 else 2)
    ag.distributed.barrier()                   # rank 1 waits for evaluation while rank 0 is in backward
    print("CONTINUED", flush=True)


@case()
def collective_in_an_atexit_callback(rank):
    import atexit
    import autograd_gpu as ag
    train(ddp_of(make_model()), rank, 1)
    def final_metric():                        # reduced at exit, on rank 0 only
        ag.distributed.all_reduce(ag.ones(1))
        print("CONTINUED", flush=True)

    if rank == 0:
        atexit.register(final_metric)


@case()
def destroy_on_one_rank(rank):
    import autograd_gpu as ag
    if rank == 1:
        ag.distributed.destroy_process_group()
        time.sleep(3)                          # still alive: only the message can tell rank 0
        return
    ag.distributed.all_reduce(ag.ones(2))
    print("CONTINUED", flush=True)


@case(timeout=1.5)
def timeout_in_all_reduce(rank):
    import autograd_gpu as ag
    if rank == 1:
        time.sleep(30)                         # stuck: the abort ends it
    ag.distributed.all_reduce(ag.ones(2))
    print("CONTINUED", flush=True)


@case(timeout=1.5)
def timeout_in_ddp_backward(rank):
    ddp = ddp_of(make_model())
    train(ddp, rank, 1)
    if rank == 1:
        time.sleep(30)
    train(ddp, rank, 1)
    print("CONTINUED", flush=True)


@case(timeout=1.5, init=False)
def timeout_in_init(rank):
    import autograd_gpu as ag
    if rank == 1:
        time.sleep(30)                         # never joins the group
    ag.distributed.init_process_group(timeout=1.5)
    print("CONTINUED", flush=True)


@case()
def join_throw_on_early_termination(rank):
    import autograd_gpu as ag
    ddp = ddp_of(make_model())
    opt = ag.optim.SGD(ddp.parameters(), lr=0.1)
    with ddp.join(throw_on_early_termination=True):
        for k in range(1 if rank == 0 else 3):
            step(ddp, opt, rank, k)
    print("CONTINUED", flush=True)


def joined_training(rank, steps, bn, unused, divide, find_unused=False):
    """Rank r trains steps[r] batches under join(); returns the trained model and the reference model
    trained by hand: at each step the averaged gradient of the ranks still training, divided by the
    world size (divide_by_initial_world_size) or by their number."""
    import autograd_gpu as ag
    ddp = ddp_of(make_model(bn=bn, unused=unused), find_unused_parameters=find_unused)
    opt = ag.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.5)
    ref = make_model(bn=bn, unused=unused)
    ref_opt = ag.optim.SGD(ref.parameters(), lr=0.1, momentum=0.5)
    with ddp.join(divide_by_initial_world_size=divide):
        for k in range(steps[rank]):
            present = [r for r in range(len(steps)) if steps[r] > k]
            step(ddp, opt, rank, k, present, divisor=len(steps) if divide else len(present))
    for k in range(max(steps)):
        present = [r for r in range(len(steps)) if steps[r] > k]
        want = [local_grads(ref, r, k) for r in present]
        for n, p in ref.named_parameters():
            p.grad = ag.tensor(sum(w[n] for w in want) / (len(steps) if divide else len(present)), device=DEVICE)
        ref_opt.step()
    return ddp.module, ref


@case()
def join_uneven_inputs(rank):
    from mpi4py import MPI
    problems = []
    configs = ([((3, 5), True, False, True, False), ((4, 2), False, False, False, False),
                ((2, 3), False, True, True, True), ((2, 2), True, False, True, False)]
               if MPI.COMM_WORLD.Get_size() == 2 else
               [((3, 5, 2), True, False, True, False), ((4, 1, 2), True, True, False, True)])
    for steps, bn, unused, divide, find_unused in configs:
        model, ref = joined_training(rank, steps, bn, unused, divide, find_unused)
        got = {n: p.numpy() for n, p in model.named_parameters()}
        for n, p in ref.named_parameters():
            if not np.allclose(got[n], p.numpy(), rtol=1e-4, atol=1e-6):
                problems.append(f"{steps}: {n} differs from the reference")
        state = {k: v.numpy() for k, v in model.state_dict().items()}
        every = MPI.COMM_WORLD.allgather(state)
        for k in state:
            if not all(np.array_equal(every[0][k], e[k]) for e in every):
                problems.append(f"{steps}: {k} differs between the ranks after join()")
    print("RESULT " + ("ok" if not problems else "; ".join(problems)), flush=True)


@case()
def ranks_that_leave_at_exit_exit_0(rank):
    # no destroy_process_group(): both ranks leave at exit, and neither has a collective left
    import autograd_gpu as ag
    train(ddp_of(make_model()), rank, 2)
    if rank == 1:
        return
    time.sleep(1.5)                            # local work after rank 1 has gone: no collective, no error
    ag.ones(3).sum()
    print("RESULT ok", flush=True)


@case()
def bad_arguments(rank):
    # a world of one: the argument checks, and a model whose group was destroyed
    import autograd_gpu as ag
    problems = []

    def refused(call, exc, words):
        try:
            call()
        except exc as e:
            if not all(w in str(e) for w in words):
                problems.append(f"unclear: {e}")
            return
        except Exception as e:
            problems.append(f"{type(e).__name__} instead of {exc.__name__}: {e}")
            return
        problems.append(f"no error for {words}")

    refused(lambda: ddp_of(make_model(), bucket_cap_mb="25"), TypeError, ["bucket_cap_mb", "str"])
    refused(lambda: ddp_of(make_model(), bucket_cap_mb=0), ValueError, ["bucket_cap_mb", "positive"])
    refused(lambda: ag.distributed.init_process_group(), RuntimeError, ["already initialized"])
    ddp = ddp_of(make_model(bn=True))
    with ddp.join():
        refused(lambda: ddp.join(), RuntimeError, ["already inside join()"])
        train(ddp, rank, 2)                    # a world of one trains under join() as without it
    with ddp.join(enable=False):
        train(ddp, rank, 1)
    plain = ddp_of(make_model())
    ag.distributed.barrier()
    ag.distributed.destroy_process_group()
    x, y = batch(0, 0)
    refused(lambda: ddp(x), RuntimeError, ["init_process_group"])       # its buffers' broadcast
    refused(lambda: ((plain(x) - y) ** 2).mean().backward(), RuntimeError, ["destroyed", "init_process_group"])
    ag.distributed.init_process_group(timeout=10)
    print("RESULT " + ("ok" if not problems else "; ".join(problems)), flush=True)


def main(name):
    fn, timeout, init = CASES[name]
    from mpi4py import MPI
    rank = MPI.COMM_WORLD.Get_rank()
    if BACKEND:
        from autograd_gpu.testing import cupy_standin
        cupy_standin.install()
    if init:
        import autograd_gpu as ag
        MPI.COMM_WORLD.Barrier()               # every rank has imported: a slow start is not a timeout
        ag.distributed.init_process_group(BACKEND, timeout=timeout)
    fn(rank)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main(sys.argv[1])
