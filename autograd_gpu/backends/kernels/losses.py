"""Fused kernels: cross-entropy / nll / log-softmax / softmax forward and backward. See backends/kernels/__init__.py for the contract."""


class NumpyLosses:
    """NumPy implementations (mixed into NumpyBackend)."""


class CupyLosses:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached."""
