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
