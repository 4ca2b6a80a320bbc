"""ag.compile on CUDA (backends/fuse_cuda.py): generated ElementwiseKernels / ReductionKernels, planned
buffers and CUDA-graph replay equal eager mode; graphs are captured only where that is right.

All tests take a CUDA device: `AG_CUDA=standin python -m pytest -q -m gpu tests/test_compile_cuda.py`
runs them on the CuPy stand-in (which evaluates the generated kernels' C and replays captured graphs)."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim
import autograd_gpu.nn.functional as F
from autograd_gpu.testing.helpers import assert_close, to_numpy, train_step

pytestmark = pytest.mark.gpu


@pytest.fixture
def cuda():
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs these on the stand-in)")
    return "cuda"


def close(got, want, **tol):
    assert_close(ag.tensor(to_numpy(got)), to_numpy(want), **tol)


def _rand(shape, seed, device, requires_grad=False):
    a = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return ag.tensor(a, device=device, requires_grad=requires_grad)


def test_an_elementwise_chain_becomes_one_kernel_and_equals_eager(cuda):
    def f(x, y):
        with ag.no_grad():
            return ag.tanh(x * y + 1) * ag.exp(-x) - y / 3
    cf = ag.compile(f)
    for i in range(5):
        x, y = _rand((64, 33), i, cuda), _rand((33,), i + 10, cuda)
        close(cf(x, y), f(x, y), rtol=1e-5, atol=1e-6)
    src = cf.programs()[0].source
    assert src.count("ag_fused") == 0 and src.count("  # ") == 1, src   # one generated kernel for the chain
    assert cf.programs()[0].n_fused == 1
    st = cf.cuda_stats()
    assert st["graph_captures"] == 1 and st["graph_launches"] == 3 and st["kernel_launches"] == 1


def test_a_sum_at_the_end_of_a_run_is_one_reduction_kernel_forward_and_backward(cuda):
    def f(x):
        x.grad = None
        loss = (ag.sigmoid(x) * x + x * x).sum()
        loss.backward()
        return loss
    x1, x2 = _rand((1000,), 0, cuda, True), _rand((1000,), 0, cuda, True)
    cf = ag.compile(f)
    for i in range(6):
        with ag.no_grad():
            x1.add_(0.01)
            x2.add_(0.01)
        close(cf(x2), f(x1), rtol=1e-5, atol=1e-4)
        close(x2.grad, x1.grad, rtol=1e-5, atol=1e-6)
    src = cf.programs()[-1].source
    # forward: the sigmoid recomputed inside the sum; backward: one kernel reading x
    assert "sum((((1 / (1 + exp(-a0))) * a0) + (a0 * a0)))" in src, src
    assert cf.programs()[-1].n_fused == 2, src
    assert cf.cuda_stats()["graph_launches"] >= 3


def _mlp(device, seed=0, dropout=0.0):
    ag.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, 32), nn.Tanh(),
                         nn.Linear(32, 5)).to(device)


@pytest.mark.parametrize("opt_cls,kw", [(optim.SGD, dict(lr=0.1, momentum=0.9)), (optim.Adam, dict(lr=0.01)),
                                        (optim.Adamax, dict(lr=0.01)), (optim.NAdam, dict(lr=0.01)),
                                        (optim.RAdam, dict(lr=0.01)), (optim.Adadelta, dict()),
                                        (optim.ASGD, dict(lr=0.05, t0=5)), (optim.Rprop, dict(lr=0.01))],
                         ids=["SGD-momentum", "Adam", "Adamax", "NAdam", "RAdam", "Adadelta", "ASGD", "Rprop"])
def test_the_compiled_mlp_training_step_equals_eager_for_20_steps_as_a_cuda_graph(opt_cls, kw, cuda):
    m1, m2 = _mlp(cuda), _mlp(cuda)
    o1, o2 = opt_cls(m1.parameters(), **kw), opt_cls(m2.parameters(), **kw)

    @ag.compile
    def cstep(x, y):
        return train_step(m2, o2, x, y)

    params = [p.data for p in m2.parameters()]
    rng = np.random.default_rng(0)
    losses = []
    for i in range(20):
        x = ag.tensor(rng.standard_normal((16, 12)).astype(np.float32), device=cuda)
        y = ag.tensor(rng.integers(0, 5, 16), device=cuda)
        got = cstep(x, y)
        close(got, train_step(m1, o1, x, y), rtol=1e-5, atol=1e-6)
        losses.append((got, float(got.item())))
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        close(p2, p1, rtol=1e-5, atol=1e-6)
        close(p2.grad, p1.grad, rtol=1e-5, atol=1e-6)
    # parameters are captured by address: updated in their own memory, never rebound
    assert all(p.data is a for p, a in zip(m2.parameters(), params))
    # outputs handed out are copies: later launches did not overwrite them
    assert all(float(t.item()) == v for t, v in losses)
    st = cstep.cuda_stats()
    assert st["graph_captures"] == 1 and st["graph_launches"] >= 16, st
    assert cstep.programs()[-1].n_fused >= 10


def test_dropout_draws_fresh_masks_so_its_program_is_not_captured(cuda):
    m = _mlp(cuda, dropout=0.5)

    @ag.compile
    def f(x):
        with ag.no_grad():
            return m(x)
    x = _rand((16, 12), 0, cuda)
    outs = [to_numpy(f(x)) for _ in range(5)]
    assert all(not np.array_equal(outs[0], o) for o in outs[1:])
    assert f.cuda_stats()["graph_captures"] == 0
    assert "random" in f.programs()[0].graph_runner.no_graph
    ag.manual_seed(3)
    a = to_numpy(f(x))
    ag.manual_seed(3)
    with ag.no_grad():
        close(a, m(x))                     # the same numbers eager mode draws


def test_a_changed_shape_retraces_and_each_program_has_its_own_graph(cuda):
    @ag.compile
    def f(x):
        with ag.no_grad():
            return (x * 2 + 1).relu()
    for n in (8, 8, 8, 8, 16, 16, 16, 16):
        x = _rand((n,), n, cuda)
        close(f(x), (x * 2 + 1).relu())
    assert f.stats["traces"] == 2 and f.cuda_stats()["graph_captures"] == 2


def test_guards_keep_a_program_out_of_graphs(cuda):
    @ag.compile
    def f(x):
        with ag.no_grad():
            return x * 2 if float(x.sum().item()) > 0 else x * 3
    x = ag.ones(4, device=cuda)
    for _ in range(4):
        close(f(x), x * 2)
    assert f.cuda_stats()["graph_captures"] == 0
    assert "guard" in f.programs()[0].graph_runner.no_graph


def test_cuda_graphs_false_replays_the_kernels_without_capture(cuda):
    @ag.compile(cuda_graphs=False)
    def f(x):
        with ag.no_grad():
            return ag.exp(x) * x + 1
    x = _rand((10,), 0, cuda)
    for _ in range(4):
        close(f(x), ag.exp(x) * x + 1, rtol=1e-6)
    assert f.cuda_stats() == {"kernel_launches": 3, "graph_captures": 0, "graph_launches": 0}


def test_a_capture_that_cuda_refuses_falls_back_to_plain_replays(cuda):
    @ag.compile
    def f(x):
        with ag.no_grad():
            return x + ag.tensor([1.0, 2.0, 3.0], device=cuda)     # a host-to-device copy in the program
    x = ag.ones(3, device=cuda)
    for _ in range(4):
        close(f(x), x + ag.tensor([1.0, 2.0, 3.0], device=cuda))
    runner = f.programs()[0].graph_runner
    assert runner.no_graph is not None and f.cuda_stats()["graph_captures"] == 0


def test_inputs_that_are_not_written_are_copied_in_so_the_caller_keeps_its_arrays(cuda):
    w = _rand((8,), 1, cuda)

    @ag.compile
    def f(x):
        with ag.no_grad():
            w.mul_(0.5)
            return x * w
    xs = [_rand((8,), i, cuda) for i in range(5)]
    keep = [to_numpy(x).copy() for x in xs]
    w_ref = to_numpy(w).copy()
    for x, k in zip(xs, keep):
        w_ref = w_ref * 0.5
        close(f(x), k * w_ref, rtol=1e-6)
    for x, k in zip(xs, keep):
        np.testing.assert_array_equal(to_numpy(x), k)
    assert f.cuda_stats()["graph_launches"] >= 2


def test_device_side_checks_inside_a_graph_raise_at_the_next_read(cuda):
    lin = nn.Linear(4, 3).to(cuda)

    @ag.compile
    def f(x, y):
        with ag.no_grad():
            return F.cross_entropy(lin(x), y)
    x = _rand((5, 4), 0, cuda)
    good = ag.tensor(np.array([0, 1, 2, 0, 1]), device=cuda)
    for _ in range(4):
        f(x, good).item()
    assert f.cuda_stats()["graph_launches"] >= 1
    bad = ag.tensor(np.array([0, 1, 7, 0, 1]), device=cuda)
    loss = f(x, bad)
    with pytest.raises(Exception, match="out of range"):
        loss.item()
    assert float(f(x, good).item()) > 0            # the check was read and cleared: later calls are fine


@pytest.mark.device_index
def test_a_program_on_the_second_gpu_runs_its_kernels_and_graph_there(cuda):
    if ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (the stand-in simulates two)")
    w = _rand((6,), 2, "cuda:1")

    @ag.compile
    def f(x):
        with ag.no_grad():
            return ag.exp(x) * w + 1
    ref = to_numpy(w).copy()
    for i in range(4):
        x = _rand((6,), i, "cuda:1")
        out = f(x)
        assert out.device == ag.device("cuda:1")
        close(out, np.exp(to_numpy(x)) * ref + 1, rtol=1e-6)
    assert f.cuda_stats()["graph_launches"] >= 1


def _allocations_of(n, fn, monkeypatch):
    """How many arrays of n float32 values ``fn()`` allocates on the device: counted by CuPy's memory
    hook on a GPU, by the stand-in's array constructor on the stand-in."""
    from autograd_gpu.backends import cupy_backend, get_backend
    made = []
    if cupy_backend.simulated():
        from autograd_gpu.testing.cupy_standin import ndarray
        real = ndarray._from_host.__func__

        def counting(cls, a, dev):
            if a.size == n and a.base is None:
                made.append(a)
            return real(cls, a, dev)
        monkeypatch.setattr(ndarray, "_from_host", classmethod(counting))
        try:
            fn()
        finally:
            monkeypatch.undo()
        return len(made)
    xp = get_backend("cuda").xp

    class Count(xp.cuda.MemoryHook):
        name = "count"

        def malloc_preprocess(self, **kw):
            if kw["size"] == 4 * n:
                made.append(kw)
    with Count():
        fn()
        xp.cuda.Device().synchronize()
    return len(made)


