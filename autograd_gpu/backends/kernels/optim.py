"""Fused kernels: optimizer updates (SGD, Adam/AdamW, RMSprop, Adagrad, Adamax, NAdam, RAdam, Adadelta, ASGD,
Rprop; LBFGS's step goes through sgd_step). See backends/kernels/__init__.py for the contract.

Each method takes one bucket of a parameter group: lists of same-dtype arrays on one device (parameters,
their gradients and their state buffers, all updated in place) and the group's numbers as Python
floats, and equals the step-by-step update of optim/ (``Optimizer._reference_update``) up to float
rounding. The optimizer makes one call per (device, dtype) of a group and step (Adam, Adagrad, Adamax,
NAdam, RAdam and ASGD: also per step coefficients, equal for all parameters unless some skipped steps), so
an implementation is free to treat the bucket as one multi-tensor update.

What runs:
- NumPy: one parameter after another, in place with ``out=`` into one scratch array per call for
  parameters of 64 KiB or more, into one temporary a parameter for smaller ones (``_temp_of``; the
  step-by-step code allocates one to three temporaries a parameter), the same passes in the same order
  otherwise; SGD's step stays one MKL ?axpy (``self.axpy``). Adam and the others keep NumPy's
  single-threaded passes: on the shared 2-core machine under load, Adam with three threaded MKL axpys a
  parameter took from the same time as NumPy's passes to 20 times as long from run to run (OpenMP
  threads waiting on a busy core); NumPy's passes did not vary so.
- CuPy: one ElementwiseKernel launch per bucket doing the whole update of all its parameters (what
  PyTorch's fused=True does with a pointer table): every array is a ``raw`` kernel parameter (g0, p0,
  m0, ..., g1, p1, ...), the loop runs over size = the parameters' total size, and element i belongs to
  parameter q where o_q <= i < o_{q+1} (int64 offsets passed as arguments): a chain of if/else loads the
  element into locals, the update runs once, a second chain stores it back. Kernels are built once per
  (dtype, options, number of parameters) and cached; the numbers are kernel arguments, so a scheduler
  changing lr builds nothing. A bucket whose arrays do not fit CUDA's 4 KiB of kernel arguments (a 1-d
  raw array is a 32-byte CArray; contiguous arrays are passed flattened, views) or _MAX_SLOTS (24)
  parameters takes one launch per chunk (24 parameters a launch for every optimizer but AMSGrad's 22 and
  centered RMSprop with momentum's 22, fewer for non-contiguous n-d arrays). Parameters, gradients and
  state stay where they are (no flat buffer to re-home p.data into, no gather/scatter copies; state_dict
  unchanged). Counted on the stand-in (count_launches) for the MLP 784-512-512-10 (6 parameters),
  launches a step, step by step -> per-parameter kernel -> bucket kernel: SGD 12 -> 6 -> 1, SGD Nesterov
  with weight decay 48 -> 6 -> 1, Adam 78 -> 6 -> 1, AdamW with AMSGrad 90 -> 6 -> 1, RMSprop centered
  with momentum 96 -> 6 -> 1, Adagrad with weight decay 54 -> 6 -> 1; the transformer's 28 parameters
  with Adam: 28 -> 2 (24 + 4). A 20-parameter model (10 Linear layers), step by step -> bucket kernel:
  Adamax 200 -> 1, NAdam with decoupled weight decay 340 -> 1, RAdam 260 -> 1, Adadelta with weight decay
  360 -> 1, ASGD 120 -> 1, Rprop 300 -> 1. ``zero_grad()`` launches nothing (set_to_none=True, the
  default, as in PyTorch).

The NumPy implementations of the newer optimizers (Adamax ... Rprop) make as many passes as their
step-by-step updates (NumPy has no fused multiply-add to save one) with fewer temporaries (_temp_of), so a
step costs about the same: measured on the shared 2-core machine (medians of 9, run-to-run noise ~10%), 20
float32 parameters, step-by-step / fused CPU time 0.89-1.11x at 4k elements a weight, 1.00-1.18x at 64k;
Rprop's (no where/astype temporaries) 1.25x and 5.7-5.9x. On CUDA the gain is the launches (above).

Why not a flat buffer per dtype (parameters, gradients and state in one array each, one plain
elementwise launch): every ``p.data`` would have to be a view into the optimizer's buffer (re-homed at
the first step, again after a user's ``p.data = ...``, ``module.to()`` or a load; ag.compile's CUDA
graphs read parameters by address), and the gradients still arrive as separate arrays from backward,
so each step would first gather them (``cupy.concatenate``: one copy launch per array): 6 + 1 launches
for the MLP against 1 here. On a GPU the if/else chain costs a few compares per element (the branch is
uniform within a warp except at the parameters' boundaries); the update is memory-bound either way.
"""
import numpy as np

__all__ = ["NumpyOptim", "CupyOptim"]


# -- the array-op implementations (NumPy; on CuPy for dtypes without a kernel: complex SGD) --------------
def _scratch(xp, arrays):
    """One array big enough for the largest of ``arrays``; ``view(a)`` is its first a.size elements in a's
    shape, used as ``out=`` (a 0-d product without out= would be a scalar)."""
    n = max((a.size for a in arrays), default=0)
    buf = xp.empty(n, dtype=arrays[0].dtype) if arrays else None
    return lambda a: buf[:a.size].reshape(a.shape)


