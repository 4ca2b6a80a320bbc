"""The stand-in's user-defined kernels (``cupy.ElementwiseKernel``, ``cupy.ReductionKernel``) and stream
capture (``Stream.begin_capture`` / ``end_capture`` -> ``cupy.cuda.Graph``, ``Graph.launch``).

Kernels: the CUDA C of the operation is not compiled; the subset of C that ``_csubset.py`` documents
(declarations, assignments and ``+= -= *= /=`` to parameters and locals, ``if``/``else``, literals with
C's types, the usual operators, the ternary, casts, CUDA's math functions) is parsed when the kernel is
made and evaluated with NumPy over the broadcast arguments at each call, with C's types and promotion.
Anything outside it raises NotImplementedError naming the construct: the stand-in does not pretend to
run C it cannot read. ``ElementwiseKernel`` takes one or several outputs (a tuple is returned for
several) and ``raw`` parameters as CuPy does: a raw array is not broadcast but indexed (``x[j]``,
``x.size()``); the loop runs over the broadcast shape of the non-raw arrays, or over ``size=`` when
every array argument is raw (CuPy's errors otherwise: "Loop size is undecided.", "Specified 'size' can
be used only if all of the ndarray are 'raw'.", "Output array size is undecided."); raw input
parameters are read-only here. ``ReductionKernel`` takes reduce expressions ``a + b``, ``a * b``,
``max(a, b)``, ``min(a, b)``. Not simulated (NotImplementedError): ``raw`` parameters of a
ReductionKernel, ``preamble``, ``loop_prep``, and ``cupy.RawKernel`` / ``RawModule`` (whole CUDA
functions with pointers: code that needs them falls back to an ElementwiseKernel here, as
backends/fuse_cuda_vec.py does).
Arguments follow CuPy's rules: device arrays on the current device whose dtype is the declared one (a
type placeholder ``T`` is bound by the first array argument of that type, then by scalars), or
scalars (cast to the parameter's type); NumPy arrays are refused; input parameters are const.

Capture: while a thread captures, every kernel the stand-in runs is recorded, and what it wrote is
put back when the capture ends (a captured stream executes nothing); results made during the capture
are filled with NaN (their memory is uninitialised until the graph runs). ``Graph.launch`` runs the
recorded kernels again, writing into the same buffers. A transfer or synchronisation during capture
raises, as CUDA does (cudaErrorStreamCaptureUnsupported), and invalidates the capture.
"""
import re

import numpy as np

from . import _core, _csubset
from ._core import ndarray, current_device_id

