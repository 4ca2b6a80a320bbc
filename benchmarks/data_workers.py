"""DataLoader throughput with worker processes against the main process alone, on a dataset whose
samples cost real work (a decode and a random augmentation per sample, as image pipelines do):

    python -m benchmarks.data_workers [--workers 0 1 2 4] [--samples 384] [--passes 40] [--epochs 3]
                                      [--batch-size 32] [--start-method fork|spawn|forkserver] [--tiny]

Each sample "decodes" a 64x64x3 uint8 image from its own seeded generator, takes a random 56x56
crop, flips it at random, converts it to float32 and normalises it, then blurs it ``passes`` times
(four shifted adds each): NumPy calls on small arrays, where the per-call cost of Python dominates,
the case worker processes are for. The number printed first is that per-sample cost in the main
process. For each ``num_workers`` a loader (persistent workers, so the start-up is paid once and
reported apart) runs a first epoch, then ``epochs`` timed epochs, interleaved with the other
settings' (round r times each setting once); each row prints the median epoch time, samples per
second, the speedup over ``num_workers=0`` and the main process's own CPU time per epoch (what
is left of the loading for the process that also runs the training step). The batches are checked equal to
those of ``num_workers=0``. The machine's core count and load average are printed with the numbers:
on a shared machine the speedup is bounded by the cores that are actually free.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograd_gpu.data import DataLoader, Dataset  # noqa: E402

MEAN, STD = np.float32(0.45), np.float32(0.25)


class DecodeAugment(Dataset):
    """Per-sample work: decode, random crop and flip, normalise, ``passes`` blur passes."""

    def __init__(self, n, passes, size=64, crop=56, seed=0):
        self.n, self.passes, self.size, self.crop, self.seed = n, passes, size, crop, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = np.random.default_rng((self.seed, i))
        img = rng.integers(0, 256, (self.size, self.size, 3), dtype=np.uint8)          # the "decode"
        top, left = rng.integers(0, self.size - self.crop + 1, 2)
        x = img[top:top + self.crop, left:left + self.crop]
        if rng.random() < 0.5:
            x = x[:, ::-1]
        x = (x.astype(np.float32) / np.float32(255) - MEAN) / STD
        for _ in range(self.passes):                                                      # a 5-point blur
            y = x * np.float32(0.5)
            y[1:] += x[:-1] * np.float32(0.125)
            y[:-1] += x[1:] * np.float32(0.125)
            y[:, 1:] += x[:, :-1] * np.float32(0.125)
            y[:, :-1] += x[:, 1:] * np.float32(0.125)
            x = y
        return np.ascontiguousarray(x.transpose(2, 0, 1)), i % 10


def per_sample_ms(ds, k=20):
    t = time.perf_counter()
    for i in range(min(k, len(ds))):
        ds[i]
    return (time.perf_counter() - t) / min(k, len(ds)) * 1e3


def loader_for(ds, workers, batch_size, start_method):
    kw = {} if workers == 0 else {"num_workers": workers, "persistent_workers": True,
                                  "multiprocessing_context": start_method}
    return DataLoader(ds, batch_size, shuffle=True, generator=0, **kw)


def epoch(loader, keep=False):
    """One epoch's seconds and the main process's CPU seconds in it, and the first pixel of every
    sample when ``keep``."""
    seen = []
    t, c = time.perf_counter(), time.process_time()
    for x, _ in loader:
        if keep:
            seen.append(x.numpy()[:, 0, 0, 0].copy())
    return time.perf_counter() - t, time.process_time() - c, seen


def run(ds, workers, batch_size, epochs, start_method):
    """{num_workers: (first epoch s, median epoch s, median main-process CPU s, first epoch's pixels)}; the timed epochs of the
    settings are interleaved (round r times every setting once), so a change of the machine's load
    falls on all of them alike."""
    loaders = {w: loader_for(ds, w, batch_size, start_method) for w in workers}
    first = {w: epoch(loader, keep=True) for w, loader in loaders.items()}   # starts the workers
    times, cpu = {w: [] for w in workers}, {w: [] for w in workers}
    for _ in range(epochs):
        for w, loader in loaders.items():
            s, c, _ = epoch(loader)
            times[w].append(s)
            cpu[w].append(c)
    loaders.clear()
    return {w: (first[w][0], statistics.median(times[w]), statistics.median(cpu[w]), first[w][2]) for w in workers}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2, 4])
    p.add_argument("--samples", type=int, default=384)
    p.add_argument("--passes", type=int, default=40, help="blur passes per sample (the per-sample work)")
    p.add_argument("--epochs", type=int, default=3, help="timed epochs per setting (the median is reported)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--start-method", default=None, help="fork, spawn or forkserver (the platform's default if unset)")
    p.add_argument("--tiny", action="store_true", help="a few samples, workers 0 and 2, one epoch (the test's size)")
    a = p.parse_args(argv)
    if a.tiny:
        a.workers, a.samples, a.passes, a.epochs, a.batch_size = [0, 2], 24, 2, 1, 8
    if 0 not in a.workers:
        a.workers = [0] + a.workers
    ds = DecodeAugment(a.samples, a.passes)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"{a.samples} samples, batch {a.batch_size}, per-sample work {per_sample_ms(ds):.2f} ms "
          f"({a.passes} blur passes) in the main process")
    results = run(ds, sorted(a.workers), a.batch_size, a.epochs, a.start_method)
    rows, ref = [], results[0][3]
    for w, (first_s, epoch_s, cpu_s, seen) in results.items():
        if len(ref) != len(seen) or not all(np.array_equal(x, y) for x, y in zip(ref, seen)):
            raise AssertionError(f"num_workers={w} gave other batches than num_workers=0")
        rows.append({"num_workers": w, "first_epoch_s": first_s, "epoch_s": epoch_s, "main_cpu_s": cpu_s,
                     "samples_per_s": a.samples / epoch_s, "speedup": results[0][1] / epoch_s})
        r = rows[-1]
        print(f"num_workers={w}: epoch {r['epoch_s'] * 1e3:8.1f} ms (median of {a.epochs}; first epoch, with the "
              f"start-up, {first_s * 1e3:.1f} ms), {r['samples_per_s']:6.0f} samples/s, speedup {r['speedup']:.2f}x; "
              f"main process CPU {cpu_s * 1e3:.0f} ms/epoch")
    return rows


if __name__ == "__main__":
    main()