def test_a_warm_replay_allocates_only_what_it_hands_out_and_what_ops_make_inside(cuda, monkeypatch):
    n = 4096

    @ag.compile(cuda_graphs=False)
    def f(x):
        with ag.no_grad():
            a = ag.exp(x) * x                 # a kernel whose result stays inside: a planned buffer
            b = a.cumsum(0)                   # not elementwise: allocates its own result
            return b * a - 1
    x = _rand((n,), 0, cuda)
    f(x), f(x)
    box = []
    made = _allocations_of(n, lambda: box.append(f(x)), monkeypatch)
    with ag.no_grad():
        close(box[0], (ag.exp(x) * x).cumsum(0) * (ag.exp(x) * x) - 1, rtol=1e-5)
        cumsum = _allocations_of(n, lambda: x.data.cumsum(0), monkeypatch)
    assert f.programs()[0].n_buffers == 1
    assert made == cumsum + 1, (made, cumsum)   # cumsum's own and the output, nothing for a


# -- matmuls inside a captured graph (backends/cublas_graph.py) ---------------------------------------
def _layouts(xp, rng, dt):
    """(a, b) pairs in every layout the graph's cuBLAS call reads directly or has to copy first."""
    def arr(*shape):
        a = rng.standard_normal(shape)
        if np.dtype(dt).kind == "c":
            a = a + 1j * rng.standard_normal(shape)
        return xp.asarray(a.astype(dt))
    wide = arr(7, 9)
    yield arr(5, 7), arr(7, 3)                        # row-major both
    yield arr(7, 5).T, arr(3, 7).T                    # transposed views (F-ordered)
    yield wide[:, 2:7], arr(5, 4)                     # a leading dimension wider than the rows
    yield arr(10, 7)[::2], arr(7, 6)[:, ::-1]         # a row step; a negative stride (copied)
    yield arr(7), arr(7, 4)                           # 1-d on the left
    yield arr(4, 7), arr(7)                           # 1-d on the right
    yield arr(7), arr(7)                              # both: a 0-d result
    yield arr(3, 5, 7), arr(3, 7, 2)                  # batched
    yield arr(5, 7), arr(4, 7, 2)                     # an unbatched operand: batch stride 0
    yield arr(4, 1, 5, 7), arr(3, 7, 2)               # broadcast batches (copied)
    yield arr(3, 7, 5).swapaxes(1, 2), arr(2, 3, 7, 2)[1]   # transposed matrices in a batch
    yield arr(6, 5, 7)[::2], arr(7, 1)                # a batch step; a single column
    yield arr(1, 5, 0), arr(1, 0, 3)                  # k = 0: zeros


