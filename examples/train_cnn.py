"""Train a small CNN: on the shipped 8x8 digits (offline, the default) or MNIST (--dataset mnist
--download). Prints the test accuracy and time; saves loss/accuracy curves.

    python examples/train_cnn.py [--device cuda] [--dataset mnist --download --root data]
"""
from _common import ag, open_mnist, parser, parse_args, progress, set_postfix, Timer, save_curves, accuracy
from autograd_gpu import nn, optim
from autograd_gpu.data import TensorDataset, DataLoader
import autograd_gpu.nn.functional as F


def load(args):
    if args.dataset == "digits":
        xtr, ytr = ag.data.datasets.load_digits(device=args.device, split="train", flatten=False)
        xte, yte = ag.data.datasets.load_digits(device=args.device, split="test", flatten=False)
        return xtr.unsqueeze(1), ytr, xte.unsqueeze(1), yte
    train, test = open_mnist(args)

    def images(ds):
        return (ds.data.unsqueeze(1).float() / 255.0).to(args.device), ds.targets.to(args.device)
    return (*images(train), *images(test))


def make_model(side):
    """conv3x3 16 - relu - conv3x3 32 - relu - maxpool 2 - linear 10 (8x8 digits: 2x2x32 features)."""
    after = (side - 4) // 2
    return nn.Sequential(nn.Conv2d(1, 16, 3), nn.ReLU(), nn.Conv2d(16, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(32 * after * after, 10))


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "cnn_training.png")
    p.add_argument("--dataset", choices=["digits", "mnist"], default="digits")
    p.add_argument("--root", default="data")
    p.add_argument("--download", action="store_true")
    p.add_argument("--epochs", type=int, default=None, help="default: 15 on digits, 2 on MNIST")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    args = parse_args(p, argv)
    ag.manual_seed(args.seed)
    xtr, ytr, xte, yte = load(args)
    epochs = 1 if args.smoke else args.epochs or (15 if args.dataset == "digits" else 2)
    model = make_model(xtr.shape[-1]).to(args.device)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    loader = DataLoader(TensorDataset(xtr, ytr), batch_size=args.batch_size, shuffle=True)
    losses, test_acc = [], []
    with Timer() as timer:
        bar = progress(range(epochs), total=epochs, desc="epochs")
        for _ in bar:
            model.train()
            for xb, yb in loader:
                loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                if args.smoke and len(losses) >= 3:
                    break
            model.eval()
            with ag.no_grad():
                test_acc.append(accuracy(model(xte), yte))
            set_postfix(bar, loss=losses[-1], test_acc=test_acc[-1])
    print(f"{args.dataset}: CNN test accuracy {test_acc[-1]:.2%} after {epochs} epochs in {timer.seconds:.1f} s "
          f"on {args.device}")
    if save_curves(args.out, {"training loss": (range(len(losses)), losses),
                              "test accuracy": (range(1, epochs + 1), test_acc)}, f"CNN on {args.dataset}"):
        print(f"saved {args.out}")
    return {"test_accuracy": test_acc[-1], "seconds": timer.seconds}


if __name__ == "__main__":
    main()
