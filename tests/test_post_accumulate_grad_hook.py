"""Tensor.register_post_accumulate_grad_hook: runs on a leaf as soon as its .grad is final, in the
middle of backward (what DistributedDataParallel overlaps its all-reduces with)."""
import pytest

import autograd_gpu as ag


def test_runs_after_grad_is_written_and_before_earlier_layers_finish():
    ag.manual_seed(0)
    x = ag.randn(3, 4, requires_grad=True)
    w1, w2 = ag.randn(4, 5, requires_grad=True), ag.randn(5, 2, requires_grad=True)
    events = []
    w2.register_post_accumulate_grad_hook(lambda t: events.append(("w2", t.grad.shape)))
    w1.register_post_accumulate_grad_hook(lambda t: events.append(("w1", t.grad.shape)))
    x.register_hook(lambda g: events.append(("x", None)))
    (ag.tanh((x * 2.0) @ w1) @ w2).sum().backward()     # x's gradient needs one more node than w1's
    assert events == [("w2", (5, 2)), ("w1", (4, 5)), ("x", None)]


def test_sees_the_total_of_a_leaf_used_twice():
    w = ag.tensor([1.0, 2.0], requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.tolist()))
    ((w * 3.0).sum() + (w * w).sum()).backward()
    assert seen == [[5.0, 7.0]]
    ((w * 3.0).sum()).backward()               # accumulates
    assert seen[-1] == [8.0, 10.0]


def test_gradients_equal_those_without_hooks():
    ag.manual_seed(1)
    model = ag.nn.Sequential(ag.nn.Linear(3, 4), ag.nn.Tanh(), ag.nn.Linear(4, 1))
    x = ag.randn(5, 3)
    model(x).sum().backward()
    plain = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    handles = [p.register_post_accumulate_grad_hook(lambda t: None) for p in model.parameters()]
    model(x).sum().backward()
    for p, g in zip(model.parameters(), plain):
        assert (p.grad.numpy() == g).all()
    for h in handles:
        h.remove()


def test_removed_hook_does_not_run_and_non_leaves_refuse():
    w = ag.ones(2, requires_grad=True)
    calls = []
    h = w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    h.remove()
    w.sum().backward()
    assert calls == []
    with pytest.raises(RuntimeError, match="leaf"):
        (w * 2.0).register_post_accumulate_grad_hook(lambda t: None)
    with pytest.raises(RuntimeError, match="does not require grad"):
        ag.ones(2).register_post_accumulate_grad_hook(lambda t: None)


def test_queue_callback_runs_when_backward_ends():
    from autograd_gpu.autograd.engine import queue_callback
    w = ag.ones(2, requires_grad=True)
    order = []
    w.register_post_accumulate_grad_hook(lambda t: (order.append("hook"), queue_callback(lambda: order.append("end"))))
    (w * 2.0).sum().backward()
    assert order == ["hook", "end"]
    with pytest.raises(RuntimeError, match="no backward"):
        queue_callback(lambda: None)


# -- review of the mid-backward finish (aliasing, cost, grad(), exceptions, threads) ---------------

def _sum_times(y, c):
    return (y * c).sum()        # Mul's backward makes a fresh array: no broadcast view to copy anyway


def test_hook_writing_grad_in_place_leaks_into_no_other_gradient():
    # Add's backward hands the same gradient to both inputs: w was finished first with that very
    # tensor as .grad, and a hook zeroing it in place zeroed the pending gradient of v * 3 (and of u)
    c = ag.tensor([1.0, 1.0])
    for scale in (0.0, 10.0):
        w = ag.tensor([1.0, 2.0], requires_grad=True)
        v = ag.tensor([1.0, 1.0], requires_grad=True)
        u = ag.tensor([5.0, 5.0], requires_grad=True)
        w.register_post_accumulate_grad_hook(lambda t: t.grad.mul_(scale))
        _sum_times(w + v * 3.0, c).backward()
        assert v.grad.tolist() == [3.0, 3.0] and w.grad.tolist() == [scale, scale]
        _sum_times(w + u, c).backward()                  # another leaf, finished at the end
        assert u.grad.tolist() == [1.0, 1.0]


