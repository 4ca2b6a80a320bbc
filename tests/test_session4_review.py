"""Review of session 4's changes (issue 23): each test pins a bug the review found (CPU, and CUDA on the
CuPy stand-in through the ``device`` fixture where the device matters)."""
import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.backends import cublas_graph
from autograd_gpu.ops.nn.attention import _split_heads


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


# -- ops/nn/attention.py: MergeHeads' one-copy path takes only true slices of one buffer -------------------
def test_merge_heads_transposed_square_slices(device):
    """q, k, v's gradients that are transposed views of consecutive slices of one buffer (a stack of their
    transposes, heads as long as the sequence) have each slice's shape and first address: MergeHeads must
    not read them as the slices themselves."""
    n, L, h, hd = 2, 4, 2, 4
    x0, g0 = rand(n, L, 3 * h * hd), rand(3, n, h, hd, L, seed=1)
    grads = {}
    for d in ("cpu", device):
        x = ag.tensor(x0, device=d, requires_grad=True)
        q, k, v = _split_heads(x, h, 3)
        (ag.stack([q.mT, k.mT, v.mT]) * ag.tensor(g0, device=d)).sum().backward()
        grads[d] = x.grad.numpy()
    want = g0.transpose(1, 4, 0, 2, 3).reshape(n, L, 3 * h * hd)      # (3, N, H, hd, L) -> (N, L, 3, H, hd)
    np.testing.assert_allclose(grads["cpu"], want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads[device], want, rtol=1e-12, atol=1e-12)


# -- backends/cublas_graph.py: our handle keeps its own workspace ------------------------------------------
class _FakeDll:
    def __init__(self):
        self.calls = []

    def cublasSetStream_v2(self, handle, stream):
        self.calls.append(("stream", stream))
        return 0

    def cublasSetWorkspace_v2(self, handle, ptr, size):
        self.calls.append(("workspace", ptr, size))
        return 0

    def cublasGemmStridedBatchedEx(self, *args):
        self.calls.append(("gemm",))
        return 0


class _FakeXp:
    class cuda:
        current = 0

        @classmethod
        def get_current_stream(cls):
            return type("S", (), {"ptr": cls.current})()


def test_cublas_handle_workspace_after_set_stream():
    """cublasSetStream puts a handle back on cuBLAS's default workspace pool (cuBLAS's documentation of
    cublasSetStream), so every product after a stream change must find our workspace set again (under a
    CUDA graph's capture cuBLAS would otherwise take workspace of its own); and the stream is set only when
    it changes (two ctypes calls a product saved)."""
    lib = object.__new__(cublas_graph._Cublas)
    lib.xp, lib.dll, lib.handle = _FakeXp, _FakeDll(), 1
    lib.workspace = type("W", (), {"data": type("D", (), {"ptr": 4096})()})()
    lib.one = lib.zero = {"f": __import__("ctypes").c_float(1)}
    lib.stream = None
    args = (0, 0, 2, 2, 2, 0, 2, 0, 0, 2, 0, 0, 2, 4, 1, np.dtype("float32"))
    for stream in (7, 7, 9, 7):
        _FakeXp.cuda.current = stream
        lib.gemm(*args, capture=True)
    calls = lib.dll.calls
    ws = ("workspace", 4096, cublas_graph._WORKSPACE)
    assert calls == [("stream", 7), ws, ("gemm",), ("gemm",), ("stream", 9), ws, ("gemm",),
                     ("stream", 7), ws, ("gemm",)]
    # outside a capture (eager products): cuBLAS's default pool, which cublasSetStream restores; a capture's
    # workspace is not left set for them, nor theirs for a capture
    lib.dll.calls = []
    for stream, capture in ((7, False), (7, False), (7, True), (7, True), (7, False)):
        _FakeXp.cuda.current = stream
        lib.gemm(*args, capture=capture)
    assert lib.dll.calls == [("stream", 7), ("gemm",), ("gemm",), ("stream", 7), ws, ("gemm",), ("gemm",),
                             ("stream", 7), ("gemm",)]


# -- backends/kernels/losses.py: an ignored target adds nothing, whatever its row holds ----------------------
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("loss", ["nll_loss", "cross_entropy"])
def test_ignored_target_row_with_minus_inf(device, loss, reduction):
    """An ignored target stands at class 0 in the fused losses' arrays; where that row's log-probability
    of class 0 is -inf (a masked logit), -inf * 0 made the CPU's loss nan. PyTorch skips the row."""
    import autograd_gpu.nn.functional as F
    x0 = np.array([[-np.inf, 0.0, 1.0], [0.5, 0.2, -1.0], [0.3, -np.inf, 2.0]])
    t0 = np.array([-100, 1, 2])
    logp = x0 if loss == "nll_loss" else x0 - np.log(np.exp(x0).sum(1, keepdims=True))
    want = np.array([0.0, -logp[1, 1], -logp[2, 2]])                # the ignored row: 0, as PyTorch
    want = {"none": want, "sum": want.sum(), "mean": want.sum() / 2}[reduction]
    x = ag.tensor(x0, device=device, requires_grad=True)
    with np.errstate(all="raise"):
        out = getattr(F, loss)(x, ag.tensor(t0, device=device), reduction=reduction)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12, atol=1e-12)
    out.sum().backward()
    g = x.grad.numpy()
    assert np.isfinite(g).all() and (g[0] == 0).all()
