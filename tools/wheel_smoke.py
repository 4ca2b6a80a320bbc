"""Smoke test of an installed autograd_gpu, run from outside the checkout (tools/check_wheel.sh runs it in a
fresh virtualenv holding only the wheel): the package imports from site-packages, not from a source tree;
its data files are there; a tiny training step on the shipped digits lowers the loss; the CuPy stand-in
installs and runs the same step on its simulated GPU. Exits non-zero, saying what failed, otherwise.

    python tools/wheel_smoke.py [--checkout DIR]     # DIR: a source tree the import must not come from
"""
import argparse
import os
import sys
from pathlib import Path


def fail(message):
    print(f"wheel smoke test FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def train_steps(ag, device, steps=5):
    """Losses of a few Adam steps of a 64-32-10 MLP on the digits, on ``device``."""
    from autograd_gpu import nn, optim
    import autograd_gpu.nn.functional as F
    ag.manual_seed(0)
    X, y = ag.data.datasets.load_digits(split="train")
    X, y = X[:256].to(device), y[:256].to(device)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10)).to(device)
    opt = optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", help="a source tree the package must not be imported from")
    args = p.parse_args()
    import autograd_gpu as ag
    where = Path(ag.__file__).resolve().parent
    print(f"autograd_gpu {ag.__version__} from {where}")
    if "site-packages" not in where.parts:
        fail(f"the package was imported from {where}, not from an installed wheel (site-packages)")
    if args.checkout and Path(args.checkout).resolve() in where.parents:
        fail(f"the package was imported from the checkout {args.checkout}")
    from importlib.metadata import version
    if ag.__version__ != version("autograd-gpu"):
        fail(f"autograd_gpu.__version__ is {ag.__version__}, the installed distribution {version('autograd-gpu')}")
    for data in ("py.typed", "data/datasets/digits.npz", "testing/cupy_standin/cupy_api.json"):
        if not (where / data).is_file():
            fail(f"the installed package lacks {data}")

    losses = train_steps(ag, "cpu")
    print("cpu losses:", " ".join(f"{v:.4f}" for v in losses))
    if not losses[-1] < losses[0]:
        fail(f"training on the CPU did not lower the loss: {losses}")

    from autograd_gpu.testing import cupy_standin
    cupy_standin.install()
    try:
        if not ag.cuda.is_available():
            fail("after cupy_standin.install(), ag.cuda.is_available() is False")
        cuda_losses = train_steps(ag, "cuda")
    finally:
        cupy_standin.uninstall()
    print("stand-in cuda losses:", " ".join(f"{v:.4f}" for v in cuda_losses))
    if not all(abs(a - b) <= 1e-4 * max(1.0, abs(a)) for a, b in zip(losses, cuda_losses)):
        fail(f"the stand-in's losses {cuda_losses} differ from the CPU's {losses}")
    print(f"wheel smoke test passed (cwd {os.getcwd()})")


if __name__ == "__main__":
    main()
