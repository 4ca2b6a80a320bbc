"""Tensor's operators and methods, each a thin call into the op functions (no math here)."""
from .tensor import Tensor
from .ops import elementwise, inplace, misc  # noqa: F401  (their ops bind their Tensor methods and operators)
from .ops import reduction, shape, indexing  # noqa: F401  (their ops bind their Tensor methods as they register)


def is_complex(self):
    return self.data.dtype.kind == "c"


for _f in (is_complex,):
    setattr(Tensor, _f.__name__, _f)
