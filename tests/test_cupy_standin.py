"""The CuPy stand-in refuses what CuPy refuses and counts what crosses between host and device.

These run in every CPU run (the stand-in is plain NumPy underneath); `AG_CUDA=standin` then runs the
whole `gpu` suite on it."""
import operator

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.backends import cupy_backend
from autograd_gpu.testing import cupy_standin
from autograd_gpu.testing.cupy_standin import cupy as cp, cupyx, count_transfers
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
    for op in ("y = a0 ** 2", "y = (a0 * 2.5)", "y = foo(a0)", "y = a0; y = 1", "z = a0"):
        with pytest.raises(NotImplementedError):
            cp.ElementwiseKernel("float32 a0", "float32 y", op, "bad")


def test_reduction_kernel_sums_its_map_expression():
    r = cp.ReductionKernel("float32 a0, float32 a1", "float32 y", "(a0 * a1)", "a + b", "y = a", "0", "dot")
    a = cp.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert r(a, a).shape == ()
    np.testing.assert_allclose(r(a, a).get(), (np.arange(12.0) ** 2).sum())
    np.testing.assert_allclose(r(a, a, axis=1, keepdims=True).get(), (a.get() ** 2).sum(1, keepdims=True))
    with pytest.raises(NotImplementedError, match="sums only"):
        cp.ReductionKernel("float32 a0", "float32 y", "a0", "max(a, b)", "y = a", "0", "mx")


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
