"""Function and its ctx: save_for_backward, saved_tensors, needs_input_grad, apply.

A call ``Fn.apply(*args)`` creates one instance of ``Fn``; that instance is both the ``ctx`` that
``forward`` and ``backward`` receive and the graph node stored as the outputs' ``grad_fn``. Its
``_next`` holds one edge per argument: ``(node, output_nr)`` for an input made by another op,
``(None, tensor)`` for a leaf that requires grad, ``None`` for anything that needs no gradient.
"""
import traceback

from .grad_mode import state
from ..device import get_default_device

__all__ = ["Function"]

_FALSES = tuple((False,) * n for n in range(8))
Tensor = None          # set by autograd_gpu.tensor (it imports this module first)
_new = object.__new__


class _SavedOutput:
    """An output of this node saved for backward, stored without the Tensor so that
    output -> grad_fn -> saved -> output is no reference cycle; unpacked as a fresh Tensor."""

    __slots__ = ("data", "version", "output_nr")

    def __init__(self, t, output_nr):
        self.data = t.data
        self.version = t._version
        self.output_nr = output_nr


class Function:
    """Base class of every differentiable op, built-in or user-defined.

    Subclasses define ``forward(ctx, *args)`` (Tensors in, with recording off; Tensors out) and
    ``backward(ctx, *grads)`` (one gradient Tensor or None per forward argument, written with Tensor
    ops so that ``create_graph=True`` can differentiate it again). Call them as ``Fn.apply(*args)``.
    """

    __slots__ = ("xp", "device", "needs_input_grad", "_next", "_saved", "_saved_versions", "_n_out",
                 "_hooks", "_freed", "__dict__", "__weakref__")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("subclasses of Function must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError(f"this Function defines no backward(ctx, *grads)")

    # -- helpers for forward ----------------------------------------------------------------
    def wrap(self, array, base=None):
        """Array -> Tensor on this op's device, without a copy. Pass ``base`` when ``array`` is a
        view of ``base.data``, so both share one version counter (in-place edits are seen)."""
        t = _new(Tensor)
        t.data = array
        t.device = self.device
        t.requires_grad = False
        t.grad = None
        t.grad_fn = None
        t._hooks = None
        if base is None:
            t._version = [0]
            t._base = None
        else:
            t._version = base._version
            t._base = base if base._base is None else base._base
        return t

    def save_for_backward(self, *tensors):
        self._saved = tensors

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(
                f"{type(self).__name__}: backward through a graph that was already freed (its saved "
                "tensors were released after the first backward); pass retain_graph=True to the first "
                "backward() if you need to call it twice")
        saved = self._saved
        if saved is None:
            return ()
        out = []
        for t, v in zip(saved, self._saved_versions):
            if t is None:
                out.append(None)
                continue
            if isinstance(t, _SavedOutput):
                counter = t.version
                u = self.wrap(t.data)
                u._version = counter
                u.grad_fn = self
                u.requires_grad = True
                u._output_nr = t.output_nr
            else:
                counter = t._version
                u = t
            if counter[0] != v:
                raise RuntimeError(
                    f"{type(self).__name__}: one of the tensors it saved for backward (shape "
                    f"{tuple(t.data.shape)}) was modified by an in-place operation after it was saved "
                    f"(its version is {counter[0]}, expected {v}); use an out-of-place op instead "
                    "(e.g. x = x + y rather than x += y)")
            out.append(u)
        return tuple(out)

    @property
    def next_functions(self):
        """The edges to the nodes that made the inputs, as in PyTorch: ((node, output_nr), ...)."""
        return tuple(e if e is None or e[0] is not None else ("AccumulateGrad", e[1]) for e in self._next)

    def name(self):
        return type(self).__name__

    def __repr__(self):
        return f"<{type(self).__name__} node>"

    # -- the call ------------------------------------------------------------------------------
    @classmethod
    def apply(cls, *args, **kwargs):
        """Run forward on ``args``; when recording and some Tensor argument requires grad, make the
        outputs non-leaves whose ``grad_fn`` is this call's node."""
        dev = None
        record = False
        for a in args:
            if isinstance(a, Tensor):
                d = a.device
                if dev is None:
                    dev = d
                elif d is not dev:
                    raise RuntimeError(f"{cls.__name__}: expected all tensors on one device, got {dev} "
                                       f"and {d}; move one with .to()")
                if a.requires_grad:
                    record = True
        if dev is None:
            dev = get_default_device()
        backend = dev._backend or dev.backend
        ctx = _new(cls)
        ctx.xp = backend.xp
        ctx.device = dev
        ctx._saved = None
        if record and state.enabled:
            ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
            state.enabled = False
            try:
                if backend.context is None:
                    out = cls.forward(ctx, *args, **kwargs)
                else:
                    with backend.context():
                        out = cls.forward(ctx, *args, **kwargs)
            finally:
                state.enabled = True
            ctx._record(args, out)
            return out
        ctx.needs_input_grad = _FALSES[len(args)] if len(args) < 8 else (False,) * len(args)
        if backend.context is None:
            return cls.forward(ctx, *args, **kwargs)
        with backend.context():
            return cls.forward(ctx, *args, **kwargs)

    def _record(self, args, out):
        """Link this node into the graph: edges to the inputs, outputs marked, saved tensors versioned."""
        self._next = tuple(
            ((a.grad_fn, a._output_nr) if a.grad_fn is not None else (None, a))
            if isinstance(a, Tensor) and a.requires_grad else None
            for a in args)
        self._hooks = None
        self._freed = False
        outs = out if isinstance(out, tuple) else (out,)
        self._n_out = len(outs)
        if self._n_out > 1:
            self._out_meta = [(o.data.shape, o.data.dtype) if isinstance(o, Tensor) else None for o in outs]
        for i, o in enumerate(outs):
            if isinstance(o, Tensor):
                if o.grad_fn is not None or o.requires_grad:
                    raise RuntimeError(f"{type(self).__name__}.forward returned an input or a tensor "
                                       "already in the graph; return a new Tensor (e.g. x.clone())")
                o.grad_fn = self
                o.requires_grad = True
                o._output_nr = i
        saved = self._saved
        if saved is not None:
            for t in saved:
                if t is not None and not isinstance(t, Tensor):
                    raise TypeError(f"{type(self).__name__}: save_for_backward takes Tensors (or None), got "
                                    f"{type(t).__name__}; keep other values as attributes of ctx")
            if outs:
                saved = tuple(_SavedOutput(t, outs.index(t)) if t is not None and t.grad_fn is self else t
                              for t in saved)
                self._saved = saved
            self._saved_versions = tuple(None if t is None else t.version[0] if isinstance(t, _SavedOutput)
                                         else t._version[0] for t in saved)
        if state.anomaly:
            self.__dict__["_trace"] = traceback.extract_stack()[:-3]
