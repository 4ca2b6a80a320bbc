"""Linear algebra: the matmul and einsum primitives; dot, outer, tensordot composed on them."""
import operator
import string

from ..autograd.function import Function
from ..tensor import Tensor
from ..dtypes import result_type, bfloat16, float32
from ..creation import eye, ones
from .shape import sum_to, broadcast_shapes, broadcast_to, reshape
from ._util import as_tensor
from .elementwise import _cj
from ._autocast import cast_low
from ..dtypes import float32, complex64, complex128
from . import batching
from .registry import register, OpTest

__all__ = ["matmul", "dot", "outer", "tensordot", "einsum"]

_LETTERS = string.ascii_letters
_F32 = {float32: {"rtol": 1e-4, "atol": 1e-5}}        # einsum may sum in another order than NumPy
_COMPLEX = (complex64, complex128)
_C64 = {complex64: {"rtol": 1e-4, "atol": 1e-5}}


def _matmul_rule(cls, args, kwargs):
    """Both operands aligned to the union of levels (matmul broadcasts its batch dims); an unbatched 2-D
    right operand takes all rows of the batched left one in one product."""
    a, b = args
    levels = batching._union(args)
    nd = max(a.ndim, b.ndim)
    if a.__class__ is batching.BatchedTensor and b.__class__ is not batching.BatchedTensor and a.ndim == 2:
        # (batch..., n, k) @ (k, m): one GEMM over all rows instead of one per example
        pa = a._bbase
        out = cls.apply(reshape(pa, (-1, pa.shape[-1])), b)
        return batching._wrap(reshape(out, pa.shape[:-1] + (b.shape[-1],)), levels)
    return batching._wrap(cls.apply(batching._align(a, levels, nd), batching._align(b, levels, nd)), levels)


class MatMul(Function):                   # the wrapper reshapes 1-D operands to 2-D first
    batch_rule = _matmul_rule

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(ctx.device.backend.matmul(a.data, b.data))

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        if a.data.dtype.kind == "c" or b.data.dtype.kind == "c":    # grad @ b^H and a^H @ grad
            a, b = _cj(a), _cj(b)
        ga = sum_to(grad @ b.swapaxes(-1, -2), a.shape) if ctx.needs_input_grad[0] else None
        gb = sum_to(a.swapaxes(-1, -2) @ grad, b.shape) if ctx.needs_input_grad[1] else None
        return ga, gb


def _operands(xs, op):
    """The operands as Tensors on one device, cast to their NumPy result dtype (differentiably)."""
    like = next((x for x in xs if isinstance(x, Tensor)), None)
    xs = [as_tensor(x, op, like=like) for x in xs]
    for x in xs[1:]:
        if x.device is not xs[0].device:
            raise RuntimeError(f"{op}: expected all tensors on one device, got {xs[0].device} and {x.device}; "
                               "move one with .to()")
    dt = result_type(*(x.dtype for x in xs))
    return [x if x.dtype == dt else x.to(dtype=dt) for x in xs]


def _matmul(a, b, op):
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"{op}: expected operands with at least 1 dimension, got shapes {a.shape} and {b.shape}; "
                         "use * to multiply by a scalar")
    x = a.reshape((1,) + a.shape) if a.ndim == 1 else a
    y = b.reshape(b.shape + (1,)) if b.ndim == 1 else b
    if x.shape[-1] != y.shape[-2]:
        raise ValueError(f"{op}: cannot multiply {a.shape} by {b.shape}: inner dimensions {x.shape[-1]} and "
                         f"{y.shape[-2]} differ")
    try:
        batch = broadcast_shapes(x.shape[:-2], y.shape[:-2], op=op)
    except ValueError:
        raise ValueError(f"{op}: cannot multiply {a.shape} by {b.shape}: batch dimensions {x.shape[:-2]} and "
                         f"{y.shape[:-2]} cannot be broadcast together") from None
    out = MatMul.apply(x, y)
    shape = batch + a.shape[-2:-1] + b.shape[-1:] if b.ndim > 1 else batch + a.shape[-2:-1]
    return out.reshape(shape)


def _rmatmul(a, b):
    """b @ a (Tensor.__rmatmul__)."""
    return matmul(b, a)


