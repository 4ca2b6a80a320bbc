"""Small host-side helpers shared by the op modules: argument normalisation and checks."""
from ..tensor import Tensor
from ..device import get_default_device


def as_tensor(x, op, like=None):
    """x as a Tensor. Tensors pass through; Python numbers, lists and 0-d host values are placed on
    ``like``'s device (else the default one); an array on another device than ``like`` is an error,
    never a silent copy."""
    if isinstance(x, Tensor):
        return x
    from ..creation import tensor
    from ..backends import backend_of_array
    dev = like.device if like is not None else get_default_device()
    b = backend_of_array(x)
    if b is not None and b.device is not dev and x.ndim > 0:
        raise RuntimeError(f"{op}: expected all tensors on one device, got {dev} and a {b.name} array on "
                           f"{b.device}; convert it with ag.tensor(array, device='{dev}')")
    try:
        return tensor(x, device=dev)
    except TypeError:
        raise TypeError(f"{op}: expected a Tensor or a number, got {type(x).__name__}") from None


def normalize_dim(dim, ndim, op):
    """A dim in [-ndim, ndim) as a non-negative int (0-d tensors accept dim 0 and -1)."""
    if isinstance(dim, bool) or not isinstance(dim, int):
        if hasattr(dim, "__index__"):
            dim = dim.__index__()
        else:
            raise TypeError(f"{op}: expected an integer dim, got {type(dim).__name__}")
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dimension(s) "
                         f"(expected {-n} <= dim < {n})")
    return dim % n


def normalize_dims(dim, ndim, op):
    """None -> all dims; int or sequence -> sorted tuple of distinct non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(normalize_dim(d, ndim, op) for d in dim)
        if len(set(dims)) != len(dims):
            raise ValueError(f"{op}: dim {tuple(dim)} names a dimension twice")
        return tuple(sorted(dims)) if ndim else ()
    return (normalize_dim(dim, ndim, op),) if ndim else ()


def shape_arg(args, op):
    """Accept f(2, 3), f((2, 3)) and f([2, 3]) alike; every entry must be an int."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    out = []
    for s in args:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}: expected a shape of ints, got {args!r}")
        out.append(s.__index__())
    return tuple(out)


def pick(a, b, op, a_name="axis", b_name="dim"):
    """Resolve an argument that may be passed under a NumPy name or a PyTorch name, not both."""
    if a is not None and b is not None:
        raise TypeError(f"{op}: got both {a_name}= and {b_name}=; pass one")
    return a if a is not None else b
