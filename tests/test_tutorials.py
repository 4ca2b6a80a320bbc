"""The worked examples of the tutorials the project grew out of (shared/seeds), reproduced."""
import math

import numpy as np

import autograd_gpu as ag


def test_micrograd_scalar_example(device):
    x = ag.tensor(-4.0, device=device, requires_grad=True)
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    assert y.item() == -20.0
    assert x.grad.item() == 46.0


def test_x1_to_x6_graph_gradients(device):
    x1 = ag.tensor(3.0, device=device, requires_grad=True)
    x2 = ag.tensor(4.0, device=device, requires_grad=True)
    x3 = x1 * x2
    x4 = ag.tensor(5.0, device=device, requires_grad=True)
    x5 = x4 + x3
    x6 = ag.tensor(2.0, device=device, requires_grad=True)
    loss = x5 * x6
    for t in (x3, x5, loss):
        t.retain_grad()
    loss.backward()
    assert loss.item() == 34.0
    grads = [t.grad.item() for t in (x1, x2, x3, x4, x5, x6, loss)]
    assert grads == [8.0, 6.0, 2.0, 2.0, 2.0, 17.0, 1.0]


def test_sum_rule_gives_one_to_each_addend(device):
    # the post's snippet asserts 2 for x_1; the correct value is 1
    x1 = ag.tensor(1.0, device=device, requires_grad=True)
    x2 = ag.tensor(2.0, device=device, requires_grad=True)
    (x1 + x2).backward()
    assert (x1.grad.item(), x2.grad.item()) == (1.0, 1.0)


class ReLU(ag.Function):
    """A custom op written the tutorial way: static forward/backward, save_for_backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return ctx.wrap(ctx.xp.maximum(x.data, 0))

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * (x > 0)


class MulAdd(ag.Function):
    """Two inputs, a non-tensor argument kept on ctx, and two outputs."""

    @staticmethod
    def forward(ctx, a, b, scale):
        ctx.save_for_backward(a, b)
        ctx.scale = scale
        return ctx.wrap(a.data * b.data * scale), ctx.wrap(a.data + b.data)

    @staticmethod
    def backward(ctx, g_prod, g_sum):
        a, b = ctx.saved_tensors
        ga = g_prod * b * ctx.scale + g_sum if ctx.needs_input_grad[0] else None
        gb = g_prod * a * ctx.scale + g_sum if ctx.needs_input_grad[1] else None
        return ga, gb, None


def test_custom_function_tutorial_style(device):
    x = ag.tensor([-1.0, 2.0, -3.0, 4.0], device=device, requires_grad=True)
    y = ReLU.apply(x)
    assert y.grad_fn is not None and type(y.grad_fn).__name__ == "ReLU"
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 0.0, 1.0]
    assert ag.autograd.gradcheck(ReLU.apply, [ag.tensor([-1.5, 0.5, 2.0], device=device, requires_grad=True)])


def test_custom_function_with_two_outputs_and_ctx_state(device):
    a = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = ag.tensor([3.0, 4.0], device=device)
    prod, total = MulAdd.apply(a, b, 2.0)
    (prod.sum() + total.sum() * 3).backward()
    assert a.grad.tolist() == [3 * 2 + 3, 4 * 2 + 3]
    assert b.grad is None
    assert ag.autograd.gradcheck(lambda a, b: MulAdd.apply(a, b, 0.5), [a, ag.tensor([3.0, 4.0], device=device, requires_grad=True)])


def test_custom_function_unused_output_gets_zero_gradient(device):
    a = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    b = ag.tensor([3.0, 4.0], device=device, requires_grad=True)
    prod, _ = MulAdd.apply(a, b, 1.0)
    prod.sum().backward()
    assert a.grad.tolist() == [3.0, 4.0]


def autograd_chainer(forward_fn, backward_fn):
    """The closure pattern of the bottom-up tutorial: couple a forward and a backward function on
    arrays into a differentiable primitive (here on top of ag.Function)."""
    class Primitive(ag.Function):
        @staticmethod
        def forward(ctx, x):
            y = ctx.wrap(forward_fn(ctx.xp, x.data))
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return backward_fn(x, y, grad)

    return Primitive.apply


def test_user_primitive_from_forward_and_backward_functions(device):
    square = autograd_chainer(lambda xp, a: a * a, lambda x, y, g: 2 * x * g)
    sine = autograd_chainer(lambda xp, a: xp.sin(a), lambda x, y, g: ag.cos(x) * g)
    x = ag.tensor(0.7, device=device, requires_grad=True)
    y = sine(square(x))             # sin(x^2): chained primitives
    y.backward()
    assert math.isclose(x.grad.item(), math.cos(0.49) * 1.4, rel_tol=1e-6)
    x64 = ag.tensor([0.3, -1.2], dtype=ag.float64, device=device, requires_grad=True)
    assert ag.autograd.gradcheck(lambda t: sine(square(t)), [x64])
    assert ag.autograd.gradgradcheck(lambda t: sine(square(t)), [x64])


def test_fit_sin_x4_model_reduces_loss(device):
    # the slides' model: learn y = sin(x**4) * 4 ... here with a small polynomial-feature model
    ag.manual_seed(0)
    x = ag.linspace(-1.2, 1.2, 64, device=device).reshape(-1, 1)
    target = ag.sin(x ** 4) * 4
    w1 = (ag.randn(1, 32, device=device) * 1.0).requires_grad_()
    b1 = ag.zeros(32, device=device, requires_grad=True)
    w2 = (ag.randn(32, 1, device=device) * 0.2).requires_grad_()
    losses = []
    for _ in range(300):
        pred = ag.tanh(x @ w1 + b1) @ w2
        loss = ((pred - target) ** 2).mean()
        loss.backward()
        with ag.no_grad():
            for p in (w1, b1, w2):
                p -= 0.05 * p.grad
                p.grad = None
        losses.append(loss.item())
    assert losses[-1] < 0.2 * losses[0]
    assert np.isfinite(losses).all()