@register(method=("matmul", "__matmul__"), methods={"__rmatmul__": _rmatmul}, tests=(
    OpTest((((2, 3), (3, 4)),), ref="np.matmul"),
    OpTest((((3, 3), (3, 2)),), ref="np.matmul", op=operator.matmul, name="matmul_operator"),
    OpTest((((3,), (3,)),), ref="np.matmul", name="matmul_1d_1d"),
    OpTest((((3,), (3, 4)),), ref="np.matmul", name="matmul_1d_2d"),
    OpTest((((2, 3), (3,)),), ref="np.matmul", name="matmul_2d_1d"),
    OpTest((((2, 3, 4), (2, 4, 2)), ((2, 3, 4), (4,))), ref="np.matmul", name="matmul_batched"),
    OpTest((((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 2))), ref="np.matmul", name="matmul_broadcast"),
    OpTest((((2, 0), (0, 3)),), ref="np.matmul", name="matmul_empty_inner"),
    OpTest((((2, 3), (3, 4)), ((2, 2, 3), (3,))), ref="np.matmul", name="complex_matmul", dtypes=_COMPLEX,
           tol=_C64),
    OpTest((((2, 3), (3, 4)),), ref="np.matmul", name="complex_matmul_real", dtypes=_COMPLEX, tol=_C64,
           kinds=(None, "real")),
))
def matmul(a, b):
    """Matrix product with NumPy's rules: batched and broadcasting; 1-D operands are vectors.

    Under autocast it runs in float16 (with float32 accumulation)."""
    return _matmul(*cast_low(*_operands((a, b), "matmul")), "matmul")


@register(method=True, tests=(
    OpTest((((4,), (4,)), ((2, 3), (3, 2)), ((2, 3, 4), (4,))), ref="np.dot"),
    OpTest((((4,), (4,)),), ref="np.dot", name="complex_dot", dtypes=_COMPLEX, tol=_C64),
))
def dot(a, b):
    """NumPy's dot: scalar product of vectors, matmul of matrices, a contraction for more dims.

    For more dims it sums over the last axis of a and the second-to-last of b; a 0-d operand multiplies."""
    a, b = _operands((a, b), "dot")
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.ndim <= 2 and b.ndim <= 2:
        return _matmul(a, b, "dot")
    return _tensordot(a, b, (a.ndim - 1,), (max(b.ndim - 2, 0),), "dot")


@register(method=True, tests=OpTest((((3,), (4,)), ((0,), (2,))), ref="np.outer"))
def outer(a, b):
    """Outer product of two vectors: out[i, j] = a[i] * b[j]."""
    a, b = _operands((a, b), "outer")
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: expected two 1-D tensors, got shapes {a.shape} and {b.shape}; flatten them first")
    return a.reshape(a.shape[0], 1) * b.reshape(1, b.shape[0])


def _axes(axes, nd, which):
    axes = [axes] if hasattr(axes, "__index__") else list(axes)
    for d in axes:
        if isinstance(d, bool) or not hasattr(d, "__index__") or not -nd <= d.__index__() < nd:
            raise ValueError(f"tensordot: axis {d!r} is out of range for {which} with {nd} dimension(s)")
    axes = tuple(d.__index__() % nd for d in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"tensordot: axes {axes} of {which} repeat a dimension")
    return axes


@register(tests=(
    OpTest((((2, 3, 4), (3, 4, 2)),), ref="np.tensordot"),
    OpTest((((2, 3), (3, 4)),), ref=lambda np, a, b: np.tensordot(a, b, 1), op=lambda a, b: tensordot(a, b, 1),
           name="tensordot_int"),
    OpTest((((2, 3, 4), (4, 5, 2)),), ref=lambda np, a, b: np.tensordot(a, b, ([0, 2], [2, 0])),
           op=lambda a, b: tensordot(a, b, ([0, 2], [2, 0])), name="tensordot_pair"),
))
def tensordot(a, b, axes=2):
    """Sum of products over the last ``axes`` dims of a and the first of b (or the dims of a pair of lists).

    ``axes`` is an int or a pair of sequences ``(axes_a, axes_b)``; the result has a's free dims, then b's."""
    a, b = _operands((a, b), "tensordot")
    if isinstance(axes, int) and not isinstance(axes, bool):
        if not 0 <= axes <= min(a.ndim, b.ndim):
            raise ValueError(f"tensordot: axes={axes} must be between 0 and the operands' dims, got shapes "
                             f"{a.shape} and {b.shape}")
        return _tensordot(a, b, tuple(range(a.ndim - axes, a.ndim)), tuple(range(axes)), "tensordot")
    try:
        axes_a, axes_b = axes
    except (TypeError, ValueError):
        raise ValueError(f"tensordot: expected axes as an int or a pair of sequences, got {axes!r}") from None
    return _tensordot(a, b, _axes(axes_a, a.ndim, "a"), _axes(axes_b, b.ndim, "b"), "tensordot")


