"""The U-Net training step: ours against PyTorch with the same weights (no hand-written baseline: a
U-Net's backward by hand is group norm's, the transposed convolution's and interpolation's, which our
nodes already are). Registered into WORKLOADS as "unet_step"; run it alone with

    python -m benchmarks --only unet_step [--quick] [--device cpu cuda]

The network is examples/unet_digits.py's shape, larger: two levels down (average pooling) and two up
(bilinear F.interpolate, then nn.ConvTranspose2d), skip connections joined by channel concatenation,
each 3x3 convolution on a reflection F.pad, followed by nn.GroupNorm and nn.SiLU; a denoising MSE loss
and an Adam update.
"""
import numpy as np

# (batch, image side, channels of the first level)
SIZES = {"full": (32, 32, 32), "quick": (8, 16, 16), "tiny": (2, 8, 16)}


def _unet(nn, F, cat, c, **kw):
    """The same network in either library (both spell these names alike): the parameters come in the same
    order, so PyTorch's can be set from ours one by one."""

    class Block(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, **kw)
            self.norm1 = nn.GroupNorm(8, cout, **kw)
            self.conv2 = nn.Conv2d(cout, cout, 3, **kw)
            self.norm2 = nn.GroupNorm(8, cout, **kw)
            self.act = nn.SiLU()

        def forward(self, x):
            x = self.act(self.norm1(self.conv1(F.pad(x, (1, 1, 1, 1), mode="reflect"))))
            return self.act(self.norm2(self.conv2(F.pad(x, (1, 1, 1, 1), mode="reflect"))))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc1, self.enc2, self.mid = Block(1, c), Block(c, 2 * c), Block(2 * c, 2 * c)
            self.dec2 = Block(4 * c, 2 * c)
            self.up1 = nn.ConvTranspose2d(2 * c, c, kernel_size=2, stride=2, **kw)
            self.dec1 = Block(2 * c, c)
            self.out = nn.Conv2d(c, 1, 1, **kw)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(F.avg_pool2d(e1, 2))
            m = self.mid(F.avg_pool2d(e2, 2))
            u2 = F.interpolate(m, size=tuple(e2.shape[-2:]), mode="bilinear", align_corners=False)
            d2 = self.dec2(cat([u2, e2], dim=1))
            d1 = self.dec1(cat([self.up1(d2), e1], dim=1))
            return x - self.out(d1)

    return UNet()


def unet_step(device, scale):
    """One Adam step of a U-Net denoiser (levels of 32, 64, 64 channels at 32x32, 16x16, 8x8; GroupNorm
    8 groups, SiLU, reflection padding, bilinear interpolate and a stride-2 transposed convolution up)
    on a batch of 32 noisy 1x32x32 images, MSE against the clean ones: forward, backward, update."""
    import autograd_gpu as ag
    from autograd_gpu import nn, optim
    import autograd_gpu.nn.functional as F
    from benchmarks.workloads import _torch, _rng, _copy_weights
    batch, side, c = SIZES[scale]
    rng = _rng(8)
    clean = rng.random((batch, 1, side, side)).astype(np.float32)
    noisy = (clean + 0.3 * rng.standard_normal(clean.shape)).astype(np.float32)
    ag.manual_seed(0)
    model = _unet(nn, F, ag.cat, c).to(device)
    params = list(model.parameters())
    opt = optim.Adam(params, lr=1e-3)
    x, y = ag.tensor(noisy, device=device), ag.tensor(clean, device=device)

    def ours():
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
    ours.params = lambda: [p.detach().to("cpu").numpy() for p in params]   # for the test that both agree

    steps = {"ours": ours}
    torch, tdev = _torch(device)
    if torch is not None:
        tmodel = _unet(torch.nn, torch.nn.functional, torch.cat, c, device=tdev)
        tparams = list(tmodel.parameters())
        if [tuple(t.shape) for t in tparams] != [tuple(p.shape) for p in params]:
            raise AssertionError("unet_step: PyTorch's U-Net has other parameters than ours")
        _copy_weights(torch, tparams, params)
        topt = torch.optim.Adam(tparams, lr=1e-3)
        tx, ty = torch.tensor(noisy, device=tdev), torch.tensor(clean, device=tdev)

        def theirs():
            topt.zero_grad()
            torch.nn.functional.mse_loss(tmodel(tx), ty).backward()
            topt.step()
        theirs.params = lambda: [p.detach().cpu().numpy() for p in tparams]
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step",
                   "what": f"U-Net {c}-{2 * c}-{2 * c} on batch {batch} of 1x{side}x{side}, GroupNorm, Adam"}


WORKLOADS = {"unet_step": unet_step}
