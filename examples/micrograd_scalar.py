"""micrograd's scalar example on tensors, then the x1..x6 graph: prints values and gradients.

    python examples/micrograd_scalar.py [--device cpu|cuda]
"""
import argparse

from _common import ag, parse_args


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--smoke", action="store_true", help="accepted like the other examples' (this one is always tiny)")
    args = parse_args(p, argv)

    x = ag.tensor(-4.0, device=args.device, requires_grad=True)
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    print(f"micrograd: y = {y.item():.1f}, dy/dx = {x.grad.item():.1f}   (expected -20.0 and 46.0)")

    x1, x2, x4, x6 = (ag.tensor(v, device=args.device, requires_grad=True) for v in (3.0, 4.0, 5.0, 2.0))
    x3 = x1 * x2
    x5 = x4 + x3
    loss = x5 * x6
    for t in (x3, x5, loss):
        t.retain_grad()
    loss.backward()
    names = ["x1", "x2", "x3", "x4", "x5", "x6", "L"]
    grads = [t.grad.item() for t in (x1, x2, x3, x4, x5, x6, loss)]
    print("x1..x6 graph: " + ", ".join(f"d L/d {n} = {g:g}" for n, g in zip(names, grads)),
          "  (expected 8, 6, 2, 2, 2, 17, 1)")
    return grads


if __name__ == "__main__":
    main()
