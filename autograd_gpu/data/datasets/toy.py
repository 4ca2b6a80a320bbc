"""Small 2-D classification sets for tutorials: make_spiral (CS231n's spiral) and make_moons
(scikit-learn's two half circles). Points are generated on the host, then moved once to the device."""
import math

import numpy as np   # host-only: the points are drawn on the host with NumPy, then moved to the device

from ...backends import get_backend
from ...creation import tensor as _tensor

__all__ = ["make_spiral", "make_moons"]


def _rng(seed):
    """A host generator: seeded when ``seed`` is given, else the CPU backend's (set by ag.manual_seed)."""
    if seed is None:
        return get_backend("cpu").rng
    if hasattr(seed, "standard_normal"):
        return seed
    return np.random.default_rng(seed)


def _check(name, value, low, what):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: expected {what} to be an int >= {low}, got {value!r}")


def _check_noise(name, noise):
    if not isinstance(noise, (int, float)) or isinstance(noise, bool) or not noise >= 0:
        raise ValueError(f"{name}: expected noise to be a number >= 0, got {noise!r}")


def make_spiral(n_points, n_classes=3, noise=0.2, seed=None, device=None):
    """``n_classes`` interleaved spiral arms of ``n_points`` points each (CS231n): X float32 of shape
    (n_points * n_classes, 2), y int64 class ids in arm order; noise jitters the angle."""
    _check("make_spiral", n_points, 1, "n_points")
    _check("make_spiral", n_classes, 1, "n_classes")
    _check_noise("make_spiral", noise)
    rng = _rng(seed)
    r = np.linspace(0.0, 1.0, n_points)
    xs, ys = [], []
    for k in range(n_classes):
        t = np.linspace(k * 4.0, (k + 1) * 4.0, n_points) + rng.standard_normal(n_points) * noise
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(n_points, k, dtype=np.int64))
    return _pair(np.concatenate(xs), np.concatenate(ys), device)


def make_moons(n_samples=100, noise=0.0, seed=None, device=None):
    """Two interleaving half circles (scikit-learn's make_moons, shuffled): X float32 of shape
    (n_samples, 2), y int64 in {0, 1} with n_samples // 2 points in class 0; gaussian noise of std ``noise``."""
    _check("make_moons", n_samples, 2, "n_samples")
    _check_noise("make_moons", noise)
    rng = _rng(seed)
    n_out = n_samples // 2
    n_in = n_samples - n_out
    a_out = np.linspace(0.0, math.pi, n_out)
    a_in = np.linspace(0.0, math.pi, n_in)
    x = np.concatenate([np.cos(a_out), 1.0 - np.cos(a_in)])
    y = np.concatenate([np.sin(a_out), 1.0 - np.sin(a_in) - 0.5])
    X = np.stack([x, y], axis=1)
    labels = np.concatenate([np.zeros(n_out, dtype=np.int64), np.ones(n_in, dtype=np.int64)])
    perm = rng.permutation(n_samples)
    X, labels = X[perm], labels[perm]
    if noise:
        X = X + rng.standard_normal(X.shape) * noise
    return _pair(X, labels, device)


def _pair(X, y, device):
    return _tensor(X.astype(np.float32), device=device), _tensor(y, device=device)
