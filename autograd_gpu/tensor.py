"""Tensor: a backend array plus autograd metadata, and operator overloads that call ops (no math here)."""
import builtins as _builtins
import weakref
from typing import TYPE_CHECKING, Any, Callable

from .autograd import function as _function
from .autograd.grad_mode import state as _grad_state, mark_while_inference as _mark_while_inference
from .backends import backend_of_array, SCALAR_TYPES, as_ndarray
from .device import Device, device as _parse_device, get_default_device
from . import dtypes as _dtypes

__all__ = ["Tensor"]

_new = object.__new__


class _Size(int):
    """``t.size`` is the element count (NumPy's attribute); ``t.size()`` and ``t.size(dim)`` give the
    shape as in PyTorch."""

    def __new__(cls, shape):
        n = 1
        for s in shape:
            n *= s
        self = int.__new__(cls, n)
        self._shape = shape
        return self

    def __call__(self, dim=None):
        if dim is None:
            return self._shape
        return self._shape[_normalize_dim(dim, len(self._shape), "size")]


def _normalize_dim(dim, ndim, op):
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{op}: expected an integer dim, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension(s)")
    return dim % n


class _HookHandle:
    __slots__ = ("_list", "_fn")

    def __init__(self, hooks, fn):
        self._list, self._fn = hooks, fn

    def remove(self):
        if self._fn in self._list:
            self._list.remove(self._fn)


class _PostHookHandle:
    __slots__ = ("_ref", "_fn")

    def __init__(self, t, fn):
        self._ref, self._fn = weakref.ref(t), fn

    def remove(self):
        t = self._ref()
        if t is not None and self._fn in (t._post_acc_hooks or ()):
            t._post_acc_hooks.remove(self._fn)
            if not t._post_acc_hooks:
                _engine._post_hooked.pop(id(t), None)


class _RetainGrad:
    """The hook retain_grad() puts on a non-leaf: stores the gradient that reaches it in its .grad."""

    def __init__(self, t):
        self.ref = weakref.ref(t)

    def __call__(self, g):
        t = self.ref()
        if t is not None:
            # a copy (differentiable when create_graph is on), so that no other .grad shares its memory
            if t.grad is None:
                t.grad = g.clone() if _grad_state.enabled else g.detach()._copy()
            else:
                t.grad = t.grad + (g if _grad_state.enabled else g.detach())


