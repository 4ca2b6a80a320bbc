"""Seeded, domain-aware inputs, closeness checks, and the devices to test on (host-side, NumPy)."""
import numpy as np

import autograd_gpu as ag


def devices():
    """'cpu' always, plus 'cuda' where CuPy sees a GPU."""
    return ["cpu"] + (["cuda"] if ag.cuda.is_available() else [])


def make_arrays(shapes, dtype, domain=(-2.0, 2.0), avoid=(), seed=0, kinds=None):
    """NumPy inputs of the given shapes in ``domain``, at least 0.05 away from each point in ``avoid``
    (kinks and poles); integer kinds ("int", "bool", "index:N") per input when given. With a complex
    ``dtype`` the float inputs are complex (real and imaginary parts each drawn as above) and inputs
    of kind "real" are real of the same precision.

    The float values of all inputs together are a shuffled, jittered grid over the domain, so no two
    are closer than about half the grid step: max-like ops (max, pooling, maximum, clamp) then have
    no near-ties, which would make finite differences straddle the argmax."""
    rng = np.random.default_rng(seed)
    kinds = kinds or [None] * len(shapes)
    cplx = np.dtype(dtype).kind == "c"
    floats = [j for j, k in enumerate(kinds) if k is None or k in ("int", "real")]
    total = sum(int(np.prod(shapes[j], dtype=np.int64)) * (2 if cplx and kinds[j] is None else 1) for j in floats)
    lo, hi = domain
    step = (hi - lo) / (total + 1)
    grid = lo + step * (np.arange(1, total + 1) + rng.uniform(-0.25, 0.25, total))
    rng.shuffle(grid)
    out, used = [], 0
    for shape, kind in zip(shapes, kinds):
        if kind == "bool":
            out.append(rng.random(shape) > 0.5)
            continue
        if kind and kind.startswith("index:"):
            out.append(rng.integers(0, int(kind.split(":")[1]), size=shape))
            continue
        n = int(np.prod(shape, dtype=np.int64))
        parts = []
        for _ in range(2 if cplx and kind is None else 1):
            a = grid[used:used + n].reshape(shape)
            used += n
            for p in avoid:
                close = np.abs(a - p) < 0.05
                a = np.where(close, p + np.where(a >= p, 0.1, -0.1), a)
            parts.append(a)
        if kind == "int":
            out.append(np.rint(parts[0]).astype(np.int64))
        elif kind == "real":
            out.append(parts[0].astype(np.float64 if np.dtype(dtype) == np.complex128 else np.float32)
                       if cplx else parts[0].astype(dtype))
        else:
            out.append((parts[0] + 1j * parts[1]).astype(dtype) if cplx else parts[0].astype(dtype))
    return out


def to_numpy(x):
    if isinstance(x, ag.Tensor):
        return x.numpy()
    if isinstance(x, (tuple, list)):
        return type(x)(to_numpy(y) for y in x)
    return np.asarray(x)


def assert_close(got, expected, rtol=None, atol=None, check_dtype=True):
    """Compare a Tensor (or tuple of them) with a NumPy result: shape, dtype and values."""
    if isinstance(got, (tuple, list)):
        assert isinstance(expected, (tuple, list)) and len(got) == len(expected), \
            f"expected {len(expected)} outputs, got {len(got)}"
        for g, e in zip(got, expected):
            assert_close(g, e, rtol, atol, check_dtype)
        return
    assert isinstance(got, ag.Tensor), f"expected a Tensor, got {type(got).__name__}"
    e = np.asarray(expected)
    g = got.numpy()
    assert g.shape == e.shape, f"shape {g.shape} != expected {e.shape}"
    if check_dtype:
        assert g.dtype == e.dtype, f"dtype {g.dtype} != expected {e.dtype}"
    if rtol is None:
        rtol = 1e-5 if g.dtype in (np.float32, np.float16, np.complex64) else 1e-7
    if atol is None:
        atol = 1e-6 if g.dtype in (np.float32, np.float16, np.complex64) else 1e-10
    np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)


def train_step(model, opt, x, y):
    """One classification training step, as the compile tests run it eagerly and compiled: zero the
    gradients, cross-entropy of model(x) against y, backward, optimizer step; returns the loss."""
    from ..nn import functional as F
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss
