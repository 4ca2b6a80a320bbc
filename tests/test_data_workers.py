"""DataLoader with worker processes: the same batches as without workers, per-worker seeds, in-order
delivery, get_worker_info, worker_init_fn, persistent workers, prefetching, timeouts, a worker's
exception in the main process, no process left behind, IterableDataset sharding, pin_memory, and the
argument errors."""
import gc
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.data import (DataLoader, Dataset, IterableDataset, TensorDataset, get_worker_info)

ROOT = Path(__file__).resolve().parents[1]


# Datasets at module level: workers started with 'spawn' get them pickled (by reference to this module).
class Augmented(Dataset):
    """Per-sample work with random augmentation: noise from a generator seeded by (seed, index), so
    a sample is the same whichever process makes it."""

    def __init__(self, n=29, seed=0):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        rng = np.random.default_rng((self.seed, i))
        x = np.full((2, 3), float(i), dtype=np.float32) + rng.standard_normal((2, 3)).astype(np.float32)
        return ag.tensor(x[:, ::-1].copy() if rng.random() < 0.5 else x), i


class GlobalRandom(Dataset):
    """Augmentation from the process's global generators (Python, NumPy, ag) and the worker's identity."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        info = get_worker_info()
        wid, seed = (-1, -1) if info is None else (info.id, info.seed)
        return (ag.tensor([random.random(), float(np.random.random_sample()), ag.rand(1).item()]),
                ag.tensor([i, wid, seed % 2 ** 31]))


class Slow(Dataset):
    """Sample i waits delays.get(i, 0) seconds; sample ``boom`` raises ValueError; ``die`` ends the
    process with exit code 3."""

    def __init__(self, n=16, delays=None, boom=None, die=None):
        self.n, self.delays, self.boom, self.die = n, delays or {}, boom, die

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.delays.get(i, 0))
        if i == self.boom:
            raise ValueError(f"sample {i} is corrupt")
        if i == self.die:
            os._exit(3)
        return i


class Stream(IterableDataset):
    """range(n), sharded between the workers with get_worker_info (when shard)."""

    def __init__(self, n, shard=True):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class NeedsTwoArgs(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


class RaisesOdd(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        if i == 1:
            raise NeedsTwoArgs("a", "b")
        if i == 3:
            raise KeyError("no such key")
        return i


def _batches(loader):
    out = []
    for b in loader:
        out.append(tuple(np.asarray(x.numpy() if hasattr(x, "numpy") else x).tolist() for x in
                         (b if isinstance(b, (tuple, list)) else (b,))))
    return out


def _no_children(within=2.0):
    deadline = time.monotonic() + within
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.02)
    return multiprocessing.active_children() == []


# -- the same batches as without workers --------------------------------------------------------------

def test_two_workers_give_the_batches_of_none_with_shuffle_and_augmentation():
    ds = Augmented()
    ref = DataLoader(ds, 4, shuffle=True, generator=5)
    two = DataLoader(ds, 4, shuffle=True, generator=5, num_workers=2)
    for _ in range(2):                                   # the generator advances alike: epoch 2 matches too
        a, b = _batches(ref), _batches(two)
        assert a == b and len(a) == 8
        assert sorted(i for _, idx in a for i in idx) == list(range(29)) and [i for _, idx in a for i in idx] != list(range(29))
    assert _no_children()


def test_tensor_dataset_batches_with_workers_on_the_device(device):
    x, y = ag.randn(23, 3, device=device), ag.arange(23, device=device)
    ref = DataLoader(TensorDataset(x, y), 5, shuffle=True, generator=1)
    for kw in ({"num_workers": 2}, {"num_workers": 2, "prefetch_factor": 1, "drop_last": True}):
        got = list(DataLoader(TensorDataset(x, y), 5, shuffle=True, generator=1, **kw))
        want = list(DataLoader(TensorDataset(x, y), 5, shuffle=True, generator=1, drop_last=kw.get("drop_last", False)))
        assert len(got) == len(want) == (4 if kw.get("drop_last") else 5)
        for (gx, gy), (wx, wy) in zip(got, want):
            assert gx.device == wx.device and gx.dtype == wx.dtype and gy.dtype == wy.dtype
            np.testing.assert_array_equal(gx.numpy(), wx.numpy())
            np.testing.assert_array_equal(gy.numpy(), wy.numpy())
    assert len(ref) == 5 and _no_children()


def test_global_rng_augmentation_is_reproducible_and_seeded_per_worker():
    a = _batches(DataLoader(GlobalRandom(), 3, shuffle=True, generator=11, num_workers=2))
    b = _batches(DataLoader(GlobalRandom(), 3, shuffle=True, generator=11, num_workers=2))
    assert a == b
    g = np.random.default_rng(11)
    g.permutation(12)
    base = int(g.integers(0, 2 ** 63 - 1))                 # the loader's draw: permutation, then base seed
    for _, ids in a:
        for i, wid, seed in ids:
            assert wid in (0, 1) and seed == (base + wid) % 2 ** 31
    first = {}                                             # each worker's first sample: its generators' first draws
    for vals, ids in a:
        for v, (i, wid, _) in zip(vals, ids):
            first.setdefault(wid, v)
    for wid, (py, npy, agv) in first.items():
        assert py == np.float32(random.Random(base + wid).random())       # (batched as float32)
        ag.backends.get_backend("cpu").seed(base + wid)                    # ag's CPU generator
        assert agv == np.float32(ag.rand(1).item())
    assert first[0][1] != first[1][1]                      # NumPy's global generator differs per worker
    c = _batches(DataLoader(GlobalRandom(), 3, shuffle=True, generator=12, num_workers=2))
    assert c != a


def test_batches_arrive_in_order_when_a_worker_is_slow():
    loader = DataLoader(Slow(12, delays={0: 0.3, 1: 0.3}), 2, num_workers=2, prefetch_factor=3)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]


def test_prefetch_factor_bounds_the_batches_in_flight():
    loader = DataLoader(Slow(40), 2, num_workers=2, prefetch_factor=3)
    it = iter(loader)
    assert len(it._owner) == 6                             # 2 workers x 3 ahead
    next(it)
    assert len(it._owner) == 6
    assert len(iter(DataLoader(Slow(40), 2, num_workers=2))._owner) == 4    # the default, 2 per worker
    del it
    assert _no_children()


# -- worker info, init, persistence ---------------------------------------------------------------------

def _tag_dataset(worker_id):
    get_worker_info().dataset.n_tag = 100 * (worker_id + 1)


class Tagged(Dataset):
    n_tag = 0

    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = get_worker_info()
        return [info.id, info.num_workers, self.n_tag, os.getpid()]


def test_get_worker_info_and_worker_init_fn():
    assert get_worker_info() is None
    ds = Tagged()
    rows = []
    for b in DataLoader(ds, 2, num_workers=2, worker_init_fn=_tag_dataset):
        rows += np.stack([x.numpy() for x in b], 1).tolist()
    assert [r[0] for r in rows] == [0, 0, 1, 1, 0, 0, 1, 1]          # round robin, one batch each
    assert {r[1] for r in rows} == {2} and [r[2] for r in rows] == [100, 100, 200, 200] * 2
    assert ds.n_tag == 0 and os.getpid() not in {r[3] for r in rows}   # each worker has its own copy
    info = ag.data.WorkerInfo(0, 2, 5, ds)
    with pytest.raises(AttributeError, match="read-only"):
        info.id = 1


def test_persistent_workers_live_between_epochs_and_go_with_the_loader():
    loader = DataLoader(Tagged(), 4, num_workers=2, persistent_workers=True)
    pids = [{r for r in b[3].tolist()} for b in loader]
    assert len(multiprocessing.active_children()) == 2
    again = [{r for r in b[3].tolist()} for b in loader]
    assert again == pids and len(set().union(*pids)) == 2          # the same two processes
    ref = DataLoader(Augmented(), 4, shuffle=True, generator=2)
    per = DataLoader(Augmented(), 4, shuffle=True, generator=2, num_workers=2, persistent_workers=True)
    assert [_batches(per) for _ in range(3)] == [_batches(ref) for _ in range(3)]
    it, it_ref = iter(per), iter(ref)
    next(it), next(it_ref)                                           # leave mid-epoch: the next epoch is whole
    assert _batches(per) == _batches(ref)
    del loader, per, it
    gc.collect()
    assert _no_children()


# -- errors in workers, timeouts, and no process left behind ---------------------------------------------

def test_a_worker_exception_is_raised_with_its_traceback_and_the_workers_stop():
    loader = DataLoader(Slow(16, boom=9), 2, num_workers=2)
    got = []
    with pytest.raises(ValueError) as e:
        for b in loader:
            got.append(b.tolist())
    msg = str(e.value)
    assert "Caught ValueError in DataLoader worker process 0" in msg and "while making batch 4" in msg
    assert "Traceback (most recent call last)" in msg and "sample 9 is corrupt" in msg
    assert 'raise ValueError(f"sample {i} is corrupt")' in msg                # the worker's source line
    assert got == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert _no_children()


def test_exceptions_that_need_other_arguments_and_key_errors():
    with pytest.raises(RuntimeError, match="Caught NeedsTwoArgs in DataLoader worker process 1"):
        list(DataLoader(RaisesOdd(), 1, num_workers=2))
    with pytest.raises(KeyError) as e:
        list(DataLoader(RaisesOdd(), 1, num_workers=2, sampler=[3, 0]))
    assert "Caught KeyError in DataLoader worker process 0" in str(e.value) and "\nOriginal Traceback" in str(e.value)
    assert _no_children()


def _bad_init(worker_id):
    if worker_id == 1:
        raise OSError("no such codec")


def test_worker_init_fn_exception():
    with pytest.raises(OSError, match=r"worker process 1 \(pid \d+\) in worker_init_fn(.|\n)*no such codec"):
        list(DataLoader(Slow(8), 2, num_workers=2, worker_init_fn=_bad_init))
    assert _no_children()


def test_a_worker_that_fails_to_start_reports_it(monkeypatch):
    from autograd_gpu.data import _worker

    def broken(*args):
        raise ImportError("cannot import the dataset's module")
    monkeypatch.setattr(_worker, "seed_worker", broken)                   # (forked workers inherit it)
    with pytest.raises(ImportError, match=r"worker process 0 \(pid \d+\) while starting(.|\n)*dataset's module"):
        list(DataLoader(Slow(4), 2, num_workers=2))
    assert _no_children()


def test_timeout_names_the_worker_and_the_batch():
    loader = DataLoader(Slow(8, delays={2: 5.0}), 2, num_workers=2, timeout=0.4)
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match=r"timed out after 0.4 seconds waiting for batch 1 from worker 1 \(pid \d+\)"):
        list(loader)
    assert time.monotonic() - t0 < 3.0
    assert _no_children()
    assert [b.tolist() for b in DataLoader(Slow(4, delays={1: 0.1}), 2, num_workers=1, timeout=2)] == [[0, 1], [2, 3]]


def test_a_worker_that_dies_is_reported():
    with pytest.raises(RuntimeError, match=r"DataLoader worker 1 \(pid \d+\) exited unexpectedly with exit code 3"):
        list(DataLoader(Slow(8, die=2), 2, num_workers=2))
    assert _no_children()


def test_no_worker_outlives_a_break_or_ctrl_c_in_the_loop():
    for b in DataLoader(Slow(40), 2, num_workers=2):
        assert len(multiprocessing.active_children()) == 2
        break
    assert _no_children()
    with pytest.raises(KeyboardInterrupt):
        for b in DataLoader(Slow(40), 2, num_workers=2):
            raise KeyboardInterrupt
    assert _no_children()
    it = iter(DataLoader(Slow(40), 2, num_workers=2))
    next(it)
    del it                                                             # garbage-collected mid-epoch
    assert _no_children()


def _start_loop(path):
    """A script iterating a loader with 2 workers (batches of 80 KiB: shared memory), in a session of
    its own; read its first line for its workers' pids."""
    path.write_text(textwrap.dedent(f"""
        import multiprocessing, sys, time
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        from autograd_gpu.data import DataLoader, Dataset
        class Slow(Dataset):
            def __len__(self): return 10 ** 6
            def __getitem__(self, i):
                time.sleep(0.01)
                return np.zeros(5000, np.float32)
        for k, b in enumerate(DataLoader(Slow(), 4, num_workers=2)):
            if k == 0:
                print(" ".join(str(p.pid) for p in multiprocessing.active_children()), flush=True)
    """))
    return subprocess.Popen([sys.executable, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _gone(pids, within=30.0):        # generous: a loaded CI machine is slow to reap; returns as soon as gone
    deadline = time.monotonic() + within
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _running(p)]
        time.sleep(0.05)
    return alive == []


def test_no_worker_outlives_ctrl_c_or_a_killed_main_process(tmp_path):
    """Ctrl-C: a real SIGINT to the script's process group, as a terminal sends it; and a SIGKILL of
    the main process alone, after which no cleanup of its own can run (two scripts at once)."""
    procs = [_start_loop(tmp_path / "ctrl_c.py"), _start_loop(tmp_path / "killed.py")]
    try:
        pids = [[int(p) for p in proc.stdout.readline().split()] for proc in procs]
        assert [len(p) for p in pids] == [2, 2], procs[0].communicate(timeout=60)
        os.killpg(procs[0].pid, signal.SIGINT)
        os.kill(procs[1].pid, signal.SIGKILL)
        (_, err), _ = (proc.communicate(timeout=60) for proc in procs)      # (returns when they end)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert "KeyboardInterrupt" in err and procs[0].returncode != 0
    assert _gone(pids[0]), "workers still running after Ctrl-C"
    assert _gone(pids[1]), "workers outlived a killed main process"
    if os.path.isdir("/dev/shm"):
        assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"ag_dataloader_{procs[1].pid}_")]


def _running(pid):
    """Whether a process runs (a zombie waiting to be reaped does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# -- IterableDataset ----------------------------------------------------------------------------------------

def test_iterable_dataset_sharded_by_worker_info():
    assert [b.tolist() for b in DataLoader(Stream(7), 3)] == [[0, 1, 2], [3, 4, 5], [6]]
    got = [b.tolist() for b in DataLoader(Stream(10), 2, num_workers=2)]
    assert got == [[0, 2], [1, 3], [4, 6], [5, 7], [8], [9]]         # one batch from each worker in turn
    got = [b.tolist() for b in DataLoader(Stream(10), 2, num_workers=2, drop_last=True)]
    assert sorted(v for b in got for v in b) == [0, 1, 2, 3, 4, 5, 6, 7] and all(len(b) == 2 for b in got)
    unsharded = [v for b in DataLoader(Stream(5, shard=False), 2, num_workers=2) for v in b.tolist()]
    assert sorted(unsharded) == sorted(list(range(5)) * 2)           # each worker streams the whole dataset
    per = DataLoader(Stream(6), 2, num_workers=3, persistent_workers=True)
    assert [b.tolist() for b in per] == [b.tolist() for b in per] == [[0, 3], [1, 4], [2, 5]]
    del per
    with pytest.raises(TypeError, match="IterableDataset"):
        len(DataLoader(Stream(4), 2))
    with pytest.raises(ValueError, match="expected unspecified shuffle option, but got shuffle=True"):
        DataLoader(Stream(4), shuffle=True)
    gc.collect()
    assert _no_children()


# -- spawn, transport ----------------------------------------------------------------------------------------

def test_spawn_start_method():
    ds = TensorDataset(ag.randn(17, 2), ag.arange(17))             # Tensors in the dataset travel pickled
    spawn = DataLoader(ds, 4, shuffle=True, generator=3, num_workers=2, multiprocessing_context="spawn",
                       worker_init_fn=_tag_dataset, persistent_workers=True)
    ref = DataLoader(ds, 4, shuffle=True, generator=3)
    assert _batches(spawn) == _batches(ref) and _batches(spawn) == _batches(ref)
    del spawn
    gc.collect()

    class Local(Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return i
    with pytest.raises(TypeError, match="'spawn' get the dataset, collate_fn and worker_init_fn pickled"):
        iter(DataLoader(Local(), num_workers=1, multiprocessing_context="spawn"))
    assert _no_children()


def _first(samples):
    return samples[0]


def test_tensors_that_require_grad_cross_as_leaves_and_graphs_do_not():
    w = ag.randn(6, 2, requires_grad=True)
    got = list(DataLoader([w[i].detach().requires_grad_() for i in range(6)], 1, num_workers=1, collate_fn=_first))
    assert all(b.requires_grad and b.is_leaf for b in got)
    np.testing.assert_array_equal(np.stack([b.detach().numpy() for b in got]), w.detach().numpy())
    with pytest.raises(RuntimeError, match="requires grad and is not a leaf"):
        list(DataLoader(TensorDataset(w), 3, num_workers=1))
    assert _no_children()


def _shm_files():
    return sorted(f for f in os.listdir("/dev/shm") if f.startswith(f"ag_dataloader_{os.getpid()}_"))


def _mapped(array):
    """Whether the array's memory is a shared-memory mapping (an mmap under its bases)."""
    b = array
    while getattr(b, "base", None) is not None and not isinstance(b, memoryview):
        b = b.base
    return isinstance(b, memoryview) and type(b.obj).__name__ == "mmap"


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm: batches travel in the pickle")
def test_large_arrays_travel_in_shared_memory_and_no_file_is_left():
    ds = TensorDataset(ag.randn(96, 300), ag.arange(96))             # 32 x 300 float32 = 37.5 KiB per batch...
    big = DataLoader(ds, 64, num_workers=2)                           # ...64 rows = 75 KiB: out of band
    (x, y), (x2, _) = list(big)
    assert _mapped(x.data) and not _mapped(y.data) and x.data.flags.writeable
    np.testing.assert_array_equal(np.concatenate([x.numpy(), x2.numpy()]), ds.tensors[0].numpy())
    small = next(iter(DataLoader(ds, 32, num_workers=1)))
    assert not _mapped(small[0].data)
    assert _shm_files() == []
    for b in DataLoader(ds, 64, num_workers=2, prefetch_factor=4):  # leave with a batch still in flight
        break
    per = DataLoader(ds, 64, num_workers=2, persistent_workers=True)
    it = iter(per)
    next(it)
    time.sleep(0.2)
    assert [b[0].numpy().shape for b in per] == [(64, 300), (32, 300)]    # the old epoch's batch is dropped
    del it, per
    gc.collect()
    assert _no_children() and _shm_files() == []
    with pytest.raises(ValueError):
        list(DataLoader(Slow(64, boom=40), 1, num_workers=2, collate_fn=_as_big_array))
    assert _shm_files() == []


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm: batches travel in the pickle")
def test_a_full_shared_memory_falls_back_to_the_pickle(monkeypatch):
    def full(fd, data, offset):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "pwrite", full)                            # (forked workers inherit it)
    ds = TensorDataset(ag.randn(128, 300))
    got = [x for (x,) in DataLoader(ds, 64, num_workers=1)]
    assert not any(_mapped(x.data) for x in got)
    np.testing.assert_array_equal(np.concatenate([x.numpy() for x in got]), ds.tensors[0].numpy())
    assert _shm_files() == []


