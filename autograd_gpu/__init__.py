"""autograd_gpu: reverse-mode automatic differentiation on NumPy (CPU) or CuPy (CUDA GPU)."""
from .device import Device, device, set_default_device, get_default_device
from .dtypes import (float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, bool_,
                     set_default_dtype, get_default_dtype)
from .dtypes import complex64, complex128
from .dtypes import bool_ as bool     # noqa: A001  # PyTorch's name of the bool dtype (ag.bool is ag.bool_)
from .tensor import Tensor
from .creation import (tensor, as_tensor, from_numpy, from_dlpack, zeros, ones, full, empty, arange,
                       linspace, eye, rand, randn, randint, zeros_like, ones_like, full_like, empty_like,
                       rand_like, randn_like, randperm, manual_seed)
from .generator import Generator
from .autograd import (Function, no_grad, enable_grad, set_grad_enabled, is_grad_enabled, inference_mode,
                       is_inference_mode_enabled)
from . import autograd, backends, cuda
from .backends.threads import set_num_threads, get_num_threads
from . import ops
from .ops import registry as _registry
_registry.export("", globals())     # every op: ag.exp, ag.add, ag.sum, ... (each registered beside its def)

from . import nn, optim, data, func, viz, amp, utils
from . import fft
from . import linalg
from . import distributed     # cheap: mpi4py is imported by init_process_group(), not here
from .serialization import save, load
from . import safetensors      # ag.safetensors; the safetensors package is imported on first use
from .compile import compile   # the function; the package stays importable as autograd_gpu.compile.*

__version__ = "0.2.0"

import typing as _typing
if _typing.TYPE_CHECKING:
    # ag.exp, ag.sum, ... are put here at import by the registry (export above), which a type checker cannot
    # run: to it each is Any. Only the checker sees this; at run time a missing name is an AttributeError.
    from typing import Any

    def __getattr__(name: str) -> Any: ...
