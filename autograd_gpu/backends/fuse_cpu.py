"""CPU fuser stub (replaced below)."""
from .fusers import register_fuser


class NumpyFuser:
    def __init__(self, backend):
        self.backend = backend

    def plan(self, steps, inputs, keep, values, em):
        return steps, 0, 0


register_fuser("numpy", NumpyFuser)
