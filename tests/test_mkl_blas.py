"""The CPU backend's MKL products (backends/mkl_blas.py): every layout it takes equals NumPy's matmul, the
cases it leaves to NumPy are left, and the switches behave. The layout tests skip where MKL is not
installed (`pip install mkl`; CI installs it with the test extra on x86-64 Linux and Windows)."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

from autograd_gpu.backends import mkl_blas, get_backend
from autograd_gpu.testing.helpers import train_step

needs_mkl = pytest.mark.skipif(not mkl_blas.available(), reason="MKL is not installed (pip install mkl)")
DTYPES = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def every_size_to_mkl(request, monkeypatch):
    """The layout tests use small arrays; MKL takes products of every size in them, except where a test
    is about the size cutoff itself."""
    if "real_cutoff" not in request.keywords:
        monkeypatch.setattr(mkl_blas, "MIN_WORK", 1)


def _close(got, a, b, dtype):
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    tol = 1e-4 if dtype == np.float32 else 1e-12
    assert got.shape == want.shape and got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(a.shape[-1]))


def _rand(shape, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _view(x, layout):
    """x's values laid out as: "c" contiguous, "t" a transposed view, "ld" rows padded (leading dimension
    larger than the row), "neg" reversed rows, "step" every other column of a wider array."""
    if layout == "c":
        return x
    if layout == "t":
        return np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    if layout == "ld":
        wide = np.zeros(x.shape[:-1] + (x.shape[-1] + 7,), x.dtype)
        wide[..., :x.shape[-1]] = x
        return wide[..., :x.shape[-1]]
    if layout == "neg":
        return np.ascontiguousarray(x[..., ::-1, :])[..., ::-1, :]
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    wide[..., ::2] = x
    return wide[..., ::2]


@needs_mkl
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("la", ["c", "t", "ld", "neg", "step"])
@pytest.mark.parametrize("lb", ["c", "t", "ld"])
@pytest.mark.parametrize("mkn", [(37, 45, 29), (1, 300, 200), (300, 1, 200), (300, 200, 1), (128, 784, 64)])
def test_a_product_of_two_matrices_in_any_layout_equals_numpys(dtype, la, lb, mkn):
    m, k, n = mkn
    a, b = _rand((m, k), dtype, 1), _rand((k, n), dtype, 2)
    va, vb = _view(a, la), _view(b, lb)
    got = mkl_blas.matmul(va, vb)
    assert got is not None                        # taken here, not handed back to NumPy
    _close(got, a, b, dtype)
    assert got.flags.c_contiguous


@needs_mkl
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shapes", [
    ((3, 4, 40, 30), (3, 4, 30, 20)),      # one batch shape
    ((5, 40, 30), (30, 20)),               # stacked rows times one matrix: folded into one product
    ((40, 30), (5, 30, 20)),               # one matrix times a stack: the batch stride of a is 0
    ((2, 1, 40, 30), (1, 3, 30, 20)),      # broadcast both ways: a copy, then one batched call
    ((5, 40, 300), (5, 300, 1)),           # matrix times column
    ((300,), (5, 300, 20)),                # a vector on the left of a stack
    ((5, 40, 300), (300,)),                # a stack times a vector
    ((40, 300), (300,)),
    ((300,), (300, 40)),
])
def test_batched_broadcast_and_vector_products_equal_numpys(dtype, shapes):
    a, b = _rand(shapes[0], dtype, 3), _rand(shapes[1], dtype, 4)
    got = mkl_blas.matmul(a, b)
    assert got is not None
    _close(got, a, b, dtype)
    out = np.full(np.matmul(a, b).shape, np.nan, dtype)
    assert mkl_blas.matmul(a, b, out) is out
    _close(out, a, b, dtype)


@needs_mkl
@pytest.mark.parametrize("dtype", DTYPES)
def test_stacks_laid_out_unevenly_are_copied_and_still_right(dtype):
    a = _rand((4, 40, 3, 30), dtype, 5).transpose(0, 2, 1, 3)        # (4, 3, 40, 30), batch axes not one run
    b = _view(_rand((4, 3, 30, 20), dtype, 6), "t")
    _close(mkl_blas.matmul(a, b), a, b, dtype)
    ones = np.broadcast_to(np.ones((), dtype), (64, 64))              # the gradient of a sum: all strides 0
    x = _rand((64, 64), dtype, 7)
    _close(mkl_blas.matmul(ones, x), np.ones((64, 64), dtype), x, dtype)


@needs_mkl
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["c", "t", "ld"])
@pytest.mark.parametrize("batch", [(), (3,), (2, 3)])
def test_out_may_be_any_blas_layout(dtype, layout, batch):
    """out= a transposed or padded view (attention writes its products into views laid out for the
    permute that follows): written in place, the same values."""
    a, b = _rand(batch + (40, 30), dtype, 1), _rand(batch + (30, 50), dtype, 2)
    out = _view(np.zeros(batch + (40, 50), dtype), layout)
    assert mkl_blas.matmul(a, b, out) is out
    _close(out, a, b, dtype)


@needs_mkl
@pytest.mark.parametrize("dtype", DTYPES)
def test_batches_that_are_not_one_strided_run_go_by_pointers(dtype):
    """(N, L, H, E) arrays seen as (N, H, L, E), attention's layout: the two batch axes are not one run,
    so each matrix's address is passed (cblas_?gemm_batch); operands and out= alike, nothing copied."""
    q = _rand((3, 40, 4, 16), dtype, 1).transpose(0, 2, 1, 3)
    k = _rand((3, 50, 4, 16), dtype, 2).transpose(0, 2, 3, 1)          # (3, 4, 16, 50)
    out = np.zeros((3, 40, 4, 50), dtype).transpose(0, 2, 1, 3)
    assert mkl_blas.matmul(q, k, out) is out
    _close(out, q, k, dtype)
    _close(mkl_blas.matmul(q, k), q, k, dtype)


