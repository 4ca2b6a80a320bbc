"""Gaussian-process regression: fit an RBF kernel's hyperparameters by gradient descent on the
negative log marginal likelihood, written with ag.linalg (cholesky, triangular solves as solve).

    K = sf^2 exp(-|x_i - x_j|^2 / (2 l^2)) + sn^2 I,   L = cholesky(K),   alpha = L^-1 y
    -log p(y | x) = |alpha|^2 / 2 + sum(log diag(L)) + n/2 log(2 pi)

The gradient with respect to (log l, log sf, log sn) flows back through cholesky and solve.
python examples/gp_regression.py [--device cuda] [--steps 200]
"""
import math

from _common import ag, parser, parse_args, Timer, _pyplot

L = ag.linalg


def rbf(xa, xb, log_l, log_sf):
    d2 = (xa.reshape(-1, 1) - xb.reshape(1, -1)) ** 2
    return ag.exp(2 * log_sf) * ag.exp(-0.5 * d2 * ag.exp(-2 * log_l))


def neg_log_marginal_likelihood(x, y, log_l, log_sf, log_sn):
    n = x.shape[0]
    k = rbf(x, x, log_l, log_sf) + ag.exp(2 * log_sn) * ag.eye(n, dtype=x.dtype, device=x.device)
    chol = L.cholesky(k)
    alpha = L.solve(chol, y)                          # L^-1 y (a triangular system)
    return 0.5 * (alpha * alpha).sum() + ag.log(L.diagonal(chol)).sum() + 0.5 * n * math.log(2 * math.pi)


def predict(x, y, xs, log_l, log_sf, log_sn):
    """Posterior mean and standard deviation at xs."""
    n = x.shape[0]
    k = rbf(x, x, log_l, log_sf) + ag.exp(2 * log_sn) * ag.eye(n, dtype=x.dtype, device=x.device)
    chol = L.cholesky(k)
    ks = rbf(x, xs, log_l, log_sf)                    # (n, m)
    v = L.solve(chol, ks)
    mean = v.mT @ L.solve(chol, y)
    var = ag.exp(2 * log_sf) - (v * v).sum(0)
    return mean, ag.sqrt(ag.clamp(var, min=0.0))


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "gp_regression.png")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--points", type=int, default=40)
    p.add_argument("--lr", type=float, default=0.05)
    args = parse_args(p, argv)
    ag.manual_seed(args.seed)
    dev, f64 = args.device, ag.float64
    n = 12 if args.smoke else args.points
    x = ag.rand(n, dtype=f64, device=dev) * 6 - 3
    y = ag.sin(2 * x) + 0.1 * ag.randn(n, dtype=f64, device=dev)      # true noise sd 0.1
    theta = ag.tensor([1.0, 0.0, 0.0], dtype=f64, device=dev, requires_grad=True)   # log l, log sf, log sn
    opt = ag.optim.Adam([theta], lr=args.lr)
    steps = 20 if args.smoke else args.steps
    losses = []
    with Timer() as timer:
        for _ in range(steps):
            loss = neg_log_marginal_likelihood(x, y, *theta)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    log_l, log_sf, log_sn = theta.tolist()
    print(f"GP on {n} points: negative log marginal likelihood {losses[0]:.3f} -> {losses[-1]:.3f} in {steps} "
          f"Adam steps; length scale {math.exp(log_l):.3f}, signal sd {math.exp(log_sf):.3f}, noise sd "
          f"{math.exp(log_sn):.3f}; {timer.seconds:.1f} s on {dev}")
    plt = _pyplot()
    if plt is not None:
        xs = ag.linspace(-3.5, 3.5, 200, dtype=f64, device=dev)
        with ag.no_grad():
            mean, sd = predict(x, y, xs, *theta)
        xs_, m_, s_ = xs.numpy(), mean.numpy(), sd.numpy()
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.4))
        ax1.plot(losses)
        ax1.set_title("negative log marginal likelihood")
        ax1.set_xlabel("step")
        ax2.fill_between(xs_, m_ - 2 * s_, m_ + 2 * s_, alpha=0.3, label="mean +- 2 sd")
        ax2.plot(xs_, m_, label="posterior mean")
        ax2.scatter(x.numpy(), y.numpy(), s=10, color="k", label="data")
        ax2.legend(fontsize=7)
        ax2.set_title("fit")
        fig.tight_layout()
        fig.savefig(args.out, dpi=100)
        print(f"saved {args.out}")
    return losses


if __name__ == "__main__":
    main()
