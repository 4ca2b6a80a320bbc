"""The CuPy stand-in refuses what CuPy refuses and counts what crosses between host and device.

These run in every CPU run (the stand-in is plain NumPy underneath); `AG_CUDA=standin` then runs the
whole `gpu` suite on it."""
import operator
import re

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.backends import cupy_backend
from autograd_gpu.testing import cupy_standin
from autograd_gpu.testing.cupy_standin import cupy as cp, cupyx, count_transfers, count_launches
from autograd_gpu.testing.cupy_standin._api import NAMESPACES


# -- what it refuses ------------------------------------------------------------------------------------
@pytest.mark.parametrize("convert", [np.asarray, np.array, lambda a: np.array(a, dtype=np.float32)])
def test_implicit_conversion_to_numpy_raises_type_error(convert):
    with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
        convert(cp.arange(3.0))


@pytest.mark.parametrize("call", [
    lambda a, h: cp.exp(h),
    lambda a, h: cp.add(a, h),
    lambda a, h: cp.concatenate([a, h]),
    lambda a, h: a + h,
    lambda a, h: h * a,
    lambda a, h: cp.where(a > 0, a, h),
    lambda a, h: a.dot(h),
    lambda a, h: cp.maximum(a, [1.0, 2.0, 3.0]),    # a list is no array to a CuPy ufunc either
])
def test_numpy_arrays_passed_to_cupy_functions_raise_type_error(call):
    a, h = cp.arange(3.0), np.arange(3.0)
    with pytest.raises(TypeError, match="Unsupported type"):
        call(a, h)


def test_python_and_numpy_scalars_are_accepted():
    a = cp.arange(3, dtype=np.float32)
    for s in (2, 2.5, np.float32(2), np.int64(2), np.float64(2.5)):
        for r in (a * s, s * a, cp.maximum(a, s), a + s):
            assert isinstance(r, cp.ndarray)
    assert cp.full((2,), np.float32(1.5)).get().tolist() == [1.5, 1.5]