# The optimizers' temporaries: a parameter of _SCRATCH_BYTES or more writes them into views of one
# scratch buffer per call (a fresh array that size costs page faults at every step: 1.5-1.9x the time of
# ASGD's whole update at 64k floats); a smaller one lets its first pass allocate (NumPy's cache of small
# blocks is cheaper than slicing and reshaping a view: ~0.5 us a parameter at 4k floats). 0-d ones take the view too
# (a 0-d result without out= is a scalar, which out= does not take).
_SCRATCH_BYTES = 1 << 16


def _temp_of(xp, params):
    """``temp(a)``: the out= target for the first temporary of ``a``'s update (None: NumPy allocates)."""
    view = _scratch(xp, params)
    return lambda a: view(a) if a.ndim == 0 or a.nbytes >= _SCRATCH_BYTES else None


def _direction(xp, a, g, weight_decay, maximize):
    """(d, owned): d = -g if maximize, plus weight_decay * a; owned says whether d is a new array (made with
    out=: a 0-d result would be a scalar, which in-place updates do not write through)."""
    if weight_decay != 0:
        d = xp.multiply(a, weight_decay, out=xp.empty_like(a))       # wd * a + g == g + wd * a exactly
        if maximize:
            d -= g
        else:
            d += g
        return d, True
    if maximize:
        return xp.negative(g, out=xp.empty_like(g)), True
    return g, False


def _sgd(xp, axpy, params, grads, bufs, lr, weight_decay, momentum, dampening, nesterov, maximize, first):
    for i, (a, g) in enumerate(zip(params, grads)):
        d, owned = _direction(xp, a, g, weight_decay, maximize)
        if momentum != 0:
            b = bufs[i]
            if first:
                xp.copyto(b, d)
            else:
                b *= momentum
                if dampening == 0:
                    b += d
                else:
                    b += (1 - dampening) * d
            if nesterov:
                if owned:
                    d += momentum * b
                else:
                    d = xp.multiply(b, momentum, out=xp.empty_like(b))
                    d += g
            else:
                d = b
        axpy(a, -lr, d)


def _adam(xp, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, beta1, beta2, eps, weight_decay,
          decoupled, maximize, step_size, bias2, decay):
    temp = _temp_of(xp, params)
    for i, (a, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs)):
        if weight_decay != 0 and decoupled:
            a *= decay
            g, _ = _direction(xp, a, g, 0, maximize)
        else:
            g, _ = _direction(xp, a, g, weight_decay, maximize)
        m *= beta1
        tmp = xp.multiply(g, 1 - beta1, out=temp(a))
        m += tmp
        v *= beta2
        xp.multiply(g, g, out=tmp)
        tmp *= 1 - beta2
        v += tmp
        if max_exp_avg_sqs is not None:
            vmax = max_exp_avg_sqs[i]
            xp.maximum(vmax, v, out=vmax)
            v = vmax
        xp.sqrt(v, out=tmp)
        tmp /= bias2
        tmp += eps
        xp.divide(m, tmp, out=tmp)
        tmp *= step_size
        a -= tmp


def _rmsprop(xp, params, grads, square_avgs, grad_avgs, momentum_bufs, lr, alpha, eps, weight_decay,
             momentum, maximize):
    temp = _temp_of(xp, params)
    for i, (a, g, s) in enumerate(zip(params, grads, square_avgs)):
        g, _ = _direction(xp, a, g, weight_decay, maximize)
        s *= alpha
        avg = xp.multiply(g, g, out=temp(a))
        avg *= 1 - alpha
        s += avg
        if grad_avgs is not None:
            gbar = grad_avgs[i]
            gbar *= alpha
            xp.multiply(g, 1 - alpha, out=avg)
            gbar += avg
            xp.multiply(gbar, gbar, out=avg)
            xp.subtract(s, avg, out=avg)
            xp.sqrt(avg, out=avg)
        else:
            xp.sqrt(s, out=avg)
        avg += eps
        xp.divide(g, avg, out=avg)
        if momentum_bufs is not None:
            buf = momentum_bufs[i]
            buf *= momentum
            buf += avg
            xp.multiply(buf, lr, out=avg)
        else:
            avg *= lr
        a -= avg


def _adagrad(xp, params, grads, sums, clr, weight_decay, eps, maximize):
    temp = _temp_of(xp, params)
    for a, g, s in zip(params, grads, sums):
        g, _ = _direction(xp, a, g, weight_decay, maximize)
        tmp = xp.multiply(g, g, out=temp(a))
        s += tmp
        xp.sqrt(s, out=tmp)
        tmp += eps
        xp.divide(g, tmp, out=tmp)
        tmp *= clr
        a -= tmp



