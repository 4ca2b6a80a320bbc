"""scaled_dot_product_attention and the Transformer layers: against PyTorch (outputs, gradients of the
inputs and of every parameter by name, a PyTorch state dict loaded by name), masks, dropout, errors."""
import numpy as np
import pytest

import autograd_gpu as ag
import autograd_gpu.nn.functional as F
from autograd_gpu import nn

torch = pytest.importorskip("torch")
# PyTorch's own deprecation notes about its mask types and nested tensors: not ours to act on
pytestmark = [pytest.mark.filterwarnings("ignore:Support for mismatched"),
              pytest.mark.filterwarnings("ignore:enable_nested_tensor is True")]


def rand(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape)


def load_from_torch(ours, theirs, device="cpu"):
    """Our module with the PyTorch module's state dict loaded by name (float64), on ``device``."""
    ours.load_state_dict({k: ag.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    return ours.to(device)


def run_both(ours, theirs, inputs, device, **masks):
    """Forward both on the same float64 inputs (and masks), backward a fixed random gradient; returns
    (ours_out, theirs_out, our leaf inputs, their leaf inputs)."""
    ag_in = [ag.tensor(a, device=device, requires_grad=True) for a in inputs]
    th_in = [torch.tensor(a, requires_grad=True) for a in inputs]
    ag_kw = {k: None if v is None else ag.tensor(v, device=device) for k, v in masks.items()}
    th_kw = {k: None if v is None else torch.tensor(v) for k, v in masks.items()}
    out, tout = ours(*ag_in, **ag_kw), theirs(*th_in, **th_kw)
    g = rand(*tout.shape, seed=99)
    out.backward(ag.tensor(g, device=device))
    tout.backward(torch.tensor(g))
    return out, tout, ag_in, th_in


def assert_matches(out, tout, ag_in, th_in, ours=None, theirs=None, tol=1e-9):
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=tol, atol=tol)
    for a, t in zip(ag_in, th_in):
        np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=tol, atol=tol)
    if ours is not None:
        theirs_params = dict(theirs.named_parameters())
        ours_params = dict(ours.named_parameters())
        assert list(ours_params) == list(theirs_params)
        for name, p in ours_params.items():
            np.testing.assert_allclose(p.grad.numpy(), theirs_params[name].grad.numpy(), rtol=tol, atol=tol,
                                       err_msg=name)


# --------------------------------------------------------------------------- scaled_dot_product_attention
def _causal(L, S):
    return np.tril(np.ones((L, S), dtype=bool))


SDPA_CASES = {
    "plain": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), {}),
    "L_ne_S_causal": ((2, 3, 6, 4), (2, 3, 4, 4), (2, 3, 4, 5), {"is_causal": True}),
    "causal_square": ((2, 5, 4), (2, 5, 4), (2, 5, 3), {"is_causal": True}),
    "bool_mask": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), {"attn_mask": "bool"}),
    "float_mask_broadcast": ((2, 3, 4, 8), (2, 3, 6, 8), (2, 3, 6, 5), {"attn_mask": "float"}),
    "batch_broadcast_scale": ((2, 3, 4, 8), (1, 6, 8), (3, 6, 5), {"scale": 0.3}),
    "unbatched": ((4, 8), (6, 8), (6, 5), {}),
}


def _sdpa_kwargs(kw, L, S):
    kw = dict(kw)
    if kw.get("attn_mask") == "bool":
        m = np.random.default_rng(3).random((L, S)) < 0.6
        m[:, 0] = True                      # no row fully masked (PyTorch's math path and ours agree there too)
        kw["attn_mask"] = m
    elif kw.get("attn_mask") == "float":
        kw["attn_mask"] = rand(2, 1, L, S, seed=4)
    return kw


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_matches_torch(case, device):
    qs, ks, vs, kw = SDPA_CASES[case]
    kw = _sdpa_kwargs(kw, qs[-2], ks[-2])
    mask = kw.pop("attn_mask", None)
    out, tout, ag_in, th_in = run_both(
        lambda q, k, v, attn_mask=None: F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, **kw),
        lambda q, k, v, attn_mask=None: torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                                                                         **kw),
        [rand(*qs, seed=0), rand(*ks, seed=1), rand(*vs, seed=2)], device, attn_mask=mask)
    assert_matches(out, tout, ag_in, th_in)


