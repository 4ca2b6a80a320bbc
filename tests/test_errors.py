"""Bad calls get clear errors: one table of (call, exception type, message pattern).

Every public entry point given a wrong shape, dtype, device, axis or a non-tensor must raise the
right type (TypeError: wrong type, ValueError/IndexError: bad value, RuntimeError: state or device)
with a message that names the op, what it expected and what it got; never a bare NumPy message or
an AttributeError from inside the library. A known gap may be listed with fix="where to fix it":
it is then a strict xfail, so the fix shows up as XPASS and the mark must go.
"""
import numpy as np
import pytest

import autograd_gpu as ag


def bad(id, call, exc, match, fix=None):
    marks = [pytest.mark.xfail(strict=True, reason=fix)] if fix else []
    return pytest.param(call, exc, match, id=id, marks=marks)


def m23():
    return ag.ones(2, 3)


def leaf(*shape):
    return ag.ones(*shape, requires_grad=True)


# --------------------------------------------------------------------------- calls with a story
def backward_of_vector():
    (leaf(3) * 2).backward()


def backward_without_grad():
    ag.ones(3).sum().backward()


def backward_with_wrong_grad_shape():
    (leaf(3) * 2).backward(ag.ones(4))


def backward_twice():
    y = (leaf(3) * leaf(3)).sum()
    y.backward()
    y.backward()


def backward_after_inplace_edit_of_saved():
    b = leaf(2) * 1
    c = b * b              # saves b
    b.add_(1)
    c.sum().backward()


def grad_with_unused_input():
    a, b = leaf(2), leaf(2)
    ag.autograd.grad((a * 2).sum(), [a, b])


def grad_of_input_without_grad():
    ag.autograd.grad((leaf(2) * 2).sum(), ag.ones(2))


def grad_with_non_tensor_input():
    a = leaf(2)
    ag.autograd.grad((a * 2).sum(), [a, 3])


def grad_with_int_as_inputs():
    ag.autograd.grad((leaf(2) * 2).sum(), 5)


def backward_count_mismatch():
    ag.autograd.backward([(leaf(2) * 2).sum()], [ag.tensor(1.0), ag.tensor(1.0)])


def inplace_on_leaf(op):
    def call():
        x = leaf(2)
        op(x)
    return call


def iadd(x):
    x += 1


def setitem_leaf(x):
    x[0] = 5.0


def setitem_wrong_shape():
    x = ag.ones(2, 3)
    x[0] = ag.ones(5)


class TwiceGrads(ag.Function):
    @staticmethod
    def forward(ctx, a):
        return ctx.wrap(a.data * 2)

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


class ScalarGrad(ag.Function):
    @staticmethod
    def forward(ctx, a):
        return ctx.wrap(a.data * 2)

    @staticmethod
    def backward(ctx, grad):
        return grad.sum()


class ReturnsArray(ag.Function):
    @staticmethod
    def forward(ctx, a):
        return a.data * 2