def _adamax(xp, params, grads, exp_avgs, exp_infs, clr, beta1, beta2, eps, weight_decay, maximize):
    temp = _temp_of(xp, params)
    for a, g, m, u in zip(params, grads, exp_avgs, exp_infs):
        if weight_decay != 0 or maximize:
            g = _direction(xp, a, g, weight_decay, maximize)[0]
        tmp = xp.subtract(g, m, out=temp(a))        # m += (1 - b1) (g - m): a lerp, as PyTorch
        tmp *= 1 - beta1
        m += tmp
        u *= beta2
        xp.abs(g, out=tmp)
        tmp += eps
        xp.maximum(u, tmp, out=u)
        xp.divide(m, u, out=tmp)
        tmp *= clr
        a -= tmp


def _adam_direction(xp, a, g, weight_decay, decoupled, maximize, decay):
    """The Adam family's gradient: AdamW's decoupled decay scales ``a`` in place first."""
    if weight_decay != 0 and decoupled:
        a *= decay
        return xp.negative(g) if maximize else g
    if weight_decay != 0 or maximize:
        return _direction(xp, a, g, weight_decay, maximize)[0]
    return g


def _moments(xp, g, m, v, beta1, beta2, tmp):
    """m += (1 - b1) (g - m);  v = b2 v + (1 - b2) g^2 (NAdam's and RAdam's, in place); returns the scratch
    array it used (``tmp``, or a new one where ``tmp`` is None)."""
    tmp = xp.subtract(g, m, out=tmp)
    tmp *= 1 - beta1
    m += tmp
    v *= beta2
    xp.multiply(g, g, out=tmp)
    tmp *= 1 - beta2
    v += tmp
    return tmp


def _nadam(xp, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
           decay, bias2, c_grad, c_avg):
    temp, temp_d = _temp_of(xp, params), _temp_of(xp, params)
    for a, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        g = _adam_direction(xp, a, g, weight_decay, decoupled, maximize, decay)
        tmp = _moments(xp, g, m, v, beta1, beta2, temp(a))
        d = xp.divide(v, bias2, out=temp_d(a))
        xp.sqrt(d, out=d)
        d += eps
        xp.divide(g, d, out=tmp)
        tmp *= c_grad
        a -= tmp
        xp.divide(m, d, out=tmp)
        tmp *= c_avg
        a -= tmp


def _radam(xp, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
           decay, adaptive, plain):
    temp = _temp_of(xp, params)
    for a, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs):
        g = _adam_direction(xp, a, g, weight_decay, decoupled, maximize, decay)
        tmp = _moments(xp, g, m, v, beta1, beta2, temp(a))
        if adaptive != 0:                           # rectified: p -= m adaptive / (sqrt(v) + eps)
            xp.sqrt(v, out=tmp)
            tmp += eps
            xp.divide(adaptive, tmp, out=tmp)
            tmp *= m
        else:                                       # early steps (rho_t <= 5): p -= plain m, no sqrt
            xp.multiply(m, plain, out=tmp)
        a -= tmp


def _adadelta(xp, params, grads, square_avgs, acc_deltas, lr, rho, eps, weight_decay, maximize):
    temp, temp_d = _temp_of(xp, params), _temp_of(xp, params)
    for a, g, s, u in zip(params, grads, square_avgs, acc_deltas):
        if weight_decay != 0 or maximize:
            g = _direction(xp, a, g, weight_decay, maximize)[0]
        s *= rho
        tmp = xp.multiply(g, g, out=temp(a))
        tmp *= 1 - rho
        s += tmp
        d = xp.add(u, eps, out=temp_d(a))           # d = sqrt(u + eps) / sqrt(s + eps) * g
        xp.sqrt(d, out=d)
        xp.add(s, eps, out=tmp)
        xp.sqrt(tmp, out=tmp)
        d /= tmp
        d *= g
        u *= rho
        xp.multiply(d, d, out=tmp)
        tmp *= 1 - rho
        u += tmp
        d *= lr
        a -= d


def _asgd(xp, params, grads, axs, shrink, eta, mu, weight_decay, maximize):
    temp = _temp_of(xp, params)
    for a, g, ax in zip(params, grads, axs):
        if weight_decay != 0 or maximize:
            g = _direction(xp, a, g, weight_decay, maximize)[0]
        tmp = xp.multiply(g, eta, out=temp(a))
        a *= shrink
        a -= tmp
        xp.subtract(a, ax, out=tmp)                 # ax += mu (p - ax); mu is 1 (ax follows p) until t0
        if mu != 1:
            tmp *= mu
        ax += tmp


def _rprop(xp, params, grads, prevs, sizes, etaminus, etaplus, min_step, max_step, maximize):
    tmp_of = _scratch(xp, params)
    n = max((a.size for a in params), default=0)
    pos_buf, neg_buf = xp.empty(n, dtype=bool), xp.empty(n, dtype=bool)
    for a, g, prev, size in zip(params, grads, prevs, sizes):
        g, _ = _direction(xp, a, g, 0, maximize)
        tmp = tmp_of(a)
        pos, neg = pos_buf[:a.size].reshape(a.shape), neg_buf[:a.size].reshape(a.shape)
        xp.multiply(g, prev, out=tmp)               # the sign of g * prev picks the step size's factor
        xp.greater(tmp, 0, out=pos)
        xp.less(tmp, 0, out=neg)
        xp.multiply(size, etaplus, out=tmp)
        xp.copyto(size, tmp, where=pos)
        xp.multiply(size, etaminus, out=tmp)
        xp.copyto(size, tmp, where=neg)
        xp.clip(size, min_step, max_step, out=size)
        xp.copyto(prev, g)                          # a sign change: that gradient counts as 0 (no step)
        xp.copyto(prev, 0, where=neg)
        xp.sign(prev, out=tmp)
        tmp *= size
        a -= tmp


