"""Defects found in the final review of the third session's change (engine aliasing, Function.of, scatter_add
rounds, compile's lazy replay): each test failed before its fix."""
import numpy as np
import pytest

import autograd_gpu as ag


@pytest.mark.parametrize("create_graph", [False, True])
def test_sum_keepdim_grad_does_not_alias_callers_gradient(device, create_graph):
    # x.sum(dim=1, keepdim=True) over a size-1 axis: SumBackward's array is the gradient's own array; .grad
    # must still not be the caller's grad_tensors (writing one wrote the other)
    x = ag.tensor(np.ones((3, 1), np.float32), requires_grad=True, device=device)
    g = ag.full((3, 1), 2.0, device=device)
    x.sum(dim=1, keepdim=True).backward(g, create_graph=create_graph)
    g.data[...] = 7.0
    np.testing.assert_array_equal(x.grad.cpu().numpy(), np.full((3, 1), 2.0, np.float32))
    x.sum(dim=1, keepdim=True).backward(g)          # accumulates into .grad: g stays as it is
    np.testing.assert_array_equal(g.cpu().numpy(), np.full((3, 1), 7.0, np.float32))
    np.testing.assert_array_equal(x.grad.detach().cpu().numpy(), np.full((3, 1), 9.0, np.float32))
