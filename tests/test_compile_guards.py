"""ag.compile never replays a stale or wrong value: aliasing decided from memory ranges (DLPack,
from_numpy, as_strided), guards on what the trace read (the sign of zero, globals, class and module
attributes, closure containers at any depth, argument types, requires_grad toggled inside), and host
random generators refused with a warning naming the user's line. Each case compares the compiled
function with eager mode over at least four calls with a change between them."""
import collections
import enum
import random
import sys
import types
import warnings

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn
from autograd_gpu.testing.helpers import to_numpy

N = 65536


def same(got, want):
    g, w = to_numpy(got), to_numpy(want)
    assert g.shape == w.shape and g.dtype == w.dtype
    assert np.array_equal(g, w, equal_nan=True), (g, w)
    assert np.array_equal(np.signbit(g), np.signbit(w))       # 0.0 and -0.0, +inf and -inf


def run(cf, f, make, changes):
    """For each change: apply it, call the compiled function and eager mode on fresh equal inputs."""
    assert len(changes) >= 4
    for change in changes:
        change()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # x / 0.0: NumPy's divide-by-zero warning
            got = cf(*make())
            want = f(*make())
        same(got, want)
    return cf.stats


# --------------------------------------------------------------------------- aliasing
def _alias_f(a, b):
    s = ag.sigmoid(b) * 2
    a.mul_(3)
    return s + b


def _base(device, seed):
    return ag.tensor(np.random.default_rng(seed).uniform(-2, 2, N).astype(np.float32), device=device)


def _dlpack_pair(device, seed, alias):
    t = _base(device, seed)
    return (t, ag.from_dlpack(t.data) if alias else _base(device, seed))


def _numpy_pair(seed, alias, strided):
    x = np.random.default_rng(seed).uniform(-2, 2, N).astype(np.float32)
    other = x if alias else x.copy()
    view = np.lib.stride_tricks.as_strided(other, (N,), other.strides) if strided else other
    return ag.from_numpy(x), ag.from_numpy(view)


def _check_alias(make_pair):
    cf = ag.compile(_alias_f)
    for call, alias in enumerate([True, True, False, True, False, True]):   # trace, replays, a new signature
        ga, gb = make_pair(call, alias)
        wa, wb = make_pair(call, alias)
        same(cf(ga, gb), _alias_f(wa, wb))
        same(ga, wa)
        same(gb, wb)
    assert cf.stats["replays"] >= 3 and cf.stats["traces"] == 2
    return cf


def test_dlpack_aliases_of_an_argument_equal_eager_on_every_replay(device):
    if str(device).startswith("cuda") and not hasattr(ag.backends.get_backend(device).xp, "from_dlpack"):
        pytest.skip("no from_dlpack in this CuPy")
    _check_alias(lambda call, alias: _dlpack_pair(device, call, alias))


def test_two_from_numpy_tensors_over_one_array_equal_eager():
    cf = _check_alias(lambda call, alias: _numpy_pair(call, alias, strided=False))
    assert cf.stats["replays"] >= 3


def test_from_numpy_of_an_as_strided_view_equals_eager():
    _check_alias(lambda call, alias: _numpy_pair(call, alias, strided=True))


def test_a_buffer_viewed_twice_through_frombuffer_is_seen_as_shared():
    buf = bytearray(np.arange(N, dtype=np.float32).tobytes())
    cf = ag.compile(_alias_f)
    for _ in range(4):
        buf[:] = np.linspace(-2, 2, N, dtype=np.float32).tobytes()
        a, b = ag.from_numpy(np.frombuffer(buf, np.float32)), ag.from_numpy(np.frombuffer(buf, np.float32))
        got = to_numpy(cf(a, b)).copy()
        buf[:] = np.linspace(-2, 2, N, dtype=np.float32).tobytes()
        a, b = ag.from_numpy(np.frombuffer(buf, np.float32)), ag.from_numpy(np.frombuffer(buf, np.float32))
        same(got, _alias_f(a, b))
    assert cf.stats["replays"] == 3


def test_alias_groups_come_from_byte_ranges():
    from autograd_gpu.compile.state import alias_groups
    x = np.zeros(100, np.float32)
    dl = np.from_dlpack(x)                         # its base is a capsule, not x
    tail = np.from_dlpack(x[50:])
    other = np.zeros(100, np.float32)
    assert alias_groups([x, other, dl, tail]) == [0, 1, 0, 0]
    # a view is compared by its allocation's range (conservative: the halves of one array count as shared)
    assert alias_groups([x[:50], np.from_dlpack(x[50:])]) == [0, 0]
    assert alias_groups([np.from_dlpack(x[:50]), np.from_dlpack(x[50:])]) == [0, 1]     # two foreign halves
    assert alias_groups([other, x[::-1], np.from_dlpack(x[:1])]) == [0, 1, 1]   # negative strides


# --------------------------------------------------------------------------- Python values read
def _x():
    return (ag.tensor([1.0, -2.0, 0.5]),)


