"""Factories: tensor, zeros, ones, full, empty, arange, linspace, eye, rand, randn, randint, *_like."""
from collections.abc import Sequence
from typing import Any, SupportsIndex

from .tensor import Tensor, _to_array
from .device import Device, device as _parse_device, get_default_device
from . import dtypes as _dt
from .backends import manual_seed as _manual_seed
from .generator import rng_for as _rng_for

__all__ = ["tensor", "as_tensor", "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "rand",
           "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like",
           "randn_like", "randperm", "manual_seed", "from_numpy", "from_dlpack"]


def tensor(data: object, *, dtype: Any = None, device: Device | str | None = None,
           requires_grad: bool = False) -> Tensor:
    """A new tensor (always a copy) from a number, nested list, NumPy/CuPy array or Tensor.
    Python floats become the default float dtype; arrays keep theirs.

    >>> x = ag.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    >>> print(x.dtype, x.shape)
    float32 (2, 2)
    >>> print(ag.tensor([1, 2, 3]).dtype)
    int64
    """
    return Tensor(data, requires_grad=requires_grad, device=device, dtype=dtype)


def as_tensor(data: object, dtype: Any = None, device: Device | str | None = None) -> Tensor:
    """Like tensor(), but shares memory with ``data`` when no copy is needed."""
    if isinstance(data, Tensor) and (dtype is None or _dt._dtype(dtype) == data.dtype) and (
            device is None or _parse_device(device) is data.device):
        return data
    arr, dev = _to_array(data, dtype, device, copy=False, default_float=True)
    return Tensor._make(arr, dev)


def from_numpy(a: Any) -> Tensor:
    """A CPU tensor sharing memory with NumPy array ``a``."""
    return as_tensor(a, device="cpu")


def from_dlpack(obj: Any, device: Device | str | None = None) -> Tensor:
    """Zero-copy import of anything with ``__dlpack__`` (a CuPy array, a torch tensor, ...)."""
    if not hasattr(obj, "__dlpack__") or not hasattr(obj, "__dlpack_device__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__, got {type(obj).__name__}")
    dev_type, dev_id = obj.__dlpack_device__()
    dev = _parse_device(device) if device is not None else _parse_device("cpu" if dev_type == 1 else f"cuda:{dev_id}")
    try:
        return Tensor._make(dev.backend.from_dlpack(obj), dev)
    except (RuntimeError, TypeError, BufferError, NotImplementedError) as e:
        if "bfloat16" not in str(getattr(obj, "dtype", "")):
            raise
        raise TypeError(f"from_dlpack: {dev.type} arrays cannot import a bfloat16 DLPack tensor ({e}): NumPy's "
                        "DLPack has no bfloat16. For a CPU torch tensor t share its bits instead: "
                        "ag.from_numpy(t.view(torch.int16).numpy().view(ag.bfloat16)) (no copy), or copy it: "
                        "ag.tensor(t.float().numpy(), dtype=ag.bfloat16) (exact)") from None


def _setup(shape, dtype, device, op, default=None):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    for s in shape:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}: expected a shape of ints, got {shape!r}")
        if s < 0:
            raise ValueError(f"{op}: negative dimension {s} in shape {shape}")
    dev = _parse_device(device) if device is not None else get_default_device()
    dt = _dt._dtype(dtype) if dtype is not None else (default or _dt.get_default_dtype())
    return tuple(int(s) for s in shape), dt, dev, dev.backend


def _number_arg(v, op, what):
    """v when it is a number (Python, or a 0-d NumPy value), else a TypeError naming the argument."""
    if isinstance(v, (bool, int, float, complex)) or getattr(v, "ndim", None) == 0 and getattr(v, "dtype", None) is not None \
            and v.dtype.kind in "biufc":
        return v
    raise TypeError(f"{op}: expected a number as {what}, got {type(v).__name__}")


def _float_dtype(dt, op):
    if not _dt.is_floating(dt):
        raise TypeError(f"{op}: expected a floating dtype, got {dt}")
    return dt


def _out(arr, dev, requires_grad):
    t = Tensor._make(arr, dev)
    return t.requires_grad_(True) if requires_grad else t