@pytest.mark.parametrize("dt", ["float16", "float32", "float64", "complex64", "complex128"])
def test_the_graph_matmul_equals_cupy_matmul_in_every_layout(cuda, dt):
    from autograd_gpu.backends import cublas_graph, get_backend
    xp = get_backend(cuda).xp
    rng = np.random.default_rng(5)
    tol = dict(rtol=2e-2, atol=2e-2) if dt == "float16" else dict(rtol=1e-5, atol=1e-5)
    for a, b in _layouts(xp, rng, dt):
        want = xp.matmul(a, b)
        got = cublas_graph.matmul(xp, a, b)
        assert got.shape == want.shape and got.dtype == want.dtype, (a.shape, b.shape)
        np.testing.assert_allclose(xp.asnumpy(got), xp.asnumpy(want), **tol)
        out = xp.full(want.shape, np.nan, dtype=want.dtype)
        assert cublas_graph.matmul(xp, a, b, out=out) is out
        np.testing.assert_allclose(xp.asnumpy(out), xp.asnumpy(want), **tol)
        if want.ndim >= 2:                           # an out cuBLAS cannot write row-major: copied into
            out = xp.full(want.shape[::-1], np.nan, dtype=want.dtype).T
            assert cublas_graph.matmul(xp, a, b, out=out) is out
            np.testing.assert_allclose(xp.asnumpy(out), xp.asnumpy(want), **tol)
    with pytest.raises(ValueError, match="mismatch"):
        cublas_graph.matmul(xp, xp.ones((2, 3), dt), xp.ones((4, 2), dt))
    with pytest.raises(TypeError, match="float16/32/64 or complex"):
        cublas_graph.matmul(xp, xp.ones((2, 3), "int32"), xp.ones((3, 2), "int32"))


