"""Per-backend fusers for ag.compile's replayed programs (autograd_gpu/compile/program.py).

``get_fuser(backend)`` returns an object with ``plan(steps, inputs, keep, values, emitter) ->
(steps, n_fused, n_buffers)`` that may rewrite a trace's steps (fused elementwise kernels, output
buffers planned by liveness), or None: the program then replays the steps as recorded. Two are
registered, each by its module on import, which get_fuser does on first use: fuse_cpu.py for "numpy"
(block kernels split over the cores, numexpr for broadcasting runs) and fuse_cuda.py for "cupy"
(generated ElementwiseKernels and ReductionKernels, the replay captured as a CUDA graph where CUDA allows).
"""

__all__ = ["get_fuser", "register_fuser"]

_fusers = {}


def register_fuser(backend_name, factory):
    """``factory(backend)`` -> fuser, for backends whose ``name`` is ``backend_name``."""
    _fusers[backend_name] = factory


def get_fuser(backend):
    factory = _fusers.get(getattr(backend, "name", None))
    if factory is None and getattr(backend, "name", None) == "numpy":
        from . import fuse_cpu  # noqa: F401  (registers itself)
        factory = _fusers.get("numpy")
    if factory is None and getattr(backend, "name", None) == "cupy":
        from . import fuse_cuda  # noqa: F401  (registers itself)
        factory = _fusers.get("cupy")
    return None if factory is None else factory(backend)
