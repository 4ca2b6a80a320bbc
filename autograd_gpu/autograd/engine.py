"""backward() and grad(): an iterative walk over the graph in topological order.

Gradients flow from the roots along each node's edges. Every node carries its creation number, and
a node's inputs were always created before it, so taking the pending node with the highest number
first runs each node after all the nodes that consume its outputs (PyTorch orders its engine the
same way). No recursion and no counting pass: a chain of 10**6 ops is fine. Gradients meant for the
same output are summed before the node runs; leaves receive their totals at the end.

The engine's hook points, for whatever needs to act while backward runs (data parallelism's
gradient buckets, distributed/ddp.py, register on them; the engine knows nothing of their users):
- a leaf's post-accumulate-grad hooks (``Tensor.register_post_accumulate_grad_hook``) run as soon as
  its total is final, in the middle of backward, not at the end: when the first such leaf gets a
  gradient, one walk from the nodes still pending finds, for each hooked leaf, the lowest-numbered
  node that sends it one; once the loop has run that node, the leaf's .grad is written (a copy of
  the gradient when the engine may still hold it elsewhere, so that a hook may change .grad in
  place) and its post-accumulate hooks run. A backward that reaches no hooked leaf makes no walk, so
  hooks alive elsewhere cost unrelated graphs nothing; leaves without such hooks are finished at the
  end, as before;
- ``queue_callback(fn)`` runs ``fn`` when the current backward() has finished (``current_backward()``
  tells one backward from the next).
"""
import heapq
import threading
import weakref
from .grad_mode import state
from . import function as _function
from .. import _trace_hooks
from .anomaly import check_gradients

__all__ = ["run_backward", "backward", "grad", "queue_callback"]

_post_hooked = weakref.WeakValueDictionary()   # id -> leaf with post-accumulate-grad hooks (Tensor's == is elementwise)
# backward()'s seed for a real scalar loss on a GPU: ones, one array per (device, dtype, shape) made once, not a
# fill kernel every step. Nothing writes a gradient it was given, with two exceptions that _seed_ok and
# backward() handle: a user's hook (the seed is dropped after a backward that ran one) and a user's Function at
# the root (never seeded from here). A leaf never keeps it as its .grad (_owned copies it).
_seeds = {}
_seed_ids = set()                      # id() of the arrays in _seeds
_hook_runs = [0]                       # hooks run so far (any thread): a backward that saw it move drops its seed
_callbacks = threading.local()         # .stack: one list of queued callbacks per running backward()


class _Callbacks(list):
    """The callbacks queued during one backward(); ``writes_grad`` is False inside grad(); ``leaf`` the
    leaves' gradient totals (None with create_graph: see leaf_sum). (No __init__ of its own: list's C
    one is cheaper, and one is made per backward.)"""
    __slots__ = ("writes_grad", "leaf")


def current_backward():
    """The callback list of the backward() or grad() now running in this thread (compare with
    ``is`` to tell one backward from the next; ``.writes_grad`` says whether it accumulates into
    .grad), or None outside backward."""
    stack = getattr(_callbacks, "stack", None)
    return stack[-1] if stack else None


def queue_callback(fn):
    """Run ``fn()`` once the backward() now running has written every .grad (PyTorch's
    Variable._execution_engine.queue_callback). Only valid inside a backward()."""
    stack = getattr(_callbacks, "stack", None)
    if not stack:
        raise RuntimeError("queue_callback: no backward() is running; call it from a hook during backward")
    stack[-1].append(fn)


