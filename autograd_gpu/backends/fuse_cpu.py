"""The CPU fuser of ag.compile: block kernels and numexpr kernels for runs of elementwise steps, peepholes,
and output buffers.

A step is elementwise when it is a NumPy ufunc (or an operator, or the backend's sigmoid) on float32
or float64 arrays of one dtype, Python numbers and one-value constants. A step's result is folded into
its consumer when neither escapes the program, nothing views it, and nothing writes the inputs of the
folded expression in between. A run whose arrays all have the result's shape becomes a *block kernel*:
eager mode's own ufuncs applied block by block (256 or 512 KiB) into cached scratch buffers, split over the cores,
transcendental functions included (NumPy's SIMD exp), shared subexpressions once per block; so the
results are eager's bit for bit. A run that broadcasts becomes a numexpr kernel (arithmetic only).

Measured on this 2-core box (4M float32 ``sigmoid(x)*x`` squared and summed, forward + backward, one
thread, CPU ms): block kernel 11.1, a hand-written numba fastmath loop 15.8 (plus 0.4 s or more of JIT per
kernel), NumPy sigmoid + numexpr arithmetic 23.9, numexpr alone 30.3. See docs/compile.md.

Results that stay inside the program get buffers allocated once per program and reused by liveness, views
of them included: elementwise steps and other ufunc calls, matmuls, float sums and max/min take them as
``out=``, allocations (``empty``/``zeros``/``ones``) become the buffer refilled, and a copy that
``ascontiguousarray`` makes every replay a copy into one. A warm replay allocates only what it hands out.
"""
import operator
import os

import numpy as np

from .fusers import register_fuser
from .trace_ir import Ref, Step, alias_groups as _alias_groups, rename_refs as _renamed
from .numpy_backend import NumpyBackend, float_matmul

try:
    import numexpr as _ne
    from numexpr import necompiler as _nec
except ImportError:        # compile still works, unfused
    _ne = None

__all__ = ["NumpyFuser", "FUSE_MIN", "BUFFER_MIN"]

FUSE_MIN = 1 << 15       # elements: below this numexpr's ~3 us call costs more than NumPy's passes
BUFFER_MIN = 1          # elements: with the output passed positionally, a buffer is cheaper than allocating at any size

# operator / ufunc -> (numexpr template, the ufunc that takes out=)
_OPS = {
    operator.add: ("({0} + {1})", np.add), operator.sub: ("({0} - {1})", np.subtract),
    operator.mul: ("({0} * {1})", np.multiply), operator.truediv: ("({0} / {1})", np.true_divide),
    operator.neg: ("(-{0})", np.negative), operator.lt: ("({0} < {1})", np.less),
    operator.le: ("({0} <= {1})", np.less_equal), operator.gt: ("({0} > {1})", np.greater),
    operator.ge: ("({0} >= {1})", np.greater_equal), operator.eq: ("({0} == {1})", np.equal),
    operator.ne: ("({0} != {1})", np.not_equal), operator.pow: ("({0} ** {1})", np.power),
}
for _u, _t in ((np.add, "({0} + {1})"), (np.subtract, "({0} - {1})"), (np.multiply, "({0} * {1})"),
               (np.true_divide, "({0} / {1})"), (np.negative, "(-{0})"), (np.power, "({0} ** {1})"),
               (np.less, "({0} < {1})"), (np.greater, "({0} > {1})"), (np.less_equal, "({0} <= {1})"),
               (np.greater_equal, "({0} >= {1})"), (np.equal, "({0} == {1})"), (np.not_equal, "({0} != {1})"),
               (np.exp, "exp({0})"), (np.log, "log({0})"), (np.log1p, "log1p({0})"), (np.expm1, "expm1({0})"),
               (np.sqrt, "sqrt({0})"), (np.sin, "sin({0})"), (np.cos, "cos({0})"), (np.tan, "tan({0})"),
               (np.tanh, "tanh({0})"), (np.sinh, "sinh({0})"), (np.cosh, "cosh({0})"),
               (np.arctan, "arctan({0})"), (np.arcsin, "arcsin({0})"), (np.arccos, "arccos({0})"),
               (np.absolute, "abs({0})"), (np.square, "({0} * {0})"), (np.reciprocal, "(1 / {0})")):
    _OPS[_u] = (_t, _u)
_SIGMOID = NumpyBackend.sigmoid
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_NO_POSITIONAL_OUT = (np.maximum, np.minimum)     # NumPy 2.4 deprecates a third positional argument there