def zeros(*shape: SupportsIndex | Sequence[SupportsIndex], dtype: Any = None, device: Device | str | None = None,
          requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of ``shape`` (ints, or one tuple), in the default float dtype unless ``dtype`` is given.

    >>> ag.zeros(2, 3)
    Tensor([[0., 0., 0.],
            [0., 0., 0.]])
    >>> ag.zeros((2,), dtype=ag.int64)
    Tensor([0, 0])
    """
    shape, dt, dev, b = _setup(shape, dtype, device, "zeros")
    return _out(b.call(b.xp.zeros, shape, dtype=dt), dev, requires_grad)


def ones(*shape: SupportsIndex | Sequence[SupportsIndex], dtype: Any = None, device: Device | str | None = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of ones of ``shape`` (ints, or one tuple), in the default float dtype unless ``dtype`` is given.

    >>> b = ag.ones(3, requires_grad=True)
    >>> b
    Tensor([1., 1., 1.], requires_grad=True)
    >>> (b * 2).sum().backward(); b.grad
    Tensor([2., 2., 2.])
    """
    shape, dt, dev, b = _setup(shape, dtype, device, "ones")
    return _out(b.call(b.xp.ones, shape, dtype=dt), dev, requires_grad)


def empty(*shape: SupportsIndex | Sequence[SupportsIndex], dtype: Any = None, device: Device | str | None = None,
          requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of ``shape``: its values are whatever the memory held (fill it before reading).

    >>> ag.empty(2, 4).shape
    (2, 4)
    """
    shape, dt, dev, b = _setup(shape, dtype, device, "empty")
    return _out(b.call(b.xp.empty, shape, dtype=dt), dev, requires_grad)


def full(shape: int | Sequence[SupportsIndex], fill_value, *, dtype: Any = None,
         device: Device | str | None = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (its dtype follows the value unless given).

    >>> ag.full((2,), 7)
    Tensor([7, 7])
    >>> print(ag.full(2, 0.5, dtype=ag.float64).dtype)
    float64
    """
    if isinstance(shape, int):
        shape = (shape,)
    _number_arg(fill_value, "full", "fill_value")
    default = _dt.bool_ if isinstance(fill_value, bool) else _dt.int64 if isinstance(fill_value, int) else \
        _dt.get_default_complex_dtype() if isinstance(fill_value, complex) else None
    shape, dt, dev, b = _setup(tuple(shape), dtype, device, "full", default)
    return _out(b.call(b.xp.full, shape, fill_value, dtype=dt), dev, requires_grad)


def arange(start: float, end: float | None = None, step: float = 1, *, dtype: Any = None,
           device: Device | str | None = None, requires_grad: bool = False) -> Tensor:
    """Values from start (0 if only one bound is given) up to but excluding end, step apart; int64
    when all bounds are ints, else the default float dtype.

    >>> ag.arange(3)
    Tensor([0, 1, 2])
    >>> ag.arange(0, 1, 0.25)
    Tensor([0.  , 0.25, 0.5 , 0.75])
    """
    if end is None:
        start, end = 0, start
    for v in (start, end, step):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"arange: expected numbers for start, end and step, got {type(v).__name__}")
    if step == 0:
        raise ValueError("arange: step must be non-zero")
    ints = all(isinstance(v, int) for v in (start, end, step))
    _, dt, dev, b = _setup((), dtype, device, "arange", _dt.int64 if ints else None)
    return _out(b.call(b.xp.arange, start, end, step, dtype=dt), dev, requires_grad)


def linspace(start: float, end: float, steps: int, *, dtype: Any = None, device: Device | str | None = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from start to end, both included.

    >>> ag.linspace(0, 1, 5)
    Tensor([0.  , 0.25, 0.5 , 0.75, 1.  ])
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"linspace: steps must be a non-negative int, got {steps!r}")
    _, dt, dev, b = _setup((), dtype, device, "linspace")
    return _out(b.call(b.xp.linspace, start, end, steps, dtype=dt), dev, requires_grad)


def eye(n: int, m: int | None = None, *, dtype: Any = None, device: Device | str | None = None,
        requires_grad: bool = False) -> Tensor:
    """The ``n`` x ``m`` identity matrix (square when ``m`` is None): ones on the diagonal, zeros elsewhere.

    >>> ag.eye(2)
    Tensor([[1., 0.],
            [0., 1.]])
    >>> ag.eye(2, 3).shape
    (2, 3)
    """
    _, dt, dev, b = _setup((n, n if m is None else m), dtype, device, "eye")
    return _out(b.call(b.xp.eye, n, m, dtype=dt), dev, requires_grad)


def _complex_samples(draw, shape, dt, b, scale):
    """A complex sample from two real draws of its precision (real parts, then imaginary parts)."""
    parts = draw(shape + (2,), _dt.real_dtype(dt))
    return b.call(lambda: (parts[..., 0] * scale + parts[..., 1] * (scale * 1j)).astype(dt))


def rand(*shape: SupportsIndex | Sequence[SupportsIndex], generator: Any = None, dtype: Any = None,
         device: Device | str | None = None, requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) (for a complex dtype: real and imaginary parts each, as in PyTorch), drawn
    from ``generator`` (an ag.Generator on the result's device) or the global generator."""
    shape, dt, dev, b = _setup(shape, dtype, device, "rand")
    rng = _rng_for(generator, dev, "rand")
    if dt.kind == "c":
        return _out(_complex_samples(lambda s, d: b.rand(s, d, rng), shape, dt, b, 1.0), dev, requires_grad)
    return _out(b.rand(shape, _float_dtype(dt, "rand"), rng), dev, requires_grad)


def randn(*shape: SupportsIndex | Sequence[SupportsIndex], generator: Any = None, dtype: Any = None,
          device: Device | str | None = None, requires_grad: bool = False) -> Tensor:
    """Standard normal samples (for a complex dtype: E|z|^2 = 1, each part of variance 1/2, as in PyTorch),
    drawn from ``generator`` (an ag.Generator on the result's device) or the global generator.

    >>> _ = ag.manual_seed(0)
    >>> w = ag.randn(3, 4, requires_grad=True)
    >>> print(w.shape, w.dtype, w.requires_grad)
    (3, 4) float32 True
    """
    shape, dt, dev, b = _setup(shape, dtype, device, "randn")
    rng = _rng_for(generator, dev, "randn")
    if dt.kind == "c":
        return _out(_complex_samples(lambda s, d: b.randn(s, d, rng), shape, dt, b, 0.5 ** 0.5), dev, requires_grad)
    return _out(b.randn(shape, _float_dtype(dt, "randn"), rng), dev, requires_grad)


def randint(low: int, high: int | None = None, size: int | Sequence[SupportsIndex] = (), *,
            generator: Any = None, dtype: Any = None, device: Device | str | None = None) -> Tensor:
    """Integers drawn uniformly from [low, high) (from [0, low) when high is omitted); int64; from
    ``generator`` (an ag.Generator on the result's device) or the global generator."""
    if high is None:
        low, high = 0, low
    if high <= low:
        raise ValueError(f"randint: expected low < high, got low={low}, high={high}")
    shape, dt, dev, b = _setup((size,) if isinstance(size, int) else tuple(size), dtype, device, "randint", _dt.int64)
    return Tensor._make(b.randint(low, high, shape, dt, _rng_for(generator, dev, "randint")), dev)


def randperm(n: int, *, generator: Any = None, dtype: Any = None, device: Device | str | None = None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of 0 .. n - 1 (int64 unless ``dtype``), from ``generator`` or the global generator.

    >>> sorted(ag.randperm(4).tolist())
    [0, 1, 2, 3]
    """
    if isinstance(n, bool) or not hasattr(n, "__index__"):
        raise TypeError(f"randperm: expected an int n, got {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"randperm: expected n >= 0, got {n}")
    _, dt, dev, b = _setup((), dtype, device, "randperm", _dt.int64)
    p = b.permutation(int(n), _rng_for(generator, dev, "randperm"))
    return _out(p if p.dtype == dt else b.call(p.astype, dt), dev, requires_grad)


def _like(x, dtype, device, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(x).__name__}")
    return x.shape, (dtype if dtype is not None else x.dtype), (device if device is not None else x.device)


def zeros_like(x: Tensor, *, dtype: Any = None, device: Device | str | None = None,
               requires_grad: bool = False) -> Tensor:
    """Zeros with ``x``'s shape, dtype and device (each overridable); never part of ``x``'s graph.

    >>> ag.zeros_like(ag.tensor([[1, 2], [3, 4]]))
    Tensor([[0, 0],
            [0, 0]])
    """
    s, d, v = _like(x, dtype, device, "zeros_like")
    return zeros(s, dtype=d, device=v, requires_grad=requires_grad)


def ones_like(x: Tensor, *, dtype: Any = None, device: Device | str | None = None,
              requires_grad: bool = False) -> Tensor:
    """Ones with ``x``'s shape, dtype and device (each overridable).

    >>> ag.ones_like(ag.tensor([0.5, 2.0]))
    Tensor([1., 1.])
    """
    s, d, v = _like(x, dtype, device, "ones_like")
    return ones(s, dtype=d, device=v, requires_grad=requires_grad)


def empty_like(x: Tensor, *, dtype: Any = None, device: Device | str | None = None,
               requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor with ``x``'s shape, dtype and device (each overridable)."""
    s, d, v = _like(x, dtype, device, "empty_like")
    return empty(s, dtype=d, device=v, requires_grad=requires_grad)


def full_like(x: Tensor, fill_value, *, dtype: Any = None, device: Device | str | None = None,
              requires_grad: bool = False) -> Tensor:
    """``fill_value`` everywhere, with ``x``'s shape, dtype and device (each overridable).

    >>> ag.full_like(ag.zeros(2), 7.5)
    Tensor([7.5, 7.5])
    """
    s, d, v = _like(x, dtype, device, "full_like")
    return full(s, fill_value, dtype=d, device=v, requires_grad=requires_grad)


def rand_like(x: Tensor, *, generator: Any = None, dtype: Any = None, device: Device | str | None = None,
              requires_grad: bool = False) -> Tensor:
    """Uniform samples in [0, 1) with ``x``'s shape, dtype and device (each overridable); as ``rand``."""
    s, d, v = _like(x, dtype, device, "rand_like")
    return rand(s, generator=generator, dtype=d, device=v, requires_grad=requires_grad)


def randn_like(x: Tensor, *, generator: Any = None, dtype: Any = None, device: Device | str | None = None,
               requires_grad: bool = False) -> Tensor:
    """Standard normal samples with ``x``'s shape, dtype and device (each overridable); as ``randn``."""
    s, d, v = _like(x, dtype, device, "randn_like")
    return randn(s, generator=generator, dtype=d, device=v, requires_grad=requires_grad)


def manual_seed(seed: int) -> None:
    """Seed the random generators of every backend (CPU and each GPU) for reproducible results."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"manual_seed: expected a non-negative int, got {seed!r}")
    if seed < 0:
        raise ValueError(f"manual_seed: expected a non-negative int, got {seed!r}")
    _manual_seed(seed)