def _check_root(t, g, where):
    Tensor = _function.Tensor
    if t.__class__ is Tensor and g is None and t.requires_grad and t.data.size == 1 and t.data.dtype.kind != "c":
        return t._ones_like()                      # the common case: a real scalar loss
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: expected Tensors as outputs, got {type(t).__name__}")
    if not t.requires_grad:
        raise RuntimeError(f"{where}: the tensor (shape {t.shape}) does not require grad and has no "
                           "grad_fn, so there is nothing to differentiate; did you forget requires_grad=True "
                           "on an input, or compute it under no_grad()?")
    if g is None:
        if t.data.size != 1:
            raise RuntimeError(f"{where}: grad can be omitted only for a tensor with one element; got shape "
                               f"{t.shape}; pass grad= (a tensor of that shape), e.g. ag.ones_like(y)")
        if t.data.dtype.kind == "c":          # as PyTorch: a complex "loss" is almost always a mistake
            raise RuntimeError(f"{where}: grad can be omitted only for a real scalar, got {t.dtype}; "
                               "take a real loss (e.g. .abs(), .real) or pass grad=")
        return t._ones_like()
    if not isinstance(g, Tensor):
        g = Tensor(g, dtype=t.dtype, device=t.device)       # (what ag.tensor does)
    if g.device is not t.device:
        raise RuntimeError(f"{where}: grad is on {g.device} but the tensor is on {t.device}")
    if g.shape != t.shape:
        raise RuntimeError(f"{where}: grad has shape {g.shape} but the tensor has shape {t.shape}")
    if g.dtype != t.dtype:            # as PyTorch: cast to the output's dtype (the backward kernels are typed
        if "c" in (g.data.dtype.kind, t.data.dtype.kind):     # by it), except between complex and another
            raise RuntimeError(f"{where}: for complex tensors grad and the tensor must have the same dtype, got "
                               f"grad of dtype {g.dtype} for a tensor of dtype {t.dtype}")
        g = g.to(dtype=t.dtype)
    return g


def _owned(g, given):
    """g itself, or a copy when g may be shared with something else (given twice, the caller's own
    grad tensor, a view such as a broadcast, or backward()'s cached seed), so that .grad never aliases
    other memory. A view that alone reaches its base (a reshape of a fresh result: conv's weight gradient,
    a compiled backward's output) is kept as it is (backend.sole_view), except while ag.compile traces: who
    holds an array then says nothing of the replays."""
    d = g.data
    if id(g) in given or (d.base is not None and (_trace_hooks.state.t is not None
                                                  or not g.device.backend.sole_view(d))) or \
            (_seed_ids and id(d) in _seed_ids):
        return g.clone() if g.requires_grad else g._copy()
    given.add(id(g))
    return g


