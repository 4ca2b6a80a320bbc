"""``ag.compile``: trace on the first call of each signature, replay the program afterwards.

A call gathers its state (state.py) and its signature. A new signature runs ``fn`` under the tracer
(tracer.py) with every holder's array replaced by a traced handle; what the function did to the
holders (new .grad tensors, rebound buffers, new optimizer state, version bumps, train/eval flags) is
compared before and after and kept as a list of actions. The program (program.py) is built from the
steps; later calls with the signature run it on the holders' current arrays and then apply the
actions. A failed guard traces again; a function that cannot be traced, or whose guards keep failing,
runs eagerly for that signature with one warning.
"""
import builtins
import copy as _copy
import functools
import sys
import warnings
import weakref
from collections import OrderedDict


from ..tensor import Tensor
from .. import backends as _backends
from ..backends.fusers import get_fuser
from .tracer import Tracer, Traced, Untraceable, tracing, active
from .program import build_program, GuardFailed
from .state import find_state, signature, dynamic_signature, plain_args, Watch, bindings, shares_memory
from . import host_rng
from . import aot as _aot
from .host_rng import rng_state

__all__ = ["compile", "CompiledFunction"]

_EAGER = "eager"
MAX_RETRACES = 8         # guard failures per signature before it runs eagerly
MAX_FAST_MISSES = 8      # fast-path checks failing in a row before a function stops keeping one


class _Fast:
    """The last call's walk, kept so that the next call can skip it: when every object the walk read is
    unchanged (``Watch.same``) and the dynamic part of the signature is equal, the call has the last call's
    signature, and its holders are its argument tensors followed by the last walk's state tensors."""
    __slots__ = ("watch", "dyn", "sig", "entry", "n_args", "state_tensors")

    def __init__(self, watch, sig, entry, n_args, state_tensors):
        self.watch, self.sig, self.entry = watch, sig, entry
        self.dyn = sig[0]
        self.n_args, self.state_tensors = n_args, state_tensors


class _Entry:
    """One signature's program and what to do around it."""
    __slots__ = ("program", "inputs", "actions", "outputs", "guard_fails", "rng", "gather", "bump", "release", "aot")

    def __init__(self, program, inputs, actions, outputs, rng=(), aot=None):
        self.program, self.inputs, self.outputs = program, inputs, outputs
        self.aot = aot          # aot.Aot when outputs require grad: the compiled backward they attach to
        self.guard_fails = 0
        self.rng = rng          # the backends whose generators the program draws from
        # the program's input arrays read from the holders, and the version bumps, as generated code (one
        # call each instead of a loop over (index, kind) pairs); the other actions stay a list
        src = "def gather(H):\n    return (" + "".join(
            f"H[{i}].data, " if kind == "data" else f"H[{i}]._grad.data, " for i, kind in inputs) + ")\n"
        bumps = [a for a in actions if a[0] == "version"]
        src += "def bump(H):\n" + "".join(f"    H[{i}].version_counter()[0] += {n}\n" for _, i, n in bumps) + \
            "    return None\n"
        glob = {}
        exec(builtins.compile(src, "<ag.compile replay inputs>", "exec"), glob)
        self.gather, self.bump = glob["gather"], glob["bump"]
        self.actions = [a for a in actions if a[0] != "version"]
        # gradients the call replaces, let go before a CUDA graph launches: a result the graph hands out
        # without a copy may then be overwritten in place (fuse_cuda.py checks that nobody else holds it)
        graph = getattr(program, "graph_runner", None) is not None
        self.release = tuple(a[1] for a in self.actions if a[0] == "grad_new") if graph else ()


