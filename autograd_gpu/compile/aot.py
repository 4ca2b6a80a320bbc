"""A compiled backward for outputs that still require grad (AOT style).

When a traced function returns tensors whose graph is still alive (``loss = model(x)...; return loss``,
a compiled model whose caller runs ``loss.backward()``), the trace goes on after the function returns:
``trace_backward`` runs the engine from those outputs to the holders that require grad, with one seed
array per output as a new program input, so the trace holds the forward steps and then the backward's.
``split`` cuts it in two: the forward program (the function's own work, which also hands out the
*residuals*: the forward values and inputs the backward steps read) and the backward program (seeds and
residuals in, one gradient per holder out). A replay runs the forward program and returns its outputs
attached to one graph node, ``CompiledBackward``, whose inputs are the holders: the engine calls its
backward with the outputs' gradients, the backward program runs, and the engine accumulates the results
into ``.grad`` (hooks, ``ag.autograd.grad``, retain_graph) as for any node.
"""
from ..autograd import engine as _engine
from ..autograd.function import Function
from ..autograd.grad_mode import state as _grad_state
from ..backends.trace_ir import Ref
from ..ops import batching as _batching
from ..tensor import Tensor
from .. import _trace_hooks
from .tracer import Traced, Untraceable

__all__ = ["CompiledBackward", "trace_backward", "graph_outputs", "Aot"]


def graph_outputs(out):
    """The distinct tensors in ``out`` (a tensor, or lists, tuples and dicts of them) whose graph is still
    alive: they require grad, have a node and no backward has freed that node."""
    found, seen = [], set()

    def walk(o):
        if isinstance(o, Tensor):
            fn = o.grad_fn
            if o.requires_grad and fn is not None and not fn._freed and id(o) not in seen:
                seen.add(id(o))
                found.append(o)
        elif isinstance(o, (list, tuple)) and not hasattr(o, "_fields"):
            for x in o:
                walk(x)
        elif isinstance(o, dict):
            for x in o.values():
                walk(x)
    walk(out)
    return found


def _module_backward_hooks(modules):
    from ..nn import hooks as _hooks
    if _hooks._global.backward or _hooks._global.backward_pre:
        return "a global module backward hook"
    for m in modules:
        h = m.__dict__.get("_hooks")
        if h is not None and (h.backward or h.backward_pre):
            return f"a backward hook on {type(m).__name__}"
    return None


def trace_backward(tr, outs, holders, modules):
    """Run the backward of ``outs`` under the tracer ``tr`` (already active), one seed input per output,
    towards the holders that require grad. Returns (split index, seed vids, leaf holder indices,
    gradient tensors or None per leaf). Raises Untraceable when the backward needs the inner graph
    (a hook of a module or a tensor inside the function runs in it)."""
    hooked = _module_backward_hooks(modules)
    if hooked is not None:
        raise Untraceable(f"{hooked} needs the graph inside the function, and the function returns tensors that "
                          "require grad")
    split = len(tr.steps)
    leaves = [i for i, t in enumerate(holders) if t.requires_grad]
    seeds, roots = [], []
    saved = _trace_hooks.state.t
    _trace_hooks.state.t = None              # the seeds are new program inputs, not recorded calls
    try:
        for o in outs:
            a = o.data.v if o.data.__class__ is Traced else o.data
            b = o.device.backend
            xp = getattr(b.xp, "_real", b.xp)
            seed = b.call(xp.ones, a.shape, dtype=a.dtype)
            seeds.append(seed)
    finally:
        _trace_hooks.state.t = saved
    vids = []
    for o, s in zip(outs, seeds):
        h = tr.external(s, o.device.backend)
        vids.append(h.vid)
        roots.append((o, Tensor._make(h, o.device)))
    hooks = [(holders[i], holders[i]._hooks) for i in leaves]
    for t, _ in hooks:                       # the leaves' own hooks run outside, when the engine reaches them
        t._hooks = None
    runs = _engine._hook_runs[0]
    try:
        got = _engine.run_backward(roots, True, False, inputs=[holders[i] for i in leaves]) if leaves else []
    finally:
        for t, h in hooks:
            t._hooks = h
    if _engine._hook_runs[0] != runs:
        raise Untraceable("a tensor hook registered inside the function runs in its backward, which needs the "
                          "graph inside the function")
    return split, vids, leaves, got