def test_names_and_keywords_cupy_lacks_raise_even_where_numpy_has_them():
    a = cp.arange(3.0)
    assert hasattr(np, "fromregex") and hasattr(np, "vecdot")
    with pytest.raises(AttributeError, match="CuPy 14.2.0 has no such name"):
        cp.fromregex
    with pytest.raises(AttributeError):
        cp.vecdot
    with pytest.raises(AttributeError):
        a.resize                                    # numpy.ndarray has it, cupy.ndarray does not
    with pytest.raises(TypeError, match="unexpected keyword argument 'where'"):
        a.sum(where=a > 0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'where'"):
        cp.exp(a, where=a > 0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'initial'"):
        cp.max(a, initial=0.0)
    assert set(dir(cp)) == set(NAMESPACES["cupy"])


def test_the_stand_in_offers_no_array_attribute_cupy_lacks():
    public = {n for n in dir(cp.ndarray) if not n.startswith("_")}
    assert public <= set(NAMESPACES["cupy.ndarray"]), public - set(NAMESPACES["cupy.ndarray"])


def test_mixing_arrays_of_two_gpus_raises():
    a = cp.ones(3)
    with cp.cuda.Device(1):
        b = cp.ones(3)
        assert b.device.id == 1 and cp.cuda.Device().id == 1
    assert a.device.id == 0
    for mix in (lambda: a + b, lambda: cp.add(a, b), lambda: cp.stack([a, b]), lambda: b.sum(), lambda: a[b > 0]):
        with pytest.raises(ValueError, match=r"array device = 1 while current = 0"):
            mix()
    with cp.cuda.Device(1):
        assert (b * 2).device.id == 1
        c = cp.asarray(a)                           # a device-to-device copy is allowed
    assert c.device.id == 1
    with pytest.raises(Exception, match="invalid device ordinal"):
        cp.cuda.Device(2)


def test_is_not_a_numpy_array_and_keeps_cupy_semantics():
    a = cp.arange(4.0)
    assert not isinstance(a, np.ndarray) and isinstance(a, cp.ndarray)
    s = a.sum()
    assert isinstance(s, cp.ndarray) and s.shape == ()          # 0-d array, not a NumPy scalar
    assert isinstance(cp.sum(a), cp.ndarray) and isinstance(a[1], cp.ndarray)
    assert isinstance(np.sum(a), cp.ndarray)                    # __array_function__ dispatches to CuPy
    assert a[cp.asarray([5, -5])].get().tolist() == [1.0, 3.0]  # out-of-bounds indices wrap, as in CuPy
    assert cp.take_along_axis(a, cp.asarray([4]), 0).get().tolist() == [0.0]
    out = cp.zeros(4)
    assert cp.multiply(a, 2, out=out) is out
    with np.errstate(all="raise"):
        (a / 0).get()                               # CUDA kernels never warn or raise on 1/0


def test_no_index_protocol_and_no_in_place_matmul_as_on_cupy():
    # cupy.ndarray (CuPy 14.2.0) has neither __index__ nor __imatmul__, and item() takes no index
    i = cp.arange(3)[1]
    for use in (operator.index, range, lambda i: [0, 1, 2][i]):
        with pytest.raises(TypeError):
            use(i)
    assert int(i) == 1
    with pytest.raises(TypeError):
        cp.arange(3).item(0)
    a = b = cp.ones((2, 2))
    a @= cp.eye(2) * 2                              # rebinds a to a new array; b keeps its values
    assert b.get().tolist() == [[1.0, 1.0], [1.0, 1.0]] and a.get().tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_setitem_with_host_values_as_on_cupy():
    a = cp.zeros(4)
    # a basic index fills: a scalar only (CuPy's _scatter_op calls fill, which refuses non-scalar arrays)
    with pytest.raises(ValueError, match="non-scalar numpy.ndarray cannot be used for fill"):
        a[1:3] = np.ones(2)
    with pytest.raises(TypeError, match="Unsupported type"):
        a[...] = [1.0, 2.0, 3.0, 4.0]
    with count_transfers() as log:
        a[...] = np.float32(2)
        a[0] = np.array(1.0)                        # a 0-d host array is a scalar
        a[1:] = cp.asarray(np.full(3, 3.0))         # the way to copy host data in
        a[cp.asarray([1, 2])] = np.array([4.0, 5.0])    # an index array copies the value in
        a[a > 4.5] = [6.0]
    assert (log.h2d, log.d2h) == (4, 1) and a.get().tolist() == [1.0, 4.0, 6.0, 3.0]    # the mask is counted


def test_scatter_and_ufunc_methods_take_what_cupy_takes():
    for dt in ("int8", "uint8", "int16", "bool"):          # no CUDA atomic add for these
        with pytest.raises(TypeError, match="cupy.add.at only supports int32, int64, float16"):
            cupyx.scatter_add(cp.zeros(3, dtype=dt), cp.asarray([0, 0]), cp.ones(2, dtype=dt))
    with pytest.raises(TypeError, match="cupy.maximum.at only supports"):
        cupyx.scatter_max(cp.zeros(3, dtype=np.float16), cp.asarray([0]), cp.ones(1, dtype=np.float16))
    x = cp.zeros(3, dtype=np.int8)                  # a mask or a basic index needs no atomics
    cupyx.scatter_add(x, cp.asarray([True, False, True]), 1)
    cupyx.scatter_add(x, slice(1, None), 1)
    assert x.get().tolist() == [1, 1, 2]
    y = cp.zeros(3, dtype=np.int64)
    cupyx.scatter_add(y, cp.asarray([0, 0]), cp.ones(2, dtype=np.int64))
    cp.add.at(y, cp.asarray([2]), 5)
    assert y.get().tolist() == [2, 0, 5] and int(cp.add.reduce(y)) == 7
    for unsupported in (lambda: cp.multiply.at(y, cp.asarray([0]), 2), lambda: cp.maximum.reduce(y),
                        lambda: cp.maximum.accumulate(y), lambda: cp.multiply.reduceat(y, cp.asarray([0]))):
        with pytest.raises(NotImplementedError, match="is not supported yet"):
            unsupported()


def test_random_floats_are_float32_or_float64_only():
    rs = cp.random.RandomState(0)
    for draw in (lambda: rs.random_sample((2,), dtype=np.float16), lambda: rs.standard_normal(2, dtype=np.int32),
                 lambda: rs.rand(2, dtype=np.float16), lambda: rs.uniform(size=2, dtype=np.float16)):
        with pytest.raises(TypeError, match="only supports float32 and float64"):
            draw()
    assert rs.random_sample((2,), dtype=np.float32).dtype == np.float32 and rs.randn(2).dtype == np.float64


# -- what it counts -------------------------------------------------------------------------------------
@pytest.mark.parametrize("read", [
    lambda a: a.get(), lambda a: cp.asnumpy(a), lambda a: a[0].item(), lambda a: float(a[0]),
    lambda a: int(a[0]), lambda a: bool(a[0]), lambda a: a.tolist(),
    repr, str, lambda a: f"{a[0]:.2f}", lambda a: a[a > 0], lambda a: cp.nonzero(a),
])
def test_every_device_to_host_transfer_is_counted_once(read):
    a = cp.arange(3.0)
    with count_transfers() as log:
        read(a)
    assert (log.d2h, log.h2d) == (1, 0), log.events


def test_host_to_device_copies_are_counted_and_device_work_is_not():
    with count_transfers() as log:
        a = cp.asarray(np.arange(3.0))
        b = cp.array([1.0, 2.0, 3.0])
        c = cp.zeros(3) + cp.arange(3) * a - b      # made and computed on the device: nothing moves
        c[cp.arange(1)] = 1.0
        a.set(np.ones(3))
    assert (log.d2h, log.h2d) == (0, 3), log.events
    with count_transfers() as outer, count_transfers() as inner:
        a.get()
    assert outer.d2h == inner.d2h == 1
    assert isinstance(cp.asnumpy(a), np.ndarray) and isinstance(a.get(), np.ndarray)


def test_cupyx_and_random_work_on_the_device():
    out = cp.zeros(3)
    cupyx.scatter_add(out, cp.asarray([0, 0, 2]), cp.ones(3))
    assert out.get().tolist() == [2.0, 0.0, 1.0]
    assert abs(float(cupyx.scipy.special.erf(cp.asarray(0.5))) - 0.5204998778) < 1e-9
    rs = cp.random.RandomState(0)
    x = rs.standard_normal((2, 3), dtype=np.float32)
    assert isinstance(x, cp.ndarray) and x.dtype == np.float32
    with pytest.raises(AttributeError):
        cp.random.default_rng(0).normal             # CuPy's Generator has no normal()


# -- the switch -------------------------------------------------------------------------------------------
def test_install_makes_cuda_available_and_prints_devices_as_simulated():
    was = cupy_backend.simulated()
    cupy_standin.install()
    try:
        assert ag.cuda.is_available() and ag.cuda.device_count() == cupy_standin.N_DEVICES
        x = ag.ones(2, device="cuda")
        assert "device='cuda:0 (simulated)'" in repr(x)
        assert "simulated" in ag.cuda.get_device_name().lower()
        assert type(x.data) is cp.ndarray
    finally:
        if not was:
            cupy_standin.uninstall()
    assert cupy_backend.simulated() == was


def test_importing_autograd_gpu_never_uses_the_stand_in():
    import subprocess
    import sys
    code = ("import autograd_gpu as ag, sys; from autograd_gpu.backends import cupy_backend; "
            "assert not cupy_backend.simulated(); "
            "assert 'autograd_gpu.testing.cupy_standin' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ag_cuda_set_device_and_device_context_pick_the_current_gpu():
    was = cupy_backend.simulated()
    cupy_standin.install()
    try:
        assert ag.cuda.current_device() == 0
        with ag.cuda.device("cuda:1"):
            assert ag.cuda.current_device() == 1
            x = ag.randn(3, device="cuda:1", requires_grad=True)
            (x * x).sum().backward()                      # raw array work runs on GPU 1 too
            assert x.grad.data.device.id == 1
        assert ag.cuda.current_device() == 0
        ag.cuda.set_device(1)
        assert ag.cuda.current_device() == 1
        ag.cuda.set_device("cuda:0")
        with pytest.raises(ValueError, match="expected a CUDA device"):
            ag.cuda.set_device("cpu")
    finally:
        ag.cuda.set_device(0)
        if not was:
            cupy_standin.uninstall()


# -- user kernels and stream capture (ag.compile's CUDA path) ---------------------------------------------
def test_elementwise_kernel_evaluates_its_c_expression_with_typed_scalars():
    k = cp.ElementwiseKernel("float32 a0, float32 k0", "float32 y", "y = (1 / (1 + exp(-(a0 * k0))))", "sig")
    x = cp.asarray(np.linspace(-3, 3, 7, dtype=np.float32))
    got = k(x, np.float32(2.0))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.get(), 1 / (1 + np.exp(-2 * np.linspace(-3, 3, 7))), rtol=1e-6)
    out = cp.empty(7, dtype=cp.float32)
    assert k(x, 1.0, out) is out                       # an output argument is written, not reallocated
    mask = cp.ElementwiseKernel("float32 a0, bool a1", "float32 y", "y = (a0 * a1)", "m")
    np.testing.assert_array_equal(mask(x, x > 0).get(), np.maximum(np.linspace(-3, 3, 7), 0))


def test_elementwise_kernel_refuses_what_cupy_refuses_and_c_it_cannot_read():
    k = cp.ElementwiseKernel("float32 a0", "float32 y", "y = (a0 * a0)", "sq")
    with pytest.raises(TypeError, match="Unsupported type"):
        k(np.ones(3, np.float32))                      # a NumPy array is no kernel argument
    with pytest.raises(TypeError, match="Type is mismatched"):
        k(cp.ones(3, dtype=cp.float64))
    with pytest.raises(TypeError, match="Wrong number of arguments"):
        k()
    for op in ("y = a0 ** 2", "y = foo(a0)", "z = a0"):
        with pytest.raises(NotImplementedError):
            cp.ElementwiseKernel("float32 a0", "float32 y", op, "bad")


def _ew(in_params, out_params, body):
    return cp.ElementwiseKernel(in_params, out_params, body, "k")


def test_elementwise_kernel_runs_a_multi_statement_adam_update_with_three_outputs():
    adam = cp.ElementwiseKernel(
        "T g, T lr, T b1, T b2, T eps, T bc1, T bc2", "T p, T m, T v",
        """
        // an Adam step, as a fused optimizer kernel writes it
        m = b1 * m + (1 - b1) * g;
        v *= b2;
        v += (1 - b2) * g * g;
        const T mhat = m / bc1;
        T vhat = v / bc2;
        p -= lr * mhat / (sqrt(vhat) + eps);
        """, "adam")
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        g0, p0, m0, v0 = (rng.standard_normal((3, 5)).astype(dt) for _ in range(4))
        v0 = np.abs(v0)
        p, m, v, g = (cp.asarray(a) for a in (p0, m0, v0, g0))
        res = adam(g, 1e-3, 0.9, 0.999, 1e-8, 0.1, 0.001, p, m, v)
        assert type(res) is tuple and res[0] is p and res[1] is m and res[2] is v
        t = lambda x: dt(x)                                                   # noqa: E731
        m1 = t(0.9) * m0 + (t(1) - t(0.9)) * g0
        v1 = v0 * t(0.999) + (t(1) - t(0.999)) * g0 * g0
        p1 = p0 - t(1e-3) * (m1 / t(0.1)) / (np.sqrt(v1 / t(0.001)) + t(1e-8))
        for got, want in ((p, p1), (m, m1), (v, v1)):
            assert got.dtype == dt
            np.testing.assert_allclose(got.get(), want, rtol=1e-6 if dt == np.float32 else 1e-14)
    with pytest.raises(TypeError, match="Type is mismatched"):          # T bound to two dtypes
        adam(cp.ones(2, dtype=cp.float32), 1, 1, 1, 1, 1, 1, cp.ones(2), cp.ones(2), cp.ones(2))


def test_elementwise_kernel_allocates_several_outputs_and_broadcasts():
    k = _ew("float32 x, float32 b", "float32 y, bool pos", "pos = x + b > 0; y = pos ? x + b : 0.0f")
    x = cp.asarray(np.arange(-3, 3, dtype=np.float32).reshape(2, 3))
    y, pos = k(x, cp.asarray(np.array([1, 0, -1], np.float32)))
    want = np.arange(-3, 3, dtype=np.float32).reshape(2, 3) + np.array([1, 0, -1], np.float32)
    np.testing.assert_array_equal(y.get(), np.maximum(want, 0))
    np.testing.assert_array_equal(pos.get(), want > 0)
    assert k(x, 2.0)[0].shape == (2, 3)
    with pytest.raises(ValueError, match="Out shape is mismatched"):
        k(x, 2.0, cp.empty((3,), dtype=cp.float32), cp.empty((3,), dtype=cp.bool_))


@pytest.mark.parametrize("body, x, want", [
    ("y = x > 0 ? x : 0.01f * x", [-2.0, 3.0], [-0.02, 3.0]),
    ("y = x > 1 && x < 3 || x == -1", [-1.0, 2.0, 3.0], [1, 1, 0]),
    ("y = !(x > 0)", [1.0, -1.0], [0, 1]),
    ("y = (int)x / 2", [7.9, -7.9], [3, -3]),                    # the cast truncates, / truncates
    ("y = (int)x % 3", [7.0, -7.0], [1, -1]),                     # C's remainder keeps the dividend's sign
    ("y = float(x) * 2 + static_cast<float>(1)", [1.5], [4.0]),
    ("y = fmax(x, 0.0f) + fmin(x, 0.0f) + max(x, 1.0f) - min(x, 1.0f)", [3.0, -2.0], [3 + 3 - 1, -2 + 1 + 2]),
    ("y = exp(x) - expm1(x) + log1p(x) - log(1 + x)", [0.5], [1.0]),
    ("y = rsqrt(x) * sqrt(x) + fabs(-x) + pow(x, 2.0f)", [4.0], [1 + 4 + 16]),
    ("y = tanh(x) - sinh(x) / cosh(x) + erf(0.0f) + erfc(0.0f)", [0.3], [1.0]),
    ("if (x > 0) y = 1; else { y = 2; y += 1; }", [1.0, -1.0], [1, 3]),
    ("float t = 1e-3f; double d = 2.5e1; int n = 0x10; y = t * 1000 + d + n - 1.0", [0.0], [1 + 25 + 16 - 1]),
    ("bool b = x; y = b ? -x : +x", [0.0, 2.0], [0.0, -2.0]),
    ("y = isnan(x) + isinf(x) * 2 + isfinite(x) * 4", [np.nan, np.inf, 1.0], [1, 2, 4]),
    ("y = i", [5.0, 5.0, 5.0], [0, 1, 2]),                         # CuPy's element index
])
def test_elementwise_kernel_c_subset(body, x, want):
    k = _ew("float32 x", "float32 y", body)
    got = k(cp.asarray(np.array(x, np.float32)))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got.get(), np.array(want, np.float32), rtol=1e-6, atol=1e-7)


def test_elementwise_kernel_follows_c_types_not_numpy_promotion():
    x = cp.asarray(np.array([1 / 3], np.float32))
    # a plain 1.0 is double: x / 3.0 runs in double and is rounded into the float output; 3.0f stays float
    k_double = _ew("float32 x", "float64 y", "y = x / 3.0")
    k_float = _ew("float32 x", "float64 y", "y = x / 3.0f")
    assert k_double(x).get()[0] == np.float64(np.float32(1 / 3)) / 3.0
    assert k_float(x).get()[0] == np.float64(np.float32(1 / 3) / np.float32(3))
    assert k_double(x).get()[0] != k_float(x).get()[0]
    # C's integer arithmetic: int / int truncates, unsigned wins at equal rank, a literal is int
    ints = _ew("int32 a, int32 b", "int32 q", "q = a / b")
    np.testing.assert_array_equal(ints(cp.asarray(np.array([-7, 7], np.int32)), 2).get(), [-3, 3])
    wrap = _ew("int32 a, uint32 b", "int64 y", "y = a + b")         # int + unsigned -> unsigned: wraps
    assert wrap(cp.asarray(np.array([-1], np.int32)), np.uint32(0)).get()[0] == 2 ** 32 - 1
    # a type placeholder is bound by the arrays; a float64 T makes the whole kernel double
    k = _ew("T x", "T y", "T h = 0.1f; y = x * h")
    got = k(cp.asarray(np.array([1.0])))
    assert got.dtype == np.float64 and got.get()[0] == np.float64(np.float32(0.1))
    assert k(cp.asarray(np.array([1.0], np.float32))).get()[0] == np.float32(0.1)
    with pytest.raises(TypeError, match="Cannot determine type of U"):
        _ew("float32 x", "U y", "y = x")(cp.ones(2, dtype=cp.float32))


@pytest.mark.parametrize("body, construct", [
    ("for (int j = 0; j < 3; j++) y += x", "'for'"),
    ("while (x > 0) y = x", "'while'"),
    ("y = x[0]", "indexing"),
    ("y = *x", "pointer"),
    ("float *p = &x; y = x", "pointer"),
    ("y = x++", "increment"),
    ("y = foo(x)", "function 'foo'"),
    ("y = z", "unknown name 'z'"),
    ("x = 1; y = x", "const"),                                     # input parameters are const
    ("const float c = 1; c = 2; y = c", "const"),
    ("y = x; return", "'return'"),
    ("y = (x = 2)", "assignment inside an expression"),
    ("y = x.real", "member access"),
    ("y = x % 2.0f", "'%' on a floating value"),
    ("float y2; float y2; y = x", "second declaration"),
    ("#define A 1\ny = x", "preprocessor"),
    ("y = x ** 2", "pointer"),
])
def test_elementwise_kernel_refuses_c_outside_its_subset_naming_the_construct(body, construct):
    with pytest.raises(NotImplementedError, match=re.escape(construct)):
        k = _ew("float32 x", "float32 y", body)
        k(cp.ones(2, dtype=cp.float32))                           # some refusals come from the types
    with pytest.raises(NotImplementedError, match="preamble"):
        cp.ElementwiseKernel("float32 x", "float32 y", "y = f(x)", "k", preamble="__device__ float f(float);")
    with pytest.raises(NotImplementedError, match="does not simulate"):
        cp.RawKernel("extern \"C\" __global__ void k(float* x) {}", "k")


def test_elementwise_kernel_raw_parameters_read_by_index_over_the_broadcast_loop():
    # CuPy: a raw array is not broadcast; the loop runs over the non-raw arguments; x[j] is the C-order
    # element j whatever the strides; x.size() and _ind.size() are ptrdiff_t
    x = cp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    rev = _ew("raw T x, T z", "T y", "y = x[x.size() - 1 - i] + z")
    z = cp.zeros(5, dtype=cp.float32)
    np.testing.assert_array_equal(rev(x, z).get(), [11, 10, 9, 8, 7])
    xt = x.T                                                   # non-contiguous: C order of the view
    np.testing.assert_array_equal(_ew("raw T x, T z", "T y", "y = x[i]")(xt, cp.zeros(12, dtype=cp.float32)).get(),
                                  xt.get().reshape(-1))
    n = _ew("raw T x, T z", "int64 y", "y = _ind.size() * 100 + x.size()")
    np.testing.assert_array_equal(n(x, z).get(), [512] * 5)


def test_elementwise_kernel_raw_writes_and_size_when_every_array_is_raw():
    # a gather/scatter over a table of offsets: the loop size is size=, every array raw
    a = cp.asarray(np.arange(3, dtype=np.float64))
    b = cp.asarray(np.arange(10, 15, dtype=np.float64).reshape(1, 5))
    flat = cp.zeros(8, dtype=cp.float64)
    pack = _ew("raw T a, raw T b, int64 off", "raw T flat",
               "if (i < off) flat[i] = a[i]; else flat[i] = b[i - off];")
    pack(a, b, 3, flat, size=8)
    np.testing.assert_array_equal(flat.get(), [0, 1, 2, 10, 11, 12, 13, 14])
    unpack = _ew("raw T flat, int64 off", "raw T a, raw T b",
                 "if (i < off) { a[i] += flat[i] * 2; } else { b[i - off] = -flat[i]; }")
    unpack(flat, 3, a, b, size=8)
    np.testing.assert_array_equal(a.get(), [0, 3, 6])
    np.testing.assert_array_equal(b.get(), [[-10, -11, -12, -13, -14]])
    with count_launches() as log:
        pack(a, b, 3, flat, size=8)
    assert log.launches == 1
    # the ternary and && / || run an index only in the lanes that take it
    pick = _ew("raw T a, raw T b, int64 off", "raw T flat", "flat[i] = i < off ? a[i] : b[i - off]")
    pick(a, b, 3, flat, size=8)
    np.testing.assert_array_equal(flat.get(), [0, 3, 6, -10, -11, -12, -13, -14])
    guard = _ew("raw T a", "raw T y", "y[i] = (i < a.size() && a[i] > 0) ? 1.0 : 0.0")
    y = cp.zeros(5, dtype=cp.float64)
    guard(a, y, size=5)
    np.testing.assert_array_equal(y.get(), [0, 1, 1, 0, 0])
    # an output written elementwise and a raw output in one kernel
    both = _ew("T x, raw T t", "T y, raw T acc", "y = x * 2; acc[i] = x + t[0];")
    acc = cp.zeros(3, dtype=cp.float32)
    y, _ = both(cp.asarray(np.array([1.0, 2.0, 3.0], np.float32)), cp.asarray(np.array([10.0], np.float32)),
                cp.empty(3, dtype=cp.float32), acc)
    np.testing.assert_array_equal(y.get(), [2, 4, 6])
    np.testing.assert_array_equal(acc.get(), [11, 12, 13])


def test_elementwise_kernel_raw_refusals_follow_cupy():
    a = cp.ones(4, dtype=cp.float32)
    k = _ew("raw T x", "raw T y", "y[i] = x[i]")
    with pytest.raises(ValueError, match="Loop size is undecided"):
        k(a, cp.empty(4, dtype=cp.float32))
    with pytest.raises(ValueError, match="Output array size is undecided"):
        k(a, size=4)
    with pytest.raises(ValueError, match="Specified 'size' can be used only if all of the ndarray are 'raw'"):
        _ew("raw T x, T z", "T y", "y = x[i]")(a, a, size=4)
    with pytest.raises(TypeError, match="raw parameter 'x' takes a cupy.ndarray"):
        k(1.0, cp.empty(4, dtype=cp.float32), size=4)
    # out of range: a GPU reads or writes garbage; the stand-in raises, naming the kernel
    with pytest.raises(IndexError, match=r"k: index 4 out of range for the raw array 'x' of size 4"):
        k(a, cp.empty(8, dtype=cp.float32), size=8)
    with pytest.raises(IndexError, match="index -1 out of range for the raw array 'y'"):
        _ew("raw T x", "raw T y", "y[i - 1] = x[i]")(a, cp.empty(4, dtype=cp.float32), size=4)
    for body, construct in [("y[i] = x", "without an index"), ("y[i] = x[0.5f]", "integer subscript"),
                            ("x[i] = 1; y[i] = 0", "const"), ("y[i][0] = x[i]", "second subscript"),
                            ("y[i] = x.shape()", "member access"), ("y[i]++", "increment")]:
        with pytest.raises(NotImplementedError, match=re.escape(construct)):
            _ew("raw T x", "raw T y", body)(a, cp.empty(4, dtype=cp.float32), size=4)
    with pytest.raises(NotImplementedError, match="indexing"):
        _ew("float32 x", "float32 y", "y = x[0]")
    with pytest.raises(NotImplementedError, match="raw"):
        cp.ReductionKernel("raw T x", "T y", "x[i]", "a + b", "y = a", "0", "r")


def test_reduction_kernel_max_min_and_post_map_with_sizes():
    x = cp.asarray(np.array([[1.0, -4.0, 2.0], [3.0, 0.5, -1.0]], np.float32))
    mx = cp.ReductionKernel("T x", "T y", "fabs(x)", "max(a, b)", "y = a", "0", "absmax")
    np.testing.assert_array_equal(mx(x, axis=1).get(), [4.0, 3.0])
    mean = cp.ReductionKernel("T x", "T y", "x", "a + b", "y = a / _in_ind.size() * _out_ind.size()", "0", "mean")
    np.testing.assert_allclose(mean(x, axis=0).get(), x.get().mean(0))
    np.testing.assert_allclose(mean(x).get(), x.get().mean(), rtol=1e-6)
    sq = cp.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = sqrt(a)", "0", "l2", reduce_type="double")
    np.testing.assert_allclose(sq(x, x).get(), np.sqrt((x.get().astype(np.float64) ** 2).sum()), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="reduce expressions"):
        cp.ReductionKernel("T x", "T y", "x", "a - b", "y = a", "0", "bad")


def test_reduction_kernel_sums_its_map_expression():
    r = cp.ReductionKernel("float32 a0, float32 a1", "float32 y", "(a0 * a1)", "a + b", "y = a", "0", "dot")
    a = cp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert r(a, a).shape == ()
    np.testing.assert_allclose(r(a, a).get(), (np.arange(12.0) ** 2).sum())
    np.testing.assert_allclose(r(a, a, axis=1, keepdims=True).get(), (a.get() ** 2).sum(1, keepdims=True))
    with pytest.raises(NotImplementedError, match="reduce expressions"):
        cp.ReductionKernel("float32 a0", "float32 y", "a0", "a / b", "y = a", "0", "div")


def test_stream_capture_records_kernels_without_running_them_and_launch_reruns_them():
    s = cp.cuda.Stream()
    p = cp.ones(4, dtype=cp.float32)
    x = cp.full(4, 2.0, dtype=cp.float32)
    with s:
        s.begin_capture()
        assert s.is_capturing()
        p -= x * 0.5
        t = p + 1
        g = s.end_capture()
    assert isinstance(g, cp.cuda.Graph)
    with pytest.raises(NotImplementedError, match="via stream capture"):
        cp.cuda.Graph()
    np.testing.assert_array_equal(p.get(), np.ones(4))        # nothing ran during the capture
    assert np.isnan(t.get()).all()                             # made during the capture: not yet written
    g.launch(s)
    np.testing.assert_array_equal(p.get(), np.zeros(4))
    x[...] = 4.0                                               # a launch reads the captured buffers again
    g.launch(s)
    np.testing.assert_array_equal(p.get(), np.full(4, -2.0))
    np.testing.assert_array_equal(t.get(), np.full(4, -1.0))


@pytest.mark.parametrize("bad", [lambda a: a.get(), lambda a: float(a[0]), lambda a: cp.asarray([1.0]),
                                 lambda a: cp.cuda.Device().synchronize()])
def test_transfers_and_syncs_during_capture_raise_and_invalidate_it(bad):
    s = cp.cuda.Stream()
    a = cp.ones(3)
    s.begin_capture()
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="not permitted when stream is capturing"):
        bad(a)
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="invalidated"):
        s.end_capture()
    assert not s.is_capturing()


