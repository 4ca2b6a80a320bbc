"""A small U-Net that removes Gaussian noise from the shipped 8x8 digits (offline). Prints the test set's
PSNR of the noisy and of the denoised images, and saves a before/after picture (clean, noisy, denoised).

The encoder halves the image twice (8x8 -> 4x4 -> 2x2); the decoder comes back up once with
F.interpolate (bilinear) and once with nn.ConvTranspose2d, each time joined (channel concat) to the
encoder's map of the same size, which F.pad first brings to that size. Every 3x3 convolution pads its
input by reflection with F.pad; each is followed by nn.GroupNorm and nn.SiLU. The network predicts the
noise, which is subtracted from its input (a residual denoiser).

    python examples/unet_digits.py [--device cuda] [--epochs 40] [--sigma 0.3] [--smoke]
"""
import numpy as np

from _common import ag, parser, parse_args, progress, set_postfix, Timer, _pyplot
from autograd_gpu import nn, optim
from autograd_gpu.data import TensorDataset, DataLoader
import autograd_gpu.nn.functional as F


class ConvBlock(nn.Module):
    """(reflect pad 1, conv3x3, GroupNorm, SiLU) twice."""

    def __init__(self, cin, cout, groups=8):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3)
        self.norm1 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.act = nn.SiLU()

    def forward(self, x):
        x = self.act(self.norm1(self.conv1(F.pad(x, (1, 1, 1, 1), mode="reflect"))))
        return self.act(self.norm2(self.conv2(F.pad(x, (1, 1, 1, 1), mode="reflect"))))


def match(x, like):
    """x zero-padded (or cropped, by a negative pad) on the right and bottom to like's height and width,
    as U-Nets do when a down-up round trip loses a row of an odd-sized map."""
    dh, dw = like.shape[-2] - x.shape[-2], like.shape[-1] - x.shape[-1]
    if dh or dw:
        x = F.pad(x, (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2))
    return x


class UNet(nn.Module):
    """1 -> c (8x8) -> 2c (4x4) -> 2c (2x2) -> up (interpolate) 2c (4x4) -> up (ConvTranspose2d) c (8x8) -> 1."""

    def __init__(self, c=16):
        super().__init__()
        self.enc1 = ConvBlock(1, c)
        self.enc2 = ConvBlock(c, 2 * c)
        self.mid = ConvBlock(2 * c, 2 * c)
        self.dec2 = ConvBlock(4 * c, 2 * c)
        self.up1 = nn.ConvTranspose2d(2 * c, c, kernel_size=2, stride=2)
        self.dec1 = ConvBlock(2 * c, c)
        self.out = nn.Conv2d(c, 1, 1)

    def forward(self, x):
        e1 = self.enc1(x)                                        # c, 8x8
        e2 = self.enc2(F.avg_pool2d(e1, 2))                      # 2c, 4x4
        m = self.mid(F.avg_pool2d(e2, 2))                        # 2c, 2x2
        u2 = F.interpolate(m, size=e2.shape[-2:], mode="bilinear", align_corners=False)
        d2 = self.dec2(ag.cat([match(u2, e2), e2], dim=1))       # 2c, 4x4
        d1 = self.dec1(ag.cat([match(self.up1(d2), e1), e1], dim=1))   # c, 8x8
        return x - self.out(d1)                                  # the noise predicted, taken away


def psnr(a, b):
    """Peak signal-to-noise ratio in dB of images in [0, 1], averaged over the images."""
    mse = ((a - b) ** 2).reshape(a.shape[0], -1).mean(dim=1)
    return float((-10.0 * ag.log10(mse.clamp(min=1e-10))).mean().item())


def denoise(model, noisy, batch=512):
    model.eval()
    with ag.no_grad():
        out = ag.cat([model(noisy[i:i + batch]) for i in range(0, noisy.shape[0], batch)])
    model.train()
    return out.clamp(0.0, 1.0)


def save_before_after(path, clean, noisy, denoised, title, n=10):
    """Three rows of n test digits: clean, noisy, denoised."""
    plt = _pyplot()
    if plt is None:
        return None
    rows = [("clean", clean), ("noisy", noisy), ("denoised", denoised)]
    fig, axes = plt.subplots(3, n, figsize=(1.1 * n, 3.6))
    for r, (name, images) in enumerate(rows):
        images = images[:n, 0].to("cpu").numpy()
        for i in range(n):
            ax = axes[r, i]
            ax.imshow(images[i], cmap="gray", vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r, 0].set_ylabel(name)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "unet_digits.png")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--width", type=int, default=16, help="channels of the first level (a multiple of 8)")
    p.add_argument("--sigma", type=float, default=0.3, help="standard deviation of the added noise")
    args = parse_args(p, argv)
    if args.width <= 0 or args.width % 8:
        p.error(f"--width: expected a positive multiple of 8 (GroupNorm's 8 groups), got {args.width}")
    ag.manual_seed(args.seed)
    xtr, _ = ag.data.datasets.load_digits(device=args.device, split="train", flatten=False)
    xte, _ = ag.data.datasets.load_digits(device=args.device, split="test", flatten=False)
    xtr, xte = xtr.unsqueeze(1), xte.unsqueeze(1)
    rng = np.random.default_rng(args.seed + 1)             # the test noise: fixed, the same for every run
    noisy_te = xte + args.sigma * ag.tensor(rng.standard_normal(tuple(xte.shape)).astype(np.float32),
                                            device=args.device)
    epochs = 1 if args.smoke else args.epochs
    model = UNet(args.width).to(args.device)
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    loader = DataLoader(TensorDataset(xtr), batch_size=args.batch_size, shuffle=True)
    sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=epochs * len(loader))
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters; noise sigma {args.sigma}; on {args.device}")
    losses, steps = [], 0
    with Timer() as timer:
        bar = progress(range(epochs), total=epochs, desc="epochs")
        for _ in bar:
            for (xb,) in loader:
                noisy = xb + args.sigma * ag.randn(*xb.shape, device=args.device)   # fresh noise every step
                loss = F.mse_loss(model(noisy), xb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                sched.step()
                losses.append(loss.item())
                steps += 1
                if args.smoke and steps >= 3:
                    break
            set_postfix(bar, loss=losses[-1])
    denoised = denoise(model, noisy_te)
    before, after = psnr(noisy_te.clamp(0.0, 1.0), xte), psnr(denoised, xte)
    print(f"digits test set, noise sigma {args.sigma}: PSNR {before:.2f} dB noisy (clipped to [0, 1]) -> "
          f"{after:.2f} dB denoised after {epochs} epochs ({steps} steps) in {timer.seconds:.1f} s on {args.device}")
    title = f"U-Net denoiser: PSNR {before:.1f} dB -> {after:.1f} dB (sigma {args.sigma})"
    if save_before_after(args.out, xte, noisy_te.clamp(0.0, 1.0), denoised, title):
        print(f"saved {args.out}")
    return {"psnr_noisy": before, "psnr_denoised": after, "seconds": timer.seconds, "final_loss": losses[-1]}


if __name__ == "__main__":
    main()
