"""A character-level language model (LSTM or small causal transformer) trained on the Python standard
library's own source files, which every machine with Python has: no download.

The model reads a window of characters and predicts each next one (cross-entropy on every position).
Every --sample-every steps it prints the validation loss and a sample drawn with generate() (temperature
and top-k); at the end it saves the training and validation loss curves.

    python examples/char_lm.py [--model lstm|transformer] [--device cuda] [--steps 2000] [--minutes 5]
"""
import math
import os
import random
import time

import numpy as np

from _common import ag, parser, parse_args, progress, set_postfix, Timer, save_curves
from autograd_gpu import nn, optim
import autograd_gpu.nn.functional as F

UNKNOWN = "?"                            # what characters outside the vocabulary become


# --------------------------------------------------------------------------- the text
def stdlib_text(max_chars, seed=0):
    """Up to max_chars characters of the standard library's top-level .py files, in a shuffled order."""
    root = os.path.dirname(os.__file__)
    names = sorted(n for n in os.listdir(root) if n.endswith(".py"))
    random.Random(seed).shuffle(names)
    parts, total = [], 0
    for name in names:
        try:
            with open(os.path.join(root, name), encoding="utf-8") as f:
                s = f.read()
        except (OSError, UnicodeDecodeError):
            continue
        parts.append(s)
        total += len(s)
        if total >= max_chars:
            break
    if not parts:
        raise SystemExit(f"error: no readable .py files in {root}")
    return "".join(parts)[:max_chars]


class Vocab:
    """Printable ASCII, newline and tab, plus UNKNOWN for anything else."""

    def __init__(self):
        self.chars = ["\n", "\t"] + [chr(c) for c in range(32, 127)]
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self):
        return len(self.chars)

    def encode(self, s):
        unk = self.index[UNKNOWN]
        return [self.index.get(c, unk) for c in s]

    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)


# --------------------------------------------------------------------------- the models
class LSTMLM(nn.Module):
    """Embedding -> LSTM (batch first) -> linear head; forward(idx, state) -> (logits, state)."""

    def __init__(self, vocab, emb, hidden, layers, dropout):
        super().__init__()
        self.vocab = vocab
        self.embed = nn.Embedding(len(vocab), emb)
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.head = nn.Linear(hidden, len(vocab))

    def forward(self, idx, state=None):
        out, state = self.lstm(self.embed(idx), state)
        return self.head(out), state