def test_capture_refuses_the_null_stream_and_random_draws():
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError, match="null stream"):
        cp.cuda.Stream.null.begin_capture()
    s = cp.cuda.Stream()
    s.begin_capture()
    with pytest.raises(NotImplementedError, match="cuRAND"):
        cp.random.RandomState(0).random_sample((3,))
    s.end_capture()


# -- count_launches: what CuPy would launch ----------------------------------------------------------------
def _launches(fn):
    with cupy_standin.count_launches() as log:
        fn()
    return log


@pytest.mark.parametrize("call, kind, n", [
    (lambda a, b, i: a + b, "ufunc", 1),
    (lambda a, b, i: a.__iadd__(b), "ufunc", 1),                     # in place: still one kernel
    (lambda a, b, i: cp.exp(a, out=b), "ufunc", 1),
    (lambda a, b, i: -a, "ufunc", 1),
    (lambda a, b, i: cp.where(a > 0, a, b), "ufunc", 3),             # the comparison, astype('?') and the where
    (lambda a, b, i: a.sum(axis=(0, 1)), "reduction", 1),            # several axes: one kernel
    (lambda a, b, i: a.max(), "reduction", 1),
    (lambda a, b, i: cp.argmax(a, axis=1), "reduction", 1),
    (lambda a, b, i: a.mean(0), "reduction", 1),
    (lambda a, b, i: a @ b.T, "cublas", 1),
    (lambda a, b, i: cp.matmul(a[None], b.reshape(4, 3)[None]), "cublas", 1),   # batched: one strided-batched GEMM
    (lambda a, b, i: a.dot(b.T), "cublas", 1),
    (lambda a, b, i: cp.zeros((3, 4), dtype=cp.float32), "fill", 1),
    (lambda a, b, i: cp.zeros_like(a), "fill", 1),
    (lambda a, b, i: cp.ones(3), "fill", 1),
    (lambda a, b, i: cp.full(3, 2.0), "fill", 1),
    (lambda a, b, i: a.fill(0), "fill", 1),
    (lambda a, b, i: a.copy(), "copy", 1),
    (lambda a, b, i: a.astype(cp.float64), "copy", 1),
    (lambda a, b, i: cp.ascontiguousarray(a.T), "copy", 1),
    (lambda a, b, i: a.T.reshape(-1), "copy", 1),                    # no view exists: CuPy copies
    (lambda a, b, i: cp.concatenate([a, b, a]), "copy", 3),          # one elementwise copy per input (<= 8)
    (lambda a, b, i: cp.stack([a] * 9), "copy", 1),                  # more than 8 small ones: one kernel
    (lambda a, b, i: a[i], "gather", 1),
    (lambda a, b, i: a.__setitem__(i, 0.0), "scatter", 1),
    (lambda a, b, i: a.__setitem__(0, 1.0), "fill", 1),
    (lambda a, b, i: a.__setitem__((slice(None), 0), b[:, 1]), "copy", 1),
    (lambda a, b, i: cupyx.scatter_add(a, i, b[:2]), "scatter", 1),
    (lambda a, b, i: cp.random.rand(3), "random", 1),
    (lambda a, b, i: cp.random.randn(3, dtype=cp.float32), "random", 1),   # drawn in float32: no cast
])
def test_count_launches_one_per_kernel_as_cupy_launches_them(call, kind, n):
    a = cp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    b = cp.asarray(np.ones((3, 4), np.float32))
    i = cp.arange(2, dtype=cp.int64)
    log = _launches(lambda: call(a, b, i))
    assert log.launches == n and log.by_kind.get(kind, 0) >= 1, log.events
    assert sum(log.by_kind.values()) == log.launches == len(log.events)


