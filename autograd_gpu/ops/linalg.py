"""Linear algebra: the matmul primitive; dot, outer, tensordot, einsum composed or built on it."""
from ..autograd.function import Function
from .shape import sum_to

__all__ = ["matmul"]


class MatMul(Function):                   # the wrapper reshapes 1-D operands to 2-D first
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.xp.matmul(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = sum_to(grad @ b.swapaxes(-1, -2), a.shape) if ctx.needs_input_grad[0] else None
        gb = sum_to(a.swapaxes(-1, -2) @ grad, b.shape) if ctx.needs_input_grad[1] else None
        return ga, gb


def matmul(a, b):
    """Matrix product with NumPy's rules: batched and broadcasting; 1-D operands are vectors."""
    return MatMul.apply(a, b)