class _Lazy:
    """A node's saved state when the forward ran without its residuals (Aot.lazy): the program's input
    arrays and the holders' versions then, from which a backward recomputes them."""
    __slots__ = ("arrays", "versions", "holders")

    def __init__(self, arrays, versions, holders):
        self.arrays, self.versions, self.holders = arrays, versions, holders


class Aot:
    """What a replay needs to attach its outputs to a compiled backward."""
    __slots__ = ("backward", "leaves", "grads", "n_res", "seed_meta", "copy_seeds", "device", "outs", "on_double",
                 "out_meta", "lazy", "full", "calls", "backwards", "versions", "watched")

    def __init__(self, backward, leaves, grads, n_res, seed_meta, copy_seeds, device, outs):
        self.outs = outs                  # the forward program's finals that are the node's outputs
        self.backward = backward          # the backward Program
        self.leaves = leaves              # holder indices that are the node's inputs
        self.grads = grads                # per leaf: index in the backward's finals, or None
        self.n_res = n_res                # residuals: the last n_res finals of the forward program
        self.seed_meta = seed_meta        # per output: (shape, dtype) its gradient must have
        self.copy_seeds = copy_seeds      # the backward writes into its seeds: copy them first
        self.device = device
        self.on_double = None             # called when a backward asks for create_graph (replay.py: run eagerly)
        self.out_meta = seed_meta if len(outs) > 1 else None     # Function._out_meta of a node of several
        # reads only: ``lazy`` is the forward program without the residuals (its values in reused buffers),
        # None where a second run of the forward could differ or write something; ``full`` the program
        # with them, run again by a backward that reaches a node made by ``lazy`` (see use_lazy)
        self.lazy = None
        self.full = None
        self.calls = 0                    # replays made with this entry
        self.backwards = 0                # backwards run through its nodes
        self.versions = None              # holders -> the version numbers of those at ``watched`` (generated
        self.watched = None               # with ``lazy``): the inputs the residuals are computed from

    def use_lazy(self):
        """Whether this replay may run the forward without residuals: the two replays before made nodes
        whose backward never ran (``loss.item()``, inference without no_grad) and none ever did. The
        first backward through such a node recomputes the residuals (the forward program on the arrays
        of that call) and turns this off for good. (A no_grad call has a signature of its own, traced
        without a compiled backward.)"""
        self.calls += 1
        return self.lazy is not None and self.backwards == 0 and self.calls > 2

    def attach(self, outs, saved, holders):
        """Make ``outs`` (new tensors, not yet in any graph) the outputs of a CompiledBackward node whose
        backward reads ``saved`` (the residuals, or a _Lazy)."""
        if not _grad_state.enabled:
            return
        node = _new(CompiledBackward)
        node.xp = self.device.backend.xp
        node.device = self.device
        node._saved = saved
        node.needs_input_grad = (True,) * len(self.leaves)
        node._next = tuple([holders[i] for i in self.leaves])
        node._hooks = None
        node._freed = False
        node._seq = _next_seq()
        node.aot = self
        node._n_out = len(outs)
        if self.out_meta is not None:
            node._out_meta = self.out_meta
        nr = 0
        for o in outs:                    # what Function._record_outputs does for new tensors
            o.grad_fn = node
            o.requires_grad = True
            o._output_nr = nr
            nr += 1

    def rematerialize(self, lazy):
        """The residuals of a node made by the ``lazy`` program: the full forward again on that call's
        input arrays, refused (as eager mode refuses a saved tensor changed) when an input the residuals are
        computed from was written in place since."""
        now = self.versions(lazy.holders)
        if now != lazy.versions:
            i = next(k for k, (a, b) in enumerate(zip(now, lazy.versions)) if a != b)
            t = lazy.holders[self.watched[i]]
            raise RuntimeError(
                f"CompiledBackward: one of the tensors the compiled function read (shape {tuple(t.shape)}) was "
                f"modified by an in-place operation after the call (its version is {now[i]}, expected "
                f"{lazy.versions[i]}); use an out-of-place op instead (e.g. x = x + y rather than x += y)")
        fin = self.full.run(lazy.arrays)
        return tuple(fin[len(fin) - self.n_res:]) if self.n_res else ()


