"""Short training runs that must reach a stated accuracy on held-out data."""
import numpy as np

import autograd_gpu as ag
from autograd_gpu import nn, optim
import autograd_gpu.nn.functional as F


def _accuracy(model, x, y):
    model.eval()
    with ag.no_grad():
        return float((model(x).argmax(dim=1) == y).float().mean().item())


def test_mlp_on_moons_reaches_97_percent_in_a_few_hundred_steps(device):
    ag.manual_seed(0)
    x, y = ag.data.datasets.make_moons(n_samples=400, noise=0.1, seed=0, device=device)
    xt, yt = ag.data.datasets.make_moons(n_samples=400, noise=0.1, seed=1, device=device)
    model = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2)).to(device)
    opt = optim.Adam(model.parameters(), lr=0.01)
    for _ in range(300):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert _accuracy(model, xt, yt) >= 0.97


def _bars(n, side, rng):
    """Images with one horizontal (label 0) or vertical (label 1) bar at a random place, plus noise."""
    y = rng.integers(0, 2, n)
    x = rng.normal(0.0, 0.3, (n, 1, side, side)).astype(np.float32)
    pos = rng.integers(0, side, n)
    for i in range(n):
        if y[i] == 0:
            x[i, 0, pos[i], :] += 1.0
        else:
            x[i, 0, :, pos[i]] += 1.0
    return x, y


def test_small_cnn_on_generated_bar_images_reaches_95_percent(device):
    ag.manual_seed(0)
    rng = np.random.default_rng(0)
    xa, ya = _bars(512, 10, rng)
    xb, yb = _bars(256, 10, rng)
    x, y = ag.tensor(xa, device=device), ag.tensor(ya, device=device)
    xt, yt = ag.tensor(xb, device=device), ag.tensor(yb, device=device)
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1),
                          nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2)).to(device)
    opt = optim.Adam(model.parameters(), lr=0.01)
    loader = ag.data.DataLoader(ag.data.TensorDataset(x, y), batch_size=64, shuffle=True)
    for _ in range(8):
        model.train()
        for xb_, yb_ in loader:
            loss = F.cross_entropy(model(xb_), yb_)
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert _accuracy(model, xt, yt) >= 0.95
