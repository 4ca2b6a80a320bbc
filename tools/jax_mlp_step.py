"""JAX's jit against PyTorch eager on the MLP step of `python -m benchmarks --only mlp_step` (784-512-512-10,
ReLU, cross-entropy, batch 128, SGD lr 0.01), in one process, three rounds of 300 steps, medians in ms:

    pip install "jax[cpu]" torch && python tools/jax_mlp_step.py

The issue that set ag.compile's MLP target (<= 0.8x PyTorch) quoted JAX at 0.77x; this prints what JAX
does on the machine at hand, to compare our compiled step with (JAX is not a dependency of the project)."""
import time

import numpy as np
import jax
import jax.numpy as jnp
import torch

SIZES, N, LR = [784, 512, 512, 10], 128, 0.01


def _median_ms(f, n=300):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2] * 1e3


def main():
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((N, SIZES[0])).astype(np.float32)
    ya = rng.integers(0, SIZES[-1], N)
    params = [(jnp.asarray(rng.standard_normal((o, i)).astype(np.float32) * 0.05), jnp.zeros(o, jnp.float32))
              for i, o in zip(SIZES[:-1], SIZES[1:])]

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w.T + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        return -jnp.mean(jax.nn.log_softmax(h)[jnp.arange(N), y])

    @jax.jit
    def step(params, x, y):
        grads = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)

    x, y = jnp.asarray(xa), jnp.asarray(ya)
    state = {"params": params}

    def jax_step():
        state["params"] = step(state["params"], x, y)
        jax.block_until_ready(state["params"])

    tn = torch.nn
    model = tn.Sequential(tn.Linear(784, 512), tn.ReLU(), tn.Linear(512, 512), tn.ReLU(), tn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    tx, ty = torch.tensor(xa), torch.tensor(ya)

    def torch_step():
        opt.zero_grad()
        tn.functional.cross_entropy(model(tx), ty).backward()
        opt.step()

    for _ in range(20):
        jax_step()
        torch_step()
    print(f"JAX {jax.__version__}, PyTorch {torch.__version__}")
    for _ in range(3):
        j, t = _median_ms(jax_step), _median_ms(torch_step)
        print(f"jax jit {j:.3f} ms, torch eager {t:.3f} ms, jax / torch {j / t:.2f}")


if __name__ == "__main__":
    main()