class CompiledFunction:
    """The callable ``ag.compile(fn)`` returns. ``stats`` counts traces, replays, eager calls and guard
    failures; ``programs()`` lists the generated programs (their source is ``.source``)."""

    def __init__(self, fn, cache_size=8, fuse=True, cuda_graphs=True):
        self.fn = fn
        self.cache_size = cache_size
        self.fuse = fuse
        self.cuda_graphs = cuda_graphs
        self._cache = OrderedDict()
        self._last = None                 # the entry at the end of _cache (most recently used)
        self._retraces = {}
        self._warned = set()
        self._fast = None                 # _Fast of the last call, or None
        self._fast_misses = 0
        self.stats = {"traces": 0, "replays": 0, "eager": 0, "guard_failures": 0}
        functools.update_wrapper(self, fn)

    def __get__(self, obj, objtype=None):       # used as a decorator on a method: one per instance
        if obj is None:
            return self
        d = getattr(obj, "__dict__", None)
        key = f"_ag_compiled_{getattr(self.fn, '__name__', id(self))}"
        c = d.get(key) if d is not None else None
        if c is None:
            c = CompiledFunction(self.fn.__get__(obj, objtype), self.cache_size, self.fuse, self.cuda_graphs)
            if d is not None:
                d[key] = c                      # lives and dies with the instance
        return c

    def programs(self):
        return [e.program for e in self._cache.values() if isinstance(e, _Entry)]

    def cuda_stats(self):
        """For CUDA programs (backends/fuse_cuda.py): generated kernels launched outside CUDA graphs, graphs
        captured, graph launches, summed over the programs in the cache."""
        out = {"kernel_launches": 0, "graph_captures": 0, "graph_launches": 0}
        for p in self.programs():
            for k, v in getattr(p, "counters", {}).items():
                out[k] += v
        return out

    def __call__(self, *args, **kwargs):
        if active() is not None:                 # called while another compiled function traces: inline
            return self.fn(*args, **kwargs)
        fast = self._fast
        if fast is not None:
            arg_tensors = plain_args(args, kwargs)
            if arg_tensors is not None and len(arg_tensors) == fast.n_args and fast.watch.same():
                holders = arg_tensors + fast.state_tensors if arg_tensors else fast.state_tensors
                if dynamic_signature(args, kwargs, holders) == fast.dyn:
                    self._fast_misses = 0
                    return self._run(fast.sig, fast.entry, holders, args, kwargs)
            self._fast = None
            self._fast_misses += 1
        n_args, st = find_state(self.fn, args, kwargs)
        if st.refuse is not None:
            self._warn(f"{st.refuse}; these calls run eagerly")
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        sig = signature(args, kwargs, n_args, st)
        # the walk's snapshot, taken before the call changes anything (when a fast path may follow)
        watch = Watch(st.watch) if (st.fast_ok and self._fast_misses < MAX_FAST_MISSES and
                                    plain_args(args, kwargs) is not None) else None
        entry = self._cache.get(sig)
        if entry is _EAGER:
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        if entry is not None:
            if entry is not self._last:           # already the most recent: no second lookup of the key
                self._cache.move_to_end(sig)
                self._last = entry
            out = self._run(sig, entry, st.tensors, args, kwargs)
        else:
            out = self._trace(sig, st, n_args, args, kwargs)
        entry = self._cache.get(sig)
        if watch is not None and entry.__class__ is _Entry and entry is self._last:
            self._fast = _Fast(watch, sig, entry, n_args, st.tensors[n_args:])
        return out

    def _run(self, sig, entry, holders, args, kwargs):
        """Replay ``entry``; a failed guard traces again (or, past MAX_RETRACES, runs eagerly)."""
        rng = [(b, b.get_rng_state()) for b in entry.rng] if entry.rng else ()
        try:
            aot = entry.aot
            out = self._replay_lazy(entry, holders) if aot is not None and aot.use_lazy() else \
                self._replay(entry, holders)
            self.stats["replays"] += 1
            return out
        except GuardFailed as e:
            for b, state in rng:             # the trace (or eager call) that follows draws them again
                b.set_rng_state(state)
            self.stats["guard_failures"] += 1
            n = self._retraces[sig] = self._retraces.get(sig, 0) + 1
            if n >= MAX_RETRACES:
                self._store(sig, _EAGER)
                self._warn(f"a value read at {e.where} keeps changing between calls ({n} retraces); "
                           "this signature now runs eagerly")
                self.stats["eager"] += 1
                return self.fn(*args, **kwargs)
        self._fast = None
        n_args, st = find_state(self.fn, args, kwargs)         # a new walk: the trace needs its state
        return self._trace(signature(args, kwargs, n_args, st), st, n_args, args, kwargs)

    def _store(self, sig, entry):
        self._fast = None                        # the fast path's entry may be the one replaced
        self._cache[sig] = entry
        self._cache.move_to_end(sig)
        self._last = entry
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _warn(self, msg):
        if msg not in self._warned:
            self._warned.add(msg)
            name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
            f, level = sys._getframe(0), 1          # the first frame outside this file: the caller's line
            while f is not None and f.f_code.co_filename == __file__:
                f, level = f.f_back, level + 1
            warnings.warn(f"ag.compile({name}): {msg}", RuntimeWarning, stacklevel=level)

    # -- tracing ------------------------------------------------------------------------------------
    def _trace(self, sig, st, n_args, args, kwargs):
        if any(t.grad_fn is not None for t in st.tensors):
            # its nodes captured the real array namespace before the trace: not followed faithfully
            self._store(sig, _EAGER)
            self._warn("it reaches tensors of a graph made before the call (backward through them runs "
                       "inside); this signature runs eagerly")
            self.stats["eager"] += 1
            return self.fn(*args, **kwargs)
        self.stats["traces"] += 1
        tr = Tracer()
        holders = st.tensors
        binds = bindings(st)
        overlap = shares_memory(holders)             # before the trace: the real arrays
        out = None
        entry, reason = _EAGER, "the trace did not finish"
        rngs = [(g, rng_state(g)) for g in st.rngs]     # host generators the walk reached
        with tracing(tr), host_rng.Patched() as host:
            inputs = _enter(tr, holders)
            try:
                before = _Snapshot(holders, binds, st)
                out = self.fn(*args, **kwargs)
                back = None
                if tr.failed is None:
                    back = self._trace_backward(tr, out, holders, st)
                if tr.failed is None:
                    drew = host.changed(rngs)    # a draw the wrapped entry points did not see
                    if drew is not None:
                        tr.fail(f"it draws from {drew} (in {_where(self.fn)}); a replay would repeat the "
                                "traced numbers (use ag.rand/ag.randn, which every replay draws again)")
                if tr.failed is not None:
                    reason = tr.failed
                else:
                    try:
                        entry = self._build(tr, st, holders, binds, before, inputs, out, overlap, n_args, back)
                    except Untraceable as e:
                        reason = str(e)
            finally:
                _leave(holders, binds, st, out)
                if back is not None and entry is not _EAGER and entry.aot is not None and tr.read_after_write is None:
                    # this call's outputs too: their eager graph (kept by the traced backward) is let go
                    outs = back[0]
                    for o in outs:
                        o.grad_fn, o.requires_grad = None, False
                    entry.aot.attach(outs, tuple(_backends.as_ndarray(tr.values[v]) for v in back[5]), holders)
        if entry is _EAGER:
            self._warn(f"{reason}; this signature runs eagerly")
        elif tr.read_after_write is not None:
            entry = _EAGER
            self._warn(f"the function reads a value ({tr.read_after_write}) after it changed parameters or "
                       "state in place, so a changed value could not be retraced; this signature runs "
                       "eagerly (return the tensor instead of calling .item() on it inside)")
        if entry is not _EAGER and entry.aot is not None:
            ref = weakref.ref(self)

            def on_double():             # backward(create_graph=True) outside: from now on, eagerly
                cf = ref()
                if cf is not None and cf._cache.get(sig) is entry:
                    cf._store(sig, _EAGER)
                    cf._warn("a backward with create_graph=True reached its outputs, whose backward is compiled; "
                             "this signature now runs eagerly")
            entry.aot.on_double = on_double
        self._store(sig, entry)
        return out

    def _trace_backward(self, tr, out, holders, st):
        """Outputs whose graph is alive get a compiled backward: trace it now (aot.py). Returns
        (outputs, split, seed vids, leaf indices, gradients, [residual vids, filled by _build]) or None."""
        outs = _aot.graph_outputs(out)
        if not outs:
            return None
        try:
            return (outs,) + tuple(_aot.trace_backward(tr, outs, holders, st.modules)) + ([],)
        except Untraceable as e:
            tr.fail(str(e))
        except RuntimeError as e:
            tr.fail(f"the backward of the returned tensors failed under the trace ({e})")
        return None

    def _build(self, tr, st, holders, binds, before, inputs, out, overlap, n_args, back=None):
        finals, actions = [], []

        def final(h):
            if h.__class__ is not Traced:
                raise Untraceable("a tensor made during the trace holds an array the trace did not follow")
            finals.append(h.vid)
            return len(finals) - 1

        ran_backward = False
        for i, t in enumerate(holders):
            d0, g0, gd0, v0 = before.tensors[i]
            if t.data is not d0:
                actions.append(("data", i, final(t.data)))
            g = t._grad
            if g is not g0:
                ran_backward = True
                if g is None:
                    actions.append(("grad_none", i))
                elif g.requires_grad:
                    raise Untraceable("backward(create_graph=True) inside a compiled function")
                else:
                    actions.append(("grad_new", i, final(g.data)))
            elif g is not None and g.data is not gd0:
                ran_backward = True
                actions.append(("grad_data", i, final(g.data)))
            v = t._version[0] if t._version is not None else 0
            if v != v0:
                actions.append(("version", i, v - v0))
            if t.requires_grad != before.requires_grad[i]:      # requires_grad_() inside the function
                actions.append(("requires_grad", i, t.requires_grad))
        for b, v0 in zip(binds, before.bindings):
            v = b.get()
            if v is not v0 and not b.dynamic:
                actions.append(("bind", b, self._value(v, holders, final)))
        known = {b.ident() for b in binds}
        for b in bindings(st):                       # entries added by the trace (new optimizer state)
            if b.ident() not in known and not b.dynamic:
                actions.append(("bind", b, self._value(b.get(), holders, final)))
        for m, flag in zip(st.modules, before.training):
            if m.training != flag:
                actions.append(("train", m, m.training))
        fwd = tr.steps if back is None else tr.steps[:back[1]]
        written = {s for step in fwd for s in step.mutates}
        if any(gd0.__class__ is Traced and gd0.vid in written for _, _, gd0, _ in before.tensors):
            ran_backward = True                      # gradients accumulated in place
        graph = {}
        if back is not None:
            for o in back[0]:
                graph[id(o)] = (len(graph), final(o.data))
        outputs = self._outputs(out, holders, final, ran_backward, graph)
        aot = None
        if back is not None:
            rebound = {a[1] for a in actions if a[0] == "data"}
            state_vids = {v: i for v, i, kind in inputs if i >= n_args and kind == "data" and i not in rebound}
            res, bprog, gmap, copy_seeds = _aot.build(
                tr, back[1], back[2], back[4],
                lambda steps, ins, fins: self._program(tr, steps, ins, fins, {
                    pos for pos, v in enumerate(ins) if v in state_vids}))
            back[5][:] = res
            o0 = back[0][0]
            aot = _aot.Aot(bprog, back[3], gmap, len(res),
                           [(tr.values[v].shape, tr.values[v].dtype) for v in back[2]], copy_seeds, o0.device,
                           [f for _, f in graph.values()])
            finals.extend(res)
            aot_res = res
        fuser = get_fuser(_first_backend(tr)) if self.fuse else None
        if fuser is not None and overlap and written & {v for v, _, _ in inputs}:
            fuser = None            # inputs that overlap and are written: fusing may move a read past a write
        if hasattr(fuser, "cuda_graphs"):
            fuser.cuda_graphs = self.cuda_graphs
            # state tensors' data (not arguments, not rebound by this call) stays the same arrays from
            # call to call: a graph reads them in place
            rebound = {a[1] for a in actions if a[0] == "data"}
            fuser.state_inputs = {pos for pos, (_, i, kind) in enumerate(inputs)
                                  if i >= n_args and kind == "data" and i not in rebound}
        # for calls whose outputs are only read: the forward again without residuals (aot.Aot.use_lazy),
        # from copies of the steps (building a program rewrites them)
        lazy = [_copy.copy(s) for s in fwd] if aot is not None and not actions and \
            not hasattr(fuser, "finish") and _repeatable(fwd, inputs) else None
        watched = _residual_inputs(fwd, inputs, aot_res, len(holders)) if lazy is not None else None
        program = build_program(fwd, [v for v, _, _ in inputs], finals, tr.values, tr.backend_of, fuser)
        if hasattr(fuser, "finish"):             # the CUDA fuser: kernel counts, graph capture
            program = fuser.finish(program, self.stats)
        if lazy is not None:
            aot.full = program
            aot.lazy = build_program(lazy, [v for v, _, _ in inputs], finals[:len(finals) - len(aot_res)],
                                     tr.values, tr.backend_of, get_fuser(_first_backend(tr)) if self.fuse else None)
            aot.watched = watched
            aot.versions = _versions_reader(watched)
        return _Entry(program, [(i, kind) for _, i, kind in inputs], actions, outputs, _rng_backends(fwd), aot)

    def _program(self, tr, steps, inputs, finals, state_inputs):
        """A program of its own for ``steps`` (the compiled backward), with the fuser as the forward's."""
        fuser = get_fuser(_first_backend(tr)) if self.fuse else None
        if hasattr(fuser, "cuda_graphs"):
            fuser.cuda_graphs = self.cuda_graphs
            fuser.state_inputs = state_inputs
        program = build_program(steps, inputs, finals, tr.values, tr.backend_of, fuser)
        if hasattr(fuser, "finish"):
            program = fuser.finish(program, self.stats)
        return program

    def _value(self, v, holders, final):
        if isinstance(v, Tensor):
            for i, h in enumerate(holders):
                if h is v:
                    return ("holder", i)
            if v.requires_grad and v.grad_fn is not None:
                raise Untraceable("a tensor in the graph was stored in module or optimizer state")
            return ("tensor", final(v.data), v.device, v.requires_grad)
        if v is None or isinstance(v, (int, float, bool, str, tuple)):
            return ("py", v)
        raise Untraceable(f"a {type(v).__name__} was stored in module or optimizer state")

    def _outputs(self, out, holders, final, ran_backward, graph):
        if isinstance(out, Tensor):
            for i, h in enumerate(holders):
                if h is out:
                    return ("holder", i)
            g = graph.get(id(out))
            if g is not None:
                return ("graph", g[0])
            if out.requires_grad and out.grad_fn is not None and not out.grad_fn._freed:
                raise Untraceable("the function returns tensors whose graph is needed afterwards, and no "
                                  "compiled backward was made for them")
            d = out.data
            if d.__class__ is not Traced:
                return ("const", d)
            return ("tensor", final(d), out.device)
        if isinstance(out, (list, tuple)) and not hasattr(out, "_fields"):
            return ("seq", type(out), [self._outputs(o, holders, final, ran_backward, graph) for o in out])
        if isinstance(out, dict):
            return ("dict", type(out), [(k, self._outputs(v, holders, final, ran_backward, graph))
                                        for k, v in out.items()])
        if out is None or isinstance(out, (int, float, complex, bool, str, bytes)):
            return ("py", out)
        raise Untraceable(f"the function returns a {type(out).__name__}, which compile does not rebuild")

    # -- replaying ---------------------------------------------------------------------------------
    def _replay(self, entry, holders):
        arrays = entry.gather(holders)
        if entry.release and entry.program.graph_runner.graph is not None:
            # only a graph launch writes buffers it handed out, and it raises no GuardFailed (a program
            # with guards is never captured): a plain run's failed guard traces again with the old gradients
            for i in entry.release:
                holders[i]._grad = None
        finals = entry.program.run(arrays)
        del arrays
        entry.bump(holders)
        for a in entry.actions:
            k = a[0]
            if k == "grad_new":
                g = Tensor._make(finals[a[2]], holders[a[1]].device)
                holders[a[1]]._grad = g
            elif k == "data":
                holders[a[1]].data = _backends.as_ndarray(finals[a[2]])
            elif k == "grad_data":
                holders[a[1]]._grad.data = finals[a[2]]
            elif k == "grad_none":
                holders[a[1]]._grad = None
            elif k == "bind":
                a[1].set(_rebuild_value(a[2], holders, finals))
            elif k == "train":
                a[1].training = a[2]
            elif k == "requires_grad":
                holders[a[1]].requires_grad = a[2]
        aot = entry.aot
        if aot is None:
            return _rebuild(entry.outputs, holders, finals, None)
        dev = aot.device
        graph = [Tensor._make(finals[j], dev) for j in aot.outs]
        aot.attach(graph, finals[len(finals) - aot.n_res:] if aot.n_res else (), holders)
        return _rebuild(entry.outputs, holders, finals, graph)

    def _replay_lazy(self, entry, holders):
        """A replay whose outputs are only read (aot.Aot.use_lazy): the forward without residuals; the
        node keeps the input arrays and the holders' versions to recompute them if a backward comes."""
        arrays = entry.gather(holders)
        aot = entry.aot
        finals = aot.lazy.run(arrays)
        dev = aot.device
        graph = [Tensor._make(finals[j], dev) for j in aot.outs]
        aot.attach(graph, _aot._Lazy(arrays, aot.versions(holders), holders), holders)
        return _rebuild(entry.outputs, holders, finals, graph)


