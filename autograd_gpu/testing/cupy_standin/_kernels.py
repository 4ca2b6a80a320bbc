"""The stand-in's user-defined kernels (``cupy.ElementwiseKernel``, ``cupy.ReductionKernel``) and stream
capture (``Stream.begin_capture`` / ``end_capture`` -> ``cupy.cuda.Graph``, ``Graph.launch``).

Kernels: the CUDA C of the operation is not compiled; a small subset of it is evaluated with NumPy:
one assignment ``y = <expr>`` (``ElementwiseKernel``) or a map expression (``ReductionKernel``) made of
the declared parameter names, integer literals, ``+ - * /``, unary minus, one comparison, parentheses
and the math functions in ``_FUNCS``. Anything else (other statements, float literals, ``**``,
unknown functions) raises NotImplementedError: the stand-in does not pretend to run C it cannot read.
Arguments follow CuPy's rules: device arrays on the current device whose dtype is the declared one,
or scalars; NumPy arrays are refused.

Capture: while a thread captures, every kernel the stand-in runs is recorded, and what it wrote is
put back when the capture ends (a captured stream executes nothing); results made during the capture
are filled with NaN (their memory is uninitialised until the graph runs). ``Graph.launch`` runs the
recorded kernels again, writing into the same buffers. A transfer or synchronisation during capture
raises, as CUDA does (cudaErrorStreamCaptureUnsupported), and invalidates the capture.
"""
import ast
import numpy as np

from . import _core
from ._core import ndarray, current_device_id

_TYPES = {"float16", "float32", "float64", "bool", "int8", "int16", "int32", "int64", "uint8", "uint32",
          "uint64"}
_FUNCS = {"exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
          "sin": np.sin, "cos": np.cos, "tan": np.tan, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh,
          "fabs": np.abs, "pow": np.power, "atan": np.arctan}
_BIN = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply, ast.Div: np.true_divide}
_CMP = {ast.Lt: np.less, ast.LtE: np.less_equal, ast.Gt: np.greater, ast.GtE: np.greater_equal,
        ast.Eq: np.equal, ast.NotEq: np.not_equal}


def _params(spec, what):
    """'float32 x, float32 y' -> [(dtype, name)]."""
    out = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        words = part.split()
        if len(words) != 2 or words[0] not in _TYPES or not words[1].isidentifier():
            raise NotImplementedError(f"{what}: the CuPy stand-in simulates parameters '<dtype> <name>' "
                                      f"with a concrete dtype only, got {part!r}")
        out.append((np.dtype(words[0]), words[1]))
    return out


def _parse(src, names, what):
    """The expression's Python AST, after checking it stays inside the C subset the stand-in reads."""
    try:
        tree = ast.parse(src.strip(), mode="eval").body
    except SyntaxError:
        raise NotImplementedError(f"{what}: the CuPy stand-in cannot evaluate {src!r}") from None
    for node in ast.walk(tree):
        ok = (isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.Call, ast.Name, ast.Load,
                                ast.Constant, ast.USub) + tuple(_BIN) + tuple(_CMP))
              and not (isinstance(node, ast.Constant) and type(node.value) is not int)
              and not (isinstance(node, ast.Compare) and len(node.ops) != 1)
              and not (isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.keywords
                                                       or node.func.id not in _FUNCS))
              and not (isinstance(node, ast.Name) and node.id not in names and node.id not in _FUNCS))
        if not ok:
            raise NotImplementedError(f"{what}: the CuPy stand-in cannot evaluate {ast.dump(node)[:60]} in "
                                      f"{src!r} (it reads + - * /, one comparison, int literals, parameters "
                                      f"and {', '.join(sorted(_FUNCS))})")
    return tree


def _eval(node, env):
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.Constant):
        return node.value                       # an int literal: C converts it to the other operand's type
    if isinstance(node, ast.UnaryOp):
        return np.negative(_eval(node.operand, env))
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.Compare):
        return _CMP[type(node.ops[0])](_eval(node.left, env), _eval(node.comparators[0], env))
    return _FUNCS[node.func.id](*(_eval(a, env) for a in node.args))


def _bind(params, args, what):
    """Host values for the parameters: device arrays of the declared dtype, or scalars cast to it."""
    dev = current_device_id()
    env = {}
    for (dt, name), a in zip(params, args):
        if type(a) is ndarray:
            if a._dev != dev:
                raise _core._device_mismatch(a._dev, dev)
            if a.dtype != dt:
                raise TypeError(f"Type is mismatched. {what} {name} {a.dtype} {dt}")
            env[name] = a._a
        elif isinstance(a, np.ndarray):
            raise TypeError(f"Unsupported type {np.ndarray} (in {what}: CuPy kernels take device arrays "
                            "and scalars, not NumPy arrays)")
        elif isinstance(a, (bool, int, float, np.generic)):
            env[name] = dt.type(a)
        else:
            raise TypeError(f"Unsupported type {type(a)} (in {what})")
    return env, dev


