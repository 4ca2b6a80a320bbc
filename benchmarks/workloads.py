"""The workloads: each builds, for one device, the step functions to time: "ours" (autograd_gpu),
"numpy" (the same maths written by hand on NumPy or CuPy arrays: the floor for our overhead) and
"torch" (PyTorch on the same device) when it is importable. A step runs forward + backward (+ the
optimizer update for training steps); the caller synchronises the device after it.

Each workload function takes (device, scale) where scale is "full", "quick" or "tiny" and returns
(steps, meta): steps maps a variant name to a zero-argument step function, meta says what one step
is (units for per-op figures, sizes)."""
import numpy as np

import autograd_gpu as ag


# --------------------------------------------------------------------------- helpers
def _xp(device):
    if str(device).startswith("cuda"):
        from benchmarks.timing import cupy_module
        return cupy_module()
    return np


def _torch(device):
    try:
        import torch
    except ImportError:
        return None, None
    dev = "cuda" if str(device).startswith("cuda") else "cpu"
    if dev == "cuda" and not torch.cuda.is_available():
        return None, None
    return torch, dev


def _rng(seed=0):
    return np.random.default_rng(seed)


def _sgd(params, lr):
    with ag.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


# --------------------------------------------------------------------------- per-op overhead
def chain(lib, x, w, n_ops):
    """A cycle of four cheap elementwise ops (tensor*tensor, +scalar, tanh, *scalar), then a sum."""
    h = x
    for i in range(n_ops):
        k = i % 4
        if k == 0:
            h = h * w
        elif k == 1:
            h = h + 0.5
        elif k == 2:
            h = lib.tanh(h)
        else:
            h = h * 1.1
    return h.sum()


def op_overhead(device, scale):
    """Per-op cost: a chain of 200 elementwise ops on 16 elements, forward + backward."""
    n_ops, size = 200, 16
    a = _rng().standard_normal((2, size)).astype(np.float32)
    x = ag.tensor(a[0], device=device, requires_grad=True)
    w = ag.tensor(a[1], device=device, requires_grad=True)

    def ours():
        x.grad = w.grad = None
        chain(ag, x, w, n_ops).backward()

    xp = _xp(device)
    xa, wa = xp.asarray(a[0]), xp.asarray(a[1])

    def by_hand():
        # the same chain with its backward written out: what the arithmetic costs with no engine
        hs, h = [], xa
        for i in range(n_ops):
            hs.append(h)
            k = i % 4
            h = h * wa if k == 0 else h + 0.5 if k == 1 else xp.tanh(h) if k == 2 else h * 1.1
        g, gw = xp.ones_like(h), xp.zeros_like(wa)
        for i in reversed(range(n_ops)):
            k = i % 4
            if k == 0:
                gw += g * hs[i]
                g = g * wa
            elif k == 2:
                t = xp.tanh(hs[i])
                g = g * (1 - t * t)
            elif k == 3:
                g = g * 1.1
        return g, gw

    steps = {"ours": ours, "numpy": by_hand}
    torch, tdev = _torch(device)
    if torch is not None:
        tx = torch.tensor(a[0], device=tdev, requires_grad=True)
        tw = torch.tensor(a[1], device=tdev, requires_grad=True)

        def theirs():
            tx.grad = tw.grad = None
            chain(torch, tx, tw, n_ops).backward()
        steps["torch"] = theirs
    return steps, {"per": n_ops + 1, "unit": "us/op", "what": f"chain of {n_ops} ops on {size} elements"}


# --------------------------------------------------------------------------- MLP training step
def _mlp_sizes(scale, width=None):
    if scale == "tiny":
        return 16, (32, 16, 16, 10)
    return 128, (784, width or 512, width or 512, 10)


def _copy_weights(torch, theirs, ours):
    """PyTorch's parameters ``theirs`` set to ours, in order: both libraries then do the same arithmetic."""
    with torch.no_grad():
        for t, p in zip(theirs, ours):
            t.copy_(torch.from_numpy(p.numpy()))


