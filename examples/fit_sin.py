"""The slides' model: learn y = sin(x**4) * 4 on x in [0, 1) with three scalar weights,

    a = x**2;  b = relu(w1 * a + w3);  c = relu(w2 * a + w3);  y_hat = sin(b + c) * 4

trained one random sample at a time on (y - y_hat)**2 + 0.1 * sum(w**2); saves the loss curve and the
fitted function.  python examples/fit_sin.py [--device cuda] [--steps 3000]
"""
from _common import ag, parser, parse_args, progress, set_postfix, Timer, _pyplot


class Model(ag.nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = ag.nn.Parameter(ag.tensor([[1.7]]))      # the slides' starting values
        self.w2 = ag.nn.Parameter(ag.tensor([[0.2]]))
        self.w3 = ag.nn.Parameter(ag.tensor([[0.6]]))

    def forward(self, x):
        a = x ** 2
        b = (self.w1 * a + self.w3).relu()
        c = (self.w2 * a + self.w3).relu()
        return (b + c).sin() * 4


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "fit_sin.png")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lr", type=float, default=1e-2)
    args = parse_args(p, argv)
    ag.manual_seed(args.seed)
    model = Model().to(args.device)
    steps = 5 if args.smoke else args.steps
    losses = []
    with Timer() as timer:
        bar = progress(range(steps), total=steps, desc="steps")
        for _ in bar:
            x = ag.rand(1, device=args.device)
            y = (x ** 4).sin() * 4
            mse_loss = ((y - model(x)) ** 2).sum()
            w_loss = sum((w ** 2).sum() for w in model.parameters())
            loss = mse_loss + w_loss * 0.1
            loss.backward()
            with ag.no_grad():
                for w in model.parameters():
                    w -= w.grad * args.lr
                    w.grad = None
            losses.append(mse_loss.item())
            set_postfix(bar, mse=losses[-1])
    xs = ag.linspace(0, 1, 101, device=args.device).reshape(-1, 1)
    with ag.no_grad():
        fit_mse = ((model(xs) - (xs ** 4).sin() * 4) ** 2).mean().item()
    first, last = sum(losses[:100]) / len(losses[:100]), sum(losses[-100:]) / len(losses[-100:])
    print(f"fit sin(x**4) * 4: mean squared error {first:.4f} over the first 100 steps, {last:.4f} over the "
          f"last 100; {fit_mse:.4f} on a grid of [0, 1]; {timer.seconds:.1f} s on {args.device}")
    plt = _pyplot()
    if plt is not None:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
        window = min(100, len(losses))
        running = [sum(losses[max(0, i - window + 1):i + 1]) / len(losses[max(0, i - window + 1):i + 1])
                   for i in range(len(losses))]
        ax1.plot(losses, linewidth=0.3, alpha=0.35, label="per step (one random x)")
        ax1.plot(running, linewidth=1.5, label=f"mean of the last {window}")
        ax1.set_yscale("log")
        ax1.set_ylim(1e-6, None)
        ax1.legend(fontsize=7)
        ax1.set_title("squared error")
        ax2.plot(xs.numpy().ravel(), ((xs ** 4).sin() * 4).numpy().ravel(), label="sin(x**4) * 4")
        with ag.no_grad():
            ax2.plot(xs.numpy().ravel(), model(xs).numpy().ravel(), label="model")
        ax2.legend()
        ax2.set_title("the fit")
        fig.tight_layout()
        fig.savefig(args.out, dpi=100)
        plt.close(fig)
        print(f"saved {args.out}")
    return {"first_mse": first, "last_mse": last, "grid_mse": fit_mse}


if __name__ == "__main__":
    main()