def test_the_sign_of_zero_of_a_float_argument_is_in_the_signature():
    def f(x, c):
        return x / c
    cf = ag.compile(f)
    zeros = iter([0.0, -0.0, 0.0, -0.0, -0.0])
    c = [0.0]
    stats = run(cf, f, lambda: (_x()[0], c[0]), [lambda: c.__setitem__(0, next(zeros)) for _ in range(5)])
    assert stats["traces"] == 2 and stats["replays"] == 3


ZERO = 0.0


def test_the_sign_of_zero_of_a_global_is_guarded():
    def f(x):
        return x / ZERO

    def setter(v):
        def change():
            global ZERO
            ZERO = v
        return change
    stats = run(ag.compile(f), f, _x, [setter(v) for v in (0.0, -0.0, 0.0, -0.0)])
    assert stats["traces"] == 2 and stats["replays"] == 2


def test_a_nan_argument_replays_instead_of_retracing_every_call():
    def f(x, c):
        return x * 0 + c
    cf = ag.compile(f)
    for _ in range(4):
        same(cf(_x()[0], float("nan")), f(_x()[0], float("nan")))
    assert cf.stats["traces"] == 1


class Cfg:
    scale = 2.0


def test_a_class_attribute_changed_between_calls_retraces():
    def f(x):
        return x * Cfg.scale

    def setter(v):
        return lambda: setattr(Cfg, "scale", v)
    stats = run(ag.compile(f), f, _x, [setter(v) for v in (2.0, 3.0, 2.0, 4.0, 4.0)])
    assert stats["replays"] >= 2


cfg = types.ModuleType("guards_cfg")     # stands for `import cfg` (a user's config module)
cfg.scale = 2.0
cfg.inner = types.ModuleType("guards_cfg.inner")
cfg.inner.shift = 1.0


def test_a_module_attribute_changed_between_calls_retraces():
    def f(x):
        return x * cfg.scale + cfg.inner.shift

    def setter(v, s):
        def change():
            cfg.scale, cfg.inner.shift = v, s
        return change
    stats = run(ag.compile(f), f, _x, [setter(*v) for v in ((2.0, 1.0), (3.0, 1.0), (3.0, -1.0), (2.0, 1.0),
                                                             (2.0, 1.0))])
    assert stats["replays"] == 2


