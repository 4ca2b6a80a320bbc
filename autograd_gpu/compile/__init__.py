"""ag.compile: trace a function's array work once per signature, replay it afterwards (docs/compile.md).

tracer.py records, program.py turns the record into a replay function, state.py finds what a call
touches and keys the cache, replay.py ties them together; fused kernels come from the backends' fusers
(backends/fusers.py)."""
from .replay import compile, CompiledFunction
from .tracer import host_values, Untraceable
from .program import GuardFailed
from .module import CompiledModule, compile_in_place
from .aot import CompiledBackward
from ..nn import module as _nn_module

_nn_module.compile_in_place[0] = compile_in_place      # Module.compile()

__all__ = ["compile", "CompiledFunction", "CompiledModule", "CompiledBackward", "host_values", "Untraceable",
           "GuardFailed"]