def _rebuild_value(spec, holders, finals):
    k = spec[0]
    if k == "holder":
        return holders[spec[1]]
    if k == "tensor":
        t = Tensor._make(finals[spec[1]], spec[2])
        if spec[3]:
            t.requires_grad = True
        return t
    return spec[1]


def _rebuild(spec, holders, finals, graph):
    k = spec[0]
    if k == "tensor":
        return Tensor._make(finals[spec[1]], spec[2])
    if k == "graph":
        return graph[spec[1]]
    if k == "holder":
        return holders[spec[1]]
    if k == "seq":
        items = [_rebuild(s, holders, finals, graph) for s in spec[2]]
        return spec[1](items)
    if k == "dict":
        return spec[1]((key, _rebuild(s, holders, finals, graph)) for key, s in spec[2])
    if k == "const":
        return Tensor._make(spec[1].copy(), _backends.backend_of_array(spec[1]).device)
    return spec[1]


class _Snapshot:
    """The holders' arrays, gradients and versions, the bindings' values and the training flags."""

    def __init__(self, holders, binds, st):
        self.tensors = []
        for t in holders:
            g = t._grad
            self.tensors.append((t.data, g, None if g is None else g.data,
                                 t._version[0] if t._version is not None else 0))
        self.requires_grad = [t.requires_grad for t in holders]
        self.bindings = [b.get() for b in binds]
        self.training = [m.training for m in st.modules]


def _enter(tr, holders):
    """Put traced handles in the holders (and their gradients); the program's inputs as
    (value number, holder index, "data" or "grad")."""
    inputs = []
    for i, t in enumerate(holders):
        b = t.device.backend
        h = tr.external(t.data, b)
        t.data = h
        inputs.append((h.vid, i, "data"))
        g = t._grad
        if g is not None:
            hg = tr.external(g.data, b)
            g.data = hg
            inputs.append((hg.vid, i, "grad"))
    return inputs


def _real(t):
    d = t.data
    if d.__class__ is Traced:
        t.data = _backends.as_ndarray(d.v)


def _leave(holders, binds, st, out):
    """Real arrays back in everything the caller can reach after the trace."""
    for t in holders:
        _real(t)
        if t._grad is not None:
            _real(t._grad)
    for b in bindings(st):
        v = b.get()
        if isinstance(v, Tensor):
            _real(v)
            if v._grad is not None:
                _real(v._grad)
    _real_out(out)


def _real_out(out):
    if isinstance(out, Tensor):
        _real(out)
        if out._grad is not None:
            _real(out._grad)
    elif isinstance(out, (list, tuple)):
        for o in out:
            _real_out(o)
    elif isinstance(out, dict):
        for o in out.values():
            _real_out(o)