def _mlp_model(sizes, device):
    """Linear-ReLU-Linear-ReLU-Linear over ``sizes``, seeded: (the Sequential, its layers)."""
    from autograd_gpu import nn
    ag.manual_seed(0)
    layers = []
    for i in range(3):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(device), layers


def mlp_step(device, scale, width=None, batch=None, adam=False):
    """One SGD training step of an MLP 784-512-512-10 (ReLU, cross-entropy), batch 128 (``adam``: an
    Adam step, lr 1e-3, with no hand-written baseline)."""
    from autograd_gpu import optim
    import autograd_gpu.nn.functional as F
    n, sizes = _mlp_sizes(scale, width)
    n = batch or n
    rng = _rng(1)
    xa = rng.standard_normal((n, sizes[0])).astype(np.float32)
    ya = rng.integers(0, sizes[-1], n)
    model, layers = _mlp_model(sizes, device)
    opt = optim.Adam(model.parameters(), lr=1e-3) if adam else optim.SGD(model.parameters(), lr=0.01)
    x, y = ag.tensor(xa, device=device), ag.tensor(ya, device=device)

    def ours():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    weights = [(l.weight.numpy().copy(), l.bias.numpy().copy()) for l in layers[::2]]
    steps = {"ours": ours} if adam else {"ours": ours, "numpy": _mlp_by_hand(device, weights, xa, ya)}
    torch, tdev = _torch(device)
    if torch is not None:
        tn = torch.nn
        tm = tn.Sequential(tn.Linear(sizes[0], sizes[1]), tn.ReLU(), tn.Linear(sizes[1], sizes[2]), tn.ReLU(),
                           tn.Linear(sizes[2], sizes[3])).to(tdev)
        topt = torch.optim.Adam(tm.parameters(), lr=1e-3) if adam else torch.optim.SGD(tm.parameters(), lr=0.01)
        tx, ty = torch.tensor(xa, device=tdev), torch.tensor(ya, device=tdev)

        def theirs():
            topt.zero_grad()
            torch.nn.functional.cross_entropy(tm(tx), ty).backward()
            topt.step()
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step",
                   "what": f"MLP {'-'.join(map(str, sizes))}, batch {n}, {'Adam' if adam else 'SGD'}"}


def mlp_adam_step(device, scale):
    """One Adam training step of the MLP of mlp_step (PyTorch's default Adam: foreach on CUDA)."""
    return mlp_step(device, scale, adam=True)


def mlp_sub_step(device, scale):
    """The MLP step of mlp_step with no optimizer object: SGD written out as a user would,
    ``with no_grad(): p.sub_(p.grad * lr)``, and gradients zeroed with ``model.zero_grad()``. The
    hand-written NumPy step does the same arithmetic (``np.subtract(p, g * lr, out=p)``), PyTorch the
    same loop."""
    import autograd_gpu.nn.functional as F
    n, sizes = _mlp_sizes(scale)
    rng = _rng(1)
    xa = rng.standard_normal((n, sizes[0])).astype(np.float32)
    ya = rng.integers(0, sizes[-1], n)
    lr = 0.01
    model, layers = _mlp_model(sizes, device)
    params = list(model.parameters())
    x, y = ag.tensor(xa, device=device), ag.tensor(ya, device=device)

    def ours():
        model.zero_grad()
        F.cross_entropy(model(x), y).backward()
        with ag.no_grad():
            for p in params:
                p.sub_(p.grad * lr)
    ours.params = lambda: [p.numpy() for p in params]     # for the test that all three agree

    weights = [(l.weight.numpy().copy(), l.bias.numpy().copy()) for l in layers[::2]]
    steps = {"ours": ours, "numpy": _mlp_by_hand(device, weights, xa, ya, lr)}
    torch, tdev = _torch(device)
    if torch is not None:
        tn = torch.nn
        tm = tn.Sequential(tn.Linear(sizes[0], sizes[1]), tn.ReLU(), tn.Linear(sizes[1], sizes[2]), tn.ReLU(),
                           tn.Linear(sizes[2], sizes[3])).to(tdev)
        tparams = list(tm.parameters())
        _copy_weights(torch, tparams, params)
        tx, ty = torch.tensor(xa, device=tdev), torch.tensor(ya, device=tdev)

        def theirs():
            tm.zero_grad()
            torch.nn.functional.cross_entropy(tm(tx), ty).backward()
            with torch.no_grad():
                for p in tparams:
                    p.sub_(p.grad * lr)
        theirs.params = lambda: [p.detach().cpu().numpy() for p in tparams]
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step",
                   "what": f"MLP {'-'.join(map(str, sizes))}, batch {n}, SGD as p.sub_(p.grad * lr)"}


