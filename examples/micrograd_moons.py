"""micrograd's demo: a small MLP (2-16-16-1) separating the two moons with a max-margin loss and L2
regularisation, trained by plain SGD with a decaying step; saves the decision boundary and the
loss/accuracy curves.

    python examples/micrograd_moons.py [--device cuda]
"""
from _common import ag, parser, parse_args, progress, set_postfix, Timer, save_curves, save_decision_boundary
from autograd_gpu import nn


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "moons_boundary.png")
    p.add_argument("--steps", type=int, default=100)
    args = parse_args(p, argv)
    ag.manual_seed(args.seed)
    X, y = ag.data.datasets.make_moons(n_samples=100, noise=0.1, seed=args.seed, device=args.device)
    ysign = y.float() * 2 - 1                                   # labels as -1 / +1
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).to(args.device)
    steps = 3 if args.smoke else args.steps
    losses, accs = [], []
    with Timer() as timer:
        bar = progress(range(steps), total=steps, desc="steps")
        for k in bar:
            scores = model(X).squeeze(1)
            data_loss = ag.relu(1 - ysign * scores).mean()     # the max-margin ("svm") loss
            reg_loss = 1e-4 * sum((p * p).sum() for p in model.parameters())
            loss = data_loss + reg_loss
            model.zero_grad()
            loss.backward()
            lr = 1.0 - 0.9 * k / steps                          # micrograd's decaying learning rate
            with ag.no_grad():
                for p_ in model.parameters():
                    p_ -= lr * p_.grad
            accs.append(float(((scores > 0) == (ysign > 0)).float().mean().item()))
            losses.append(loss.item())
            set_postfix(bar, loss=losses[-1], acc=accs[-1])
    print(f"moons: accuracy {accs[-1]:.0%} after {steps} steps in {timer.seconds:.1f} s on {args.device}")

    def predict(grid):
        with ag.no_grad():
            return (model(ag.tensor(grid, device=args.device)).squeeze(1) > 0).long().numpy()
    curves = args.out.replace(".png", "_curves.png")
    if save_decision_boundary(args.out, predict, X, y, f"micrograd MLP on moons: {accs[-1]:.0%}") and \
            save_curves(curves, {"loss": (range(steps), losses), "accuracy": (range(steps), accs)}, "training"):
        print(f"saved {args.out} and {curves}")
    return {"accuracy": accs[-1], "seconds": timer.seconds}


if __name__ == "__main__":
    main()
