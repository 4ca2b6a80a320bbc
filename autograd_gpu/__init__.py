"""autograd_gpu: reverse-mode automatic differentiation on NumPy (CPU) or CuPy (CUDA GPU)."""
from .device import Device, device, set_default_device, get_default_device
from .dtypes import (float16, float32, float64, int8, int16, int32, int64, uint8, bool_,
                     set_default_dtype, get_default_dtype)
from .dtypes import complex64, complex128
from .tensor import Tensor
from . import _methods  # noqa: F401  (binds Tensor's operators and methods)
from .creation import (tensor, as_tensor, from_numpy, from_dlpack, zeros, ones, full, empty, arange,
                       linspace, eye, rand, randn, randint, zeros_like, ones_like, full_like, empty_like,
                       rand_like, randn_like, manual_seed)
from .autograd import Function, no_grad, enable_grad, set_grad_enabled, is_grad_enabled
from . import autograd, backends, cuda
from .ops.elementwise import (add, sub, mul, div, true_divide, divide, pow, neg, negative, abs, exp, expm1,
                              log, log1p, sqrt, rsqrt, square, sin, cos, tan, tanh, sigmoid, relu,
                              leaky_relu, elu, gelu, silu, softplus, erf, sign, floor, ceil, round, clamp,
                              clip, maximum, minimum, where, floor_divide, remainder, equal, not_equal, less,
                              less_equal, greater, greater_equal, eq, ne, lt, le, gt, ge, logical_and,
                              logical_or, logical_not, logical_xor, isnan, isinf, isfinite)
from .ops.elementwise import conj, real, imag, angle, sgn, complex, view_as_real, view_as_complex
from .ops.reduction import (sum, mean, var, std, max, min, amax, amin, prod, logsumexp, norm, argmax,
                            argmin, any, all, cumsum)
from .ops.shape import (broadcast_shapes, broadcast_to, expand, sum_to, reshape, view, contiguous, flatten, permute,
                        transpose, swapaxes, moveaxis, squeeze, unsqueeze, expand_dims, concatenate, cat,
                        stack, split, chunk, unbind, pad, flip, roll, repeat, tile, repeat_interleave)
from .ops.indexing import getitem, setitem, gather, take_along_axis, index_select, scatter_add
from .ops.linalg import matmul, dot, tensordot, einsum, outer
from .ops.misc import clone
from .ops.inplace import add_, sub_, mul_, div_, fill_, zero_, copy_

from . import nn, optim, data, func, viz, amp, utils
from . import fft
from . import linalg
from . import distributed     # cheap: mpi4py is imported by init_process_group(), not here
from .serialization import save, load
from .ops import registry as _registry
globals().update(_registry.names(""))     # every registered op: ag.exp, ag.add, ... (autograd_gpu/ops/registry.py)
from .compile import compile   # the function; the package stays importable as autograd_gpu.compile.*

__version__ = "0.1.0"