@needs_mkl
@pytest.mark.parametrize("dtype", DTYPES)
def test_out_whose_matrices_interleave_is_written_right(dtype):
    """out= matrices closer together than one matrix's extent ((L, H, E) seen as (H, L, E): batch stride E,
    leading dimension H E): MKL's strided batch call rejects such a stride (an error printed, nothing
    written, garbage returned), so these go by pointers."""
    a, b = _rand((4, 40, 30), dtype, 1), _rand((4, 30, 16), dtype, 2)
    for out in (np.full((40, 4, 16), np.nan, dtype).transpose(1, 0, 2),
                np.full((16, 4, 40), np.nan, dtype).transpose(1, 2, 0)):     # the same, stored transposed
        assert mkl_blas.matmul(a, b, out) is out
        _close(out, a, b, dtype)
    s, v = _rand((3, 40, 30), dtype, 3), _rand(30, dtype, 4)
    out = np.full((40, 3), np.nan, dtype).T                                   # a stack times a vector
    assert mkl_blas.matmul(s, v, out) is out
    np.testing.assert_allclose(out, np.matmul(s.astype(np.float64), v), rtol=1e-4, atol=1e-3)


@needs_mkl
@pytest.mark.parametrize("batch", [(1,), ()])
def test_attention_of_one_sequence_equals_numpy(batch):
    """Attention's heads are strided views of one (.., L, H*E) projection, and its output is laid out as
    (.., L, H, E): with one sequence (or none batched) the heads' output matrices are E apart, closer than
    one matrix, and MKL's strided call wrote nothing there (garbage out, on real sizes)."""
    import autograd_gpu as ag
    import autograd_gpu.nn.functional as F
    L, H, E = 64, 4, 32
    proj = [_rand(batch + (L, H * E), np.float32, i) for i in range(3)]
    heads = [np.swapaxes(p.reshape(batch + (L, H, E)), -2, -3) for p in proj]          # (.., H, L, E)
    got = F.scaled_dot_product_attention(*(ag.tensor(h) for h in heads)).numpy()
    q, k, v = (h.astype(np.float64) for h in heads)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(E)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_mkl
@pytest.mark.parametrize("kw", [dict(lr=0.1), dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
                                dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)],
                         ids=["plain", "nesterov_wd", "dampening_maximize"])
