"""ag.bool, ag.Generator (generator= on the random functions, nn.init, DataLoader), ag.randperm and
ag.multinomial, compared with PyTorch where its behaviour is deterministic (names, errors, defaults)."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.init as init
from autograd_gpu.data import DataLoader, TensorDataset

try:
    import torch
except ImportError:            # pragma: no cover - torch is in the dev environment
    torch = None


def _np(t):
    return t.numpy()          # on a GPU an explicit read, which also reports the device-side checks


# --------------------------------------------------------------------------- ag.bool
def test_bool_dtype():
    assert ag.bool is ag.bool_
    x = ag.zeros(3, dtype=ag.bool)
    assert x.dtype == ag.bool and str(ag.bool) == "bool"
    assert ag.tensor([0.0, 2.0]).to(ag.bool).tolist() == [False, True]
    assert ag.tensor([0, 3]).bool().dtype == ag.bool
    assert (ag.ones(2) > 0).dtype == ag.bool
    assert isinstance(True, bool)          # the builtin is untouched here (ag.bool lives in ag's namespace)


# --------------------------------------------------------------------------- the Generator object
def test_generator_seeding_api():
    g = ag.Generator()
    assert str(g.device) == "cpu" and g.initial_seed() == 67280421310721     # PyTorch's default seed
    assert g.manual_seed(5) is g and g.initial_seed() == 5
    assert g.manual_seed(-5).initial_seed() == 2 ** 64 - 5                   # as torch: modulo 2**64
    s = g.seed()
    assert isinstance(s, int) and g.initial_seed() == s
    if torch is not None:
        assert torch.Generator().initial_seed() == ag.Generator().initial_seed()
        assert torch.Generator().manual_seed(-5).initial_seed() == ag.Generator().manual_seed(-5).initial_seed()
    for bad, exc in ((1.5, TypeError), (True, TypeError), ("1", TypeError), (2 ** 64, ValueError),
                     (-2 ** 63 - 1, ValueError)):
        with pytest.raises(exc, match="manual_seed"):
            g.manual_seed(bad)
    with pytest.raises(TypeError, match="expected a device"):
        ag.Generator(3)


@pytest.mark.parametrize("make", [
    lambda g, d: ag.rand(3, 4, generator=g, device=d),
    lambda g, d: ag.randn(5, generator=g, device=d, dtype=ag.float64),
    lambda g, d: ag.randn(2, generator=g, device=d, dtype=ag.complex64),
    lambda g, d: ag.randint(0, 100, (6,), generator=g, device=d),
    lambda g, d: ag.randint(7, size=(3,), generator=g, device=d),
    lambda g, d: ag.randperm(9, generator=g, device=d),
    lambda g, d: ag.rand_like(ag.zeros(2, 3, device=d), generator=g),
    lambda g, d: ag.randn_like(ag.zeros(4, device=d), generator=g),
    lambda g, d: ag.multinomial(ag.ones(3, 5, device=d), 3, generator=g),
    lambda g, d: ag.multinomial(ag.ones(5, device=d), 8, True, generator=g),
    lambda g, d: ag.ones(5, device=d).multinomial(2, generator=g),
], ids=["rand", "randn", "randn_complex", "randint", "randint_high", "randperm", "rand_like", "randn_like",
        "multinomial", "multinomial_repl", "Tensor.multinomial"])
def test_generators_seeded_alike_draw_alike(device, make):
    a = make(ag.Generator(device).manual_seed(7), device)
    b = make(ag.Generator(device).manual_seed(7), device)
    c = make(ag.Generator(device).manual_seed(8), device)
    assert a.device == ag.device(device)
    np.testing.assert_array_equal(_np(a), _np(b))
    if a.numel() >= 5 and a.dtype != ag.int64 or a.numel() >= 8:
        assert not np.array_equal(_np(a), _np(c))


def test_generator_leaves_the_global_rng_alone(device):
    ag.manual_seed(0)
    want = _np(ag.rand(6, device=device))
    ag.manual_seed(0)
    g = ag.Generator(device).manual_seed(123)
    ag.rand(10, generator=g, device=device)
    ag.multinomial(ag.ones(4, device=device), 2, generator=g)
    init.normal_(ag.zeros(3, device=device), generator=g)
    np.testing.assert_array_equal(_np(ag.rand(6, device=device)), want)


def test_generator_draws_advance(device):
    g = ag.Generator(device).manual_seed(1)
    assert not np.array_equal(_np(ag.rand(8, generator=g, device=device)), _np(ag.rand(8, generator=g, device=device)))


def test_get_state_set_state_replay(device):
    g = ag.Generator(device).manual_seed(3)
    ag.rand(5, generator=g, device=device)
    state = g.get_state()
    assert state.dtype == ag.uint8 and state.device.type == "cpu" and state.ndim == 1
    first = _np(ag.randn(7, generator=g, device=device))
    ag.rand(3, generator=g, device=device)
    assert g.set_state(state) is g
    np.testing.assert_array_equal(_np(ag.randn(7, generator=g, device=device)), first)
    assert g.initial_seed() == 3
    other = ag.Generator(device).set_state(state)        # a state moves to another generator of the kind
    g.set_state(state)
    np.testing.assert_array_equal(_np(ag.rand(4, generator=other, device=device)),
                                  _np(ag.rand(4, generator=g, device=device)))


def test_set_state_errors(device):
    g = ag.Generator(device)
    with pytest.raises(TypeError, match="uint8 CPU tensor"):
        g.set_state(ag.zeros(45))
    with pytest.raises(TypeError, match="uint8 CPU tensor"):
        g.set_state(np.zeros(45, np.uint8))
    with pytest.raises(ValueError, match="-byte state"):
        g.set_state(ag.zeros(3, dtype=ag.uint8))


def test_generator_on_the_wrong_device(device):
    if device == "cpu":
        with pytest.raises(TypeError, match="expected generator to be an ag.Generator"):
            ag.rand(2, generator=3)
        with pytest.raises(TypeError, match="ag.Generator"):
            ag.multinomial(ag.ones(2), 1, generator=np.random.default_rng(0))
        return
    dev = ag.device(device)
    with pytest.raises(RuntimeError, match=f"expected a generator on {dev} .*got one on cpu"):
        ag.rand(2, generator=ag.Generator(), device=device)
    with pytest.raises(RuntimeError, match=f"expected a generator on cpu .*got one on {dev}"):
        ag.randn(2, generator=ag.Generator(device))
    with pytest.raises(RuntimeError, match="multinomial: expected a generator on cpu"):
        ag.multinomial(ag.ones(3), 1, generator=ag.Generator(device))
    with pytest.raises(RuntimeError, match="uniform_: expected a generator"):
        init.uniform_(ag.zeros(3, device=device), generator=ag.Generator())
    with pytest.raises(ValueError, match="DataLoader: expected a CPU generator"):
        DataLoader(TensorDataset(ag.arange(4)), batch_size=2, shuffle=True, generator=ag.Generator(device))


# --------------------------------------------------------------------------- nn.init and DataLoader
@pytest.mark.parametrize("fn", [
    lambda t, g: init.uniform_(t, -1, 2, generator=g),
    lambda t, g: init.normal_(t, 1.0, 0.5, generator=g),
    lambda t, g: init.trunc_normal_(t, std=2.0, generator=g),
    lambda t, g: init.xavier_uniform_(t, generator=g),
    lambda t, g: init.xavier_normal_(t, generator=g),
    lambda t, g: init.kaiming_uniform_(t, generator=g),
    lambda t, g: init.kaiming_normal_(t, mode="fan_out", generator=g),
    lambda t, g: init.orthogonal_(t, generator=g),
], ids=["uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
        "kaiming_normal_", "orthogonal_"])
def test_init_takes_a_generator(device, fn):
    a = fn(ag.zeros(4, 6, device=device), ag.Generator(device).manual_seed(11))
    b = fn(ag.zeros(4, 6, device=device), ag.Generator(device).manual_seed(11))
    c = fn(ag.zeros(4, 6, device=device), ag.Generator(device).manual_seed(12))
    np.testing.assert_array_equal(_np(a), _np(b))
    assert not np.array_equal(_np(a), _np(c))


def test_init_generator_keyword_as_torch():
    if torch is None:
        pytest.skip("torch is not installed")
    import inspect
    for name in ("uniform_", "normal_", "trunc_normal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
                 "kaiming_normal_", "orthogonal_"):
        ours = list(inspect.signature(getattr(init, name)).parameters)
        theirs = list(inspect.signature(getattr(torch.nn.init, name)).parameters)
        assert ours == theirs, name


def test_dataloader_takes_a_generator():
    ds = TensorDataset(ag.arange(20))

    def epoch(loader):
        return [v for (b,) in loader for v in b.tolist()]
    a = epoch(DataLoader(ds, batch_size=6, shuffle=True, generator=ag.Generator().manual_seed(4)))
    b = epoch(DataLoader(ds, batch_size=6, shuffle=True, generator=ag.Generator().manual_seed(4)))
    assert a == b and sorted(a) == list(range(20)) and a != list(range(20))
    g = ag.Generator().manual_seed(4)
    loader = DataLoader(ds, batch_size=6, shuffle=True, generator=g)
    first, second = epoch(loader), epoch(loader)
    assert first == a and second != first                 # a new order each epoch, from the generator
    g.manual_seed(4)                                      # reseeding the generator restarts the loader's orders
    assert epoch(loader) == a
    # ints and NumPy generators still work
    assert sorted(epoch(DataLoader(ds, batch_size=6, shuffle=True, generator=3))) == list(range(20))
    assert sorted(epoch(DataLoader(ds, batch_size=6, shuffle=True, generator=np.random.default_rng(3)))) == \
        list(range(20))


def test_randperm():
    p = ag.randperm(10)
    assert p.dtype == ag.int64 and sorted(p.tolist()) == list(range(10))
    assert ag.randperm(0).shape == (0,)
    assert ag.randperm(5, dtype=ag.int32).dtype == ag.int32
    with pytest.raises(RuntimeError, match="n >= 0"):
        ag.randperm(-1)
    with pytest.raises(TypeError, match="expected an int"):
        ag.randperm(2.0)


# --------------------------------------------------------------------------- multinomial
def _chi2(counts, p):
    expected = counts.sum() * p
    keep = expected > 0
    return float((((counts - expected) ** 2)[keep] / expected[keep]).sum())


def test_multinomial_distribution_with_replacement(device):
    w = np.array([[1.0, 2.0, 0.0, 5.0, 2.0], [0.0, 0.0, 3.0, 1.0, 0.0]])
    g = ag.Generator(device).manual_seed(0)
    s = _np(ag.multinomial(ag.tensor(w, device=device), 20000, replacement=True, generator=g))
    assert s.shape == (2, 20000) and s.dtype == np.int64
    for row in range(2):
        counts = np.bincount(s[row], minlength=5)
        p = w[row] / w[row].sum()
        assert counts[p == 0].sum() == 0                  # zero weights are never drawn
        assert _chi2(counts, p) < 25.0                    # 4 degrees of freedom: p < 1e-4


def test_multinomial_distribution_without_replacement(device):
    w = np.array([4.0, 1.0, 3.0, 2.0])
    p = w / w.sum()
    n = 20000
    g = ag.Generator(device).manual_seed(1)
    s = _np(ag.multinomial(ag.tensor(w, device=device).expand(n, 4), 2, generator=g))
    assert s.shape == (n, 2) and (s[:, 0] != s[:, 1]).all()
    # the first draw follows p; the second P(j) = sum_i p_i p_j / (1 - p_i), i != j (sequential draws)
    assert _chi2(np.bincount(s[:, 0], minlength=4), p) < 25.0
    second = np.array([sum(p[i] * p[j] / (1 - p[i]) for i in range(4) if i != j) for j in range(4)])
    assert _chi2(np.bincount(s[:, 1], minlength=4), second) < 25.0


def test_multinomial_without_replacement_has_no_repeats(device):
    w = ag.rand(50, 30, device=device, generator=ag.Generator(device).manual_seed(2)) + 0.01
    s = _np(ag.multinomial(w, 30))
    assert (np.sort(s, axis=1) == np.arange(30)).all()
    s = _np(ag.multinomial(w, 7))
    assert all(len(set(r)) == 7 for r in s.tolist())
    # zero-weight categories only after every positive one (PyTorch draws them too when it must)
    z = _np(ag.multinomial(ag.tensor([[0.0, 1.0, 0.0, 2.0]] * 20, device=device), 4))
    assert (np.sort(z[:, :2], axis=1) == [1, 3]).all() and (np.sort(z[:, 2:], axis=1) == [0, 2]).all()


def test_multinomial_shapes_and_dtypes(device):
    assert ag.multinomial(ag.ones(5, device=device), 3).shape == (3,)
    assert ag.multinomial(ag.ones(4, 5, device=device), 3, True).shape == (4, 3)
    assert ag.multinomial(ag.ones(0, 5, device=device), 2).shape == (0, 2)
    assert ag.multinomial(ag.ones(1, device=device), 5, replacement=True).tolist() == [0] * 5
    for dt in (ag.float16, ag.bfloat16, ag.float32, ag.float64):
        out = ag.multinomial(ag.tensor([0.0, 1.0], dtype=dt, device=device), 1)
        assert out.dtype == ag.int64 and out.tolist() == [1]
    w = ag.tensor([1.0, 2.0], device=device, requires_grad=True)
    out = ag.multinomial(w, 2)
    assert not out.requires_grad and out.grad_fn is None     # not differentiable, as PyTorch's


def test_multinomial_vmap():
    w = ag.rand(6, 4) + 0.1
    out = ag.func.vmap(lambda r: ag.multinomial(r, 4), randomness="same")(w)
    assert out.shape == (6, 4) and (np.sort(out.numpy(), axis=1) == np.arange(4)).all()
    with pytest.raises(RuntimeError, match="randomness"):
        ag.func.vmap(lambda r: ag.multinomial(r, 2))(w)


_ERRORS = [
    (lambda m, t: m(t([1.0, -1.0]), 1), "probability tensor contains either `inf`, `nan` or element < 0"),
    (lambda m, t: m(t([1.0, float("inf")]), 1), "probability tensor contains either `inf`, `nan` or element < 0"),
    (lambda m, t: m(t([float("nan"), 1.0]), 1, True), "probability tensor contains either `inf`, `nan` or element < 0"),
    (lambda m, t: m(t([[1.0, 1.0], [0.0, 0.0]]), 1), r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
    (lambda m, t: m(t([1.0, 1.0]), 3), "cannot sample n_sample > prob_dist.size\\(-1\\) samples without replacement"),
    (lambda m, t: m(t([[], []]), 1), "cannot sample n_sample > prob_dist.size\\(-1\\) samples without replacement"),
    (lambda m, t: m(t([1.0, 1.0]), 0), "cannot sample n_sample <= 0 samples"),
    (lambda m, t: m(t(1.0), 1), "prob_dist must be 1 or 2 dim"),
    (lambda m, t: m(t([[[1.0]]]), 1), "prob_dist must be 1 or 2 dim"),
    (lambda m, t: m(t([1, 2]), 1), "only supports floating-point dtypes for input"),
]


@pytest.mark.parametrize("case", range(len(_ERRORS)))
def test_multinomial_errors_as_torch(device, case):
    call, message = _ERRORS[case]
    with pytest.raises(RuntimeError, match=message):
        out = call(ag.multinomial, lambda v: ag.tensor(v, device=device))
        out.numpy()           # a GPU reports the checks on values at the next explicit read
    if torch is not None and device == "cpu":
        with pytest.raises(RuntimeError, match=message):
            call(torch.multinomial, torch.tensor)


def test_multinomial_no_categories_with_replacement():
    with pytest.raises(RuntimeError, match="at least one category"):
        ag.multinomial(ag.zeros(2, 0), 1, replacement=True)
    with pytest.raises(TypeError, match="num_samples"):
        ag.multinomial(ag.ones(2), 1.0)


def test_multinomial_matches_torch_on_certain_draws():
    if torch is None:
        pytest.skip("torch is not installed")
    w = [[0.0, 3.0, 0.0], [1.0, 0.0, 0.0]]
    assert ag.multinomial(ag.tensor(w), 4, True).tolist() == torch.multinomial(torch.tensor(w), 4, True).tolist()
    assert ag.multinomial(ag.tensor(w), 1).tolist() == torch.multinomial(torch.tensor(w), 1).tolist()


# --------------------------------------------------------------------------- normal, bernoulli, in-place fills
def test_normal_forms_and_moments(device):
    g = ag.Generator(device).manual_seed(5)
    m = ag.tensor([[-3.0], [4.0]], device=device)
    s = ag.tensor([0.5, 2.0, 1.0], device=device)
    x = ag.normal(m.expand(2, 3), s, generator=g)
    assert x.shape == (2, 3) and x.device == ag.device(device)
    big = _np(ag.normal(ag.full((20000,), 2.0, device=device), 3.0, generator=g))
    assert abs(big.mean() - 2.0) < 0.1 and abs(big.std() - 3.0) < 0.1
    assert ag.normal(1.0, ag.ones(4, device=device)).shape == (4,)
    y = ag.normal(2.0, 0.5, (3, 2), generator=ag.Generator(device), device=device, dtype=ag.float64)
    assert y.shape == (3, 2) and y.dtype == ag.float64
    np.testing.assert_array_equal(_np(ag.normal(2.0, 0.5, (5,), generator=ag.Generator(device).manual_seed(1),
                                                device=device)),
                                  _np(ag.normal(2.0, 0.5, (5,), generator=ag.Generator(device).manual_seed(1),
                                                device=device)))
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        ag.normal(ag.zeros(2, device=device), -1.0)
    with pytest.raises(TypeError, match="size="):
        ag.normal(0.0, 1.0)


def test_normal_and_bernoulli_gradients_are_zero_as_torch():
    m = ag.zeros(3, requires_grad=True)
    s = ag.ones(3, requires_grad=True)
    y = ag.normal(m, s)
    assert y.requires_grad
    y.sum().backward()
    assert m.grad.tolist() == [0.0] * 3 and s.grad.tolist() == [0.0] * 3
    p = ag.full((3,), 0.5, requires_grad=True)
    ag.bernoulli(p).sum().backward()
    assert p.grad.tolist() == [0.0] * 3
    if torch is not None:
        tm = torch.zeros(3, requires_grad=True)
        torch.normal(tm, torch.ones(3)).sum().backward()
        assert tm.grad.tolist() == m.grad.tolist()


def test_bernoulli(device):
    g = ag.Generator(device).manual_seed(2)
    p = ag.tensor([0.0, 0.25, 1.0], device=device).expand(20000, 3)
    d = _np(ag.bernoulli(p, generator=g))
    assert d.dtype == np.float32 and set(np.unique(d)) <= {0.0, 1.0}
    assert d[:, 0].sum() == 0 and d[:, 2].all() and abs(d[:, 1].mean() - 0.25) < 0.02
    q = _np(ag.zeros(20000, device=device).bernoulli(0.75, generator=g))
    assert abs(q.mean() - 0.75) < 0.02
    with pytest.raises(RuntimeError, match=r"p in \[0, 1\]"):
        ag.bernoulli(ag.tensor([0.5, 1.5], device=device)).numpy()
    with pytest.raises(RuntimeError, match="floating-point"):
        ag.bernoulli(ag.tensor([1, 0], device=device))


def test_inplace_fills(device):
    g = ag.Generator(device)
    x = ag.zeros(20000, device=device)
    assert x.uniform_(-1.0, 3.0, generator=g) is x
    v = _np(x)
    assert v.min() >= -1 and v.max() < 3 and abs(v.mean() - 1.0) < 0.05
    v = _np(x.uniform_(**{"from": 2.0, "to": 4.0}))
    assert v.min() >= 2 and v.max() < 4
    v = _np(x.normal_(5.0, 0.5, generator=g))
    assert abs(v.mean() - 5.0) < 0.05 and abs(v.std() - 0.5) < 0.05
    v = _np(x.exponential_(2.0, generator=g))
    assert v.min() >= 0 and abs(v.mean() - 0.5) < 0.03
    v = _np(x.bernoulli_(0.3, generator=g))
    assert set(np.unique(v)) <= {0.0, 1.0} and abs(v.mean() - 0.3) < 0.02
    v = _np(x.bernoulli_(ag.full((20000,), 0.9, device=device)))
    assert abs(v.mean() - 0.9) < 0.02
    v = _np(x.random_(3, 7, generator=g))
    assert set(np.unique(v)) == {3.0, 4.0, 5.0, 6.0}
    assert set(np.unique(_np(x.random_(2)))) == {0.0, 1.0}
    v = _np(x.random_())
    assert v.min() >= 0 and v.max() <= 2 ** 24 and (v == np.round(v)).all()
    i = ag.zeros(1000, dtype=ag.int64, device=device).random_(-5, 5)
    assert i.dtype == ag.int64 and set(np.unique(_np(i))) == set(range(-5, 5))
    assert set(np.unique(_np(ag.zeros(100, dtype=ag.bool, device=device).random_()))) == {False, True}
    h = ag.zeros(50, dtype=ag.float16, device=device).normal_()
    assert h.dtype == ag.float16
    a = ag.zeros(6, device=device)
    b = ag.zeros(6, device=device)
    a.normal_(generator=ag.Generator(device).manual_seed(9))
    b.normal_(generator=ag.Generator(device).manual_seed(9))
    np.testing.assert_array_equal(_np(a), _np(b))


def test_inplace_fill_errors_as_torch():
    cases = [
        (lambda t: t.zeros(3).uniform_(2, 1), "uniform_"),
        (lambda t: t.zeros(3).normal_(0, -1), "std >= 0.0"),
        (lambda t: t.zeros(3).bernoulli_(1.5), r"p to be in \[0, 1\]"),
        (lambda t: t.zeros(3).exponential_(0), "lambda > 0.0"),
        (lambda t: t.zeros(3).random_(4, 2), "'from' to be less than 'to'"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError, match=message):
            call(ag)
        if torch is not None:
            with pytest.raises(RuntimeError, match=message):
                call(torch)
    with pytest.raises(RuntimeError, match="uniform_: a leaf tensor that requires grad"):
        ag.ones(2, requires_grad=True).uniform_()
    w = ag.ones(2, requires_grad=True)
    with ag.no_grad():
        w.normal_()                            # as nn.init does
    with pytest.raises(TypeError, match="floating-point"):
        ag.zeros(2, dtype=ag.int64).uniform_()


def test_inplace_fill_in_a_graph_gives_zero_gradient():
    a = ag.ones(3, requires_grad=True)
    x = a * 2
    x.uniform_()
    (x * 3).sum().backward()
    assert a.grad.tolist() == [0.0, 0.0, 0.0]


# --------------------------------------------------------------------------- data: Subset, random_split, RandomSampler
def test_random_split():
    ds = TensorDataset(ag.arange(10).float())
    a, b = ag.data.random_split(ds, [7, 3], generator=ag.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3 and sorted(a.indices + b.indices) == list(range(10))
    a2, _ = ag.data.random_split(ds, [7, 3], generator=ag.Generator().manual_seed(0))
    assert a.indices == a2.indices
    assert float(a[0][0].item()) == a.indices[0]
    batch = next(iter(DataLoader(a, batch_size=4)))
    assert batch[0].tolist() == [float(i) for i in a.indices[:4]]
    for lengths in ([0.5, 0.5], [0.3, 0.3, 0.4], [0.1, 0.9]):
        ours = [len(s) for s in ag.data.random_split(range(11), lengths)]
        assert sum(ours) == 11
        if torch is not None:
            assert ours == [len(s) for s in torch.utils.data.random_split(range(11), lengths)]
    with pytest.raises(ValueError, match="does not equal the length"):
        ag.data.random_split(ds, [3, 3])
    with pytest.raises(TypeError, match="ag.Generator"):
        ag.data.random_split(ds, [5, 5], generator=3)


def test_random_sampler():
    ds = TensorDataset(ag.arange(10).float())
    s = ag.data.RandomSampler(ds, generator=ag.Generator().manual_seed(1))
    order = list(s)
    assert len(s) == 10 and sorted(order) == list(range(10)) and order != list(range(10))
    assert list(ag.data.RandomSampler(ds, generator=ag.Generator().manual_seed(1))) == order
    long = list(ag.data.RandomSampler(ds, num_samples=25))
    assert len(long) == 25 and sorted(long[:10]) == list(range(10)) and sorted(long[10:20]) == list(range(10))
    rep = list(ag.data.RandomSampler(ds, replacement=True, num_samples=200))
    assert len(rep) == 200 and set(rep) == set(range(10))
    loader = DataLoader(ds, batch_size=4, sampler=ag.data.RandomSampler(ds, generator=ag.Generator().manual_seed(1)))
    assert [v for (b,) in loader for v in b.tolist()] == [float(i) for i in order]
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        ag.data.RandomSampler(ds, num_samples=0)
    with pytest.raises(TypeError, match="replacement should be a boolean"):
        ag.data.RandomSampler(ds, replacement=1)
    if torch is not None:
        import inspect
        assert list(inspect.signature(ag.data.RandomSampler).parameters) == \
            list(inspect.signature(torch.utils.data.RandomSampler).parameters)
        assert list(inspect.signature(ag.data.random_split).parameters) == \
            list(inspect.signature(torch.utils.data.random_split).parameters)


# --------------------------------------------------------------------------- under ag.compile
def test_compiled_draws_follow_the_generator(device):
    g = ag.Generator(device).manual_seed(0)

    @ag.compile
    def f(x, w):
        return x + ag.rand(3, generator=g, device=device), ag.multinomial(w, 2, generator=g)
    x, w = ag.zeros(3, device=device), ag.ones(4, 5, device=device)
    got = [f(x, w) for _ in range(4)]
    g.manual_seed(0)
    want = [(ag.rand(3, generator=g, device=device), ag.multinomial(w, 2, generator=g)) for _ in range(4)]
    for (a, i), (b, j) in zip(got, want):
        np.testing.assert_array_equal(_np(a), _np(b))
        np.testing.assert_array_equal(_np(i), _np(j))
    g.manual_seed(0)                                  # reseeding restarts what the compiled program draws
    np.testing.assert_array_equal(_np(f(x, w)[0]), _np(want[0][0]))


def test_generator_draws_inside_vmap_follow_randomness():
    g = ag.Generator().manual_seed(0)
    w = ag.rand(4, 3) + 0.1
    with pytest.raises(RuntimeError, match="randomness='error'"):
        ag.func.vmap(lambda r: ag.multinomial(r, 2, generator=g))(w)
    with pytest.raises(RuntimeError, match="randomness='error'"):
        ag.func.vmap(lambda r: r + ag.rand(3, generator=g))(w)
    out = ag.func.vmap(lambda r: r + ag.rand(3, generator=g), randomness="same")(w)
    assert out.shape == (4, 3)
