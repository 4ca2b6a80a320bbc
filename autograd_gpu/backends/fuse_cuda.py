"""The CUDA fuser of ag.compile: generated ElementwiseKernels / ReductionKernels, planned buffers, and the
whole replay captured as a CUDA graph.

Kernels. A step is elementwise when it is an operator, a CuPy ufunc in ``_C`` or the backend's sigmoid
on arrays of one float dtype (bool masks allowed) and scalars. A step's result is folded into its
consumer when it is used only there, is not handed out, nothing views it, has the same float dtype
and nothing writes the inputs of the folded expression in between (fuse_cpu.py's rules). Each run
becomes one ``cupy.ElementwiseKernel`` generated from a small expression IR (``_Node``) that renders
to CUDA C: parameters ``a0..`` for arrays, typed scalar parameters ``k0..`` for constants (so a
float32 kernel never computes in double), integer literals inline. In-place updates (``g += x``)
become kernels writing into their target. A float ``sum`` whose input is such a run becomes one
``cupy.ReductionKernel``. Kernels are cached by (code, dtypes). Results that stay inside the program
get buffers allocated with the program and reused by liveness.

Graphs (``_GraphRunner``). A program without guards, data-dependent shapes or random numbers is
replayed once plainly (compiling the kernels), then captured on a private stream with a private
memory pool (what the capture allocates stays reserved for the graph) and launched on every later
call: inputs the program writes (parameters, optimizer state) are captured by address, the others
are copied into captured buffers; ``host_values`` numbers (a learning rate, Adam's bias corrections)
are computed on the host before each launch and copied into captured 0-d buffers; small results
handed out are copied out of the graph's buffers, large ones handed out as they are while nobody else
holds them (reference counts, checked before the next launch; see ``_GraphRunner``). Matrix products
go to cuBLAS by pointer (cublas_graph.py), since CuPy refuses cuBLAS under capture. Anything that
fails during capture (a transfer, a sync) leaves the program replaying without a graph.

Runs on the stand-in in CI and was checked on an H100 (docs/bench/gpu/); see docs/compile.md.
"""
import operator
import sys

import numpy as np

from .fusers import register_fuser
from . import cublas_graph
from .cupy_backend import CupyBackend, simulated
from .fuse_cuda_vec import VecKernel
from .trace_ir import Ref, alias_groups, real_namespace

__all__ = ["CupyFuser"]

# name -> CUDA C template; the stand-in evaluates the same subset (cupy_standin/_kernels.py)
_C = {"add": "({0} + {1})", "subtract": "({0} - {1})", "multiply": "({0} * {1})", "true_divide": "({0} / {1})",
      "negative": "(-{0})", "less": "({0} < {1})", "less_equal": "({0} <= {1})", "greater": "({0} > {1})",
      "greater_equal": "({0} >= {1})", "equal": "({0} == {1})", "not_equal": "({0} != {1})",
      "exp": "exp({0})", "log": "log({0})", "log1p": "log1p({0})", "expm1": "expm1({0})", "sqrt": "sqrt({0})",
      "sin": "sin({0})", "cos": "cos({0})", "tan": "tan({0})", "tanh": "tanh({0})", "sinh": "sinh({0})",
      "cosh": "cosh({0})", "absolute": "fabs({0})", "square": "({0} * {0})", "reciprocal": "(1 / {0})",
      "sigmoid": "(1 / (1 + exp(-{0})))", "power": "pow({0}, {1})"}
_OPERATORS = {operator.add: "add", operator.sub: "subtract", operator.mul: "multiply",
              operator.truediv: "true_divide", operator.neg: "negative", operator.lt: "less",
              operator.le: "less_equal", operator.gt: "greater", operator.ge: "greater_equal",
              operator.eq: "equal", operator.ne: "not_equal", operator.pow: "power"}
_INPLACE = {operator.iadd: "add", operator.isub: "subtract", operator.imul: "multiply",
            operator.itruediv: "true_divide"}
