"""How many threads the CPU's BLAS (NumPy's OpenBLAS, MKL when installed) may run: one policy, applied
through threadpoolctl when the CPU backend is imported.

OpenBLAS and MKL start one thread per core of the machine and let idle threads spin. On a machine shared
with other work that oversubscribes the cores: a busy 2-core machine ran the digits MLP example in 34 s
with OpenBLAS's two threads and 2.8 s with one. So the default is the CPUs this process may use
(affinity mask and cgroup quota) less the work already running there (the 1-minute load average),
at least 1: every core on a quiet machine, one thread on a saturated one.

``AUTOGRAD_GPU_NUM_THREADS=N`` fixes the count. Where ``OMP_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` or
``MKL_NUM_THREADS`` is set, the user's choice stands and nothing is changed at import.
``set_num_threads(n)`` changes it at run time (``ag.set_num_threads``, as ``torch.set_num_threads``).
"""
import math
import os

__all__ = ["available_cpus", "default_num_threads", "set_num_threads", "get_num_threads", "apply_policy"]

_USER_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_chosen = [None]            # the count set by this module, once it has set one


def available_cpus():
    """CPUs this process may run on: the affinity mask, capped by a cgroup v2 CPU quota (containers)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, n)


def default_num_threads():
    """The policy: AUTOGRAD_GPU_NUM_THREADS when set, else the available CPUs less the load already on
    the machine (1-minute load average, rounded), clamped to [1, available CPUs]."""
    env = os.environ.get("AUTOGRAD_GPU_NUM_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise ValueError(f"AUTOGRAD_GPU_NUM_THREADS must be a positive integer, got {env!r}")
        return n
    cpus = available_cpus()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):     # Windows: no load average
        load = 0.0
    return max(1, min(cpus, cpus - int(load + 0.5)))


def _controller():
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController()


def set_num_threads(n):
    """Run the BLAS libraries loaded in this process (OpenBLAS, MKL, BLIS) on ``n`` threads each."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads: expected a positive int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"set_num_threads: expected a positive int, got {n}")
    _controller().select(user_api="blas").limit(limits=n)
    _chosen[0] = n


def get_num_threads():
    """The threads the BLAS runs on: the count set by set_num_threads or the policy, else the most any
    loaded BLAS library reports."""
    if _chosen[0] is not None:
        return _chosen[0]
    counts = [info["num_threads"] for info in _controller().select(user_api="blas").info()]
    return max(counts, default=1)


def apply_policy():
    """Set the default thread count once, at import of the CPU backend, unless the user set one of
    OMP_NUM_THREADS / OPENBLAS_NUM_THREADS / MKL_NUM_THREADS. Returns the count set, or None."""
    if any(os.environ.get(v, "").strip() for v in _USER_VARS) and \
            not os.environ.get("AUTOGRAD_GPU_NUM_THREADS", "").strip():
        return None
    n = default_num_threads()
    try:
        set_num_threads(n)
    except ImportError:                   # threadpoolctl missing (installed without its dependencies)
        return None
    return n