def _tensordot(a, b, axes_a, axes_b, op):
    """Contract dims axes_a of a with axes_b of b as one matmul: (free_a, k) @ (k, free_b)."""
    if len(axes_a) != len(axes_b) or any(a.shape[i] != b.shape[j] for i, j in zip(axes_a, axes_b)):
        raise ValueError(f"{op}: cannot contract dims {axes_a} of shape {a.shape} with dims {axes_b} of shape "
                         f"{b.shape}: sizes {tuple(a.shape[i] for i in axes_a)} and "
                         f"{tuple(b.shape[j] for j in axes_b)} differ")
    free_a = tuple(d for d in range(a.ndim) if d not in axes_a)
    free_b = tuple(d for d in range(b.ndim) if d not in axes_b)
    k = _prod(a.shape[d] for d in axes_a)
    x = a.permute(*free_a, *axes_a).reshape(_prod(a.shape[d] for d in free_a), k)
    y = b.permute(*axes_b, *free_b).reshape(k, _prod(b.shape[d] for d in free_b))
    return MatMul.apply(x, y).reshape(tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


def _prod(sizes):
    n = 1
    for s in sizes:
        n *= s
    return n


# --------------------------------------------------------------------------- einsum
def _einsum_rule(cls, args, kwargs):
    """Each level becomes one more letter, leading in the operands batched there and in the output."""
    (ins, out), xs = args[0], args[1:]
    levels = batching._union(xs)
    used = set(out).union(*ins)
    free = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if c not in used)
    letter = {lv: next(free) for lv in levels}
    terms = tuple("".join(letter[lv] for lv in batching._levels(x)) + t for t, x in zip(ins, xs))
    target = "".join(letter[lv] for lv in levels) + out
    return batching._wrap(cls.apply((terms, target), *(batching._phys(x) for x in xs)), levels)


class Einsum(Function):
    """einsum on explicit subscripts (no '...', every letter one size across operands)."""
    batch_rule = _einsum_rule

    @staticmethod
    def forward(ctx, spec, *xs):
        ins, out = spec
        ctx.spec = spec
        ctx.save_for_backward(*xs)
        xp = ctx.xp
        arrays = [x.data for x in xs]
        low = arrays[0].dtype is bfloat16          # NumPy's einsum has no bfloat16: float32, rounded once
        if low:
            arrays = [a.astype(float32) for a in arrays]
        y = xp.asarray(xp.einsum(",".join(ins) + "->" + out, *arrays, optimize=len(xs) > 2))
        if low:
            y = y.astype(bfloat16)
        if any(xp.may_share_memory(y, x.data) for x in xs):    # NumPy returns views for 'ij->ji', 'ii->i'
            y = y.copy()
        return ctx.wrap(y)

    @staticmethod
    def backward(ctx, grad):
        ins, out = ctx.spec
        xs = ctx.saved_tensors
        return (None,) + tuple(_einsum_grad(grad, out, ins, xs, i) if need else None
                               for i, need in enumerate(ctx.needs_input_grad[1:]))


def _einsum_grad(grad, out, ins, xs, i):
    """The gradient for operand i: an einsum of grad with the other operands into operand i's letters;
    an eye operand puts it on the diagonal of each repeated letter, a ones vector broadcasts it along each
    letter found nowhere else."""
    spare = iter(c for c in _LETTERS if c not in set(out).union(*ins))
    terms, operands = [out], [grad]
    for j, (t, x) in enumerate(zip(ins, xs)):
        if j != i:
            terms.append(t)
            operands.append(_cj(x))            # grad * conj(d out / d x_i): the others conjugated
    target = ""
    for c, n in zip(ins[i], xs[i].shape):
        if c in target:
            r = next(spare, None)
            if r is None:
                raise ValueError("einsum: too many distinct subscripts to differentiate (at most 52 letters)")
            terms.append(c + r)
            operands.append(eye(n, dtype=grad.dtype, device=grad.device))
            c = r
        target += c
    present = set("".join(terms))
    for c, n in zip(target, xs[i].shape):
        if c not in present:
            terms.append(c)
            operands.append(ones(n, dtype=grad.dtype, device=grad.device))
    return Einsum.apply((tuple(terms), target), *operands)


