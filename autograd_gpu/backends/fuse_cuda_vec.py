"""Vectorised versions of the CUDA fuser's generated elementwise kernels.

A ``cupy.ElementwiseKernel`` moves one element per thread; on an H100 one that only copies moves
32 MiB at 1.41 TB/s where ``cudaMemcpy`` reaches 2.29 (docs/bench/gpu/kernel_probe.txt), and the
fused 4M-element step ran at exactly that copy speed. When every array argument of a call is
C-contiguous, of the kernel's float dtype, of one shape and 16-byte aligned, the same C expression
runs instead as a ``RawKernel`` over ``float4`` / ``double2`` vectors: one 16-byte load per array and
one 16-byte store per thread, the last few elements one by one. Every other call, and every call on
the test suite's CuPy stand-in (which simulates ElementwiseKernel, not RawKernel), goes to the
ElementwiseKernel; both evaluate the same expression per element. ``source`` is also compiled by the
test suite as C++ on the host (tests/test_compile_cuda.py), so the indexing runs in CI.
"""
import math

import numpy as np

_MIN_SIZE = 1 << 16          # below this a launch costs more than the memory: the ElementwiseKernel does
_BLOCK = 256
_C_TYPES = {"float32": ("float", "float4", 4), "float64": ("double", "double2", 2)}
_LANES = ("x", "y", "z", "w")


def source(name, params, kinds, dtype, code):
    """CUDA C of the vectorised kernel ``name`` for parameters ``params`` ((dtype, name) pairs) passed as
    ``kinds`` ('v': an array, 'p': a 0-d array, 's': a number), computing ``y = code`` per element."""
    t, vec, width = _C_TYPES[dtype]
    sig = [f"const {t}* {p}_p" if k in "vp" else f"{t} {p}" for (_, p), k in zip(params, kinds)]
    sig += [f"{t}* y_p", "long long n"]
    zero_d = "".join(f"    const {t} {p} = {p}_p[0];\n" for (_, p), k in zip(params, kinds) if k == "p")
    arrays = [p for (_, p), k in zip(params, kinds) if k == "v"]
    loads = "".join(f"        const {vec} {p}_v = reinterpret_cast<const {vec}*>({p}_p)[v];\n" for p in arrays)
    lanes = "".join(
        "        { " + "".join(f"const {t} {p} = {p}_v.{lane}; " for p in arrays) + f"r.{lane} = {code}; }}\n"
        for lane in _LANES[:width])
    tail_loads = "".join(f"const {t} {p} = {p}_p[i]; " for p in arrays)
    return (f'extern "C" __global__ void {name}({", ".join(sig)}) {{\n'
            f"    const long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    long long i = v * {width};\n"
            f"{zero_d}"
            f"    if (i + {width} <= n) {{\n"
            f"{loads}        {vec} r;\n{lanes}"
            f"        reinterpret_cast<{vec}*>(y_p)[v] = r;\n"
            f"    }} else {{\n"
            f"        for (; i < n; ++i) {{ {tail_loads}y_p[i] = {code}; }}\n"
            f"    }}\n}}\n")


class VecKernel:
    """Callable as the ElementwiseKernel ``ew`` it stands for (inputs, then an optional output)."""

    def __init__(self, xp, ew, params, out_t, code, simulated):
        self.xp, self.ew, self.code, self.out_t = xp, ew, code, out_t
        self.params = [tuple(p.split()) for p in params]
        self.enabled = (not simulated and out_t in _C_TYPES and all(dt == out_t for dt, _ in self.params)
                        and hasattr(xp, "RawKernel"))
        self.kernels = {}                 # kinds -> RawKernel, or None where it did not compile
        self.name = getattr(ew, "name", "ag_fused") + "_vec"

    def __call__(self, *args):
        if self.enabled:
            out = self._vectorised(args)
            if out is not None:
                return out
        return self.ew(*args)

    def _vectorised(self, args):
        xp, n_in = self.xp, len(self.params)
        ins, out = args[:n_in], (args[n_in] if len(args) > n_in else None)
        shape, kinds = None, []
        for a in ins:
            if not isinstance(a, xp.ndarray):
                kinds.append("s")
            elif a.ndim == 0:
                if a.dtype.name != self.out_t:
                    return None
                kinds.append("p")
            elif self._aligned(a) and (shape is None or a.shape == shape):
                shape = a.shape
                kinds.append("v")
            else:
                return None
        if shape is None or math.prod(shape) < _MIN_SIZE:
            return None
        if out is None:
            out = xp.empty(shape, self.out_t)
        elif out.shape != shape or not self._aligned(out):
            return None
        kernel = self._kernel(tuple(kinds))
        if kernel is None:
            return None
        n = math.prod(shape)
        threads = -(-n // _C_TYPES[self.out_t][2])
        kernel((-(-threads // _BLOCK),), (_BLOCK,), tuple(ins) + (out, np.int64(n)))
        return out

    def _aligned(self, a):
        return a.dtype.name == self.out_t and a.flags.c_contiguous and a.data.ptr % 16 == 0

    def _kernel(self, kinds):
        if kinds not in self.kernels:
            try:
                k = self.xp.RawKernel(source(self.name, self.params, kinds, self.out_t, self.code), self.name)
                k.compile()
            except Exception:            # noqa: BLE001 - NVRTC refused it: the ElementwiseKernel does the work
                k = None
            self.kernels[kinds] = k
        return self.kernels[kinds]
