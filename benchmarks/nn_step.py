"""Training-step time of two small models written with nn.functional and plain tensors, beside the same
models in PyTorch (when importable) in the same run: the small CNN (batch 32 of 1x28x28: conv3x3 8 ->
relu -> maxpool2 -> conv3x3 16 -> relu -> maxpool2 -> flatten -> linear 10, cross_entropy) and the MLP
784-512-512-10 (batch 128, linear + relu, cross_entropy). One step = forward, backward and a plain SGD
update, float32. Prints medians in milliseconds and the ratio ours / PyTorch.

    python benchmarks/nn_step.py [--repeats 200] [--device cpu] [--models cnn,mlp] [--keep-freed-memory]
"""
import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import autograd_gpu as ag  # noqa: E402
import autograd_gpu.nn.functional as F  # noqa: E402

LR = 0.01


def _params(shapes, seed=0):
    """Float32 weights uniform in +-1/sqrt(fan_in) (PyTorch's default scale) and zero biases, as NumPy."""
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        if len(s) == 1:
            out.append(np.zeros(s, np.float32))
        else:
            bound = 1.0 / np.sqrt(np.prod(s[1:]))
            out.append(rng.uniform(-bound, bound, s).astype(np.float32))
    return out


def _data(model, seed=1):
    rng = np.random.default_rng(seed)
    n, shape = (32, (1, 28, 28)) if model == "cnn" else (128, (784,))
    return rng.standard_normal((n,) + shape).astype(np.float32), rng.integers(0, 10, n)


SHAPES = {"cnn": [(8, 1, 3, 3), (8,), (16, 8, 3, 3), (16,), (10, 400), (10,)],
          "mlp": [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)]}


def forward(lib, F_, model, x, y, p):
    """The model's loss; the same code for autograd_gpu (lib=ag) and PyTorch (lib=torch)."""
    if model == "cnn":
        h = F_.max_pool2d(F_.relu(F_.conv2d(x, p[0], p[1])), 2)
        h = F_.max_pool2d(F_.relu(F_.conv2d(h, p[2], p[3])), 2)
        logits = F_.linear(h.reshape(h.shape[0], -1), p[4], p[5])
    else:
        h = F_.relu(F_.linear(x, p[0], p[1]))
        h = F_.relu(F_.linear(h, p[2], p[3]))
        logits = F_.linear(h, p[4], p[5])
    return F_.cross_entropy(logits, y)


def ours_step(model, device):
    x, y = _data(model)
    x, y = ag.tensor(x, device=device), ag.tensor(y, device=device)
    p = [ag.tensor(a, device=device, requires_grad=True) for a in _params(SHAPES[model])]

    def step():
        for t in p:
            t.grad = None
        forward(ag, F, model, x, y, p).backward()
        for t in p:
            t.data -= LR * t.grad.data
        if device != "cpu":
            ag.cuda.synchronize()
    return step


def torch_step(model, device):
    import torch
    import torch.nn.functional as TF
    dev = "cuda" if device.startswith("cuda") else "cpu"
    x, y = _data(model)
    x, y = torch.tensor(x, device=dev), torch.tensor(y, device=dev)
    p = [torch.tensor(a, device=dev, requires_grad=True) for a in _params(SHAPES[model])]

    def step():
        for t in p:
            t.grad = None
        forward(torch, TF, model, x, y, p).backward()
        with torch.no_grad():
            for t in p:
                t -= LR * t.grad
        if dev == "cuda":
            torch.cuda.synchronize()
    return step


def _minor_faults():
    try:
        import resource
    except ImportError:                 # not on Windows
        return 0
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(steps, repeats, rounds=10):
    """(median ms, min ms, page faults per step) of each step. Each library runs blocks of consecutive
    steps (so neither runs while the other's worker threads are still spinning), the blocks take
    turns over ``rounds`` rounds (so a burst of load from elsewhere hits both alike), and the first
    two steps of each block are not timed."""
    times = {name: [] for name in steps}
    faults = dict.fromkeys(steps, 0)
    per_round = max(1, repeats // rounds)
    for _ in range(rounds):
        for name, step in steps.items():
            step()
            step()
            f0 = _minor_faults()
            for _ in range(per_round):
                t0 = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - t0)
            faults[name] += _minor_faults() - f0
    return {name: (statistics.median(ts) * 1e3, min(ts) * 1e3, faults[name] / len(ts)) for name, ts in times.items()}


def keep_freed_memory():
    """Ask glibc's malloc to keep freed memory instead of returning it to the OS after every step (where
    the next step page-faults it back in); the same process-wide setting for both libraries."""
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    m_trim_threshold, m_mmap_threshold = -1, -3
    return bool(libc.mallopt(m_trim_threshold, 512 << 20) and libc.mallopt(m_mmap_threshold, 32 << 20))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--models", default="cnn,mlp", help="comma-separated subset of cnn,mlp")
    p.add_argument("--keep-freed-memory", action="store_true",
                   help="set glibc malloc's trim and mmap thresholds high first (both libraries benefit)")
    a = p.parse_args(argv)
    if a.keep_freed_memory:
        try:
            print(f"glibc malloc keeps freed memory: {keep_freed_memory()}")
        except OSError as e:
            print(f"cannot tune malloc here ({e}); running with the defaults")
    try:
        import torch
        label = f"PyTorch {torch.__version__}"
    except ImportError:
        torch = None
        print("PyTorch not installed: no baseline, our times only")
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"NumPy {np.__version__}, device {a.device}; median of {a.repeats} steps each (forward + backward + SGD)")
    for model in a.models.split(","):
        steps = {"autograd_gpu": ours_step(model, a.device)}
        if torch is not None:
            steps[label] = torch_step(model, a.device)
        res = measure(steps, a.repeats)
        ours, ours_min, ours_faults = res["autograd_gpu"]
        line = f"{model}: autograd_gpu {ours:.2f} ms (min {ours_min:.2f}, {ours_faults:.0f} page faults/step)"
        if torch is not None:
            theirs, theirs_min, theirs_faults = res[label]
            line += (f", {label} {theirs:.2f} ms (min {theirs_min:.2f}, {theirs_faults:.0f} page faults/step), "
                     f"ratio ours / PyTorch {ours / theirs:.2f}")
        print(line)


if __name__ == "__main__":
    main()