_RANDOM = frozenset({"rand", "randn", "randint", "permutation", "seed", "set_rng_state", "get_rng_state"})
_FLOATS = frozenset({"float32", "float64"})
_CHECKS = frozenset({"assert_all", "check_range"})       # backend kernels that write the pending-check array
_kernels = {}            # (kind, params, code) -> the cupy kernel object
MAX_KERNEL_OPS = 64     # a kernel's expression is cut where a folded part would be bigger than this
MULTI_FOLD_OPS = 8       # an expression with several consumers is recomputed in each when at most this big


class _Node:
    """The expression IR: an op over children, an array leaf (a Ref), a scalar leaf or an int literal."""
    __slots__ = ("op", "kids", "leaf")

    def __init__(self, op, kids=(), leaf=None):
        self.op, self.kids, self.leaf = op, kids, leaf

    def render(self, name_of):
        if self.op == "leaf":
            return name_of(self.leaf)
        if self.op == "lit":
            return f"({self.leaf})" if self.leaf < 0 else str(self.leaf)
        if self.op == "power" and self.kids[1].op == "lit" and self.kids[1].leaf in (2, 3):
            base = self.kids[0].render(name_of)
            return "(" + " * ".join([base] * self.kids[1].leaf) + ")"
        return _C[self.op].format(*(k.render(name_of) for k in self.kids))

    def size(self):
        """The number of operations (a recomputed expression's cost)."""
        return 0 if self.op in ("leaf", "lit") else 1 + sum(k.size() for k in self.kids)

    def leaves(self, out):
        if self.op == "leaf":
            out.append(self.leaf)
        for k in self.kids:
            k.leaves(out)
        return out


def _c_layout(o, values, group):
    """Whether a kernel may make value o: it is C-contiguous in the trace, or nothing views it."""
    v = values[o]
    return len(group.get(o, (o,))) <= 1 or getattr(v, "ndim", 0) == 0 or v.flags.c_contiguous


class _KernelStep:
    """A replacement step: one generated kernel writing value ``outs`` (into ``target`` when in place)."""
    kind = "call"
    shape_guard = None
    scalar = False
    fresh = True
    kwargs = {}

    def __init__(self, outs, kernel, args, code, target=None, reduce=None):
        self.outs, self.fn, self.args, self.code, self.target, self.reduce = outs, kernel, args, code, target, reduce
        self.buffer = None
        self.mutates = (target,) if target is not None else ()

    def refs(self):
        return [a.vid for a in self.args if a.__class__ is Ref] + ([self.target] if self.target is not None else [])

    def source(self, em, i):
        args = [em.expr(a) for a in self.args]
        if self.target is not None:
            args.append(f"v{self.target}")
        elif self.buffer is not None and self.reduce is None:
            args.append(self.buffer)
        kw = ""
        if self.reduce is not None:
            kw = f", axis={em.const(self.reduce[0])}, keepdims={self.reduce[1]!r}"
            if self.buffer is not None:
                kw += f", out={self.buffer}"
        return [f"v{self.outs} = {em.const(self.fn)}({', '.join(args)}{kw})  # {self.code}"]


class _HostValues:
    """A ``host_values`` step: computes its numbers on the host; inside a graph, the numbers go into
    captured 0-d buffers before each launch (``refresh``)."""

    def __init__(self, fn, statics, xp):
        self.fn, self.statics, self.xp = fn, statics, xp
        self.capturing = False

    def __call__(self):
        if self.capturing:
            return tuple(self.statics)
        return self.fn()

    def refresh(self):
        for dst, src in zip(self.statics, self.fn()):
            self.xp.copyto(dst, src)


