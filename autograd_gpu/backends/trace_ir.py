"""The trace IR: what ag.compile's tracer records and the backends' fusers rewrite.

A trace is a list of ``Step`` s, each one logged call ``fn(*args, **kwargs) -> outs`` whose array
arguments are ``Ref`` s (value numbers); plus the helpers both sides use on it (``collect_refs``,
``map_refs``, ``rename_refs``, ``alias_groups``). compile/ (tracer.py, program.py) produces and replays
it; the code generators that turn runs of steps into fused kernels consume it (fuse_cpu.py for NumPy,
fuse_cuda.py for CuPy). It lives here, in backends/, as a leaf that imports nothing: the generators
stay next to their backend (backends/ remains the only place that names NumPy, numexpr, CuPy or
CUDA) and import nothing above it, while compile/, higher up, imports it from below. (A top-level
``autograd_gpu/_trace_ir.py`` would do as well; here the format sits with the fusers that read it,
like ``fusers.py``'s registry.)

Two more things the generators may meet while a trace runs, described here so they need not
import the tracer: a backend's ``xp`` is then a recording proxy (a ``RecordingNamespace``;
``real_namespace`` unwraps it), and an array may be a traced handle, which names its backend in
``_ag_backend`` (backends.backend_of_array reads it).
"""

__all__ = ["Ref", "Step", "RecordingNamespace", "real_namespace", "collect_refs", "map_refs", "rename_refs",
           "alias_groups"]


class Ref:
    """A value number inside a step's argument template."""
    __slots__ = ("vid",)

    def __init__(self, vid):
        self.vid = vid

    def __repr__(self):
        return f"v{self.vid}"


class Step:
    """One logged call. kind: "call" (outs: None, a vid, or a tuple of vids / Nones with ``box`` the
    container type), "guard" (``expect`` the value seen, ``where`` the user's line)."""
    __slots__ = ("kind", "fn", "args", "kwargs", "outs", "box", "expect", "where", "mutates", "fresh",
                 "label", "shape_guard", "scalar")

    def __init__(self, kind, fn, args, kwargs, label):
        self.kind, self.fn, self.args, self.kwargs, self.label = kind, fn, args, kwargs, label
        self.outs = self.box = self.expect = self.where = None
        self.mutates = ()
        self.fresh = False
        self.shape_guard = None
        self.scalar = False

    def refs(self):
        out = []
        collect_refs(self.args, out)
        collect_refs(self.kwargs, out)
        return out


class RecordingNamespace:
    """Base class of the tracer's stand-in for a backend's array namespace (compile/tracer.py's
    XpProxy); ``_real`` is the namespace it records calls to."""
    __slots__ = ()


def real_namespace(xp):
    """The array namespace itself: ``xp``, or the one behind it while a trace runs."""
    return xp._real if isinstance(xp, RecordingNamespace) else xp


def collect_refs(x, out):
    """Append the value number of every Ref in x (through tuples, lists, dicts, slices) to out."""
    c = x.__class__
    if c is Ref:
        out.append(x.vid)
    elif c is tuple or c is list:
        for y in x:
            collect_refs(y, out)
    elif c is dict:
        for y in x.values():
            collect_refs(y, out)
    elif c is slice:
        collect_refs((x.start, x.stop, x.step), out)


def map_refs(x, fn):
    """x with every Ref in it (through tuples, lists, dicts, slices) replaced by fn(ref)."""
    c = x.__class__
    if c is Ref:
        return fn(x)
    if c is tuple or c is list:
        return c(map_refs(y, fn) for y in x)
    if c is dict:
        return {k: map_refs(v, fn) for k, v in x.items()}
    if c is slice:
        return slice(map_refs(x.start, fn), map_refs(x.stop, fn), map_refs(x.step, fn))
    return x


def rename_refs(x, m):
    """x with every Ref to a value numbered in m renamed to m's value (through tuples, lists, dicts, slices)."""
    return map_refs(x, lambda r: Ref(m[r.vid]) if r.vid in m else r)


def alias_groups(steps):
    """vid -> the set of values that may share memory with it (results of steps that may return views)."""
    parent = {}

    def find(v):
        while parent.get(v, v) != v:
            v = parent[v]
        return v

    for s in steps:
        if s.kind != "call" or s.fresh or s.outs is None:
            continue
        outs = s.outs if isinstance(s.outs, tuple) else (s.outs,)
        out = s.kwargs.get("out")
        if out.__class__ is Ref and type(s.fn).__name__ == "ufunc":
            refs = [out.vid]            # a ufunc given out= returns that array: its inputs are not aliased
        else:
            refs = s.refs()
        members = [o for o in outs if o is not None] + refs
        for m in members[1:]:
            a, b = find(members[0]), find(m)
            if a != b:
                parent[a] = b
    groups = {}
    for v in list(parent):
        groups.setdefault(find(v), set()).add(v)
    out = {}
    for root, g in groups.items():
        g.add(root)
        for v in g:
            out[v] = g
    return out
