"""no_grad, enable_grad, set_grad_enabled, inference_mode: thread-local switches for graph recording."""
import functools
import threading
from threading import get_ident as _get_ident

__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "inference_mode",
           "is_inference_mode_enabled"]


class _State(threading.local):
    enabled = True     # class attribute: every new thread starts with recording on
    anomaly = False    # detect_anomaly() is active in this thread
    inference = False  # inference_mode() is active in this thread


state = _State()

# how many threads are inside inference_mode() now. While one is, the functions that make tensors
# (Function.wrap, Tensor._make: registered by mark_while_inference) are replaced by versions that mark
# what they make in such a thread; outside inference mode tensor creation runs unchanged, at no cost.
inference_threads = [0]
_patches: list[tuple] = []    # (owner class, attribute name, original, marking version)
_patch_lock = threading.Lock()


def mark_while_inference(owner, name):
    """Register ``owner.name`` (a function or staticmethod returning a new Tensor, or ``__init__``) as a
    maker of tensors: while some thread is inside inference_mode() it is swapped for a version that
    marks what it makes in such a thread as an inference tensor."""
    orig = owner.__dict__[name]
    fn = orig.__func__ if isinstance(orig, staticmethod) else orig
    init = name == "__init__"

    @functools.wraps(fn)
    def marking(*args, **kwargs):
        t = fn(*args, **kwargs)
        if init:
            t = args[0]
        if state.inference and t._version is None:   # (a view of a normal tensor shares its counter: normal)
            t._version = INFERENCE_VERSION
        return None if init else t
    _patches.append((owner, name, orig, staticmethod(marking) if isinstance(orig, staticmethod) else marking))


def _threads_inside(delta):
    with _patch_lock:
        before = inference_threads[0]
        inference_threads[0] = after = before + delta
        if (before == 0) != (after == 0):
            for owner, name, orig, marking in _patches:
                setattr(owner, name, marking if after else orig)


class _InferenceVersion:
    """The version counter of an inference tensor (one made inside ``inference_mode()``), shared by all
    of them. Inside inference mode it reads 0 and ignores writes. Outside, reading the version (what
    saving the tensor for backward does) or bumping it (an in-place write) raises, as PyTorch does:
    an inference tensor kept no version, so no graph may depend on it."""

    __slots__ = ()

    def __getitem__(self, i):
        if i == 1 or state.inference:
            return 0
        return _InferenceVersionValue()

    def __setitem__(self, i, value):
        if not state.inference:
            raise _inplace_error()

    def __deepcopy__(self, memo):
        return self

    def __repr__(self):
        return "<inference tensor: no version counter>"


class _InferenceVersionValue:
    """What an inference tensor's version reads outside inference mode: using it raises."""

    __slots__ = ()

    def __bool__(self):
        raise RuntimeError("Inference tensors cannot be saved for backward. To work around you can make a "
                           "clone to get a normal tensor and use it in autograd (a tensor made inside "
                           "ag.inference_mode() is used in a graph recorded outside it)")

    __eq__ = __ne__ = __index__ = __int__ = lambda self, *a: self.__bool__()
    __hash__ = None    # type: ignore[assignment]  # unhashable (typeshed types object.__hash__ as a method)

    def __add__(self, other):
        raise _inplace_error()

    __iadd__ = __add__


def _inplace_error():
    return RuntimeError("Inplace update to inference tensor outside InferenceMode is not allowed. You can make "
                        "a clone to get a normal tensor before doing inplace update (the tensor was made inside "
                        "ag.inference_mode())")


INFERENCE_VERSION = _InferenceVersion()


def is_inference_mode_enabled():
    """True inside ``ag.inference_mode()`` in this thread."""
    return state.inference


def is_grad_enabled():
    """True unless gradient recording is off in this thread (``no_grad``, ``set_grad_enabled(False)``).

    >>> with ag.no_grad():
    ...     ag.is_grad_enabled()
    False
    """
    return state.enabled