class CupyFuser:
    """``plan`` rewrites a CUDA program's steps; ``finish`` wraps the program in a graph runner."""
    cuda_graphs = True
    fold_constants = True           # program.py computes calls on constants once, at trace time

    def __init__(self, backend):
        self.backend = backend
        xp = self.xp = real_namespace(backend.xp)     # plan runs while the trace is on
        self.ops = dict(_OPERATORS)
        for name in _C:
            f = getattr(xp, name, None) if name != "sigmoid" else None
            if f is not None:
                self.ops[f] = name
        self.sum = xp.sum
        self.n_kernels = 0
        self.no_graph = None            # why the program is not captured, or None
        self.mutated, self.host_values, self.has_checks, self.copy_in = set(), [], False, []
        self.has_matmul = False

    # -- planning ----------------------------------------------------------------------------------
    def plan(self, steps, inputs, keep, values, em):
        from .fuse_cpu import _ssa
        # g += x on an array made inside the program becomes g2 = g + x (later uses renamed), so
        # in-place gradient accumulation does not break runs
        steps, renamed = _ssa(steps, values, set(inputs), alias_groups(steps))
        keep = {renamed.get(v, v) for v in keep}
        group = alias_groups(steps)
        escaping = set()
        for v in keep:
            escaping |= group.get(v, {v})
        uses, producer, mut_at, consumers = {}, {}, {}, {}
        for i, s in enumerate(steps):
            for v in s.refs():
                uses[v] = uses.get(v, 0) + 1
                consumers.setdefault(v, []).append(i)
            if s.kind == "call" and isinstance(s.outs, int):
                producer.setdefault(s.outs, i)
            for v in s.mutates:
                for m in group.get(v, (v,)):
                    mut_at.setdefault(m, []).append(i)
        # a kernel writes its result in C order: a result the trace made in another layout (a ufunc on a
        # transposed operand) that views read (conv's and max pooling's as_strided windows keep the strides
        # they saw) stays the eager call, which makes that layout again
        ew = {i: e for i, s in enumerate(steps) if (e := self._elementwise(s, values)) is not None
              and (e[3] is not None or _c_layout(s.outs, values, group))}
        sums = {i for i, s in enumerate(steps) if self._is_sum(s)}
        exprs, folded_into = {}, {}

        def foldable(v, i, dt):
            """Whether value v (made by an elementwise step) can be computed inside consumer i's kernel:
            its only use, or a small expression whose every consumer is a kernel (recomputing it there
            costs less than writing and reading it: the kernels are memory-bound)."""
            j = producer.get(v)
            if (j is None or j not in ew or ew[j][3] is not None or v in escaping
                    or len(group.get(v, (v,))) > 1 or ew[j][2] != dt):
                return False
            read = [x.vid for x in exprs[j].leaves([]) if x.__class__ is Ref] + [v]
            if any(j < k < i for x in read for k in mut_at.get(x, ())):
                return False
            if exprs[j].size() > MAX_KERNEL_OPS:
                return False        # chains are cut into kernels of bounded size (and recursion depth)
            if uses.get(v) == 1:
                return True
            return exprs[j].size() <= MULTI_FOLD_OPS and all(
                (c in ew and ew[c][3] != v) or c in sums for c in consumers.get(v, ()))

        for i in sorted(ew):
            op, args, dt, target = ew[i]
            kids = []
            for n, a in enumerate(args):
                if a.__class__ is Ref and not (target is not None and n == 0) and foldable(a.vid, i, dt):
                    j = producer[a.vid]
                    folded_into.setdefault(j, set()).add(i)
                    kids.append(exprs[j])
                elif a.__class__ is float and op == "power" and a in (2.0, 3.0):
                    kids.append(_Node("lit", leaf=int(a)))      # x ** 2.0 as x * x
                elif a.__class__ is int and abs(a) < 1 << 24:
                    kids.append(_Node("lit", leaf=a))
                else:
                    kids.append(_Node("leaf", leaf=a))
            exprs[i] = _Node(op, tuple(kids))
        reductions = {}
        for i, s in enumerate(steps):
            r = self._reduction(i, s, values, producer, ew, exprs, foldable)
            if r is not None and _c_layout(s.outs, values, group):
                reductions[i] = r
                folded_into.setdefault(producer[s.args[0].vid], set()).add(i)
        # a producer goes when every consumer computes it itself
        folded = {j for j, into in folded_into.items() if set(consumers.get(steps[j].outs, ())) <= into}
        out = []
        for i, s in enumerate(steps):
            if i in folded:
                continue
            out.append(self._kernel(exprs[i], s, values, ew[i]) if i in ew else reductions.get(i, s))
        self.n_kernels = sum(isinstance(s, _KernelStep) for s in out)
        n_buffers = self._buffers(out, values, escaping, group, em)
        self._graph_facts(out, inputs, group, values)
        return out, self.n_kernels, n_buffers, renamed

    def _elementwise(self, s, values):
        """(op name, args, float dtype, in-place target vid or None) for an elementwise step, else None."""
        if s.kind != "call" or s.kwargs or not isinstance(s.outs, int) or s.shape_guard is not None:
            return None
        fn, target = s.fn, None
        if getattr(fn, "__func__", None) is CupyBackend.sigmoid:
            op = "sigmoid"
        else:
            try:
                op = _INPLACE.get(fn)
                if op is not None:
                    target = s.args[0].vid if s.args and s.args[0].__class__ is Ref else None
                    if target is None or target != s.outs:
                        return None
                else:
                    op = self.ops.get(fn)
            except TypeError:            # an unhashable callable
                return None
        if op is None or s.mutates and target is None:
            return None
        n = 1 if op in ("negative", "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sinh",
                        "cosh", "absolute", "square", "reciprocal", "sigmoid") else 2
        if len(s.args) != n:
            return None
        out = values[s.outs]
        floats = {out.dtype.name} - {"bool"}
        n_arrays, full, args = 0, False, list(s.args)
        for n, a in enumerate(s.args):
            if a.__class__ is Ref:
                d = values[a.vid].dtype.name
                if d != "bool":
                    floats.add(d)
                n_arrays += 1
                full = full or values[a.vid].shape == out.shape
            elif isinstance(a, self.xp.ndarray) and a.dtype.name in _FLOATS and (
                    a.size == 1 or not any(a.strides)):
                # a folded constant of one value (the backward's seed broadcast to a shape): a 0-d view of
                # it, which the kernel broadcasts, when a traced operand gives the result its shape
                args[n] = a[(0,) * a.ndim] if a.size else a
                floats.add(a.dtype.name)
            elif not isinstance(a, (bool, int, float, np.bool_, np.integer, np.floating)):
                return None
        if n_arrays == 0 or len(floats) != 1 or not floats <= _FLOATS:
            return None
        if not full and any(a is not b for a, b in zip(args, s.args)):
            return None
        if out.dtype.name == "bool" and op not in ("less", "less_equal", "greater", "greater_equal", "equal",
                                                   "not_equal"):
            return None
        return op, args, floats.pop(), target

    def _signature(self, node, values, dt):
        """Parameters and arguments of a kernel for ``node``: arrays a0.., typed scalars k0.."""
        names, params, args = {}, [], []
        for x in node.leaves([]):
            key = ("v", x.vid) if x.__class__ is Ref else ("c", id(x))
            if key in names:
                continue
            if x.__class__ is Ref:
                names[key] = f"a{len(names)}"
                params.append(f"{values[x.vid].dtype.name} {names[key]}")
                args.append(x)
            else:
                names[key] = f"k{len(names)}"
                params.append(f"{dt} {names[key]}")
                # a number, or a folded 0-d device constant (read where it is: no transfer)
                args.append(x if isinstance(x, self.xp.ndarray) else np.dtype(dt).type(x))

        def name_of(x):
            return names[("v", x.vid) if x.__class__ is Ref else ("c", id(x))]
        return node.render(name_of), params, args

    def _kernel(self, node, s, values, entry):
        _, _, dt, target = entry
        if target is not None:       # g += x: y = g + x written into g
            node = _Node(node.op, (_Node("leaf", leaf=Ref(target)),) + node.kids[1:])
        code, params, args = self._signature(node, values, dt)
        out_t = values[s.outs].dtype.name
        key = ("ew", ", ".join(params), out_t, code)
        k = _kernels.get(key)
        if k is None:                # vectorised where the arrays allow it (fuse_cuda_vec.py)
            ew = self.xp.ElementwiseKernel(", ".join(params), f"{out_t} y", f"y = {code}", f"ag_fused_{len(_kernels)}")
            k = _kernels[key] = VecKernel(self.xp, ew, params, out_t, code, simulated())
        if target is not None:
            args = args[:]               # the target is passed as the output (the in-place write)
        step = _KernelStep(s.outs, k, args, code, target=target)
        return step

    def _is_sum(self, s):
        return (s.kind == "call" and s.fn is self.sum and len(s.args) == 1 and s.args[0].__class__ is Ref
                and set(s.kwargs) <= {"axis", "keepdims"} and isinstance(s.outs, int))

    def _reduction(self, i, s, values, producer, ew, exprs, foldable):
        """``sum(expr)`` over a foldable elementwise run: one ReductionKernel."""
        if not self._is_sum(s):
            return None
        v = s.args[0].vid
        j = producer.get(v)
        if j is None or j not in ew:
            return None
        dt = ew[j][2]
        if values[s.outs].dtype.name != dt or values[v].dtype.name != dt or not foldable(v, i, dt):
            return None
        node = exprs[j]
        code, params, args = self._signature(node, values, dt)
        key = ("red", ", ".join(params), dt, code)
        k = _kernels.get(key)
        if k is None:
            k = _kernels[key] = self.xp.ReductionKernel(
                ", ".join(params), f"{dt} y", code, "a + b", "y = a", "0", f"ag_fused_sum_{len(_kernels)}")
        axis = s.kwargs.get("axis")
        nd = values[v].ndim
        if isinstance(axis, (tuple, list)) and sorted(a % nd for a in axis) == list(range(nd)):
            axis = None
        return _KernelStep(s.outs, k, args, f"sum({code})", reduce=(axis, bool(s.kwargs.get("keepdims", False))))

    def _buffers(self, steps, values, escaping, group, em):
        """Buffers for kernel results that stay inside the program, reused once their last use is past."""
        last = {}
        for i, s in enumerate(steps):
            for v in s.refs():
                for m in group.get(v, (v,)):
                    last[m] = i
        pool, free_at, n = {}, {}, 0
        xp, dev = self.xp, self.backend._cuda_device
        for i, s in enumerate(steps):
            for key, name in free_at.pop(i - 1, ()):
                pool.setdefault(key, []).append(name)
            if not isinstance(s, _KernelStep) or s.target is not None:
                continue
            o = s.outs
            if o in escaping or len(group.get(o, (o,))) > 1:
                continue
            val = values[o]
            key = (val.shape, val.dtype.str)
            free = pool.get(key)
            if free:
                name = free.pop()
            else:
                with dev:
                    name = em.const(xp.empty(val.shape, val.dtype))
                n += 1
            s.buffer = name
            free_at.setdefault(last.get(o, i), []).append((key, name))
        return n

    # -- graph capture ---------------------------------------------------------------------------
    def _graph_facts(self, steps, inputs, group, values):
        """Whether the program can be captured, which inputs it writes, its host_values steps."""
        group = alias_groups(steps)
        written = set()
        for s in steps:
            if s.kind == "guard":
                self.no_graph = self.no_graph or "it reads values on the host (guards)"
            elif s.shape_guard is not None:
                self.no_graph = self.no_graph or "a result's shape depends on the data"
            fn = s.fn
            owner = getattr(fn, "__self__", None)
            name = getattr(fn, "__name__", "")
            if (owner is self.backend and name in _RANDOM or type(owner).__name__ in ("RandomState", "Generator")
                    or "random" in (getattr(fn, "__module__", None) or "")):
                self.no_graph = self.no_graph or f"it draws random numbers ({name}): cuRAND under capture " \
                                                 "would replay the same numbers"
            if owner is self.backend and name in _CHECKS:
                self.has_checks = True
            if owner is self.backend and name in ("matmul", "matmul_packed"):    # (the base class's: a matmul)
                self.has_matmul = True
            if name == "arrays" and "host_values" in getattr(fn, "__qualname__", ""):
                outs = s.outs if isinstance(s.outs, tuple) else (s.outs,)
                with self.backend._cuda_device:
                    statics = [self.xp.empty(values[o].shape, values[o].dtype) for o in outs]
                hv = _HostValues(fn, statics, self.xp)
                s.fn = hv
                self.host_values.append(hv)
            for v in s.mutates:
                written |= group.get(v, {v})
        self.mutated = {i for i, v in enumerate(inputs) if v in written or group.get(v, {v}) & written}
        read = set()
        for s in steps:
            read.update(s.refs())
        # inputs the graph reads or writes: copied in when the caller passes other arrays than at capture
        self.copy_in = sorted(self.mutated | {i for i, v in enumerate(inputs) if v in read})

    def finish(self, program, stats=None):
        """The program, its ``run`` wrapped to count kernels and, where allowed, replay as a CUDA graph;
        ``program.counters`` counts generated kernels launched outside graphs, captures and launches."""
        program.run = _GraphRunner(program.run, self)
        program.graph_runner = program.run
        program.counters = program.run.stats
        return program