def _f32(*shape):
    return cp.asarray(np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 7)


@pytest.mark.parametrize("call, by_kind", [
    # at most 2-d (CuPy's dot): cuBLAS reads C- and F-ordered operands as they are
    (lambda: _f32(5, 4) @ _f32(3, 4).T, {"cublas": 1}),
    (lambda: cp.matmul(_f32(5, 8)[:, ::2], _f32(4, 3)), {"cublas": 1, "copy": 1}),   # neither order: copied
    (lambda: cp.matmul(_f32(5, 4), _f32(4, 3), out=_f32(3, 5).T), {"cublas": 1, "copy": 1}),  # out not C-ordered
    (lambda: cp.matmul(_f32(4), _f32(4)), {"ufunc": 1, "reduction": 1, "copy": 1}),   # 1x1: (a * b).sum(out=c)
    (lambda: cp.matmul(_f32(8)[::2], _f32(4)), {"ufunc": 1, "reduction": 1, "copy": 2}),  # + the strided ravel
    (lambda: cp.matmul(_f32(0, 4), _f32(4, 3)), {"fill": 1}),                       # empty: zeros
    # batched: a strided-batched GEMM over C-contiguous operands
    (lambda: cp.matmul(_f32(2, 5, 4), _f32(2, 4, 3)), {"cublas": 1}),
    (lambda: cp.matmul(_f32(2, 4, 5).swapaxes(1, 2), _f32(2, 4, 3)), {"cublas": 1, "copy": 1}),
    # broadcast batch dims: three pointer tables (a, b, the result), one kernel per batch dim each
    (lambda: cp.matmul(_f32(5, 4), _f32(2, 4, 3)), {"cublas": 1, "elementwise_kernel": 3}),
    (lambda: _f32(1, 6, 5) @ _f32(8, 1, 5, 7), {"cublas": 1, "elementwise_kernel": 6}),    # a conv's product
    (lambda: cp.matmul(_f32(3, 5, 4), _f32(2, 3, 6, 4).swapaxes(-1, -2)),
     {"cublas": 1, "elementwise_kernel": 6, "copy": 1}),
])
def test_count_launches_of_matmul_follows_cupy(call, by_kind):
    """cupy.matmul launches more than its cuBLAS call where CuPy copies an operand or the result, or builds
    pointer tables for broadcast batches (cupy/_core/_routines_linalg.pyx): the stand-in counts them."""
    log = _launches(call)
    assert {k: v for k, v in log.by_kind.items() if v} == by_kind, log.events