def test_sdpa_float_mask_gets_its_gradient_and_gqa_matches_torch():
    q, k, v, m = rand(2, 4, 3, 4, seed=0), rand(2, 2, 5, 4, seed=1), rand(2, 2, 5, 3, seed=2), rand(3, 5, seed=3)
    am = ag.tensor(m, requires_grad=True)
    tm = torch.tensor(m, requires_grad=True)
    out = F.scaled_dot_product_attention(ag.tensor(q), ag.tensor(k), ag.tensor(v), attn_mask=am, enable_gqa=True)
    tout = torch.nn.functional.scaled_dot_product_attention(torch.tensor(q), torch.tensor(k), torch.tensor(v),
                                                            attn_mask=tm, enable_gqa=True)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    (out * out).sum().backward()
    (tout * tout).sum().backward()
    np.testing.assert_allclose(am.grad.numpy(), tm.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_sdpa_fully_masked_row_gives_zeros_and_finite_gradients():
    mask = np.ones((3, 4), dtype=bool)
    mask[1] = False
    q, k, v = (ag.tensor(rand(2, *s, seed=i), requires_grad=True) for i, s in enumerate([(3, 4), (4, 4), (4, 2)]))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=ag.tensor(mask))
    tout = torch.nn.functional.scaled_dot_product_attention(*(torch.tensor(t.numpy()) for t in (q, k, v)),
                                                            attn_mask=torch.tensor(mask))
    np.testing.assert_allclose(out.numpy(), tout.numpy(), atol=1e-12)
    assert not out.numpy()[:, 1].any()
    out.sum().backward()
    assert all(np.isfinite(t.grad.numpy()).all() for t in (q, k, v))


def test_sdpa_gradcheck_and_gradgradcheck_float64(device):
    q, k, v = (ag.tensor(rand(2, *s, seed=i), device=device, requires_grad=True)
               for i, s in enumerate([(3, 4), (5, 4), (5, 2)]))
    m = ag.tensor(rand(3, 5, seed=5), device=device, requires_grad=True)

    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    assert ag.autograd.gradcheck(f, (q, k, v, m))
    assert ag.autograd.gradgradcheck(f, (q, k, v, m))
    assert ag.autograd.gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), (q, k, v))


def test_sdpa_dropout_is_seeded_scaled_and_differentiable(device):
    q, k, v = (ag.tensor(rand(2, 2, *s, seed=i), device=device, requires_grad=True)
               for i, s in enumerate([(6, 4), (7, 4), (7, 3)]))
    plain = F.scaled_dot_product_attention(q, k, v)
    ag.manual_seed(5)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    ag.manual_seed(5)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())           # the device's generator: reproducible
    assert not np.allclose(a.numpy(), plain.numpy())
    assert not F.scaled_dot_product_attention(q, k, v, dropout_p=1.0).numpy().any()
    ag.manual_seed(6)                 # the gradient is that of the same dropped weights: check it by seeding
    assert ag.autograd.gradcheck(lambda q, k, v: _seeded_dropout_sdpa(q, k, v), (q, k, v))


def _seeded_dropout_sdpa(q, k, v):
    ag.manual_seed(6)
    return F.scaled_dot_product_attention(q, k, v, dropout_p=0.3)


