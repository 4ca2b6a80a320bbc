"""The DataLoader's iterator with worker processes.

Tasks (one per batch, numbered in the order of the epoch) go round-robin to the workers' index
queues, at most ``prefetch_factor`` per worker ahead of the batch being consumed; results come back
on one queue in any order and are handed out by number, so batches arrive in the same order as
without workers. The workers are daemon processes; they are shut down (done event, a None on each
index queue, join, then terminate for any that does not stop) when the epoch ends (unless
persistent_workers), when a worker's exception or a timeout is raised, when the consumer stops
early and the iterator is garbage-collected, on Ctrl-C in the main process, and at interpreter exit.
"""
import atexit
import itertools
import os
import queue
import signal
import time
import weakref

from ._worker import (worker_loop, WorkerSpec, dumps, loads_batch, discard_batch, remove_shm_files, shm_available,
                      POLL_S, BATCH, END, ERROR)

__all__ = ["MultiProcessIter"]

_live: "weakref.WeakSet[MultiProcessIter]" = weakref.WeakSet()      # iterators whose workers may still run
_serial = itertools.count()


@atexit.register
def _shutdown_all():
    for it in list(_live):
        it._shutdown(grace=0.2)


def _exit_text(code):
    if code is not None and code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class MultiProcessIter:
    def __init__(self, loader):
        ctx = loader._mp_context()
        n = loader.num_workers
        self._num_workers, self._prefetch = n, loader.prefetch_factor or 2
        self._timeout, self._persistent = loader.timeout, loader.persistent_workers
        self._pinner = loader._pinner()
        self._shut, self._shm_prefix = False, None
        self._workers, self._index_queues = [], []
        self._result_queue = ctx.Queue()
        self._done = ctx.Event()
        self._epoch_value = ctx.Value("q", 0, lock=False)
        self._epoch = 0
        tasks, base_seed = loader._epoch_plan()
        forked = ctx.get_start_method() == "fork"
        self._shm_prefix = f"ag_dataloader_{os.getpid()}_{next(_serial)}_" if shm_available() else None
        spec = WorkerSpec(loader.dataset, loader._iterable, loader.collate_fn, loader.batch_size, loader.drop_last,
                          loader.worker_init_fn, base_seed, n, forked, self._shm_prefix)
        if not forked:                     # the spec travels pickled: say so when it cannot
            try:
                spec = dumps(spec)
            except Exception as e:
                raise TypeError(f"DataLoader: workers started with {ctx.get_start_method()!r} get the dataset, "
                                f"collate_fn and worker_init_fn pickled, and pickling failed: {type(e).__name__}: "
                                f"{e}. Define them at module level (not inside a function), or use the 'fork' "
                                "start method") from None
        _live.add(self)
        try:
            for wid in range(n):
                q = ctx.Queue()
                w = ctx.Process(target=worker_loop, name=f"DataLoader worker {wid}", daemon=True,
                                args=(spec, q, self._result_queue, self._done, self._epoch_value, wid))
                w.start()
                self._index_queues.append(q)
                self._workers.append(w)
        except BaseException:
            self._shutdown(grace=0)
            raise
        self._begin(tasks)

    def __iter__(self):
        return self

    def _begin(self, tasks):
        for _, kind, payload in getattr(self, "_cache", {}).values():    # an epoch left early: drop its batches
            if kind == BATCH:
                discard_batch(payload)
        self._tasks = iter(tasks)
        self._send_idx = self._rcvd_idx = 0
        self._cache = {}                   # idx -> (worker_id, kind, payload) that came early
        self._owner = {}                   # idx -> worker_id, for the tasks sent and not yet handed out
        self._active = [True] * self._num_workers
        self._next_worker = 0
        for _ in range(self._prefetch * self._num_workers):
            self._put_task()

    def _reset(self, loader):
        """A new epoch on the same (persistent) workers; results of the old one are dropped."""
        tasks, _ = loader._epoch_plan()    # the draw keeps the generator in step with num_workers=0; the
        self._epoch += 1                   # workers keep the seeds they started with, as PyTorch's do
        self._epoch_value.value = self._epoch
        self._begin(tasks)

    def _put_task(self):
        if len(self._owner) >= self._prefetch * self._num_workers:
            return
        for _ in range(self._num_workers):
            wid = self._next_worker
            self._next_worker = (wid + 1) % self._num_workers
            if self._active[wid]:
                break
        else:
            return                         # every worker's stream has ended
        try:
            index = next(self._tasks)
        except StopIteration:
            return
        self._index_queues[wid].put((self._epoch, self._send_idx, index))
        self._owner[self._send_idx] = wid
        self._send_idx += 1

    def __next__(self):
        if self._shut:
            raise StopIteration
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        try:
            while True:
                if self._rcvd_idx >= self._send_idx:         # nothing in flight and nothing left to send
                    if not self._persistent:
                        self._shutdown()
                    raise StopIteration
                if self._rcvd_idx in self._cache:
                    wid, kind, payload = self._cache.pop(self._rcvd_idx)
                else:
                    epoch, idx, wid, kind, payload = self._get(deadline)
                    if epoch != self._epoch:
                        if kind == BATCH:
                            discard_batch(payload)
                        continue
                    if idx != self._rcvd_idx:
                        self._cache[idx] = (wid, kind, payload)
                        continue
                del self._owner[self._rcvd_idx]
                self._rcvd_idx += 1
                if kind == ERROR:
                    self._shutdown(grace=0.2)
                    payload.reraise()
                if kind == END:                              # that worker's stream has ended
                    self._active[wid] = False
                    self._put_task()
                    continue
                self._put_task()
                batch = loads_batch(payload)
                return batch if self._pinner is None else self._pinner(batch)
        except StopIteration:
            raise
        except BaseException:                                # a worker's error, a timeout, Ctrl-C
            self._shutdown(grace=0.2)
            raise

    def _get(self, deadline):
        """The next result from any worker; RuntimeError when a worker has died or, with a timeout, when
        ``deadline`` (for the batch being waited for) has passed."""
        while True:
            wait = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
            try:
                return self._result_queue.get(timeout=wait)
            except queue.Empty:
                pass
            for wid, w in enumerate(self._workers):
                if not w.is_alive():
                    raise RuntimeError(f"DataLoader worker {wid} (pid {w.pid}) exited unexpectedly with "
                                       f"{_exit_text(w.exitcode)}")
            if deadline is not None and time.monotonic() >= deadline:
                wid = self._owner.get(self._rcvd_idx)
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds waiting for batch "
                                   f"{self._rcvd_idx} from worker {wid} (pid {self._workers[wid].pid})")

    def _shutdown(self, grace=2.0):
        """Stop every worker: ask (done event, None on its queue), wait up to ``grace`` seconds in all,
        then terminate (and kill) the rest; close the queues without waiting to flush them."""
        if self._shut:
            return
        self._shut = True
        _live.discard(self)
        try:
            self._done.set()
            for q in self._index_queues:
                try:
                    q.put(None)
                except Exception:
                    pass
            deadline = time.monotonic() + grace
            for w in self._workers:
                w.join(timeout=max(0.0, deadline - time.monotonic()))
            for w in self._workers:
                if w.is_alive():
                    w.terminate()
            for w in self._workers:
                w.join(timeout=1.0)
                if w.is_alive():
                    w.kill()
                    w.join()
        finally:
            for q in (*self._index_queues, self._result_queue):
                q.cancel_join_thread()
                q.close()
            if self._shm_prefix is not None:
                remove_shm_files(self._shm_prefix)

    def __del__(self):
        try:
            self._shutdown(grace=0.2)
        except Exception:
            pass


def get_context(method):
    """A multiprocessing context for ``method``: None (the platform's default), 'fork', 'spawn',
    'forkserver', or a context object."""
    import multiprocessing                 # here: `import autograd_gpu` does not pay for it
    if method is None:
        return multiprocessing.get_context()
    if isinstance(method, str):
        methods = multiprocessing.get_all_start_methods()
        if method not in methods:
            raise ValueError(f"DataLoader: multiprocessing_context should specify a valid start method in "
                             f"{methods!r}, but got multiprocessing_context={method!r}")
        return multiprocessing.get_context(method)
    if hasattr(method, "Process") and hasattr(method, "get_start_method"):
        return method
    raise TypeError(f"DataLoader: multiprocessing_context must be a start method name or a multiprocessing "
                    f"context, got {type(method).__name__}")