class _Kernel:
    """A replacement step: one numexpr kernel (or one buffered ufunc) writing value ``outs``."""
    kind = "call"
    mutates = ()
    shape_guard = None
    scalar = False
    fresh = True

    def __init__(self, outs, fn, args, buffer, refs, extra=None, kwargs=None, takes_out=False):
        self.outs, self.fn, self.args, self.buffer, self._refs, self.extra = outs, fn, args, buffer, refs, extra
        self.kwargs = kwargs or {}
        self.takes_out = takes_out        # a kernel that writes into a planned buffer given as out=

    def refs(self):
        return self._refs

    def source(self, em, i):
        args = ", ".join(em.expr(a) for a in self.args)
        if self.buffer and not self.kwargs and not self.extra and self.fn.__class__ is np.ufunc and \
                len(self.args) == self.fn.nin and self.fn not in _NO_POSITIONAL_OUT:
            # a plain ufunc call takes its output positionally: cheaper to parse than out= (~30 ns a call)
            return [f"v{self.outs} = {em.const(self.fn)}({args}, {self.buffer})"]
        kw = f", out={self.buffer}" if self.buffer else ""
        kw += "".join(f", {k}={em.expr(v)}" for k, v in self.kwargs.items())
        if self.extra:
            kw += self.extra
        note = f"  # {self.expr}" if getattr(self, "expr", None) else ""
        return [f"v{self.outs} = {em.const(self.fn)}({args}{kw}){note}"]


class NumpyFuser:
    fold_constants = True           # program.py computes calls on constants once, at trace time

    def __init__(self, backend):
        self.backend = backend

    def plan(self, steps, inputs, keep, values, em):
        group = _alias_groups(steps)
        steps, renamed = _ssa(steps, values, set(inputs), group)
        keep = {renamed.get(v, v) for v in keep}
        steps = _negations(_constants(steps, values, keep), values, keep)
        _peephole(steps, values, keep)
        uses, producer = {}, {}
        for i, s in enumerate(steps):
            for v in s.refs():
                uses[v] = uses.get(v, 0) + 1
            if s.kind == "call" and isinstance(s.outs, int):
                producer[s.outs] = i
        group = _alias_groups(steps)
        escaping = set()
        for v in keep:
            escaping |= group.get(v, {v})
        mut_at = {}
        for i, s in enumerate(steps):
            for v in s.mutates:
                for m in group.get(v, (v,)):    # a write through a view writes all of its aliases
                    mut_at.setdefault(m, []).append(i)

        ew = {}                                  # step index -> (template, ufunc, leaf args)
        for i, s in enumerate(steps):
            e = _elementwise(s, values)
            if e is not None:
                ew[i] = e

        consumers = {}
        for i, s in enumerate(steps):
            for v in s.refs():
                consumers.setdefault(v, []).append(i)

        def foldable(v, at):
            i = producer.get(v)
            if i is None or i not in ew or v in escaping or len(group.get(v, (v,))) > 1 or values[v].size < FUSE_MIN:
                return False
            if uses.get(v) == 1:
                return True
            # several consumers: each folds its own copy when the producer is a little plain arithmetic
            # (up to 4 ops, no function, at most 3 arrays): reading its inputs again is cheaper than
            # writing and reading its result
            e = exprs.get(i)
            if e is not None and e[0].blocked and all(c in blockable for c in consumers[v]):
                return True     # blocked consumers: a kernel computes it once per block (shared subexpression)
            return (all(c in ew for c in consumers[v]) and e is not None and e[0].plain_ops() <= 4
                    and len({x.vid for x in e[1] if x.__class__ is Ref}) <= 3)

        blockable = {i for i in ew if _blockable(steps[i], values)}
        exprs, folded, folded_into = {}, set(), {}   # index -> (expr, leaves, first index)
        for i in sorted(ew):
            tmpl, fn, args = ew[i]
            blk = i in blockable
            if not blk and (_ne is None or any(c.isalpha() for c in tmpl)):
                continue            # exp, tanh, sigmoid...: NumPy's SIMD loops beat numexpr's (see above)
            parts, leaves, first = [], [], i
            for a in args:
                if a.__class__ is Ref and foldable(a.vid, i) and producer[a.vid] in exprs:
                    j = producer[a.vid]
                    e, lv, f0 = exprs[j]
                    if (blk and not e.blocked) or (not blk and e.has_fn()) or \
                            any(j < k < i for x in lv if x.__class__ is Ref for k in mut_at.get(x.vid, ())):
                        parts.append(a)
                        leaves.append(a)
                        continue
                    folded.add(j)
                    folded_into.setdefault(j, set()).add(i)
                    parts.append(e)
                    leaves.extend(lv)
                    first = min(first, f0)
                else:
                    parts.append(a)
                    leaves.append(a)
            exprs[i] = (_Expr(tmpl, parts, fn, blk), leaves, first)
        for j in list(folded):                  # a producer stays when some consumer did not fold it
            if not set(consumers.get(steps[j].outs, ())) <= folded_into[j]:
                folded.discard(j)

        out_steps, n_fused = [], 0
        for i, s in enumerate(steps):
            if i in folded:
                continue
            if i in exprs and any(isinstance(p, _Expr) for p in exprs[i][0].parts):     # a fused run
                k = self._kernel(exprs[i], s, values, em)
                if k is not None:
                    out_steps.append(k)
                    n_fused += 1
                    continue
                out_steps.extend(self._unfold(i, exprs, steps, folded))
                continue
            out_steps.append(s)
        n_buffers = _plan_buffers(out_steps, values, escaping, group, em, set(inputs))
        return out_steps, n_fused, n_buffers, renamed

    def _unfold(self, i, exprs, steps, folded):
        """The steps folded into i, back in order (their kernel could not be made)."""
        idx = sorted(j for j in folded if _inside(exprs, i, j))
        for j in idx:
            folded.discard(j)
        return [steps[j] for j in idx] + [steps[i]]

    def _kernel(self, entry, s, values, em):
        e, leaves, _ = entry
        if e.blocked:
            return _blocked_kernel(e, s, values)
        args, sig, seen = [], [], {}
        dt = values[s.outs].dtype
        dt_in = next(values[x.vid].dtype for x in leaves if x.__class__ is Ref)

        def leaf(x):
            if x.__class__ is int and abs(x) < 1 << 24:
                return repr(x)      # an int literal keeps numexpr's float32 (a float literal is a double)
            key = ("v", x.vid) if x.__class__ is Ref else ("c", id(x))
            if key in seen:
                return seen[key]
            name = f"a{len(seen)}"
            seen[key] = name
            if x.__class__ is Ref:
                val = values[x.vid]
                args.append(x)
            else:
                val = np.asarray(x, dtype=dt_in).reshape(())     # a number or a one-element constant
                args.append(val)
            sig.append((name, _ne_type(val.dtype)))
            return name
        try:
            src = e.render(leaf)
            kernel = _ne.NumExpr(src, signature=sig)
            probe = [np.zeros(1, values[a.vid].dtype) if a.__class__ is Ref else a for a in args]
            if kernel(*probe, out=None, order="K", casting="safe", ex_uses_vml=False).dtype != dt:
                return None
        except Exception:           # numexpr refused the expression: leave those steps unfused
            return None
        k = _Kernel(s.outs, kernel, args, None, [a.vid for a in args if a.__class__ is Ref],
                    extra=", order='K', casting='safe', ex_uses_vml=False", takes_out=True)
        k.expr = "numexpr: " + src     # shown as a comment in the program's source
        return k