def test_a_compiled_sgd_step_through_mkl_equals_eager_for_20_steps(kw, monkeypatch):
    """ag.compile's CPU programs call float_matmul (planned out= buffers) and SGD's backend.axpy; with the
    size cutoffs lowered every product and update of this small MLP goes to MKL, compiled and eager."""
    import autograd_gpu as ag
    from autograd_gpu import nn, optim
    from autograd_gpu.backends import numpy_backend
    monkeypatch.setattr(mkl_blas, "AXPY_MIN", 1)
    taken = {"matmul": 0, "axpy": 0}
    mm, ax = numpy_backend._mkl, mkl_blas.axpy

    def counted_mm(a, b, out=None):
        y = mm(a, b, out)
        taken["matmul"] += y is not None
        return y

    def counted_ax(y, alpha, x):
        done = ax(y, alpha, x)
        taken["axpy"] += done
        return done
    monkeypatch.setattr(numpy_backend, "_mkl", counted_mm)
    monkeypatch.setattr(mkl_blas, "axpy", counted_ax)

    def make():
        ag.manual_seed(0)
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 5))
    m1, m2 = make(), make()
    o1, o2 = optim.SGD(m1.parameters(), **kw), optim.SGD(m2.parameters(), **kw)

    cstep = ag.compile(lambda x, y: train_step(m2, o2, x, y))
    rng = np.random.default_rng(0)
    for _ in range(20):
        x, y = ag.tensor(_rand((16, 32), np.float32, int(rng.integers(1 << 30)))), ag.tensor(rng.integers(0, 5, 16))
        np.testing.assert_allclose(cstep(x, y).numpy(), train_step(m1, o1, x, y).numpy(), rtol=1e-5, atol=1e-6)
    for p1, p2 in zip(m1.parameters(), m2.parameters()):
        np.testing.assert_allclose(p2.numpy(), p1.numpy(), rtol=1e-4, atol=1e-6)
    assert cstep.stats["replays"] >= 17
    assert taken["matmul"] >= 20 * 2 * 5 and taken["axpy"] == 20 * 2 * 4     # both ways, every step


@needs_mkl
def test_a_zero_dimensional_out_for_a_vector_product_is_left_to_numpy():
    """NumPy raises for a 0-d out= of a vector-matrix product; MKL's path returned it unwritten."""
    v, m = _rand(30, np.float32, 1), _rand((30, 40), np.float32, 2)
    for a, b in ((v, m), (m.T, v)):
        out = np.full((), np.nan, np.float32)
        assert mkl_blas.matmul(a, b, out) is None
        with pytest.raises(ValueError):
            get_backend("cpu").matmul(a, b, out)


@needs_mkl
def test_every_stride_handed_to_mkl_fits_a_c_int(monkeypatch):
    """ctypes wraps an int past 2^31 - 1 silently: a fresh result's matrices further apart than that (an
    outer product of 46341 x 46341 floats per matrix) went to the strided call with a wrapped stridec,
    writing the second matrix elsewhere. Here the limit is lowered to see it with small arrays."""
    monkeypatch.setattr(mkl_blas, "_INT_MAX", 1000)
    calls = mkl_blas._fns[np.dtype(np.float32)]
    seen = []

    def checked(*args):
        seen.extend(args[16:])                         # stridec, the batch's size
        return calls.batched(*args)
    monkeypatch.setitem(mkl_blas._fns, np.dtype(np.float32), calls._replace(batched=checked))
    a, b = _rand((2, 40, 8), np.float32, 1), _rand((2, 8, 40), np.float32, 2)   # 40 x 40 = 1600 apart
    got = mkl_blas.matmul(a, b)
    if got is not None:
        _close(got, a, b, np.float32)
    assert all(s <= 1000 for s in seen), seen
    seen.clear()
    a, b = _rand((1001, 2, 3), np.float32, 3), _rand((1001, 3, 2), np.float32, 4)   # 1001 matrices
    got = mkl_blas.matmul(a, b)
    if got is not None:
        _close(got, a, b, np.float32)
    assert all(s <= 1000 for s in seen), seen