class Tensor:
    """An n-dimensional array on a device, recording the ops applied to it when it requires grad."""

    # Slots for what every op reads; the rest are class defaults, written to the (lazily created)
    # instance dict only when set, so making a Tensor costs four attribute writes, not eight.
    __slots__ = ("data", "requires_grad", "grad_fn", "device", "_output_nr", "__dict__", "__weakref__")
    _grad: "Tensor | None" = None
    _hooks: list | None = None              # hooks of a leaf (a non-leaf's live on its grad_fn)
    _post_acc_hooks: list | None = None     # a leaf's post-accumulate-grad hooks
    _base = None               # the tensor this one is a view of
    _version = None            # shared counter [version, graph version], created on first write or view
    _view_gv = 0               # for a view: the graph version of its base when the view was made
    __array_ufunc__ = None     # ndarray <op> Tensor defers to Tensor's reflected operator

    def __init__(self, data: object, requires_grad: bool = False, device: Device | str | None = None,
                 dtype: object = None) -> None:
        arr, dev = _to_array(data, dtype, device, copy=True, default_float=True)
        self.data = arr
        self.device = dev
        self.grad_fn = None
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @property
    def grad(self) -> "Tensor | None":
        """The gradient accumulated by backward() (a Tensor of this tensor's shape, dtype and device), or None."""
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        # checked as PyTorch does: a gradient that does not match would be broadcast into the update
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                                f"{type(value).__name__}")
            if value.data.shape != self.data.shape:
                raise RuntimeError(f"assigned grad has data of a different size: the tensor has shape "
                                   f"{self.shape}, the grad {value.shape}")
            if value.data.dtype != self.data.dtype:
                raise RuntimeError(f"assigned grad has data of a different type: the tensor is {self.dtype}, "
                                   f"the grad {value.dtype}")
            if value.device is not self.device:
                raise RuntimeError(f"assigned grad has data located on a different device: the tensor is on "
                                   f"{self.device}, the grad on {value.device}")
        self._grad = value

    @staticmethod
    def _make(array, dev):
        """Wrap a backend array already on ``dev`` (no copy, no checks): the engine's fast path."""
        t = _new(Tensor)
        t.data = array if array.__class__ not in SCALAR_TYPES else as_ndarray(array)
        t.device = dev
        t.requires_grad = False
        t.grad_fn = None
        return t

    def version_counter(self):
        """The shared, mutable counter of this tensor's memory, created on first use: [version, graph
        version]. Every in-place write bumps the version (saved tensors are checked against it); a
        write recorded in the graph also bumps the graph version (views are checked against it)."""
        v = self._version
        if v is None:
            v = self._version = [0, 0]
        return v

    def _bump_version(self):
        self.version_counter()[0] += 1

    # -- metadata ----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape, a tuple of ints (as NumPy's).

        >>> ag.zeros(2, 3).shape
        (2, 3)
        """
        return self.data.shape

    @property
    def ndim(self) -> int:
        """The number of dimensions (``len(shape)``)."""
        return self.data.ndim

    @property
    def dtype(self) -> Any:
        """The element type, a NumPy dtype (``ag.float32`` is ``numpy.dtype('float32')``).

        >>> print(ag.tensor([1.5]).dtype)
        float32
        """
        return self.data.dtype

    @property
    def size(self) -> "_Size":
        """The element count as NumPy's ``size`` attribute, and callable as PyTorch's: ``x.size()`` is the
        shape, ``x.size(dim)`` one entry of it.

        >>> x = ag.zeros(2, 3)
        >>> x.size == 6, x.size(), x.size(1)
        (True, (2, 3), 3)
        """
        return _Size(self.data.shape)

    def numel(self) -> int:
        """The number of elements (the product of the shape)."""
        return self.data.size

    def dim(self) -> int:
        """The number of dimensions, as ``ndim``."""
        return self.data.ndim

    def __len__(self):
        if self.data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.data.shape[0]

    @property
    def is_leaf(self) -> bool:
        """True when no recorded op produced this tensor (created by the user, or cut off by ``detach``)."""
        return self.grad_fn is None

    @property
    def is_cuda(self) -> bool:
        """True when the tensor lives on a GPU."""
        return self.device.type == "cuda"

    @property
    def T(self) -> "Tensor":
        """The tensor with all its dimensions reversed (the transpose of a matrix)."""
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self) -> "Tensor":
        """The last two dimensions swapped: the transpose of each matrix in a batch."""
        return self.swapaxes(-1, -2)

    @property
    def xp(self):
        """The array namespace of this tensor's device (numpy or cupy)."""
        return self.device.backend.xp

    # -- autograd ------------------------------------------------------------------------------
    def backward(self, grad: "Tensor | None" = None, retain_graph: bool | None = None,
                 create_graph: bool = False) -> None:
        """Accumulate the gradient of this tensor into the .grad of every leaf that requires grad."""
        _engine.backward((self,), None if grad is None else (grad,), retain_graph, create_graph)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set ``requires_grad`` in place and return the tensor; only floating-point (and complex) tensors
        can require gradients, and only leaves can stop requiring them.

        >>> w = ag.zeros(2).requires_grad_()
        >>> w.requires_grad, w.is_leaf
        (True, True)
        """
        if requires_grad and self.dtype.kind not in "fc" and self.dtype is not _dtypes.bfloat16:
            raise RuntimeError(f"requires_grad_: only floating-point tensors can require gradients, got {self.dtype}")
        if not requires_grad and self.grad_fn is not None:
            raise RuntimeError("requires_grad_(False) on a non-leaf tensor; use .detach() instead")
        self.requires_grad = bool(requires_grad)
        return self

    def detach(self) -> "Tensor":
        """The same data (shared memory and version counter), cut from the graph."""
        t = Tensor._make(self.data, self.device)
        t._version = self.version_counter()
        return t

    def detach_(self) -> "Tensor":
        """Cut this tensor from the graph in place: it becomes a leaf that does not require grad."""
        self.grad_fn = None
        self.requires_grad = False
        return self

    def retain_grad(self) -> None:
        """Keep the gradient of this non-leaf in .grad after backward (leaves always keep theirs)."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad: the tensor does not require grad")
        if self.grad_fn is None:
            return
        hooks = self._node_hooks()
        if not any(isinstance(h, _RetainGrad) for h in hooks):
            hooks.append(_RetainGrad(self))

    @property
    def retains_grad(self):
        """True when ``retain_grad()`` was called on this non-leaf, so backward keeps its ``.grad``."""
        return self.grad_fn is not None and self.grad_fn._hooks is not None and any(
            isinstance(h, _RetainGrad) for h in self.grad_fn._hooks.get(self._output_nr, ()))

    def register_hook(self, fn: Callable[["Tensor"], "Tensor | None"]) -> "_HookHandle":
        """Call ``fn(grad)`` when the gradient for this tensor is computed; a non-None return value
        replaces the gradient. Returns a handle with ``.remove()``."""
        if not self.requires_grad:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that does not require grad")
        if not callable(fn):
            raise TypeError(f"register_hook: expected a callable, got {type(fn).__name__}")
        if self.grad_fn is None:
            if self._hooks is None:
                self._hooks = []
            hooks = self._hooks
        else:
            hooks = self._node_hooks()
        # retain_grad()'s hook stays last, whenever it was added, so .grad is the hooked gradient (PyTorch 2.x)
        at = next((i for i, h in enumerate(hooks) if isinstance(h, _RetainGrad)), len(hooks))
        hooks.insert(at, fn)
        return _HookHandle(hooks, fn)

    def register_post_accumulate_grad_hook(self, fn: Callable[["Tensor"], None]) -> "_PostHookHandle":
        """On a leaf: call ``fn(tensor)`` each time backward() has accumulated into its .grad (as
        soon as its gradient is final, before the rest of backward runs). Returns a handle with
        ``.remove()``."""
        if not self.requires_grad:
            raise RuntimeError("register_post_accumulate_grad_hook: the tensor does not require grad")
        if self.grad_fn is not None:
            raise RuntimeError("register_post_accumulate_grad_hook: only leaf tensors have an accumulated "
                               ".grad; use register_hook on a non-leaf")
        if not callable(fn):
            raise TypeError(f"register_post_accumulate_grad_hook: expected a callable, got {type(fn).__name__}")
        if self._post_acc_hooks is None:
            self._post_acc_hooks = []
        self._post_acc_hooks.append(fn)
        _engine._post_hooked[id(self)] = self
        return _PostHookHandle(self, fn)

    def _node_hooks(self):
        node = self.grad_fn
        if node._hooks is None:
            node._hooks = {}
        return node._hooks.setdefault(self._output_nr, [])

    # -- conversions ---------------------------------------------------------------------------
    def numpy(self) -> Any:
        """The data as a NumPy array: the array itself on the CPU, a host copy from the GPU."""
        return self.device.backend.to_host(self.data)

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (waits for the GPU).

        >>> ag.tensor([[2.5]]).item()
        2.5
        """
        if self.data.size != 1:
            raise ValueError(f"item: only one-element tensors can be converted to a Python number, got shape {self.shape}")
        return self.device.backend.item(self.data)

    def tolist(self) -> Any:
        """The values as nested Python lists (numbers for a 0-d tensor), copied to the host.

        >>> ag.arange(4).reshape(2, 2).tolist()
        [[0, 1], [2, 3]]
        """
        return self.numpy().tolist()

    def __array__(self, dtype=None, copy=None):
        if self.device.type != "cpu":
            raise TypeError(f"cannot convert a tensor on {self.device} to a NumPy array implicitly; call .numpy()")
        return self.data if dtype is None else self.data.astype(dtype)

    def __dlpack__(self, stream=None, **kwargs):
        if self.data.dtype is _dtypes.bfloat16 and self.device.type == "cpu":
            raise BufferError("__dlpack__: NumPy cannot export bfloat16 through DLPack; share the bits instead: "
                              "torch.from_numpy(t.numpy().view('int16')).view(torch.bfloat16) (no copy), or "
                              "torch.from_dlpack(t.float()).bfloat16()")
        return self.data.__dlpack__(stream=stream, **kwargs) if stream is not None else self.data.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.data.__dlpack_device__()

    def cpu(self) -> "Tensor":
        """This tensor on the CPU (itself when it is there already)."""
        return self.to("cpu")

    def cuda(self, device: "int | str | Device | None" = None) -> "Tensor":
        """This tensor on a GPU: ``device`` None is the current one, an int or ``"cuda:N"`` names it."""
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    def float(self) -> "Tensor":
        """This tensor as float32 (``to(ag.float32)``; recorded in the graph)."""
        return self.to(dtype=_dtypes.float32)

    def double(self) -> "Tensor":
        """This tensor as float64."""
        return self.to(dtype=_dtypes.float64)

    def half(self) -> "Tensor":
        """This tensor as float16."""
        return self.to(dtype=_dtypes.float16)

    def bfloat16(self) -> "Tensor":
        """This tensor as bfloat16."""
        return self.to(dtype=_dtypes.bfloat16)

    def long(self) -> "Tensor":
        """This tensor as int64."""
        return self.to(dtype=_dtypes.int64)

    def int(self) -> "Tensor":
        """This tensor as int32."""
        return self.to(dtype=_dtypes.int32)

    def bool(self) -> "Tensor":
        """This tensor as bool (nonzero is True)."""
        return self.to(dtype=_dtypes.bool_)

    def type(self, dtype: object = None) -> "str | Tensor":
        """The dtype's name when ``dtype`` is None, else this tensor cast to ``dtype``."""
        return str(self.dtype) if dtype is None else self.to(dtype=dtype)

    def is_complex(self) -> "_builtins.bool":
        """True for complex64/complex128 tensors."""
        return self.data.dtype.kind == "c"

    def _copy(self):
        """A fresh copy of the data, outside the graph (on its own GPU: CuPy copies to the current one)."""
        b = self.device.backend
        return Tensor._make(b.call(self.data.copy), self.device)

    def _ones_like(self):
        b = self.device.backend
        return Tensor._make(b.call(b.xp.ones, self.data.shape, dtype=self.data.dtype), self.device)

    def __bool__(self):
        if self.data.size != 1:
            raise RuntimeError(f"the truth value of a tensor with {self.data.size} elements is ambiguous; "
                               "use .any() or .all()")
        return bool(self.device.backend.item(self.data))

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.kind not in "iu" or self.data.size != 1:
            raise TypeError(f"only integer tensors of one element can be used as an index, got {self.dtype} "
                            f"of shape {self.shape}")
        return int(self.item())

    def __hash__(self):
        return id(self)

    def __iter__(self):
        if self.data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.data.shape[0]))

    def __format__(self, spec):
        if self.data.ndim == 0 and spec:
            return format(self.item(), spec)
        return repr(self) if not spec else format(str(self), spec)

    def __repr__(self):
        body = self.device.backend.format(self.data)
        extras = []
        dt = self.data.dtype
        if dt != _dtypes.get_default_dtype() and dt not in (_dtypes.int64, _dtypes.bool_):
            extras.append(f"dtype={dt}")
        if self.device.type != "cpu":
            extras.append(f"device='{self.device.backend.label or self.device}'")
        if self.grad_fn is not None:
            extras.append(f"grad_fn={self.grad_fn.name()}")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return "Tensor(" + ", ".join([body] + extras) + ")"

    __str__ = __repr__

    def __reduce__(self):
        raise TypeError("Tensors are not pickled; use ag.save / ag.load")

    def __deepcopy__(self, memo):
        """A leaf copy of the data (and of .grad), as copy.deepcopy of a PyTorch leaf gives."""
        t = memo.get(id(self))
        if t is None:
            if self.grad_fn is not None:
                raise RuntimeError("deepcopy: only leaf tensors can be deep-copied (a non-leaf's graph is not "
                                   "copied); use .detach().clone() or copy a leaf")
            t = memo[id(self)] = type(self)._make(self._copy().data, self.device)    # on its own GPU
            t.requires_grad = self.requires_grad
            if self.grad is not None:
                t.grad = self.grad._copy()
        return t

    if TYPE_CHECKING:
        # What the op registry binds on Tensor at import (x.sum(), x.exp(), x.reshape(...), the operators;
        # ops/registry.py): a type checker cannot run the registrations, so to it those methods are Any and
        # the operators take anything and give a Tensor. Nothing in this block exists at run time.
        def __getattr__(self, name: str) -> Any: ...
        def __getitem__(self, idx: Any) -> Tensor: ...
        def __setitem__(self, idx: Any, value: Any) -> None: ...
        def __eq__(self, other: object) -> Tensor: ...  # type: ignore[override]
        def __ne__(self, other: object) -> Tensor: ...  # type: ignore[override]
        def __lt__(self, other: Any) -> Tensor: ...
        def __le__(self, other: Any) -> Tensor: ...
        def __gt__(self, other: Any) -> Tensor: ...
        def __ge__(self, other: Any) -> Tensor: ...
        def __neg__(self) -> Tensor: ...
        def __pos__(self) -> Tensor: ...
        def __abs__(self) -> Tensor: ...
        def __invert__(self) -> Tensor: ...
        def __add__(self, other: Any) -> Tensor: ...
        def __radd__(self, other: Any) -> Tensor: ...
        def __iadd__(self, other: Any) -> Tensor: ...
        def __sub__(self, other: Any) -> Tensor: ...
        def __rsub__(self, other: Any) -> Tensor: ...
        def __isub__(self, other: Any) -> Tensor: ...
        def __mul__(self, other: Any) -> Tensor: ...
        def __rmul__(self, other: Any) -> Tensor: ...
        def __imul__(self, other: Any) -> Tensor: ...
        def __truediv__(self, other: Any) -> Tensor: ...
        def __rtruediv__(self, other: Any) -> Tensor: ...
        def __itruediv__(self, other: Any) -> Tensor: ...
        def __floordiv__(self, other: Any) -> Tensor: ...
        def __rfloordiv__(self, other: Any) -> Tensor: ...
        def __mod__(self, other: Any) -> Tensor: ...
        def __rmod__(self, other: Any) -> Tensor: ...
        def __pow__(self, other: Any) -> Tensor: ...
        def __rpow__(self, other: Any) -> Tensor: ...
        def __matmul__(self, other: Any) -> Tensor: ...
        def __rmatmul__(self, other: Any) -> Tensor: ...
        def __and__(self, other: Any) -> Tensor: ...
        def __rand__(self, other: Any) -> Tensor: ...
        def __or__(self, other: Any) -> Tensor: ...
        def __ror__(self, other: Any) -> Tensor: ...
        def __xor__(self, other: Any) -> Tensor: ...
        def __rxor__(self, other: Any) -> Tensor: ...