class TransformerLM(nn.Module):
    """Token and position embeddings -> pre-norm causal nn.TransformerEncoder -> LayerNorm -> linear head;
    forward(idx, state=None) -> (logits, None): it has no state, it sees the last `block` characters."""

    def __init__(self, vocab, d_model, nhead, layers, block, dropout):
        super().__init__()
        self.vocab, self.block = vocab, block
        self.tok = nn.Embedding(len(vocab), d_model)
        self.pos = nn.Embedding(block, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, len(vocab))

    def forward(self, idx, state=None):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(ag.arange(t, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        return self.head(self.blocks(x, mask=mask, is_causal=True)), None


# --------------------------------------------------------------------------- sampling
def _sample(logits, temperature, top_k, rng):
    """One index drawn from softmax(logits / temperature), restricted to the top_k largest logits."""
    z = logits.detach().to("cpu").numpy().astype(np.float64)
    if temperature <= 0:
        return int(z.argmax())
    z = z / temperature
    if top_k is not None and 0 < top_k < z.size:
        z[z < np.sort(z)[-top_k]] = -np.inf
    p = np.exp(z - z.max())
    return int(rng.choice(z.size, p=p / p.sum()))


def generate(model, prompt, n, temperature=0.8, top_k=None, seed=None):
    """``prompt`` followed by ``n`` characters sampled from the model one at a time (temperature 0:
    greedy). The LSTM carries its state from step to step; the transformer rereads its last window."""
    vocab, device = model.vocab, next(model.parameters()).device
    rng = np.random.default_rng(seed)
    ids = vocab.encode(prompt) or [vocab.index["\n"]]
    was_training = model.training
    model.eval()
    with ag.no_grad():
        if isinstance(model, LSTMLM):
            logits, state = model(ag.tensor([ids], device=device))
            for _ in range(n):
                ids.append(_sample(logits[0, -1], temperature, top_k, rng))
                logits, state = model(ag.tensor([ids[-1:]], device=device), state)
        else:
            for _ in range(n):
                logits, _ = model(ag.tensor([ids[-model.block:]], device=device))
                ids.append(_sample(logits[0, -1], temperature, top_k, rng))
    model.train(was_training)
    return vocab.decode(ids)


# --------------------------------------------------------------------------- training
def batches(data, seq, batch, rng):
    """(inputs, targets), each (batch, seq), from random windows of the int64 array ``data``."""
    starts = rng.integers(0, len(data) - seq - 1, batch)
    windows = np.stack([data[s:s + seq + 1] for s in starts])
    return windows[:, :-1], windows[:, 1:]


def loss_of(model, x, y):
    logits, _ = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def evaluate(model, data, seq, batch, device, n_batches=4, seed=1):
    rng = np.random.default_rng(seed)
    model.eval()
    total = 0.0
    with ag.no_grad():
        for _ in range(n_batches):
            x, y = batches(data, seq, batch, rng)
            total += loss_of(model, ag.tensor(x, device=device), ag.tensor(y, device=device)).item()
    model.train()
    return total / n_batches


def build(args, vocab):
    if args.model == "lstm":
        return LSTMLM(vocab, args.emb, args.hidden, args.layers, args.dropout)
    return TransformerLM(vocab, args.d_model, args.heads, args.layers, args.seq, args.dropout)


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "char_lm.png")
    p.add_argument("--model", choices=["lstm", "transformer"], default="lstm")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--minutes", type=float, default=None, help="stop after this long, whatever --steps says")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq", type=int, default=128, help="characters per training window (the transformer's context)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=256, help="LSTM hidden size")
    p.add_argument("--emb", type=int, default=64, help="LSTM embedding size")
    p.add_argument("--d-model", type=int, default=128, help="transformer width")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--chars", type=int, default=2_000_000, help="characters of text to read")
    p.add_argument("--sample-every", type=int, default=500)
    p.add_argument("--sample-chars", type=int, default=300)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--prompt", default="def ")
    args = parse_args(p, argv)
    if args.smoke:
        args.steps, args.batch_size, args.seq, args.layers = 6, 4, 16, 1
        args.hidden, args.emb, args.d_model, args.heads = 32, 16, 32, 2
        args.chars, args.sample_every, args.sample_chars = 50_000, 3, 20
    ag.manual_seed(args.seed)
    vocab = Vocab()
    text = stdlib_text(args.chars, args.seed)
    data = np.array(vocab.encode(text), dtype=np.int64)
    n_val = max(len(data) // 20, args.seq + 2)
    train, val = data[:-n_val], data[-n_val:]
    print(f"{len(text):,} characters of the standard library's source ({len(vocab)} symbols); "
          f"{args.model} on {args.device}")
    model = build(args, vocab).to(args.device)
    print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
    opt = optim.Adam(model.parameters(), lr=args.lr)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps, eta_min=args.lr / 10)
    return fit(model, opt, sched, train, val, args, loss_of, evaluate,
               lambda step: generate(model, args.prompt, args.sample_chars, args.temperature, args.top_k, seed=step),
               f"character-level {args.model}")


def fit(model, opt, sched, train, val, args, loss_of, evaluate, sample, title, perplexity=False):
    """The training loop of the character models (this file's and llama_char.py's): clipped steps of ``opt``
    and ``sched`` on random windows of ``train``; every ``args.sample_every`` steps the validation loss
    (``evaluate``) and a sample (``sample(step)``); the curves saved to ``args.out``. Returns the summary."""
    rng = np.random.default_rng(args.seed)
    losses, val_steps, val_losses = [], [], []
    with Timer() as timer:
        bar = progress(range(1, args.steps + 1), total=args.steps, desc="steps")
        for step in bar:
            xa, ya = batches(train, args.seq, args.batch_size, rng)
            loss = loss_of(model, ag.tensor(xa, device=args.device), ag.tensor(ya, device=args.device))
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            set_postfix(bar, loss=losses[-1])
            out_of_time = args.minutes is not None and time.perf_counter() - timer.t0 > 60 * args.minutes
            if step % args.sample_every == 0 or step == args.steps or out_of_time:
                val_steps.append(step)
                val_losses.append(evaluate(model, val, args.seq, args.batch_size, args.device))
                ppl = f" (perplexity {math.exp(val_losses[-1]):.2f})" if perplexity else ""
                say = getattr(bar, "write", print)          # tqdm's write keeps the bar intact
                say(f"\n--- step {step}: train loss {losses[-1]:.3f}, validation loss {val_losses[-1]:.3f}{ppl} ---\n"
                    f"{sample(step)}\n")
            if out_of_time:
                break
    ppl = f", perplexity {math.exp(val_losses[-1]):.2f}" if perplexity else ""
    print(f"{len(losses)} steps in {timer.seconds:.1f} s ({timer.seconds / len(losses) * 1e3:.0f} ms/step); "
          f"validation loss {val_losses[-1]:.3f} nats/char{ppl}")
    if save_curves(args.out, {"training loss": (range(1, len(losses) + 1), losses),
                              "validation loss": (val_steps, val_losses)}, title):
        print(f"saved {args.out}")
    out = {"train_loss": losses[-1], "val_loss": val_losses[-1], "steps": len(losses), "seconds": timer.seconds}
    if perplexity:
        out["perplexity"] = math.exp(val_losses[-1])
    return out


if __name__ == "__main__":
    main()