# a block kernel splits its blocks over this many threads (ufunc loops release the GIL): the cores this
# process may run on, at most 8 (memory bandwidth, not cores, bounds these kernels beyond that)
THREADS = min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
# a block kernel's working set per array, so that the few arrays of a block stay in L2: 256 KiB (64k float32)
# on one thread; 512 KiB on several, where each block's Python (slices, a dozen ufunc calls) also waits for
# the GIL, so fewer blocks pay. The 4M-element step on this 2-core box, ms: two threads 6.5 at 256 KiB,
# 6.0 at 512 KiB, 7.5 at 1 MiB (9.1 at 128 KiB); one thread 9.9, 10.7, 14.9
BLOCK_BYTES = 1 << 18 if THREADS == 1 else 1 << 19
_workers = {}


def _pool():
    """The block kernels' worker threads (THREADS - 1 of them; the calling thread runs one share). One pool
    per process: a forked child has none of its parent's threads, so it makes its own."""
    pid = os.getpid()
    pool = _workers.get(pid)
    if pool is None:
        from concurrent.futures import ThreadPoolExecutor
        _workers.clear()
        pool = _workers[pid] = ThreadPoolExecutor(max(1, THREADS - 1), thread_name_prefix="ag-block")
    return pool


def _blockable(s, values):
    """Whether elementwise step s can run in a block kernel: a float result, and every array operand of the
    result's shape and dtype and C-contiguous (numbers and 0-d constants broadcast)."""
    out = values[s.outs]
    if out.dtype not in _FLOATS or out.size < FUSE_MIN:
        return False
    for a in s.args:
        if a.__class__ is Ref:
            v = values[a.vid]
            if v.shape != out.shape or v.dtype != out.dtype or not v.flags.c_contiguous:
                return False
        elif a.__class__ is np.ndarray and a.ndim:
            return False
    return True


