"""The LSTM training step: ours against PyTorch (and no hand-written baseline: BPTT by hand is what our
_Recurrence node already is). Registered into WORKLOADS as "lstm_step"; run it alone with

    python -m benchmarks --only lstm_step [--quick]
"""
import numpy as np

import autograd_gpu as ag

SIZES = {"full": (2, 128, 256, 64, 32), "quick": (2, 128, 256, 32, 32), "tiny": (1, 8, 16, 5, 4)}


def lstm_step(device, scale):
    """One SGD step of a 2-layer LSTM (input 128, hidden 256) over 64 steps of batch 32, a linear head
    to 16 classes on every step's output, cross-entropy: forward, backward through time, update."""
    from autograd_gpu import nn, optim
    import autograd_gpu.nn.functional as F
    from benchmarks.workloads import _torch, _rng, _copy_weights   # here: workloads.py imports this module at its end
    layers, n_in, hidden, seq, batch = SIZES[scale]
    classes = 16
    rng = _rng(5)
    xa = rng.standard_normal((seq, batch, n_in)).astype(np.float32)
    ya = rng.integers(0, classes, seq * batch)
    ag.manual_seed(0)
    lstm = nn.LSTM(n_in, hidden, num_layers=layers).to(device)
    head = nn.Linear(hidden, classes).to(device)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = optim.SGD(params, lr=0.01)
    x, y = ag.tensor(xa, device=device), ag.tensor(ya, device=device)

    def ours():
        opt.zero_grad()
        out, _ = lstm(x)
        F.cross_entropy(head(out.reshape(-1, hidden)), y).backward()
        opt.step()

    steps = {"ours": ours}
    torch, tdev = _torch(device)
    if torch is not None:
        tl = torch.nn.LSTM(n_in, hidden, num_layers=layers).to(tdev)
        th = torch.nn.Linear(hidden, classes).to(tdev)
        _copy_weights(torch, list(tl.parameters()) + list(th.parameters()), params)
        topt = torch.optim.SGD(list(tl.parameters()) + list(th.parameters()), lr=0.01)
        tx, ty = torch.tensor(xa, device=tdev), torch.tensor(ya, device=tdev)

        def theirs():
            topt.zero_grad()
            out, _ = tl(tx)
            torch.nn.functional.cross_entropy(th(out.reshape(-1, hidden)), ty).backward()
            topt.step()
        steps["torch"] = theirs
    return steps, {"per": 1, "unit": "ms/step",
                   "what": f"LSTM {layers}x{hidden} (input {n_in}), seq {seq}, batch {batch}, SGD"}


WORKLOADS = {"lstm_step": lstm_step}