def _as_big_array(samples):
    return np.zeros((len(samples), 1 << 15), np.float32) + samples[0]


# -- pin_memory -------------------------------------------------------------------------------------------

def test_pin_memory_without_cuda_in_use_is_accepted_and_changes_nothing(monkeypatch):
    from autograd_gpu.backends import cupy_backend
    monkeypatch.setattr(cupy_backend, "is_available", lambda: False)
    ds = Augmented(9)
    assert _batches(DataLoader(ds, 4, pin_memory=True)) == _batches(DataLoader(ds, 4))
    assert _batches(DataLoader(ds, 4, pin_memory=True, num_workers=2)) == _batches(DataLoader(ds, 4))


@pytest.mark.gpu
def test_pin_memory_copies_cpu_batches_into_cudas_pinned_buffers(monkeypatch):
    """The CuPy stand-in does not simulate page-locked memory (pinning is a no-op on it); here its
    allocator is replaced by one that records what it hands out, so the pinning path itself runs."""
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the stand-in)")
    from autograd_gpu.backends import cupy_backend, get_backend
    ds = TensorDataset(ag.arange(8.0), ag.arange(8))
    cuda_batch = next(iter(DataLoader(TensorDataset(ag.arange(4.0, device="cuda")), 4, pin_memory=True)))
    assert cuda_batch[0].device.type == "cuda"                         # only CPU tensors are pinned
    given, patched = [], cupy_backend.simulated()
    if patched:
        assert _batches(DataLoader(ds, 4, pin_memory=True)) == _batches(DataLoader(ds, 4))   # a no-op there

        def alloc(nbytes):
            given.append(bytearray(nbytes))
            return given[-1]
        monkeypatch.setattr(cupy_backend, "simulated", lambda: False)
        monkeypatch.setattr(get_backend("cuda").xp.cuda, "alloc_pinned_memory", alloc)
    for workers in (0, 2):
        batches = list(DataLoader(ds, 4, pin_memory=True, num_workers=workers))
        assert [tuple(t.numpy().tolist() for t in b) for b in batches] == _batches(DataLoader(ds, 4))
        for x, y in batches:
            assert x.device == ag.device("cpu") and x.dtype == ag.float32 and y.dtype == ag.int64
            for t in (x, y):
                base = t.data.base
                assert any(base is g for g in given) if patched else type(base).__name__ == "PinnedMemoryPointer"
    assert len(given) == (8 if patched else 0)


