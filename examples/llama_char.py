"""A Llama-style character model trained on the Python standard library's own source files (no download),
beside char_lm.py's LSTM and transformer, on the same text and vocabulary.

Each block is pre-norm with RMSNorm (no biases anywhere): causal self-attention with rotary position
embeddings on the queries and keys (--pos learned: a learned position table instead) and a mask from
ag.tril, then a SwiGLU MLP, w2(silu(w1 x) * w3 x). Sampling draws each character on the device with
temperature, top-k (ag.topk) and top-p (nucleus: ag.sort, then ag.cumsum over the sorted probabilities).
Every --sample-every steps it prints the validation loss, its perplexity and a sample; at the end it
saves the loss curves.

    python examples/llama_char.py [--device cuda] [--steps 450] [--top-k 20] [--top-p 0.9] [--smoke]
"""
import math

import numpy as np

from _common import ag, parser, parse_args
from char_lm import Vocab, batches, fit, stdlib_text
from autograd_gpu import nn, optim
import autograd_gpu.nn.functional as F


# --------------------------------------------------------------------------- the model
def rotary_tables(block, head_dim, base=10000.0, device="cpu"):
    """cos and sin, each (block, head_dim), of the rotary angles position * base^(-2i / head_dim), each
    frequency repeated for the two halves that rotate together."""
    inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    angles = np.outer(np.arange(block, dtype=np.float64), inv)
    angles = np.concatenate([angles, angles], axis=1).astype(np.float32)
    return ag.tensor(np.cos(angles), device=device), ag.tensor(np.sin(angles), device=device)