def run_backward(roots, retain_graph, create_graph, inputs=None):
    """roots: [(tensor, grad)]. Without ``inputs`` accumulate into leaves' .grad and return None;
    with ``inputs`` (a list of tensors) return their gradients instead and leave .grad alone."""
    Tensor = _function.Tensor
    buffers = {}                       # node -> its output's grad, or [grad per output] if several
    leaf = {}                          # id(leaf) -> [leaf, grad]
    given = set()
    for t, g in roots:
        given.add(id(g))
        node = t.grad_fn
        if node is None:
            _add_leaf(leaf, t, g)
        else:
            _add_grad(buffers, node, t._output_nr, g)

    captured = needed = None
    if inputs is not None:
        captured = {}
        wanted = {(t.grad_fn, t._output_nr) for t in inputs if t.grad_fn is not None}
        wanted_leaves = {id(t) for t in inputs if t.grad_fn is None}
        capture_nodes = {n for n, _ in wanted}
        needed = _needed_nodes(list(buffers), wanted_leaves, capture_nodes)
        leaf = {k: v for k, v in leaf.items() if k in wanted_leaves}

    # leaves with post-accumulate hooks are finished as soon as their last sender has run
    watch = captured is None and len(_post_hooked) > 0
    first_use = None                               # id(hooked leaf) -> its last sender's seq, once walked
    hit = []                                       # hooked leaves given their first gradient by this node
    ready = []                                     # heap of (-lowest sender seq, leaf id)
    state_anomaly = state.anomaly
    prev = state.enabled
    state.enabled = create_graph
    stack = getattr(_callbacks, "stack", None)
    if stack is None:
        stack = _callbacks.stack = []
    callbacks = _Callbacks()
    callbacks.writes_grad = captured is None
    callbacks.leaf = leaf if not create_graph else None     # for leaf_sum: the totals this backward owns
    stack.append(callbacks)
    try:
        if len(buffers) == 1:                      # one root (a loss): nothing to order
            root, = buffers
            heap = [(-root._seq, root)]
        else:
            heap = [(-n._seq, n) for n in buffers]  # nodes with a gradient waiting, latest first
            heapq.heapify(heap)
        push, pop = heapq.heappush, heapq.heappop
        add = _add_grads if create_graph else _add_arrays
        plain = captured is None and not state_anomaly
        # the highest-numbered node newly given a gradient waits here rather than in the heap: in a
        # chain it is the next to run, so most nodes never touch the heap
        cand = None
        while True:
            if cand is not None and (not heap or heap[0][0] > -cand._seq):
                node, cand = cand, None
            elif heap:
                node = pop(heap)[1]
            else:
                break
            if node._freed:
                raise RuntimeError(f"backward through a graph that was already freed (at {type(node).__name__}); "
                                   "pass retain_graph=True to the first backward() if you need to call it twice")
            grads = buffers.pop(node)
            nxt = node._next
            if needed is not None and node not in needed:
                if node in capture_nodes:          # a requested input: keep its gradient, go no further
                    for k, g in enumerate([grads] if node._n_out == 1 else grads):
                        if g is not None and (node, k) in wanted:
                            captured[(node, k)] = _run_hooks(node._hooks.get(k, ()), g) if node._hooks else g
                continue
            if node._n_out == 1 and node._hooks is None and plain:
                results = type(node).backward(node, grads)
                if results.__class__ is not tuple or len(results) != len(nxt):
                    results = (results,) if results.__class__ is Tensor and len(nxt) == 1 else \
                        _check_results(node, results)
            else:
                if node._n_out == 1:
                    grads = [grads]
                if node._hooks is not None:
                    grads = _run_node_hooks(node, grads, given)
                if captured is not None:
                    for k, g in enumerate(grads):
                        if g is not None and (node, k) in wanted:
                            captured[(node, k)] = g
                results = _call_backward(node, grads)
                if state_anomaly:
                    check_gradients(node, results)
            if node._user_fn:                      # a user's backward may return a tensor it keeps (or
                for g in results:                  # its input, from a hook): never a .grad as it is
                    if g is not None:
                        given.add(id(g))
            if not retain_graph:
                node._saved = None
                node._freed = True
            for e, g in zip(nxt, results):
                if e is None or g is None:
                    continue
                if e.__class__ is tuple:
                    m, k = e
                elif isinstance(e, Tensor):        # a leaf
                    if needed is None or id(e) in wanted_leaves:
                        if _add_leaf(leaf, e, g, add) and watch and e._post_acc_hooks:
                            hit.append(e)
                    continue
                else:
                    m, k = e, 0
                if needed is not None and m not in needed and m not in capture_nodes:
                    continue                       # leads to no requested input
                if m._n_out == 1:
                    old = buffers.get(m)
                    if old is not None:
                        buffers[m] = add(old, g)
                        continue
                    buffers[m] = g
                else:
                    buf = buffers.get(m)
                    if buf is not None:
                        buf[k] = g if buf[k] is None else add(buf[k], g)
                        continue
                    buf = buffers[m] = [None] * m._n_out
                    buf[k] = g
                if cand is None:                   # m is newly pending
                    cand = m
                elif m._seq > cand._seq:
                    push(heap, (-cand._seq, cand))
                    cand = m
                else:
                    push(heap, (-m._seq, m))
            if hit:
                if first_use is None:              # the first hooked leaf reached: walk what is left
                    first_use = _first_senders([n for _, n in heap] + ([cand] if cand is not None else []))
                for e in hit:                      # no sender left to run: final after this node
                    heapq.heappush(ready, (-first_use.get(id(e), node._seq), id(e)))
                hit.clear()
            # every node numbered above this one has run: leaves whose senders all did are final
            while ready and -ready[0][0] >= node._seq:
                t, g, owned = leaf.pop(heapq.heappop(ready)[1])
                _finish_leaf(t, g, given, create_graph, owned)

        # the other leaves last: hooks see the summed gradient, then .grad accumulates (or the caller gets it)
        for t, g, owned in leaf.values():
            if captured is not None:
                captured[id(t)] = _run_hooks(t._hooks, g) if t._hooks is not None else g
                continue
            _finish_leaf(t, g, given, create_graph, owned)
        callbacks = stack[-1]
        while callbacks:                           # a callback may queue another
            callbacks.pop(0)()
    finally:
        stack.pop()
        state.enabled = prev
    if captured is None:
        return None
    return [captured.get(id(t) if t.grad_fn is None else (t.grad_fn, t._output_nr)) for t in inputs]


