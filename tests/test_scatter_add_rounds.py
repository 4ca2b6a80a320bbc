"""The NumPy backend's scatter_add fast path (rounds of duplicate-free fancy +=) against np.add.at: bit for bit
(the same sums in the same order), for the index forms the gathers' backward uses, with negative, repeated and
empty indices, several dtypes (integers, bool: add.at ORs), broadcast and non-contiguous values; the forms it
does not take, and out-of-range indices, stay np.add.at's."""
import numpy as np
import pytest

from autograd_gpu.backends import numpy_backend as nb
from autograd_gpu.backends import get_backend

backend = get_backend("cpu")


def _both(out, index, values):
    a, b = out.copy(), out.copy()
    np.add.at(a, index, values)
    backend.scatter_add(b, index, values)
    return a, b


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32", "uint8", "bool", "complex128"])
@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_rounds_equal_add_at_bit_for_bit(dtype, axis):
    rng = np.random.default_rng(axis)
    shape = (6, 7, 9, 10)
    out = (rng.standard_normal(shape) * 50).astype(dtype)
    m = 3 * shape[axis]
    idx = rng.integers(-shape[axis], shape[axis], m)             # negative and repeated
    vshape = shape[:axis] + (m,) + shape[axis + 1:]
    values = (rng.standard_normal(vshape) * 50).astype(dtype)
    for index in [(slice(None),) * axis + (idx,), (slice(None),) * axis + (idx, Ellipsis),
                  (slice(None),) * axis + (idx,) + (slice(None),) * (3 - axis)]:
        a, b = _both(out, index, values)
        np.testing.assert_array_equal(a, b)
        assert nb._scatter_add_rounds(out.copy(), index, values)
    if axis == 0:
        a, b = _both(out, idx, values)                           # a bare index array
        np.testing.assert_array_equal(a, b)


def test_rounds_are_taken_and_match_for_reflect_pad_and_embedding_shapes(monkeypatch):
    calls = []
    real = nb._scatter_add_rounds
    monkeypatch.setattr(nb, "_scatter_add_rounds", lambda *a: calls.append(real(*a)) or calls[-1])
    rng = np.random.default_rng(0)
    idx = np.abs(np.arange(-2, 36)) % 34                          # a reflect-pad-like index
    for axis in (2, 3):
        shape = (4, 8, 34, 34)
        vshape = shape[:axis] + (idx.size,) + shape[axis + 1:]
        values = rng.standard_normal(vshape).astype(np.float32)
        a, b = _both(np.zeros(shape, np.float32), (slice(None),) * axis + (idx,), values)
        np.testing.assert_array_equal(a, b)
    rows = rng.integers(0, 1000, 4096)                            # embedding-like
    a, b = _both(np.zeros((1000, 64)), rows, rng.standard_normal((4096, 64)))
    np.testing.assert_array_equal(a, b)
    assert calls == [True, True, True]


def test_non_contiguous_and_broadcast_values():
    rng = np.random.default_rng(1)
    out = rng.standard_normal((50, 200))
    idx = rng.integers(0, 200, 300)
    values = rng.standard_normal((300, 50)).T                    # non-contiguous
    a, b = _both(out, (slice(None), idx), values)
    np.testing.assert_array_equal(a, b)
    a, b = _both(out, (slice(None), idx), rng.standard_normal((1, 300)))   # broadcast
    np.testing.assert_array_equal(a, b)
    a, b = _both(out, (slice(None), idx), 2.5)                   # a scalar
    np.testing.assert_array_equal(a, b)
    out = rng.standard_normal((200, 40))[:, ::2]                 # non-contiguous out
    a, b = _both(out, rng.integers(0, 200, 500), rng.standard_normal((500, 20)))
    np.testing.assert_array_equal(a, b)


def test_empty_many_repeats_and_small_fall_back_and_agree():
    rng = np.random.default_rng(2)
    out = rng.standard_normal((64, 100))
    for idx, vals in [(np.zeros(0, np.int64), np.zeros((64, 0))),
                      (np.zeros(5000, np.int64), rng.standard_normal((64, 5000))),   # one index 5000 times
                      (np.array([1, 1, 2]), rng.standard_normal((64, 3)))]:
        a, b = _both(out, (slice(None), idx), vals)
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        assert nb._scatter_add_rounds(out.copy(), (slice(None), idx), vals) is (
            idx.size * 64 >= nb._ROUNDS_MIN and idx.size < 5000)


def test_out_of_range_and_other_forms_are_add_at_s():
    out = np.zeros((100, 100))
    with pytest.raises(IndexError):
        backend.scatter_add(out, (slice(None), np.array([0, 100] * 3000)), 1.0)
    with pytest.raises(IndexError):
        backend.scatter_add(out, np.array([-101] * 5000), 1.0)
    assert not nb._scatter_add_rounds(out, (np.arange(100), np.arange(100)), 1.0)       # two arrays
    assert not nb._scatter_add_rounds(out, (slice(1, None), np.arange(5000) % 100), 1.0)  # a partial slice
    assert not nb._scatter_add_rounds(out, np.ones((60, 70), np.int64), 1.0)            # a 2-d index
    assert not nb._scatter_add_rounds(out, (Ellipsis, np.arange(5000) % 100), 1.0)     # a leading Ellipsis
    assert not nb._scatter_add_rounds(out, (np.arange(5000) % 100, slice(0, 5)), 1.0)  # a partial slice after
    ints = np.zeros((100, 100), np.int64)
    a, b = _both(ints, np.arange(5000) % 100, np.full((5000, 100), 1.5))     # float into int: add.at's casting
    np.testing.assert_array_equal(a, b)