def test_sdpa_refuses_bad_arguments():
    q, k, v = ag.randn(2, 3, 4), ag.randn(2, 5, 4), ag.randn(2, 5, 3)
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=ag.ones(3, 5).bool(), is_causal=True)
    with pytest.raises(ValueError, match=r"key \(\.\.\., S, E\)"):
        F.scaled_dot_product_attention(q, ag.randn(2, 5, 3), v)
    with pytest.raises(ValueError, match="broadcastable to"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=ag.zeros(3, 4))
    with pytest.raises(TypeError, match="bool or floating point"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=ag.zeros(3, 5, dtype=ag.int64))
    with pytest.raises(ValueError, match="dropout_p"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(TypeError, match="floating-point"):
        F.scaled_dot_product_attention(q.long(), k, v)


# --------------------------------------------------------------------------- MultiheadAttention's fused path
@pytest.mark.parametrize("batch_first", [False, True])
def test_multihead_attention_without_weights_matches_torch(batch_first):
    theirs = torch.nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=torch.float64)
    ours = load_from_torch(nn.MultiheadAttention(8, 2, batch_first=batch_first, dtype=ag.float64), theirs)
    q, kv = rand(5, 3, 8, seed=0), rand(6, 3, 8, seed=1)
    if batch_first:
        q, kv = q.transpose(1, 0, 2), kv.transpose(1, 0, 2)
    kpm = np.zeros((3, 6), dtype=bool)
    kpm[0, -2:] = True
    out, tout, ag_in, th_in = run_both(
        lambda q, kv, key_padding_mask: ours(q, kv, kv, key_padding_mask=key_padding_mask, need_weights=False)[0],
        lambda q, kv, key_padding_mask: theirs(q, kv, kv, key_padding_mask=key_padding_mask, need_weights=False)[0],
        [q, kv], "cpu", key_padding_mask=kpm)
    assert_matches(out, tout, ag_in, th_in, ours, theirs)


# --------------------------------------------------------------------------- encoder
D, H, FF = 8, 2, 16


def _encoder_layer(lib, dtype, **kw):
    return lib.nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, dtype=dtype, **kw)


def _pair_encoders(num_layers=2, final_norm=True, **kw):
    theirs = torch.nn.TransformerEncoder(_encoder_layer(torch, torch.float64, **kw), num_layers,
                                         norm=torch.nn.LayerNorm(D, dtype=torch.float64) if final_norm else None,
                                         enable_nested_tensor=False)
    with torch.no_grad():         # the copies start equal; make them differ so a mixed-up layer shows
        for p in theirs.parameters():
            p.add_(torch.randn(p.shape, dtype=p.dtype, generator=torch.Generator().manual_seed(p.numel())) * 0.1)
    ours = nn.TransformerEncoder(_encoder_layer(ag, ag.float64, **kw), num_layers,
                                 norm=nn.LayerNorm(D, dtype=ag.float64) if final_norm else None)
    return ours, theirs.train()    # train mode with dropout 0: PyTorch's eval fast path is not taken


ENCODER_CASES = [
    dict(batch_first=False, norm_first=False, activation="relu"),
    dict(batch_first=True, norm_first=False, activation="gelu"),
    dict(batch_first=False, norm_first=True, activation="gelu"),
    dict(batch_first=True, norm_first=True, activation="relu"),
]


@pytest.mark.parametrize("kw", ENCODER_CASES, ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()))
@pytest.mark.parametrize("masks", ["causal", "causal_float_and_padding", "none"])
def test_encoder_stack_matches_torch(kw, masks, device):
    ours, theirs = _pair_encoders(**kw)
    ours = load_from_torch(ours, theirs, device)
    S, N = 5, 3
    x = rand(N, S, D) if kw["batch_first"] else rand(S, N, D)
    m = {}
    if masks == "causal":
        m = {"mask": ~_causal(S, S)}                       # module masks: True = not attended
    elif masks == "causal_float_and_padding":
        kpm = np.zeros((N, S), dtype=bool)
        kpm[1, -2:] = True
        m = {"mask": np.where(_causal(S, S), 0.0, -np.inf), "src_key_padding_mask": kpm}
    out, tout, ag_in, th_in = run_both(ours, theirs, [x], device, **m)
    assert_matches(out, tout, ag_in, th_in, ours, theirs)


