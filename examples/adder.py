"""A small GPT-style transformer learns to add two 2-digit numbers from text like "37+48=85".

Each example is the 9 tokens "37+48=" followed by the sum's three digits written backwards ("580"):
reversed, each answer digit depends only on digits already seen and a carry, the way one adds by hand.
The model (token and position embeddings, a causal nn.TransformerEncoder, a linear head) predicts the
next token and is trained on the answer tokens only. A set of (a, b) pairs is held out and never
trained on; the score is the exact match of greedy decoding on those. Saves loss/accuracy curves.

    python examples/adder.py [--device cuda] [--steps 2000]
"""
import random

from _common import ag, parser, parse_args, progress, set_postfix, Timer, save_curves
from autograd_gpu import nn, optim
import autograd_gpu.nn.functional as F

PLUS, EQUALS, VOCAB = 10, 11, 12          # tokens: the digits 0..9, "+", "="
PROMPT, ANSWER = 6, 3                     # "37+48=" then the sum's 3 digits, reversed


def encode(a, b):
    s = a + b
    return [a // 10, a % 10, PLUS, b // 10, b % 10, EQUALS, s % 10, s // 10 % 10, s // 100]


def decode(tokens):
    """'37+48=85' from the 9 tokens (the answer digits are stored reversed)."""
    d = [str(t) for t in tokens]
    return f"{int(d[0] + d[1])}+{int(d[3] + d[4])}={int(''.join(reversed(d[6:])))}"


def split_pairs(n_test, seed):
    """All 10 000 pairs (a, b), shuffled once: the first n_test are held out, the rest are for training."""
    pairs = [(a, b) for a in range(100) for b in range(100)]
    random.Random(seed).shuffle(pairs)
    return pairs[n_test:], pairs[:n_test]


class GPT(nn.Module):
    """Decoder-only transformer: pre-norm causal self-attention blocks over token + position embeddings."""

    def __init__(self, d_model, nhead, num_layers, length=PROMPT + ANSWER - 1):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Embedding(length, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.0,
                                           activation="relu", batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, num_layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, VOCAB)

    def forward(self, idx):                                   # (N, T) int64 -> (N, T, VOCAB) logits
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(ag.arange(t, device=idx.device))
        mask = nn.Transformer.generate_square_subsequent_mask(t, device=idx.device)
        return self.head(self.blocks(x, mask=mask, is_causal=True))


def answer_loss(model, batch):
    """Cross entropy of the next-token predictions at the answer positions only."""
    logits = model(batch[:, :-1])[:, PROMPT - 1:]             # positions that predict the 3 answer tokens
    return F.cross_entropy(logits.reshape(-1, VOCAB), batch[:, PROMPT:].reshape(-1))


def exact_match(model, data, batch_size=2000):
    """Share of sums whose 3 answer tokens, decoded greedily one at a time, are all right."""
    model.eval()
    right = 0
    with ag.no_grad():
        for i in range(0, data.shape[0], batch_size):
            seq = data[i:i + batch_size, :PROMPT]
            for _ in range(ANSWER):
                nxt = model(seq)[:, -1].argmax(dim=-1, keepdim=True)
                seq = ag.cat([seq, nxt], dim=1)
            right += int((seq[:, PROMPT:] == data[i:i + batch_size, PROMPT:]).all(dim=1).sum().item())
    model.train()
    return right / data.shape[0]


def main(argv=None):
    p = parser(__doc__.splitlines()[0], "adder.png")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--test-pairs", type=int, default=1000, help="(a, b) pairs held out of training")
    p.add_argument("--eval-every", type=int, default=250)
    args = parse_args(p, argv)
    if args.smoke:
        args.steps, args.d_model, args.layers, args.eval_every, args.test_pairs = 20, 16, 1, 10, 200
    ag.manual_seed(args.seed)
    train_pairs, test_pairs = split_pairs(args.test_pairs, args.seed)
    train = ag.tensor([encode(a, b) for a, b in train_pairs], device=args.device)
    test = ag.tensor([encode(a, b) for a, b in test_pairs], device=args.device)
    model = GPT(args.d_model, args.heads, args.layers).to(args.device)
    opt = optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps, eta_min=args.lr / 20)
    losses, evals, accs = [], [], []
    with Timer() as timer:
        bar = progress(range(1, args.steps + 1), total=args.steps, desc="steps")
        for step in bar:
            batch = train[ag.randint(0, train.shape[0], (args.batch_size,), device=args.device)]
            loss = answer_loss(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
            if step % args.eval_every == 0 or step == args.steps:
                evals.append(step)
                accs.append(exact_match(model, test))
                set_postfix(bar, loss=losses[-1], held_out=accs[-1])
    acc = accs[-1]
    print(f"held-out exact match {acc:.2%} on {test.shape[0]} sums never trained on, after {args.steps} steps "
          f"in {timer.seconds:.1f} s on {args.device}")
    for row in test[:4]:
        seq = row[:PROMPT].reshape(1, -1)
        model.eval()
        with ag.no_grad():
            for _ in range(ANSWER):
                seq = ag.cat([seq, model(seq)[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
        print(f"  {decode(seq[0].tolist())}   (true: {decode(row.tolist())})")
    if save_curves(args.out, {"training loss": (range(1, len(losses) + 1), losses),
                              "held-out exact match": (evals, accs)}, "GPT-style adder"):
        print(f"saved {args.out}")
    return {"held_out_exact_match": acc, "seconds": timer.seconds}


if __name__ == "__main__":
    main()