# -- argument errors, in PyTorch's words -------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    ({"num_workers": -1}, ValueError, "num_workers option should be non-negative; use num_workers=0 to disable"),
    ({"num_workers": 1.5}, TypeError, "num_workers must be an int, got float"),
    ({"prefetch_factor": 2}, ValueError, "prefetch_factor option could only be specified in multiprocessing"),
    ({"num_workers": 1, "prefetch_factor": 0}, ValueError, "prefetch_factor option should be a positive int, got 0"),
    ({"timeout": -1}, ValueError, r"timeout option should be non-negative \(got timeout=-1\)"),
    ({"timeout": "5"}, TypeError, "timeout must be a number of seconds, got str"),
    ({"persistent_workers": True}, ValueError, "persistent_workers option needs num_workers > 0"),
    ({"num_workers": 1, "worker_init_fn": 3}, TypeError, "worker_init_fn must be callable, got int"),
    ({"multiprocessing_context": "spawn"}, ValueError, "multiprocessing_context can only be used with multi-process"),
    ({"num_workers": 1, "multiprocessing_context": "thread"}, ValueError, "valid start method in"),
])
def test_bad_worker_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        DataLoader(Slow(4), 2, **kwargs)


# -- the benchmark, in its tiny mode ---------------------------------------------------------------------------

def test_data_workers_benchmark_runs_tiny(capsys):
    from benchmarks import data_workers
    rows = data_workers.main(["--tiny"])
    assert [r["num_workers"] for r in rows] == [0, 2] and all(r["samples_per_s"] > 0 for r in rows)
    out = capsys.readouterr().out
    assert "num_workers=2" in out and "speedup" in out