def test_encoder_is_causal_without_a_mask_equals_the_causal_mask():
    ours, _ = _pair_encoders(batch_first=True)
    x = ag.tensor(rand(2, 5, D))
    a = ours(x, is_causal=True)
    b = ours(x, mask=nn.Transformer.generate_square_subsequent_mask(5, dtype=ag.float64))
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_encoder_layer_unbatched_and_callable_activation():
    theirs = _encoder_layer(torch, torch.float64, activation=torch.nn.functional.silu).train()
    ours = load_from_torch(_encoder_layer(ag, ag.float64, activation=F.silu), theirs)
    out, tout, ag_in, th_in = run_both(ours, theirs, [rand(5, D)], "cpu")
    assert_matches(out, tout, ag_in, th_in, ours, theirs)


# --------------------------------------------------------------------------- decoder
@pytest.mark.parametrize("batch_first,norm_first,activation", [(False, False, "relu"), (True, True, "gelu")])
def test_decoder_stack_matches_torch(batch_first, norm_first, activation, device):
    kw = dict(dropout=0.0, batch_first=batch_first, norm_first=norm_first, activation=activation)
    theirs = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, FF, dtype=torch.float64, **kw), 2,
                                         norm=torch.nn.LayerNorm(D, dtype=torch.float64))
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF, dtype=ag.float64, **kw), 2,
                                 norm=nn.LayerNorm(D, dtype=ag.float64))
    ours = load_from_torch(ours, theirs, device)
    T, S, N = 4, 6, 2
    tgt, mem = (rand(N, T, D, seed=0), rand(N, S, D, seed=1)) if batch_first else (rand(T, N, D), rand(S, N, D, seed=1))
    mkpm = np.zeros((N, S), dtype=bool)
    mkpm[0, -3:] = True
    tkpm = np.zeros((N, T), dtype=bool)
    tkpm[1, -1] = True
    out, tout, ag_in, th_in = run_both(ours, theirs, [tgt, mem], device, tgt_mask=~_causal(T, T),
                                       memory_key_padding_mask=mkpm, tgt_key_padding_mask=tkpm,
                                       memory_mask=rand(T, S, seed=7))
    assert_matches(out, tout, ag_in, th_in, ours, theirs)


def test_full_transformer_matches_torch_and_generates_the_causal_mask():
    kw = dict(d_model=D, nhead=H, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=FF, dropout=0.0)
    theirs = torch.nn.Transformer(dtype=torch.float64, **kw)
    ours = load_from_torch(nn.Transformer(dtype=ag.float64, **kw), theirs)
    mask = nn.Transformer.generate_square_subsequent_mask(4, dtype=ag.float64)
    np.testing.assert_array_equal(mask.numpy(), torch.nn.Transformer.generate_square_subsequent_mask(
        4, dtype=torch.float64).numpy())
    out, tout, ag_in, th_in = run_both(ours, theirs, [rand(5, 2, D), rand(4, 2, D, seed=1)], "cpu",
                                       tgt_mask=mask.numpy())
    assert_matches(out, tout, ag_in, th_in, ours, theirs)