def test_optimizer_step_in_the_hook_keeps_other_gradients():
    # PyTorch's optimizer-in-backward recipe, with zero_grad(set_to_none=False): zeros written in place
    ag.manual_seed(0)
    a, b = ag.randn(3, requires_grad=True), ag.randn(3, requires_grad=True)
    opts = {id(p): ag.optim.SGD([p], lr=0.1) for p in (a, b)}

    def step(t):
        opts[id(t)].step()
        opts[id(t)].zero_grad(set_to_none=False)
    a.register_post_accumulate_grad_hook(step)
    a0, b0 = a.numpy().copy(), b.numpy().copy()
    _sum_times(a + ag.tanh(b) * 2.0, ag.ones(3)).backward()
    assert abs(a.numpy() - (a0 - 0.1)).max() < 1e-6
    want = 2.0 * (1.0 - __import__("numpy").tanh(b0) ** 2)
    assert abs(b.grad.numpy() - want).max() < 1e-6


def test_graphs_that_reach_no_hooked_leaf_make_no_walk(monkeypatch):
    from autograd_gpu.autograd import engine
    calls = []
    real = engine._first_senders
    monkeypatch.setattr(engine, "_first_senders", lambda roots: calls.append(1) or real(roots))
    hooked = ag.ones(2, requires_grad=True)
    hooked.register_post_accumulate_grad_hook(lambda t: None)
    x = ag.ones(2, requires_grad=True)
    y = x
    for _ in range(50):
        y = ag.tanh(y) * 2.0
    y.sum().backward()
    assert calls == [] and x.grad is not None
    ((hooked * x).sum() * 2.0).backward()
    assert calls == [1]


def test_leaves_without_post_hooks_are_finished_at_the_end():
    w = ag.ones(2, requires_grad=True)
    x = ag.ones(2, requires_grad=True)
    order = []
    w.register_post_accumulate_grad_hook(lambda t: order.append("w"))
    x.register_hook(lambda g: order.append("x"))
    y = x * 2.0                                 # x's only sender runs before w's
    (ag.tanh(y * w).sum() * 3.0).backward()
    assert order == ["w", "x"]


class _TwoOut(ag.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return ctx.wrap(a.data * b.data), ctx.wrap(a.data + b.data)

    @staticmethod
    def backward(ctx, g1, g2):
        a, b = ctx.saved_tensors
        return g1 * b + g2, g1 * a + g2


class _DropSecond(ag.autograd.Function):
    @staticmethod
    def forward(ctx, a, b):
        return ctx.wrap(a.data + b.data)

    @staticmethod
    def backward(ctx, g):
        return g, None


def _random_loss(rng, leaves):
    pool = list(leaves)
    for _ in range(rng.randint(3, 12)):
        a, b = rng.choice(pool), rng.choice(pool)
        k = rng.randint(0, 8)
        if k == 0:
            r = a + b
        elif k == 1:
            r = a * b
        elif k == 2:
            r = ag.tanh(a)
        elif k == 3:
            r = (a.reshape(2, 2) * 1.0).reshape(4)       # through views
        elif k == 4:
            r = ag.cat([a[:2], b[2:]])
        elif k == 5:
            r, q = _TwoOut.apply(a, b)                   # a node with two outputs
            pool.append(q)
        elif k == 6:
            r = _DropSecond.apply(a, b)                  # sends b no gradient
        elif k == 7:
            u = ag.chunk(a, 2)
            r = ag.cat([u[1], u[0]])
        else:
            r = a - b * 2.0
        pool.append(r)
    picks = rng.sample(pool, min(3, len(pool)))
    return sum(((p * p).sum() if rng.random() < .5 else p.sum()) for p in picks)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("twice", [False, True])
def test_random_graphs_same_gradients_and_final_values_at_hook_time(create_graph, twice):
    """Several leaves, some hooked, used by several nodes, through views, multi-output Functions and
    None gradients; grad(create_graph=True) then backward; backward twice with retain_graph. The
    .grads equal those without hooks, each hook sees the final .grad, and a hook scribbling over its
    .grad in place changes no other leaf's gradient."""
    import random
    import numpy as np

    def run(seed, hooked, scribble):
        rng = random.Random(seed)
        leaves = [ag.tensor(np.random.default_rng(seed + i).standard_normal(4), requires_grad=True)
                  for i in range(4)]
        seen = {}
        for i in hooked:
            def hook(t, i=i):
                seen.setdefault(i, []).append(t.grad.numpy().copy())
                if scribble:
                    t.grad.data.fill(np.nan)
            leaves[i].register_post_accumulate_grad_hook(hook)
        loss = _random_loss(rng, leaves)
        if create_graph:
            gs = ag.autograd.grad(loss, leaves, create_graph=True, allow_unused=True)
            assert not seen                          # grad() neither writes .grad nor runs the hooks
            loss = loss + sum((g * g).sum() for g in gs if g is not None)
        loss.backward(retain_graph=twice)
        if twice:
            loss.backward()
        return [None if t.grad is None else t.grad.numpy().copy() for t in leaves], seen

    def same(a, b):
        return (a is None) == (b is None) and (a is None or np.allclose(a, b))

    for seed in range(60):
        ref, _ = run(seed, (), False)
        hooked = random.Random(seed + 1).sample(range(4), 2)
        got, seen = run(seed, hooked, False)
        for i in range(4):
            assert same(got[i], ref[i]), (seed, i)
        for i, values in seen.items():
            assert len(values) == (2 if twice else 1) and np.allclose(values[-1], ref[i]), (seed, i)
        got, _ = run(seed, hooked, True)
        for i in set(range(4)) - set(hooked):
            assert same(got[i], ref[i]), (seed, i)


def test_a_hooked_leaf_whose_last_sender_gets_no_gradient_is_finished_once_at_the_end():
    w = ag.ones(3, requires_grad=True)
    calls = []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(t.grad.tolist()))
    z = ag.ones(3, requires_grad=True)
    late = w * 5.0                                # w's lowest sender: it never runs (gets no gradient)
    y = _DropSecond.apply(w * 2.0, late)
    (y * z).sum().backward()
    assert calls == [[2.0, 2.0, 2.0]]


