import cupy as cp
from benchmarks.workloads import device_ms
n = 1 << 22
x = cp.random.standard_normal(n, dtype=cp.float32)
y = cp.empty_like(x)
one = cp.ones((), cp.float32)
e = "((((k0 * ((1 / (1 + exp(-a1))) * a1)) * k2) * (1 / (1 + exp(-a1)))) + (((1 - (1 / (1 + exp(-a1)))) * (1 / (1 + exp(-a1)))) * (((k0 * ((1 / (1 + exp(-a1))) * a1)) * k2) * a1)))"
gen = cp.ElementwiseKernel("float32 k0, float32 a1, float32 k2", "float32 y", f"y = {e}", "gen")
cse = cp.ElementwiseKernel("float32 k0, float32 a1, float32 k2", "float32 y",
    "float s = 1 / (1 + exp(-a1)); float m = (k0 * (s * a1)) * k2; y = (m * s) + (((1 - s) * s) * (m * a1))", "cse")
scal = cp.ElementwiseKernel("float32 a1, float32 k2", "float32 y", f"y = {e.replace('k0', '1.0f')}", "scal")
cpk = cp.ElementwiseKernel("float32 a1", "float32 y", "y = a1", "cpk")
r = {}
r["copyto"] = device_ms(cp, lambda: cp.copyto(y, x))
r["copy kernel"] = device_ms(cp, lambda: cpk(x, y))
r["generated, 0-d k0"] = device_ms(cp, lambda: gen(one, x, cp.float32(2), y))
r["generated, number k0"] = device_ms(cp, lambda: gen(cp.float32(1), x, cp.float32(2), y))
r["cse'd, 0-d k0"] = device_ms(cp, lambda: cse(one, x, cp.float32(2), y))
r["cse'd, number k0"] = device_ms(cp, lambda: cse(cp.float32(1), x, cp.float32(2), y))
for k, v in r.items():
    print(f"{k:>24}: {v*1e3:7.1f} us  {n*8/(v*1e-3)/1e9:6.0f} GB/s")