class NumpyOptim:
    """NumPy implementations (mixed into NumpyBackend)."""

    def sgd_step(self, params, grads, bufs, lr, weight_decay=0.0, momentum=0.0, dampening=0.0, nesterov=False,
                 maximize=False, first=False):
        """SGD on every array of ``params`` in place: d = g (-g if maximize) + weight_decay * p; with momentum
        b = d (``first``: b is uninitialised) or momentum * b + (1 - dampening) * d, then d = d + momentum * b
        (nesterov) or b; p -= lr * d. ``bufs``: the momentum buffers (None without momentum). Equals the
        unfused update of optim/sgd.py."""
        _sgd(np, self.axpy, params, grads, bufs, lr, weight_decay, momentum, dampening, nesterov, maximize, first)

    def adam_step(self, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, beta1, beta2, eps, weight_decay,
                  decoupled, maximize, step_size, bias2, decay):
        """Adam on every array in place: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2 (vmax = max(vmax, v)
        where ``max_exp_avg_sqs`` is given, AMSGrad); p -= step_size * m / (sqrt(v) / bias2 + eps), with
        step_size = lr / (1 - b1^t) and bias2 = sqrt(1 - b2^t). Weight decay adds weight_decay * p to g, or
        (``decoupled``, AdamW) first scales p by ``decay`` = 1 - lr * weight_decay. Equals optim/adam.py."""
        _adam(np, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, beta1, beta2, eps,
              weight_decay, decoupled, maximize, step_size, bias2, decay)

    def rmsprop_step(self, params, grads, square_avgs, grad_avgs, momentum_bufs, lr, alpha, eps, weight_decay,
                     momentum, maximize):
        """RMSprop on every array in place: s = alpha s + (1 - alpha) g^2; avg = sqrt(s - gbar^2) + eps with
        gbar = alpha gbar + (1 - alpha) g where ``grad_avgs`` is given (centered), else sqrt(s) + eps;
        b = momentum b + g / avg, p -= lr b where ``momentum_bufs`` is given, else p -= lr g / avg. Equals
        optim/rmsprop.py."""
        _rmsprop(np, params, grads, square_avgs, grad_avgs, momentum_bufs, lr, alpha, eps,
                 weight_decay, momentum, maximize)

    def adagrad_step(self, params, grads, sums, clr, weight_decay, eps, maximize):
        """Adagrad on every array in place: s += g^2; p -= clr g / (sqrt(s) + eps), clr the step's decayed
        learning rate. Equals optim/adagrad.py."""
        _adagrad(np, params, grads, sums, clr, weight_decay, eps, maximize)

    def adamax_step(self, params, grads, exp_avgs, exp_infs, clr, beta1, beta2, eps, weight_decay, maximize):
        """Adamax on every array in place: m += (1 - b1) (g - m); u = max(b2 u, |g| + eps); p -= clr m / u,
        clr = lr / (1 - b1^t). Equals optim/adamax.py."""
        _adamax(np, params, grads, exp_avgs, exp_infs, clr, beta1, beta2, eps, weight_decay, maximize)

    def nadam_step(self, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
                   decay, bias2, c_grad, c_avg):
        """NAdam on every array in place: m += (1 - b1) (g - m); v = b2 v + (1 - b2) g^2; d = sqrt(v / bias2)
        + eps; p -= c_grad g / d; p -= c_avg m / d (the step's coefficients from the host). Weight decay as
        adam_step's. Equals optim/nadam.py."""
        _nadam(np, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
               decay, bias2, c_grad, c_avg)

    def radam_step(self, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
                   decay, adaptive, plain):
        """RAdam on every array in place: m, v as nadam_step; p -= m adaptive / (sqrt(v) + eps) once the
        rectification holds (``adaptive`` != 0), else p -= plain m. Equals optim/radam.py."""
        _radam(np, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
               decay, adaptive, plain)

    def adadelta_step(self, params, grads, square_avgs, acc_deltas, lr, rho, eps, weight_decay, maximize):
        """Adadelta on every array in place: s = rho s + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(s + eps) g;
        u = rho u + (1 - rho) d^2; p -= lr d. Equals optim/adadelta.py."""
        _adadelta(np, params, grads, square_avgs, acc_deltas, lr, rho, eps, weight_decay, maximize)

    def asgd_step(self, params, grads, axs, shrink, eta, mu, weight_decay, maximize):
        """ASGD on every array in place: p *= shrink (1 - lambd eta); p -= eta g; ax += mu (p - ax).
        Equals optim/asgd.py."""
        _asgd(np, params, grads, axs, shrink, eta, mu, weight_decay, maximize)

    def rprop_step(self, params, grads, prevs, sizes, etaminus, etaplus, min_step, max_step, maximize):
        """Rprop on every array in place: where g prev > 0 the step size grows by etaplus, where < 0 it
        shrinks by etaminus and g counts as 0; sizes clipped to [min_step, max_step]; p -= sign(g) size;
        prev = g. Equals optim/rprop.py."""
        _rprop(np, params, grads, prevs, sizes, etaminus, etaplus, min_step, max_step, maximize)


