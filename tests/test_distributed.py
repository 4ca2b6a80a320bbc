"""ag.distributed in real MPI jobs: pytest starts ``mpiexec -n N python tests/distributed_worker.py
CHECK ...`` (bounded by a timeout) and reads rank 0's JSON verdict on each check. Few jobs, each
running many checks, keep this quick on two cores. Skipped where mpi4py or mpiexec is missing
(pip install -e ".[distributed]")."""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import autograd_gpu as ag

WORKER = Path(__file__).with_name("distributed_worker.py")
ROOT = WORKER.parents[1]


def find_mpiexec():
    """The mpiexec installed next to this Python (pip's mpich puts it there), else the one on PATH."""
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else shutil.which("mpiexec")


MPIEXEC = find_mpiexec()
pytestmark = pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None or MPIEXEC is None,
                                reason='needs mpi4py and mpiexec: pip install -e ".[distributed]"')

CPU_CHECKS = ["collectives", "mismatches_refused_on_every_rank", "ddp_equals_single_process",
              "ddp_broadcasts_buffers_at_every_forward",
              "ddp_no_sync_accumulation_equals_single_process", "ddp_first_bucket_reduced_before_backward_ends",
              "ddp_unused_parameters", "ddp_refuses_different_models", "distributed_sampler",
              "ddp_gradient_penalty_with_autograd_grad", "ddp_backward_retried_after_an_exception",
              "ddp_second_backward_through_one_forward_is_averaged",
              "ddp_retry_after_an_exception_with_buckets_in_flight"]
THREE_RANK_CHECKS = ["collectives", "mismatches_refused_on_every_rank", "ddp_equals_single_process",
                     "distributed_sampler"]


def run_job(n, checks, timeout, cuda=""):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), AG_CUDA=cuda)
    return subprocess.run([MPIEXEC, "-n", str(n), sys.executable, str(WORKER), *checks], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def verdicts(n, checks, cuda=""):
    proc = run_job(n, checks, timeout=120, cuda=cuda)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (f"the {n}-rank job failed (exit {proc.returncode}):\n"
                                            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def two_ranks():
    return verdicts(2, CPU_CHECKS)


@pytest.fixture(scope="module")
def three_ranks():
    return verdicts(3, THREE_RANK_CHECKS)


@pytest.mark.parametrize("check", CPU_CHECKS)
def test_on_two_ranks(two_ranks, check):
    assert two_ranks[check] == "ok", two_ranks[check]


@pytest.mark.parametrize("check", THREE_RANK_CHECKS)
def test_on_three_ranks(three_ranks, check):
    assert three_ranks[check] == "ok", three_ranks[check]


def test_an_exception_on_one_rank_ends_the_job_with_its_message():
    start = time.monotonic()
    proc = run_job(2, ["fault"], timeout=60)
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "rank 1 failed on purpose" in output and "[rank 1]" in output, output
    assert "must not" not in output
    assert time.monotonic() - start < 60


@pytest.mark.gpu
@pytest.mark.parametrize("check", ["cuda_over_mpi_on_the_standin", "nccl_on_the_standin"])
def test_cuda_paths_in_a_2_rank_job_on_the_standin(check):
    from autograd_gpu.backends import cupy_backend
    if not cupy_backend.simulated():
        pytest.skip("runs on the CuPy stand-in: AG_CUDA=standin python -m pytest -m gpu")
    result = verdicts(2, [check], cuda="standin")
    assert result[check] == "ok", result[check]


@pytest.mark.gpu
def test_cuda_tensors_over_mpi_on_a_real_gpu():
    from autograd_gpu.backends import cupy_backend
    if cupy_backend.simulated() or not ag.cuda.is_available():
        pytest.skip("needs a real GPU (the stand-in runs test_cuda_paths_in_a_2_rank_job_on_the_standin)")
    result = verdicts(2, ["cuda_over_mpi"])
    assert result["cuda_over_mpi"] == "ok", result["cuda_over_mpi"]


@pytest.mark.gpu
def test_nccl_path_as_a_world_of_one():
    from autograd_gpu.backends import cupy_backend
    from autograd_gpu.distributed.nccl_transport import nccl_importable
    if cupy_backend.simulated() or not ag.cuda.is_available() or not nccl_importable():
        pytest.skip("needs a real GPU and NCCL (pip install nvidia-nccl-cu12 or -cu13)")
    result = verdicts(1, ["nccl_world_of_one"])
    assert result["nccl_world_of_one"] == "ok", result["nccl_world_of_one"]


def test_calls_before_init_raise():
    assert not ag.distributed.is_initialized()
    for call in (ag.distributed.get_rank, ag.distributed.get_world_size, ag.distributed.barrier,
                 lambda: ag.distributed.all_reduce(ag.ones(1))):
        with pytest.raises(RuntimeError, match="init_process_group"):
            call()


def test_importing_the_package_does_not_import_mpi4py():
    code = "import sys, autograd_gpu; assert 'mpi4py' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=60)


def test_train_ddp_example_runs_on_two_ranks(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), AG_CUDA="")
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, str(ROOT / "examples" / "train_ddp.py"), "--smoke",
                           "--out", str(tmp_path / "ddp.png")], env=env, capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "digits on 2 rank(s): test accuracy" in proc.stdout
    assert proc.stdout.count("test accuracy") == 1            # rank 0 alone prints