class ElementwiseKernel:
    """``cupy.ElementwiseKernel(in_params, out_params, operation, name)``: one output, ``y = expr``."""

    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True, preamble="",
                 no_return=False, return_tuple=False, **kwargs):
        self.name = name
        self.in_params = _params(in_params, name)
        self.out_params = _params(out_params, name)
        if len(self.out_params) != 1 or preamble:
            raise NotImplementedError(f"{name}: the CuPy stand-in simulates one output and no preamble")
        stmt = operation.strip().rstrip(";")
        target, sep, expr = stmt.partition("=")
        if not sep or target.strip() != self.out_params[0][1] or expr.startswith("="):
            raise NotImplementedError(f"{name}: the CuPy stand-in simulates one statement "
                                      f"'{self.out_params[0][1]} = <expr>', got {operation!r}")
        self.tree = _parse(expr, {n for _, n in self.in_params}, name)

    def __call__(self, *args, size=None, block_size=None):
        n_in = len(self.in_params)
        if len(args) not in (n_in, n_in + 1):
            raise TypeError(f"Wrong number of arguments for {self.name!r}. It must be either {n_in} or "
                            f"{n_in + 1} (with outputs), but given {len(args)}.")
        env, dev = _bind(self.in_params, args[:n_in], self.name)
        out = args[n_in] if len(args) > n_in else None
        shape = np.broadcast_shapes(*(np.shape(v) for v in env.values() if isinstance(v, np.ndarray)))
        dt = self.out_params[0][0]
        if out is None:
            out = ndarray._from_host(np.empty(shape, dt), dev)
        else:
            _bind(self.out_params, (out,), self.name)
            if np.broadcast_shapes(shape, out.shape) != out.shape:
                raise ValueError(f"{self.name}: out shape {out.shape} cannot take the broadcast shape {shape}")
        tree, buf = self.tree, out._a

        def run():
            with np.errstate(all="ignore"):
                np.copyto(buf, _eval(tree, env), casting="unsafe")
            return out
        return _core.kernel(run, args)


class ReductionKernel:
    """``cupy.ReductionKernel``: a sum (``reduce_expr 'a + b'``, ``post_map_expr 'y = a'``, identity 0)
    of a map expression over the parameters."""

    def __init__(self, in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name="reduce_kernel",
                 reduce_type=None, reduce_dims=True, preamble="", options=()):
        self.name = name
        self.in_params = _params(in_params, name)
        self.out_params = _params(out_params, name)
        out_name = self.out_params[0][1] if len(self.out_params) == 1 else None
        if (out_name is None or reduce_expr.replace(" ", "") != "a+b" or identity.strip() != "0" or preamble
                or post_map_expr.replace(" ", "").rstrip(";") != f"{out_name}=a"):
            raise NotImplementedError(f"{name}: the CuPy stand-in simulates sums only (reduce_expr 'a + b', "
                                      f"post_map_expr '{out_name} = a', identity '0', one output)")
        self.reduce_type = np.dtype(reduce_type) if reduce_type else self.out_params[0][0]
        self.tree = _parse(map_expr, {n for _, n in self.in_params}, name)

    def __call__(self, *args, out=None, axis=None, keepdims=False, stream=None):
        env, dev = _bind(self.in_params, args[:len(self.in_params)], self.name)
        if len(args) != len(self.in_params):
            raise TypeError(f"Wrong number of arguments for {self.name!r}")
        shape = np.broadcast_shapes(*(np.shape(v) for v in env.values() if isinstance(v, np.ndarray)))
        dt = self.out_params[0][0]
        res_shape = np.sum(np.empty(shape, np.int8), axis=axis, keepdims=keepdims).shape
        if out is None:
            out = ndarray._from_host(np.empty(res_shape, dt), dev)
        else:
            _bind(self.out_params, (out,), self.name)
            if out.shape != res_shape:
                raise ValueError(f"{self.name}: out shape {out.shape}, the reduction gives {res_shape}")
        tree, buf, rt = self.tree, out._a, self.reduce_type

        def run():
            with np.errstate(all="ignore"):
                mapped = np.broadcast_to(np.asarray(_eval(tree, env)).astype(rt, copy=False), shape)
                np.copyto(buf, np.add.reduce(mapped, axis=axis, keepdims=keepdims), casting="unsafe")
            return out
        return _core.kernel(run, args + ((out,) if out is not None else ()))


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
        for run, res in self._ops:
            new = run()
            for old, got in zip(_arrays(res), _arrays(new)):
                # a view of captured memory needs nothing; a fresh result goes where the capture put it
                if got._a is not old._a and old._a.size and not np.may_share_memory(got._a, old._a):
                    old._a[...] = got._a
        self.launches += 1

    def upload(self, stream=None):
        pass
