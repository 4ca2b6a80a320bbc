"""Differentiable operations, each a Function (forward and backward side by side, with its vmap rule)
and one registration (ops/registry.py) that makes it public. Importing this package imports every op
module, so every op is registered: the package's namespaces and Tensor's methods come from there."""
from . import elementwise, reduction, shape, indexing, linalg, inplace, misc  # noqa: F401  (they register)
from . import conv, fft, solvers, decompositions, norms, nn  # noqa: F401
from . import indexed  # noqa: F401
from . import special, products, shape_extra, stats  # noqa: F401
from . import sorting, triangles, cumulative  # noqa: F401
from . import sampling  # noqa: F401