def _parse(subscripts, xs):
    """(input terms, output term) with '...' replaced by letters of its own and NumPy's implicit output."""
    if not isinstance(subscripts, str):
        raise TypeError(f"einsum: expected subscripts as a str, got {type(subscripts).__name__}")
    s = subscripts.replace(" ", "")
    ins, arrow, out = s.partition("->")
    bad = (set(ins) - set(_LETTERS + ".,")) | (set(out) - set(_LETTERS + "."))
    if bad:
        raise ValueError(f"einsum: invalid character {sorted(bad)[0]!r} in subscripts {subscripts!r}; use "
                         "letters, ',', '->' and '...'")
    terms = ins.split(",")
    if len(terms) != len(xs):
        raise ValueError(f"einsum: subscripts {subscripts!r} name {len(terms)} operand(s), got {len(xs)}")
    for t in terms + [out]:
        if t.count(".") not in (0, 3) or (t.count(".") == 3 and "..." not in t):
            raise ValueError(f"einsum: '.' must come as one '...' per operand, got {t!r} in {subscripts!r}")
    n_ell = []                            # how many dims each operand's '...' stands for
    for i, (t, x) in enumerate(zip(terms, xs)):
        n = len(t.replace("...", ""))
        if n > x.ndim or ("..." not in t and n != x.ndim):
            raise ValueError(f"einsum: operand {i} has {x.ndim} dimension(s) but its subscripts {t!r} name {n}")
        n_ell.append(x.ndim - n)
    ell_nd = max(n_ell)
    free = [c for c in _LETTERS if c not in s]
    if ell_nd > len(free):
        raise ValueError(f"einsum: too many dimensions for 52 letters in {subscripts!r}")
    ell = "".join(free[:ell_nd])          # '...' dims broadcast right-aligned, as in NumPy
    terms = [t.replace("...", ell[ell_nd - k:]) for t, k in zip(terms, n_ell)]
    if not arrow:
        letters = "".join(terms)
        return terms, ell + "".join(sorted(c for c in set(letters) - set(ell) if letters.count(c) == 1))
    if "..." in out:
        out = out.replace("...", ell)
    elif ell_nd:
        raise ValueError(f"einsum: the operands have '...' dimensions but the output {out!r} has no '...' "
                         f"(in {subscripts!r})")
    letters = "".join(terms)
    for c in out:
        if out.count(c) > 1 or c not in letters:
            raise ValueError(f"einsum: output subscript {c!r} in {subscripts!r} "
                             + ("appears twice" if out.count(c) > 1 else "appears in no input"))
    return terms, out


def _einsum_test(subscripts, *shapes, **kw):
    """The op-table entry of einsum on one subscripts string (its id spells the subscripts)."""
    name = f"einsum_{subscripts.replace(',', '_').replace('->', '_to_').replace('...', 'E')}"
    return OpTest((shapes,), ref=lambda np, *xs: np.einsum(subscripts, *xs),
                  op=lambda *xs: einsum(subscripts, *xs), name=name, **{"tol": _F32, **kw})


@register(tests=(
    _einsum_test("ij,jk->ik", (2, 3), (3, 4)),
    _einsum_test("bij,bjk->bik", (2, 2, 3), (2, 3, 4)),
    _einsum_test("ii->i", (3, 3)),
    _einsum_test("ii", (3, 3)),
    _einsum_test("ij->", (2, 3)),
    _einsum_test("i,i", (4,), (4,)),
    _einsum_test("ij,j->i", (2, 3), (3,)),
    _einsum_test("...ij,...jk->...ik", (2, 1, 2, 3), (4, 3, 2)),
    _einsum_test("ij,jk,kl->il", (2, 3), (3, 4), (4, 2)),
    _einsum_test("ij,jk", (2, 3), (3, 4)),
    _einsum_test("ij,ij->ij", (1, 3), (2, 3)),
    _einsum_test("iij,i->j", (2, 2, 3), (2,)),
    OpTest((((2, 3), (3, 4)),), ref=lambda np, a, b: np.einsum("ij,jk->ik", a, b),
           op=lambda a, b: einsum("ij,jk->ik", a, b), name="complex_einsum", dtypes=_COMPLEX, tol=_C64),
))
def einsum(subscripts, *operands):
    """NumPy's einsum: explicit or implicit output, '...' broadcasting, diagonals, any number of operands.

    The output is given after '->' or implicit (the once-seen letters, sorted); repeated letters take
    diagonals; differentiable to any order."""
    if not operands:
        raise ValueError("einsum: expected at least one operand")
    xs = _operands(operands, "einsum")
    terms, out = _parse(subscripts, xs)
    sizes = {}
    for i, (t, x) in enumerate(zip(terms, xs)):
        for c, n in zip(t, x.shape):
            if t.count(c) > 1 and x.shape[t.index(c)] != n:
                raise ValueError(f"einsum: subscript {c!r} repeats in operand {i} over dims of sizes "
                                 f"{x.shape[t.index(c)]} and {n} (shape {x.shape})")
            m, j = sizes.get(c, (1, i))
            if n != 1 and m != 1 and n != m:
                what = f"subscript {c!r}" if c in subscripts else "a '...' dimension"
                raise ValueError(f"einsum: {what} has size {m} in operand {j} (shape {xs[j].shape}) but {n} in "
                                 f"operand {i} (shape {x.shape})")
            if m == 1:
                sizes[c] = (n, i)
    # broadcast size-1 dims explicitly, so the primitive sees one size per letter
    xs = [broadcast_to(x, tuple(sizes[c][0] for c in t)) for t, x in zip(terms, xs)]
    return Einsum.apply((tuple(terms), out), *xs)
