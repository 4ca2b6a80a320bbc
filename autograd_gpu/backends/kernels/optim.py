"""Fused kernels: optimizer updates (one multi-tensor update per parameter group and step). See backends/kernels/__init__.py for the contract."""


class NumpyOptim:
    """NumPy implementations (mixed into NumpyBackend)."""


class CupyOptim:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached."""