# --------------------------------------------------------------------------- names, inits, dropout, errors
def test_state_dict_names_and_shapes_are_pytorchs():
    theirs = torch.nn.TransformerDecoder(torch.nn.TransformerDecoderLayer(D, H, FF), 2, norm=torch.nn.LayerNorm(D))
    ours = nn.TransformerDecoder(nn.TransformerDecoderLayer(D, H, FF), 2, norm=nn.LayerNorm(D))
    assert {k: tuple(v.shape) for k, v in ours.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    assert "layers.1.multihead_attn.in_proj_weight" in ours.state_dict()
    layer = nn.TransformerEncoderLayer(D, H)           # PyTorch's default dim_feedforward and inits
    assert layer.linear1.weight.shape == (2048, D) and layer.dropout.p == 0.1
    assert np.abs(layer.self_attn.in_proj_weight.numpy()).max() <= np.sqrt(6 / (D + 3 * D))
    assert not layer.self_attn.in_proj_bias.numpy().any() and (layer.norm1.weight.numpy() == 1).all()
    assert np.abs(layer.linear2.weight.numpy()).max() <= 1 / np.sqrt(2048)


def test_dropout_acts_in_training_only():
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.5, batch_first=True)
    x = ag.tensor(rand(2, 5, D), dtype=ag.float32)
    a, b = layer(x), layer(x)
    assert not np.allclose(a.numpy(), b.numpy())
    layer.eval()
    np.testing.assert_array_equal(layer(x).numpy(), layer(x).numpy())
    no_drop = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True)
    no_drop.load_state_dict(layer.state_dict())
    np.testing.assert_allclose(layer(x).numpy(), no_drop(x).numpy(), rtol=1e-6)


def test_stacks_copy_the_layer_and_bad_arguments_are_refused():
    layer = nn.TransformerEncoderLayer(D, H, FF)
    enc = nn.TransformerEncoder(layer, 3)
    assert len(enc.layers) == 3 and enc.layers[0] is not layer
    assert enc.layers[0].linear1.weight is not enc.layers[1].linear1.weight
    np.testing.assert_array_equal(enc.layers[0].linear1.weight.numpy(), enc.layers[2].linear1.weight.numpy())
    with pytest.raises(ValueError, match="activation must be 'relu', 'gelu' or a callable"):
        nn.TransformerEncoderLayer(D, H, activation="tanh")
    with pytest.raises(ValueError, match="divisible by num_heads"):
        nn.TransformerDecoderLayer(D, 3)
    with pytest.raises(ValueError, match="num_layers"):
        nn.TransformerEncoder(layer, -1)


def test_fused_linear_relu_of_the_feed_forward_block_matches_and_differentiates_twice(device):
    x = ag.tensor(rand(2, 3, 4), device=device, requires_grad=True)
    w = ag.tensor(rand(5, 4, seed=1), device=device, requires_grad=True)
    b = ag.tensor(rand(5, seed=2), device=device, requires_grad=True)
    from autograd_gpu.ops.nn.linear import _linear_relu
    np.testing.assert_allclose(_linear_relu(x, w, b).numpy(), F.relu(F.linear(x, w, b)).numpy(), rtol=1e-12)
    assert ag.autograd.gradcheck(_linear_relu, (x, w, b))
    assert ag.autograd.gradgradcheck(_linear_relu, (x, w, b))
    assert _linear_relu(x.float(), w.float()).dtype == ag.float32      # no bias; float32


def test_sdpa_under_vmap_batches_without_a_loop_and_gives_per_example_gradients(recwarn):
    q, k, m = ag.tensor(rand(3, 2, 4, 8)), ag.tensor(rand(3, 2, 5, 8, seed=1)), ag.tensor(rand(3, 4, 5, seed=2))
    v = ag.tensor(rand(2, 5, 6, seed=3))                        # shared by every example

    def loss(q, k, m):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=m) ** 2).sum()
    grads = ag.func.vmap(ag.func.grad(loss, argnums=(0, 1, 2)))(q, k, m)
    for i in range(3):
        qi, ki, mi = (t[i].detach().requires_grad_() for t in (q, k, m))
        loss(qi, ki, mi).backward()
        for g, t in zip(grads, (qi, ki, mi)):
            np.testing.assert_allclose(g[i].numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert not [w for w in recwarn if "no batching rule" in str(w.message)]


def test_sdpa_with_no_queries_or_no_keys():
    q, k, v = (ag.tensor(rand(2, *s, seed=i), requires_grad=True) for i, s in enumerate([(3, 4), (0, 4), (0, 5)]))
    out = F.scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 3, 5) and not out.numpy().any()
    out.sum().backward()
    assert q.grad.shape == (2, 3, 4) and not q.grad.numpy().any()
    assert F.scaled_dot_product_attention(ag.zeros(2, 0, 4), ag.ones(2, 3, 4), ag.ones(2, 3, 5)).shape == (2, 0, 5)


