"""Honest timing: warm-up, repeats in interleaved rounds, medians with min/max, and a device
synchronisation inside the timed region so asynchronous GPU launches are not mistaken for work done."""
import os
import platform
import statistics
import time


def cupy_module():
    """CuPy as the CUDA backend uses it: the installed package, or the test suite's stand-in when that is
    installed (so the CUDA workloads also run in CI, on the stand-in)."""
    from autograd_gpu.backends import cupy_backend
    cp = cupy_backend._import_cupy()
    if cp is None:
        import cupy as cp        # noqa: F401  (raises the ImportError that says what is missing)
    return cp


def sync_fn(device, lib):
    """A callable that waits for the device: ours (ag.cuda.synchronize), torch's, CuPy's, or nothing."""
    if not str(device).startswith("cuda"):
        return lambda: None
    if lib == "torch":
        import torch
        return torch.cuda.synchronize
    if lib == "cupy":
        cupy = cupy_module()
        return lambda: cupy.cuda.Device().synchronize()
    import autograd_gpu as ag
    return lambda: ag.cuda.synchronize(device)


def measure(steps, repeats, warmup=3, rounds=3, block_warmup=0.25):
    """{name: (median_s, min_s, max_s)} for each (step, sync) in ``steps``.

    The steps take turns in rounds, so load from elsewhere on the machine hits all of them alike; in
    each round a step runs as a block: untimed steps for ``block_warmup`` seconds (at least two), then
    the timed ones. The warm-up matters on a small machine: a library that takes over the CPU from
    another first pays for waking its own thread pool (OpenBLAS's sleeping workers: milliseconds)
    while the other's threads are still spinning, which a training loop never sees."""
    for step, sync in steps.values():
        for _ in range(warmup):
            step()
        sync()
    times = {name: [] for name in steps}
    per_round = max(3, repeats // rounds)
    for _ in range(rounds):
        for name, (step, sync) in steps.items():
            t_end, n = time.perf_counter() + block_warmup, 0
            while n < 2 or time.perf_counter() < t_end:
                step()
                sync()
                n += 1
            for _ in range(per_round):
                t0 = time.perf_counter()
                step()
                sync()
                times[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(ts), min(ts), max(ts)) for name, ts in times.items()}


def machine(devices):
    """What the figures were measured on: CPU, GPU, library versions."""
    import numpy
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpu": _cpu_name(),
            "cores": os.cpu_count(), "numpy": numpy.__version__}
    from autograd_gpu.backends import mkl_blas
    info["cpu_blas"] = mkl_blas.describe()      # the CPU backend's matrix products: MKL or NumPy's BLAS
    try:
        import torch
        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    if any(str(d).startswith("cuda") for d in devices):
        cupy = cupy_module()
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        info["gpu"] = name.decode() if isinstance(name, bytes) else name
        info["cupy"] = getattr(cupy, "__version__", "stand-in")
        info["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    return info


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()