def _finish_leaf(t, g, given, create_graph, owned=True):
    """Run the leaf's hooks on its total gradient, accumulate it into .grad, then run the
    post-accumulate-grad hooks. ``owned``: the gradient is a sum this backward made, referenced
    nowhere else."""
    if t._grad is None and t._hooks is None and t._post_acc_hooks is None and not create_graph and \
            g.data.dtype == t.data.dtype and g.device is t.device:
        g = _owned(g, given)                       # the common case (.grad's setter checks hold: shape was checked)
        # an engine-made gradient is already outside any graph: it becomes .grad itself, not a detached twin
        t._grad = g if g.grad_fn is None and not g.requires_grad else g.detach()
        return
    post = t._post_acc_hooks
    g0 = g
    if t._hooks is not None:
        g = _run_hooks(t._hooks, g, given)
    if g.dtype != t.dtype:
        if g.data.dtype.kind == "c" and t.data.dtype.kind != "c":
            g = g.real                      # a real leaf's gradient is the real part (PyTorch's engine)
        g = g.to(dtype=t.dtype)
    cur = t.grad
    if cur is None:
        if post and not owned and g is g0:
            # a node's result may also sit in a pending node's buffer or another leaf's total; the
            # hooks below (and whatever runs before backward ends) may write .grad in place
            g = g.clone() if g.requires_grad else g._copy()
        t.grad = _owned(g, given) if create_graph else _owned(g, given).detach()
    elif create_graph or cur.requires_grad:
        t.grad = cur + g
    else:
        _add_into(cur.data, g)
        cur._bump_version()
    for fn in post or ():
        fn(t)


def _first_senders(roots):
    """id(leaf) -> the lowest creation number among the nodes reachable from ``roots`` that have
    the leaf as an input: the last of them to run in backward. Only leaves with post-accumulate
    hooks are recorded."""
    Tensor = _function.Tensor
    first, visited, stack = {}, set(roots), list(roots)
    while stack:
        n = stack.pop()
        for e in n._next:
            if e is None:
                continue
            if isinstance(e, Tensor):
                if e._post_acc_hooks:
                    old = first.get(id(e))
                    if old is None or n._seq < old:
                        first[id(e)] = n._seq
                continue
            m = e[0] if e.__class__ is tuple else e
            if m not in visited:
                visited.add(m)
                stack.append(m)
    return first


def _needed_nodes(roots, wanted_leaves, capture_nodes):
    """The nodes whose backward leads to a requested input (a wanted leaf, or a node whose output is
    wanted), found by one iterative post-order walk from the roots (PyTorch's exec_info)."""
    Tensor = _function.Tensor
    needed, visited = set(), set()
    stack = [(n, False) for n in roots]
    while stack:
        n, done = stack.pop()
        if done:
            for e in n._next:
                if e is None:
                    continue
                if isinstance(e, Tensor):
                    if id(e) in wanted_leaves:
                        needed.add(n)
                    continue
                m = e[0] if e.__class__ is tuple else e
                if m in needed or m in capture_nodes:
                    needed.add(n)
            continue
        if n in visited:
            continue
        visited.add(n)
        stack.append((n, True))
        for e in n._next:                          # in a DAG a child is complete before its parent
            if e is not None and not isinstance(e, Tensor):
                m = e[0] if e.__class__ is tuple else e
                if m not in visited:
                    stack.append((m, False))
    return needed