def _mlp_by_hand(device, weights, xa, ya, lr=0.01):
    xp = _xp(device)
    ws = [(xp.asarray(w), xp.asarray(b)) for w, b in weights]
    x, y = xp.asarray(xa), xp.asarray(ya)
    n = x.shape[0]

    def step():
        acts, h = [x], x
        for i, (w, b) in enumerate(ws):
            h = h @ w.T + b
            if i < len(ws) - 1:
                h = xp.maximum(h, 0)
            acts.append(h)
        z = h - h.max(axis=1, keepdims=True)
        p = xp.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        p[xp.arange(n), y] -= 1
        g = p / n                                      # d loss / d logits
        for i in reversed(range(len(ws))):
            w, b = ws[i]
            gw, gb = g.T @ acts[i], g.sum(axis=0)
            if i:
                g = (g @ w) * (acts[i] > 0)
            xp.subtract(w, gw * lr, out=w)             # what p.sub_(p.grad * lr) does
            xp.subtract(b, gb * lr, out=b)
    step.params = lambda: [a.get() if hasattr(a, "get") else a for wb in ws for a in wb]
    return step


# --------------------------------------------------------------------------- CNN training step
def cnn_step(device, scale):
    """One SGD step of a small CNN on 1x28x28: conv3x3 8 - relu - maxpool2 - conv3x3 16 - relu -
    maxpool2 - linear 10, batch 32."""
    from autograd_gpu import nn, optim
    import autograd_gpu.nn.functional as F
    n, side = (4, 12) if scale == "tiny" else (32, 28)
    rng = _rng(2)
    xa = rng.standard_normal((n, 1, side, side)).astype(np.float32)
    ya = rng.integers(0, 10, n)
    flat = 16 * (((side - 2) // 2 - 2) // 2) ** 2
    ag.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 16, 3), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(flat, 10)).to(device)
    opt = optim.SGD(model.parameters(), lr=0.01)
    x, y = ag.tensor(xa, device=device), ag.tensor(ya, device=device)

    def ours():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    params = [p.numpy().copy() for p in model.parameters()]
    steps = {"ours": ours, "numpy": _cnn_by_hand(device, params, xa, ya)}
    torch, tdev = _torch(device)
    if torch is not None:
        tn = torch.nn
        tm = tn.Sequential(tn.Conv2d(1, 8, 3), tn.ReLU(), tn.MaxPool2d(2), tn.Conv2d(8, 16, 3), tn.ReLU(),
                           tn.MaxPool2d(2), tn.Flatten(), tn.Linear(flat, 10)).to(tdev)
        topt = torch.optim.SGD(tm.parameters(), lr=0.01)
        tx, ty = torch.tensor(xa, device=tdev), torch.tensor(ya, device=tdev)

        def theirs():
            topt.zero_grad()
            tn.functional.cross_entropy(tm(tx), ty).backward()
            topt.step()
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step", "what": f"CNN batch {n} of 1x{side}x{side}, SGD"}