def rotate(x, cos, sin):
    """x (..., T, D) rotated pairwise: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) for the halves x1, x2."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return x * cos + ag.cat([-x2, x1], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x, mask, rope):
        b, t, d = x.shape

        def split(y):                                    # (b, t, d) -> (b, heads, t, head_dim)
            return y.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))
        if rope is not None:
            cos, sin = rope
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)      # mask: True = may attend
        return self.wo(y.transpose(1, 2).reshape(b, t, d))


class SwiGLU(nn.Module):
    """w2(silu(w1 x) * w3 x), hidden width about 8/3 of dim rounded up to a multiple of 16, as Llama."""

    def __init__(self, dim):
        super().__init__()
        hidden = 16 * math.ceil(8 * dim / 3 / 16)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn_norm = nn.RMSNorm(dim, eps=1e-5)
        self.attn = Attention(dim, heads)
        self.mlp_norm = nn.RMSNorm(dim, eps=1e-5)
        self.mlp = SwiGLU(dim)

    def forward(self, x, mask, rope):
        x = x + self.attn(self.attn_norm(x), mask, rope)
        return x + self.mlp(self.mlp_norm(x))


class LlamaLM(nn.Module):
    """Token embedding (+ a learned position table with pos="learned") -> blocks -> RMSNorm -> linear head.
    forward(idx) -> logits (batch, t, vocab) for t <= block."""

    def __init__(self, vocab, dim, heads, layers, block, pos="rope"):
        super().__init__()
        if pos not in ("rope", "learned"):
            raise ValueError(f"pos: expected 'rope' or 'learned', got {pos!r}")
        if dim % heads or (dim // heads) % 2:
            raise ValueError(f"dim {dim} and heads {heads}: expected dim divisible by heads into an even head size")
        self.vocab, self.block, self.pos_kind = vocab, block, pos
        self.tok = nn.Embedding(len(vocab), dim)
        self.pos = nn.Embedding(block, dim) if pos == "learned" else None
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.norm = nn.RMSNorm(dim, eps=1e-5)
        self.head = nn.Linear(dim, len(vocab), bias=False)
        self._tables = {}                                # device -> rotary tables and the full causal mask
        for p in self.parameters():          # small initial weights, as GPT/Llama do
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def _cached(self, device):
        key = str(device)
        if key not in self._tables:
            head_dim = self.blocks[0].attn.head_dim if len(self.blocks) else 2
            rope = rotary_tables(self.block, head_dim, device=device) if self.pos is None else None
            mask = ag.tril(ag.ones(self.block, self.block, dtype=bool, device=device))
            self._tables[key] = rope, mask
        return self._tables[key]

    def forward(self, idx):
        t = idx.shape[1]
        if t > self.block:
            raise ValueError(f"input of {t} positions: expected at most the block size {self.block}")
        rope, mask = self._cached(idx.device)
        x = self.tok(idx)
        if self.pos is not None:
            x = x + self.pos(ag.arange(t, device=idx.device))
        else:
            rope = rope[0][:t], rope[1][:t]
        mask = mask[:t, :t]
        for blk in self.blocks:
            x = blk(x, mask, rope)
        return self.head(self.norm(x))


# --------------------------------------------------------------------------- sampling
def sample_next(logits, temperature=1.0, top_k=None, top_p=None):
    """One index drawn from softmax(logits / temperature) over a 1-d tensor of logits, on its device:
    restricted to the top_k largest (ag.topk), then to the smallest set of those, by decreasing
    probability, whose probability reaches top_p (ag.sort and ag.cumsum), drawn with ag.multinomial;
    temperature 0 is greedy."""
    if temperature <= 0:
        return int(logits.argmax().item())
    z = logits.detach() / temperature
    if top_k is not None and 0 < top_k < z.shape[0]:
        z, order = ag.topk(z, top_k)                     # the k largest, in decreasing order
    else:
        z, order = ag.sort(z, descending=True)
    probs = F.softmax(z, dim=-1)
    if top_p is not None and top_p < 1.0:
        before = ag.cumsum(probs, dim=-1) - probs        # probability of the candidates ahead of each one
        probs = ag.where(before < top_p, probs, ag.zeros_like(probs))   # the first always stays
    j = ag.multinomial(probs, 1)                          # drawn on the device, no host round trip until .item()
    return int(order[j].item())


def generate(model, prompt, n, temperature=0.8, top_k=None, top_p=None, seed=None):
    """``prompt`` followed by ``n`` characters sampled one at a time from the last ``block`` characters
    (``seed`` seeds ag's random state first, so that a seeded call repeats)."""
    vocab, device = model.vocab, next(model.parameters()).device
    if seed is not None:
        ag.manual_seed(seed)
    ids = vocab.encode(prompt) or [vocab.index["\n"]]
    was_training = model.training
    model.eval()
    with ag.no_grad():
        for _ in range(n):
            logits = model(ag.tensor([ids[-model.block:]], device=device))
            ids.append(sample_next(logits[0, -1], temperature, top_k, top_p))
    model.train(was_training)
    return vocab.decode(ids)


# --------------------------------------------------------------------------- training
def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def evaluate(model, data, seq, batch, device, n_batches=8, seed=1):
    """Mean cross-entropy (nats per character) over n_batches fixed random windows of ``data``."""
    rng = np.random.default_rng(seed)
    model.eval()
    total = 0.0
    with ag.no_grad():
        for _ in range(n_batches):
            x, y = batches(data, seq, batch, rng)
            total += loss_of(model, ag.tensor(x, device=device), ag.tensor(y, device=device)).item()
    model.train()
    return total / n_batches


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "llama_char.png")
    p.add_argument("--steps", type=int, default=450)
    p.add_argument("--minutes", type=float, default=None, help="stop after this long, whatever --steps says")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq", type=int, default=64, help="characters per training window (the context)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--dim", type=int, default=96)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--pos", choices=["rope", "learned"], default="rope", help="rotary or learned positions")
    p.add_argument("--chars", type=int, default=1_000_000, help="characters of text to read")
    p.add_argument("--sample-every", type=int, default=150)
    p.add_argument("--sample-chars", type=int, default=150)
    p.add_argument("--temperature", type=float, default=0.8)
    p.add_argument("--top-k", type=int, default=20)
    p.add_argument("--top-p", type=float, default=0.9)
    p.add_argument("--prompt", default="def ")
    args = parse_args(p, argv)
    if args.smoke:
        args.steps, args.batch_size, args.seq, args.layers = 6, 4, 16, 1
        args.dim, args.heads, args.chars, args.sample_every, args.sample_chars = 32, 2, 50_000, 3, 20
    ag.manual_seed(args.seed)
    vocab = Vocab()
    text = stdlib_text(args.chars, args.seed)
    data = np.array(vocab.encode(text), dtype=np.int64)
    n_val = max(len(data) // 20, args.seq + 2)
    train, val = data[:-n_val], data[-n_val:]
    print(f"{len(text):,} characters of the standard library's source ({len(vocab)} symbols); "
          f"Llama-style, {args.pos} positions, on {args.device}")
    model = LlamaLM(vocab, args.dim, args.heads, args.layers, args.seq, args.pos).to(args.device)
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 20)
    sched = optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps))))
    return fit(model, opt, sched, train, val, args, loss_of, evaluate,
               lambda step: generate(model, args.prompt, args.sample_chars, args.temperature, args.top_k,
                                     args.top_p, seed=step),
               "Llama-style character model", perplexity=True)


if __name__ == "__main__":
    main()