def leaf_sum(node, i, shape, dtype):
    """The array into which the running backward (create_graph=False) sums the gradient of the leaf that is
    input ``i`` of ``node``, when it already owns that sum (a second gradient reached it) and it has this
    shape and dtype; else None. A backward given it may add its gradient for that input into it in place
    and return None for the input (one pass instead of the product then the engine's add)."""
    stack = getattr(_callbacks, "stack", None)
    if not stack:
        return None
    leaf = stack[-1].leaf
    e = node._next[i]
    if leaf is None or e is None or e.__class__ is tuple or not isinstance(e, _function.Tensor):
        return None
    entry = leaf.get(id(e))
    if entry is None or not entry[2]:
        return None
    a = entry[1].data
    return a if a.shape == shape and a.dtype == dtype else None


def _add_grad(buffers, node, k, g):
    if node._n_out == 1:
        old = buffers.get(node)
        buffers[node] = g if old is None else old + g
        return
    buf = buffers.get(node)
    if buf is None:
        buf = buffers[node] = [None] * node._n_out
    buf[k] = g if buf[k] is None else buf[k] + g


def _add_grads(a, b):
    """Sum two gradients as a recorded op (create_graph=True)."""
    return a + b


def _add_arrays(a, b):
    """Sum two gradients on their arrays: nothing is recorded, so skip the op machinery."""
    d = a.device
    backend = d.backend
    if backend.context is None:
        return a._make(a.data + b.data, d)
    return a._make(backend.call(backend.xp.add, a.data, b.data), d)     # on a's GPU, whichever is current


def _add_into(acc, g):
    """acc += g.data, on g's GPU whichever is current."""
    backend = g.device.backend
    if backend.context is None:
        acc += g.data
    else:
        backend.call(backend.xp.add, acc, g.data, out=acc)


def _add_leaf(leaf, t, g, add=_add_grads):
    if g.data.shape != t.data.shape:
        raise RuntimeError(f"backward: a gradient of shape {g.shape} reached a tensor of shape {t.shape}; "
                           "a custom Function's backward must return one gradient per input, shaped like it")
    entry = leaf.get(id(t))
    if entry is None:
        leaf[id(t)] = [t, g, False]
        return True                                # the leaf's first gradient in this backward
    if add is _add_arrays:
        # no graph to record: sum into an array this backward owns, in place after the first time
        if entry[2]:
            _add_into(entry[1].data, g)
        else:
            entry[1] = _add_arrays(entry[1], g)
            entry[2] = True
    else:
        entry[1] = add(entry[1], g)
        entry[2] = True                            # a new sum: referenced nowhere else


def _call_backward(node, grads):
    if node._n_out > 1 and any(g is None for g in grads) and getattr(node, "materialize_grads", True):
        # several outputs, some unused: backward sees zeros for those, as in PyTorch; a Function whose
        # formula differs for an unused output (eigh, svd: eigenvalues alone stay finite at repeated
        # ones) sets materialize_grads = False and sees None, as with PyTorch's set_materialize_grads
        xp = node.xp
        grads = [g if g is not None else node.wrap(xp.zeros(*meta))
                 for g, meta in zip(grads, node._out_meta)]
    return _check_results(node, type(node).backward(node, *grads))


def _check_results(node, out):
    """backward's return value as one gradient (or None) per forward argument."""
    n_in = len(node._next)
    if out.__class__ is not tuple:
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(out) != n_in:
        if len(out) > n_in and all(g is None for g in out[n_in:]):
            out = out[:n_in]
        else:
            raise RuntimeError(f"{type(node).__name__}.backward returned {len(out)} gradient(s) but forward "
                               f"took {n_in} argument(s); return one gradient (or None) per argument")
    return out


def _run_hooks(hooks, g, given=None):
    """g through the hooks; a tensor a hook returned goes into ``given`` (the hook may keep it: _owned copies
    it before it becomes a .grad)."""
    _hook_runs[0] += 1
    for fn in hooks:
        r = fn(g)
        if r is not None:
            _check_hook_result(fn, g, r)
            g = r
            if given is not None:
                given.add(id(r))
    return g


