"""detect_anomaly names the backward op that produced NaN/Inf and where its forward ran."""
import pytest

import autograd_gpu as ag


def test_detect_anomaly_names_op_and_forward_line(device):
    x = ag.tensor([0.0, 1.0], device=device, requires_grad=True)
    with ag.autograd.detect_anomaly():
        y = ag.sqrt(x)                       # the forward the message must point at
        loss = (y * 2).sum()
        with pytest.raises(RuntimeError) as err:
            loss.backward()
    msg = str(err.value)
    assert "Sqrt" in msg and "inf" in msg
    assert "test_anomaly.py" in msg and "y = ag.sqrt(x)" in msg


def test_nan_is_reported_as_nan(device):
    x = ag.tensor([-1.0], device=device, requires_grad=True)
    with ag.autograd.detect_anomaly():
        y = ag.sqrt(x)                       # sqrt(-1) is nan, and so is its gradient
        with pytest.raises(RuntimeError, match="Sqrt backward returned nan"):
            (y * ag.zeros_like(y)).sum().backward()


def test_without_anomaly_mode_backward_does_not_check():
    x = ag.tensor([0.0], requires_grad=True)
    ag.sqrt(x).sum().backward()
    assert x.grad.tolist() == [float("inf")]
    assert not ag.autograd.is_anomaly_enabled()


def test_detect_anomaly_as_decorator_and_nodes_keep_no_trace_when_off():
    @ag.autograd.detect_anomaly()
    def run():
        assert ag.autograd.is_anomaly_enabled()
        return ag.tensor([1.0], requires_grad=True) * 2
    y = run()
    assert "_trace" in y.grad_fn.__dict__
    z = ag.tensor([1.0], requires_grad=True) * 2
    assert "_trace" not in z.grad_fn.__dict__


@pytest.mark.gpu
@pytest.mark.device_index
def test_anomaly_check_on_the_second_gpu_while_the_first_is_current():
    if not ag.cuda.is_available() or ag.cuda.device_count() < 2:
        pytest.skip("needs two GPUs (or the stand-in's two)")
    x = ag.tensor([0.0, 1.0], device="cuda:1", requires_grad=True)
    with ag.cuda.device(0), ag.autograd.detect_anomaly():
        (x * x).sum().backward()               # finite: checked, no error
        with pytest.raises(RuntimeError, match="Sqrt backward returned inf"):
            ag.sqrt(x).sum().backward()