def test_grad_writes_no_grad_and_runs_no_post_hook_and_says_so():
    from autograd_gpu.autograd import engine
    w = ag.ones(2, requires_grad=True)
    calls, runs = [], []
    w.register_post_accumulate_grad_hook(lambda t: calls.append(1))
    y = w * 3.0
    y.register_hook(lambda g: runs.append(engine.current_backward().writes_grad))
    (g,) = ag.autograd.grad(y.sum(), w, retain_graph=True)
    assert g.tolist() == [3.0, 3.0] and w.grad is None and calls == [] and runs == [False]
    y.sum().backward()
    assert calls == [1] and runs == [False, True] and engine.current_backward() is None


def test_an_exception_mid_backward_drops_its_callbacks_and_leaves_no_stack():
    from autograd_gpu.autograd import engine
    w = ag.ones(2, requires_grad=True)
    ran = []

    def hook(t):
        engine.queue_callback(lambda: ran.append("callback"))
        raise ValueError("hook failed")
    h = w.register_post_accumulate_grad_hook(hook)
    with pytest.raises(ValueError, match="hook failed"):
        (ag.tanh(w) * 2.0).sum().backward()
    assert ran == [] and engine.current_backward() is None
    with pytest.raises(RuntimeError, match="no backward"):
        engine.queue_callback(lambda: None)
    h.remove()
    w.grad = None
    (w * 2.0).sum().backward()
    assert w.grad.tolist() == [2.0, 2.0]


def test_reentrant_backward_in_a_hook_and_threads_keep_their_own_callbacks():
    import threading
    from autograd_gpu.autograd import engine
    w, v = ag.ones(2, requires_grad=True), ag.ones(2, requires_grad=True)
    order = []

    def hook(t):
        engine.queue_callback(lambda: order.append("outer end"))
        with ag.enable_grad():                              # backward records nothing by default
            (v * 4.0).sum().backward()                      # a backward inside a backward
        order.append(("inner done", v.grad.tolist()))
    v.register_post_accumulate_grad_hook(lambda t: engine.queue_callback(lambda: order.append("inner end")))
    w.register_post_accumulate_grad_hook(hook)
    (ag.tanh(w) * 2.0).sum().backward()
    assert order == ["inner end", ("inner done", [4.0, 4.0]), "outer end"]

    errors, barrier = [], threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            for _ in range(30):
                p = ag.ones(3, requires_grad=True)
                got = []
                p.register_post_accumulate_grad_hook(
                    lambda t: engine.queue_callback(lambda: got.append(threading.get_ident())))
                (ag.tanh(p * float(k)) * 2.0).sum().backward()
                assert got == [threading.get_ident()]
        except Exception as e:                             # pragma: no cover - reported below
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
