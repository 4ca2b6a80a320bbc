"""Train an MLP classifier: on the 8x8 digits shipped with the package (offline, the default) or on
MNIST (--dataset mnist --download). Prints the test accuracy and time; saves loss/accuracy curves.

    python examples/train_mlp.py [--device cuda] [--dataset mnist --download --root data]
"""
from _common import ag, open_mnist, parser, parse_args, progress, set_postfix, Timer, save_curves, accuracy
from autograd_gpu import nn, optim
from autograd_gpu.data import TensorDataset, DataLoader
import autograd_gpu.nn.functional as F


def load(args):
    if args.dataset == "digits":
        xtr, ytr = ag.data.datasets.load_digits(device=args.device, split="train")
        xte, yte = ag.data.datasets.load_digits(device=args.device, split="test")
        return xtr, ytr, xte, yte, 64
    train, test = open_mnist(args)

    def flat(ds):
        return (ds.data.reshape(len(ds), -1).float() / 255.0).to(args.device), ds.targets.to(args.device)
    return (*flat(train), *flat(test), 784)


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "mlp_training.png")
    p.add_argument("--dataset", choices=["digits", "mnist"], default="digits")
    p.add_argument("--root", default="data", help="where MNIST is (or is downloaded to)")
    p.add_argument("--download", action="store_true", help="download MNIST if it is not in --root")
    p.add_argument("--epochs", type=int, default=None, help="default: 40 on digits, 5 on MNIST")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--hidden", type=int, default=None, help="default: 128 on digits, 512 on MNIST")
    p.add_argument("--amp", action="store_true",
                   help="mixed precision: float16 matrix products under ag.amp.autocast, with a GradScaler")
    args = parse_args(p, argv)
    ag.manual_seed(args.seed)
    xtr, ytr, xte, yte, n_in = load(args)
    hidden = args.hidden or (128 if args.dataset == "digits" else 512)
    epochs = 1 if args.smoke else args.epochs or (40 if args.dataset == "digits" else 5)
    model = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, 10)).to(args.device)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    device_type = ag.device(args.device).type
    autocast = ag.amp.autocast(device_type, enabled=args.amp)
    scaler = ag.amp.GradScaler(device_type, enabled=args.amp)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size, shuffle=True)
    losses, steps, test_acc = [], [], []
    with Timer() as timer:
        bar = progress(range(epochs), total=epochs, desc="epochs")
        for epoch in bar:
            model.train()
            for xb, yb in loader:
                with autocast:
                    loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad()
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                losses.append(loss.item())
                steps.append(len(steps))
                if args.smoke and len(steps) >= 3:
                    break
            model.eval()
            with ag.no_grad(), autocast:
                test_acc.append(accuracy(model(xte), yte))
            set_postfix(bar, loss=losses[-1], test_acc=test_acc[-1])
    print(f"{args.dataset}: test accuracy {test_acc[-1]:.2%} after {epochs} epochs in {timer.seconds:.1f} s "
          f"on {args.device}" + (" with mixed precision (float16 matmuls, loss scaling)" if args.amp else ""))
    if save_curves(args.out, {"training loss": (steps, losses), "test accuracy": (range(1, epochs + 1), test_acc)},
                   f"MLP on {args.dataset}"):
        print(f"saved {args.out}")
    return {"test_accuracy": test_acc[-1], "seconds": timer.seconds}


if __name__ == "__main__":
    main()
