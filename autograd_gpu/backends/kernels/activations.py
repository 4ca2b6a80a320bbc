"""Fused kernels: activation backwards (GELU, SiLU, tanh, sigmoid) and bias + activation. See backends/kernels/__init__.py for the contract."""


class NumpyActivations:
    """NumPy implementations (mixed into NumpyBackend)."""


class CupyActivations:
    """CuPy implementations (mixed into CupyBackend): kernels built once per dtype and cached."""
