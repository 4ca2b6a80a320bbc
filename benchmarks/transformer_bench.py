"""The transformer training step: ours against PyTorch with the same weights (no hand-written baseline:
attention's backward by hand is what our fused scaled_dot_product_attention node already is).
Registered into WORKLOADS as "transformer_step"; run it alone with

    python -m benchmarks --only transformer_step [--quick]
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python -m benchmarks --only transformer_step   # one thread each

PyTorch's intra-op pool, NumPy's OpenBLAS and MKL (our CPU products where it is installed) all default
to one thread per core; the environment variables above pin them to the same count (torch and MKL's GNU
OpenMP read OMP_NUM_THREADS, OpenBLAS its own).
"""
import numpy as np

# (layers, d_model, heads, seq, batch, dim_feedforward, vocab)
SIZES = {"full": (4, 256, 4, 128, 32, 1024, 256), "quick": (2, 256, 4, 64, 16, 1024, 256),
         "tiny": (1, 16, 2, 8, 2, 32, 11)}


def _models(nn, layers, d, heads, ff, vocab, **kw):
    """A decoder-only (GPT-style) stack: causal pre-norm encoder layers, a final norm, a linear head."""
    layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=ff, dropout=0.0, batch_first=True, norm_first=True,
                                       **kw)
    return (nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d, **kw), enable_nested_tensor=False),
            nn.Linear(d, vocab, **kw))


def transformer_step(device, scale):
    """One Adam step of a 4-layer transformer (d_model 256, 4 heads, feed-forward 1024, causal
    self-attention) on a batch of 32 sequences of 128 vectors, a linear head to 256 classes on every
    position, cross-entropy: forward, backward, update. Dropout is 0 in both (no RNG in the timing)."""
    import autograd_gpu as ag
    from autograd_gpu import nn, optim
    import autograd_gpu.nn.functional as F
    from benchmarks.workloads import _torch, _rng, _copy_weights
    layers, d, heads, seq, batch, ff, vocab = SIZES[scale]
    rng = _rng(7)
    xa = rng.standard_normal((batch, seq, d)).astype(np.float32)
    ya = rng.integers(0, vocab, batch * seq)
    ag.manual_seed(0)
    enc, head = _models(nn, layers, d, heads, ff, vocab)
    enc.to(device), head.to(device)
    params = list(enc.parameters()) + list(head.parameters())
    opt = optim.Adam(params, lr=1e-4)
    x, y = ag.tensor(xa, device=device), ag.tensor(ya, device=device)
    mask = nn.Transformer.generate_square_subsequent_mask(seq, device=device)

    def ours():
        opt.zero_grad()
        out = enc(x, mask=mask, is_causal=True)
        F.cross_entropy(head(out).reshape(-1, vocab), y).backward()
        opt.step()

    steps = {"ours": ours}
    torch, tdev = _torch(device)
    if torch is not None:
        tenc, thead = _models(torch.nn, layers, d, heads, ff, vocab, device=tdev)
        tparams = list(tenc.parameters()) + list(thead.parameters())
        _copy_weights(torch, tparams, params)
        topt = torch.optim.Adam(tparams, lr=1e-4)
        tx, ty = torch.tensor(xa, device=tdev), torch.tensor(ya, device=tdev)
        tmask = torch.nn.Transformer.generate_square_subsequent_mask(seq, device=tdev)

        def theirs():
            topt.zero_grad()
            out = tenc(tx, mask=tmask, is_causal=True)
            torch.nn.functional.cross_entropy(thead(out).reshape(-1, vocab), ty).backward()
            topt.step()
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step",
                   "what": f"transformer {layers}x{d} ({heads} heads, ff {ff}), causal, seq {seq}, batch {batch}, Adam"}


WORKLOADS = {"transformer_step": transformer_step}