# -- CuPy: one ElementwiseKernel per bucket (a table of offsets over raw arrays) ---------------------------
# The update of one element is spelled on locals (p, g and the state: m, v, vmax, s, gbar, buf) with only
# assignments, + - * /, sqrt, parentheses and a ternary (AMSGrad's max); the numbers are kernel parameters
# (no literals), so a scheduler changing lr builds nothing. The direction d = -g (maximize) + wd * p is
# spelled inline where it is used, always before p is written. _multi_source wraps it into a kernel over
# K parameters at once: every array is a raw parameter (g0, p0, m0, ..., g1, p1, ...), the loop runs over
# size = the sum of their sizes, and element i belongs to parameter q where o_q <= i < o_{q+1} (the
# offsets o1.. are int64 arguments): a chain of if/else loads the element into the locals, the update
# runs once, a second chain stores it back. Plain CUDA C inside the subset the CuPy stand-in evaluates
# (testing/cupy_standin/_csubset.py, raw parameters included).
_KERNELS = {}
_CTYPES = {"float16": "float16", "float32": "float32", "float64": "float64"}
# the same keyed by the dtype object: one dict lookup a call (NumPy's ``dtype.name`` is Python code)
_CTYPE_OF = {np.dtype(n): t for n, t in _CTYPES.items()}
_C_LOCAL = {"float16": "float16", "float32": "float", "float64": "double"}
# CUDA passes kernel arguments in 4 KiB: a raw 1-d array is a CArray of 32 bytes (pointer, size, shape,
# strides; 16 more per extra dimension), a number 8; a bucket with more parameters than fit takes one
# launch per chunk. _MAX_SLOTS bounds the code of one kernel (each slot adds a load and a store branch).
_ARG_BYTES = 3800
_MAX_SLOTS = 24


def _d(weight_decay, maximize):
    g = "(-g)" if maximize else "g"
    return f"({g} + wd * p)" if weight_decay else g


def _sgd_source(wd, maximize, momentum, dampened, nesterov, first):
    d = _d(wd, maximize)
    ins = ["g", "lr"] + (["wd"] if wd else []) + (["momentum"] if momentum else []) + (["dampc"] if dampened else [])
    outs = ["p"] + (["buf"] if momentum else [])
    if not momentum:
        return ins, outs, f"p = p - lr * {d};"
    if first:
        body = f"buf = {d};"
    else:
        body = f"buf = momentum * buf + {'dampc * ' if dampened else ''}{d};"
    body += f" p = p - lr * ({d} + momentum * buf);" if nesterov else " p = p - lr * buf;"
    return ins, outs, body


def _adam_source(wd, decoupled, maximize, amsgrad):
    d = _d(wd and not decoupled, maximize)
    ins = ["g", "b1", "omb1", "b2", "omb2", "eps", "step_size", "bias2"]
    ins += (["decay"] if decoupled else ["wd"]) if wd else []
    outs = ["p", "m", "v"] + (["vmax"] if amsgrad else [])
    body = f"m = b1 * m + omb1 * {d}; v = b2 * v + {d} * {d} * omb2;"
    if amsgrad:
        body += " vmax = vmax < v ? v : vmax;"
    p = "p * decay" if wd and decoupled else "p"
    body += f" p = {p} - step_size * (m / (sqrt({'vmax' if amsgrad else 'v'}) / bias2 + eps));"
    return ins, outs, body


def _rmsprop_source(wd, maximize, centered, momentum):
    d = _d(wd, maximize)
    ins = ["g", "lr", "alpha", "oma", "eps"] + (["wd"] if wd else []) + (["momentum"] if momentum else [])
    outs = ["p", "s"] + (["gbar"] if centered else []) + (["buf"] if momentum else [])
    body = f"s = alpha * s + {d} * {d} * oma;"
    if centered:
        body += f" gbar = alpha * gbar + oma * {d};"
        avg = "(sqrt(s - gbar * gbar) + eps)"
    else:
        avg = "(sqrt(s) + eps)"
    if momentum:
        body += f" buf = momentum * buf + {d} / {avg}; p = p - lr * buf;"
    else:
        body += f" p = p - lr * ({d} / {avg});"
    return ins, outs, body


def _adagrad_source(wd, maximize):
    d = _d(wd, maximize)
    ins = ["g", "clr", "eps"] + (["wd"] if wd else [])
    return ins, ["p", "s"], f"s = s + {d} * {d}; p = p - clr * ({d} / (sqrt(s) + eps));"



# The optimizers below set the direction once as the local g (and keep extra locals: the 4th item, declared
# in the kernel's type), then spell the update on locals as those above do.
def _g_stmt(wd, maximize):
    return f"g = {_d(wd, maximize)}; " if wd or maximize else ""