def _cnn_by_hand(device, params, xa, ya, lr=0.01):
    """The CNN step with im2col convolutions, window-max pooling and their backwards written out."""
    xp = _xp(device)
    w1, b1, w2, b2, w3, b3 = (xp.asarray(p) for p in params)
    x, y = xp.asarray(xa), xp.asarray(ya)
    n = x.shape[0]

    def cols(a):                                      # (N, C, H, W) -> (N, H-2, W-2, C*9), 3x3 windows
        N, C, H, W = a.shape
        s = a.strides
        v = xp.lib.stride_tricks.as_strided(a, (N, H - 2, W - 2, C, 3, 3), (s[0], s[2], s[3], s[1], s[2], s[3]))
        return v.reshape(N, H - 2, W - 2, C * 9)

    def conv(a, w, b):
        c = cols(a)
        return (c @ w.reshape(w.shape[0], -1).T + b).transpose(0, 3, 1, 2), c

    def conv_back(g, c, w, a_shape):
        G = g.transpose(0, 2, 3, 1)                   # (N, H', W', O)
        gw = (G.reshape(-1, G.shape[-1]).T @ c.reshape(-1, c.shape[-1])).reshape(w.shape)
        gb = G.sum(axis=(0, 1, 2))
        gc = (G @ w.reshape(w.shape[0], -1)).reshape(G.shape[:3] + (a_shape[1], 3, 3))
        ga = xp.zeros(a_shape, dtype=g.dtype)
        H2, W2 = G.shape[1], G.shape[2]
        for i in range(3):
            for j in range(3):
                ga[:, :, i:i + H2, j:j + W2] += gc[..., i, j].transpose(0, 3, 1, 2)
        return ga, gw, gb

    def pool(a):
        N, C, H, W = a.shape
        v = a[:, :, :H // 2 * 2, :W // 2 * 2].reshape(N, C, H // 2, 2, W // 2, 2)
        m = v.max(axis=(3, 5))
        return m, v == m[:, :, :, None, :, None]

    def pool_back(g, mask, shape):
        N, C, H, W = shape
        ga = xp.zeros(shape, dtype=g.dtype)
        gw = mask * g[:, :, :, None, :, None]
        gw = gw / mask.sum(axis=(3, 5), keepdims=True)
        ga[:, :, :H // 2 * 2, :W // 2 * 2] = gw.reshape(N, C, H // 2 * 2, W // 2 * 2)
        return ga

    def step():
        h1, c1 = conv(x, w1, b1)
        r1 = xp.maximum(h1, 0)
        p1, m1 = pool(r1)
        h2, c2 = conv(p1, w2, b2)
        r2 = xp.maximum(h2, 0)
        p2, m2 = pool(r2)
        f = p2.reshape(n, -1)
        logits = f @ w3.T + b3
        z = xp.exp(logits - logits.max(axis=1, keepdims=True))
        z /= z.sum(axis=1, keepdims=True)
        z[xp.arange(n), y] -= 1
        g = z / n
        gw3, gb3 = g.T @ f, g.sum(axis=0)
        g = pool_back((g @ w3).reshape(p2.shape), m2, r2.shape) * (h2 > 0)
        g, gw2, gb2 = conv_back(g, c2, w2, p1.shape)
        g = pool_back(g, m1, r1.shape) * (h1 > 0)
        _, gw1, gb1 = conv_back(g, c1, w1, x.shape)
        for p, gp in ((w1, gw1), (b1, gb1), (w2, gw2), (b2, gb2), (w3, gw3), (b3, gb3)):
            p -= lr * gp
    return step


# --------------------------------------------------------------------------- big elementwise graph
def elementwise_4m(device, scale):
    """sigmoid, mul, square, sum over 4M float32 elements, then backward."""
    size = {"tiny": 1 << 10, "quick": 1 << 20}.get(scale, 1 << 22)
    a = _rng(3).standard_normal(size).astype(np.float32)
    x = ag.tensor(a, device=device, requires_grad=True)

    def ours():
        x.grad = None
        s = ag.sigmoid(x)
        ((s * x) ** 2).sum().backward()

    xp = _xp(device)
    xa = xp.asarray(a)

    def by_hand():
        s = 1 / (1 + xp.exp(-xa))
        m = s * xa
        g_m = 2 * m                                   # d sum(m^2) / dm
        return g_m * s + g_m * xa * s * (1 - s)       # through m = s * x and s = sigmoid(x)

    steps = {"ours": ours, "numpy": by_hand}
    torch, tdev = _torch(device)
    if torch is not None:
        tx = torch.tensor(a, device=tdev, requires_grad=True)

        def theirs():
            tx.grad = None
            s = torch.sigmoid(tx)
            ((s * tx) ** 2).sum().backward()
        steps["torch"] = theirs
    meta = {"per": 1, "unit": "ms/step", "what": f"sigmoid*x, square, sum on {size:,} elements", "elements": size}
    if str(device).startswith("cuda"):
        meta["copy_gb_per_s"] = _copy_bandwidth(xp, size)
    return steps, meta


def _copy_bandwidth(xp, size, repeats=20):
    """GB/s of a device-to-device copy of ``size`` float32 values (read + write), the ceiling a fused
    elementwise step can approach on this GPU (``device_ms``: best of ``repeats``)."""
    src = xp.ones(size, dtype=xp.float32)
    dst = xp.empty_like(src)
    ms = device_ms(xp, lambda: xp.copyto(dst, src), repeats)
    return size * 4 * 2 / (ms * 1e-3) / 1e9 if ms else None


def device_ms(xp, step, repeats=20):
    """The GPU's time for the work ``step()`` queues, in ms (best of ``repeats``): CUDA events around
    one call, recorded behind a 256 MiB copy that keeps the GPU busy while the host queues the call,
    so the host's own time (Python, launches) is not counted unless it outlasts that copy. The copy
    ceiling (``_copy_bandwidth``) is measured the same way."""
    busy_src = xp.empty(1 << 26, dtype=xp.float32)
    busy_dst = xp.empty_like(busy_src)
    step()
    best = float("inf")
    for _ in range(repeats + 2):
        start, stop = xp.cuda.Event(), xp.cuda.Event()
        xp.copyto(busy_dst, busy_src)
        start.record()
        step()
        stop.record()
        stop.synchronize()
        ms = xp.cuda.get_elapsed_time(start, stop)
        best = min(best, ms) if ms > 0 else best
    return None if best in (0, float("inf")) else best


# --------------------------------------------------------------------------- micrograd's moons
def _moons(n, rng):
    """Two interleaved half circles with noise 0.1 (scikit-learn's make_moons), labels -1 / +1."""
    t = rng.uniform(0, np.pi, n)
    top = np.arange(n) % 2 == 0
    x = np.where(top, np.cos(t), 1 - np.cos(t))
    y = np.where(top, np.sin(t), 0.5 - np.sin(t))
    pts = np.stack([x, y], axis=1) + rng.normal(0, 0.1, (n, 2))
    return pts.astype(np.float32), np.where(top, -1.0, 1.0).astype(np.float32)


def moons_step(device, scale):
    """micrograd's demo, batched: an MLP 2-16-16-1 on 100 moons points, max-margin loss + L2, SGD."""
    from autograd_gpu import nn
    import autograd_gpu.nn.functional as F
    xa, ya = _moons(100, _rng(5))
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
    params = list(model.parameters())
    x, y = ag.tensor(xa, device=device), ag.tensor(ya, device=device)

    def ours():
        for p in params:
            p.grad = None
        scores = model(x).reshape(-1)
        loss = F.relu(1 - y * scores).mean() + 1e-4 * sum((p * p).sum() for p in params)
        loss.backward()
        _sgd(params, 0.1)

    steps = {"ours": ours}
    torch, tdev = _torch(device)
    if torch is not None:
        tn = torch.nn
        tm = tn.Sequential(tn.Linear(2, 16), tn.ReLU(), tn.Linear(16, 16), tn.ReLU(), tn.Linear(16, 1)).to(tdev)
        tparams = list(tm.parameters())
        _copy_weights(torch, tparams, params)
        tx, ty = torch.tensor(xa, device=tdev), torch.tensor(ya, device=tdev)

        def theirs():
            for p in tparams:
                p.grad = None
            scores = tm(tx).reshape(-1)
            loss = torch.relu(1 - ty * scores).mean() + 1e-4 * sum((p * p).sum() for p in tparams)
            loss.backward()
            with torch.no_grad():
                for p in tparams:
                    p -= 0.1 * p.grad
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step", "what": "MLP 2-16-16-1 on 100 moons points, max-margin loss, SGD"}


# --------------------------------------------------------------------------- matmul
def matmul_1024(device, scale):
    """A 1024x1024 @ 1024x1024 float32 matmul, forward + backward (three matmuls)."""
    n = {"tiny": 64, "quick": 512}.get(scale, 1024)
    rng = _rng(4)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    ta, tb = ag.tensor(a, device=device, requires_grad=True), ag.tensor(b, device=device, requires_grad=True)

    def ours():
        ta.grad = tb.grad = None
        (ta @ tb).sum().backward()

    xp = _xp(device)
    xa, xb = xp.asarray(a), xp.asarray(b)

    def by_hand():
        c = xa @ xb
        g = xp.ones_like(c)
        return g @ xb.T, xa.T @ g

    steps = {"ours": ours, "numpy": by_hand}
    torch, tdev = _torch(device)
    if torch is not None:
        qa = torch.tensor(a, device=tdev, requires_grad=True)
        qb = torch.tensor(b, device=tdev, requires_grad=True)

        def theirs():
            qa.grad = qb.grad = None
            (qa @ qb).sum().backward()
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step", "what": f"{n}x{n} matmul forward + backward", "flops": 3 * 2 * n ** 3}


# --------------------------------------------------------------------------- deep chain
def deep_chain(device, scale):
    """A chain of 10^5 ops (x * 1.0001) on one element, backward: engine cost and peak memory."""
    n = {"tiny": 1000, "quick": 20_000}.get(scale, 100_000)
    x = ag.tensor([0.5], device=device, requires_grad=True)

    def ours():
        x.grad = None
        y = x
        for _ in range(n):
            y = y * 1.0001
        y.sum().backward()

    steps = {"ours": ours}
    torch, tdev = _torch(device)
    if torch is not None:
        tx = torch.tensor([0.5], device=tdev, requires_grad=True)

        def theirs():
            tx.grad = None
            y = tx
            for _ in range(n):
                y = y * 1.0001
            y.sum().backward()
        steps["torch"] = theirs
    return steps, {"per": n, "unit": "us/op", "what": f"chain of {n:,} ops, forward + backward", "ops": n}


def peak_memory(step):
    """Peak host memory (bytes, tracemalloc) of one call of ``step``, above what was live before."""
    import tracemalloc
    tracemalloc.start()
    base, _ = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    step()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak - base


WORKLOADS = {
    "op_overhead": op_overhead,
    "mlp_step": mlp_step,
    "mlp_adam_step": mlp_adam_step,
    "mlp_sub_step": mlp_sub_step,
    "cnn_step": cnn_step,
    "elementwise_4m": elementwise_4m,
    "moons_step": moons_step,
    "matmul_1024": matmul_1024,
    "deep_chain": deep_chain,
}

# workloads kept in their own modules register here (imported last: they take helpers from this one)
from benchmarks.transformer_bench import WORKLOADS as _TRANSFORMER  # noqa: E402

WORKLOADS.update(_TRANSFORMER)

from benchmarks.vmap_bench import per_example_grads  # noqa: E402  (registered here, defined there)
WORKLOADS["per_example_grads"] = per_example_grads

# the workloads that also run compiled (ag.compile of the "ours" step): a "compiled" column
COMPILED = ("op_overhead", "elementwise_4m", "moons_step", "mlp_step", "cnn_step")

from benchmarks.rnn_bench import WORKLOADS as _RNN  # noqa: E402

WORKLOADS.update(_RNN)

from benchmarks.unet_bench import WORKLOADS as _UNET  # noqa: E402

WORKLOADS.update(_UNET)
