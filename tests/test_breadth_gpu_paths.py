"""The CUDA paths of issue 26's ops, on the CuPy stand-in (which counts what CuPy would do): sort, argsort,
topk, kthvalue, searchsorted and bucketize run on the device's own kernels with no host transfer either
way (unique reads its result's size back, declared); ctc_loss, grid_sample, interpolate, group_norm, the
pooling/unfold family, conv_transpose and embedding_bag make no host transfer and launch as many kernels
for a batch of 8 as for a batch of 1 (no Python loop over the batch), forward and backward together.
On a real GPU (AG_CUDA=real) the counts are not available: the tests skip."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F

pytestmark = pytest.mark.gpu

RNG = np.random.default_rng(26)



def _x(*shape, grad=True):
    return ag.tensor(RNG.standard_normal(shape), device="cuda", requires_grad=grad)


def _i(low, high, shape):
    return ag.tensor(RNG.integers(low, high, shape), device="cuda")


def _run(call, args):
    """The op's forward and, when its result takes part in the graph, its backward from a gradient of ones
    (the gradients of its sum: not ``out.sum().backward()``, whose reduction CuPy runs in one pass or two
    depending on the result's size and memory order, which is the test's, not the op's)."""
    out = call(*args)
    out = out[0] if isinstance(out, tuple) else out
    if out.requires_grad:
        out.backward(ag.ones_like(out))
    return out


def _counted(standin, call, args):
    with standin.count_transfers() as transfers, standin.count_launches() as launches:
        _run(call, args)
    return transfers, launches


# name -> n -> (call, args): inputs made outside the counted region, with batch size n where there is one
SELECTION = {
    "sort": lambda n: (lambda x: ag.sort(x, 1, descending=True).values, (_x(n, 7),)),
    "sort_indices": lambda n: (lambda x: ag.sort(x, 0)[1], (_x(n, 7),)),
    "argsort": lambda n: (lambda x: ag.argsort(x, -1), (_x(n, 7),)),
    "msort": lambda n: (ag.msort, (_x(5, n),)),
    "topk": lambda n: (lambda x: ag.topk(x, 3, 1).values, (_x(n, 7),)),
    "topk_smallest": lambda n: (lambda x: ag.topk(x, 2, 0, largest=False, sorted=False).values, (_x(n + 2, 4),)),
    "kthvalue": lambda n: (lambda x: ag.kthvalue(x, 2, 1).values, (_x(n, 7),)),
    "median": lambda n: (lambda x: ag.median(x, 1).values, (_x(n, 7),)),
    "searchsorted": lambda n: (ag.searchsorted, (ag.tensor(np.arange(8.0), device="cuda"), _x(n, 5, grad=False))),
    "searchsorted_rows": lambda n: (lambda s, v: ag.searchsorted(s, v, right=True),
                                    (ag.sort(_x(n, 6, grad=False), 1).values, _x(n, 3, grad=False))),
    "bucketize": lambda n: (ag.bucketize, (_x(n, 5, grad=False), ag.tensor(np.arange(-2.0, 3.0), device="cuda"))),
}

BATCHED = {
    "ctc_loss": lambda n: (lambda x, t, il, tl: F.ctc_loss(F.log_softmax(x, 2), t, il, tl),
                           (_x(12, n, 5), _i(1, 5, (n, 4)), ag.full((n,), 12, dtype=ag.int64, device="cuda"),
                            ag.full((n,), 4, dtype=ag.int64, device="cuda"))),
    "ctc_loss_none": lambda n: (lambda x, t, il, tl: F.ctc_loss(F.log_softmax(x, 2), t, il, tl, reduction="none"),
                                (_x(9, n, 4), _i(1, 4, (n, 3)), ag.full((n,), 9, dtype=ag.int64, device="cuda"),
                                 ag.full((n,), 2, dtype=ag.int64, device="cuda"))),
    "grid_sample": lambda n: (lambda x, g: F.grid_sample(x, g, align_corners=False),
                              (_x(n, 2, 5, 6), ag.tensor(RNG.uniform(-1, 1, (n, 3, 4, 2)), device="cuda",
                                                         requires_grad=True))),
    "grid_sample_nearest_border": lambda n: (
        lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True),
        (_x(n, 2, 5, 6), ag.tensor(RNG.uniform(-1.2, 1.2, (n, 3, 4, 2)), device="cuda"))),
    "interpolate_bilinear": lambda n: (
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False), (_x(n, 2, 5, 6),)),
    "interpolate_bilinear_corners": lambda n: (
        lambda x: F.interpolate(x, size=(7, 4), mode="bilinear", align_corners=True), (_x(n, 2, 5, 6),)),
    "interpolate_nearest": lambda n: (lambda x: F.interpolate(x, size=(7, 9), mode="nearest"), (_x(n, 2, 5, 6),)),
    "interpolate_linear": lambda n: (lambda x: F.interpolate(x, scale_factor=1.5, mode="linear"), (_x(n, 3, 6),)),
    "group_norm": lambda n: (lambda x, w, b: F.group_norm(x, 2, w, b), (_x(n, 4, 5, 6), _x(4), _x(4))),
    "max_pool2d": lambda n: (lambda x: F.max_pool2d(x, 2), (_x(n, 2, 6, 6),)),
    "max_pool2d_indices": lambda n: (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (_x(n, 2, 7, 7),)),
    "avg_pool2d": lambda n: (lambda x: F.avg_pool2d(x, 2), (_x(n, 2, 6, 6),)),
    "max_pool1d": lambda n: (lambda x: F.max_pool1d(x, 3), (_x(n, 2, 9),)),
    "avg_pool1d": lambda n: (lambda x: F.avg_pool1d(x, 3), (_x(n, 2, 9),)),
    "adaptive_avg_pool2d": lambda n: (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), (_x(n, 2, 7, 6),)),
    "adaptive_avg_pool1d": lambda n: (lambda x: F.adaptive_avg_pool1d(x, 4), (_x(n, 2, 7),)),
    "adaptive_max_pool2d": lambda n: (lambda x: F.adaptive_max_pool2d(x, (3, 4)), (_x(n, 2, 7, 6),)),
    "unfold": lambda n: (lambda x: F.unfold(x, 3, padding=1), (_x(n, 2, 6, 6),)),
    "fold": lambda n: (lambda x: F.fold(x, (6, 6), 3, padding=1), (_x(n, 18, 36),)),
    "pixel_shuffle": lambda n: (lambda x: F.pixel_shuffle(x, 2), (_x(n, 8, 3, 3),)),
    "conv_transpose1d": lambda n: (lambda x, w: F.conv_transpose1d(x, w, stride=2), (_x(n, 3, 5), _x(3, 2, 3))),
    "conv_transpose2d": lambda n: (lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
                                   (_x(n, 3, 5, 5), _x(3, 2, 3, 3), _x(2))),
    "conv_transpose2d_groups": lambda n: (lambda x, w: F.conv_transpose2d(x, w, groups=2, dilation=2),
                                          (_x(n, 4, 4, 4), _x(4, 1, 2, 2))),
    "embedding_bag_max": lambda n: (lambda i, w: F.embedding_bag(i, w, mode="max"), (_i(0, 6, (n, 4)), _x(6, 3))),
    "embedding_bag_mean": lambda n: (lambda i, w: F.embedding_bag(i, w), (_i(0, 6, (n, 4)), _x(6, 3))),
}