_RANDOM = frozenset({"rand", "randn", "randint", "permutation"})


def _rng_backends(steps):
    """The backends whose random kernels the steps call (their generator state is restored when a replay is
    abandoned at a failed guard, so the retrace draws the numbers eager mode would)."""
    if not any(s.kind == "guard" or s.shape_guard is not None for s in steps):
        return ()                                # no guard: a replay is never abandoned
    out = []
    for s in steps:
        owner = getattr(s.fn, "__self__", None)
        # only the host generator: CuPy's get_rng_state forks the generator, which eager mode never does
        if getattr(s.fn, "__name__", "") in _RANDOM and getattr(getattr(owner, "device", None), "type", None) == "cpu" and \
                hasattr(owner, "get_rng_state") and owner not in out:
            out.append(owner)
    return tuple(out)


def _repeatable(steps, inputs):
    """Whether running ``steps`` (a forward that writes nothing back: no actions) a second time on the same
    input arrays gives the same values and changes nothing: no guard, no random draw, no host value (an
    optimizer's step count), no write into an input or a view of one."""
    ins = {v for v, _, _ in inputs}
    root = _aot._view_roots(steps)
    for s in steps:
        if s.kind == "guard" or s.shape_guard is not None or s.label == "host_values":
            return False
        fn = s.fn
        if getattr(fn, "__name__", "") in _RANDOM or "rng" in s.kwargs or \
                _backends.is_rng(getattr(fn, "__self__", None)):
            return False
        for v in s.mutates:
            if root.get(v, v) in ins:
                return False
    return True


