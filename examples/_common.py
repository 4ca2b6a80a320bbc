"""Shared by the examples: command-line options, a progress bar, and the plots they save."""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # run from a checkout without installing

import autograd_gpu as ag  # noqa: E402


OUTPUTS = "outputs"    # where the plots go by default: a folder of their own, ignored by git (.gitignore)


def parser(description, out):
    out = os.path.join(OUTPUTS, out)
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=out, help=f"where to save the plot (default: {out}; its folder is made)")
    p.add_argument("--smoke", action="store_true", help="a few steps only, to check that everything runs")
    return p


def parse_args(p, argv=None):
    """p.parse_args(argv) with --device checked at once: a bad name, or "cuda" without CuPy or a GPU,
    ends the script with the library's one-line message on stderr and exit status 2, not a traceback."""
    args = p.parse_args(argv)
    try:
        ag.backends.get_backend(ag.device(args.device))   # imports CuPy and finds the GPU for "cuda"
    except (ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if getattr(args, "out", None):
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    return args


def open_mnist(args):
    """MNIST's (train, test) from args.root (downloaded there with args.download). Missing files without
    --download, an unreachable mirror or a damaged file end the script with one line, not a traceback."""
    raw = os.path.join(args.root, "MNIST", "raw")
    missing = [name for name, _ in ag.data.datasets.MNIST.resources
               if not any(os.path.exists(os.path.join(raw, n)) for n in (name, name[:-len(".gz")]))]
    if missing and not args.download:
        print(f"error: MNIST is not in {raw} ({len(missing)} of its 4 files missing): run again with --download "
              f"to fetch it (11 MB; --root sets where), or copy {', '.join(missing)} there", file=sys.stderr)
        sys.exit(2)
    try:
        return tuple(ag.data.datasets.MNIST(args.root, train=t, download=args.download) for t in (True, False))
    except (RuntimeError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)


def progress(iterable, total=None, desc=""):
    """tqdm's progress bar when it is installed (pip install tqdm, or pip install -e ".[examples]"), else a plain loop."""
    try:
        from tqdm import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, leave=False, dynamic_ncols=True)


def set_postfix(bar, **values):
    if hasattr(bar, "set_postfix"):
        bar.set_postfix({k: f"{v:.4f}" for k, v in values.items()})


class Timer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0


def _pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print('matplotlib is not installed: no plot (pip install matplotlib, or pip install -e ".[examples]")')
        return None


def save_curves(path, curves, title):
    """One panel per named curve ({"loss": [...], "test accuracy": [...]}), x = step or epoch."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, axes = plt.subplots(1, len(curves), figsize=(4.5 * len(curves), 3.4))
    axes = axes if len(curves) > 1 else [axes]
    for ax, (name, (xs, ys)) in zip(axes, curves.items()):
        ax.plot(xs, ys)
        ax.set_title(name)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def save_decision_boundary(path, predict, X, y, title):
    """The classes ``predict`` assigns over the plane (as a filled contour) with the points on top.
    predict maps an (N, 2) float32 host array to N class labels."""
    plt = _pyplot()
    if plt is None:
        return None
    import numpy as np
    X, y = X.numpy(), y.numpy()
    lo, hi = X.min(axis=0) - 0.5, X.max(axis=0) + 0.5
    gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], 200), np.linspace(lo[1], hi[1], 200))
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1).astype(np.float32)
    zz = predict(grid).reshape(gx.shape)
    fig, ax = plt.subplots(figsize=(5, 4.2))
    ax.contourf(gx, gy, zz, alpha=0.35, cmap="coolwarm", levels=np.arange(zz.max() + 2) - 0.5)
    ax.scatter(X[:, 0], X[:, 1], c=y, s=14, cmap="coolwarm", edgecolors="k", linewidths=0.3)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def accuracy(logits, y):
    return float((logits.argmax(dim=1) == y).float().mean().item())


__all__ = ["ag", "parser", "parse_args", "open_mnist", "progress", "set_postfix", "Timer", "save_curves", "save_decision_boundary", "accuracy"]
