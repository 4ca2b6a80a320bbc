"""Functional transforms in JAX's conventions, built on autograd.grad: grad, value_and_grad, vjp,
jvp, jacrev (jacobian), jacfwd, hessian. They take and return Tensors and compose (grad(grad(f))).

How composition works: each transform calls ``f`` on fresh aliases of the differentiated arguments
(identity ops, so an outer transform still sees the path back to its own inputs) and differentiates
with ``create_graph=True`` whenever an argument is itself being differentiated by an outer transform
(it then requires grad). At the outermost level nothing is recorded beyond what one call needs and
the results are plain tensors.
"""
from ..autograd.engine import grad as _engine_grad
from ..autograd.grad_mode import enable_grad, is_grad_enabled
from ..tensor import Tensor
from ..dtypes import is_floating
from . import vmap as _vmap
from .vmap import vmap

__all__ = ["grad", "value_and_grad", "vjp", "jvp", "jacrev", "jacobian", "jacfwd", "hessian"]


# --------------------------------------------------------------------------- helpers
def _argnums(argnums, n, name):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not nums:
        raise ValueError(f"{name}: argnums must name at least one argument")
    for a in nums:
        if not isinstance(a, int) or not -n <= a < n:
            raise ValueError(f"{name}: argnums {argnums!r} is out of range for a function called with {n} argument(s)")
    return single, tuple(a % n for a in nums)


def _autograd_grad(outputs, inputs, grad_outputs=None, **kw):
    """autograd.grad, through vmap's physical tensors when called inside vmap."""
    if not _vmap.active():
        return _engine_grad(outputs, inputs, grad_outputs, **kw)
    outs = (outputs,) if isinstance(outputs, Tensor) else tuple(outputs)
    if isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    return _vmap.engine_grad(_engine_grad, outs, inputs, grad_outputs, **kw)


