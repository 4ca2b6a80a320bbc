"""nn.functional (alias F): layers as functions (linear, convolution, pooling, normalisation,
dropout, embedding), softmax/log_softmax, losses and one_hot, with PyTorch's names, argument orders
and defaults. Everything runs on either device through the ops and the backend's ``xp``.

This module only re-exports: each F.* op is defined and registered (namespace "nn.functional": its
tests, vmap rule and docs line) with its kernels in autograd_gpu/ops/nn/, one module per family
(activation, linear, conv, norm, attention, loss, dropout, embedding).
"""
from ..ops import nn as _kernels   # noqa: F401  (importing the family modules registers the F.* ops)
from ..ops import registry as _registry

globals().update(_registry.names("nn.functional"))

# Names this module exported before its kernels moved to ops/nn (the Functions, and what it imported):
# kept so that code reaching them here keeps working
from ..autograd.function import Function  # noqa: E402, F401
from ..autograd.grad_mode import state  # noqa: E402, F401
from ..tensor import Tensor  # noqa: E402, F401
from ..dtypes import result_type  # noqa: E402, F401
from ..amp import cast_low, cast_float32  # noqa: E402, F401
from ..ops._util import as_tensor, normalize_dim  # noqa: E402, F401
from ..ops.elementwise import (Mul, ReluBackward, Softplus, mul, where, clamp, log, exp, rsqrt, square,  # noqa: E402, F401
                               greater, equal)
from ..ops.reduction import Sum  # noqa: E402, F401
from ..ops.shape import broadcast_shapes, broadcast_to  # noqa: E402, F401
from ..ops.linalg import MatMul, matmul  # noqa: E402, F401
from ..ops.indexing import ScatterAddInto, IndexAddInto  # noqa: E402, F401
from ..ops.nn.activation import LogSoftmax, LogSoftmaxBackward, Softmax  # noqa: E402, F401
from ..ops.nn.linear import Linear, LinearReLU  # noqa: E402, F401
from ..ops.nn.norm import LayerNorm  # noqa: E402, F401
from ..ops.nn.embedding import Embedding  # noqa: E402, F401
from ..ops.nn.attention import ScaledDotProductAttention, CAUSAL_BLOCKS, CAUSAL_MASKS_KEPT  # noqa: E402, F401
from ..ops.nn.loss import NllLoss, CrossEntropy, BinaryCrossEntropy  # noqa: E402, F401

__all__ = sorted(_registry.names("nn.functional"))