def _adamax_source(wd, maximize):
    ins = ["g", "clr", "omb1", "b2", "eps"] + (["wd"] if wd else [])
    # u = max(b2 u, |g| + eps), NaN-propagating as NumPy's maximum
    body = (_g_stmt(wd, maximize) + "m = m + omb1 * (g - m); u = b2 * u; x = fabs(g) + eps; "
            "u = (u < x || x != x) ? x : u; p = p - clr * (m / u);")
    return ins, ["p", "m", "u"], body, ["x"]


def _adam_family_head(wd, decoupled, maximize):
    """NAdam's and RAdam's numbers and first statements: AdamW's decay scales p, else wd p joins g; then the
    moments m += (1 - b1) (g - m), v = b2 v + (1 - b2) g^2."""
    ins = ["g", "omb1", "b2", "omb2", "eps"] + ((["decay"] if decoupled else ["wd"]) if wd else [])
    head = ("p = p * decay; " + _g_stmt(False, maximize)) if wd and decoupled else _g_stmt(wd, maximize)
    return ins, head + "m = m + omb1 * (g - m); v = b2 * v + omb2 * (g * g);"


def _nadam_source(wd, decoupled, maximize):
    ins, head = _adam_family_head(wd, decoupled, maximize)
    ins[5:5] = ["bias2", "c_grad", "c_avg"]
    body = head + " d = sqrt(v / bias2) + eps; p = p - c_grad * (g / d); p = p - c_avg * (m / d);"
    return ins, ["p", "m", "v"], body, ["d"]


def _radam_source(wd, decoupled, maximize, rectified):
    ins, head = _adam_family_head(wd, decoupled, maximize)
    ins[5:5] = ["adaptive"] if rectified else ["plain"]
    body = head + (" p = p - m * (adaptive / (sqrt(v) + eps));" if rectified else " p = p - m * plain;")
    return ins, ["p", "m", "v"], body, []


def _adadelta_source(wd, maximize):
    ins = ["g", "lr", "rho", "omr", "eps"] + (["wd"] if wd else [])
    body = (_g_stmt(wd, maximize) + "s = rho * s + omr * (g * g); d = sqrt(u + eps) / sqrt(s + eps) * g; "
            "u = rho * u + omr * (d * d); p = p - lr * d;")
    return ins, ["p", "s", "u"], body, ["d"]


def _asgd_source(wd, maximize):
    ins = ["g", "shrink", "eta", "mu"] + (["wd"] if wd else [])
    body = _g_stmt(wd, maximize) + "p = p * shrink; p = p - eta * g; ax = ax + mu * (p - ax);"
    return ins, ["p", "ax"], body, []


def _rprop_source(maximize):
    # 0, 1 and -1 are numbers too, and each ternary's branches are locals or numbers of the kernel's type:
    # CuPy's float16 converts to and from float implicitly, so a float16 : float ternary (size * etaplus :
    # size, or -one : g) would be ambiguous in C++; the factor 1 (no sign) leaves size exact as NumPy's
    ins = ["g", "etaminus", "etaplus", "lo", "hi", "zero", "one", "mone"]
    body = (_g_stmt(False, maximize) + "sp = g * prev; "
            "f = sp > zero ? etaplus : (sp < zero ? etaminus : one); size = size * f; "
            "size = size < lo ? lo : (size > hi ? hi : size); g = sp < zero ? zero : g; "
            "f = g > zero ? one : (g < zero ? mone : g); p = p - f * size; prev = g;")
    return ins, ["p", "prev", "size"], body, ["sp", "f"]


def _multi_source(ins, outs, body, k, t, temps=()):
    """(in_params, out_params, operation) of the kernel updating ``k`` parameters in one launch: raw
    arrays g<q> (read) and p<q>, <state><q> (read and written) for q < k, offsets o1..o<k-1> (parameter q
    is elements o_q <= i < o_{q+1} of the loop, o_0 = 0), then the numbers; ``body`` updates the locals
    (``temps``: more locals it uses)."""
    ct = _C_LOCAL[t]
    in_params = [f"raw {t} g{q}" for q in range(k)] + [f"int64 o{q}" for q in range(1, k)] + \
        [f"{t} {n}" for n in ins[1:]]
    out_params = [f"raw {t} {n}{q}" for q in range(k) for n in outs]

    def chain(arm):
        if k == 1:
            return "{ " + arm(0) + " }"
        src = ""
        for q in range(k):
            cond = f"if (i < o{q + 1}) " if q < k - 1 else ""
            src += ("" if q == 0 else " else ") + cond + "{ " + arm(q) + " }"
        return src

    def load(q):
        j = "j = i;" if q == 0 else f"j = i - o{q};"
        return j + " " + " ".join(f"{n} = {n}{q}[j];" for n in ["g"] + outs)

    def store(q):
        return " ".join(f"{n}{q}[j] = {n};" for n in outs)

    op = f"ptrdiff_t j; {ct} {', '.join(['g'] + outs + list(temps))};\n{chain(load)}\n{body}\n{chain(store)}"
    return ", ".join(in_params), ", ".join(out_params), op