class _GradModeContext:
    """Context manager and decorator that sets grad mode and restores the previous one on exit.

    The modes to restore are kept per thread, so one instance (a module-level ``no_grad()``, say) can
    be entered by several threads at once without one thread restoring another's mode."""

    def __init__(self, mode):
        self.mode = mode
        # thread id -> that thread's modes to restore. A dict rather than a threading.local: making and
        # freeing a threading.local cost ~14 us in a training step (2 us alone), for every `with no_grad()`
        self._stacks = {}

    @property
    def prev(self):
        tid = _get_ident()
        stack = self._stacks.get(tid)
        if stack is None:
            stack = self._stacks[tid] = []
        return stack

    def __enter__(self):
        self.prev.append(state.enabled)
        state.enabled = self.mode

    def __exit__(self, *exc):
        tid = _get_ident()
        stack = self._stacks[tid]
        state.enabled = stack.pop()
        if not stack:
            del self._stacks[tid]          # (a thread's entry lives only while it is inside)
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}: as a decorator it takes a function, got {type(fn).__name__}")
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = state.enabled
            state.enabled = mode
            try:
                return fn(*args, **kwargs)
            finally:
                state.enabled = prev
        return wrapper


def _bare(cls, orig_func):
    """``@no_grad`` without parentheses: the class called on the function decorates it."""
    if orig_func is None:
        return object.__new__(cls)
    if not callable(orig_func):
        raise TypeError(f"{cls.__name__}() takes no arguments (or, used bare as a decorator, a function), got "
                        f"{type(orig_func).__name__}")
    return cls()(orig_func)


class no_grad(_GradModeContext):
    """Turn graph recording off (in this thread only): ``with ag.no_grad():``, ``@ag.no_grad()`` or bare
    ``@ag.no_grad``.

    >>> w = ag.ones(2, requires_grad=True)
    >>> with ag.no_grad():
    ...     y = w * 2
    >>> y.requires_grad
    False
    """

    def __new__(cls, orig_func=None):
        return _bare(cls, orig_func)

    def __init__(self, orig_func=None):
        super().__init__(False)


class enable_grad(_GradModeContext):
    """Turn graph recording on (in this thread only), e.g. inside a no_grad block; also a decorator,
    called or bare."""

    def __new__(cls, orig_func=None):
        return _bare(cls, orig_func)

    def __init__(self, orig_func=None):
        super().__init__(True)


class set_grad_enabled(_GradModeContext):
    """Set recording on or off; takes effect at once (as a call) and also works as a context manager."""

    def __init__(self, mode):
        if not isinstance(mode, bool):
            raise TypeError(f"set_grad_enabled: expected a bool, got {type(mode).__name__}")
        super().__init__(mode)
        self.prev.append(state.enabled)
        state.enabled = mode

    def __enter__(self):
        pass   # already set in __init__, like torch.set_grad_enabled

    def __call__(self, fn):
        state.enabled = self.prev.pop()   # as a decorator it must not change the mode now
        return super().__call__(fn)


class inference_mode:
    """``no_grad`` for inference: nothing is recorded, and the tensors made inside are *inference
    tensors*, which no later graph may depend on. Outside the block, an op that records and saves one
    for backward raises, and so does an in-place write to one (as in PyTorch; ``.clone()`` makes a normal
    tensor). ``inference_mode(False)`` turns it off inside an enclosing block. A context manager and a
    decorator (called or bare).

    >>> with ag.inference_mode():
    ...     y = ag.ones(2) * 2
    >>> y.requires_grad
    False
    """

    def __new__(cls, mode=True):
        if callable(mode) and not isinstance(mode, bool):     # bare decorator: @ag.inference_mode
            return cls()(mode)
        return object.__new__(cls)

    def __init__(self, mode=True):
        if not isinstance(mode, bool):
            raise TypeError(f"inference_mode: expected a bool, got {type(mode).__name__}")
        self.mode = mode
        self._stacks = {}

    def __enter__(self):
        tid = _get_ident()
        self._stacks.setdefault(tid, []).append((state.enabled, state.inference))
        if self.mode:
            state.enabled = False
            if not state.inference:
                _threads_inside(1)
            state.inference = True
        elif state.inference:
            _threads_inside(-1)
            state.inference = False

    def __exit__(self, *exc):
        tid = _get_ident()
        stack = self._stacks[tid]
        enabled, inference = stack.pop()
        if not stack:
            del self._stacks[tid]
        if inference != state.inference:
            _threads_inside(1 if inference else -1)
        state.enabled, state.inference = enabled, inference
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"inference_mode: as a decorator it takes a function, got {type(fn).__name__}")
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper
