"""The distributed part of the benchmarks: all-reduce time against message size (ours and raw mpi4py in
the same MPI job), and MLP training throughput at 1 and 2 ranks on the CPU with the scaling efficiency.

    python -m benchmarks --only distributed          (or: python -m benchmarks.distributed)

The driver starts ``mpiexec -n N python -m benchmarks.distributed --worker KIND`` jobs; rank 0 of each
prints one JSON line. Every rank runs with one BLAS thread, so one and two ranks use the same cores
per rank (two ranks on this project's 2-core machines fill it)."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = {"full": (4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20), "quick": (64 << 10, 1 << 20, 4 << 20),
         "tiny": (64 << 10,)}
ROUNDS = {"full": 15, "quick": 7, "tiny": 2}
STEPS = {"full": 60, "quick": 25, "tiny": 3}


def available():
    import importlib.util
    return importlib.util.find_spec("mpi4py") is not None and _mpiexec() is not None


def _mpiexec():
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else shutil.which("mpiexec")


# -- workers (run under mpiexec) ------------------------------------------------------------------------
def _allreduce_worker(scale):
    import numpy as np
    import autograd_gpu as ag
    import autograd_gpu.distributed as dist
    from mpi4py import MPI
    dist.init_process_group("mpi")
    comm = MPI.COMM_WORLD
    rows = []
    for nbytes in SIZES[scale]:
        n = nbytes // 4
        t = ag.ones(n)
        raw = np.ones(n, dtype=np.float32)
        reps = max(3, min(200, (64 << 20) // nbytes))
        steps = {"ours": lambda: dist.all_reduce(t), "mpi4py": lambda: comm.Allreduce(MPI.IN_PLACE, raw)}
        times = {k: [] for k in steps}
        for _ in range(ROUNDS[scale]):              # the two take turns, so load elsewhere hits both
            for name, step in steps.items():
                step()
                comm.Barrier()
                t0 = time.perf_counter()
                for _ in range(reps):
                    step()
                comm.Barrier()
                times[name].append((time.perf_counter() - t0) / reps)
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        rows.append({"bytes": nbytes, "ours_us": med["ours"], "mpi4py_us": med["mpi4py"],
                     "ratio": med["ours"] / med["mpi4py"]})
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(rows), flush=True)
    dist.destroy_process_group()


def _train_worker(scale):
    import autograd_gpu as ag
    import autograd_gpu.distributed as dist
    import autograd_gpu.nn.functional as F
    from autograd_gpu import nn, optim
    dist.init_process_group("mpi")
    world, rank = dist.get_world_size(), dist.get_rank()
    global_batch = 512
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9)
    x = ag.randn(global_batch // world, 784)        # this rank's share of the global batch
    y = ag.randint(0, 10, (global_batch // world,))

    def step():
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    for _ in range(3):
        step()
    times = []
    for _ in range(STEPS[scale]):
        dist.barrier()
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    if rank == 0:
        med = statistics.median(times)
        print("RESULT " + json.dumps({"ranks": world, "step_ms": med * 1e3, "samples_per_s": global_batch / med}),
              flush=True)
    dist.destroy_process_group()


# -- the driver -----------------------------------------------------------------------------------------
def _job(n, kind, scale):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([_mpiexec(), "-n", str(n), sys.executable, "-m", "benchmarks.distributed", "--worker",
                           kind, "--scale", scale], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"the {n}-rank {kind} job failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def run(scale, log):
    """{"allreduce": [rows], "training": {...}} measured in MPI jobs of 2 ranks (and 1 for training)."""
    if not available():
        log('  distributed: skipped (needs mpi4py and mpiexec: pip install -e ".[distributed]")')
        return None
    allreduce = _job(2, "allreduce", scale)
    for r in allreduce:
        log(f"  all_reduce {r['bytes'] >> 10:>6} KiB on 2 ranks: ours {r['ours_us']:.0f} us, "
            f"mpi4py {r['mpi4py_us']:.0f} us (ratio {r['ratio']:.3f})")
    one, two = _job(1, "train", scale), _job(2, "train", scale)
    speedup = two["samples_per_s"] / one["samples_per_s"]
    training = {"one_rank": one, "two_ranks": two, "speedup": speedup, "efficiency": speedup / 2}
    log(f"  DDP MLP step (global batch 512): 1 rank {one['step_ms']:.1f} ms, 2 ranks {two['step_ms']:.1f} ms, "
        f"speedup {speedup:.2f}, scaling efficiency {speedup / 2:.0%}")
    return {"allreduce": allreduce, "training": training}


def markdown(d):
    lines = ["", "All-reduce of float32 on 2 ranks (one node), ours against raw mpi4py in the same job:", "",
             "| message | ours (us) | mpi4py (us) | ours / mpi4py |", "|---|---|---|---|"]
    lines += [f"| {r['bytes'] >> 10} KiB | {r['ours_us']:.0f} | {r['mpi4py_us']:.0f} | {r['ratio']:.3f} |"
              for r in d["allreduce"]]
    t = d["training"]
    lines += ["", "DistributedDataParallel, MLP 784-512-512-10, SGD, global batch 512, one BLAS thread a rank:", "",
              "| ranks | step (ms) | samples/s |", "|---|---|---|",
              f"| 1 | {t['one_rank']['step_ms']:.1f} | {t['one_rank']['samples_per_s']:.0f} |",
              f"| 2 | {t['two_ranks']['step_ms']:.1f} | {t['two_ranks']['samples_per_s']:.0f} |",
              "", f"Speedup {t['speedup']:.2f}, scaling efficiency {t['efficiency']:.0%}."]
    return "\n".join(lines)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", choices=["allreduce", "train"])
    p.add_argument("--scale", choices=list(SIZES), default="full")
    a = p.parse_args()
    if a.worker == "allreduce":
        _allreduce_worker(a.scale)
    elif a.worker == "train":
        _train_worker(a.scale)
    else:
        result = run(a.scale, print)
        if result:
            print(markdown(result))