def test_a_user_module_reached_through_a_real_import_is_guarded(tmp_path, monkeypatch):
    (tmp_path / "guards_cfg_file.py").write_text("scale = 2.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import guards_cfg_file as m
    try:
        g = {"m": m}
        exec("def f(x):\n    return x * m.scale\n", g)
        f = g["f"]
        stats = run(ag.compile(f), f, _x, [lambda v=v: setattr(m, "scale", v) for v in (2.0, 5.0, 5.0, 2.0)])
        assert stats["traces"] == 2
    finally:
        sys.modules.pop("guards_cfg_file", None)


def test_a_function_branching_on_the_argument_type_retraces_per_type():
    def f(x):
        return x * 2 if isinstance(x, nn.Parameter) else x * 3
    kinds = iter([True, False, True, False])
    cur = [True]

    def make():
        t = ag.tensor([1.0, 2.0], requires_grad=True)
        return (nn.Parameter(t) if cur[0] else t,)
    with ag.no_grad():
        stats = run(ag.compile(f), f, make, [lambda: cur.__setitem__(0, next(kinds)) for _ in range(4)])
    assert stats["traces"] == 2 and stats["replays"] == 2


def test_a_value_in_a_deque_in_a_closure_is_guarded():
    q = collections.deque([2.0, 1.0])

    def f(x):
        return x * q[0] + q[-1]
    stats = run(ag.compile(f), f, _x, [lambda v=v: q.__setitem__(0, v) for v in (2.0, 3.0, 3.0, -1.0)] +
                [lambda: q.append(7.0)])
    assert stats["replays"] == 1


def test_a_value_three_dicts_down_is_guarded():
    d = {"a": {"b": {"c": 2.0, "l": [[1.0]]}}}

    def f(x):
        return x * d["a"]["b"]["c"] + d["a"]["b"]["l"][0][0]

    def setter(c, v):
        def change():
            d["a"]["b"]["c"] = c
            d["a"]["b"]["l"][0][0] = v
        return change
    stats = run(ag.compile(f), f, _x, [setter(*v) for v in ((2.0, 1.0), (3.0, 1.0), (3.0, 1.0), (3.0, 4.0))])
    assert stats["replays"] == 1


def test_requires_grad_toggled_inside_the_function_is_redone_on_replay():
    w = ag.tensor([1.0, 2.0], requires_grad=True)

    def f(x):
        w.requires_grad_(not w.requires_grad)
        return (x * 2).sum() if w.requires_grad else (x * 3).sum()
    cf = ag.compile(f)
    got = [(float(cf(*_x())), w.requires_grad) for _ in range(6)]
    w.requires_grad_(True)
    want = [(float(f(*_x())), w.requires_grad) for _ in range(6)]
    assert got == want
    assert cf.stats["replays"] == 4


# --------------------------------------------------------------------------- host random generators
def _draws(fn, line_of):
    cf = ag.compile(fn)
    with pytest.warns(RuntimeWarning) as rec:
        outs = [to_numpy(cf(*_x())).copy() for _ in range(4)]
    msgs = [str(w.message) for w in rec if "ag.compile" in str(w.message)]
    assert len(msgs) == 1 and line_of in msgs[0] and "runs eagerly" in msgs[0], msgs
    assert cf.stats["replays"] == 0 and cf.stats["eager"] == 3
    assert len({o.tobytes() for o in outs}) == 4          # a fresh draw on every call
    return msgs[0]


def _line(fn, text):
    import inspect
    lines, start = inspect.getsourcelines(fn)
    return f"{__file__}:{start + next(i for i, l in enumerate(lines) if text in l)}"


def test_python_random_inside_the_function_warns_with_the_line_and_runs_eagerly():
    def f(x):
        return x * random.random()
    _draws(f, _line(f, "random.random()"))


def test_a_random_method_reached_through_python_code_names_the_users_line():
    def f(x):
        return x * random.uniform(1, 2) + random.gauss(0, 1)
    _draws(f, _line(f, "random.uniform"))


def test_numpy_random_inside_the_function_warns_with_the_line_and_runs_eagerly():
    def f(x):
        return x * float(np.random.rand())
    _draws(f, _line(f, "np.random.rand"))


def test_a_generator_in_a_closure_is_caught_by_its_state():
    rng = np.random.default_rng(0)

    def f(x):
        return x + ag.tensor(rng.standard_normal(3).astype(np.float32))
    msg = _draws(f, f"{__file__}:")
    assert "Generator" in msg


def test_a_draw_through_a_name_imported_before_the_trace_is_caught():
    from random import random as draw

    def f(x):
        return x * draw()
    msg = _draws(f, _line(f, "def f"))
    assert "global generator of random" in msg


def test_the_backends_generators_still_replay():
    def f(x):
        return x * ag.rand(3)
    cf = ag.compile(f)
    ag.manual_seed(0)
    got = [to_numpy(cf(*_x())).copy() for _ in range(4)]
    ag.manual_seed(0)
    want = [to_numpy(f(*_x())) for _ in range(4)]
    for g, w in zip(got, want):
        same(g, w)
    assert cf.stats["replays"] == 3


def test_guards_keep_the_fast_path_for_an_unchanged_state():
    q = collections.deque([2.0])

    class Holder:
        factor = 3.0

    def f(x):
        return x * q[0] * Holder.factor * cfg.scale
    cf = ag.compile(f)
    for _ in range(5):
        cf(*_x())
    assert cf._fast is not None and cf.stats["replays"] == 4


def test_device_memory_imported_from_elsewhere_is_compared_by_range():
    # CuPy's shape of things: an array's MemoryPointer (ptr) and its allocation (mem: ptr, size); memory
    # CuPy did not allocate (DLPack, __cuda_array_interface__) comes as another memory class
    from autograd_gpu.compile.state import alias_groups

    class Memory:
        def __init__(self, ptr, size):
            self.ptr, self.size = ptr, size

    class UnownedMemory(Memory):
        pass

    class Pointer:
        def __init__(self, mem, offset=0):
            self.mem, self.ptr = mem, mem.ptr + offset

    class DeviceArray:
        base, itemsize = None, 4

        def __init__(self, ptr, n, strides=(4,)):
            self.data, self.shape, self.strides = ptr, (n,), strides

    alloc = Memory(1 << 20, 4096)
    owned = DeviceArray(Pointer(alloc), 1024)
    view = DeviceArray(Pointer(alloc, 400), 10)                  # same allocation object
    inside = DeviceArray(Pointer(UnownedMemory((1 << 20) + 2048, 64)), 16)
    outside = DeviceArray(Pointer(UnownedMemory(1 << 24, 64)), 16)
    other = DeviceArray(Pointer(Memory(1 << 22, 4096)), 1024)
    assert alias_groups([owned, other, view, inside, outside]) == [0, 1, 0, 0, 4]


class Mode(enum.Enum):
    SLOW = 1
    FAST = 2


MODE = Mode.SLOW


def test_a_global_switched_between_two_members_of_a_class_it_also_names_retraces():
    # the walk reaches both members through the class; which one the global holds must still count
    def f(x):
        return x * 2 if MODE is Mode.FAST else x * 3

    def setter(m):
        def change():
            global MODE
            MODE = m
        return change
    stats = run(ag.compile(f), f, _x, [setter(m) for m in (Mode.SLOW, Mode.FAST, Mode.SLOW, Mode.FAST)])
    assert stats["traces"] == 2 and stats["replays"] == 2


def test_an_unseeded_generator_made_inside_runs_eagerly_and_a_seeded_one_replays():
    def f(x):
        return x + ag.tensor(np.random.default_rng().standard_normal(3).astype(np.float32))
    _draws(f, _line(f, "default_rng()"))

    def g(x):
        return x + ag.tensor(np.random.default_rng(7).standard_normal(3).astype(np.float32))
    stats = run(ag.compile(g), g, _x, [lambda: None] * 4)
    assert stats["replays"] == 3
