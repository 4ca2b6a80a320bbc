"""ag.compile and NumPy/CuPy functions that write into their first argument (copyto, put, put_along_axis,
place, putmask, fill_diagonal): the tracer records them as writes, so a replay never reuses a buffer that
an earlier call wrote (before, a backward that put its gradient into fresh zeros with put_along_axis replayed
stale gradients from the third call on)."""
import numpy as np

import autograd_gpu as ag
from autograd_gpu.autograd.function import Function


class _TakeMax(Function):
    """max along the last axis; its backward puts g at the argmax with put_along_axis into fresh zeros."""

    @staticmethod
    def forward(ctx, x):
        xp = ctx.xp
        idx = xp.argmax(x.data, axis=-1)[..., None]
        ctx.idx, ctx.shape = idx, x.shape
        return ctx.wrap(xp.take_along_axis(x.data, idx, axis=-1)[..., 0])

    @staticmethod
    def backward(ctx, g):
        xp = ctx.xp
        out = xp.zeros(ctx.shape, dtype=g.data.dtype)
        xp.put_along_axis(out, ctx.idx, g.data[..., None], axis=-1)
        return ctx.wrap(out)


def test_a_put_along_axis_write_is_replayed_fresh_every_call():
    w = ag.tensor(np.zeros((3, 5)), requires_grad=True)

    def step(x):
        w.grad = None
        (_TakeMax.apply(x + w) * 3.0).sum().backward()
        return w.grad

    cstep = ag.compile(step)
    rng = np.random.default_rng(0)
    for _ in range(6):                    # the argmax moves between calls
        x = ag.tensor(rng.standard_normal((3, 5)))
        np.testing.assert_array_equal(cstep(x).numpy(), step(x).numpy())