LAYER_NORM_CASES = {                          # (input shape, normalized_shape, weight, bias)
    "affine": ((2, 300, 256), (256,), True, True),     # more rows than one of the CPU backward's row blocks
    "no_affine": ((4, 5, 6), (6,), False, False),
    "two_dims": ((3, 4, 5, 6), (5, 6), True, False),
    "whole_input": ((2, 3, 4), (2, 3, 4), True, True),
}


@pytest.mark.parametrize("case", list(LAYER_NORM_CASES))
def test_layer_norm_matches_torch(case, device):
    shape, ns, weight, bias = LAYER_NORM_CASES[case]
    inputs = [rand(*shape)] + ([rand(*ns, seed=1)] if weight else []) + ([rand(*ns, seed=2)] if bias else [])

    def fn(lib):
        def ln(x, *wb):
            w = wb[0] if weight else None
            b = wb[-1] if bias else None
            return lib.layer_norm(x, ns, w, b, 1e-5)
        return ln
    out, tout, ag_in, th_in = run_both(fn(F), fn(torch.nn.functional), inputs, device)
    assert_matches(out, tout, ag_in, th_in)


def test_layer_norm_weight_gradient_alone_and_empty_input():
    x = ag.tensor(rand(6, 4).T)                                  # not contiguous
    w = ag.tensor(np.ones(6), requires_grad=True)
    F.layer_norm(x, (6,), w).sum().backward()
    tw = torch.ones(6, dtype=torch.float64, requires_grad=True)
    torch.nn.functional.layer_norm(torch.tensor(rand(6, 4).T), (6,), tw).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-12, atol=1e-12)
    e = ag.zeros(0, 4, requires_grad=True)
    F.layer_norm(e, (4,)).sum().backward()
    assert e.grad.shape == (0, 4)


def test_attention_heads_are_laid_out_like_the_projection_on_the_cpu():
    # q, k, v as heads of one (N, L, 3E) projection: the output and the gradients come back laid out as
    # (N, L, H, E), so the permute and reshape back to (N, L, H*E) are views, and the values are torch's
    qkv = rand(2, 5, 3 * 2 * 4)
    ours_qkv = ag.tensor(qkv, requires_grad=True)
    theirs_qkv = torch.tensor(qkv, requires_grad=True)

    def heads(t):
        return [c.reshape(2, 5, 2, 4).permute(0, 2, 1, 3) for c in t.chunk(3, dim=-1)]
    out = F.scaled_dot_product_attention(*heads(ours_qkv), is_causal=True)
    tout = torch.nn.functional.scaled_dot_product_attention(*heads(theirs_qkv), is_causal=True)
    assert out.numpy().transpose(0, 2, 1, 3).flags.c_contiguous
    g = rand(2, 2, 5, 4, seed=3)
    out.backward(ag.tensor(g))
    tout.backward(torch.tensor(g))
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours_qkv.grad.numpy(), theirs_qkv.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("L, how", [(64, "is_causal"), (130, "mask"), (100, "is_causal")])
def test_causal_attention_in_row_blocks_matches_torch(L, how, device):
    # L >= 64 with the causal mask (is_causal, or an attn_mask equal to it) takes the CPU's row-block path
    mask = torch.nn.Transformer.generate_square_subsequent_mask(L, dtype=torch.float64).numpy()
    kw = {"is_causal": True} if how == "is_causal" else {}
    out, tout, ag_in, th_in = run_both(
        lambda q, k, v, attn_mask=None: F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, **kw),
        lambda q, k, v, attn_mask=None: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
        [rand(2, 3, L, 8, seed=0), rand(2, 3, L, 8, seed=1), rand(2, 3, L, 5, seed=2)], device,
        attn_mask=None if how == "is_causal" else mask)
    assert_matches(out, tout, ag_in, th_in)