def parse_to_args(args, device=None, dtype=None):
    """(Device or None, dtype or None) from the positional arguments of ``.to()``: a device (a Device
    or a string such as "cuda:0"), a dtype, or a Tensor whose device and dtype are taken."""
    for a in args:
        if isinstance(a, Device) or (isinstance(a, str) and a.split(":")[0].strip().lower() in ("cpu", "cuda")):
            device = a
        elif isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        else:
            dtype = a
    return (None if device is None else _parse_device(device)), (None if dtype is None else _dtypes._dtype(dtype))


def _to_array(data, dtype, device, copy, default_float):
    """(array, Device) for ``data`` on ``device`` (or where data lives, else the default device)."""
    if isinstance(data, Tensor):
        src, arr = data.device, data.data
    else:
        b = backend_of_array(data)
        src, arr = (b.device, data) if b is not None else (None, None)
    dev = _parse_device(device) if device is not None else (src or get_default_device())
    backend = dev.backend
    if dtype is not None:
        dtype = _dtypes._dtype(dtype)
    if arr is None:                                   # Python data (or NumPy scalars)
        python_data = _is_python_data(data)           # one walk over a list when it holds only numbers
        if not python_data and isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
            data = _nested_to_host(data)
        try:
            host = _dtypes.host_asarray(data)
        except (ValueError, TypeError) as e:
            raise TypeError(f"tensor: cannot make a tensor from {type(data).__name__}: {e}") from None
        if host.dtype.kind not in "biufc" and host.dtype is not _dtypes.bfloat16:
            raise TypeError(f"tensor: expected numbers, nested lists of numbers or arrays, got {type(data).__name__} "
                            f"(as an array of dtype {host.dtype})")
        if dtype is None and host.dtype.kind in "fc" and default_float and python_data:
            # Python floats take the default float dtype, Python complex numbers its complex twin
            dtype = _dtypes.get_default_dtype() if host.dtype.kind == "f" else _dtypes.get_default_complex_dtype()
        return backend.asarray(host, dtype=dtype), dev
    if arr.dtype.kind not in "biufc" and arr.dtype is not _dtypes.bfloat16:
        raise TypeError(f"tensor: expected numbers, got {type(arr).__name__} of dtype {arr.dtype}")
    if src is not dev:
        return backend.asarray(arr, dtype=dtype, copy=True), dev
    if copy or (dtype is not None and dtype != arr.dtype):
        arr = arr.astype(dtype if dtype is not None else arr.dtype, copy=True)
    return arr, dev


