"""Function and its ctx: save_for_backward, saved_tensors, needs_input_grad, apply.

A call ``Fn.apply(*args)`` creates one instance of ``Fn``; that instance is both the ``ctx`` that
``forward`` and ``backward`` receive and the graph node stored as the outputs' ``grad_fn``. Its
``_next`` holds one edge per argument: the node that made the input (``(node, output_nr)`` when
output_nr > 0), the input Tensor itself for a leaf that requires grad, or None when no gradient is
needed. Edges are this compact, and saved tensors kept in the tuple save_for_backward received,
because every object a node keeps alive is one more for Python's cyclic GC to walk.
"""
import itertools
import traceback
from typing import Any, Callable, Optional

from .grad_mode import state, mark_while_inference
from ..device import get_default_device
from ..backends import SCALAR_TYPES, as_ndarray

__all__ = ["Function"]

_FALSES = tuple((False,) * n for n in range(8))
_anomaly = [0]            # threads with detect_anomaly() on; read before the thread-local flag
_next_seq = itertools.count().__next__   # creation order: a node's inputs always come before it
_interned: dict[tuple[bool, ...], tuple[bool, ...]] = {}    # needs_input_grad tuples are shared, not allocated per node
_TRUE1 = (True,)
_NEEDS2 = (((False, False), (False, True)), ((True, False), (True, True)))
Tensor: Any = None     # the Tensor class, set by autograd_gpu.tensor (it imports this module first; a layer below it)
_vmap: list[Callable] = []    # [has_batched, batched_apply] while a vmap runs (func/vmap.py), else empty
_new = object.__new__


def _wrap_all(ctx, arrays):
    """Function.of's result for a tuple of arrays: their Tensors, None kept."""
    wrap = ctx.wrap
    out = []
    for a in arrays:
        out.append(None if a is None else wrap(a))
    return tuple(out)


def _two_devices(cls, dev, other):
    return RuntimeError(f"{cls.__name__}: expected all tensors on one device, got {dev} and {other}; "
                        "move one with .to()")


def _stale_view(cls, t):
    raise RuntimeError(
        f"{cls.__name__}: one of its inputs (shape {tuple(t.data.shape)}) is a view of a tensor that was modified "
        "in place after the view was made, while gradients were recorded; the view's gradient would follow the "
        "old value. Make the view again after the in-place op, or use out-of-place ops")


class Function:
    """Base class of every differentiable op, built-in or user-defined.

    Subclasses define ``forward(ctx, *args)`` (Tensors in, with recording off; Tensors out) and
    ``backward(ctx, *grads)`` (one gradient Tensor or None per forward argument, written with Tensor
    ops so that ``create_graph=True`` can differentiate it again). Call them as ``Fn.apply(*args)``.
    """

    __slots__ = ("xp", "device", "needs_input_grad", "_next", "_saved", "_saved_versions", "_n_out",
                 "_hooks", "_freed", "_seq", "__dict__", "__weakref__")

    # True on a built-in op whose forward does array math only (no Tensor ops, no keyword arguments):
    # apply then skips switching recording off around it. A subclass must set it again itself.
    _array_forward = False

    # How vmap batches a call (ops/batching.py): a rule ``rule(cls, args, kwargs)``; None runs the op once
    # per example with a warning (a user's Function). Every built-in op declares one (tests/test_registry.py).
    batch_rule: Optional[Callable[..., Any]] = None

    # True on a user's Function (defined outside the package): its backward may return a tensor it keeps,
    # which the engine then never makes a leaf's .grad itself (a later backward adds into .grad in place).
    _user_fn = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "_array_forward" not in cls.__dict__:
            cls._array_forward = False
        cls._user_fn = not cls.__module__.startswith("autograd_gpu.")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        """Compute the outputs from the inputs with array maths on ``ctx.xp``; save what backward needs on
        ``ctx``. Subclasses define it as a staticmethod.
        """
        raise NotImplementedError("subclasses of Function must define forward(ctx, ...)")

    @staticmethod
    def arrays(ctx, *args):
        """This Function's maths on arrays, for a Function that is a backward's own op (TanhBackward, ...):
        what ``forward`` computes, given its tensor arguments' arrays and its other arguments in order.
        ``forward`` returns ``ctx.wrap(cls.arrays(ctx, ...))``; ``of`` runs it straight."""
        raise NotImplementedError(f"{type(ctx).__name__} has no array maths (arrays) for Function.of")

    # True on a backward op whose ``arrays`` returns a view of the gradient's array (Sum's regrow: a reshape
    # and a broadcast): ``of`` wraps it with the gradient as its base, so the two share a version counter.
    _views_grad = False

    @classmethod
    def of(cls, ctx, grad, *extra):
        """The gradient that ``ctx``'s backward returns, written once as this Function (the backward's own
        op) of ``grad``, ``ctx``'s saved tensors and ``extra`` (its other arguments). When nothing records
        (no create_graph, no vmap batching rule could apply, no device context to enter), ``cls.arrays``
        runs on the arrays (no node, no saved output rebuilt as a Tensor: the apply machinery dominates
        the backward of small tensors);
        otherwise ``cls.apply``, recorded and differentiable again. One place picks for every op and device
        (issue 23: each backward written once). ``arrays`` may return a tuple of arrays (a backward with
        several gradients: Linear's gx, gw, gb), None where no gradient is wanted: the result is then the
        tuple of their Tensors, None kept."""
        if not state.enabled and not _vmap and ctx.device.backend.context is None:     # nothing records
            saved = ctx._saved
            if saved is None:
                r = cls.arrays(ctx, grad.data, *extra)
                if r.__class__ is not tuple:      # grad's own array: grad itself, so that the engine sees it
                    return grad if r is grad.data else ctx.wrap(r, grad if cls._views_grad else None)   # shared
                return _wrap_all(ctx, r)
            r = None
            if not ctx._freed:
                versions = ctx._saved_versions
                if len(saved) == 1 and not extra:
                    t = saved[0]      # the common case (tanh, sigmoid, relu, exp): _saved_arrays' check, inline
                    if t.__class__ is tuple:               # a saved output: (array, its version counter, ...)
                        a, counter = t[0], t[1]
                    elif t is not None:
                        a, counter = t.data, t._version
                    else:
                        a = counter = None
                    if counter is None or counter[0] == (0 if versions is None else versions[0]):
                        return ctx.wrap(cls.arrays(ctx, grad.data, a))
                elif versions is None and len(saved) == 2:     # two saved inputs (Mul, Linear): the check inline
                    t, u = saved
                    if t.__class__ is not tuple and u.__class__ is not tuple and t is not None and u is not None:
                        ct, cu = t._version, u._version
                        if (ct is None or not ct[0]) and (cu is None or not cu[0]):
                            r = cls.arrays(ctx, grad.data, t.data, u.data, extra[0]) if len(extra) == 1 else \
                                cls.arrays(ctx, grad.data, t.data, u.data, *extra)      # (Mul's node: no tuple)
                elif versions is None:            # several saved, none written in place before it was saved
                    arrays = []
                    for t in saved:
                        if t.__class__ is tuple:
                            a, counter = t[0], t[1]
                        elif t is not None:
                            a, counter = t.data, t._version
                        else:
                            a = counter = None
                        if counter is not None and counter[0]:
                            break                  # written in place since: _saved_arrays checks (and raises)
                        arrays.append(a)
                    else:
                        r = cls.arrays(ctx, grad.data, *arrays, *extra)
            if r is None:
                r = cls.arrays(ctx, grad.data, *ctx._saved_arrays(), *extra)
            if r.__class__ is not tuple:
                return ctx.wrap(r)
            if len(r) == 2:                       # (Mul's two gradients), without the loop
                a, b = r
                return (None if a is None else ctx.wrap(a)), (None if b is None else ctx.wrap(b))
            return _wrap_all(ctx, r)
        return cls.apply(grad, *ctx.saved_tensors, *extra)

    @staticmethod
    def backward(ctx, *grads):
        """Given the gradient of each output, return the gradient of each input of ``forward`` (None for
        those that need none), using Tensor ops so higher derivatives work.
        """
        raise NotImplementedError(f"{type(ctx).__name__} defines no backward(ctx, *grads); a Function used "
                                  "in a graph that is differentiated must define one")

    # -- helpers for forward ----------------------------------------------------------------
    def wrap(self, array, base=None):
        """Array -> Tensor on this op's device, without a copy. Pass ``base`` when ``array`` is a
        view of ``base.data``, so both share one version counter (in-place edits are seen)."""
        t = _new(Tensor)
        t.data = array if array.__class__ not in SCALAR_TYPES else as_ndarray(array)
        t.device = self.device
        t.requires_grad = False
        t.grad_fn = None
        if base is not None:
            t._version = counter = base.version_counter()
            t._base = base if base._base is None else base._base
            if counter[1]:
                t._view_gv = counter[1]
        return t

    def save_for_backward(self, *tensors):
        """Keep these tensors for ``backward``; an in-place change to one of them before backward is an error."""
        self._saved = tensors

    @property
    def saved_tensors(self):
        """The tensors passed to ``save_for_backward``, checked against in-place changes since."""
        if self._freed:
            raise RuntimeError(
                f"{type(self).__name__}: backward through a graph that was already freed (its saved "
                "tensors were released after the first backward); pass retain_graph=True to the first "
                "backward() if you need to call it twice")
        saved = self._saved
        if saved is None:
            return ()
        versions = self._saved_versions
        i = 0
        for t in saved:    # common case: tensors not written in place since they were saved -> as saved
            if t is not None:
                if t.__class__ is tuple:           # a saved output: rebuilt (and checked) by _unpack_saved
                    return self._unpack_saved(saved)
                v = t._version
                if v is not None and v[0] != (0 if versions is None else versions[i]):
                    return self._unpack_saved(saved)       # raises, naming the tensor
            i += 1
        return saved

    def _saved_arrays(self):
        """The arrays of saved_tensors, checked the same way, for a backward that computes on arrays
        (Function.of's array case): a saved output (exp, tanh, relu save theirs) is not rebuilt as a Tensor."""
        saved = self._saved
        if saved is not None and not self._freed:
            versions = self._saved_versions
            out = []
            i = 0
            for t in saved:
                if t is not None:
                    counter = t[1] if t.__class__ is tuple else t._version
                    if counter is not None and counter[0] != (0 if versions is None else versions[i]):
                        break                      # written in place since: saved_tensors raises
                    t = t[0] if t.__class__ is tuple else t.data
                out.append(t)
                i += 1
            else:
                return out
        return [None if t is None else t.data for t in self.saved_tensors]

    def _unpack_saved(self, saved):
        """Saved tensors with saved outputs rebuilt and every version checked."""
        versions = self._saved_versions
        out = []
        for i, t in enumerate(saved):
            if t is None:
                out.append(None)
                continue
            if t.__class__ is tuple:              # a saved output, see _pack_saved
                data, counter, nr = t
                u = self.wrap(data)
                u._version = counter
                u.grad_fn = self
                u.requires_grad = True
                u._output_nr = nr
            else:
                counter = t._version
                u = t
            now = counter[0] if counter is not None else 0
            if now != (versions[i] if versions is not None else 0):
                raise RuntimeError(
                    f"{type(self).__name__}: one of the tensors it saved for backward (shape "
                    f"{tuple(u.data.shape)}) was modified by an in-place operation after it was saved "
                    f"(its version is {now}, expected {versions[i] if versions else 0}); use an "
                    "out-of-place op instead (e.g. x = x + y rather than x += y)")
            out.append(u)
        return tuple(out)

    @property
    def next_functions(self):
        """The edges to the nodes that made the inputs, as in PyTorch: ((node, output_nr), ...)."""
        return tuple(None if e is None else ("AccumulateGrad", e) if isinstance(e, Tensor) else
                     e if isinstance(e, tuple) else (e, 0) for e in self._next)

    def name(self):
        """The op's name as shown in reprs: the class name, or ``display_name`` when a class sets one
        (AddScalar shows as Add)."""
        return getattr(type(self), "display_name", type(self).__name__)

    def __repr__(self):
        return f"<{type(self).__name__} node>"

    # -- the call ------------------------------------------------------------------------------
    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward on ``args``; when recording and some Tensor argument requires grad, make the
        outputs non-leaves whose ``grad_fn`` is this call's node."""
        # The hottest code of the library: one pass over the arguments finds the device, checks it,
        # and (when recording) builds the edges; ops of one and two arguments take a straight path.
        if _vmap and _vmap[0](args, kwargs):      # inside vmap with a batched argument: its batching rule
            return _vmap[1](cls, args, kwargs)
        n = len(args)
        edges = None
        if n == 1:
            a = args[0]
            if isinstance(a, Tensor):
                dev = a.device
                if a.requires_grad and state.enabled:
                    if a._base is not None and a._version[1] != a._view_gv:
                        _stale_view(cls, a)
                    fn = a.grad_fn
                    edges = (a if fn is None else fn if a._output_nr == 0 else (fn, a._output_nr),)
                    needs = _TRUE1
            else:
                dev = get_default_device()
        elif n == 2:
            a, b = args
            ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
            dev = a.device if ta else b.device if tb else get_default_device()
            if ta and tb and b.device is not dev:
                raise _two_devices(cls, dev, b.device)
            ra, rb = ta and a.requires_grad, tb and b.requires_grad
            if (ra or rb) and state.enabled:
                ea = eb = None
                if ta:
                    if a._base is not None and a._version[1] != a._view_gv:
                        _stale_view(cls, a)
                    if ra:
                        fn = a.grad_fn
                        ea = a if fn is None else fn if a._output_nr == 0 else (fn, a._output_nr)
                if tb:
                    if b._base is not None and b._version[1] != b._view_gv:
                        _stale_view(cls, b)
                    if rb:
                        fn = b.grad_fn
                        eb = b if fn is None else fn if b._output_nr == 0 else (fn, b._output_nr)
                edges = (ea, eb)
                needs = _NEEDS2[ra][rb]
        elif state.enabled:
            # one pass: the device, the edges and a stale view (raised only if something records)
            dev = stale = None
            needs, lst = [], []
            for a in args:
                if isinstance(a, Tensor):
                    if dev is None:
                        dev = a.device
                    elif a.device is not dev:
                        raise _two_devices(cls, dev, a.device)
                    if stale is None and a._base is not None and a._version[1] != a._view_gv:
                        stale = a
                    if a.requires_grad:
                        needs.append(True)
                        fn = a.grad_fn
                        lst.append(a if fn is None else fn if a._output_nr == 0 else (fn, a._output_nr))
                        continue
                needs.append(False)
                lst.append(None)
            if dev is None:
                dev = get_default_device()
            if True in needs:
                if stale is not None:
                    _stale_view(cls, stale)
                needs = tuple(needs)
                needs = _interned.setdefault(needs, needs)
                edges = tuple(lst)
        else:
            dev = None
            for a in args:
                if isinstance(a, Tensor):
                    if dev is None:
                        dev = a.device
                    elif a.device is not dev:
                        raise _two_devices(cls, dev, a.device)
            if dev is None:
                dev = get_default_device()
        backend = dev.backend
        ctx = _new(cls)
        ctx.xp = backend.xp
        ctx.device = dev
        ctx._saved = None
        if edges is None:
            ctx.needs_input_grad = _FALSES[n] if n < 8 else (False,) * n
            if backend.context is not None:
                with backend.context():
                    return cls.forward(ctx, *args, **kwargs)
            return cls.forward(ctx, *args, **kwargs) if kwargs else cls.forward(ctx, *args)

        # recording: the node's edges, then forward with recording off
        ctx.needs_input_grad = needs
        ctx._next = edges
        ctx._hooks = None
        ctx._freed = False
        ctx._seq = _next_seq()
        if cls._array_forward and not kwargs and backend.context is None:
            out = cls.forward(ctx, *args)          # array math only: nothing it does could be recorded
        else:
            state.enabled = False
            try:
                if backend.context is not None:
                    with backend.context():
                        out = cls.forward(ctx, *args, **kwargs)
                else:
                    out = cls.forward(ctx, *args, **kwargs) if kwargs else cls.forward(ctx, *args)
            finally:
                state.enabled = True
        if out.__class__ is Tensor and (out is args[0] if n == 1 else (out is args[0] or out is args[1]) if n == 2
                                        else any(out is a for a in args)):
            out = ctx._alias(out)                  # forward returned an input: its output is a new tensor
        if out.__class__ is Tensor and out.grad_fn is None and not out.requires_grad:
            out.grad_fn = ctx                      # the common case: one new output
            out.requires_grad = True
            out._output_nr = 0
            ctx._n_out = 1
            if ctx._saved is not None:
                ctx._pack_saved((out,))
        else:
            out = ctx._record_outputs(out, args)
        if _anomaly[0] and state.anomaly:
            ctx.__dict__["_trace"] = traceback.extract_stack()[:-1]
        return out

    def _alias(self, t):
        """A new Tensor on t's memory (and version counter), for an output that is one of the inputs."""
        return self.wrap(t.data, base=t)

    def _record_outputs(self, out, args):
        """Mark the outputs of a forward that returned a tuple (or something unusual)."""
        outs = out if isinstance(out, tuple) else (out,)
        none_ok = getattr(type(self), "materialize_grads", True) is False    # (a backward op's unwanted gradients)
        for o in outs:
            if not isinstance(o, Tensor) and not (o is None and none_ok):
                raise TypeError(f"{type(self).__name__}.forward must return Tensors (wrap arrays with ctx.wrap), "
                                f"got {type(o).__name__}")
        # an input returned as an output becomes a new tensor on the same memory, as in PyTorch
        outs = tuple(self._alias(o) if o is not None and any(o is a for a in args) else o for o in outs)
        self._n_out = len(outs)
        if self._n_out > 1:
            self._out_meta = [None if o is None else (o.data.shape, o.data.dtype) for o in outs]
        for i, o in enumerate(outs):
            if o is None:
                continue
            if o.grad_fn is not None or o.requires_grad:
                raise RuntimeError(f"{type(self).__name__}.forward returned a tensor that is already in the "
                                   "graph; return a new Tensor (e.g. x.clone())")
            o.grad_fn = self
            o.requires_grad = True
            o._output_nr = i
        if self._saved is not None:
            self._pack_saved(outs)
        return outs if isinstance(out, tuple) else outs[0]

    def _pack_saved(self, outs):
        """Record the saved tensors' versions (None: all still 0) and store saved outputs without
        their Tensor, so output -> grad_fn -> saved -> output is no reference cycle."""
        saved = self._saved
        if len(saved) == 1 and saved[0] is outs[0] and outs[0].grad_fn is self:
            t = outs[0]                           # a saved output alone (exp, tanh, sigmoid): see below
            self._saved = ((t.data, t.version_counter(), t._output_nr),)
            self._saved_versions = None
            return
        for t in saved:       # the common case: inputs never written in place -> nothing to record
            if t is not None and (t.__class__ is not Tensor or t._version is not None or t.grad_fn is self):
                break
        else:
            self._saved_versions = None
            return
        versions = None
        for i, t in enumerate(saved):
            if t is None:
                continue
            if not isinstance(t, Tensor):
                raise TypeError(f"{type(self).__name__}: save_for_backward takes Tensors (or None), got "
                                f"{type(t).__name__}; keep other values as attributes of ctx")
            if t.grad_fn is self:
                # an output: keep (data, version counter, output_nr), not the Tensor, so that
                # output -> grad_fn -> saved -> output is no reference cycle
                saved = saved[:i] + ((t.data, t.version_counter(), t._output_nr),) + saved[i + 1:]
            elif t._version is not None and t._version[0]:
                if versions is None:
                    versions = [0] * len(saved)
                versions[i] = t._version[0]
        self._saved = saved
        self._saved_versions = versions


mark_while_inference(Function, "wrap")      # what ops make inside inference_mode() are inference tensors