class SavesNumber(ag.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(3)
        return ctx.wrap(a.data * 2)


class NoBackward(ag.Function):
    @staticmethod
    def forward(ctx, a):
        return ctx.wrap(a.data * 2)


def backward_through(fn):
    def call():
        fn.apply(leaf(2)).sum().backward()
    return call


NOT_A_TENSOR = "expected a Tensor or a number, got str"
AS_TENSOR_FIX = ("ops/{file}: {fn} reads .{attr} of its argument before checking it; start it with "
                 "x = as_tensor(x, '{fn}') as broadcast_to does")


def as_tensor_gap(fn, file, attr):
    return AS_TENSOR_FIX.format(fn=fn, file=file, attr=attr)


CASES = [
    # ----------------------------------------------------------------- tensor(), factories, dtypes
    bad("tensor-str", lambda: ag.tensor("abc"), TypeError, r"tensor: expected numbers.*got str"),
    bad("tensor-dict", lambda: ag.tensor({"a": 1}), TypeError, r"tensor: expected numbers.*got dict"),
    bad("tensor-none", lambda: ag.tensor(None), TypeError, r"tensor: expected numbers.*got NoneType"),
    bad("tensor-ragged", lambda: ag.tensor([[1.0, 2.0], [3.0]]), TypeError, r"tensor: cannot make a tensor from list"),
    bad("tensor-numpy-strings", lambda: ag.tensor(np.array(["a", "b"])), TypeError,
        r"tensor: expected numbers.*got ndarray.*<U1"),
    bad("tensor-int-requires-grad", lambda: ag.tensor([1, 2], requires_grad=True), RuntimeError,
        r"only floating-point tensors can require gradients, got int64"),
    bad("Tensor-int-requires-grad", lambda: ag.Tensor([1, 2], requires_grad=True), RuntimeError,
        r"only floating-point tensors can require gradients, got int64"),
    bad("tensor-bad-dtype", lambda: ag.tensor(1.0, dtype="float99"), TypeError,
        r"expected a dtype such as ag.float32 or 'float64', got 'float99'"),
    bad("zeros-int-requires-grad", lambda: ag.zeros(2, dtype=ag.int64, requires_grad=True), RuntimeError,
        r"only floating-point tensors can require gradients, got int64"),
    bad("zeros-negative", lambda: ag.zeros(-1, 2), ValueError, r"zeros: negative dimension -1 in shape \(-1, 2\)"),
    bad("zeros-float-size", lambda: ag.zeros(2.5), TypeError, r"zeros: expected a shape of ints, got \(2\.5,\)"),
    bad("ones-str-size", lambda: ag.ones("3"), TypeError, r"ones: expected a shape of ints, got \('3',\)"),
    bad("rand-negative", lambda: ag.rand(-1), ValueError, r"rand: negative dimension -1"),
    bad("eye-negative", lambda: ag.eye(-1), ValueError, r"eye: negative dimension -1"),
    bad("randint-low-ge-high", lambda: ag.randint(5, 5, (2,)), ValueError, r"randint: expected low < high, got low=5, high=5"),
    bad("arange-step-zero", lambda: ag.arange(0, 10, 0), ValueError, r"arange: step must be non-zero"),
    bad("linspace-negative", lambda: ag.linspace(0, 1, -1), ValueError, r"linspace: steps must be a non-negative int, got -1"),
    bad("full-str-value", lambda: ag.full((2,), "a"), TypeError, r"full: expected a number.*got str"),
    bad("full_like-str-value", lambda: ag.full_like(ag.ones(2), "a"), TypeError, r"full(_like)?: expected a number.*got str"),
    bad("arange-str", lambda: ag.arange("a"), TypeError, r"arange: expected numbers.*got str"),
    bad("randn-int-dtype", lambda: ag.randn(2, dtype=ag.int64), TypeError, r"randn: expected a floating dtype, got int64"),
    bad("manual_seed-str", lambda: ag.manual_seed("a"), TypeError, r"manual_seed: expected a non-negative int, got 'a'"),
    bad("zeros_like-str", lambda: ag.zeros_like("a"), TypeError, r"zeros_like: expected a Tensor, got str"),
    bad("from_dlpack-str", lambda: ag.from_dlpack("a"), TypeError, r"from_dlpack: expected an object with __dlpack__, got str"),
    bad("set_default_dtype-int", lambda: ag.set_default_dtype(ag.int32), TypeError,
        r"set_default_dtype: expected a floating dtype, got int32"),
    bad("set_default_dtype-str", lambda: ag.set_default_dtype("foo"), TypeError, r"expected a dtype .*got 'foo'"),
    # ----------------------------------------------------------------- devices
    bad("device-tpu", lambda: ag.tensor(1.0, device="tpu"), ValueError, r"device: expected 'cpu', 'cuda' or 'cuda:N', got 'tpu'"),
    bad("device-cuda-abc", lambda: ag.tensor(1.0, device="cuda:abc"), ValueError,
        r"device: expected a non-negative GPU index after 'cuda:', got 'cuda:abc'"),
    bad("device-cpu-index", lambda: ag.tensor(1.0, device="cpu:1"), ValueError, r"device: the CPU has no index, got 'cpu:1'"),
    bad("device-int", lambda: ag.tensor(1.0, device=0), TypeError, r"device: expected a string such as 'cpu'.*got int"),
    bad("device-gpu-word", lambda: ag.device("gpu"), ValueError, r"device: expected 'cpu', 'cuda' or 'cuda:N', got 'gpu'"),
    bad("set_default_device-tpu", lambda: ag.set_default_device("tpu"), ValueError, r"got 'tpu'"),
    bad("to-bad-device", lambda: ag.ones(3).to(device="tpu"), ValueError, r"device: expected 'cpu', 'cuda' or 'cuda:N', got 'tpu'"),
    # ----------------------------------------------------------------- conversions and state
    bad("to-bad-dtype", lambda: ag.ones(3).to("float99"), TypeError, r"expected a dtype .*got 'float99'"),
    bad("to-int-as-dtype", lambda: ag.ones(3).to(5), TypeError, r"expected a dtype .*got 5"),
    bad("item-multi", lambda: ag.ones(3).item(), ValueError, r"item: only one-element tensors.*got shape \(3,\)"),
    bad("float-multi", lambda: float(ag.ones(3)), ValueError, r"only one-element tensors.*got shape \(3,\)"),
    bad("bool-multi", lambda: bool(ag.ones(3)), RuntimeError, r"truth value of a tensor with 3 elements is ambiguous"),
    bad("len-0d", lambda: len(ag.tensor(1.0)), TypeError, r"len\(\) of a 0-d tensor"),
    bad("float-tensor-as-index", lambda: [1, 2][ag.tensor(1.0)], TypeError,
        r"only integer tensors of one element can be used as an index, got float32"),
    bad("size-dim", lambda: m23().size(5), IndexError, r"size: dim 5 is out of range for a tensor with 2 dimension"),
    bad("requires_grad_-int", lambda: ag.ones(3, dtype=ag.int64).requires_grad_(), RuntimeError,
        r"requires_grad_: only floating-point tensors can require gradients, got int64"),
    bad("requires_grad_-false-nonleaf", lambda: (leaf(3) * 2).requires_grad_(False), RuntimeError,
        r"requires_grad_\(False\) on a non-leaf tensor; use \.detach\(\)"),
    bad("retain_grad-no-grad", lambda: ag.ones(2).retain_grad(), RuntimeError, r"retain_grad: the tensor does not require grad"),
    bad("register_hook-int", lambda: leaf(2).register_hook(5), TypeError, r"register_hook: expected a callable, got int"),
    bad("register_hook-no-grad", lambda: ag.ones(2).register_hook(lambda g: g), RuntimeError,
        r"register_hook: cannot register a hook on a tensor that does not require grad"),
    bad("set_grad_enabled-str", lambda: ag.set_grad_enabled("yes"), TypeError, r"set_grad_enabled: expected a bool, got str"),
    # ----------------------------------------------------------------- shape ops
    bad("reshape-size", lambda: ag.ones(12).reshape(5, 3), ValueError,
        r"reshape: cannot reshape a tensor of 12 elements into shape \(5, 3\)"),
    bad("reshape-two-minus-one", lambda: ag.ones(12).reshape(-1, -1), ValueError, r"reshape: only one dimension can be -1"),
    bad("reshape-str-size", lambda: ag.ones(12).reshape("a"), TypeError, r"reshape: expected a shape of ints"),
    bad("view-size", lambda: ag.ones(12).view(7), ValueError, r"cannot reshape a tensor of 12 elements into shape \(7,\)"),
    bad("permute-repeat", lambda: m23().permute(0, 0), ValueError, r"permute: dims \(0, 0\) repeat a dimension"),
    bad("permute-count", lambda: m23().permute(0), ValueError, r"permute: expected 2 dims for a tensor of shape \(2, 3\), got \(0,\)"),
    bad("permute-range", lambda: m23().permute(0, 2), IndexError, r"permute: dim 2 is out of range.*2 dimension"),
    bad("swapaxes-range", lambda: m23().swapaxes(0, 3), IndexError, r"swapaxes: dim 3 is out of range"),
    bad("transpose-range", lambda: ag.transpose(m23(), 0, 5), IndexError, r"transpose: dim 5 is out of range"),
    bad("squeeze-non-1", lambda: m23().squeeze(0), ValueError, r"squeeze: dim 0 has size 2, not 1"),
    bad("squeeze-range", lambda: m23().squeeze(4), IndexError, r"squeeze: dim 4 is out of range"),
    bad("unsqueeze-range", lambda: m23().unsqueeze(5), IndexError, r"unsqueeze: dim 5 is out of range"),
    bad("flatten-order", lambda: ag.flatten(m23(), 1, 0), ValueError, r"flatten: start_dim \(1\) comes after end_dim \(0\)"),
    bad("broadcast_to-bad", lambda: ag.broadcast_to(ag.ones(3), (2,)), ValueError,
        r"broadcast_to: shapes \(3,\) and \(2,\) cannot be broadcast"),
    bad("expand-bad", lambda: m23().expand(4, 3), ValueError, r"shapes \(2, 3\) and \(4, 3\) cannot be broadcast"),
    bad("cat-mismatch", lambda: ag.cat([ag.ones(2, 3), ag.ones(2, 4)]), ValueError,
        r"concatenate: shapes \(2, 3\), \(2, 4\) differ outside dim 0"),
    bad("cat-empty", lambda: ag.cat([]), ValueError, r"concatenate: expected at least one tensor, got an empty sequence"),
    bad("cat-axis", lambda: ag.cat([m23(), m23()], 2), IndexError, r"concatenate: dim 2 is out of range"),
    bad("cat-float-dim", lambda: ag.cat([m23(), m23()], dim=1.5), TypeError, r"concatenate: expected an integer dim, got float"),
    bad("cat-one-tensor", lambda: ag.cat(m23()), TypeError, r"concatenate: expected a list or tuple of Tensors, got Tensor"),
    bad("cat-str-item", lambda: ag.cat([ag.ones(2), "a"]), TypeError, r"concatenate: " + NOT_A_TENSOR),
    bad("stack-shapes", lambda: ag.stack([ag.ones(2), ag.ones(3)]), ValueError,
        r"stack: expected tensors of one shape, got \(2,\), \(3,\)"),
    bad("stack-empty", lambda: ag.stack([]), ValueError, r"stack: expected at least one tensor"),
    bad("stack-dim", lambda: ag.stack([m23(), m23()], dim=5), IndexError, r"stack: dim 5 is out of range"),
    bad("split-sizes-sum", lambda: ag.split(ag.ones(5), [1, 1]), ValueError,
        r"split: sizes \[1, 1\] must be non-negative and add up to 5"),
    bad("split-zero", lambda: ag.split(ag.ones(5), 0), ValueError, r"split: split size must be positive, got 0"),
    bad("split-dim", lambda: ag.split(m23(), 2, dim=3), IndexError, r"split: dim 3 is out of range"),
    bad("split-str-size", lambda: ag.split(ag.ones(5), "a"), TypeError, r"split: expected an int or a list of ints.*got str"),
    bad("chunk-zero", lambda: ag.chunk(ag.ones(5), 0), ValueError, r"chunk: expected a positive number of chunks, got 0"),
    bad("pad-negative", lambda: ag.pad(ag.ones(3), (-1, 1)), ValueError, r"pad: widths must be non-negative, got"),
    bad("pad-too-many", lambda: ag.pad(ag.ones(3), (1, 1, 1, 1)), ValueError, r"pad: expected an int, a \(before, after\) pair"),
    bad("flip-axis", lambda: ag.flip(m23(), 3), IndexError, r"flip: dim 3 is out of range"),
    bad("roll-axis", lambda: ag.roll(m23(), 1, 5), IndexError, r"roll: dim 5 is out of range"),
    bad("tile-negative", lambda: ag.tile(ag.ones(3), (-1,)), ValueError, r"tile: repetitions must be non-negative, got \(-1,\)"),
    bad("repeat-negative", lambda: ag.ones(3).repeat(-1), ValueError, r"repeat: repetitions must be non-negative"),
    bad("repeat_interleave-negative", lambda: ag.repeat_interleave(ag.ones(3), -1), ValueError,
        r"repeat_interleave: repeats must be non-negative, got -1"),
    bad("moveaxis-range", lambda: ag.moveaxis(m23(), 0, 4), IndexError, r"moveaxis: dim 4 is out of range"),
    bad("unbind-dim", lambda: ag.unbind(m23(), 3), IndexError, r"unbind: dim 3 is out of range"),
    # ----------------------------------------------------------------- reductions
    bad("sum-axis", lambda: m23().sum(axis=3), IndexError, r"sum: dim 3 is out of range for a tensor with 2 dimension"),
    bad("sum-float-axis", lambda: m23().sum(axis=1.5), TypeError, r"sum: expected an integer dim, got float"),
    bad("sum-axis-and-dim", lambda: m23().sum(axis=0, dim=0), TypeError, r"sum: got both axis= and dim=; pass one"),
    bad("sum-repeated-axis", lambda: m23().sum(axis=(0, 0)), ValueError, r"sum: dim \(0, 0\) names a dimension twice"),
    bad("mean-str-dim", lambda: m23().mean(dim="a"), TypeError, r"mean: expected an integer dim, got str"),
    bad("max-axis", lambda: ag.max(m23(), 2), IndexError, r"max: dim 2 is out of range"),
    bad("argmax-axis", lambda: ag.argmax(m23(), 5), IndexError, r"argmax: dim 5 is out of range"),
    bad("logsumexp-axis", lambda: ag.logsumexp(m23(), 4), IndexError, r"logsumexp: dim 4 is out of range"),
    bad("var-axis", lambda: ag.var(m23(), 3), IndexError, r"var: dim 3 is out of range"),
    bad("prod-axis", lambda: ag.prod(m23(), 3), IndexError, r"prod: dim 3 is out of range"),
    bad("cumsum-axis", lambda: ag.cumsum(m23(), 3), IndexError, r"cumsum: dim 3 is out of range"),
    bad("norm-ord", lambda: ag.norm(m23(), p="abc"), ValueError, r"norm: expected ord to be a number or 'fro', got 'abc'"),
    bad("std-str-correction", lambda: ag.std(m23(), correction="a"), TypeError, r"std|var: expected .*correction.*got str"),
    # ----------------------------------------------------------------- arithmetic and broadcasting
    bad("add-broadcast", lambda: ag.ones(2, 3) + ag.ones(4), ValueError, r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast"),
    bad("add-broadcast-recorded", lambda: leaf(2, 3) + ag.ones(4), ValueError, r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast"),
    bad("mul-broadcast", lambda: ag.mul(ag.ones(2, 3), ag.ones(2)), ValueError, r"mul: shapes \(2, 3\) and \(2,\) cannot be broadcast"),
    bad("div-broadcast", lambda: ag.ones(3) / ag.ones(4), ValueError, r"div: shapes \(3,\) and \(4,\) cannot be broadcast"),
    bad("pow-broadcast", lambda: ag.ones(3) ** ag.ones(4), ValueError, r"pow: shapes \(3,\) and \(4,\) cannot be broadcast"),
    bad("maximum-broadcast", lambda: ag.maximum(ag.ones(3), ag.ones(4)), ValueError, r"maximum: shapes \(3,\) and \(4,\)"),
    bad("lt-broadcast", lambda: ag.ones(3) < ag.ones(4), ValueError, r"lt: shapes \(3,\) and \(4,\) cannot be broadcast"),
    bad("where-broadcast", lambda: ag.where(ag.ones(3) > 0, ag.ones(2), ag.ones(2)), ValueError,
        r"where: shapes \(3,\) and \(2,\) and \(2,\) cannot be broadcast"),
    bad("add-str", lambda: ag.ones(3) + "a", TypeError, r"add: " + NOT_A_TENSOR),
    bad("radd-str", lambda: "a" + ag.ones(3), TypeError, r"add: " + NOT_A_TENSOR),
    bad("mul-none", lambda: ag.ones(3) * None, TypeError, r"mul: expected a Tensor or a number, got NoneType"),
    bad("matmul-op-str", lambda: m23() @ "a", TypeError, r"matmul: " + NOT_A_TENSOR),
    bad("where-str", lambda: ag.where(ag.ones(3) > 0, "a", ag.ones(3)), TypeError, r"where: " + NOT_A_TENSOR),
    bad("floor_divide-str", lambda: ag.ones(3) // "a", TypeError, r"floor_divide: " + NOT_A_TENSOR),
    bad("clamp-no-bounds", lambda: ag.clamp(ag.ones(3)), ValueError, r"clamp: expected at least one of min and max"),
    bad("clamp-method-no-bounds", lambda: ag.ones(3).clamp(), ValueError, r"clamp: expected at least one of min and max"),
    bad("clamp-str-bound", lambda: ag.clamp(ag.ones(3), "a"), TypeError, r"clamp: expected .*min.*got str"),
    bad("gelu-approximate", lambda: ag.gelu(ag.ones(3), approximate="foo"), ValueError,
        r"gelu: approximate must be 'none' or 'tanh', got 'foo'"),
    bad("leaky_relu-str-slope", lambda: ag.leaky_relu(ag.ones(3), "a"), TypeError, r"leaky_relu: expected a number.*got str"),
    bad("elu-str-alpha", lambda: ag.elu(ag.ones(3), "a"), TypeError, r"elu: expected a number.*got str"),
    bad("softplus-str-beta", lambda: ag.softplus(ag.ones(3), beta="a"), TypeError, r"softplus: expected a number.*got str"),
    # ----------------------------------------------------------------- functions given a non-tensor
    bad("exp-str", lambda: ag.exp("abc"), TypeError, r"exp: " + NOT_A_TENSOR),
    bad("exp-none", lambda: ag.exp(None), TypeError, r"exp: expected a Tensor or a number, got NoneType"),
    bad("log-str-list", lambda: ag.log(["a"]), TypeError, r"log: expected a Tensor or a number, got list"),
    bad("tanh-dict", lambda: ag.tanh({}), TypeError, r"tanh: expected a Tensor or a number, got dict"),
    bad("relu-str", lambda: ag.relu("abc"), TypeError, r"relu: " + NOT_A_TENSOR),
    bad("sigmoid-str", lambda: ag.sigmoid("a"), TypeError, r"sigmoid: " + NOT_A_TENSOR),
    bad("sum-str", lambda: ag.sum("abc"), TypeError, r"sum: " + NOT_A_TENSOR),
    bad("mean-str", lambda: ag.mean("abc"), TypeError, r"mean: " + NOT_A_TENSOR),
    bad("max-str", lambda: ag.max("a"), TypeError, r"max: " + NOT_A_TENSOR),
    bad("matmul-fn-str", lambda: ag.matmul("a", ag.ones(3)), TypeError, r"matmul: " + NOT_A_TENSOR),
    bad("einsum-str-operand", lambda: ag.einsum("i->i", "abc"), TypeError, r"einsum: " + NOT_A_TENSOR),
    bad("broadcast_to-str", lambda: ag.broadcast_to("abc", (3,)), TypeError, r"broadcast_to: " + NOT_A_TENSOR),
    bad("stack-str", lambda: ag.stack(["a", "b"]), TypeError, r"stack: " + NOT_A_TENSOR),
    bad("add_-str", lambda: ag.add_("a", 1), TypeError, r"add_: expected a Tensor to modify, got str"),
    bad("reshape-fn-str", lambda: ag.reshape("abc", (3,)), TypeError, r"reshape: " + NOT_A_TENSOR),
    bad("permute-fn-str", lambda: ag.permute("abc", (0,)), TypeError, r"permute: " + NOT_A_TENSOR),
    bad("transpose-fn-str", lambda: ag.transpose("abc"), TypeError, r"transpose: " + NOT_A_TENSOR),
    bad("flatten-fn-str", lambda: ag.flatten("abc"), TypeError, r"flatten: " + NOT_A_TENSOR),
    bad("squeeze-fn-str", lambda: ag.squeeze("abc"), TypeError, r"squeeze: " + NOT_A_TENSOR),
    bad("unsqueeze-fn-str", lambda: ag.unsqueeze("abc", 0), TypeError, r"unsqueeze: " + NOT_A_TENSOR),
    bad("split-fn-str", lambda: ag.split("abc", 1), TypeError, r"split: " + NOT_A_TENSOR),
    bad("pad-fn-str", lambda: ag.pad("abc", 1), TypeError, r"pad: " + NOT_A_TENSOR),
    bad("flip-fn-str", lambda: ag.flip("abc", 0), TypeError, r"flip: " + NOT_A_TENSOR),
    bad("roll-fn-str", lambda: ag.roll("abc", 1), TypeError, r"roll: " + NOT_A_TENSOR),
    bad("tile-fn-str", lambda: ag.tile("abc", 2), TypeError, r"tile: " + NOT_A_TENSOR),
    bad("clone-fn-str", lambda: ag.clone("abc"), TypeError, r"clone: expected a Tensor.*got str"),
    bad("gather-fn-str", lambda: ag.gather("abc", 0, ag.tensor([0])), TypeError, r"gather: " + NOT_A_TENSOR),
    bad("index_select-fn-str", lambda: ag.index_select("abc", 0, ag.tensor([0])), TypeError,
        r"index_select: " + NOT_A_TENSOR),
    # ----------------------------------------------------------------- linear algebra
    bad("matmul-shape", lambda: ag.matmul(m23(), ag.ones(4, 5)), ValueError,
        r"matmul: cannot multiply \(2, 3\) by \(4, 5\): inner dimensions 3 and 4 differ"),
    bad("matmul-op-shape", lambda: m23() @ ag.ones(4, 5), ValueError, r"matmul: cannot multiply \(2, 3\) by \(4, 5\)"),
    bad("matmul-0d", lambda: ag.matmul(ag.tensor(2.0), ag.ones(3)), ValueError,
        r"matmul: expected operands with at least 1 dimension, got shapes \(\) and \(3,\)"),
    bad("dot-shape", lambda: ag.dot(ag.ones(3), ag.ones(4)), ValueError, r"dot: cannot multiply \(3,\) by \(4,\)"),
    bad("outer-2d", lambda: ag.outer(m23(), ag.ones(3)), ValueError, r"outer: expected two 1-D tensors, got shapes \(2, 3\)"),
    bad("tensordot-sizes", lambda: ag.tensordot(m23(), m23(), axes=1), ValueError,
        r"tensordot: cannot contract dims \(1,\) of shape \(2, 3\) with dims \(0,\) of shape \(2, 3\)"),
    bad("einsum-sizes", lambda: ag.einsum("ij,jk->ik", m23(), ag.ones(4, 5)), ValueError,
        r"einsum: subscript 'j' has size 3 in operand 0 \(shape \(2, 3\)\) but 4 in operand 1"),
    bad("einsum-output-letter", lambda: ag.einsum("ij->ijk", m23()), ValueError,
        r"einsum: output subscript 'k' in 'ij->ijk' appears in no input"),
    bad("einsum-operand-count", lambda: ag.einsum("ij,jk->ik", m23()), ValueError,
        r"einsum: subscripts 'ij,jk->ik' name 2 operand\(s\), got 1"),
    bad("einsum-bad-char", lambda: ag.einsum("i$->i", m23()), ValueError, r"einsum: invalid character '\$'"),
    bad("einsum-ndim", lambda: ag.einsum("ijk->i", m23()), ValueError,
        r"einsum: operand 0 has 2 dimension\(s\) but its subscripts 'ijk' name 3"),
    bad("einsum-not-str", lambda: ag.einsum(5, m23()), TypeError, r"einsum: expected subscripts as a str, got int"),
    # ----------------------------------------------------------------- indexing
    bad("index-out-of-range", lambda: ag.ones(3)[5], IndexError, r"getitem: index 5 is out of bounds for dim 0 of size 3"),
    bad("index-negative-out-of-range", lambda: ag.ones(3)[-4], IndexError, r"index -4 is out of bounds for dim 0 of size 3"),
    bad("index-float", lambda: ag.ones(3)[1.5], TypeError, r"getitem: indices must be integers or bools, got the float 1\.5"),
    bad("index-str", lambda: ag.ones(3)["a"], TypeError, r"getitem: cannot use a str as an index"),
    bad("index-too-many", lambda: ag.ones(3)[0, 0], IndexError, r"getitem: too many indices for a tensor of shape \(3,\)"),
    bad("index-array-out-of-range", lambda: ag.ones(3)[[0, 5]], IndexError, r"getitem: index 5 is out of bounds .*size 3"),
    bad("index-float-tensor", lambda: ag.ones(3)[ag.tensor([0.0, 1.0])], TypeError,
        r"getitem: indices must be integers or bools, got an index of dtype float32"),
    bad("bool-mask-shape", lambda: ag.ones(3)[ag.tensor([True, False])], IndexError,
        r"getitem: the bool mask of shape \(2,\) does not match the tensor's shape \(3,\)"),
    bad("setitem-out-of-range", lambda: ag.ones(3).__setitem__(5, 1.0), IndexError, r"setitem: index 5 is out of bounds"),
    bad("setitem-shape", setitem_wrong_shape, ValueError, r"setitem: could not broadcast .*\(5,\) into shape \(3,\)"),
    bad("setitem-str-value", lambda: ag.ones(3).__setitem__(0, "a"), TypeError, r"setitem: " + NOT_A_TENSOR),
    bad("gather-float-index", lambda: ag.gather(m23(), 1, ag.tensor([[0.0], [1.0]])), TypeError,
        r"gather: expected index to be an integer tensor, got dtype float32"),
    bad("gather-out-of-range", lambda: ag.gather(m23(), 1, ag.tensor([[0], [7]])), IndexError,
        r"gather: index 7 is out of bounds for axis 1 with size 3"),
    bad("gather-index-ndim", lambda: ag.gather(m23(), 1, ag.tensor([0, 1])), ValueError,
        r"gather: expected index with as many dims as the tensor \(2\), got index of shape \(2,\)"),
    bad("take_along_axis-float", lambda: ag.take_along_axis(m23(), ag.tensor([[0.0], [1.0]]), 1), TypeError,
        r"take_along_axis: expected indices to be an integer tensor, got dtype float32"),
    bad("index_select-float", lambda: ag.index_select(m23(), 0, ag.tensor([0.0])), TypeError,
        r"index_select: expected index to be an integer tensor, got dtype float32"),
    bad("index_select-2d-index", lambda: ag.index_select(m23(), 0, ag.tensor([[0]])), ValueError,
        r"index_select: expected a 1-d index, got shape \(1, 1\)"),
    bad("index_select-out-of-range", lambda: ag.index_select(m23(), 0, ag.tensor([5])), IndexError,
        r"index_select: index 5 is out of bounds .*size 2"),
    bad("scatter_add-float-index", lambda: ag.scatter_add(m23(), 1, ag.tensor([[0.0], [1.0]]), ag.ones(2, 1)), TypeError,
        r"scatter_add: expected index to be an integer tensor, got dtype float32"),
    bad("scatter_add-out-of-range", lambda: ag.scatter_add(m23(), 1, ag.tensor([[0], [9]]), ag.ones(2, 1)), IndexError,
        r"scatter_add: index 9 is out of bounds for axis 1 with size 3"),
    # ----------------------------------------------------------------- in-place
    bad("add_-on-leaf", inplace_on_leaf(lambda x: x.add_(1)), RuntimeError,
        r"add_: a leaf tensor that requires grad cannot be modified in place"),
    bad("iadd-on-leaf", inplace_on_leaf(iadd), RuntimeError, r"a leaf tensor that requires grad cannot be modified in place"),
    bad("setitem-on-leaf", inplace_on_leaf(setitem_leaf), RuntimeError,
        r"setitem: a leaf tensor that requires grad cannot be modified in place"),
    bad("add_-grows-shape", lambda: ag.ones(1).add_(ag.ones(4)), RuntimeError,
        r"add_: the result has shape \(4,\) but the tensor modified in place has shape \(1,\)"),
    bad("mul_-float-into-int", lambda: ag.ones(3, dtype=ag.int64).mul_(0.5), TypeError,
        r"mul_: the result has dtype float32, which cannot be stored in place in a tensor of dtype int64"),
    bad("fill_-str", lambda: ag.ones(3).fill_("a"), TypeError, r"fill_: expected a number.*got str"),
    # ----------------------------------------------------------------- autodiff
    bad("backward-non-scalar", backward_of_vector, RuntimeError,
        r"backward: grad can be omitted only for a tensor with one element; got shape \(3,\)"),
    bad("backward-no-grad", backward_without_grad, RuntimeError, r"backward: the tensor .* does not require grad"),
    bad("backward-grad-shape", backward_with_wrong_grad_shape, RuntimeError,
        r"backward: grad has shape \(4,\) but the tensor has shape \(3,\)"),
    bad("backward-twice", backward_twice, RuntimeError, r"already freed.*retain_graph=True"),
    bad("backward-after-inplace", backward_after_inplace_edit_of_saved, RuntimeError,
        r"Mul: one of the tensors it saved for backward .* modified by an in-place operation"),
    bad("backward-str", lambda: ag.autograd.backward("y"), TypeError, r"backward: expected Tensors as outputs, got str"),
    bad("backward-count", backward_count_mismatch, ValueError, r"backward: got 1 tensors but 2 gradients"),
    bad("grad-unused-input", grad_with_unused_input, RuntimeError,
        r"grad: input 1 \(shape \(2,\)\) was not used .*allow_unused=True"),
    bad("grad-input-without-grad", grad_of_input_without_grad, RuntimeError, r"grad: input 0 \(shape \(2,\)\) does not require grad"),
    bad("grad-non-tensor-input", grad_with_non_tensor_input, TypeError, r"grad: inputs must be Tensors, got int at position 1"),
    bad("grad-str-output", lambda: ag.autograd.grad("y", [leaf(2)]), TypeError, r"grad: expected Tensors as outputs, got str"),
    bad("grad-int-inputs", grad_with_int_as_inputs, TypeError, r"grad: inputs must be Tensors, got int"),
    bad("gradcheck-int-input", lambda: ag.autograd.gradcheck(lambda t: t, (ag.ones(2, dtype=ag.int64),)), ValueError,
        r"gradcheck: no input requires grad"),
    bad("gradcheck-no-input-requires-grad", lambda: ag.autograd.gradcheck(lambda t: t * 2, (ag.ones(2, dtype=ag.float64),)),
        ValueError, r"gradcheck: no input requires grad"),
    bad("gradcheck-fn-returns-str", lambda: ag.autograd.gradcheck(lambda t: "a", (leaf(2),)), TypeError,
        r"gradcheck: fn must return Tensors, got str"),
    bad("gradcheck-not-callable", lambda: ag.autograd.gradcheck(5, (leaf(2),)), TypeError,
        r"gradcheck: expected a callable fn, got int"),
    # ----------------------------------------------------------------- custom Functions
    bad("Function-too-many-grads", backward_through(TwiceGrads), RuntimeError,
        r"TwiceGrads\.backward returned 2 gradient\(s\) but forward took 1 argument\(s\)"),
    bad("Function-wrong-grad-shape", backward_through(ScalarGrad), RuntimeError,
        r"a gradient of shape \(\) reached a tensor of shape \(2,\)"),
    bad("Function-saves-number", lambda: SavesNumber.apply(leaf(2)), TypeError,
        r"SavesNumber: save_for_backward takes Tensors \(or None\), got int"),
    bad("Function-returns-array", lambda: ReturnsArray.apply(leaf(2)), TypeError,
        r"ReturnsArray\.forward .*Tensor.*got ndarray"),
    bad("Function-without-backward", backward_through(NoBackward), NotImplementedError, r"NoBackward.*defines no backward"),
]


@pytest.mark.parametrize("call,exc,match", CASES)
def test_bad_call_raises_a_clear_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.skipif(ag.cuda.is_available(), reason="CUDA is available here, so asking for it succeeds")
def test_cuda_without_cupy_or_gpu_says_what_is_missing_and_how_to_install():
    with pytest.raises(RuntimeError, match=r"(CuPy is not installed|no CUDA device).*pip install -e \"\.\[cuda1"):
        ag.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match=r"pip install"):
        ag.ones(3).cuda()


@pytest.mark.gpu
@pytest.mark.skipif(not ag.cuda.is_available(), reason="CuPy or a CUDA GPU is missing")
@pytest.mark.parametrize("op", [lambda a, b: a + b, lambda a, b: a @ b, ag.maximum,
                                lambda a, b: ag.cat([a, b]), lambda a, b: ag.where(a > 0, a, b)])
@pytest.mark.device_index
def test_mixing_devices_names_both(op):
    a, b = ag.ones(3, 3, requires_grad=True), ag.ones(3, 3, device="cuda")
    with pytest.raises(RuntimeError, match=r"cpu.*cuda:0|cuda:0.*cpu"):
        op(a, b)
