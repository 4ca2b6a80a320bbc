"""Careless calls fail at the call that makes them, with PyTorch's checks: optimizer options, hooks that
change a gradient, assigned gradients, views that would copy, layer sizes, grad mode across threads."""
import threading

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu import nn, optim

NAN = float("nan")


# -- optimizers -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, what", [
    (lambda p: optim.SGD(p, lr=NAN), "learning rate"),
    (lambda p: optim.SGD(p, lr=0.1, momentum=NAN), "momentum"),
    (lambda p: optim.SGD(p, lr=0.1, weight_decay=-1.0), "weight_decay"),
    (lambda p: optim.Adam(p, betas=(0.9, NAN)), "beta parameter at index 1"),
    (lambda p: optim.Adam(p, betas=(1.0, 0.999)), "beta parameter at index 0"),
    (lambda p: optim.Adam(p, eps=NAN), "epsilon"),
    (lambda p: optim.AdamW(p, weight_decay=NAN), "weight_decay"),
    (lambda p: optim.RMSprop(p, alpha=NAN), "alpha"),
    (lambda p: optim.Adagrad(p, lr_decay=NAN), "lr_decay"),
    (lambda p: optim.Adam([{"params": p, "lr": NAN}]), "learning rate"),
])
def test_optimizer_options_out_of_range_or_nan_are_refused(make, what):
    with pytest.raises(ValueError, match=f"Invalid {what}"):
        make([ag.zeros(3, requires_grad=True)])


def test_add_param_group_and_load_state_dict_check_options_and_state():
    p, q = ag.zeros(3, requires_grad=True), ag.zeros(2, requires_grad=True)
    opt = optim.Adam([p])
    with pytest.raises(ValueError, match="Invalid learning rate: nan"):
        opt.add_param_group({"params": [q], "lr": NAN})
    assert len(opt.param_groups) == 1
    p.grad = ag.ones(3)
    opt.step()
    sd = opt.state_dict()
    bad = {"state": {0: dict(sd["state"][0], exp_avg=ag.zeros(4))}, "param_groups": sd["param_groups"]}
    fresh = optim.Adam([ag.zeros(3, requires_grad=True)])
    with pytest.raises(ValueError, match=r"state 'exp_avg' of parameter 0 has shape \(4,\).*\(3,\)"):
        fresh.load_state_dict(bad)
    assert not fresh.state                                      # nothing half-loaded
    nan_lr = {"state": sd["state"], "param_groups": [dict(sd["param_groups"][0], lr=NAN)]}
    with pytest.raises(ValueError, match="Invalid learning rate"):
        fresh.load_state_dict(nan_lr)
    fresh.load_state_dict(sd)                                   # the good one still loads


# -- hooks and assigned gradients -------------------------------------------------------------------------
@pytest.mark.parametrize("hook, exc, match", [
    (lambda g: g.sum(), RuntimeError, "hook 'bad' has changed the size of value"),
    (lambda g: g.to(ag.float64), RuntimeError, "hook 'bad' has changed the type of value"),
    (lambda g: g.numpy(), TypeError, "hook 'bad' returned ndarray"),
])
def test_a_hook_that_changes_the_gradient_raises(hook, exc, match):
    def bad(g):
        return hook(g)
    x = ag.ones(3, requires_grad=True)
    x.register_hook(bad)
    with pytest.raises(exc, match=match):
        (x * 2).sum().backward()
    y = ag.ones(3, requires_grad=True)
    z = y * 2
    z.register_hook(bad)                        # on a non-leaf too
    with pytest.raises(exc, match=match):
        z.sum().backward()


def test_assigned_grad_must_match_the_tensor(device):
    p = ag.zeros(2, 3, device=device, requires_grad=True)
    with pytest.raises(RuntimeError, match="different size"):
        p.grad = ag.zeros(3, device=device)
    with pytest.raises(RuntimeError, match="different type"):
        p.grad = ag.zeros(2, 3, dtype=ag.float64, device=device)
    with pytest.raises(TypeError, match="expected to be a Tensor or None but got grad of type ndarray"):
        p.grad = np.zeros((2, 3), np.float32)
    if device != "cpu":
        with pytest.raises(RuntimeError, match="different device"):
            p.grad = ag.zeros(2, 3)
    p.grad = ag.ones(2, 3, device=device)
    p.grad = None
    assert p.grad is None


# -- views ------------------------------------------------------------------------------------------------
def test_view_never_copies(device):
    x = ag.arange(6.0, device=device).reshape(2, 3)
    v = x.view(3, 2)
    v[0, 0] = 10.0                              # a view: the write is seen through x
    assert x.numpy()[0, 0] == 10.0
    with pytest.raises(RuntimeError, match=r"cannot be viewed as shape \(6,\) without a copy.*\.reshape"):
        x.T.view(6)
    with pytest.raises(RuntimeError, match="without a copy"):
        ag.view(x[:, :2], 4)
    assert x.T.reshape(6).tolist() == [10.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    c = x.T.contiguous()
    assert c.view(6).tolist() == [10.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    assert x.contiguous() is x


def test_contiguous_is_differentiable(device):
    x = ag.arange(6.0, device=device).reshape(2, 3).requires_grad_()
    (x.T.contiguous().view(6) * ag.arange(6.0, device=device)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 2, 4], [1, 3, 5]])


# -- layer sizes ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, match", [
    (lambda: nn.Conv2d(1, 1, kernel_size=0), "Conv2d: expected kernel_size of at least 1"),
    (lambda: nn.Conv1d(1, 1, 3, stride=0), "Conv1d: expected stride of at least 1"),
    (lambda: nn.Conv2d(1, 1, 3, padding=-1), "Conv2d: expected padding of at least 0"),
    (lambda: nn.Conv2d(1, 1, 3, dilation=(1, 0)), "Conv2d: expected dilation of at least 1"),
    (lambda: nn.Conv2d(0, 1, 3), "Conv2d: expected in_channels to be a positive int"),
    (lambda: nn.MaxPool2d(0), "MaxPool2d: expected kernel_size of at least 1"),
    (lambda: nn.MaxPool1d(2, stride=0), "MaxPool1d: expected stride of at least 1"),
    (lambda: nn.AvgPool2d(2, padding=-1), "AvgPool2d: expected padding of at least 0"),
])
def test_bad_layer_sizes_fail_when_the_layer_is_made(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_non_integer_layer_sizes_are_type_errors():
    with pytest.raises(TypeError, match="kernel_size as an int or 2 ints"):
        nn.Conv2d(1, 1, 2.5)
    with pytest.raises(TypeError, match="MaxPool1d: expected kernel_size as an int, got 2.5"):
        nn.MaxPool1d(2.5)


# -- grad mode across threads ---------------------------------------------------------------------------
def test_one_no_grad_instance_shared_by_two_threads_keeps_each_threads_mode():
    shared = ag.no_grad()
    barrier, wrong = threading.Barrier(2), []

    def worker(records_outside):
        ag.set_grad_enabled(records_outside)
        for _ in range(100):
            barrier.wait()
            with shared:
                assert not ag.is_grad_enabled()
                barrier.wait()                  # both threads inside the same instance at once
            if ag.is_grad_enabled() != records_outside:
                wrong.append(records_outside)

    threads = [threading.Thread(target=worker, args=(flag,)) for flag in (True, False)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
