"""MultiheadAttention's heads laid out for the products (issue 23): on CUDA one SplitHeads copies the packed
projection (N, L, 3E) into one (3, N, H, L, E) buffer, so q, k and v are C-contiguous and every product of
the attention reads them as stored; attention's backward writes their gradients stacked the same way and one
MergeHeads copy takes them back to (N, L, 3E). On the CPU the heads stay views (NumPy's matmul reads strided
batches). Values and gradients against PyTorch on both devices, second derivatives, the fallbacks (a
gradient missing or not stacked), and the copies counted on the CuPy stand-in."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu import nn
from autograd_gpu.backends.cublas_graph import reads_as_stored as _batch_strided
from autograd_gpu.ops.nn.attention import SplitHeads, _split_heads, _stack_of

torch = pytest.importorskip("torch")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def _pair(e, h, seed=0, **kw):
    """PyTorch's MultiheadAttention (float64, parameters perturbed so the biases are not zero) and ours
    with its state dict."""
    theirs = torch.nn.MultiheadAttention(e, h, dtype=torch.float64, **kw)
    with torch.no_grad():
        for p in theirs.parameters():
            p.add_(torch.randn(p.shape, dtype=p.dtype, generator=torch.Generator().manual_seed(seed + p.numel())) * .1)
    ours = nn.MultiheadAttention(e, h, dtype=ag.float64, **kw)
    ours.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _check(ours, theirs, device, inputs, call, tol=1e-9):
    """call(module, *inputs) on both (ours on ``device``), backward a fixed gradient of the output and of the
    weights (when returned): outputs, input gradients and every parameter's gradient by name equal."""
    ours.to(device)
    a_in = [ag.tensor(a, device=device, requires_grad=True) for a in inputs]
    t_in = [torch.tensor(a, requires_grad=True) for a in inputs]
    out, w = call(ours, *a_in)
    tout, tw = call(theirs, *t_in)
    g = rand(*tout.shape, seed=99)
    loss, tloss = (out * ag.tensor(g, device=device)).sum(), (tout * torch.tensor(g)).sum()
    if tw is not None:
        gw = rand(*tw.shape, seed=98)
        loss, tloss = loss + (w * ag.tensor(gw, device=device)).sum(), tloss + (tw * torch.tensor(gw)).sum()
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=tol, atol=tol)
    if tw is not None:
        np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=tol, atol=tol)
    for a, t in zip(a_in, t_in):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
    tp = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("need_weights", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_self_attention_matches_torch(need_weights, batch_first, device):
    ours, theirs = _pair(8, 2, batch_first=batch_first)
    x = rand(3, 5, 8) if batch_first else rand(5, 3, 8)
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    kpm = np.zeros((3, 5), dtype=bool)
    kpm[1, -2:] = True

    def call(m, x):
        lib = torch if isinstance(x, torch.Tensor) else None
        am, kp = (torch.tensor(mask), torch.tensor(kpm)) if lib else (ag.tensor(mask, device=x.device),
                                                                      ag.tensor(kpm, device=x.device))
        return m(x, x, x, attn_mask=am, key_padding_mask=kp, need_weights=need_weights)
    _check(ours, theirs, device, [x], call)


@pytest.mark.parametrize("kv", ["same_dim", "kdim_vdim"])
def test_cross_attention_matches_torch(kv, device):
    # separate projections (of another sequence, or of other widths): each split into heads on its own
    kw = {} if kv == "same_dim" else dict(kdim=6, vdim=5)
    ours, theirs = _pair(8, 4, seed=1, **kw)
    q, k, v = rand(4, 2, 8, seed=1), rand(7, 2, kw.get("kdim", 8), seed=2), rand(7, 2, kw.get("vdim", 8), seed=3)
    _check(ours, theirs, device, [q, k, v], lambda m, q, k, v: m(q, k, v, need_weights=False))


def test_unbatched_self_attention_matches_torch(device):
    ours, theirs = _pair(6, 3, seed=2)
    _check(ours, theirs, device, [rand(4, 6, seed=4)], lambda m, x: m(x, x, x, average_attn_weights=False))


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
@pytest.mark.parametrize("parts", [1, 3])
def test_split_heads_gives_the_heads_of_each_part(parts, lead, device):
    h, e, L = 2, 3, 4
    a = rand(*lead, L, parts * h * e)
    x = ag.tensor(a, device=device)
    got = SplitHeads.apply(x, h, parts)
    got = got if parts > 1 else (got,)
    assert len(got) == parts
    for i, t in enumerate(got):
        want = a[..., i * h * e:(i + 1) * h * e].reshape(lead + (L, h, e)).swapaxes(-2, -3)
        assert t.shape == want.shape
        assert t.data.flags.c_contiguous
        np.testing.assert_array_equal(t.numpy(), want)
    if parts > 1:     # one buffer, the parts its consecutive slices: what attention's backward recognises
        assert _stack_of([t.data for t in got]) is not None
    views = _split_heads(x, h, parts)             # views on the CPU, the copies above on CUDA
    for t, u in zip(got, views if parts > 1 else (views,)):
        np.testing.assert_array_equal(t.numpy(), u.numpy())
        assert u.data.flags.c_contiguous == (x.device.type == "cuda" or (L == 1 or h == 1))


@pytest.mark.parametrize("parts", [1, 3])
def test_split_and_merge_heads_differentiate_twice(parts, device):
    x = ag.tensor(rand(2, 3, parts * 4, seed=5), device=device, requires_grad=True)
    assert ag.autograd.gradcheck(lambda x: SplitHeads.apply(x, 2, parts), (x,))
    assert ag.autograd.gradgradcheck(lambda x: SplitHeads.apply(x, 2, parts), (x,))


def test_a_part_without_gradient_gets_zeros(device):
    # k unused: MergeHeads fills its part with zeros (no stacked buffer to copy from)
    a = rand(2, 3, 3 * 4, seed=6)
    x = ag.tensor(a, device=device, requires_grad=True)
    q, k, v = SplitHeads.apply(x, 2, 3)
    (q * 2.0 + v * v).sum().backward()
    want = np.concatenate([np.full((2, 3, 4), 2.0), np.zeros((2, 3, 4)), 2 * a[..., 8:]], axis=-1)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("extra", ["none", "k_used_twice", "v_scaled"])
def test_attention_of_split_heads_matches_torch_also_when_gradients_are_not_stacked(extra, device):
    # the gradients of q, k, v come back stacked from attention's backward, unless another use of one adds
    # to it (the engine's sum may be a new array): both merge to torch's gradient
    a = rand(2, 5, 3 * 2 * 4, seed=7)

    def run(lib, x, split):
        q, k, v = split(x)
        out = (F.scaled_dot_product_attention if lib is ag else torch.nn.functional.scaled_dot_product_attention)(
            q, k, v if extra != "v_scaled" else v * 0.5, is_causal=True)
        loss = (out * out).sum()
        return loss + (k * k).sum() if extra == "k_used_twice" else loss
    x = ag.tensor(a, device=device, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    run(ag, x, lambda x: _split_heads(x, 2, 3)).backward()
    run(torch, tx, lambda t: [c.reshape(2, 5, 2, 4).permute(0, 2, 1, 3) for c in t.chunk(3, dim=-1)]).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_multihead_attention_differentiates_twice(device):
    m = nn.MultiheadAttention(4, 2, dtype=ag.float64).to(device)
    x = ag.tensor(rand(3, 2, 4, seed=8), device=device, requires_grad=True)

    def f(x):
        return m(x, x, x, need_weights=False)[0]
    assert ag.autograd.gradcheck(f, (x,))
    assert ag.autograd.gradgradcheck(f, (x,))


def test_multihead_attention_under_vmap_equals_the_loop(device):
    # SplitHeads and MergeHeads batch by the declared loop, on per-example (L, 3E) projections
    m = nn.MultiheadAttention(8, 2, batch_first=True, dtype=ag.float64).to(device)
    x = ag.tensor(rand(3, 2, 5, 8, seed=9), device=device)

    def f(xi):
        return m(xi, xi, xi, need_weights=False)[0]

    def loss(xi):
        return (f(xi) ** 2).sum()
    np.testing.assert_allclose(ag.func.vmap(f)(x).numpy(), np.stack([f(x[i]).numpy() for i in range(3)]),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ag.func.vmap(ag.func.grad(loss))(x).numpy(),
                               np.stack([ag.func.grad(loss)(x[i]).numpy() for i in range(3)]), rtol=1e-10, atol=1e-12)


def test_batch_strided_says_which_batches_cublas_reads_as_stored():
    a = np.empty((2, 3, 4, 5))
    assert _batch_strided(a) and _batch_strided(a.swapaxes(-1, -2))        # row-major, transposed
    assert _batch_strided(np.empty((2, 1, 4, 5)).transpose(1, 0, 2, 3))     # size-1 dims aside
    assert not _batch_strided(np.empty((2, 4, 3, 5)).transpose(0, 2, 1, 3))  # heads of (N, L, H, E)
    assert not _batch_strided(np.broadcast_to(np.empty((4, 5)), (3, 4, 5)))  # stride 0 over 3 matrices
    assert not _batch_strided(np.empty((3, 4, 10))[..., ::2])               # neither row- nor column-major


def test_stack_of_needs_consecutive_slices_in_order():
    s = np.empty((3, 2, 4))
    assert _stack_of([s[0], s[1], s[2]]) is s
    assert _stack_of([s[1], s[0], s[2]]) is None
    assert _stack_of([s[0], s[1]]) is None                      # two of three slices: not the whole buffer
    assert _stack_of([s[0], s[1], np.empty((2, 4))]) is None
    assert _stack_of([np.empty((2, 4))] * 3) is None


@pytest.mark.gpu
@pytest.mark.parametrize("need_weights, copies", [(False, 4), (True, 7)])
def test_attention_products_copy_no_operand_on_cuda(need_weights, copies):
    # a self-attention forward and backward through the fused node copies 4 times: the split into heads,
    # the heads merged for out_proj, the output's gradient made contiguous once, the stacked gradients
    # merged back (it copied 15 times: each product its (N, H, L, E) operands, the gradients reshaped and
    # concatenated). With the weights wanted (the composed chain) 7, was 14: the two products' backward
    # each copy the output's gradient (a view of out_proj's), and the 3 gradients are merged one by one
    from autograd_gpu.backends import cupy_backend
    if not cupy_backend.simulated():
        pytest.skip("launches are counted on the CuPy stand-in (AG_CUDA=standin)")
    from autograd_gpu.testing.cupy_standin import count_launches
    m = nn.MultiheadAttention(16, 4, batch_first=True).to("cuda")
    x = ag.randn(2, 6, 16, device="cuda", requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(6, device="cuda")

    gout, gw = ag.randn(2, 6, 16, device="cuda"), ag.randn(2, 6, 6, device="cuda")

    def step():            # gradients that are arrays (out.sum()'s would be a broadcast: out_proj copies it)
        out, w = m(x, x, x, attn_mask=mask, need_weights=need_weights)
        ag.autograd.backward([out] if w is None else [out, w], [gout] if w is None else [gout, gw])
    step()
    with count_launches() as log:
        step()
    made = [name for kind, name in log.events if kind == "copy"]
    assert len(made) == copies, made