def test_causal_attention_in_row_blocks_differentiates_twice():
    # against the same attention composed of recorded ops (matmul, softmax), which differentiates twice
    mask = ag.tensor(torch.nn.Transformer.generate_square_subsequent_mask(64, dtype=torch.float64).numpy())

    def composed(q, k, v):
        return ag.matmul(F.softmax(ag.matmul(q, k.swapaxes(-1, -2)) * 0.5 + mask, dim=-1), v)
    grads = []
    for attention in (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), composed):
        q, k, v = (ag.tensor(rand(1, 2, 64, 4, seed=i), requires_grad=True) for i in range(3))
        gq, = ag.autograd.grad((attention(q, k, v) ** 2).sum(), q, create_graph=True)
        (gq ** 2).sum().backward()
        grads.append([t.numpy() for t in (gq, q.grad, k.grad, v.grad)])
    for a, b in zip(*grads):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_layer_norm_float16_rows_whose_sums_exceed_its_range(device):
    # the row means and the backward's row sums are sums of n float16 values: 512 * 300 is past float16's
    # largest value (65504) though the mean is not; they must be taken in float32 as a.mean() does
    x = (rand(4, 512) * 4 + 300).astype(np.float16)
    ours = ag.tensor(x, device=device, requires_grad=True)
    out = F.layer_norm(ours, (512,))
    tout = torch.nn.functional.layer_norm(torch.tensor(x.astype(np.float32)), (512,))
    assert out.dtype == ag.float16
    np.testing.assert_allclose(out.numpy().astype(np.float32), tout.numpy(), rtol=2e-2, atol=5e-2)
    out.backward(ag.tensor((rand(4, 512, seed=1) + 200).astype(np.float16), device=device))
    assert ours.grad.dtype == ag.float16 and np.isfinite(ours.grad.numpy()).all()


def test_layer_norm_float16_variance_whose_row_sum_exceeds_its_range(device):
    # rows of 512 values with a standard deviation of 55: the sum of squared deviations (about 1.5e6) is
    # past float16's largest value (65504) though the variance (about 3000) is not
    x = (rand(4, 512) * 55).astype(np.float16)
    out = F.layer_norm(ag.tensor(x, device=device), (512,))
    tout = torch.nn.functional.layer_norm(torch.tensor(x.astype(np.float32)), (512,))
    np.testing.assert_allclose(out.numpy().astype(np.float32), tout.numpy(), rtol=2e-2, atol=5e-2)


def test_causal_attention_keeps_few_masks_across_sequence_lengths():
    # the blocked causal path compares the mask with a cached (L, L) one: a model fed sequences of many
    # lengths must not keep one such square per length for the life of the process
    from autograd_gpu.ops.nn import attention
    for L in range(64, 64 + 3 * attention.CAUSAL_MASKS_KEPT):
        q = ag.tensor(rand(1, L, 4))
        out = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        tout = torch.nn.functional.scaled_dot_product_attention(*[torch.tensor(rand(1, L, 4))] * 3, is_causal=True)
        np.testing.assert_allclose(out.numpy(), tout.numpy(), rtol=1e-9, atol=1e-12)
    assert len(attention._causal_masks) <= attention.CAUSAL_MASKS_KEPT


def test_layer_norm_backward_of_an_empty_input(device):
    # no rows: the backward's row blocks (whole arrays off the CPU) must still give empty and zero gradients
    x = ag.zeros(0, 4, device=device, requires_grad=True)
    w = ag.ones(4, device=device, requires_grad=True)
    b = ag.zeros(4, device=device, requires_grad=True)
    F.layer_norm(x, (4,), w, b).sum().backward()
    assert x.grad.shape == (0, 4)
    assert w.grad.shape == b.grad.shape == (4,) and not w.grad.numpy().any() and not b.grad.numpy().any()