@pytest.mark.parametrize("call", [
    lambda a: cp.empty((3, 4)), lambda a: cp.empty_like(a), lambda a: a.reshape(12), lambda a: a.T,
    lambda a: a[1:, ::2], lambda a: a[0], lambda a: a[None], lambda a: cp.ascontiguousarray(a),
    lambda a: a.astype(cp.float32, copy=False), lambda a: a.ravel(), lambda a: cp.broadcast_to(a, (2, 3, 4)),
    lambda a: a.get(), lambda a: cp.asarray(np.ones(3)), lambda a: a.view(cp.int32), lambda a: a.shape,
    lambda a: cp.asarray(a), lambda a: cp.expand_dims(a, 0), lambda a: a.swapaxes(0, 1),
])
def test_count_launches_counts_none_for_allocation_views_and_transfers(call):
    a = cp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert _launches(lambda: call(a)).launches == 0


def test_count_launches_counts_user_kernels_masks_graphs_and_nests():
    a = cp.asarray(np.arange(6, dtype=np.float32))
    k = cp.ElementwiseKernel("T x", "T y, T z", "y = x + 1; z = x * 2", "two_outputs")
    r = cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "sq")
    with cupy_standin.count_launches() as outer:
        with cupy_standin.count_launches() as inner:
            k(a)                                           # two outputs, one launch
            r(a)                                           # over every axis: CUB's two passes
        a[a > 2]                                           # the mask's comparison, its scan and the gather
    assert inner.launches == 3 and inner.events == [("elementwise_kernel", "two_outputs"),
                                                    ("reduction_kernel", "sq"), ("reduction_kernel", "sq")]
    assert outer.launches == 6 and outer.by_kind["gather"] == 1 and outer.by_kind["other"] == 1
    s = cp.cuda.Stream()
    with s:
        s.begin_capture()
        a += 1
        a *= 2
        g = s.end_capture()
    with cupy_standin.count_launches() as log:
        g.launch(s)
    assert log.launches == 1 and log.events == [("graph", "Graph.launch")]
    assert repr(log) == "LaunchLog(launches=1, graph=1)"