def build(tr, split, seed_vids, grads, make_program):
    """The backward half of the trace: its residuals (vids the backward reads that the forward made or took
    in) and its program (``make_program(steps, inputs, finals)``). Returns (residual vids, program, the
    index of each leaf's gradient among the program's finals or None, whether the seeds must be copied)."""
    bwd = tr.steps[split:]
    defined = set(seed_vids)
    finals, gmap = [], []
    for g in grads:
        if g is None:
            gmap.append(None)
            continue
        d = g.data
        if d.__class__ is not Traced:
            raise Untraceable("a gradient of the function's backward holds an array the trace did not follow")
        gmap.append(len(finals))
        finals.append(d.vid)
    res, seen = [], set()
    made = set()
    for s in bwd:
        if s.kind == "guard" or s.shape_guard is not None:
            raise Untraceable(f"the backward of the returned tensors reads a value into Python ({s.label})")
        for v in s.refs():
            if v not in made and v not in defined and v not in seen:
                seen.add(v)
                res.append(v)
        o = s.outs
        made.update(x for x in (o if isinstance(o, tuple) else (o,)) if x is not None)
    for v in finals:                     # a gradient that is a forward value or a seed itself
        if v not in made and v not in defined and v not in seen:
            seen.add(v)
            res.append(v)
    root = _view_roots(tr.steps)
    written = {root.get(v, v) for s in bwd for v in s.mutates}
    if written & {root.get(v, v) for v in res}:
        raise Untraceable("the backward of the returned tensors writes into a value of the forward")
    copy_seeds = bool(written & set(seed_vids)) or bool(set(finals) & set(seed_vids))
    program = make_program(bwd, list(seed_vids) + res, finals)
    return res, program, gmap, copy_seeds


def _view_roots(steps):
    """vid -> the value it is a view of (through getitem, reshape, .T, ...: calls that may return a view of
    their first argument and write nothing), followed to the end of the chain."""
    root = {}
    for s in steps:
        o = s.outs
        if s.kind != "call" or s.fresh or s.mutates or o.__class__ is not int or not s.args:
            continue
        a = s.args[0]
        if a.__class__ is Ref and a.vid != o:
            root[o] = root.get(a.vid, a.vid)
    return root


from ..autograd.function import _next_seq  # noqa: E402

_new = object.__new__


class CompiledBackward(Function):
    """The graph node of a compiled function's outputs: its backward runs the recorded backward program on
    the outputs' gradients and the residuals the forward program handed out (kept in ``_saved`` until a
    backward without retain_graph frees them)."""

    __slots__ = ("aot",)
    batch_rule = _batching.loop           # never applied (made by the replay), so never batched by vmap

    @staticmethod
    def forward(ctx, *args):
        raise RuntimeError("CompiledBackward is made by ag.compile's replay, not applied")

    @staticmethod
    def backward(ctx, *grads):
        aot = ctx.aot
        if _grad_state.enabled:
            if aot.on_double is not None:
                aot.on_double()
            raise RuntimeError(
                "backward(create_graph=True) (or a grad of grads) through the outputs of an ag.compile'd "
                "function: their backward is a compiled program, which cannot be differentiated again. The "
                "function's calls with these arguments now run eagerly: call it again to get a graph that can")
        if len(grads) == 1 and not aot.copy_seeds:       # the common case (a loss): the checks inline
            a = grads[0].data
            if a.dtype != aot.seed_meta[0][1]:
                a = a.astype(aot.seed_meta[0][1])
            elif not a.flags.c_contiguous:
                a = ctx.device.backend.xp.ascontiguousarray(a)
            arrays = (a,)
        else:
            arrays = []
            for g, (shape, dtype) in zip(grads, aot.seed_meta):
                a = g.data
                if a.dtype != dtype:
                    a = a.astype(dtype)
                elif aot.copy_seeds or not a.flags.c_contiguous:
                    a = a.copy() if aot.copy_seeds else ctx.device.backend.xp.ascontiguousarray(a)
                arrays.append(a)
            arrays = tuple(arrays)
        saved = ctx._saved
        if saved.__class__ is _Lazy:
            saved = ctx._saved = aot.rematerialize(saved)     # kept for a retained graph's next backward
        aot.backwards += 1
        fin = aot.backward.run(arrays + saved)
        dev, make = ctx.device, Tensor._make
        return tuple([None if j is None else make(fin[j], dev) for j in aot.grads])
