"""nn.functional's linear family: ``linear`` (x @ w.T + b as one fused Function and one BLAS call) and the
private ``_linear_relu`` (relu(linear(...)) as one node, for Sequential and the transformer layers)."""
from ...autograd.function import Function
from ...tensor import Tensor
from .._autocast import cast_low
from ..._autocast_state import state as _amp_state
from ..elementwise import ReluBackward, relu as _relu
from ..linalg import MatMul, matmul
from ..reduction import Sum
from ..shape import broadcast_to
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
        return LinearBackward.of(ctx, grad, ctx.needs_input_grad)


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


def _linear_backward_rule(cls, args, kwargs):
    """vmap: the gradients as the products and the column sum (their rules batch them)."""
    grad, x, w = args[:3]
    if cls is LinearReLUBackward:
        grad = ReluBackward.apply(grad, args[3])
    return _linear_grads(args[-1], grad, x, w)


def _linear_grads(needs, grad, x, w):
    """The gradients of x @ w.T + b as recorded ops: two matrix products and a column sum (under vmap)."""
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


class LinearBackward(Function):
    """Linear's three gradients (gx = g @ w, gw = g^T @ x, gb = the column sum of g; ``needs``: which are
    wanted, the others None) as one op: two BLAS calls and the bias's column sum (BLAS on the CPU, one
    reduction on CUDA), leading dims folded into rows. Differentiable again (create_graph): its own backward
    is two products and a linear per gradient's gradient (_linear_grad_grads)."""
    batch_rule = _linear_backward_rule
    materialize_grads = False     # a gradient not wanted is None (and so is its gradient's gradient)

    @staticmethod
    def arrays(ctx, g, x, w, needs):
        need_x, need_w, need_b = needs
        backend = ctx.device.backend
        matmul = backend.matmul
        g = g if g.ndim == 2 else g.reshape(-1, g.shape[-1])
        gx = (matmul(g, w) if x.ndim == 2 else matmul(g, w).reshape(x.shape)) if need_x else None
        gw = matmul(g.T, x if x.ndim == 2 else x.reshape(-1, x.shape[-1])) if need_w else None
        gb = backend.bias_grad(g) if need_b else None     # BLAS on the CPU, one reduction on CUDA
        return gx, gw, gb

    @staticmethod
    def forward(ctx, grad, x, w, needs):
        ctx.save_for_backward(grad, x, w)
        return _wrapped(ctx, LinearBackward.arrays(ctx, grad.data, x.data, w.data, needs))

    @staticmethod
    def backward(ctx, ggx, ggw, ggb):
        grad, x, w = ctx.saved_tensors
        return _linear_grad_grads(ctx.needs_input_grad[:3], ggx, ggw, ggb, grad, x, w) + (None,)


def _wrapped(ctx, arrays):
    return tuple(None if a is None else ctx.wrap(a) for a in arrays)


def _linear_grad_grads(needs, ggx, ggw, ggb, grad, x, w):
    """The gradients of (gx, gw, gb) = (g @ w, g^T @ x, sum(g)) with respect to grad, x and w, given theirs
    (None: zero), as recorded ops (g and x with their leading dims folded into rows)."""
    need_g, need_x, need_w = needs
    g = grad if grad.ndim == 2 else grad.reshape(-1, grad.shape[-1])
    x2 = x if x.ndim == 2 else x.reshape(-1, x.shape[-1])
    if ggx is not None and ggx.ndim != 2:
        ggx = ggx.reshape(-1, ggx.shape[-1])
    d_grad = d_x = d_w = None
    if need_g and (ggx is not None or ggw is not None or ggb is not None):
        if ggw is not None:
            d_grad = Linear.apply(x2, ggw, ggb)                       # x @ ggw^T + ggb
            if ggx is not None:
                d_grad = d_grad + Linear.apply(ggx, w, None)          # + ggx @ w^T
        elif ggx is not None:
            d_grad = Linear.apply(ggx, w, ggb)
        else:
            d_grad = broadcast_to(ggb, g.shape)
        d_grad = d_grad if d_grad.shape == grad.shape else d_grad.reshape(grad.shape)
    if need_x and ggw is not None:
        d_x = MatMul.apply(g, ggw)
        d_x = d_x if x.ndim == 2 else d_x.reshape(x.shape)
    if need_w and ggx is not None:
        d_w = MatMul.apply(g.T, ggx)
    return d_grad, d_x, d_w


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
        return LinearReLUBackward.of(ctx, grad, ctx.needs_input_grad)


class LinearReLUBackward(LinearBackward):
    """LinearReLU's three gradients: Linear's of the gradient masked by the saved output (relu_backward: one
    kernel), as one op; its own backward is Linear's backward's, masked again (the mask has no gradient)."""
    batch_rule = _linear_backward_rule

    @staticmethod
    def arrays(ctx, g, x, w, y, needs):
        return LinearBackward.arrays(ctx, ctx.device.backend.relu_backward(g, y), x, w, needs)

    @staticmethod
    def forward(ctx, grad, x, w, y, needs):
        ctx.save_for_backward(grad, x, w, y)
        return _wrapped(ctx, LinearReLUBackward.arrays(ctx, grad.data, x.data, w.data, y.data, needs))

    @staticmethod
    def backward(ctx, ggx, ggw, ggb):
        grad, x, w, y = ctx.saved_tensors
        d_masked, d_x, d_w = _linear_grad_grads(ctx.needs_input_grad[:3], ggx, ggw, ggb,
                                                ReluBackward.apply(grad, y), x, w)
        return (None if d_masked is None else ReluBackward.apply(d_masked, y)), d_x, d_w, None, None


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