def _blocked_kernel(e, s, values):
    """A fused run as a block kernel: the expression's ufuncs applied block by block (``BLOCK_BYTES`` of
    each array) into scratch buffers that stay in cache, a shared subexpression once per block, so memory
    is read and written once; the same ufuncs as eager mode, so the same values. A replacement step."""
    out = values[s.outs]
    names, args, glob = {}, [], {"np": np}

    def leaf(x):
        if x.__class__ is Ref:
            if x.vid not in names:
                names[x.vid] = f"x{len(args)}"
                args.append(x)
            return names[x.vid]
        if x.__class__ in (int, float):
            return repr(x)
        name = f"c{len(glob)}"
        glob[name] = x
        return name

    order, uses = [], {}

    def visit(n):                          # post-order over the expression DAG, each shared node once
        if id(n) in uses:
            uses[id(n)] += 1
            return
        uses[id(n)] = 1
        for p in n.parts:
            if isinstance(p, _Expr):
                visit(p)
        order.append(n)
    visit(e)
    body, temp_of, free, n_temps, has_sigmoid = [], {}, [], 0, False
    for n in order:
        ops = []
        for p in n.parts:
            if isinstance(p, _Expr):
                ops.append(temp_of[id(p)])
                uses[id(p)] -= 1
                if uses[id(p)] == 0:
                    free.append(temp_of[id(p)])        # an operand dead after this op: its buffer is reusable
            else:
                ops.append(leaf(p))
        if n is e:
            t = "o"
        elif free:
            t = free.pop()
        else:
            t, n_temps = f"t{n_temps}", n_temps + 1
        temp_of[id(n)] = t
        line = _block_op(n, ops, t, glob)
        if line is None:
            return None
        has_sigmoid |= n.fn is None
        body.extend(line)
    if not args:
        return None
    block = max(1024, BLOCK_BYTES // out.itemsize)
    size = out.size
    tail = size % block
    n_blocks = -(-size // block)
    chunks = min(THREADS, n_blocks // 4) or 1          # each thread gets at least 4 blocks
    bounds = [min(size, (n_blocks * c // chunks) * block) for c in range(chunks + 1)]
    temps = [f"t{k}" for k in range(n_temps)]
    glob.update(SHAPE=out.shape, DT=out.dtype, B=block, BOUNDS=bounds, pool=_pool)
    glob["SCRATCH"] = [(tuple(np.empty(block, out.dtype) for _ in temps),) * 2 for _ in range(chunks)]
    if tail:              # the last chunk ends with a short block
        full = glob["SCRATCH"][-1][0]
        glob["SCRATCH"][-1] = (full, tuple(t[:tail] for t in full))
    xs = [f"f{k}" for k in range(len(args))]
    lines = [f"def part({', '.join(xs + ['fo'])}, lo0, hi0, full, short, err):",
             "    with np.errstate(**err):",          # the caller's error settings, in the workers too
             "     for lo in range(lo0, hi0, B):",
             "        hi = lo + B"]
    if temps:
        lines.append(f"        {', '.join(temps)}, = full if hi <= hi0 else short")
    lines.extend(f"        x{k} = f{k}[lo:hi]" for k in range(len(args)))
    lines.append("        o = fo[lo:hi]")
    lines.extend("        " + b for b in body)
    src = "\n".join(lines) + "\n"
    if has_sigmoid:       # exp overflows to inf for x << 0 and gives the right 0, as the backend's sigmoid
        src = src.replace("    with np.errstate(**err):", "    with np.errstate(**{**err, 'over': 'ignore'}):")
    flat = [f"a{k}.reshape(-1)" for k in range(len(args))]          # a copy only if not contiguous
    src += "\n".join([
        f"def kernel({', '.join(f'a{k}' for k in range(len(args)))}, out=None):",
        "    if out is None:",
        "        out = np.empty(SHAPE, DT)",
        f"    fl = ({', '.join(flat + ['out.reshape(-1)'])},)",
        "    err = np.geterr()",
        "    pending = [pool().submit(part, *fl, BOUNDS[c], BOUNDS[c + 1], *SCRATCH[c], err) for c in range(1, len(SCRATCH))]",
        "    part(*fl, BOUNDS[0], BOUNDS[1], *SCRATCH[0], err)",
        "    for p in pending:",
        "        p.result()",
        "    return out"]) + "\n"
    exec(compile(src, "<ag.compile block kernel>", "exec"), glob)
    k = _Kernel(s.outs, glob["kernel"], args, None, [a.vid for a in args], takes_out=True)
    k.expr = "block kernel: " + " ".join(b.split("(")[0] for b in body)
    k.src = src
    return k


def _block_op(n, ops, t, glob):
    """Source lines computing node n from operand names ``ops`` into buffer name ``t``."""
    fn = n.fn
    if fn is None:                        # the backend's sigmoid, its own passes: 1 / (1 + exp(-x))
        return [f"np.negative({ops[0]}, out={t})", f"np.exp({t}, out={t})", f"np.add({t}, 1, out={t})",
                f"np.reciprocal({t}, out={t})"]
    if fn is np.power and len(ops) == 2 and ops[1] in ("2", "2.0"):
        return [f"np.square({ops[0]}, out={t})"]    # x ** 2 is NumPy's fast square, as in eager mode
    name = getattr(fn, "__name__", None)
    if not isinstance(fn, np.ufunc) or getattr(np, name, None) is not fn:
        return None
    return [f"np.{name}({', '.join(ops)}, out={t})"]


def _inside(exprs, i, j):
    """Whether step j was folded (transitively) into step i's expression."""
    stack = [exprs[i][0]]
    target = exprs.get(j, (None,))[0]
    while stack:
        e = stack.pop()
        if e is target:
            return True
        stack.extend(p for p in e.parts if isinstance(p, _Expr))
    return False


class _Expr:
    """One elementwise step with the steps folded into it: ``tmpl`` its numexpr template, ``fn`` its ufunc
    (None: the backend's sigmoid), ``blocked``: every array in it has the result's shape (block kernels)."""
    __slots__ = ("tmpl", "parts", "fn", "blocked")

    def __init__(self, tmpl, parts, fn=None, blocked=False):
        self.tmpl, self.parts, self.fn, self.blocked = tmpl, parts, fn, blocked

    def has_fn(self):
        return any(c.isalpha() for c in self.tmpl) or any(isinstance(p, _Expr) and p.has_fn() for p in self.parts)

    def plain_ops(self):
        """The number of operations, or 99 when there is a function call or a power (not cheap)."""
        if any(c.isalpha() for c in self.tmpl) or "**" in self.tmpl:
            return 99
        return 1 + sum(p.plain_ops() for p in self.parts if isinstance(p, _Expr))

    def render(self, leaf):
        return self.tmpl.format(*(p.render(leaf) if isinstance(p, _Expr) else leaf(p) for p in self.parts))


def _ne_type(dtype):
    return {"b": _nec.kind_to_type["bool"], "f4": _nec.kind_to_type["float"],
            "f8": _nec.kind_to_type["double"]}[dtype.kind if dtype.kind == "b" else dtype.str[1:]]


def _elementwise(s, values):
    """(template, ufunc, args) when step s is elementwise on one float dtype, else None."""
    if s.kind != "call" or s.kwargs or not isinstance(s.outs, int) or s.mutates:
        return None
    fn = s.fn
    if getattr(fn, "__func__", None) is _SIGMOID:
        op = ("(1 / (1 + exp(-{0})))", None)
    else:
        try:
            op = _OPS.get(fn)
        except TypeError:
            return None
    if op is None:
        return None
    out = values[s.outs]
    if out.ndim == 0:
        return None
    dts = {values[a.vid].dtype for a in s.args if a.__class__ is Ref}
    if not dts or len(dts) > 1:
        return None
    dt = dts.pop()
    if dt not in _FLOATS or (out.dtype != dt and out.dtype.kind != "b"):
        return None
    args = list(s.args)
    for i, a in enumerate(args):
        if a.__class__ is float and a.is_integer() and abs(a) <= 4 and (fn is operator.pow or fn is np.power):
            args[i] = int(a)        # x ** 2.0 as x ** 2: numexpr multiplies instead of calling pow
        elif a.__class__ is np.ndarray and a.size == 1 and a.dtype == dt and a.ndim <= out.ndim:
            continue                # a folded constant (the backward's seed): broadcasts like a number
        elif a.__class__ is not Ref and a.__class__ not in (float, int):
            return None
    return op[0], op[1], args


_INPLACE = {operator.iadd: operator.add, operator.isub: operator.sub, operator.imul: operator.mul,
            operator.itruediv: operator.truediv, operator.ipow: operator.pow}


def _ssa(steps, values, inputs, group):
    """``a += b`` on an array made inside the program, that nothing views, becomes ``a2 = a + b`` with
    later uses of ``a`` renamed: in-place updates no longer break runs of elementwise steps.
    Returns (steps, {old vid: newest vid})."""
    rename, out = {}, []
    nxt = max(values) + 1 if values else 0
    for s in steps:
        if rename:
            s.args = _renamed(s.args, rename)
            s.kwargs = _renamed(s.kwargs, rename)
            # a later step that writes the array (maximum(y, 0, out=y)) or returns it: the trace numbers an
            # array once, so that step's result and writes are the array's newest value
            s.mutates = tuple(rename.get(v, v) for v in s.mutates)
            o = s.outs
            if o.__class__ is int:
                s.outs = rename.get(o, o)
            elif o.__class__ is tuple:
                s.outs = tuple(rename.get(v, v) if v is not None else None for v in o)
        fn = s.fn if s.kind == "call" and not s.kwargs and len(s.args) == 2 else None
        op = _INPLACE.get(fn) if fn is not None and fn.__class__ is not type else None
        a = s.args[0] if op is not None else None
        if a is not None and a.__class__ is Ref and a.vid not in inputs and len(group.get(a.vid, (a.vid,))) == 1 \
                and values[a.vid].dtype in _FLOATS:
            n = Step("call", op, s.args, {}, s.label)
            n.outs, n.fresh = nxt, True
            n.scalar = values[a.vid].ndim == 0      # a 0-d a + b is a NumPy scalar: wrapped back into an array
            values[nxt] = values[a.vid]
            old = [k for k, v in rename.items() if v == a.vid]
            for k in old:
                rename[k] = nxt
            rename[a.vid] = nxt
            nxt += 1
            out.append(n)
            continue
        out.append(s)
    return out, rename


def _peephole(steps, values, keep):
    """Cheaper calls for the same results: a float ``sum`` as ``add.reduce`` (no Python wrapper), a column
    sum of a matrix as ``ones @ x`` (same sums, BLAS's order), a float matmul as ``float_matmul`` (an outer
    product as a multiply), and
    ``broadcast_to`` dropped where every consumer is elementwise with the broadcast shape (the ufunc
    broadcasts by itself; the unused call is then removed)."""
    consumers = {}
    for i, s in enumerate(steps):
        for v in s.refs():
            consumers.setdefault(v, []).append(i)
        if (s.fn is np.sum and s.kind == "call" and set(s.kwargs) <= {"axis", "keepdims"} and s.args
                and s.args[0].__class__ is Ref and values[s.args[0].vid].dtype in _FLOATS and len(s.args) == 1):
            s.fn = np.add.reduce
        elif (getattr(s.fn, "__func__", None) is NumpyBackend.matmul and s.kind == "call" and len(s.args) == 2
              and set(s.kwargs) <= {"out"} and any(a.__class__ is Ref for a in s.args)
              and all(a.dtype in _FLOATS for a in _operands(s.args, values))):
            s.fn = float_matmul        # what the backend's matmul calls for these dtypes, without its wrapper
            a, b = _operands(s.args, values)
            if a.ndim == 2 and b.ndim == 2 and a.shape[1] == 1 and a.dtype == b.dtype:
                s.fn = np.multiply     # (m, 1) @ (1, n): each element is one product, exactly; no BLAS call
        if (_is_add_reduce(s.fn) and s.kind == "call" and len(s.args) == 1 and s.args[0].__class__ is Ref
                and s.kwargs.get("axis") in (0, (0,)) and not s.kwargs.get("keepdims", False)
                and set(s.kwargs) <= {"axis", "keepdims"}):
            x = values[s.args[0].vid]
            if x.ndim == 2 and x.shape[0] > 1 and x.shape[1] > 1 and x.dtype in _FLOATS:
                # a bias gradient (column sums) as a BLAS product with ones: 3x faster than the strided reduction
                s.fn, s.args, s.kwargs = float_matmul, (np.ones(x.shape[0], x.dtype), s.args[0]), {}
    for s in steps:
        if s.kind != "call" or not isinstance(s.outs, int) or s.outs in keep or s.kwargs or not s.args:
            continue
        src, out = s.args[0], s.outs
        if src.__class__ is not Ref:
            continue
        if s.fn is np.broadcast_to:
            target = values[out].shape          # the consumer's result must have exactly this shape
        elif s.fn is np.ndarray.reshape and values[src.vid].size == 1:
            target = None                       # one element broadcasts into anything
        else:
            continue
        users = [steps[i] for i in consumers.get(out, ())]
        # each consumer needs another operand of its full result shape, which then gives the result its shape
        if users and all(_elementwise(u, values) is not None and (target is None or values[u.outs].shape == target)
                         and values[src.vid].ndim <= values[u.outs].ndim
                         and values[src.vid].dtype == values[out].dtype and
                         any(a.__class__ is Ref and a.vid != out and values[a.vid].shape == values[u.outs].shape
                             for a in u.args) for u in users):
            for u in users:
                u.args = _renamed(u.args, {out: src.vid})


def _constants(steps, values, keep):
    """Folded constants in elementwise steps (program.fold_constants): one that holds a single value (a
    broadcast view, a one-element array) becomes a 0-d array when another operand gives the result its
    shape, so the step can fuse; a product with such a constant 1 (the backward's seed) is dropped, and
    its result renamed to the other operand, when nothing writes, views or hands out that result."""
    group = _alias_groups(steps)
    written = set()
    for s in steps:
        for v in s.mutates:
            written |= group.get(v, {v})
    rename, out = {}, []
    for s in steps:
        if rename:
            s.args, s.kwargs = _renamed(s.args, rename), _renamed(s.kwargs, rename)
        if (s.kind == "call" and not s.kwargs and isinstance(s.outs, int) and s.fn in _OPS and not s.mutates
                and any(a.__class__ is np.ndarray for a in s.args)):
            shape = values[s.outs].shape
            full = [a for a in s.args if a.__class__ is Ref and values[a.vid].shape == shape]
            if full:
                s.args = tuple(_as_number(a) if a.__class__ is np.ndarray else a for a in s.args)
            one = [a for a in s.args if a.__class__ is np.ndarray and a.ndim == 0 and a == 1]
            if (one and full and (s.fn is operator.mul or s.fn is np.multiply) and len(s.args) == 2
                    and values[full[0].vid].dtype == values[s.outs].dtype == one[0].dtype
                    and s.outs not in keep and s.outs not in written and full[0].vid not in written
                    and len(group.get(s.outs, ())) <= 1):
                rename[s.outs] = full[0].vid        # x * 1 is x, exactly
                continue
        out.append(s)
    return out


def _negations(steps, values, keep):
    """``-(c * x)`` with a constant c, the product used only there, as ``(-c) * x``: one step fewer, and
    exactly the same floats (negation commutes with rounding). The backward of ``relu(1 - y * s)``."""
    uses, producer = {}, {}
    for s in steps:
        for v in s.refs():
            uses[v] = uses.get(v, 0) + 1
        if s.kind == "call" and isinstance(s.outs, int):
            producer[s.outs] = s
    rename, out = {}, []
    for s in steps:
        if rename:
            s.args, s.kwargs = _renamed(s.args, rename), _renamed(s.kwargs, rename)
        a = s.args[0] if (s.kind == "call" and not s.kwargs and len(s.args) == 1 and not s.mutates
                          and (s.fn is operator.neg or s.fn is np.negative) and isinstance(s.outs, int)) else None
        p = producer.get(a.vid) if a.__class__ is Ref else None
        if (p is not None and uses.get(a.vid) == 1 and a.vid not in keep and s.outs not in keep
                and (p.fn is operator.mul or p.fn is np.multiply) and not p.kwargs and not p.mutates
                and len(p.args) == 2 and values[p.outs].dtype in _FLOATS
                and values[p.outs].dtype == values[s.outs].dtype and values[p.outs].shape == values[s.outs].shape):
            k = [i for i, x in enumerate(p.args) if x.__class__ in (float, np.ndarray)]
            if len(k) == 1 and sum(x.__class__ is Ref for x in p.args) == 1:
                c = p.args[k[0]]
                p.args = tuple((np.negative(c) if c.__class__ is np.ndarray else -c) if i == k[0] else x
                               for i, x in enumerate(p.args))
                rename[s.outs] = p.outs
                continue
        out.append(s)
    return out


def _as_number(a):
    """A constant holding one value, repeated (strides 0) or single: that value as a 0-d array."""
    if a.ndim and a.size and (a.size == 1 or not any(a.strides)):
        return np.array(a.reshape(-1)[0] if a.size == 1 else a[(0,) * a.ndim], dtype=a.dtype)
    return a


def _plan_buffers(steps, values, escaping, group, em, inputs):
    """Give results made inside the program a buffer from a pool, returned when the last use of any of
    their views is past."""
    last = {}
    for i, s in enumerate(steps):
        for v in s.refs():
            for m in group.get(v, (v,)):
                last[m] = i
        outs = s.outs if isinstance(s.outs, tuple) else (s.outs,)
        for o in outs:
            if o is not None:
                last.setdefault(o, i)
    pool, free_at, owner, n = {}, {}, {}, 0       # owner: value -> (key, the buffer it was given)
    for i, s in enumerate(steps):
        for key, name in free_at.pop(i - 1, ()):
            pool.setdefault(key, []).append(name)
        o = s.outs
        # a result that views share gets a buffer too: the pool takes it back after the last use of any
        # view (``last`` above is kept per alias group), and every step below makes a new array of its own
        if not isinstance(o, int) or o in escaping:
            continue
        val = values[o]
        if val.size < BUFFER_MIN:
            continue
        fill = _allocation(s, val) if s.__class__ is Step else False
        if fill is False and s.__class__ is Step and _copy_of_own_value(s, o, group, inputs):
            fill = _COPY
        if fill is not False:
            fn = None
        elif isinstance(s, _Kernel):
            if s.buffer is not None or not s.takes_out:
                continue
            fn = None
        elif _takes_out(s) and val.dtype in _FLOATS:
            fn, args = s.fn, s.args     # a matmul, a float sum or max: the same call with out=
        else:
            fn = _ufunc(s, val, values)  # operators and ufuncs (maximum(x, 0), g * mask): the call with out=
            if fn is None:
                continue
            args = _typed_numbers(s.args, values)
            c = next((values[a.vid].dtype.char for a in s.args if a.__class__ is Ref), "")
            if args is not s.args and not any(t.startswith(c * fn.nin + "->") for t in fn.types):
                args = s.args       # numbers typed only where the ufunc has that loop: ldexp(x, 2) has none
        # a buffer has the traced result's strides: a view taken at trace time (conv's and max pooling's
        # as_strided windows) keeps the strides it read then, so a C-ordered buffer for a result a ufunc
        # made F-ordered (from a transposed operand) would be read through the wrong strides
        layout = None if val.flags.c_contiguous else val.strides
        if layout is not None and isinstance(s, _Kernel):
            if len(group.get(o, (o,))) > 1:
                continue            # a fused kernel writes C order; views of its result read the trace's strides
            layout = None
        key = (val.shape, val.dtype.str, layout)
        name = _dying_operand(fn, args, i, key, last, owner, values) if fn is not None else None
        free = pool.get(key)
        if name is not None:        # the ufunc writes over an operand it reads for the last time
            free_at[i].remove((key, name))
        elif free:
            name = free.pop()
        else:
            buf = np.empty(val.shape, val.dtype) if layout is None else np.empty_like(val)
            if buf.strides != val.strides and layout is not None:
                continue            # a layout empty_like cannot make (not dense)
            name = em.const(buf)
            n += 1
        owner[o] = (key, name)
        if fill is not False:
            s = steps[i] = _Filled(o, s.fn, fill, s.args[0] if fill is _COPY else None)
        elif not isinstance(s, _Kernel):
            s = steps[i] = _Kernel(o, fn, args, None, s.refs(),
                                   kwargs={k: v for k, v in s.kwargs.items() if k != "out"})
        s.buffer = name
        free_at.setdefault(last.get(o, i), []).append((key, name))
    return n


def _dying_operand(fn, args, i, key, last, owner, values):
    """The buffer of an operand of ufunc step i that has the result's shape and dtype and is not used after
    step i (nor any of its views): the result may overwrite it in place (an elementwise loop reads each
    element before writing it), which keeps one array fewer in the caches (a bias added to a product)."""
    if fn.__class__ is not np.ufunc or fn is np.matmul:
        return None
    for a in args:
        if a.__class__ is Ref and last.get(a.vid) == i and a.vid in owner:
            k, name = owner[a.vid]
            if k == key:                # the same shape, dtype and layout
                return name
    return None


# allocations a buffer replaces: the value each replay fills it with (None: empty, filled by later steps)
_ALLOCATIONS = {np.empty: None, np.zeros: 0, np.ones: 1}


def _allocation(s, val):
    """For a step ``empty/zeros/ones(shape, dtype=...)`` of constants: what to fill its buffer with on each
    replay (None for empty); False for any other step. A new array larger than glibc's mmap threshold
    comes back from the system, and its first writes in each replay fault its pages in."""
    if (s.kind != "call" or s.mutates or s.refs()
            or not set(s.kwargs) <= {"dtype"} or len(s.args) != 1 or not val.flags.c_contiguous):
        return False
    try:
        return _ALLOCATIONS.get(s.fn, False)
    except TypeError:           # an unhashable callable
        return False


_COPY = object()        # _Filled's fill for a copy: the buffer takes the step's argument


def _copy_of_own_value(s, o, group, inputs):
    """``ascontiguousarray(x)`` that copied at trace time (a transposed view: max pooling's windows) where x
    is made inside the program: x has the same layout on every replay, so the call copies every time, and
    a copy into a buffer is the same array without the page faults of a new one."""
    if s.fn is not np.ascontiguousarray or s.kwargs or len(s.args) != 1 or s.args[0].__class__ is not Ref \
            or s.mutates:
        return False
    x = s.args[0].vid
    return x != o and not (group.get(x, {x}) & inputs)


class _Filled:
    """An allocation (or a copy) replaced by a planned buffer: the buffer, refilled (or copied into) where
    the call made a new array."""
    kind = "call"
    mutates = ()
    shape_guard = None
    scalar = False
    fresh = True
    takes_out = False
    args = ()
    kwargs = {}

    def __init__(self, outs, fn, fill, src=None):
        self.outs, self.fn, self.fill, self.src, self.buffer = outs, fn, fill, src, None

    def refs(self):
        return [self.src.vid] if self.src is not None else []

    def source(self, em, i):
        if self.src is not None:
            return [f"{em.const(np.copyto)}({self.buffer}, v{self.src.vid})", f"v{self.outs} = {self.buffer}"]
        if self.fill is None:
            return [f"v{self.outs} = {self.buffer}"]
        return [f"{self.buffer}.fill({self.fill!r})", f"v{self.outs} = {self.buffer}"]


def _typed_numbers(args, values):
    """An elementwise step's Python numbers as NumPy scalars of its arrays' float dtype: NumPy converts a
    Python number to that dtype on every call (NEP 50: the array's dtype wins), a NumPy scalar of it costs
    ~100 ns less. The same value either way; a number that does not fit (an overflow to inf, an integer
    float32 cannot hold exactly) stays as it is."""
    dts = {values[a.vid].dtype for a in args if a.__class__ is Ref}
    if len(dts) != 1:
        return args
    dt = dts.pop()
    if dt not in _FLOATS:
        return args
    out = []
    for a in args:
        if a.__class__ is float or a.__class__ is int:
            with np.errstate(all="ignore"):
                t = dt.type(a)
            if (a.__class__ is int and abs(a) < 2 ** 24 and float(t) == a) or \
                    (a.__class__ is float and (np.isfinite(t) or not np.isfinite(a))):
                a = t
        out.append(a)
    return out


def _takes_out(s):
    """A matmul, ``add.reduce`` or an array's ``max``/``min`` with no out= yet: all write into a given array."""
    if s.kind != "call" or s.kwargs.get("out") is not None or s.scalar or any(
            v.__class__ is Ref for k, v in s.kwargs.items()):
        return False
    return getattr(s.fn, "__func__", None) is NumpyBackend.matmul or s.fn is float_matmul or s.fn is np.matmul \
        or _is_add_reduce(s.fn) or s.fn is np.ndarray.max or s.fn is np.ndarray.min


def _operands(args, values):
    """The arrays behind a step's arguments (a folded constant is its own value; anything else a stand-in
    with no float dtype)."""
    return [values[a.vid] if a.__class__ is Ref else a if a.__class__ is np.ndarray else _NOT_ARRAY for a in args]


class _NotArray:
    dtype = None
    ndim = -1


_NOT_ARRAY = _NotArray()


def _ufunc(s, val, values):
    """The ufunc of an operator or one-output ufunc call without keywords on arrays and numbers of numeric or
    bool dtypes, else None: given out= of the traced result's dtype it runs the same loop (NumPy picks
    the loop from the inputs), so it computes the same values into the buffer."""
    fn = s.fn
    if (s.kind != "call" or s.kwargs or s.mutates or val.__class__ is not np.ndarray or val.ndim == 0
            or val.dtype.kind not in "biuf"):
        return None         # (a 0-d result stays a NumPy scalar, as eager mode's is)
    try:
        fn = _OPS[fn][1] if fn in _OPS else fn
    except TypeError:           # an unhashable callable
        return None
    if fn.__class__ is not np.ufunc or fn.nout != 1 or len(s.args) != fn.nin:
        return None
    for a in s.args:
        c = a.__class__
        if c is Ref:
            v = values[a.vid]
            if v.__class__ is not np.ndarray or v.dtype.kind not in "biuf":
                return None
        elif not (c is float or c is int or c is bool or (isinstance(a, (np.generic, np.ndarray))
                                                           and a.dtype.kind in "biuf")):
            return None
    return fn


def _is_add_reduce(fn):
    """``np.add.reduce`` (each attribute access makes a new bound method, so ``is`` cannot tell)."""
    return getattr(fn, "__self__", None) is np.add and getattr(fn, "__name__", None) == "reduce"


register_fuser("numpy", NumpyFuser)
