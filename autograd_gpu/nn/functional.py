"""nn.functional (alias F): layers as functions (linear, convolution, pooling, normalisation,
dropout, embedding), softmax/log_softmax, losses and one_hot, with PyTorch's names, argument orders
and defaults. Everything runs on either device through the ops and the backend's ``xp``.

This module only re-exports: each F.* op is defined and registered (namespace "nn.functional": its
tests, vmap rule and docs line) with its kernels in autograd_gpu/ops/nn/, one module per family
(activation, linear, conv, norm, attention, loss, dropout, embedding).
"""
import typing as _typing

from ..ops import nn as _kernels   # noqa: F401  (importing the family modules registers the F.* ops)
from ..ops import registry as _registry

__all__ = _registry.export("nn.functional", globals())

if _typing.TYPE_CHECKING:
    # The F.* names are made at import by export() from the registry, which a type checker cannot run:
    # to it each is Any. Only the checker sees this; at run time a missing name is an AttributeError.
    from typing import Any

    def __getattr__(name: str) -> Any: ...
