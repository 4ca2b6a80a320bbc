"""gradcheck and gradgradcheck: analytic gradients against central finite differences in float64.

The outputs are reduced to one number with fixed random weights (L = sum_k <v_k, out_k>), so one
backward gives the analytic gradient of every input and 2 evaluations per input element give the
numeric one; a wrong Jacobian entry shows up unless it is orthogonal to v, which random v avoids.

Complex tensors are checked in complex128 with PyTorch's convention: the gradient of a real L with
respect to z is dL/dRe z + i dL/dIm z, so the real and imaginary parts of each input element are
perturbed separately; a complex output is checked twice, once through L = sum Re(out) * v and once
through L = sum Im(out) * v (the backward seeds v and i v), as PyTorch's gradcheck does."""
from .engine import grad as _grad
from .grad_mode import enable_grad
from ..dtypes import is_inexact
from . import function as _function     # its Tensor: tensor.py sits above this package

__all__ = ["gradcheck", "gradgradcheck"]


def _as_tuple(x):
    return x if isinstance(x, tuple) else tuple(x) if isinstance(x, list) else (x,)


def _prepare(inputs):
    Tensor = _function.Tensor
    inputs = _as_tuple(inputs)
    out = []
    for t in inputs:
        if isinstance(t, Tensor) and is_inexact(t.dtype):
            d = t.detach().to(dtype="complex128" if t.dtype.kind == "c" else "float64")._copy()
            out.append(d.requires_grad_(t.requires_grad))
        else:
            out.append(t)
    return tuple(out)


def _weights(outs, seed):
    from ..backends import get_backend
    rng = get_backend("cpu").xp.random.default_rng(seed)
    return [_function.Tensor(rng.uniform(0.5, 1.5, o.shape) * rng.choice([-1.0, 1.0], o.shape), dtype="float64",
                   device=o.device) for o in outs]


def _scalar(fn, inputs, ws, part):
    """sum_k <w_k, out_k> where each complex out_k contributes its real part (part 0) or its
    imaginary part (part 1); a real out_k contributes only to part 0."""
    outs = [o for o in _as_tuple(fn(*inputs)) if o is not None]
    total = 0.0
    for o, w in zip(outs, ws):
        o = o.detach()
        if o.dtype.kind == "c":
            o = o.to(dtype="complex128")
            o = o.real if part == 0 else o.imag
        elif part == 1:
            continue
        total = total + (o.to(dtype="float64") * w).sum().item()
    return total


def _seed(o, w, part):
    """The backward seed for output o: w for the real part (or a real output), i w for the imaginary."""
    if o.dtype.kind != "c":
        return w.to(dtype=o.dtype)
    w = w.to(dtype=o.dtype)
    return w if part == 0 else w * 1j


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0, raise_exception=True):
    """True when the analytic gradients of ``fn`` at ``inputs`` match finite differences, else raise
    (or return False) naming the input and element that differ most. Float inputs are checked in
    float64; inputs that do not require grad are held constant."""
    Tensor = _function.Tensor
    if not callable(fn):
        raise TypeError(f"gradcheck: expected a callable fn, got {type(fn).__name__}")
    inputs = _prepare(inputs)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    if not diff:
        raise ValueError("gradcheck: no input requires grad; pass at least one float tensor with requires_grad=True")
    with enable_grad():
        outs = [o for o in _as_tuple(fn(*inputs)) if o is not None]
        for o in outs:
            if not isinstance(o, Tensor):
                raise TypeError(f"gradcheck: fn must return Tensors, got {type(o).__name__}")
    ws = _weights(outs, seed)
    parts = (0, 1) if any(o.dtype.kind == "c" for o in outs) else (0,)
    worst = None
    for part in parts:
        with enable_grad():
            if part:                  # a fresh graph: the first backward freed the other
                outs = [o for o in _as_tuple(fn(*inputs)) if o is not None]
            diff_outs = [(o, w) for o, w in zip(outs, ws) if o.requires_grad and (part == 0 or o.dtype.kind == "c")]
            if diff_outs:
                analytic = _grad([o for o, _ in diff_outs], [inputs[i] for i in diff],
                                 [_seed(o, w, part) for o, w in diff_outs], allow_unused=True)
            else:
                analytic = (None,) * len(diff)
        for i, g in zip(diff, analytic):
            worst = _compare(fn, inputs, ws, part, i, g, eps, atol, rtol, worst)
    if worst is None:
        return True
    _, i, k, num, an, shape, part = worst
    what = "" if len(parts) == 1 else " of the outputs' real parts" if part == 0 else " of the outputs' imaginary parts"
    msg = (f"gradcheck: gradient{what} for input {i} (shape {shape}) differs at flat element {k}: "
           f"numerical {num:.8g}, analytical {an:.8g} (atol={atol}, rtol={rtol})")
    if raise_exception:
        raise AssertionError(msg)
    return False


def _compare(fn, inputs, ws, part, i, g, eps, atol, rtol, worst):
    """Finite differences for every element of input i against the analytic gradient g; returns the
    worst mismatch so far. A complex element is perturbed along 1 and along i (num = d_re + i d_im)."""
    t = inputs[i]
    flat = t.data.reshape(-1)
    ana = None if g is None else g.numpy().reshape(-1)
    steps = (eps, eps * 1j) if t.dtype.kind == "c" else (eps,)
    for k in range(flat.size):
        old = flat[k].item()
        num = 0.0
        for step, unit in zip(steps, (1.0, 1j)):
            flat[k] = old + step
            fp = _scalar(fn, inputs, ws, part)
            flat[k] = old - step
            fm = _scalar(fn, inputs, ws, part)
            flat[k] = old
            num = num + unit * (fp - fm) / (2 * eps)
        an = 0.0 if ana is None else ana[k].item()
        err = abs(num - an)
        tol = atol + rtol * abs(num)
        if err > tol and (worst is None or err - tol > worst[0]):
            worst = (err - tol, i, k, num, an, t.shape, part)
    return worst


def gradgradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, seed=0, raise_exception=True):
    """gradcheck of the vector-Jacobian product of ``fn``: checks second derivatives (in the inputs
    and in the output weights) through ``create_graph=True``."""
    Tensor = _function.Tensor
    if not callable(fn):
        raise TypeError(f"gradgradcheck: expected a callable fn, got {type(fn).__name__}")
    inputs = _prepare(inputs)
    diff = [i for i, t in enumerate(inputs) if isinstance(t, Tensor) and t.requires_grad]
    with enable_grad():
        outs = [o for o in _as_tuple(fn(*inputs)) if o is not None and o.requires_grad]
    if not outs:
        raise ValueError("gradgradcheck: fn has no output that requires grad")
    ws = [w.requires_grad_() for w in _weights(outs, seed + 1)]
    # a complex output's backward seed is complex: its real and imaginary parts are both checked
    ws = [(w.detach() * (1 + 0.5j)).to(dtype="complex128").requires_grad_() if o.dtype.kind == "c" else w
          for o, w in zip(outs, ws)]
    n = len(inputs)

    def vjp(*args):
        xs, vs = args[:n], args[n:]
        ys = [o for o in _as_tuple(fn(*xs)) if o is not None and o.requires_grad]
        gs = _grad(ys, [xs[i] for i in diff], list(vs), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(vjp, inputs + tuple(ws), eps=eps, atol=atol, rtol=rtol, seed=seed + 2,
                     raise_exception=raise_exception)