def _is_python_data(data):
    """Python numbers and (nested) lists of them: the data that takes the default float dtype.

    Values with their own dtype keep it, as in NumPy and PyTorch: a NumPy scalar (np.float64 is a
    subclass of float, hence the dtype test) and, in a list, any NumPy scalar, array or Tensor, after
    which NumPy's promotion of the elements decides (tensor([np.float64(1.0), 2.0]) is float64, like
    np.asarray; torch.tensor([np.float64(1.0)]) is float64 too)."""
    if isinstance(data, (list, tuple)):
        return not any(hasattr(x, "dtype") for x in _flat(data))
    return isinstance(data, (float, int, bool, complex)) and not hasattr(data, "dtype")


def _flat(x):
    stack = [x]
    while stack:
        y = stack.pop()
        if isinstance(y, (list, tuple)):
            stack.extend(y)
        else:
            yield y


def _nested_to_host(x):
    if isinstance(x, (list, tuple)):
        return [_nested_to_host(y) for y in x]
    if isinstance(x, Tensor):
        return x.numpy()
    return x


_function.Tensor = Tensor
_mark_while_inference(Tensor, "_make")     # tensors made inside inference_mode() are inference tensors
_mark_while_inference(Tensor, "__init__")
from .autograd import engine as _engine  # noqa: E402
