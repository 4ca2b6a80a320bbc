"""Fused kernels: layer norm and RMS norm forward and backward. See backends/kernels/__init__.py for the contract."""


class NumpyNorms:
    """NumPy implementations (mixed into NumpyBackend)."""


class CupyNorms:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached."""
