"""ag.compile: trace a function's array work once per signature, replay it afterwards (docs/compile.md).

tracer.py records, program.py turns the record into a replay function, state.py finds what a call
touches and keys the cache, replay.py ties them together; fused kernels come from the backends' fusers
(backends/fusers.py)."""
from .replay import compile, CompiledFunction
from .tracer import host_values, Untraceable
from .program import GuardFailed

__all__ = ["compile", "CompiledFunction", "host_values", "Untraceable", "GuardFailed"]