class CupyOptim:
    """CuPy implementations (mixed into CupyBackend): one kernel launch per bucket (its non-empty
    parameters; more than fit in CUDA's 4 KiB of kernel arguments, or _MAX_SLOTS, take one launch per
    chunk), kernels built once per dtype, options and number of parameters and cached. Other dtypes than
    float16/32/64 (complex SGD: the other optimizers update complex parameters as float pairs) take the
    array ops of NumpyOptim on CuPy."""

    def _optim_kernel(self, family, dtype, source, flags, k=1):
        key = (self.xp, family, dtype, flags, k)     # per CuPy module: the stand-in's are not real ones
        kern = _KERNELS.get(key, False)
        if kern is False:
            t = _CTYPE_OF.get(dtype)
            kern = None
            if t is not None:
                ins, outs, body, *temps = source(*flags)
                ins, outs, op = _multi_source(ins, outs, body, k, t, *temps)
                kern = self.xp.ElementwiseKernel(ins, outs, op, f"ag_{family}{k}_{t}_" +
                                                 "".join("1" if f else "0" for f in flags))
            _KERNELS[key] = kern
        return kern

    def _launch(self, family, source, flags, numbers, rows):
        """Update every parameter of ``rows`` ([g, p, state...] a parameter, same dtype): one launch per
        chunk of parameters whose arrays fit the argument space; False where the dtype has no kernel."""
        # plain loops, no generator per parameter: this runs every step for every parameter (host time on CUDA)
        flat, costs = [], []
        for r in rows:
            if r[1].size:
                q, cost = [], 8
                for a in r:
                    if a.ndim != 1 and a.flags.c_contiguous:
                        a = a.reshape(-1)
                    q.append(a)
                    cost += 16 + 16 * (a.ndim or 1)     # a raw array's CArray: pointer, size, shape, strides
                flat.append(q)
                costs.append(cost)
        if not flat:
            return True
        dtype = flat[0][1].dtype
        if dtype not in _CTYPE_OF:
            return False
        budget = _ARG_BYTES - 8 * len(numbers)
        chunk, used = [], 0
        flat.append(None)
        costs.append(None)
        for r, cost in zip(flat, costs):
            if chunk and (r is None or used + cost > budget or len(chunk) == _MAX_SLOTS):
                kern = self._optim_kernel(family, dtype, source, flags, len(chunk))
                firsts, offs, rest, n = [], [], [], 0
                for c in chunk:
                    firsts.append(c[0])
                    rest += c[1:]
                    n += c[1].size
                    offs.append(n)
                kern(*firsts, *offs[:-1], *numbers, *rest, size=n)
                chunk, used = [], 0
            if r is not None:
                chunk.append(r)
                used += cost
        return True

    def sgd_step(self, params, grads, bufs, lr, weight_decay=0.0, momentum=0.0, dampening=0.0, nesterov=False,
                 maximize=False, first=False):
        """As NumpyOptim.sgd_step: one launch for the bucket."""
        flags = (weight_decay != 0, bool(maximize), momentum != 0, dampening != 0, bool(nesterov), bool(first))
        nums = [lr] + ([weight_decay] if flags[0] else []) + ([momentum] if flags[2] else []) + \
            ([1 - dampening] if flags[3] else [])
        rows = [[g, a] + ([bufs[i]] if flags[2] else []) for i, (a, g) in enumerate(zip(params, grads))]
        with self._cuda_device:
            if not self._launch("sgd", _sgd_source, flags, nums, rows):
                _sgd(self.xp, self.axpy, params, grads, bufs, lr, weight_decay, momentum, dampening,
                     nesterov, maximize, first)

    def adam_step(self, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, beta1, beta2, eps, weight_decay,
                  decoupled, maximize, step_size, bias2, decay):
        """As NumpyOptim.adam_step: one launch for the bucket."""
        amsgrad = max_exp_avg_sqs is not None
        flags = (weight_decay != 0, bool(decoupled), bool(maximize), amsgrad)
        nums = [beta1, 1 - beta1, beta2, 1 - beta2, eps, step_size, bias2]
        if flags[0]:
            nums.append(decay if decoupled else weight_decay)
        rows = [[g, a, m, v] + ([max_exp_avg_sqs[i]] if amsgrad else [])
                for i, (a, g, m, v) in enumerate(zip(params, grads, exp_avgs, exp_avg_sqs))]
        with self._cuda_device:
            if not self._launch("adam", _adam_source, flags, nums, rows):
                _adam(self.xp, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, beta1,
                      beta2, eps, weight_decay, decoupled, maximize, step_size, bias2, decay)

    def rmsprop_step(self, params, grads, square_avgs, grad_avgs, momentum_bufs, lr, alpha, eps, weight_decay,
                     momentum, maximize):
        """As NumpyOptim.rmsprop_step: one launch for the bucket."""
        centered, mom = grad_avgs is not None, momentum_bufs is not None
        flags = (weight_decay != 0, bool(maximize), centered, mom)
        nums = [lr, alpha, 1 - alpha, eps] + ([weight_decay] if flags[0] else []) + ([momentum] if mom else [])
        rows = [[g, a, s] + ([grad_avgs[i]] if centered else []) + ([momentum_bufs[i]] if mom else [])
                for i, (a, g, s) in enumerate(zip(params, grads, square_avgs))]
        with self._cuda_device:
            if not self._launch("rmsprop", _rmsprop_source, flags, nums, rows):
                _rmsprop(self.xp, params, grads, square_avgs, grad_avgs, momentum_bufs, lr,
                         alpha, eps, weight_decay, momentum, maximize)

    def adagrad_step(self, params, grads, sums, clr, weight_decay, eps, maximize):
        """As NumpyOptim.adagrad_step: one launch for the bucket."""
        flags = (weight_decay != 0, bool(maximize))
        nums = [clr, eps] + ([weight_decay] if flags[0] else [])
        rows = [[g, a, s] for a, g, s in zip(params, grads, sums)]
        with self._cuda_device:
            if not self._launch("adagrad", _adagrad_source, flags, nums, rows):
                _adagrad(self.xp, params, grads, sums, clr, weight_decay, eps, maximize)

    def adamax_step(self, params, grads, exp_avgs, exp_infs, clr, beta1, beta2, eps, weight_decay, maximize):
        """As NumpyOptim.adamax_step: one launch for the bucket."""
        flags = (weight_decay != 0, bool(maximize))
        nums = [clr, 1 - beta1, beta2, eps] + ([weight_decay] if flags[0] else [])
        rows = [[g, a, m, u] for a, g, m, u in zip(params, grads, exp_avgs, exp_infs)]
        with self._cuda_device:
            if not self._launch("adamax", _adamax_source, flags, nums, rows):
                _adamax(self.xp, params, grads, exp_avgs, exp_infs, clr, beta1, beta2, eps, weight_decay, maximize)

    def nadam_step(self, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
                   decay, bias2, c_grad, c_avg):
        """As NumpyOptim.nadam_step: one launch for the bucket."""
        flags = (weight_decay != 0, bool(decoupled), bool(maximize))
        nums = [1 - beta1, beta2, 1 - beta2, eps, bias2, c_grad, c_avg]
        if flags[0]:
            nums.append(decay if decoupled else weight_decay)
        rows = [[g, a, m, v] for a, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs)]
        with self._cuda_device:
            if not self._launch("nadam", _nadam_source, flags, nums, rows):
                _nadam(self.xp, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled,
                       maximize, decay, bias2, c_grad, c_avg)

    def radam_step(self, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled, maximize,
                   decay, adaptive, plain):
        """As NumpyOptim.radam_step: one launch for the bucket (a kernel each side of the rectification)."""
        flags = (weight_decay != 0, bool(decoupled), bool(maximize), adaptive != 0)
        nums = [1 - beta1, beta2, 1 - beta2, eps, adaptive if flags[3] else plain]
        if flags[0]:
            nums.append(decay if decoupled else weight_decay)
        rows = [[g, a, m, v] for a, g, m, v in zip(params, grads, exp_avgs, exp_avg_sqs)]
        with self._cuda_device:
            if not self._launch("radam", _radam_source, flags, nums, rows):
                _radam(self.xp, params, grads, exp_avgs, exp_avg_sqs, beta1, beta2, eps, weight_decay, decoupled,
                       maximize, decay, adaptive, plain)

    def adadelta_step(self, params, grads, square_avgs, acc_deltas, lr, rho, eps, weight_decay, maximize):
        """As NumpyOptim.adadelta_step: one launch for the bucket."""
        flags = (weight_decay != 0, bool(maximize))
        nums = [lr, rho, 1 - rho, eps] + ([weight_decay] if flags[0] else [])
        rows = [[g, a, s, u] for a, g, s, u in zip(params, grads, square_avgs, acc_deltas)]
        with self._cuda_device:
            if not self._launch("adadelta", _adadelta_source, flags, nums, rows):
                _adadelta(self.xp, params, grads, square_avgs, acc_deltas, lr, rho, eps, weight_decay, maximize)

    def asgd_step(self, params, grads, axs, shrink, eta, mu, weight_decay, maximize):
        """As NumpyOptim.asgd_step: one launch for the bucket."""
        flags = (weight_decay != 0, bool(maximize))
        nums = [shrink, eta, mu] + ([weight_decay] if flags[0] else [])
        rows = [[g, a, ax] for a, g, ax in zip(params, grads, axs)]
        with self._cuda_device:
            if not self._launch("asgd", _asgd_source, flags, nums, rows):
                _asgd(self.xp, params, grads, axs, shrink, eta, mu, weight_decay, maximize)

    def rprop_step(self, params, grads, prevs, sizes, etaminus, etaplus, min_step, max_step, maximize):
        """As NumpyOptim.rprop_step: one launch for the bucket."""
        flags = (bool(maximize),)
        nums = [etaminus, etaplus, min_step, max_step, 0.0, 1.0, -1.0]
        rows = [[g, a, prev, size] for a, g, prev, size in zip(params, grads, prevs, sizes)]
        with self._cuda_device:
            if not self._launch("rprop", _rprop_source, flags, nums, rows):
                _rprop(self.xp, params, grads, prevs, sizes, etaminus, etaplus, min_step, max_step, maximize)
