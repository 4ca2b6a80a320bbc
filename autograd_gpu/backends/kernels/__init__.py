"""Fused kernels that eager ops call: one family per module, each with a NumPy implementation (fewer
passes, in place where safe) and a CuPy one (ElementwiseKernel / ReductionKernel / RawKernel, built once
per dtype and cached), as mixins of the two backends. Callers reach them as backend methods
(``x.device.backend.adam_update(...)``), so nothing above backends/ knows which implementation runs.

Each family module defines ``Numpy<Family>`` and ``Cupy<Family>``; numpy_backend.py and cupy_backend.py
list them as bases of their Backend class. A fused path must equal the unfused ops it replaces (values
and gradients, float32 and float64, empty, one-row and non-contiguous inputs): the tests say so.

Under ag.compile's trace a fused kernel would be one opaque call that its fusers cannot see into (nor
plan buffers around, nor know what it writes). So the trace goes through the NumPy implementations
instead, on either device: they are written against ``self.xp`` (NumPy, CuPy, or the tracer's recording
namespace), so the tracer records their array calls and its CPU and CUDA fusers fuse them with the
rest of the step, as they did the unfused ops. ``TRACE_THROUGH`` names those methods (the tracer leaves
them unpatched), and on CUDA the tracer puts the NumPy twins (``TRACE_AS``) on the backend for the trace. The optimizers' multi-tensor updates are not among them: under a trace the optimizers record
their per-parameter reference update themselves (optim/).
"""
from .optim import NumpyOptim, CupyOptim
from .losses import NumpyLosses, CupyLosses
from .norms import NumpyNorms, CupyNorms
from .activations import NumpyActivations, CupyActivations
from .rnn import NumpyRNN, CupyRNN
from .conv import NumpyConv, CupyConv
from .grads import NumpyGrads, CupyGrads


def _public(cls):
    return [n for n, f in vars(cls).items() if not n.startswith("_") and callable(f)]


_TRACED = ((NumpyLosses, CupyLosses), (NumpyNorms, CupyNorms), (NumpyActivations, CupyActivations),
           (NumpyRNN, CupyRNN), (NumpyConv, CupyConv), (NumpyGrads, CupyGrads))
TRACE_THROUGH = frozenset(name for numpy_cls, _ in _TRACED for name in _public(numpy_cls))
# what a CuPy backend runs instead of its fused kernels while a trace records (the tracer puts these on the
# backend instance for the trace, so calls outside a trace pay nothing)
TRACE_AS = {name: vars(numpy_cls)[name] for numpy_cls, _ in _TRACED for name in _public(numpy_cls)}

NUMPY_MIXINS = (NumpyOptim, NumpyLosses, NumpyNorms, NumpyActivations, NumpyRNN, NumpyConv, NumpyGrads)
CUPY_MIXINS = (CupyOptim, CupyLosses, CupyNorms, CupyActivations, CupyRNN, CupyConv, CupyGrads)
