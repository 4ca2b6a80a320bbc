"""Fused kernels: the LSTM / GRU / RNN cells, forward and backward per time step. See backends/kernels/__init__.py for the contract."""


class NumpyRNN:
    """NumPy implementations (mixed into NumpyBackend)."""


class CupyRNN:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached."""
