"""Every CUDA kernel our code builds compiles with the real CUDA compiler (tools/check_cuda_kernels.py).

The CuPy stand-in runs our kernels by interpreting a subset of C; here the CUDA C that CuPy 14 would
generate for each of them (ElementwiseKernel, ReductionKernel in both of CuPy's forms -- CUB's block
reduction and its plain kernel -- and the compile fuser's vectorised RawKernels, float32, float64 and
float16 where our code builds them) goes through ``nvcc -arch=sm_90 -ptx`` with CuPy's headers and
options. Skips where nvcc or CuPy's headers are missing (AG_NVCC, AG_CUPY_INCLUDE name them); CuPy
itself is not needed (the kernels are collected on the stand-in and the sources generated here).
"""
import importlib.util
import os
from pathlib import Path

import pytest

import autograd_gpu as ag

_TOOL = Path(__file__).resolve().parents[1] / "tools" / "check_cuda_kernels.py"


def _load_tool():
    spec = importlib.util.spec_from_file_location("check_cuda_kernels", _TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def tool():
    from autograd_gpu.backends import cupy_backend
    if not cupy_backend.simulated() and cupy_backend.is_available():
        pytest.skip("real CuPy is the CUDA backend here (it compiles the kernels itself): this check runs "
                    "our CUDA paths on the CuPy stand-in, on machines without a GPU")
    t = _load_tool()
    nvcc, include = t.find_nvcc(), t.find_cupy_include()
    if nvcc is None:
        pytest.skip("nvcc not found (PATH, $CUDA_PATH/bin, /usr/local/cuda*/bin; or set AG_NVCC)")
    if include is None:
        pytest.skip("CuPy's CUDA headers not found (an installed cupy package's cupy/_core/include, or set "
                    "AG_CUPY_INCLUDE to a directory holding cupy/carray.cuh)")
    t.nvcc, t.include = nvcc, include
    return t


@pytest.fixture(scope="module")
def collected(tool):
    records, problems = tool.collect()
    sources, refusals = tool.sources_of(records)
    return records, problems, sources, refusals


def test_every_scenario_runs_and_cupy_would_accept_every_kernel(collected):
    records, problems, sources, refusals = collected
    assert not problems, "scenarios that stopped on the stand-in (their kernels went unchecked):\n" + \
        "\n".join(f"{sc}/{dt}: {msg}" for sc, dt, msg in problems)
    assert not refusals, "kernels CuPy would refuse before compiling:\n" + \
        "\n".join(f"{n}: {msg}" for n, msg in refusals)


def test_the_collection_reaches_every_kernel_family(collected):
    _, _, sources, _ = collected
    names = {s.name for s in sources}
    kinds = {(s.kind, s.variant.split()[0] if s.variant else "") for s in sources}

    def has(prefix):
        return any(n.startswith(prefix) for n in names)
    for family in ("ag_sgd", "ag_adam", "ag_rmsprop", "ag_adagrad", "ag_adamax", "ag_nadam", "ag_radam",
                   "ag_adadelta", "ag_asgd", "ag_rprop", "ag_lstm", "ag_gru", "ag_rnn", "ag_cross_entropy",
                   "ag_nll", "ag_ln_", "ag_rms_", "ag_bias_relu", "ag_gelu", "ag_silu", "ag_max_pool",
                   "ag_mul_grads", "ag_fused_"):
        assert has(family), f"no {family}* kernel was collected: {sorted(names)}"
    assert ("reduction", "cub") in kinds and ("reduction", "simple") in kinds and ("raw", "kinds") in kinds, kinds
    assert any("float16" in s.types for s in sources), "no float16 kernel collected"


def test_every_kernel_compiles_with_nvcc(tool, collected):
    _, _, sources, _ = collected
    results = tool.compile_all(sources, tool.nvcc, tool.include, jobs=os.cpu_count(), batch=64)
    bad = [(s, msg) for s, ok, msg in results if not ok]
    assert not bad, f"{len(bad)} of {len(results)} generated kernels do not compile:\n" + "\n".join(
        f"{s.kind} {s.name} [{s.types}] {s.variant} (from {', '.join(s.uses[:3])}):\n  {msg}" for s, msg in bad)


def test_a_kernel_that_does_not_compile_is_reported_with_the_compilers_error(tool):
    """The check can fail: a body calling an undeclared function, and the ReductionKernel form CuPy's CUB
    path breaks (it renames the input to in0 by a plain text replace: x in exp(x) too)."""
    ew = ({"kind": "elementwise", "in_params": "T x", "out_params": "T y", "operation": "y = no_such_fn(x);",
           "name": "ag_broken"},
          {"args": [{"nd": True, "shape": [8], "strides": [4], "dtype": "float32", "c": True}], "size": None})
    red = ({"kind": "reduction", "in_params": "float32 x", "out_params": "float32 y", "map_expr": "exp(x)",
            "reduce_expr": "a + b", "post_map_expr": "y = a", "identity": "0", "name": "ag_cub_renamed"},
           {"args": [{"nd": True, "shape": [4, 8], "strides": [32, 4], "dtype": "float32", "c": True}],
            "out": None, "axis": 1, "keepdims": False})
    good = ({"kind": "elementwise", "in_params": "T x", "out_params": "T y", "operation": "y = x * x;",
             "name": "ag_fine"}, ew[1])
    sources = tool.generate(ew) + tool.generate(red) + tool.generate(good)
    by = {(s.name, s.variant): s for s in sources}
    assert "ein0p(in0)" in by[("ag_cub_renamed", "cub")].text
    results = {(s.name, s.variant): (ok, msg) for s, ok, msg in
               tool.compile_all(sources, tool.nvcc, tool.include, jobs=2, batch=8)}
    assert results[("ag_fine", "")] == (True, "")
    ok, msg = results[("ag_broken", "")]
    assert not ok and "no_such_fn" in msg, msg
    ok, msg = results[("ag_cub_renamed", "cub")]
    assert not ok and "ein0p" in msg, msg
    assert results[("ag_cub_renamed", "simple (CuPy without CUB)")] == (True, "")


def test_the_generator_writes_what_cupys_own_generator_writes(tool, collected):
    """With AG_CUPY_PYTHON naming a Python where CuPy 14 is installed (no GPU needed), our elementwise and
    plain-reduction sources equal the ones CuPy's _get_elementwise_kernel_code /
    _ReductionKernel_get_cached_function_code write for the same arguments."""
    python = os.environ.get("AG_CUPY_PYTHON")
    if not python:
        pytest.skip("set AG_CUPY_PYTHON to a Python with CuPy installed to compare with CuPy's generators")
    records = collected[0]
    n, diffs = tool.crosscheck(records, python)
    assert n > 100 and not diffs, diffs[:5]


def test_it_runs_without_changing_the_cuda_backend(tool):
    from autograd_gpu.backends import cupy_backend
    before = cupy_backend.simulated()
    tool.collect(only=["norms"], dtypes=("float32",))
    assert cupy_backend.simulated() == before
    if not before:
        assert not ag.cuda.is_available() or not cupy_backend.simulated()
