"""nn.functional's dropout (a family of its own, as in PyTorch): elements zeroed with probability p and the
rest scaled, the mask drawn from the device's generator."""
from ...tensor import Tensor
from ...dtypes import is_floating
from ..elementwise import Mul
from .._util import as_tensor
from ..registry import register, OpTest
from ._args import _inplace_result


@register(namespace="nn.functional", tests=(
    OpTest((((3, 4),),), ref=lambda np, a: a, op=lambda x: dropout(x, 0.5, training=False), name="dropout_eval"),
    OpTest((((3, 4),),), ref=lambda np, a: a, op=lambda x: dropout(x, 0.0), name="dropout_p0")),
    doc="Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when not training).")
def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the rest by 1 / (1 - p) (identity when not
    training or p == 0). The mask comes from the device's generator, so ag.manual_seed makes it
    reproducible."""
    x = as_tensor(input, "dropout")
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: expected a probability p in [0, 1], got {p!r}")
    if not training or p == 0:
        return x
    if not is_floating(x.dtype):
        raise TypeError(f"dropout: expected a floating-point tensor, got dtype {x.dtype}")
    backend = x.device.backend
    if p == 1:
        mask = backend.xp.zeros(x.shape, dtype=x.dtype)
    else:
        keep = backend.rand(x.shape, x.dtype) >= p
        mask = keep.astype(x.dtype)
        mask *= 1.0 / (1.0 - p)
    return _inplace_result(x, Mul.apply(x, Tensor._make(mask, x.device)), inplace)