@needs_mkl
def test_cases_left_to_numpy_return_none():
    f, d = _rand((40, 30), np.float32), _rand((30, 20), np.float64)
    assert mkl_blas.matmul(f, d) is None                                  # mixed dtypes: NumPy promotes
    assert mkl_blas.matmul(f.astype(np.int64), f.T.astype(np.int64)) is None
    assert mkl_blas.matmul(f.astype(np.complex64), f.T.astype(np.complex64)) is None
    assert mkl_blas.matmul(f, f) is None                                  # (40, 30) @ (40, 30): NumPy's error
    assert mkl_blas.matmul(f[0], f[0]) is None                            # a dot product of two vectors
    x = _rand((64, 64), np.float32)
    assert mkl_blas.matmul(x, x, x) is None                               # out= overlapping an operand


@needs_mkl
@pytest.mark.real_cutoff
def test_products_below_openblass_threading_cutoff_stay_with_numpy():
    small, large = _rand((48, 48), np.float32), _rand((128, 128), np.float32)
    assert mkl_blas.matmul(small, small) is None                           # 48^3: one OpenBLAS thread, ~3 us
    stack, few = _rand((mkl_blas.MIN_STACK, 48, 48), np.float32), _rand((8, 48, 48), np.float32)
    assert mkl_blas.matmul(few, small) is not None         # rows of a stack times one matrix: one product
    assert mkl_blas.matmul(stack, stack) is not None       # a stack of small products: MKL's batch call
    assert mkl_blas.matmul(few, few) is None               # ... unless it is short
    assert mkl_blas.matmul(stack[:1], stack) is None       # ... or one operand is broadcast over it
    assert mkl_blas.matmul(large, large) is not None


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_backend_matmul_equals_numpy_everywhere(dtype):
    """Whatever takes each case (MKL or NumPy), the CPU backend's matmul is NumPy's matmul."""
    mm = get_backend("cpu").matmul
    for i, (sa, sb) in enumerate([((3,), (3,)), ((2, 3), (3,)), ((64, 64), (64, 64)), ((2, 5, 64, 32), (32, 16)),
                                  ((5, 1, 64, 32), (1, 4, 32, 16)), ((0, 64), (64, 64)), ((64, 0), (0, 64))]):
        a, b = _rand(sa, dtype, i), _rand(sb, dtype, i + 10)
        got = mm(a, b)
        assert np.asarray(got).shape == np.matmul(a, b).shape
        np.testing.assert_allclose(got, np.matmul(a, b), rtol=1e-5 if dtype == np.float32 else 1e-12,
                                   atol=1e-4 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [10, 1 << 15])
def test_axpy_adds_in_place(dtype, n):
    y, x = _rand(n, dtype, 1), _rand(n, dtype, 2)
    want = y + dtype(-0.01) * x
    got = get_backend("cpu").axpy(y, -0.01, x)
    assert got is y
    # MKL rounds y + alpha x once (a fused multiply-add), NumPy twice: equal to the last bit of alpha x
    np.testing.assert_allclose(y, want, rtol=1e-6 if dtype == np.float32 else 1e-14,
                               atol=4 * np.finfo(dtype).eps * 0.01 * np.abs(x).max())
    y2 = _rand(n, dtype, 1)
    get_backend("cpu").axpy(y2, np.asarray(-0.01, dtype), x)             # a 0-d array alpha (ag.compile's)
    np.testing.assert_array_equal(y2, y)


@needs_mkl
def test_axpy_leaves_what_it_does_not_take_untouched():
    y, x = _rand(1 << 15, np.float32, 1), _rand(1 << 15, np.float32, 2)
    before = y.copy()
    assert not mkl_blas.axpy(y, 2.0, x.astype(np.float64))                # mixed dtypes
    assert not mkl_blas.axpy(y[::2], 2.0, x[::2])                         # not contiguous
    assert not mkl_blas.axpy(y, 2.0, y)                                   # shared memory
    assert not mkl_blas.axpy(y[:10], 2.0, x[:10])                         # small
    np.testing.assert_array_equal(y, before)
    assert mkl_blas.axpy(y, 2.0, x)