# -- what a graph hands out and reads in place ----------------------------------------------------------
def test_a_large_result_is_handed_out_uncopied_until_someone_keeps_one(cuda):
    n = 1 << 15                                      # 128 KiB: handed out as the graph's own buffer

    @ag.compile
    def f(x):
        with ag.no_grad():
            return ag.exp(x) * 2 - x
    xs = [_rand((n,), i, cuda) for i in range(7)]

    def want(x):
        return np.exp(to_numpy(x)) * 2 - to_numpy(x)
    f(xs[0]), f(xs[1])                               # the trace, a plain replay
    r = f(xs[2])                                     # captured and launched
    ptr = r.data.data.ptr
    np.testing.assert_allclose(to_numpy(r), want(xs[2]), rtol=1e-6)
    del r                                            # nobody keeps it: the next launch may write there
    r = f(xs[3])
    assert r.data.data.ptr == ptr and f.cuda_stats()["graph_captures"] == 1
    kept = r                                         # kept: the next launch must not overwrite it
    r = f(xs[4])
    np.testing.assert_allclose(to_numpy(kept), want(xs[3]), rtol=1e-6)
    np.testing.assert_allclose(to_numpy(r), want(xs[4]), rtol=1e-6)
    assert f.cuda_stats()["graph_captures"] == 2     # captured again, that result copied from now on
    view = r[5:]                                     # a copy now; a view of it keeps it all the same
    del r
    r = f(xs[5])
    np.testing.assert_allclose(to_numpy(view), want(xs[4])[5:], rtol=1e-6)
    np.testing.assert_allclose(to_numpy(r), want(xs[5]), rtol=1e-6)
    assert f.cuda_stats()["graph_launches"] == 4


