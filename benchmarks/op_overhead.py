"""Per-op overhead alone: microseconds per elementwise op (forward + backward) on a 16-element
tensor over a chain of 200 ops, ours beside hand-written NumPy and PyTorch in the same run.

    python benchmarks/op_overhead.py [--device cpu] [--repeats 60]

(The same workload is part of ``python -m benchmarks``; this script runs only it, with more repeats.)"""
import argparse
import platform
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import measure, sync_fn, machine  # noqa: E402
from benchmarks.workloads import op_overhead  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=60)
    a = p.parse_args(argv)
    steps, meta = op_overhead(a.device, "full")
    libs = {"ours": "ours", "numpy": "cupy" if a.device.startswith("cuda") else "numpy", "torch": "torch"}
    res = measure({k: (f, sync_fn(a.device, libs[k])) for k, f in steps.items()}, a.repeats, rounds=5)
    m = machine([a.device])
    print(f"{m['cpu']} ({m['cores']} cores), Python {platform.python_version()}, device {a.device}: {meta['what']}")
    n = meta["per"]
    for name, (med, lo, hi) in res.items():
        print(f"{name:>6}: {med * 1e6 / n:6.2f} us/op (min {lo * 1e6 / n:.2f}, max {hi * 1e6 / n:.2f})")
    if "torch" in res:
        print(f"ratio ours / PyTorch {m['torch']}: {res['ours'][0] / res['torch'][0]:.2f}")
    return res


if __name__ == "__main__":
    main()
