"""nn.functional (alias F): layers as functions (linear, convolution, pooling, normalisation,
dropout, embedding), softmax/log_softmax, losses and one_hot, with PyTorch's names, argument orders
and defaults. Everything runs on either device through the ops and the backend's ``xp``.

This module only re-exports: each F.* op is defined and registered (namespace "nn.functional": its
tests, vmap rule and docs line) with its kernels in autograd_gpu/ops/nn/, one module per family
(activation, linear, conv, norm, attention, loss, dropout, embedding).
"""
from ..ops import nn as _kernels   # noqa: F401  (importing the family modules registers the F.* ops)
from ..ops import registry as _registry

__all__ = _registry.export("nn.functional", globals())