def test_a_view_of_a_result_handed_out_uncopied_keeps_it_from_being_overwritten(cuda):
    n = 1 << 15

    @ag.compile
    def f(x):
        with ag.no_grad():
            return x * 3
    xs = [_rand((n,), i, cuda) for i in range(5)]
    f(xs[0]), f(xs[1]), f(xs[2])                     # traced, replayed, captured (that result dropped)
    view = f(xs[3])[7:]                              # only a view of the result is kept
    r = f(xs[4])
    np.testing.assert_allclose(to_numpy(view), to_numpy(xs[3])[7:] * 3, rtol=1e-6)
    np.testing.assert_allclose(to_numpy(r), to_numpy(xs[4]) * 3, rtol=1e-6)
    assert f.cuda_stats()["graph_captures"] == 2


def test_a_large_gradient_is_handed_out_uncopied_and_an_old_one_kept_keeps_its_values(cuda):
    n = 1 << 15
    x = _rand((n,), 0, cuda, requires_grad=True)

    @ag.compile
    def f():
        x.grad = None
        s = ag.sigmoid(x)
        ((s * x) ** 2).sum().backward()

    def want():
        a = to_numpy(x).astype(np.float64)
        s = 1 / (1 + np.exp(-a))
        return 2 * (s * a) * (s + a * s * (1 - s))
    grads, ptrs = [], []
    for i in range(7):
        with ag.no_grad():
            x.mul_(0.9)                              # in place: the same array, read by address
        f()
        np.testing.assert_allclose(to_numpy(x.grad), want(), rtol=1e-4, atol=1e-6)
        ptrs.append(x.grad.data.data.ptr)
        if i == 4:
            grads.append((x.grad, want()))           # kept across the next launches
    # launched from the fourth call on (two traces, a plain replay): the gradient replaced by the next
    # call (and gathered as its input) was the graph's own buffer, written again in place
    assert ptrs[3] == ptrs[4]
    for g, w in grads:
        np.testing.assert_allclose(to_numpy(g), w, rtol=1e-4, atol=1e-6)
    st = f.cuda_stats()
    assert st["graph_captures"] == 2 and st["graph_launches"] == 4, st     # captured again once, when kept


def test_a_state_tensor_rebound_to_another_array_is_read_from_the_new_one(cuda):
    w = ag.tensor(np.ones(4096, np.float32), device=cuda)

    @ag.compile
    def f(x):
        with ag.no_grad():
            return x * w + 1
    x = _rand((4096,), 1, cuda)
    for _ in range(3):
        close(f(x), to_numpy(x) + 1, rtol=1e-6)
    with ag.no_grad():
        w.mul_(3)                                    # in place: the graph reads it where it is
    close(f(x), to_numpy(x) * 3 + 1, rtol=1e-6)
    assert f.cuda_stats()["graph_captures"] == 1
    w.data = ag.tensor(np.full(4096, 5, np.float32), device=cuda).data     # rebound: another array
    close(f(x), to_numpy(x) * 5 + 1, rtol=1e-6)
    close(f(x), to_numpy(x) * 5 + 1, rtol=1e-6)
    assert f.cuda_stats()["graph_captures"] == 2