def _track(x, name):
    """An alias of x to differentiate with respect to: connected to x's graph when x requires grad.
    Inside vmap it is batched at every level first, so that each example is differentiated on its own."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: can only differentiate with respect to Tensors, got {type(x).__name__}")
    if not is_floating(x.dtype):
        raise TypeError(f"{name}: can only differentiate with respect to floating-point Tensors, got {x.dtype}")
    if x.requires_grad and is_grad_enabled():
        return _vmap.lift(_alias(x))    # a fresh identity node: this transform's variable, still linked to the outer one
    return _vmap.lift(x).detach().requires_grad_()


def _alias(x):
    from ..ops.misc import Alias
    return Alias.apply(x)


def _outer(args):
    """Whether some argument is being differentiated by an enclosing transform (or by the caller)."""
    return is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args)


def _reaches_other_leaves(outs, tracked):
    """Whether the graph of ``outs`` uses a leaf that requires grad besides ``tracked`` (a parameter
    the function closes over): then the result must stay differentiable for the caller."""
    ids = {id(_vmap.physical(t)) for t in tracked}
    stack = [o.grad_fn for o in outs if isinstance(o, Tensor) and o.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in node._next:
            if e is None:
                continue
            if isinstance(e, Tensor):
                if id(e) not in ids:
                    return True
            else:
                stack.append(e[0] if isinstance(e, tuple) else e)
    return False


def _zeros_if_none(gs, xs):
    return tuple(g if g is not None else x.detach() * 0 for g, x in zip(gs, xs))


def _finish(t, keep):
    return t if keep or not isinstance(t, Tensor) else t.detach()


def _finish_tree(obj, keep):
    """_finish applied to every Tensor inside nested tuples, lists and dicts (has_aux results)."""
    if isinstance(obj, Tensor):
        return _finish(obj, keep)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_finish_tree(o, keep) for o in obj)
    if isinstance(obj, dict):
        return {k: _finish_tree(v, keep) for k, v in obj.items()}
    return obj


def _as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


# --------------------------------------------------------------------------- grad, value_and_grad
def _value_and_grad(f, args, argnums, has_aux, name):
    single, nums = _argnums(argnums, len(args), name)
    keep = _outer(args)
    with enable_grad():
        xs = list(args)
        for i in nums:
            xs[i] = _track(args[i], name)
        out = f(*xs)
        aux = None
        if has_aux:
            if not isinstance(out, tuple) or len(out) != 2:
                raise TypeError(f"{name}(has_aux=True): f must return a pair (output, aux), got {type(out).__name__}")
            out, aux = out
        if not isinstance(out, Tensor) or out.numel() != 1:
            shape = out.shape if isinstance(out, Tensor) else type(out).__name__
            raise TypeError(f"{name}: f must return a Tensor with one element, got {shape}; for vector outputs "
                            "use vjp or jacrev")
        wrt = [xs[i] for i in nums]
        keep = keep or (is_grad_enabled() and _reaches_other_leaves([out], wrt))
        if out.requires_grad:
            gs = _autograd_grad(out, wrt, create_graph=keep, allow_unused=True)
        else:
            gs = (None,) * len(wrt)
    gs = tuple(_finish(g, keep) for g in _zeros_if_none(gs, wrt))
    return _finish(out, keep), (gs[0] if single else gs), _finish_tree(aux, keep)


def grad(f, argnums=0, has_aux=False):
    """The function computing d f / d args[argnums] (f returns one element). With has_aux=True, f
    returns (output, aux) and the result is (grad, aux). A tuple argnums gives a tuple of gradients.

    >>> from autograd_gpu.func import grad
    >>> f = lambda x: (x ** 3).sum()
    >>> grad(f)(ag.tensor([1.0, 2.0]))
    Tensor([ 3., 12.])
    >>> grad(grad(lambda x: x ** 3))(ag.tensor(2.0))        # d2/dx2 x^3 = 6x
    Tensor(12.)
    """
    def grad_f(*args):
        _, g, aux = _value_and_grad(f, args, argnums, has_aux, "grad")
        return (g, aux) if has_aux else g
    return grad_f


def value_and_grad(f, argnums=0, has_aux=False):
    """The function computing (f(*args), grad): ((value, aux), grad) with has_aux=True."""
    def value_and_grad_f(*args):
        value, g, aux = _value_and_grad(f, args, argnums, has_aux, "value_and_grad")
        return ((value, aux) if has_aux else value), g
    return value_and_grad_f


# --------------------------------------------------------------------------- vjp, jvp
def vjp(f, *primals):
    """(f(*primals), vjp_fn), where vjp_fn(v) is the tuple of v-weighted gradients, one per primal
    (v shaped like the output; a tuple of them when f returns a tuple). vjp_fn may be called again."""
    keep = _outer(primals)
    with enable_grad():
        xs = tuple(_track(p, "vjp") for p in primals)
        out = f(*xs)
    outs = _as_tuple(out)
    keep = keep or (is_grad_enabled() and _reaches_other_leaves(outs, xs))
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"vjp: f must return a Tensor or a tuple of Tensors, got {type(o).__name__}")

    def vjp_fn(*vs):
        if len(vs) == 1 and isinstance(vs[0], tuple):
            vs = vs[0]
        if len(vs) != len(outs):
            raise ValueError(f"vjp_fn: expected {len(outs)} cotangent(s), one per output, got {len(vs)}")
        pairs = []
        for o, v in zip(outs, vs):
            if not isinstance(v, Tensor) or v.shape != o.shape:
                got = v.shape if isinstance(v, Tensor) else type(v).__name__
                raise ValueError(f"vjp_fn: expected a cotangent of shape {o.shape}, got {got}")
            if o.requires_grad:
                pairs.append((o, v))
        with enable_grad():
            if pairs:
                gs = _autograd_grad([o for o, _ in pairs], xs, [v for _, v in pairs], retain_graph=True,
                                    create_graph=keep or any(v.requires_grad for _, v in pairs), allow_unused=True)
            else:
                gs = (None,) * len(xs)
        keep_now = keep or any(v.requires_grad for v in vs)
        return tuple(_finish(g, keep_now) for g in _zeros_if_none(gs, xs))

    return (tuple(_finish(o, keep) for o in outs) if isinstance(out, tuple) else _finish(out, keep)), vjp_fn


def jvp(f, primals, tangents):
    """(f(*primals), J @ tangents): the forward-mode derivative along ``tangents``.

    Computed with the double-vjp trick (no forward-mode engine): g(u) = J^T u is built with
    create_graph=True for a dummy cotangent u, then J t = d<g(u), t>/du. It costs one forward and two
    backward passes, about three times a vjp."""
    primals, tangents = tuple(primals), tuple(tangents)
    if len(primals) != len(tangents):
        raise ValueError(f"jvp: expected one tangent per primal, got {len(primals)} primals and {len(tangents)} tangents")
    for p, t in zip(primals, tangents):
        if not isinstance(t, Tensor) or not isinstance(p, Tensor) or t.shape != p.shape:
            raise ValueError(f"jvp: each tangent must be a Tensor shaped like its primal, got "
                             f"{getattr(t, 'shape', type(t).__name__)} for a primal of shape {getattr(p, 'shape', None)}")
    keep = _outer(primals) or _outer(tangents)
    with enable_grad():
        xs = tuple(_track(p, "jvp") for p in primals)
        out = f(*xs)
        outs = _as_tuple(out)
        keep = keep or (is_grad_enabled() and _reaches_other_leaves(outs, xs))
        us = [o.detach() * 0 for o in outs]
        for u in us:
            u.requires_grad_()
        diff = [(o, u) for o, u in zip(outs, us) if o.requires_grad]
        if diff:
            gs = _autograd_grad([o for o, _ in diff], xs, [u for _, u in diff], create_graph=True, allow_unused=True)
        else:
            gs = (None,) * len(xs)
        total = None
        for g, t in zip(gs, tangents):
            if g is not None:
                term = (g * t).sum()
                total = term if total is None else total + term
        if total is not None and total.requires_grad:
            touts = _autograd_grad(total, us, create_graph=keep, allow_unused=True)
        else:
            touts = (None,) * len(us)
    touts = tuple(_finish(t if t is not None else o.detach() * 0, keep) for t, o in zip(touts, outs))
    if isinstance(out, tuple):
        return tuple(_finish(o, keep) for o in outs), touts
    return _finish(out, keep), touts[0]


# --------------------------------------------------------------------------- Jacobians
# Both are one batched pass with vmap over the rows (columns) of an identity instead of one vjp (jvp)
# per output (input) element: 10-40x faster from a few dozen elements on, the same below.
def _identity(n, shape, like):
    from ..creation import eye
    return eye(n, dtype=like.dtype, device=like.device).reshape((n,) + tuple(shape))


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def jacrev(f, argnums=0):
    """The function computing the Jacobian of f by reverse mode: the vjps of all output elements in one
    batched backward (vmap). Its shape is the output's shape followed by the input's; a tuple argnums
    gives a tuple of Jacobians."""
    def jac_f(*args):
        from ..creation import zeros
        single, nums = _argnums(argnums, len(args), "jacrev")
        keep = _outer(args)
        with enable_grad():
            xs = list(args)
            for i in nums:
                xs[i] = _track(args[i], "jacrev")
            out = f(*xs)
            if not isinstance(out, Tensor):
                raise TypeError(f"jacrev: f must return a Tensor, got {type(out).__name__}")
            wrt = [xs[i] for i in nums]
            keep = keep or (is_grad_enabled() and _reaches_other_leaves([out], wrt))
            n = _numel(out.shape)
            if out.requires_grad and n:
                def row(e):
                    gs = _autograd_grad(out, wrt, e, retain_graph=True, create_graph=keep, allow_unused=True)
                    return _zeros_if_none(gs, wrt)
                rows = vmap(row)(_identity(n, out.shape, out))
                jacs = tuple(_finish(r.reshape(out.shape + x.shape), keep) for r, x in zip(rows, wrt))
            else:
                jacs = tuple(zeros(out.shape + x.shape, dtype=x.dtype, device=x.device) for x in wrt)
        return jacs[0] if single else jacs
    return jac_f


jacobian = jacrev


def jacfwd(f, argnums=0):
    """The function computing the Jacobian of f by forward mode: the jvps along all input elements in one
    batched pass (vmap; see jvp for the cost of one). Same shape convention as jacrev."""
    def jac_f(*args):
        from ..creation import zeros
        from ..ops.shape import permute
        single, nums = _argnums(argnums, len(args), "jacfwd")
        jacs = []
        for i in nums:
            x = args[i]
            if not isinstance(x, Tensor):
                raise TypeError(f"jacfwd: can only differentiate with respect to Tensors, got {type(x).__name__}")

            def f_i(xi, i=i):
                a = list(args)
                a[i] = xi
                out = f(*a)
                if not isinstance(out, Tensor):
                    raise TypeError(f"jacfwd: f must return a Tensor, got {type(out).__name__}")
                return out
            n = _numel(x.shape)
            if not n:                                   # x has no elements: the output shape needs one call
                jacs.append(zeros(f_i(x).shape + x.shape, dtype=x.dtype, device=x.device))
                continue
            cols = vmap(lambda t, f_i=f_i, x=x: jvp(f_i, (x,), (t,))[1])(_identity(n, x.shape, x))
            out_shape = cols.shape[1:]
            cols = cols.reshape(n, -1)
            jacs.append(permute(cols, 1, 0).reshape(tuple(out_shape) + x.shape))
        return jacs[0] if single else tuple(jacs)
    return jac_f


def hessian(f, argnums=0):
    """The function computing the Hessian of a scalar f: shape input + input. Computed as
    jacrev(jacrev(f)) (reverse over reverse), which in this engine is cheaper than JAX's
    forward-over-reverse because forward mode costs two extra backward passes here."""
    return jacrev(jacrev(f, argnums), argnums)