@needs_mkl
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork: Linux")
def test_a_forked_child_multiplies_after_its_parent_did():
    """MKL's GNU OpenMP pool does not survive fork: a child's first product waited forever on the parent's
    threads. A forked child leaves its products to NumPy."""
    import multiprocessing
    a = _rand((256, 256), np.float32)
    want = mkl_blas.matmul(a, a)                       # the parent's pool is started
    assert want is not None

    def child():
        got = get_backend("cpu").matmul(a, a)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        y = np.zeros(1 << 16, np.float32)
        get_backend("cpu").axpy(y, 2.0, np.ones_like(y))
        assert (y == 2).all()
    p = multiprocessing.get_context("fork").Process(target=child)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # (Python 3.12: fork of a process with threads)
        p.start()
    p.join(30)
    if p.exitcode is None:
        p.kill()
        p.join()
        pytest.fail("the forked child's product hung")
    assert p.exitcode == 0


def _import_with(env):
    env = {**os.environ, **env}
    code = "from autograd_gpu.backends import mkl_blas as m; print(m.available())"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


@needs_mkl
def test_an_mkl_already_running_64_bit_integers_is_left_alone():
    """Another user of the same libmkl_rt in the process (MKL_INTERFACE_LAYER=ILP64, a library built for
    it) fixed MKL's integers at 64 bits before our import: MKL_Set_Interface_Layer(0) cannot change them,
    and our 32-bit arguments crashed the first product (a segfault). NumPy keeps the products then."""
    code = f"""if True:
        import ctypes, numpy as np
        lib = ctypes.CDLL({mkl_blas.library_path!r})
        lib.MKL_Set_Interface_Layer.argtypes = [ctypes.c_int]
        lib.MKL_Set_Interface_Layer(1)
        lib.cblas_ddot.restype = ctypes.c_double
        x = np.ones(4)
        lib.cblas_ddot(ctypes.c_longlong(4), ctypes.c_void_p(x.ctypes.data), ctypes.c_longlong(1),
                       ctypes.c_void_p(x.ctypes.data), ctypes.c_longlong(1))      # ILP64 now fixed
        from autograd_gpu.backends import mkl_blas, get_backend
        a = np.random.default_rng(0).standard_normal((300, 300)).astype(np.float32)
        assert np.allclose(get_backend("cpu").matmul(a, a), a @ a, rtol=1e-4, atol=1e-4)
        print(mkl_blas.available())"""
    env = {k: v for k, v in os.environ.items() if k != "AUTOGRAD_GPU_CPU_BLAS"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", (r.returncode, r.stdout, r.stderr)


def test_the_numpy_switch_turns_mkl_off():
    r = _import_with({"AUTOGRAD_GPU_CPU_BLAS": "numpy"})
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def test_asking_for_mkl_where_there_is_none_is_a_clear_error():
    r = _import_with({"AUTOGRAD_GPU_CPU_BLAS": "mkl", "AUTOGRAD_GPU_MKL": "/nonexistent/libmkl_rt.so"})
    assert r.returncode != 0
    assert "AUTOGRAD_GPU_CPU_BLAS=mkl" in r.stderr and "pip install mkl" in r.stderr
    r = _import_with({"AUTOGRAD_GPU_CPU_BLAS": "openblas"})
    assert r.returncode != 0 and "'auto', 'mkl' or 'numpy'" in r.stderr and "'openblas'" in r.stderr


@needs_mkl
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("la", ["c", "t", "ld"])
def test_a_packed_matrix_multiplies_like_the_plain_one(dtype, la):
    b = _view(_rand((48, 80), dtype, 1), "t")                   # packed from any layout
    packed = mkl_blas.pack(b, 16)
    assert packed is not None and packed.ndim == 1
    for seed in range(3):                                       # the same packed matrix, again and again
        a = _view(_rand((16, 48), dtype, seed + 2), la)
        _close(mkl_blas.matmul_packed(a, packed, 48, 80), a, b, dtype)
        out = np.full((16, 80), np.nan, dtype)
        assert mkl_blas.matmul_packed(a, packed, 48, 80, out) is out
        _close(out, a, b, dtype)
    with pytest.raises(ValueError, match=r"expected a \(rows, 48\)"):
        mkl_blas.matmul_packed(_rand((16, 40), dtype), packed, 48, 80)
    with pytest.raises(ValueError, match="out must be a writeable C-contiguous"):
        mkl_blas.matmul_packed(a, packed, 48, 80, np.empty((80, 16), dtype).T)


def test_the_backends_packed_product_is_a_product_everywhere():
    """Where MKL does not pack (float16, a small product, no MKL) pack_matmul hands back b itself."""
    cpu = get_backend("cpu")
    for dtype in (np.float16, np.float32):
        b, a = _rand((8, 12), dtype, 1), _rand((4, 8), dtype, 2)
        p = cpu.pack_matmul(b, 4)
        np.testing.assert_allclose(cpu.matmul_packed(a, p, 8, 12).astype(np.float32),
                                   np.matmul(a.astype(np.float32), b.astype(np.float32)), rtol=2e-3, atol=2e-3)


@needs_mkl
def test_an_lstm_with_packed_recurrent_products_equals_one_without(monkeypatch):
    """The LSTM's fast path packs its recurrent weight (every size here: MIN_WORK is 1) and gives the
    outputs and gradients of NumPy's products."""
    import autograd_gpu as ag
    from autograd_gpu import nn
    from autograd_gpu.backends import numpy_backend

    def run():
        ag.manual_seed(0)
        lstm = nn.LSTM(6, 8, num_layers=2)
        x = ag.tensor(_rand((5, 3, 6), np.float32, 3), requires_grad=True)
        out, (h, c) = lstm(x)
        (out.sum() + h.sum() + c.sum()).backward()
        return [out.numpy(), h.numpy(), c.numpy(), x.grad.numpy()] + [p.grad.numpy() for p in lstm.parameters()]

    calls = []
    real = mkl_blas.matmul_packed
    monkeypatch.setattr(mkl_blas, "matmul_packed", lambda *a, **k: calls.append(1) or real(*a, **k))
    packed = run()
    assert calls                                            # the packed path ran
    monkeypatch.setattr(numpy_backend, "_mkl", None)        # NumPy's products, nothing packed
    for got, want in zip(packed, run()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@needs_mkl
@pytest.mark.parametrize("w_dtype,x_dtype", [("float64", "float32"), ("float32", "float64"), ("float32", "float16")])
def test_an_lstm_whose_weights_and_input_differ_in_dtype_computes_as_without_packing(w_dtype, x_dtype, monkeypatch):
    """The recurrent product h @ w_hh^T promotes (h float32, w_hh float64: a float64 product) as it does
    without MKL; a matrix packed in w_hh's dtype cannot take h of another, so it is not packed then (it
    raised matmul_packed's ValueError, only at sizes MKL packs)."""
    import autograd_gpu as ag
    from autograd_gpu import nn
    from autograd_gpu.backends import numpy_backend

    def run():
        ag.manual_seed(0)
        lstm = nn.LSTM(6, 8, num_layers=2, dtype=w_dtype)
        x = ag.tensor(_rand((5, 3, 6), np.float64, 3).astype(x_dtype), requires_grad=True)
        out, (h, c) = lstm(x)
        (out.sum() + h.sum() + c.sum()).backward()
        return [out.numpy(), h.numpy(), c.numpy(), x.grad.numpy()] + [p.grad.numpy() for p in lstm.parameters()]

    packed = run()
    monkeypatch.setattr(numpy_backend, "_mkl", None)        # NumPy's products, nothing packed
    for got, want in zip(packed, run()):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@needs_mkl
@pytest.mark.parametrize("earlier,layer", [(None, r"(GNU|Intel) OpenMP"), (1, "sequential")])
def test_describe_names_the_version_and_the_threading_layer_in_use(earlier, layer):
    """describe() (benchmark reports) names the layer MKL runs, also one another user of libmkl_rt in the
    process set before our import (which wins): it printed "MKL 2026.2 ()" for those."""
    import re
    set_first = "" if earlier is None else \
        f"import ctypes; ctypes.CDLL({mkl_blas.library_path!r}).MKL_Set_Threading_Layer({earlier}); "
    code = set_first + "from autograd_gpu.backends import mkl_blas; print(mkl_blas.describe())"
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOGRAD_GPU_CPU_BLAS", "MKL_THREADING_LAYER")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert re.fullmatch(rf"MKL \d[\w.]* \({layer}\)", r.stdout.strip()), r.stdout