_TYPES = {"float16", "float32", "float64", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64"}


def _params(spec, what, raw=None):
    """'float32 x, T y' -> [(type, name)]: type a dtype, or a type placeholder's name (a str). ``raw``: a
    set collecting the names declared ``raw`` (None: refuse them)."""
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        words = part.split()
        if words and words[0] == "raw":
            if raw is None:
                raise NotImplementedError(f"{what}: the CuPy stand-in does not simulate 'raw' parameters "
                                          f"({part!r}) in a ReductionKernel")
            words = words[1:]
            if len(words) == 2:
                raw.add(words[1])
        if len(words) != 2 or not words[1].isidentifier() or not words[0].isidentifier():
            raise NotImplementedError(f"{what}: the CuPy stand-in simulates parameters '<dtype> <name>' or "
                                      f"'<T> <name>' only, got {part!r}")
        t = np.dtype(words[0]) if words[0] in _TYPES else words[0]
        if isinstance(t, str) and (t in _csubset._TYPE_WORDS or t.startswith("complex")):
            raise NotImplementedError(f"{what}: the CuPy stand-in does not simulate the parameter type {t!r}")
        out.append((t, words[1]))
    names = [n for _, n in out]
    if len(set(names)) != len(names):
        raise ValueError(f"{what}: a parameter name appears twice in {spec!r}")
    return out


def _placeholders(params):
    return {t for t, _ in params if isinstance(t, str)}


def _scalar_dtype(a):
    if isinstance(a, np.generic):
        return a.dtype
    return np.dtype(bool if type(a) is bool else int if isinstance(a, int) else float)


def _bind(params, args, what, types=None, raw=()):
    """Host values for the parameters and the placeholders' types, as CuPy decides them: device arrays
    (on the current device) of the declared dtype bind placeholders first, then scalars bind those still
    free; a scalar is cast to its parameter's type; a ``raw`` parameter takes a device array only.
    Returns (values, types, device)."""
    dev = current_device_id()
    types = {} if types is None else types
    vals = []
    for (t, name), a in zip(params, args):
        if name in raw and type(a) is not ndarray:
            raise TypeError(f"{what}: the raw parameter {name!r} takes a cupy.ndarray, got {type(a).__name__}")
        if type(a) is ndarray:
            if a._dev != dev:
                raise _core._device_mismatch(a._dev, dev)
            if a.dtype == _core._BF16:
                raise NotImplementedError(
                    f"{what}: the CuPy stand-in does not simulate bfloat16 in custom kernels ({name!r}): CuPy 14 "
                    "compiles them with cuda_bf16.h, whose operator overloads its C subset does not model, and "
                    "whether a kernel's source compiles for __nv_bfloat16 is known only on a GPU; cast to float32")
            want = types.setdefault(t, a.dtype) if isinstance(t, str) else t
            if a.dtype != want:
                raise TypeError(f"Type is mismatched. {what} {name} {a.dtype} {want}")
            vals.append(a._a)
        elif isinstance(a, np.ndarray):
            raise TypeError(f"Unsupported type {np.ndarray} (in {what}: CuPy kernels take device arrays "
                            "and scalars, not NumPy arrays)")
        elif isinstance(a, (bool, int, float, np.generic)):
            vals.append(a)
        else:
            raise TypeError(f"Unsupported type {type(a)} (in {what})")
    for (t, name), a in zip(params, args):
        if isinstance(t, str) and type(a) is not ndarray:
            types.setdefault(t, _scalar_dtype(a))
    for i, ((t, name), a) in enumerate(zip(params, args)):
        if type(a) is not ndarray:
            vals[i] = np.asarray(a).astype(types[t] if isinstance(t, str) else t)
    return vals, types, dev


def _resolve(t, types, what):
    if not isinstance(t, str):
        return t
    if t not in types:
        raise TypeError(f"Cannot determine type of {t} (in {what})")
    return types[t]


def _uninitialised(shape, t):
    """Memory no kernel wrote yet: NaN for floats, so a read of it shows."""
    return np.full(shape, np.nan if t.kind == "f" else 0, t)


def _write(outs, vals):
    """Copy each result into its output buffer; a result that is (a view of) another output's buffer
    is copied first, so the order of the writes does not matter."""
    bufs = [o._a for o in outs]
    vals = [np.array(v) if isinstance(v, np.ndarray) and any(np.may_share_memory(v, b) for b in bufs) else v
            for v in vals]
    for b, v in zip(bufs, vals):
        np.copyto(b, v, casting="unsafe")


class ElementwiseKernel:
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name)``: the body, in the C subset of
    ``_csubset.py``, evaluated over the broadcast arguments; one or several outputs."""

    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True, preamble="",
                 no_return=False, return_tuple=False, **kwargs):
        self.name = name
        self.raw = set()
        self.in_params = _params(in_params, name, self.raw)
        self.out_params = _params(out_params, name, self.raw)
        if not self.out_params:
            raise NotImplementedError(f"{name}: the CuPy stand-in simulates kernels with at least one output")
        if preamble or kwargs.get("loop_prep") or kwargs.get("after_loop"):
            raise NotImplementedError(f"{name}: the CuPy stand-in does not simulate a preamble, loop_prep or "
                                      "after_loop (device functions and loops are outside its C subset)")
        names = [n for _, n in self.in_params + self.out_params]
        if "i" in names:
            raise ValueError(f"{name}: 'i' is CuPy's element index and cannot be a parameter name")
        self.placeholders = _placeholders(self.in_params + self.out_params)
        unbound = _placeholders(self.out_params) - _placeholders(self.in_params)
        self.no_return, self.return_tuple = no_return, return_tuple
        self.operation = operation
        self.body = _csubset.parse_body(operation, name, set(names) | {"i"}, self.placeholders,
                                        consts={n for _, n in self.in_params} | {"i"}, raw=self.raw, ind=True)
        self._unbound = unbound

    def __call__(self, *args, size=None, block_size=None, shared_mem=0, stream=None):
        n_in, n_out = len(self.in_params), len(self.out_params)
        if len(args) not in (n_in, n_in + n_out):
            raise TypeError(f"Wrong number of arguments for {self.name!r}. It must be either {n_in} or "
                            f"{n_in + n_out} (with outputs), but given {len(args)}.")
        raw = self.raw
        ins, types, dev = _bind(self.in_params, args[:n_in], self.name, raw=raw)
        outs = list(args[n_in:])
        if outs:
            for o in outs:
                if type(o) is not ndarray:
                    raise TypeError(f"{self.name}: an output must be a cupy.ndarray, got {type(o)}")
            _bind(self.out_params, outs, self.name, types, raw=raw)
        elif any(n in raw for _, n in self.out_params):
            raise ValueError("Output array size is undecided.")         # CuPy's words
        # the loop runs over the broadcast shape of the non-raw arrays, or size= when every array is raw
        loop = [v for (_, n), v, a in zip(self.in_params, ins, args) if n not in raw and type(a) is ndarray] + \
            [o._a for (_, n), o in zip(self.out_params, outs) if n not in raw]
        if size is not None:
            if loop:
                raise ValueError("Specified 'size' can be used only if all of the ndarray are 'raw'.")
            shape = (int(size),)
        elif not loop:
            raise ValueError("Loop size is undecided.")
        else:
            try:
                shape = np.broadcast_shapes(*(a.shape for a in loop))
            except ValueError:
                raise ValueError(f"{self.name}: the arguments' shapes {[a.shape for a in loop]} do not "
                                 "broadcast") from None
        for (_, n), o in zip(self.out_params, outs):
            if n not in raw and o.shape != shape:
                raise ValueError(f"Out shape is mismatched (in {self.name}: output {o.shape}, the arguments "
                                 f"broadcast to {shape})")
        out_types = [_resolve(t, types, self.name) for t, _ in self.out_params]
        if not outs:
            outs = [ndarray._from_host(np.empty(shape, t), dev) for t in out_types]
            fresh = True
        else:
            fresh = False
        in_types = [_resolve(t, types, self.name) for t, _ in self.in_params]
        loop_size = int(np.prod(shape))

        def run():
            env, decl, bufs = {}, {}, {}
            for (_, n), t, v in zip(self.in_params, in_types, ins):
                if n in raw:
                    bufs[n] = v
                else:
                    env[n], decl[n] = _csubset.Value(v, t), t
            for (_, n), t, o in zip(self.out_params, out_types, outs):
                if n in raw:
                    bufs[n] = o._a
                else:
                    env[n], decl[n] = _csubset.Value(_uninitialised(shape, t) if fresh else o._a, t), t
            m = _csubset.Machine(self.name, self.operation, env, decl, types, shape,
                                 index=lambda: np.arange(loop_size, dtype=np.int64).reshape(shape),
                                 raw=bufs, loop_size=loop_size)
            with np.errstate(all="ignore"):              # CUDA kernels never warn
                m.run(self.body)
                written = [(o, env[n].a) for (_, n), o in zip(self.out_params, outs) if n not in raw]
                _write([o for o, _ in written], [v for _, v in written])
            if self.no_return:
                return None
            return outs[0] if len(outs) == 1 and not self.return_tuple else tuple(outs)
        # CuPy returns without a launch where the loop shape has a zero (_kernel.pyx, ElementwiseKernel.__call__:
        # _contains_zero); it copies no overlapping input (that is the ufuncs' _copy_in_args_if_needed)
        return _core.kernel(run, args + (tuple(outs) if fresh else ()), "elementwise_kernel", self.name,
                            0 if 0 in shape else 1)


# a reduce expression max(a, b) is CUDA's max, fmaxf on floats: it drops NaN
_REDUCE = {"+": np.add, "*": np.multiply, "max": np.fmax, "fmax": np.fmax, "min": np.fmin, "fmin": np.fmin}
_SIZES = re.compile(r"\b(_in_ind|_out_ind)\.size\(\)")


def _reducer(tree, src, name):
    """The NumPy ufunc of a reduce expression over ``a`` and ``b``: ``a + b``, ``a * b``, ``max(a, b)``,
    ``min(a, b)`` (and fmax, fmin, and the ternaries ``a > b ? a : b`` / ``a < b ? a : b``)."""
    ab = (("name", "a"), ("name", "b"))
    if tree[0] == "bin" and tree[1] in ("+", "*") and tuple(tree[2:]) in (ab, ab[::-1]):
        return _REDUCE[tree[1]]
    if tree[0] == "call" and tree[1] in _REDUCE and tuple(tree[2]) in (ab, ab[::-1]):
        return _REDUCE[tree[1]]
    if (tree[0] == "ternary" and tree[1][0] == "bin" and tree[1][1] in (">", "<", ">=", "<=")
            and tuple(tree[1][2:]) == tuple(tree[2:])):
        return np.maximum if tree[1][1] in (">", ">=") else np.minimum
    raise NotImplementedError(f"{name}: the CuPy stand-in simulates the reduce expressions 'a + b', 'a * b', "
                              f"'max(a, b)', 'min(a, b)' (and fmax, fmin, 'a > b ? a : b'), got {src!r}")


class ReductionKernel:
    """``cupy.ReductionKernel``: ``map_expr`` (the C subset of ``_csubset.py``) over the broadcast
    arguments, reduced with ``reduce_expr`` (a sum, product, max or min) from ``identity``, then
    ``post_map_expr`` (statements reading ``a``, and ``_in_ind.size()`` / ``_out_ind.size()``)."""

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name="reduce_kernel",
                 reduce_type=None, reduce_dims=True, preamble="", options=()):
        self.name = name
        self.in_params = _params(in_params, name)
        self.out_params = _params(out_params, name)
        if not self.out_params:
            raise NotImplementedError(f"{name}: the CuPy stand-in simulates reductions with an output")
        if preamble:
            raise NotImplementedError(f"{name}: the CuPy stand-in does not simulate a preamble")
        self.placeholders = _placeholders(self.in_params + self.out_params) | {"_type_reduce"}
        in_names = {n for _, n in self.in_params}
        self.map_src = map_expr
        self.map = _csubset.parse_expr(map_expr, name, in_names, self.placeholders)
        self.reduce = _reducer(_csubset.parse_expr(reduce_expr, name, {"a", "b"}), reduce_expr, name)
        self.identity = None if identity is None or not str(identity).strip() else \
            _csubset.parse_expr(str(identity), name, set(), self.placeholders)
        self.post_src = _SIZES.sub(lambda m: m.group(1) + "_size", post_map_expr)
        out_names = {n for _, n in self.out_params}
        self.post = _csubset.parse_body(self.post_src, name, out_names | {"a", "_in_ind_size", "_out_ind_size"},
                                        self.placeholders, consts={"a", "_in_ind_size", "_out_ind_size"})
        if reduce_type is None:
            self.reduce_type = self.out_params[0][0]
        elif reduce_type in _csubset._C_TYPES:     # CuPy pastes it into the C source (typedef ... _type_reduce):
            self.reduce_type = np.dtype(_csubset._C_TYPES[reduce_type])     # C names only, not "float32"
        elif reduce_type in self.placeholders:
            self.reduce_type = reduce_type
        else:
            raise NotImplementedError(f"{name}: the CuPy stand-in does not simulate reduce_type {reduce_type!r}")

    def __call__(self, *args, out=None, axis=None, keepdims=False, stream=None):
        if len(args) != len(self.in_params):
            raise TypeError(f"Wrong number of arguments for {self.name!r}")
        ins, types, dev = _bind(self.in_params, args, self.name)
        outs = [] if out is None else [out]
        if len(self.out_params) != 1 and out is not None:
            raise NotImplementedError(f"{self.name}: out= with several outputs is not simulated")
        if out is not None:
            if type(out) is not ndarray:
                raise TypeError(f"{self.name}: out must be a cupy.ndarray, got {type(out)}")
            _bind(self.out_params, outs, self.name, types)
        shape = np.broadcast_shapes(*(v.shape for v in ins if v.ndim))
        res_shape = np.sum(np.empty(shape, np.int8), axis=axis, keepdims=keepdims).shape
        out_types = [_resolve(t, types, self.name) for t, _ in self.out_params]
        rt = _resolve(self.reduce_type, types, self.name)
        types = dict(types, _type_reduce=rt)
        if out is None:
            outs = [ndarray._from_host(np.empty(res_shape, t), dev) for t in out_types]
        elif out.shape != res_shape:
            raise ValueError(f"{self.name}: out shape {out.shape}, the reduction gives {res_shape}")
        in_types = [_resolve(t, types, self.name) for t, _ in self.in_params]
        n_in = int(np.prod(shape))
        n_out = int(np.prod(res_shape))

        def run():
            env = {n: _csubset.Value(v, t) for (_, n), t, v in zip(self.in_params, in_types, ins)}
            with np.errstate(all="ignore"):
                m = _csubset.Machine(self.name, self.map_src, env, {}, types, shape)
                mapped = np.broadcast_to(np.asarray(m.expr(self.map).to(rt)), shape)
                kw = {}
                if self.identity is not None:
                    kw["initial"] = m.expr(self.identity).to(rt)[()]
                red = np.asarray(self.reduce.reduce(mapped, axis=axis, keepdims=keepdims, **kw)).astype(rt)
                env = {"a": _csubset.Value(red, rt),
                       "_in_ind_size": _csubset.Value(np.int64(n_in), np.dtype(np.int64)),
                       "_out_ind_size": _csubset.Value(np.int64(max(n_out, 1)), np.dtype(np.int64))}
                decl = {}
                for (_, n), t in zip(self.out_params, out_types):
                    env[n], decl[n] = _csubset.Value(_uninitialised(res_shape, t), t), t
                _csubset.Machine(self.name, self.post_src, env, decl, types, res_shape).run(self.post)
                _write(outs, [env[n].a for _, n in self.out_params])
            return outs[0] if len(outs) == 1 else tuple(outs)
        # nothing for an empty result (_reduction.pyx, _call: ret.size == 0); CUB's block reduction takes a
        # kernel of one input and one output, and reduces over every axis in two passes
        # (_core.cub_block_reduction_launches)
        if n_out == 0:
            count = 0
        elif len(self.in_params) == 1 and len(self.out_params) == 1 and type(args[0]) is ndarray:
            count = _core.cub_block_reduction_launches(args[0]._a, _core._reduce_axes(len(shape), axis))
        else:
            count = 1
        return _core.kernel(run, args + tuple(outs), "reduction_kernel", self.name, count)


# -- stream capture --------------------------------------------------------------------------------------
class _Capture:
    """What one capture recorded: the kernels (to run again) and the buffers they touched (put back)."""

    def __init__(self, stream):
        self.stream, self.ops, self.saved, self.made, self.error = stream, [], {}, [], None
        self.made_ids = set()

    def touch(self, args):
        for a in _arrays(args):
            buf = a._a
            if buf.flags.writeable and id(buf) not in self.saved and id(buf) not in self.made_ids:
                self.saved[id(buf)] = (buf, buf.copy())

    def record(self, run, args):
        """Run one kernel (its results are needed to go on) and keep it for the graph."""
        self.touch(args)
        res = run()
        self.ops.append((run, res))
        inputs = [a._a for a in _arrays(args)]
        for a in _arrays(res):
            # a view of an argument is no new memory: it keeps what the argument holds
            if id(a._a) not in self.saved and not any(np.may_share_memory(a._a, b) for b in inputs):
                self.made.append(a._a)
                self.made_ids.add(id(a._a))
        return res

    def refuse(self, kind, what):
        """A transfer or sync while capturing: an error in CUDA, and the capture is invalidated."""
        self.error = self.error or f"{what} ({kind})"
        raise _cuda_error(900, f"cudaErrorStreamCaptureUnsupported: operation not permitted when stream is "
                               f"capturing ({what})")

    def undo(self):
        for buf, old in reversed(list(self.saved.values())):
            buf[...] = old
        for buf in self.made:                    # uninitialised until a launch writes them
            if buf.dtype.kind in "fc" and buf.flags.writeable:
                buf[...] = np.nan


def _arrays(x):
    if type(x) is ndarray:
        yield x
    elif type(x) in (list, tuple):
        for y in x:
            yield from _arrays(y)
    elif type(x) is dict:
        for y in x.values():
            yield from _arrays(y)


def capturing():
    return getattr(_core._local, "capture", None)


def begin(stream):
    if capturing() is not None:
        raise _cuda_error(900, "cudaErrorIllegalState: this thread already captures a stream")
    if stream.ptr == 0:
        raise _cuda_error(906, "cudaErrorStreamCaptureUnsupported: the null stream cannot be captured")
    _core._local.capture = _Capture(stream)


def end(stream):
    cap = capturing()
    if cap is None or cap.stream is not stream:
        raise _cuda_error(900, "cudaErrorIllegalState: the stream is not capturing")
    _core._local.capture = None
    cap.undo()
    if cap.error is not None:
        raise _cuda_error(901, f"cudaErrorStreamCaptureInvalidated: the capture was invalidated by {cap.error}")
    return Graph._from_capture(cap.ops)


def _cuda_error(status, msg):
    from .cuda import CUDARuntimeError
    return CUDARuntimeError(status, msg)


class Graph:
    """``cupy.cuda.Graph``: the kernels of one capture; ``launch`` runs them again in order."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("currently this class cannot be initiated by the user and must be created "
                                  "via stream capture")          # CuPy's words

    @classmethod
    def _from_capture(cls, ops):
        g = cls.__new__(cls)
        g._ops, g.launches = list(ops), 0
        return g

    def launch(self, stream=None):
        if capturing() is not None:
            raise _cuda_error(900, "the stand-in does not capture a graph launch inside another capture")
        _core.launch("graph", "Graph.launch")           # the captured kernels run as one graph launch
        for run, res in self._ops:
            new = run()
            for old, got in zip(_arrays(res), _arrays(new)):
                # a view of captured memory needs nothing; a fresh result goes where the capture put it
                if got._a is not old._a and old._a.size and not np.may_share_memory(got._a, old._a):
                    old._a[...] = got._a
        self.launches += 1

    def upload(self, stream=None):
        pass
