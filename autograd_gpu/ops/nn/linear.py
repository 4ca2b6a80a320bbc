"""nn.functional's linear family: ``linear`` (x @ w.T + b as one fused Function and one BLAS call) and the
private ``_linear_relu`` (relu(linear(...)) as one node, for Sequential and the transformer layers)."""
from ...autograd.function import Function
from ...tensor import Tensor
from .._autocast import cast_low
from ..._autocast_state import state as _amp_state
from ..elementwise import ReluBackward, relu as _relu
from ..linalg import MatMul, matmul
from ..reduction import Sum
from ..batching import BatchedTensor, _wrap
from ..registry import register, OpTest
from ._args import _float_tensor, _same_dtype


def _linear_rule(cls, args, kwargs):
    """vmap: a batched input with shared parameters stays one product (the batch dims are more rows);
    per-example weights or biases take a batched matmul and add."""
    x, w, b = args
    if w.__class__ is BatchedTensor or b.__class__ is BatchedTensor:
        y = matmul(x, w.mT)
        return y if b is None else y + b
    return _wrap(cls.apply(x._bbase, w, b), x._blevels)


def _linear_relu_rule(cls, args, kwargs):
    """vmap: as Linear's rule, with the relu after the per-example product."""
    x, w, b = args
    if w.__class__ is BatchedTensor or b.__class__ is BatchedTensor:
        y = matmul(x, w.mT)
        return _relu(y if b is None else y + b)
    return _wrap(cls.apply(x._bbase, w, b), x._blevels)


class Linear(Function):
    # fused x @ w.T + b (PyTorch's addmm): one node and one BLAS call, leading dims folded into rows
    batch_rule = _linear_rule

    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return ctx.wrap(_addmm(ctx, x.data, w.data, b))

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        if ctx._direct():
            return _linear_grads_direct(ctx, grad.data, x.data, w.data)
        return _linear_grads(ctx.needs_input_grad, grad, x, w)


def _addmm(ctx, a, w, b, relu=False):
    """The array a @ w.T + b (relu'd in place when asked), with a's leading dims folded into the rows of one
    BLAS call. The bias is added after the product, in place (one kernel, fused with the relu when there is
    one): CuPy's matmul has no beta, and cuBLAS's beta=1 needs the bias broadcast into the output first, a
    copy costing the launch it saves."""
    backend = ctx.device.backend
    y = backend.matmul(a.reshape(-1, a.shape[-1]) if a.ndim != 2 else a, w.T)
    if relu:
        if b is not None:
            y = backend.bias_relu(y, b.data)
        else:
            ctx.xp.maximum(y, 0, out=y)
    elif b is not None:
        y += b.data
    return y if a.ndim == 2 else y.reshape(a.shape[:-1] + (y.shape[-1],))


def _linear_grads_direct(ctx, g, x, w):
    """_linear_grads on arrays, when nothing is recorded (Function._direct): the same products, without
    the Function.apply machinery of the transpose, the two products and the sum."""
    need_x, need_w, need_b = ctx.needs_input_grad
    backend = ctx.device.backend
    matmul = backend.matmul
    g = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
    gx = ctx.wrap(matmul(g, w) if x.ndim == 2 else matmul(g, w).reshape(x.shape)) if need_x else None
    gw = ctx.wrap(matmul(g.T, x if x.ndim == 2 else x.reshape(-1, x.shape[-1]))) if need_w else None
    gb = ctx.wrap(backend.bias_grad(g)) if need_b else None     # BLAS on the CPU, one reduction on CUDA
    return gx, gw, gb


def _linear_grads(needs, grad, x, w):
    """The gradients of x @ w.T + b: two matrix products and a column sum."""
    need_x, need_w, need_b = needs
    g = grad if grad.ndim == 2 else grad.reshape(-1, grad.shape[-1])
    gx = gw = gb = None
    if need_x:
        gx = MatMul.apply(g, w)
        gx = gx if x.ndim == 2 else gx.reshape(x.shape)
    if need_w:
        gw = MatMul.apply(g.T, x if x.ndim == 2 else x.reshape(-1, x.shape[-1]))
    if need_b:
        gb = Sum.apply(g, (0,), False)
    return gx, gw, gb