# results at least this large are handed out as the graph's own buffers (no copy) while nobody holds
# the previous launch's; smaller ones are always copied (a copy costs a launch, not bandwidth)
_HAND_OUT_BYTES = 1 << 16


def _refs(a):
    """References to ``a``, to its base, to its MemoryPointer and to its allocation, for telling whether
    anyone outside holds ``a`` or a view of it. Each is needed on CuPy: a view made by ``ndarray._view``
    (reshape, transpose) holds the array's own ``data`` object and ``a.base`` (``a`` itself only when
    ``a`` owns its memory), a sliced view a new MemoryPointer on ``data.mem``; the stand-in's views hold
    the host buffer (``data.mem``)."""
    data, base = a.data, a.base
    return (sys.getrefcount(a), sys.getrefcount(data), sys.getrefcount(data.mem),
            0 if base is None else sys.getrefcount(base))


class _GraphRunner:
    """Replays a program plainly, then (when allowed) as one captured CUDA graph.

    Inputs the program writes, and state tensors it reads (``state_inputs``), are captured by address;
    argument tensors are copied into captured buffers. Results of at least ``_HAND_OUT_BYTES`` are
    handed out as the graph's buffers themselves: before the next launch overwrites one, its reference
    counts must be back where they were after the capture (nobody kept it, or a view of it), else the
    graph is captured again with that result copied. A state input passed as another array than at
    capture (a rebound ``.data``) is captured again as a copied input."""

    def __init__(self, run, fuser):
        self.run = run
        self.stats = {"kernel_launches": 0, "graph_captures": 0, "graph_launches": 0}
        self.backend, self.xp = fuser.backend, fuser.xp
        self.n_kernels, self.mutated, self.host_values = fuser.n_kernels, fuser.mutated, fuser.host_values
        self.has_checks, self.copy_in, self.has_matmul = fuser.has_checks, fuser.copy_in, fuser.has_matmul
        self.by_address = set(getattr(fuser, "state_inputs", ())) - self.mutated
        self.no_graph = None if fuser.cuda_graphs else "cuda_graphs=False"
        self.no_graph = self.no_graph or fuser.no_graph
        self.warm = 0
        self.graph = None
        self.copy_out, self.handed, self.pools = set(), set(), []

    def __call__(self, arrays):
        if self.graph is not None:
            return self._launch(arrays)
        if self.no_graph is None and self.warm >= 1:
            try:
                self._capture(arrays)
            except Exception as e:        # a transfer, a sync, an allocation CUDA refuses: no graph
                self.no_graph = f"capture failed: {type(e).__name__}: {e}"
            else:
                return self._launch(arrays)
        self.warm += 1
        self.stats["kernel_launches"] += self.n_kernels
        if self.backend.context is not None:      # not GPU 0: the generated kernels run on the arrays' GPU
            with self.backend.context():
                return self.run(arrays)
        return self.run(arrays)

    def _capture(self, arrays):
        xp, b = self.xp, self.backend
        with b._cuda_device:
            self.stream = xp.cuda.Stream()
            if self.graph is not None:
                self.pools.append(self.pool)        # what the last graph handed out stays allocated
            self.graph = None
            self.pool = xp.cuda.MemoryPool()        # what the capture allocates stays the graph's
            # written inputs (parameters, state) and state read by address; arguments get captured buffers
            copied = set(self.copy_in) - self.mutated - self.by_address
            self.static = [xp.empty(a.shape, a.dtype) if i in copied else a for i, a in enumerate(arrays)]
            if self.has_checks and b._err is None:
                b._err = xp.zeros(2, dtype=np.int64)
            self.err = b._err if self.has_checks else None
            if self.has_matmul:
                cublas_graph.prepare(xp)
            for hv in self.host_values:
                hv.capturing = True
            b.capturing = True                      # its matmul goes around CuPy's cuBLAS (cublas_graph.py)
            try:
                with self.stream, xp.cuda.using_allocator(self.pool.malloc):
                    self.stream.begin_capture()
                    try:
                        outs = self.run(self.static)
                    finally:
                        graph = self.stream.end_capture()
            finally:
                b.capturing = False
                for hv in self.host_values:
                    hv.capturing = False
        self.outs = outs
        self.pos = {id(s): i for i, s in enumerate(self.static)}
        self.copy_out |= {j for j, o in enumerate(outs) if id(o) not in self.pos and o.nbytes < _HAND_OUT_BYTES}
        self.handed = set()
        self.base_refs = self._out_refs(range(len(outs)))
        self.graph = graph
        self.stats["graph_captures"] += 1

    def _out_refs(self, indices, arrays=()):
        """Reference counts of the results at ``indices``, one way of counting at capture and after; the
        references of this call's ``arrays`` (a replaced gradient gathered as an input) do not count where
        the launch reads a captured copy of the input, never the buffer it writes; they do where the
        program writes the input (``mutated``): the copy back after the launch would land on the result."""
        res = []
        for j in indices:
            o = self.outs[j]
            n, *rest = _refs(o)
            res.append((n - sum(1 for i, a in enumerate(arrays) if a is o and i not in self.mutated), *rest))
        return res

    def _recapture_if_needed(self, arrays):
        """Capture again when a state input is another array than at capture, or a result handed out by
        the last launch is still held (the next launch would overwrite it). False: that capture failed,
        the program runs without a graph from now on."""
        if not (self.by_address or self.handed):   # nothing read in place, nothing handed out: no counting
            return True
        moved = {i for i in self.by_address if arrays[i] is not self.static[i]}
        held = {j for j, r in zip(self.handed, self._out_refs(self.handed, arrays)) if r != self.base_refs[j]}
        if moved or held:
            self.by_address -= moved
            self.copy_out |= held
            try:
                self._capture(arrays)
            except Exception as e:        # as the first capture's failure (__call__)
                self.graph, self.no_graph = None, f"capture failed: {type(e).__name__}: {e}"
                return False
        return True

    def _launch(self, arrays):
        xp, b = self.xp, self.backend
        if not self._recapture_if_needed(arrays):
            return self(arrays)                     # a plain run
        with b._cuda_device:
            # on the caller's stream (captured on a private one): ordered after the work that made the
            # inputs and before the work that reads the results, another graph's launch included
            stream = xp.cuda.get_current_stream()
            static = self.static
            for i in self.copy_in:
                if arrays[i] is not static[i]:
                    xp.copyto(static[i], arrays[i])
            for hv in self.host_values:
                hv.refresh()
            if self.err is not None and b._err is not self.err:
                if b._err is None:
                    self.err.fill(0)
                else:
                    xp.copyto(self.err, b._err)
                b._err = self.err
            self.graph.launch(stream)
            for i in self.mutated:
                if arrays[i] is not self.static[i]:
                    xp.copyto(arrays[i], self.static[i])
            res = []
            for j, o in enumerate(self.outs):
                if id(o) in self.pos:
                    res.append(arrays[self.pos[id(o)]])
                elif j in self.copy_out:
                    res.append(o.copy())
                else:
                    res.append(o)
                    self.handed.add(j)
        self.stats["graph_launches"] += 1
        return tuple(res)


register_fuser("cupy", CupyFuser)