def _rk1():
    return cp.ReductionKernel("T x", "T y", "x * x", "a + b", "y = a", "0", "sq")


def _rk2():
    return cp.ReductionKernel("T x, T w", "T y", "x * w", "a + b", "y = a", "0", "dot2")


def _ek():
    return cp.ElementwiseKernel("T x", "T y", "y = x + 1", "plus_one")


@pytest.mark.parametrize("call, by_kind", [
    # ufuncs (cupy/_core/_kernel.pyx, ufunc.__call__): nothing for an empty shape; an input overlapping a given
    # output without being that array object is copied first (_copy_in_args_if_needed)
    (lambda: cp.exp(_f32(0, 3)), {}),
    (lambda: _f32(4, 0) + 1, {}),
    (lambda: -_f32(0), {}),
    (lambda: (lambda a: a.__iadd__(a))(_f32(3, 3)), {"ufunc": 1}),                  # the same object: no copy
    (lambda: (lambda a: a.__iadd__(a.T))(_f32(3, 3)), {"copy": 1, "ufunc": 1}),
    (lambda: (lambda a: cp.multiply(a[::-1], 2, out=a))(_f32(6)), {"copy": 1, "ufunc": 1}),
    (lambda: (lambda a: cp.multiply(a[:3], 2, out=a[3:]))(_f32(6)), {"ufunc": 1}),   # disjoint halves
    (lambda: (lambda a: cp.add(a, a, a))(_f32(4)), {"ufunc": 1}),                  # positional out
    (lambda: cp.where(_f32(3) > 1, _f32(3), _f32(3)), {"ufunc": 2, "copy": 1}),     # condition.astype('?')
    # user kernels: ElementwiseKernel skips an empty loop; ReductionKernel an empty result, and one input
    # reduced over every axis takes CUB's block reduction in two passes (_cub_reduction.pyx)
    (lambda: _ek()(_f32(0, 4)), {}),
    (lambda: _rk1()(_f32(3, 4)), {"reduction_kernel": 2}),
    (lambda: _rk1()(_f32(3, 4), axis=1), {"reduction_kernel": 1}),
    (lambda: _rk1()(_f32(3, 4)[:, ::2]), {"reduction_kernel": 1}),                 # not contiguous: no CUB
    (lambda: _rk2()(_f32(3, 4), _f32(3, 4)), {"reduction_kernel": 1}),             # two inputs: no CUB
    (lambda: _rk1()(_f32(0, 4), axis=1), {}),
    # reductions, CUB on (CuPy's default, cupy/cuda/cub.pyx cub_reduction)
    (lambda: _f32(3, 4).sum(), {"reduction": 1}),                                  # one CUB tile
    (lambda: _f32(64, 128).sum(), {"reduction": 2}),                               # DeviceReduce: two passes
    (lambda: _f32(64, 128).astype(cp.float64).sum(), {"copy": 1, "reduction": 2}), # 8192 eight-byte items: 2 passes
    (lambda: cp.asfortranarray(_f32(3, 4)).sum(), {"copy": 2, "reduction": 1}),   # F-ordered: made C first
    (lambda: _f32(3, 4).sum(axis=1), {"reduction": 1}),                            # DeviceSegmentedReduce
    (lambda: _f32(3, 4).sum(axis=0), {"reduction": 1}),                            # CuPy's reduction kernel
    (lambda: _f32(3, 4).sum(axis=1, out=_f32(3)), {"reduction": 1, "copy": 1}),    # out[...] = y
    (lambda: _f32(3, 4).sum(axis=0, out=_f32(4)), {"reduction": 1}),               # the kernel writes out
    (lambda: _f32(3, 4).argmax(), {"reduction": 1, "copy": 1}),                    # the index cast to int64
    (lambda: _f32(3, 4).mean(), {"reduction": 1, "ufunc": 1}),                     # CUB's sum, true_divide
    (lambda: _f32(3, 4).mean(axis=0), {"reduction": 1}),                           # CuPy's mean kernel
    (lambda: cp.arange(12, dtype=cp.int32).sum(), {"fill": 1, "reduction": 2}),    # no CUB sum of int32
    (lambda: cp.arange(12).mean(), {"fill": 1, "reduction": 2, "copy": 1}),        # float64 sum, astype
    (lambda: (_f32(3, 4) > 2).any(), {"ufunc": 1, "reduction": 2}),
    (lambda: _f32(0, 4).sum(axis=1), {}),
    # a[basic index] = device array (_routines_indexing.pyx _scatter_op): the same memory skipped, one memcpy
    # for the same layout, else elementwise_copy (a ufunc: overlap copied first)
    (lambda: (lambda a: a.__setitem__(Ellipsis, a))(_f32(3, 4)), {}),
    (lambda: (lambda a: a.__setitem__(Ellipsis, a[None]))(_f32(3, 4)), {}),           # leading unit dims squeezed
    (lambda: _f32(3, 4).__setitem__(Ellipsis, _f32(3, 4)), {"copy": 1}),
    (lambda: (lambda a: a.__setitem__(slice(1, None), a[:-1]))(_f32(6)), {"copy": 1}),   # memcpy, overlap or not
    (lambda: (lambda a: a.__setitem__((slice(None), slice(1, None)), a[:, :-1]))(_f32(4, 4)), {"copy": 2}),
    (lambda: _f32(3, 4).__setitem__(slice(3, None), _f32(0, 4)), {}),
    (lambda: _f32(3, 4).__setitem__(slice(3, None), 1.0), {}),
    # advanced indices: several arrays fold into one flat index (a fill, one kernel each), a mask is scanned
    (lambda: _f32(3, 4)[cp.arange(2), cp.arange(2)], {"fill": 3, "elementwise_kernel": 2, "gather": 1}),  # 2 aranges
    (lambda: _f32(3, 4)[:, _f32(4) > 2], {"ufunc": 1, "other": 2, "gather": 1}),     # broadcast mask: 2 scans
    (lambda: _f32(2000)[_f32(2000) > 2], {"ufunc": 1, "other": 3, "gather": 1}),     # > 512: scan, scan, add
    (lambda: _f32(3, 4)[cp.arange(0)], {"fill": 1}),                                 # empty: no take
    (lambda: _f32(3, 4).__setitem__(cp.arange(2), cp.ones(4)), {"fill": 2, "scatter": 1, "copy": 1}),  # f64 cast
    (lambda: cupyx.scatter_add(_f32(3, 4), slice(0, 2), _f32(2, 4)), {"ufunc": 1}),  # basic: add in place
    # copies made through other routines
    (lambda: cp.concatenate([_f32(2, 3), _f32(0, 3)]), {"copy": 1}),                # an empty input copies nothing
    (lambda: cp.asarray(_f32(3), dtype=cp.float64), {"copy": 1}),                   # another dtype: astype
    (lambda: _f32(0, 3).astype(cp.float64), {}),
])
def test_count_launches_follows_cupy_routines(call, by_kind):
    """The launches of CuPy 14's routines, read from its source (each rule's docstring in _core.py names the
    file and function). _f32 copies its operand in from the host (no launch); cp.arange and cp.ones are
    counted as the fills they are."""
    log = _launches(call)
    assert {k: v for k, v in log.by_kind.items() if v} == by_kind, log.events


def test_count_launches_of_imag_fills_for_real_arrays_only():
    """core.pyx _ndarray_imag_getter: a complex array's imaginary part is a view, a real array's a new array
    filled with zeros."""
    z = cp.asarray(np.ones(3, np.complex64))
    assert _launches(lambda: z.imag).launches == 0
    log = _launches(lambda: _f32(3).imag)
    assert log.by_kind == {"fill": 1} and _f32(3).imag.get().tolist() == [0.0, 0.0, 0.0]