# -- vectorised kernels (backends/fuse_cuda_vec.py) ------------------------------------------------------
_HOST_SHIM = """
#include <cmath>
using namespace std;
struct float4 { float x, y, z, w; };
struct double2 { double x, y; };
struct dim3_ { long long x; };
static dim3_ blockIdx, blockDim, threadIdx;
#define __global__
"""


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_vectorised_kernel_source_computes_every_element_compiled_on_the_host(tmp_path, dtype):
    """The generated CUDA C, compiled as C++ with a shim for the CUDA names and launched by a loop over
    blocks and threads: every element (vector body and tail) equals NumPy's."""
    import ctypes
    import shutil
    import subprocess
    from autograd_gpu.backends.fuse_cuda_vec import source, _BLOCK, _C_TYPES
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler on this machine")
    t, _, width = _C_TYPES[dtype]
    params = [(dtype, "a0"), (dtype, "k1"), (dtype, "k2"), (dtype, "a3")]
    code = "((a0 * k1) + (exp((-a3)) * k2))"
    src = _HOST_SHIM + source("kern", params, ("v", "p", "s", "v"), dtype, code) + f"""
extern "C" void launch(long long grid, const {t}* a0, const {t}* k1, {t} k2, const {t}* a3, {t}* y, long long n) {{
    blockDim.x = {_BLOCK};
    for (blockIdx.x = 0; blockIdx.x < grid; ++blockIdx.x)
        for (threadIdx.x = 0; threadIdx.x < {_BLOCK}; ++threadIdx.x) kern(a0, k1, k2, a3, y, n);
}}
"""
    (tmp_path / "k.cpp").write_text(src)
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", "-o", str(tmp_path / "k.so"), str(tmp_path / "k.cpp")],
                   check=True, capture_output=True)
    lib = ctypes.CDLL(str(tmp_path / "k.so"))
    ct = ctypes.c_float if dtype == "float32" else ctypes.c_double
    rng = np.random.default_rng(0)
    for n in (1, 3, width, width + 1, 1023, 1026, 3 * _BLOCK * width + 1):
        a0, a3 = rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype)
        k1 = np.array(1.5, dtype)
        y = np.full(n, np.nan, dtype)
        grid = -(-(-(-n // width)) // _BLOCK)
        ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)      # noqa: E731
        lib.launch(ctypes.c_longlong(grid), ptr(a0), ptr(k1), ct(0.25), ptr(a3), ptr(y), ctypes.c_longlong(n))
        want = a0.astype(np.float64) * 1.5 + np.exp(-a3.astype(np.float64)) * 0.25
        tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(y, want, **tol)


def test_a_vectorised_kernel_falls_back_to_the_elementwise_kernel_where_it_cannot_run(cuda):
    """Arguments that are not contiguous, aligned, one shape and the kernel's dtype go to the
    ElementwiseKernel; a RawKernel that does not build (the stand-in has none) does too."""
    from autograd_gpu.backends import cupy_backend, get_backend
    from autograd_gpu.backends.fuse_cuda_vec import VecKernel, _MIN_SIZE
    xp = get_backend(cuda).xp
    calls = []
    ew = xp.ElementwiseKernel("float32 a0, float32 k1", "float32 y", "y = (a0 * k1)", "t_ew")

    def counting(*args):
        calls.append(len(args))
        return ew(*args)
    vk = VecKernel(xp, counting, ["float32 a0", "float32 k1"], "float32", "(a0 * k1)", simulated=False)
    vk.enabled = True                               # as on a GPU
    x = xp.asarray(np.arange(_MIN_SIZE, dtype=np.float32))
    for args in [(x, np.float32(2)), (x[::2], np.float32(2)), (x[1:], np.float32(2)), (x[:8], np.float32(2))]:
        got = vk(*args)
        np.testing.assert_allclose(xp.asnumpy(got), xp.asnumpy(args[0]) * 2)
    # a strided, a misaligned and a small one always; the contiguous one too where no RawKernel builds
    built = not cupy_backend.simulated()
    assert len(calls) == (3 if built else 4), calls
    assert [k is not None for k in vk.kernels.values()] == [built]


def test_on_a_gpu_the_vectorised_kernel_builds_and_equals_the_elementwise_kernel(cuda):
    from autograd_gpu.backends import cupy_backend, get_backend
    from autograd_gpu.backends.fuse_cuda_vec import VecKernel, _MIN_SIZE
    if cupy_backend.simulated():
        pytest.skip("needs a real GPU: the stand-in simulates ElementwiseKernel, not RawKernel (the kernel's "
                    "source is checked on the host by the test above)")
    xp = get_backend(cuda).xp
    for dt in ("float32", "float64"):
        params = [f"{dt} a0", f"{dt} k1", f"{dt} k2", f"{dt} a3"]
        code = "((a0 * k1) + (exp((-a3)) * k2))"
        ew = xp.ElementwiseKernel(", ".join(params), f"{dt} y", f"y = {code}", f"t_vec_{dt}")
        vk = VecKernel(xp, ew, params, dt, code, simulated=False)
        for n in (_MIN_SIZE, _MIN_SIZE + 3, 1 << 22):
            a0, a3 = xp.random.standard_normal(n).astype(dt), xp.random.standard_normal(n).astype(dt)
            k1 = xp.asarray(1.5, dtype=dt)
            got = vk(a0, k1, np.dtype(dt).type(0.25), a3)
            want = ew(a0, k1, np.dtype(dt).type(0.25), a3)
            # not bit-equal: NVRTC may contract a different product into an FMA in each kernel, which
            # moves a result by an ulp of its larger term (an rtol alone fails where the terms cancel)
            tol = dict(rtol=1e-6, atol=1e-5) if dt == "float32" else dict(rtol=1e-13, atol=1e-13)
            np.testing.assert_allclose(xp.asnumpy(got), xp.asnumpy(want), **tol)
        assert any(k is not None for k in vk.kernels.values()), vk.kernels


# -- review of the graph's uncopied results, released gradients and folded constants ---------------------
def test_an_old_gradient_written_in_place_then_replaced_does_not_overwrite_the_new_one(cuda):
    # the old gradient is the graph's last handed-out result and an input the program writes: the launch
    # copies it into a captured buffer and back after, so it may not be the buffer the new one lands in
    n = 1 << 15
    x = _rand((n,), 0, cuda, requires_grad=True)
    (x * x).sum().backward()

    @ag.compile
    def f():
        with ag.no_grad():
            x.grad.mul_(0.5)                         # the old gradient written in place ...
        x.grad = None                                # ... then replaced
        (x * x).sum().backward()
    for _ in range(6):
        f()
        close(x.grad, 2 * to_numpy(x), rtol=1e-6)
    assert f.cuda_stats()["graph_launches"] >= 3


def test_a_failed_guard_retraces_with_the_gradient_the_call_was_going_to_replace(cuda):
    # the program reads values on the host (no graph): a failed guard traces again, and that trace must
    # see the old gradient, which a graph launch would have let go of
    x = ag.tensor(np.linspace(-1, 1, 64).astype(np.float32), device=cuda, requires_grad=True)
    (x * x).sum().backward()

    @ag.compile
    def f(c):
        with ag.no_grad():
            old = x.grad * 1
            big = bool((c > 0).item())               # a guard
        x.grad = None
        (x * x * (2 if big else 1)).sum().backward()
        return old
    for c, scale in [(1.0, 2), (1.0, 2), (1.0, 2), (-1.0, 1), (-1.0, 1), (1.0, 2)]:
        g0 = to_numpy(x.grad)
        close(f(ag.tensor(np.float32(c), device=cuda)), g0, rtol=1e-6)
        close(x.grad, 2 * scale * to_numpy(x), rtol=1e-6)
    assert f.stats["guard_failures"] >= 1


def test_a_result_kept_through_a_view_cupy_makes_is_seen_as_held():
    # CuPy's ndarray._view (reshape, transpose, ...) gives the view its array's own MemoryPointer object and
    # the array's base (or the array) as its base, so a view of a result that is itself a view adds no
    # reference to the result nor to its allocation (data.mem): only to its data and its base
    from autograd_gpu.backends.fuse_cuda import _refs

    class Mem:
        pass

    class Ptr:
        def __init__(self, mem):
            self.mem = mem

    class CupyLike:
        def __init__(self, data, base=None):
            self.data, self.base = data, base

        def view(self):                              # as cupy/_core/core.pyx ndarray._view
            return CupyLike(self.data, self.base if self.base is not None else self)
    buffer = CupyLike(Ptr(Mem()))
    for result in (buffer.view(), CupyLike(Ptr(Mem()))):    # a view (a reshape at the end), an owner
        before = _refs(result)
        kept = result.view()
        assert _refs(result) != before
        del kept
        assert _refs(result) == before


def test_a_folded_constant_returned_and_read_by_a_later_step_is_not_changed_through_the_traced_result(cuda):
    x = _rand((1 << 15,), 1, cuda)

    @ag.compile
    def f(x):
        with ag.no_grad():
            c = ag.ones(x.shape[0], device=cuda) * 3    # folded at trace time
            return c, x * c
    for _ in range(4):
        c, y = f(x)
        close(c, np.full(x.shape, 3, np.float32), rtol=0)
        close(y, to_numpy(x) * 3, rtol=1e-6)
        with ag.no_grad():
            c.mul_(7)                                # the caller writes the result it was given
    assert f.stats["replays"] >= 3


def test_a_graph_launches_on_the_caller_s_stream_ordered_with_its_other_work(cuda, monkeypatch):
    # captured on a private stream, but launched there the graph would not be ordered after another
    # graph's launch that made its inputs, nor before a caller's work on its own stream that reads its
    # results (a private blocking stream orders with the legacy null stream only); the stand-in runs
    # all work at once, so the launch's stream is what it can check
    from autograd_gpu.backends import cupy_backend, get_backend
    if not cupy_backend.simulated():
        pytest.skip("records the stand-in's launches")
    from autograd_gpu.testing.cupy_standin._kernels import Graph
    xp = get_backend(cuda).xp
    launched, real = [], Graph.launch

    def launch(self, stream=None):
        launched.append(stream)
        return real(self, stream)
    monkeypatch.setattr(Graph, "launch", launch)

    @ag.compile
    def f(x):
        with ag.no_grad():
            return x * 2 + 1
    x = _rand((1 << 15,), 0, cuda)
    kept = []
    for i, stream in enumerate([xp.cuda.Stream.null] * 3 + [xp.cuda.Stream(), xp.cuda.Stream.null,
                                                             xp.cuda.Stream()]):
        with stream:
            kept.append(f(x))                        # kept: captured again on the fifth call
        if launched:
            assert launched[-1] is stream, i
    assert len(launched) == 4 and f.cuda_stats()["graph_captures"] == 2


def test_a_capture_that_fails_when_taken_again_runs_the_call_without_a_graph(cuda, monkeypatch):
    # captured again because the last gradient is kept; that capture fails (out of memory, say): the call
    # runs plainly, with the gradient it replaces let go already, and so do the calls after it
    n = 1 << 15
    x = _rand((n,), 0, cuda, requires_grad=True)

    @ag.compile
    def f():
        x.grad = None
        (x * x).sum().backward()
    for _ in range(4):
        f()
    runner = f.programs()[-1].graph_runner
    assert runner.graph is not None

    def fail(arrays):
        raise MemoryError("out of memory allocating the graph's buffers")
    monkeypatch.setattr(runner, "_capture", fail)
    kept, want_kept = x.grad, 2 * to_numpy(x)
    for _ in range(3):
        with ag.no_grad():
            x.mul_(0.5)
        f()
        close(x.grad, 2 * to_numpy(x), rtol=1e-6)
    close(kept, want_kept, rtol=1e-6)
    assert runner.graph is None and "MemoryError" in runner.no_graph


def test_a_compiled_transformer_step_is_captured_and_equals_eager(cuda):
    """Attention's softmax backward and layer norm's variance take row dots (backend.row_dot): on CUDA a
    product and a sum, since CuPy's einsum goes to cuBLAS, which it refuses under capture; the step
    with them is captured as one graph and equals the eager step."""
    layers = []
    for _ in range(2):
        ag.manual_seed(3)
        layers.append(nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True, norm_first=True).to(cuda))
    opts = [optim.SGD(m.parameters(), lr=0.05) for m in layers]

    def step(m, o, x):
        o.zero_grad()
        loss = (m(x, is_causal=True, src_mask=nn.Transformer.generate_square_subsequent_mask(6, device=cuda)) ** 2).mean()
        loss.backward()
        o.step()
        return loss

    @ag.compile
    def cstep(x):
        return step(layers[1], opts[1], x)
    for i in range(6):
        x = _rand((3, 6, 16), i, cuda)
        close(cstep(x), step(layers[0], opts[0], x), rtol=1e-5, atol=1e-6)
    for p0, p1 in zip(layers[0].parameters(), layers[1].parameters()):
        close(p1, p0, rtol=1e-4, atol=1e-6)
    st = cstep.cuda_stats()
    assert st["graph_captures"] == 1 and st["graph_launches"] >= 3, (st, [p.graph_runner.no_graph for p in
                                                                          cstep.programs()])


def test_a_program_whose_only_products_are_packed_ones_gets_the_graph_matmul_ready(cuda):
    """backend.matmul_packed (the LSTM's recurrent product: a plain matmul on CUDA) is a product like
    matmul: the graph runner makes cuBLAS's handle and workspace before a capture for it too (made during
    one, the workspace would come from the graph's private pool)."""
    from autograd_gpu import Function

    class PackedProduct(Function):
        @staticmethod
        def forward(ctx, x, w):
            b = ctx.device.backend
            return ctx.wrap(b.matmul_packed(x.data, b.pack_matmul(w.data, x.shape[0]), *w.shape))

    @ag.compile
    def f(x, w):
        with ag.no_grad():
            return PackedProduct.apply(x, w)
    x, w = _rand((8, 12), 0, cuda), _rand((12, 5), 1, cuda)
    for _ in range(4):
        close(f(x, w), to_numpy(x) @ to_numpy(w), rtol=1e-5, atol=1e-5)
    assert f.cuda_stats()["graph_captures"] == 1
    assert f.programs()[-1].graph_runner.has_matmul
