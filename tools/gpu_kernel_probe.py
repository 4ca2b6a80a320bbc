"""The compiled 4M-element step's kernel against copies, on a lent GPU:
`PYTHONPATH=$PWD python3 tools/gpu_kernel_probe.py`. GPU times by benchmarks.workloads.device_ms."""
import cupy as cp
import numpy as np

from autograd_gpu.backends.fuse_cuda_vec import VecKernel
from benchmarks.workloads import device_ms

n = 1 << 22
x = cp.random.standard_normal(n, dtype=cp.float32)
y = cp.empty_like(x)
one = cp.ones((), cp.float32)
e = ("((((k0 * ((1 / (1 + exp(-a1))) * a1)) * k2) * (1 / (1 + exp(-a1)))) + (((1 - (1 / (1 + exp(-a1)))) * "
     "(1 / (1 + exp(-a1)))) * (((k0 * ((1 / (1 + exp(-a1))) * a1)) * k2) * a1)))")
params = ["float32 k0", "float32 a1", "float32 k2"]
gen = cp.ElementwiseKernel(", ".join(params), "float32 y", f"y = {e}", "gen")
vec = VecKernel(cp, gen, params, "float32", e, simulated=False)
cpk = cp.ElementwiseKernel("float32 a1", "float32 y", "y = a1", "cpk")
vcp = VecKernel(cp, cpk, ["float32 a1"], "float32", "a1", simulated=False)
r = {"cudaMemcpy (copyto)": device_ms(cp, lambda: cp.copyto(y, x)),
     "ElementwiseKernel copy": device_ms(cp, lambda: cpk(x, y)),
     "vectorised copy": device_ms(cp, lambda: vcp(x, y)),
     "the 4M step's ElementwiseKernel": device_ms(cp, lambda: gen(one, x, np.float32(2), y)),
     "the 4M step's kernel, vectorised": device_ms(cp, lambda: vec(one, x, np.float32(2), y))}
for k, v in r.items():
    print(f"{k:>34}: {v * 1e3:7.1f} us  {n * 8 / (v * 1e-3) / 1e9:6.0f} GB/s")
