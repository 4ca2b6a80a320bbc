"""Fused kernels that eager ops call: one family per module, each with a NumPy implementation (fewer
passes, in place where safe) and a CuPy one (ElementwiseKernel / ReductionKernel / RawKernel, built once
per dtype and cached), as mixins of the two backends. Callers reach them as backend methods
(``x.device.backend.adam_update(...)``), so nothing above backends/ knows which implementation runs.

Each family module defines ``Numpy<Family>`` and ``Cupy<Family>``; numpy_backend.py and cupy_backend.py
list them as bases of their Backend class. A fused path must equal the unfused ops it replaces (values
and gradients, float32 and float64, empty, one-row and non-contiguous inputs): the tests say so.
"""
from .optim import NumpyOptim, CupyOptim
from .losses import NumpyLosses, CupyLosses
from .norms import NumpyNorms, CupyNorms
from .activations import NumpyActivations, CupyActivations
from .rnn import NumpyRNN, CupyRNN

NUMPY_MIXINS = (NumpyOptim, NumpyLosses, NumpyNorms, NumpyActivations, NumpyRNN)
CUPY_MIXINS = (CupyOptim, CupyLosses, CupyNorms, CupyActivations, CupyRNN)