def _residual_inputs(steps, inputs, res, n):
    """The positions in the holders of the inputs the residuals ``res`` (vids) are computed from: a walk
    back through ``steps``' arguments (an in-place write to another input after a lazy call leaves the
    residuals as they were: eager computes that backward too). All n where a step writes in place (a write
    into a view may reach a value the walk does not see)."""
    if any(s.mutates or "out" in s.kwargs for s in steps):
        return tuple(range(n))
    need = set(res)
    for s in reversed(steps):
        o = s.outs
        if s.kind == "call" and (o in need if o.__class__ is int else any(v in need for v in o or () if v is not None)):
            need.update(s.refs())
    return tuple(sorted({i for v, i, _ in inputs if v in need}))


def _versions_reader(idx):
    """A generated ``versions(H)``: the version number of the holders at positions ``idx`` (0 before any
    write)."""
    src = "def versions(H):\n    return (" + "".join(
        f"H[{i}]._version[0] if H[{i}]._version is not None else 0, " for i in idx) + ")\n"
    glob = {}
    exec(builtins.compile(src, "<ag.compile versions>", "exec"), glob)
    return glob["versions"]


def _where(fn):
    """'file:line' where a function (or a bound method's, or a callable object's __call__) is defined."""
    f = getattr(fn, "__func__", fn)
    code = getattr(f, "__code__", None) or getattr(getattr(type(fn), "__call__", None), "__code__", None)
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else repr(fn)