@pytest.mark.parametrize("name", sorted(SELECTION) + sorted(BATCHED))
def test_no_host_transfer_and_no_declared_sync(name, standin):
    """No device-to-host read and no host-to-device copy in the forward or the backward, and nothing
    declared to the sync debug mode (which raises on a declared read in mode "error")."""
    make = SELECTION.get(name) or BATCHED[name]
    call, args = make(3)
    _run(call, args)                                # warm caches (the engine's seeds, kernels)
    ag.cuda.set_sync_debug_mode("error")
    try:
        transfers, _ = _counted(standin, call, args)
    finally:
        ag.cuda.set_sync_debug_mode("default")
    assert (transfers.d2h, transfers.h2d) == (0, 0), transfers.events


@pytest.mark.parametrize("name", sorted(BATCHED))
def test_launches_do_not_grow_with_the_batch(name, standin):
    """Batch 2 and batch 8 launch the same kernels, forward and backward: the batch is never looped over.
    (Batch 2, not 1: a grouped conv's weights (G, O/G, K) broadcast over the batch in its product, and for
    that CuPy's matmul builds pointer tables, six kernels however large the batch, but none at batch 1.)"""
    counts = {}
    for n in (2, 8):
        call, args = BATCHED[name](n)
        _run(call, args)                            # warm caches, so both counts see the same state
        _, launches = _counted(standin, call, args)
        counts[n] = launches
    assert counts[2].launches == counts[8].launches, (counts[2].by_kind, counts[8].by_kind)
    assert counts[2].launches > 0


def test_results_on_the_device_equal_the_host(standin):
    """The device paths counted above compute what the CPU does (values and gradients)."""
    for name, make in sorted({**SELECTION, **BATCHED}.items()):
        call, args = make(2)
        host = [ag.tensor(a.numpy(), requires_grad=a.requires_grad) for a in args]
        out_d, out_h = _run(call, args), _run(call, host)
        np.testing.assert_allclose(out_d.detach().numpy(), out_h.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)
        for a, b in zip(args, host):
            if out_d.requires_grad and a.requires_grad:
                np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


def test_unique_reads_its_size_back_once_and_declares_it(standin):
    """unique's result size is data: one device-to-host read, declared (mode "error" raises naming it)."""
    x = _i(0, 5, (4, 7))
    with standin.count_transfers() as transfers:
        values, inverse, counts = ag.unique(x, return_inverse=True, return_counts=True)
    assert transfers.d2h == 1 and transfers.h2d == 0, transfers.events
    np.testing.assert_array_equal(values.numpy(), np.unique(x.numpy()))
    ag.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="unique"):
            ag.unique(x)
    finally:
        ag.cuda.set_sync_debug_mode("default")


def test_ctc_loss_with_concatenated_targets_declares_its_one_read(standin):
    """1-D concatenated targets are padded to the longest target length, which is data: one declared read
    (the padded (N, S) form above makes none)."""
    x = F.log_softmax(_x(6, 2, 4), 2)
    flat, il, tl = _i(1, 4, (5,)), ag.tensor([6, 6], device="cuda"), ag.tensor([3, 2], device="cuda")
    with standin.count_transfers() as transfers:
        loss = F.ctc_loss(x, flat, il, tl)
    assert transfers.d2h == 1, transfers.events
    padded = ag.stack([flat[:3], ag.cat([flat[3:], flat[:1]])])
    np.testing.assert_allclose(loss.item(), F.ctc_loss(x, padded, il, tl).item(), rtol=1e-12)
    ag.cuda.set_sync_debug_mode("error")
    try:
        with pytest.raises(RuntimeError, match="ctc_loss"):
            F.ctc_loss(x, flat, il, tl)
    finally:
        ag.cuda.set_sync_debug_mode("default")