def _check_hook_result(fn, g, r):
    """A hook may replace the gradient, but not change what it is (PyTorch's checks): a gradient of
    another shape would be broadcast into the update, silently."""
    name = getattr(fn, "__name__", repr(fn))
    if not isinstance(r, type(g)):
        raise TypeError(f"hook '{name}' returned {type(r).__name__}; a hook returns a Tensor (the new "
                        "gradient) or None")
    if r.shape != g.shape:
        raise RuntimeError(f"hook '{name}' has changed the size of value: got {r.shape}, expected {g.shape}")
    if r.dtype != g.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value: got {r.dtype}, expected {g.dtype}")
    if r.device is not g.device:
        raise RuntimeError(f"hook '{name}' has changed the device of value: got {r.device}, expected {g.device}")


def _run_node_hooks(node, grads, given=None):
    grads = list(grads)
    for k, hooks in node._hooks.items():
        if grads[k] is not None:
            grads[k] = _run_hooks(hooks, grads[k], given)
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False):
    """Accumulate d(tensors)/d(leaf) into every leaf's .grad (see Tensor.backward)."""
    Tensor = _function.Tensor
    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    if grad_tensors is None or isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,) * len(tensors) if grad_tensors is None else (grad_tensors,)
    if len(grad_tensors) != len(tensors):
        raise ValueError(f"backward: got {len(tensors)} tensors but {len(grad_tensors)} gradients")
    if retain_graph is None:
        retain_graph = create_graph
    if len(tensors) == 1 and grad_tensors[0] is None and not create_graph and _seed_ok(tensors[0]):
        t = tensors[0]
        key = (t.device, t.data.dtype, t.data.shape)
        seed = _seeds.get(key)
        if seed is None:
            seed = _seeds[key] = t._ones_like().data
            _seed_ids.add(id(seed))
        runs = _hook_runs[0]
        try:
            run_backward([(t, Tensor._make(seed, t.device))], retain_graph, False)
        finally:
            if _hook_runs[0] != runs:              # a hook may have written into it (or kept it)
                _seed_ids.discard(id(_seeds.pop(key)))
        return
    roots = [(t, _check_root(t, g, "backward")) for t, g in zip(tensors, grad_tensors)]
    run_backward(roots, retain_graph, create_graph)


def _seed_ok(t):
    """Whether backward() may seed ``t`` with its cached ones: a real one-element non-leaf on a GPU (the CPU
    makes ones for free) whose node is one of the library's own (a user's Function's backward might write
    into its gradient), and no ag.compile trace running (the traced program takes the seed for an array of
    its own, which it may update in place)."""
    fn = t.__class__ is _function.Tensor and t.grad_fn
    return bool(fn) and _trace_hooks.state.t is None and t.device.type == "cuda" and t.data.size == 1 and t.data.dtype.kind == "f" and \
        type(fn).__module__.startswith("autograd_gpu.")


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, allow_unused=False):
    """Gradients of ``outputs`` with respect to ``inputs`` as a tuple, without touching any .grad."""
    Tensor = _function.Tensor
    outputs = (outputs,) if isinstance(outputs, Tensor) or not isinstance(outputs, (list, tuple)) else tuple(outputs)
    inputs = (inputs,) if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)) else tuple(inputs)
    for i, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs must be Tensors, got {type(t).__name__} at position {i}")
        if not t.requires_grad:
            raise RuntimeError(f"grad: input {i} (shape {t.shape}) does not require grad")
    if grad_outputs is None or isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,) * len(outputs) if grad_outputs is None else (grad_outputs,)
    grad_outputs = tuple(grad_outputs)
    if len(grad_outputs) != len(outputs):
        raise ValueError(f"grad: got {len(outputs)} outputs but {len(grad_outputs)} grad_outputs")
    if retain_graph is None:
        retain_graph = create_graph
    roots = [(t, _check_root(t, g, "grad")) for t, g in zip(outputs, grad_outputs)]
    got = run_backward(roots, retain_graph, create_graph, inputs=list(inputs))
    for i, g in enumerate(got):
        if g is None and not allow_unused:
            raise RuntimeError(f"grad: input {i} (shape {inputs[i].shape}) was not used to compute the "
                               "outputs; pass allow_unused=True to get None for it")
    if not create_graph:
        got = [None if g is None else g.detach() for g in got]
    return tuple(got)