def _first_backend(tr):
    for b in tr.backend_of.values():
        return b
    return _backends.get_backend("cpu")


def compile(fn=None, *, cache_size=8, fuse=True, cuda_graphs=True):
    """Trace ``fn`` on its first call with each signature and replay the recorded array work afterwards.

    Use as ``step = ag.compile(step)`` or ``@ag.compile``; ``ag.compile(module)`` returns a CompiledModule
    (the module, with compiled calls). Outputs that still require grad differentiate outside through a
    compiled backward. ``cache_size`` programs are kept (the least
    recently used is dropped); ``fuse=False`` replays without fused kernels; ``cuda_graphs=False`` keeps
    CUDA programs from being captured as CUDA graphs. See docs/compile.md."""
    if fn is None:
        return lambda f: compile(f, cache_size=cache_size, fuse=fuse, cuda_graphs=cuda_graphs)
    if not callable(fn):
        raise TypeError(f"compile: expected a function, a module or another callable, got {type(fn).__name__}")
    from ..nn.module import Module
    if isinstance(fn, Module):           # a module-like wrapper whose calls are compiled (module.py)
        from .module import CompiledModule
        return CompiledModule(fn, cache_size=cache_size, fuse=fuse, cuda_graphs=cuda_graphs)
    return CompiledFunction(fn, cache_size, fuse, cuda_graphs)