class LinearReLU(Function):
    # relu(x @ w.T + b) with the bias add and relu one in-place pass over the fresh product (one kernel on
    # CUDA): one large array and one pass fewer than Linear then Relu (a transformer's feed-forward block);
    # the backward masks the gradient by the saved output, which is > 0 exactly where the product was (one
    # kernel), and the bias's gradient is one column sum of the masked gradient (BLAS on the CPU, one
    # reduction on CUDA: the masked gradient is needed whole by the two products anyway)
    batch_rule = _linear_relu_rule

    @staticmethod
    def forward(ctx, x, w, b):
        y = ctx.wrap(_addmm(ctx, x.data, w.data, b, relu=True))     # the bias add and relu: one kernel
        ctx.save_for_backward(x, w, y)
        return y

    @staticmethod
    def backward(ctx, grad):
        if ctx._direct():
            x, w, y = ctx._saved_arrays()
            return _linear_grads_direct(ctx, ctx.device.backend.relu_backward(grad.data, y), x, w)
        x, w, y = ctx.saved_tensors
        return _linear_grads(ctx.needs_input_grad, ReluBackward.apply(grad, y), x, w)


def _linear_relu(input, weight, bias=None):
    """relu(linear(input, weight, bias)) as one node (not public: Sequential and the transformer layers use it)."""
    if _plain_linear(input, weight, bias):
        return LinearReLU.apply(input, weight, bias)
    return _relu(linear(input, weight, bias))        # anything unusual: the general path checks and casts


def _plain_linear(input, weight, bias):
    """True in linear's common case, which needs none of its checks: float tensors of one dtype whose shapes
    fit, autocast off (the checks cost a small layer as much as its product)."""
    if _amp_state.active or not isinstance(input, Tensor) or not isinstance(weight, Tensor):
        return False
    xd, wd = input.data, weight.data
    dt = wd.dtype
    return wd.ndim == 2 and xd.ndim > 0 and xd.shape[-1] == wd.shape[1] and xd.dtype is dt and dt.kind == "f" and (
        bias is None or isinstance(bias, Tensor) and bias.data.dtype is dt and bias.data.shape == wd.shape[:1])


@register(namespace="nn.functional", tests=(
    OpTest((((4, 3), (5, 3), (5,)), ((2, 3, 3), (2, 3), (2,)), ((3,), (2, 3), (2,)), ((0, 3), (2, 3), (2,))),
           ref=lambda np, x, w, b: x @ w.T + b, name="linear"),
    OpTest((((1, 4), (3, 4)),), ref=lambda np, x, w: x @ w.T, op=lambda x, w: linear(x, w), name="linear_nobias")))
def linear(input, weight, bias=None):
    """x @ weight.T + bias for x of shape (*, in_features), weight (out_features, in_features)."""
    if _plain_linear(input, weight, bias):
        return Linear.apply(input, weight, bias)
    x = _float_tensor(input, "linear")
    w = _float_tensor(weight, "linear", "weight", like=x)
    b = None if bias is None else _float_tensor(bias, "linear", "bias", like=x)
    if w.ndim != 2:
        raise ValueError(f"linear: expected a 2-D weight (out_features, in_features), got shape {w.shape}")
    if x.ndim == 0 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"linear: input of shape {x.shape} has {x.shape[-1] if x.ndim else 0} features but "
                         f"the weight of shape {w.shape} expects {w.shape[1]}")
    if b is not None and b.shape != (w.shape[0],):
        raise ValueError(f"linear: expected a bias of shape ({w.shape[0]},), got {b.shape}")
    x, w, b = cast_low(x, w, b)
    if x.dtype != w.dtype or (b is not None and b.dtype != w.dtype):
        x, w, b = _same_dtype("linear", x, w, b)
    return Linear.apply(x, w, b)
