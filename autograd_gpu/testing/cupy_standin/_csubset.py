"""The subset of CUDA C that the stand-in's kernels evaluate with NumPy (``_kernels.py``).

A kernel body is parsed once (when the kernel object is made) into a small tree, and evaluated on
whole arrays at each call: every per-element C statement becomes one NumPy operation over all
elements. What it reads:

- statements: ``;``-terminated expression statements, declarations
  ``[const] TYPE name [= expr] [, name [= expr]]...;``, assignments ``name = expr`` and
  ``name += -= *= /= %= expr`` to parameters and locals, ``if (cond) stmt [else stmt]`` (a statement
  or a ``{ ... }`` block: evaluated under a mask, both sides computed everywhere), ``{ ... }`` blocks
  (their declarations are local to them), empty statements;
- types: the kernel's type placeholders (``T``), ``bool``, ``char``/``signed char``/``unsigned char``,
  ``short``, ``int``, ``unsigned [int]``, ``long``, ``long long`` (and ``unsigned`` forms), ``size_t``,
  ``ptrdiff_t``, ``float``, ``double``, ``float16``/``half``; C-style casts ``(T)x``, functional casts
  ``float(x)`` and ``static_cast<T>(x)``;
- expressions: parameter and local names, ``i`` (the element index, ``ptrdiff_t``), integer literals
  (decimal or hex, ``u``/``l`` suffixes), float literals (``1.0``, ``.5``, ``1e-8``, ``0.5f``), ``true``,
  ``false``, unary ``- + ! ~``, binary ``* / % + - << >> < <= > >= == != & ^ | && ||``, the ternary
  ``c ? a : b``, parentheses, and the math functions in ``_FUNCS`` (with the ``f``-suffixed float forms:
  ``expf``, ``sqrtf``, ...);
- raw parameters (an ElementwiseKernel's ``raw T x``): ``x[j]`` read, and assigned as a statement
  (``x[j] = v;``, ``x[j] += v;`` ..., output parameters only), ``j`` an integer expression, the C-order
  position in the array whatever its strides (CuPy's CArray); ``x.size()``; ``_ind.size()`` (the loop
  size). An index is evaluated only in the lanes that run it (under ``if``, in the chosen branch of
  ``?:``, in the right side of ``&&``/``||`` where it is evaluated, as C does); out of range there raises
  IndexError naming the kernel (a GPU would read or write outside the array). Several lanes writing one
  element: the last one wins here (a race on a GPU); a lane reading an element another lane writes in
  the same launch sees it written or not by statement order here (a race on a GPU too).

Anything else (loops, ``return``, pointers, ``&`` / ``*`` on addresses, indexing other than a raw
parameter's, member access other than ``.size()``, ``++``/``--``, assignments inside expressions, ``#``
directives, unknown names or functions) raises NotImplementedError naming the construct, so the
stand-in never pretends to run C it cannot read.

Types follow C (C++ as NVRTC compiles it), never NumPy's promotion:
- a value's type is a NumPy dtype: float32 is ``float``, float64 ``double``, int32 ``int``, int64
  ``long long``/``ptrdiff_t``, and so on;
- literals: an integer literal is ``int`` (``long long`` when it does not fit, ``unsigned`` with ``u``),
  a plain float literal (``1.0``, ``1e-8``) is ``double`` and ``1.0f`` is ``float`` -- as in C, so
  ``x * 0.5`` with ``float x`` is computed in double and rounded when stored into a float (the
  arithmetic result matches a GPU's, which also computes it in double), and ``x * 0.5f`` stays float;
- binary arithmetic, comparisons and the ternary's two branches take C's usual arithmetic
  conversions (double > float > half > integers; integers first promoted to ``int``; unsigned wins
  at equal rank); comparisons, ``!``, ``&&`` and ``||`` give ``bool``; integer ``/`` truncates
  toward zero and ``%`` keeps the dividend's sign (both undefined for a zero divisor in C: 0 here);
  ``%`` and bit operators on floating values are refused (C does not compile them);
- math functions use C++'s overloads: ``exp(float)`` is float, ``exp(double)`` double, an integer
  argument gives double; ``half`` arguments compute in float (CuPy's float16 converts to float);
  ``expf`` and the other f-forms compute in float; ``max``/``min``/``abs`` keep integer types;
  ``isnan``/``isinf``/``isfinite``/``signbit`` give bool;
- storing into a parameter or a local converts to its declared type (float to integer truncates);
  a local declared without a value, and an output not passed in, hold NaN (floats) or 0 until written
  (their memory is uninitialised on a GPU).
"""
import re

import numpy as np

# -- types ------------------------------------------------------------------------------------------------
_C_TYPES = {"bool": "bool", "char": "int8", "signed char": "int8", "unsigned char": "uint8", "short": "int16",
            "short int": "int16", "unsigned short": "uint16", "int": "int32", "signed": "int32",
            "signed int": "int32", "unsigned": "uint32", "unsigned int": "uint32", "long": "int64",
            "long int": "int64", "long long": "int64", "long long int": "int64", "unsigned long": "uint64",
            "unsigned long long": "uint64", "size_t": "uint64", "ptrdiff_t": "int64", "float": "float32",
            "double": "float64", "float16": "float16", "half": "float16"}
_TYPE_WORDS = {"bool", "char", "signed", "unsigned", "short", "int", "long", "size_t", "ptrdiff_t", "float",
               "double", "float16", "half"}
_KEYWORDS_REFUSED = {"for", "while", "do", "return", "switch", "case", "break", "continue", "goto", "struct",
                     "class", "template", "sizeof", "auto", "volatile", "static", "extern", "__syncthreads",
                     "atomicAdd", "new", "delete", "typedef", "using", "namespace"}
BOOL, I32, I64, F32, F64 = (np.dtype(t) for t in ("bool", "int32", "int64", "float32", "float64"))


def _refuse(what, src, why):
    return NotImplementedError(f"{what}: the CuPy stand-in cannot evaluate {why} in {src!r} (it reads the C "
                               "subset that autograd_gpu/testing/cupy_standin/_csubset.py documents)")


def arith(a, b):
    """C's usual arithmetic conversions of two operand types."""
    for f in (F64, F32, np.dtype("float16")):
        if a == f or b == f:
            return f
    a, b = _promote(a), _promote(b)
    if a == b:
        return a
    if (a.kind == "u") == (b.kind == "u"):
        return a if a.itemsize >= b.itemsize else b
    u, s = (a, b) if a.kind == "u" else (b, a)
    if u.itemsize >= s.itemsize:
        return u
    return s                              # the signed type is wider: it holds every unsigned value


def _promote(t):
    """C's integer promotion: bool and the types narrower than int become int."""
    return I32 if t.kind in "bui" and t.itemsize < 4 else t


# -- tokens -----------------------------------------------------------------------------------------------
_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?|\d+[eE][+-]?\d+[fF]?)
  | (?P<int>0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<op>\+\+|--|->|::|<<=|>>=|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^]=|[-+*/%<>=!~&|^?:;,(){}\[\].\#"'])
""", re.X | re.S)


def tokenize(src, what):
    out, pos = [], 0
    while pos < len(src):
        m = _TOKEN.match(src, pos)
        if m is None:
            raise _refuse(what, src, f"the character {src[pos]!r}")
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    out.append(("end", ""))
    return out


# -- the tree: tuples (kind, ...) -------------------------------------------------------------------------
_BINARY_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7, "<=": 7, ">": 7, ">=": 7,
                "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}
_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%="}
_REFUSED_OPS = {"++": "increment/decrement (++ --)", "--": "increment/decrement (++ --)",
                "->": "member access", ".": "member access", "::": "scope resolution", "[": "indexing",
                "#": "a preprocessor directive", '"': "a string literal", "'": "a character literal",
                "<<=": "a shift assignment", ">>=": "a shift assignment", "&=": "a bitwise assignment",
                "|=": "a bitwise assignment", "^=": "a bitwise assignment"}


class Parser:
    """Recursive descent over the tokens. ``names``: parameter names (and what else is in scope),
    ``placeholders``: the kernel's type placeholders (``T``); ``extra``: names such as ``i``."""

    def __init__(self, src, what, names, placeholders, consts=(), raw=(), ind=False):
        self.src, self.what = src, what
        self.toks, self.pos = tokenize(src, what), 0
        self.placeholders = set(placeholders)
        self.scopes = [set(names)]
        self.consts = set(consts)
        self.raw = set(raw)            # raw parameters: indexed x[j], x.size()
        self.ind = ind                 # whether _ind.size() (the loop size) is readable

    # helpers
    def peek(self, k=0):
        return self.toks[min(self.pos + k, len(self.toks) - 1)]

    def next(self):
        t = self.toks[self.pos]
        self.pos += 1
        return t

    def accept(self, text):
        if self.peek()[1] == text and self.peek()[0] in ("op", "name"):
            self.pos += 1
            return True
        return False

    def expect(self, text):
        if not self.accept(text):
            raise self.refuse(f"{self.peek()[1] or 'the end'!r} where {text!r} was expected")

    def refuse(self, why):
        return _refuse(self.what, self.src, why)

    def known(self, name):
        return any(name in s for s in self.scopes)

    def check_token(self, tok):
        kind, text = tok
        if kind == "op" and text in _REFUSED_OPS:
            raise self.refuse(f"{_REFUSED_OPS[text]} ({text!r})")
        if kind == "name" and text in _KEYWORDS_REFUSED:
            raise self.refuse(f"'{text}'")

    def subscript(self, name):
        """``[expr]`` after the raw array ``name`` (the name already read)."""
        self.expect("[")
        idx = self.expr()
        self.expect("]")
        if self.peek()[1] == "[":
            raise self.refuse(f"a second subscript on {name!r} (a raw array takes one integer index)")
        return idx

    def size_call(self):
        """``.size()`` after a raw array or ``_ind`` (the name already read)."""
        self.expect(".")
        if not self.accept("size"):
            raise self.refuse(f"member access ('.{self.peek()[1]}'): only x.size() and _ind.size()")
        self.expect("(")
        self.expect(")")

    # types
    def at_type(self, k=0):
        kind, text = self.peek(k)
        return kind == "name" and (text in _TYPE_WORDS or text in self.placeholders)

    def parse_type(self):
        words = []
        if self.peek()[1] in self.placeholders:
            return ("placeholder", self.next()[1])
        while self.peek()[0] == "name" and self.peek()[1] in _TYPE_WORDS:
            words.append(self.next()[1])
        name = " ".join(words)
        if name not in _C_TYPES:
            raise self.refuse(f"the type {name!r}")
        if self.peek()[1] == "*" or self.peek()[1] == "&":
            raise self.refuse(f"a pointer or reference type ({name}{self.peek()[1]})")
        return ("type", np.dtype(_C_TYPES[name]))

    # statements
    def body(self):
        stmts = []
        while self.peek()[0] != "end":
            stmts.append(self.statement())
        return stmts

    def statement(self):
        self.check_token(self.peek())
        if self.accept(";"):
            return ("block", [])
        if self.accept("{"):
            self.scopes.append(set())
            stmts = []
            while not self.accept("}"):
                if self.peek()[0] == "end":
                    raise self.refuse("a block without its '}'")
                stmts.append(self.statement())
            self.scopes.pop()
            return ("block", stmts)
        if self.accept("if"):
            self.expect("(")
            cond = self.expr()
            self.expect(")")
            then = self.scoped_statement()
            other = self.scoped_statement() if self.accept("else") else None
            return ("if", cond, then, other)
        if self.peek()[1] == "const" or self.at_type():
            return self.declaration()
        kind, name = self.peek()
        if kind == "name" and name in self.raw and self.peek(1)[1] == "[":
            self.next()
            idx = self.subscript(name)
            op = self.next()[1]
            if op not in _ASSIGN:
                self.check_token(self.peek(-1))
                raise self.refuse(f"the statement starting at {name + '[...]'!r} (a raw array element is "
                                  "assigned with = += -= *= /= %=)")
            if name in self.consts:
                raise self.refuse(f"an assignment to {name!r}, which is const (the stand-in keeps raw input "
                                  "parameters read-only: write through an output parameter)")
            value = self.expr()
            self.expect(";")
            return ("store", name, idx, op, value)
        if kind == "name" and self.peek(1)[1] in _ASSIGN:
            self.next()
            op = self.next()[1]
            if not self.known(name):
                raise self.refuse(f"an assignment to the unknown name {name!r}")
            if name in self.consts:
                raise self.refuse(f"an assignment to {name!r}, which is const (CuPy passes input parameters "
                                  "as const; a const local cannot change)")
            value = self.expr()
            self.expect(";")
            return ("assign", name, op, value)
        self.check_token(self.peek(1))
        raise self.refuse(f"the statement starting at {self.peek()[1]!r} (only declarations, assignments to "
                          "names, if/else and blocks)")

    def scoped_statement(self):
        self.scopes.append(set())
        try:
            return self.statement()
        finally:
            self.scopes.pop()

    def declaration(self):
        const = self.accept("const")
        typ = self.parse_type()
        decls = []
        while True:
            kind, name = self.next()
            if kind != "name" or name in _TYPE_WORDS or name in self.placeholders:
                self.check_token((kind, name))
                raise self.refuse(f"the declaration of {name!r}")
            if self.peek()[1] == "[":
                raise self.refuse("an array declaration")
            if self.known(name):
                raise self.refuse(f"a second declaration of {name!r} (shadowing is not simulated)")
            value = self.expr() if self.accept("=") else None
            self.scopes[-1].add(name)
            if const:
                self.consts.add(name)
            decls.append(("decl", typ, name, value))
            if not self.accept(","):
                break
        self.expect(";")
        return decls[0] if len(decls) == 1 else ("block_flat", decls)

    # expressions
    def expr(self):
        cond = self.binary(1)
        if self.accept("?"):
            a = self.expr()
            self.expect(":")
            b = self.expr()
            return ("ternary", cond, a, b)
        return cond

    def binary(self, min_prec):
        left = self.unary()
        while True:
            kind, op = self.peek()
            self.check_token(self.peek())
            if op in _ASSIGN and kind == "op":
                raise self.refuse(f"an assignment inside an expression ({op!r})")
            prec = _BINARY_PREC.get(op) if kind == "op" else None
            if prec is None or prec < min_prec:
                return left
            self.next()
            right = self.binary(prec + 1)
            left = ("bin", op, left, right)

    def unary(self):
        tok = self.peek()
        self.check_token(tok)
        kind, text = tok
        if kind == "op" and text in ("-", "+", "!", "~"):
            self.next()
            return ("unary", text, self.unary())
        if kind == "op" and text in ("*", "&"):
            raise self.refuse(f"a pointer operation (unary {text!r})")
        if text == "(" and self.at_type(1):
            self.next()
            typ = self.parse_type()
            self.expect(")")
            return ("cast", typ, self.unary())
        return self.primary()

    def primary(self):
        kind, text = self.next()
        self.check_token((kind, text))
        if kind == "float":
            single = text[-1] in "fF"
            return ("lit", np.float32(text[:-1]) if single else np.float64(text))
        if kind == "int":
            digits = text.rstrip("uUlL")
            v = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits)
            uns = "u" in text.lower()[len(digits):]
            longs = text.lower()[len(digits):].count("l")
            if uns:
                t = np.uint32 if v < 2 ** 32 and not longs else np.uint64
            else:
                t = np.int32 if v < 2 ** 31 and not longs else np.int64
            return ("lit", t(v))
        if text == "(":
            e = self.expr()
            self.expect(")")
            return e
        if kind == "name":
            if text in ("true", "false"):
                return ("lit", np.bool_(text == "true"))
            if text == "static_cast":
                self.expect("<")
                typ = self.parse_type()
                self.expect(">")
                self.expect("(")
                e = self.expr()
                self.expect(")")
                return ("cast", typ, e)
            if self.at_type(-1) and self.peek()[1] == "(":       # float(x), T(x)
                self.pos -= 1
                typ = self.parse_type()
                self.expect("(")
                e = self.expr()
                self.expect(")")
                return ("cast", typ, e)
            if self.peek()[1] == "(":
                if text not in FUNCS:
                    raise self.refuse(f"the function {text!r} (it knows {', '.join(sorted(_BASE_FUNCS))} "
                                      "and their f-forms)")
                self.next()
                args = []
                if not self.accept(")"):
                    args.append(self.expr())
                    while self.accept(","):
                        args.append(self.expr())
                    self.expect(")")
                if len(args) != FUNCS[text][1]:
                    raise self.refuse(f"{text} with {len(args)} arguments (it takes {FUNCS[text][1]})")
                return ("call", text, args)
            if text in self.raw and self.known(text):
                if self.peek()[1] == "[":
                    return ("index", text, self.subscript(text))
                if self.peek()[1] == ".":
                    self.size_call()
                    return ("rawsize", text)
                raise self.refuse(f"the raw array {text!r} without an index (read x[j] or x.size())")
            if text == "_ind" and self.ind and self.peek()[1] == ".":
                self.size_call()
                return ("indsize",)
            if not self.known(text):
                raise self.refuse(f"the unknown name {text!r}")
            if self.peek()[1] == "[":
                raise self.refuse(f"indexing ('[') of {text!r}, which is not a raw parameter (CuPy passes "
                                  "it as one element)")
            return ("name", text)
        raise self.refuse(f"{text or 'the end'!r} where an expression was expected")


def parse_body(src, what, names, placeholders=(), consts=(), raw=(), ind=False):
    """The statements of a kernel body (``consts``: names it may read but not assign; ``raw``: raw
    array parameters, read and written as ``x[j]``; ``ind``: ``_ind.size()`` readable). CuPy puts a
    ``;`` after the operation, so its last statement needs none."""
    p = Parser(src, what, names, placeholders, consts, raw, ind)
    if len(p.toks) > 1 and p.toks[-2][1] not in (";", "}"):
        p.toks.insert(-1, ("op", ";"))
    return p.body()


def parse_expr(src, what, names, placeholders=()):
    """One expression (a ReductionKernel's map or reduce expression)."""
    p = Parser(src, what, names, placeholders)
    e = p.expr()
    if p.peek()[0] != "end":
        p.check_token(p.peek())
        raise p.refuse(f"{p.peek()[1]!r} after the expression")
    return e


def names_used(node, acc=None):
    """The names a tree reads or writes."""
    acc = set() if acc is None else acc
    if isinstance(node, list):
        for n in node:
            names_used(n, acc)
    elif isinstance(node, tuple) and node:
        if node[0] == "name":
            acc.add(node[1])
        elif node[0] in ("assign", "decl"):
            acc.add(node[2] if node[0] == "decl" else node[1])
        for n in node[1:]:
            if isinstance(n, (list, tuple)):
                names_used(n, acc)
    return acc


# -- the math functions -----------------------------------------------------------------------------------
def _erf(x):
    from ...backends._erf import erf                # the fdlibm port the CPU backend uses
    return erf(x)


def _round(x):                                       # C rounds halfway cases away from zero
    r = np.trunc(x)
    return np.where(np.abs(x - r) >= 0.5, r + np.sign(x), r)


# name -> (NumPy function, number of arguments, kind): "float" follows C++'s overloads (float stays float,
# an integer argument gives double), "int" keeps integer types (max, min, abs), "pred" gives bool
_BASE_FUNCS = {
    "exp": (np.exp, 1, "float"), "exp2": (np.exp2, 1, "float"), "exp10": (lambda x: np.power(10, x), 1, "float"),
    "expm1": (np.expm1, 1, "float"), "log": (np.log, 1, "float"), "log2": (np.log2, 1, "float"),
    "log10": (np.log10, 1, "float"), "log1p": (np.log1p, 1, "float"), "sqrt": (np.sqrt, 1, "float"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), 1, "float"), "cbrt": (np.cbrt, 1, "float"),
    "sin": (np.sin, 1, "float"), "cos": (np.cos, 1, "float"), "tan": (np.tan, 1, "float"),
    "asin": (np.arcsin, 1, "float"), "acos": (np.arccos, 1, "float"), "atan": (np.arctan, 1, "float"),
    "atan2": (np.arctan2, 2, "float"), "sinh": (np.sinh, 1, "float"), "cosh": (np.cosh, 1, "float"),
    "tanh": (np.tanh, 1, "float"), "asinh": (np.arcsinh, 1, "float"), "acosh": (np.arccosh, 1, "float"),
    "atanh": (np.arctanh, 1, "float"), "erf": (_erf, 1, "float"), "erfc": (lambda x: 1 - _erf(x), 1, "float"),
    "pow": (np.power, 2, "float"), "fabs": (np.abs, 1, "float"), "fmax": (np.fmax, 2, "float"),
    "fmin": (np.fmin, 2, "float"), "fmod": (np.fmod, 2, "float"), "hypot": (np.hypot, 2, "float"),
    "copysign": (np.copysign, 2, "float"), "floor": (np.floor, 1, "float"), "ceil": (np.ceil, 1, "float"),
    "trunc": (np.trunc, 1, "float"), "round": (_round, 1, "float"), "rint": (np.rint, 1, "float"),
    "fma": (lambda a, b, c: a * b + c, 3, "float"),
    "max": (np.fmax, 2, "int"), "min": (np.fmin, 2, "int"),      # CUDA's max/min on floats: fmax/fmin (drop NaN) "abs": (np.abs, 1, "int"),
    "isnan": (np.isnan, 1, "pred"), "isinf": (np.isinf, 1, "pred"), "isfinite": (np.isfinite, 1, "pred"),
    "signbit": (np.signbit, 1, "pred"),
}
FUNCS = dict(_BASE_FUNCS)
FUNCS.update({n + "f": (f, k, "single") for n, (f, k, kind) in _BASE_FUNCS.items() if kind == "float"})
FUNCS.update({"fmaxf": (np.fmax, 2, "single"), "fminf": (np.fmin, 2, "single")})


# -- evaluation -------------------------------------------------------------------------------------------
class Value:
    """An evaluated expression: ``a`` (a NumPy array, 0-d or broadcastable) of C type ``t`` (a dtype)."""
    __slots__ = ("a", "t")

    def __init__(self, a, t):
        self.a, self.t = a, t

    def to(self, t):
        return self.a if self.t == t else np.asarray(self.a).astype(t)


_NP_BIN = {"+": np.add, "-": np.subtract, "*": np.multiply, "<": np.less, "<=": np.less_equal,
           ">": np.greater, ">=": np.greater_equal, "==": np.equal, "!=": np.not_equal, "&": np.bitwise_and,
           "|": np.bitwise_or, "^": np.bitwise_xor}


class Machine:
    """Runs parsed statements over whole arrays. ``env``: name -> Value; ``types``: name -> declared type
    (assignments convert to it); ``index``: a callable giving ``i`` when the body reads it."""

    def __init__(self, what, src, env, types, placeholders, shape, index=None, raw=None, loop_size=None):
        self.what, self.src, self.env, self.types = what, src, env, types
        self.placeholders, self.shape, self.index = placeholders, shape, index
        self.raw = {} if raw is None else raw          # raw parameter name -> its (device) NumPy buffer
        self.loop_size = loop_size
        self.mask = None       # the lanes that run the code being evaluated (if/else, ?:, && ||); None: all

    def resolve(self, typ):
        if typ[0] == "type":
            return typ[1]
        t = self.placeholders.get(typ[1])
        if t is None:
            raise TypeError(f"Cannot determine type of {typ[1]} (in {self.what})")
        return t

    def run(self, stmts, mask=None):
        for s in stmts:
            self.stmt(s, mask)

    def stmt(self, s, mask):
        prev, self.mask = self.mask, mask
        try:
            self._stmt(s, mask)
        finally:
            self.mask = prev

    def _stmt(self, s, mask):
        kind = s[0]
        if kind == "block":
            declared = set()
            for sub in s[1]:
                self.stmt(sub, mask)
                if sub[0] == "decl":
                    declared.add(sub[2])
                elif sub[0] == "block_flat":
                    declared.update(d[2] for d in sub[1])
            for name in declared:
                self.env.pop(name, None)
                self.types.pop(name, None)
        elif kind == "block_flat":
            for sub in s[1]:
                self.stmt(sub, mask)
        elif kind == "decl":
            _, typ, name, value = s
            t = self.resolve(typ)
            self.types[name] = t
            if value is None:
                self.env[name] = Value(np.asarray(np.nan if t.kind == "f" else 0).astype(t), t)
            else:
                self.env[name] = Value(self.expr(value).to(t), t)
        elif kind == "assign":
            _, name, op, value = s
            t = self.types[name]
            v = self.expr(value)
            if op != "=":
                v = self.binop(op[0], self.env[name], v)
            new = v.to(t)
            if mask is not None:
                new = np.where(mask, new, self.env[name].a).astype(t, copy=False)
            self.env[name] = Value(new, t)
        elif kind == "store":
            _, name, idx, op, value = s
            buf, safe, active = self.subscript(name, idx)
            v = self.expr(value)
            if op != "=":
                v = self.binop(op[0], Value(self.gather(buf, safe), buf.dtype), v)
            new = np.broadcast_to(np.asarray(v.to(buf.dtype)), np.broadcast_shapes(np.shape(safe), np.shape(v.a)))
            safe = np.broadcast_to(safe, new.shape)
            if active is not None:
                active = np.broadcast_to(active, new.shape)
                safe, new = safe[active], new[active]
            self.scatter(buf, safe.reshape(-1), new.reshape(-1))
        elif kind == "if":
            _, cond, then, other = s
            c = np.asarray(self.expr(cond).to(BOOL))
            m_then = c if mask is None else (mask & c)
            self.stmt(("block", [then]), m_then)
            if other is not None:
                m_else = ~c if mask is None else (mask & ~c)
                self.stmt(("block", [other]), m_else)
        else:
            raise AssertionError(kind)

    def expr(self, e):
        kind = e[0]
        if kind == "lit":
            return Value(np.asarray(e[1]), e[1].dtype)
        if kind == "name":
            if e[1] not in self.env and e[1] == "i" and self.index is not None:
                self.env["i"] = Value(self.index(), I64)
                self.types["i"] = I64
            return self.env[e[1]]
        if kind == "unary":
            v = self.expr(e[2])
            op = e[1]
            if op == "!":
                return Value(np.logical_not(v.to(BOOL)), BOOL)
            t = _promote(v.t)
            if op == "+":
                return Value(v.to(t), t)
            if op == "-":
                return Value(np.negative(v.to(t)), t)
            if t.kind == "f":
                raise self.refuse("'~' on a floating value")
            return Value(np.invert(v.to(t)), t)
        if kind == "bin":
            op = e[1]
            if op in ("&&", "||"):         # short-circuit: b runs only where a does not decide
                a = self.expr(e[2]).to(BOOL)
                b = self.under(a if op == "&&" else np.logical_not(a), e[3]).to(BOOL)
                return Value((np.logical_and if op == "&&" else np.logical_or)(a, b), BOOL)
            return self.binop(op, self.expr(e[2]), self.expr(e[3]))
        if kind == "ternary":          # each branch runs only where it is chosen (its indexing too)
            c = self.expr(e[1]).to(BOOL)
            a, b = self.under(c, e[2]), self.under(np.logical_not(c), e[3])
            t = BOOL if a.t == BOOL and b.t == BOOL else arith(a.t, b.t)
            return Value(np.where(c, a.to(t), b.to(t)).astype(t, copy=False), t)
        if kind == "index":
            buf, safe, _ = self.subscript(e[1], e[2])
            return Value(self.gather(buf, safe), buf.dtype)
        if kind == "rawsize":
            return Value(np.int64(self.raw[e[1]].size), I64)
        if kind == "indsize":
            return Value(np.int64(self.loop_size), I64)
        if kind == "cast":
            t = self.resolve(e[1])
            return Value(self.expr(e[2]).to(t), t)
        if kind == "call":
            return self.call(e[1], [self.expr(a) for a in e[2]])
        raise AssertionError(kind)

    def refuse(self, why):
        return _refuse(self.what, self.src, why)

    def under(self, cond, e):
        """Evaluate ``e`` in the lanes where ``cond`` holds (and the current mask)."""
        prev = self.mask
        self.mask = cond if prev is None else np.logical_and(prev, cond)
        try:
            return self.expr(e)
        finally:
            self.mask = prev

    def subscript(self, name, idx):
        """(buffer, index, active lanes) of ``name[idx]``: the index, an integer, checked in the lanes that
        run it (a GPU would read or write outside the array: IndexError naming the kernel); inactive
        lanes hold index 0."""
        buf = self.raw[name]
        v = self.expr(idx)
        if v.t.kind not in "biu":
            raise self.refuse(f"an index of type {v.t} into {name!r} (C needs an integer subscript)")
        ix = np.asarray(v.a).astype(np.int64) if v.t != np.dtype(np.uint64) else \
            np.minimum(np.asarray(v.a), np.uint64(2 ** 63 - 1)).astype(np.int64)
        active = self.mask
        bad = (ix < 0) | (ix >= buf.size)
        if active is not None:
            ix, active = np.broadcast_arrays(ix, np.asarray(active, bool))
            bad = np.broadcast_to(bad, ix.shape) & active
        if np.any(bad):
            first = int(np.asarray(ix)[np.nonzero(np.broadcast_to(bad, np.shape(ix)))][0]) if np.ndim(ix) else int(ix)
            raise IndexError(f"{self.what}: index {first} out of range for the raw array {name!r} of size "
                             f"{buf.size} (on a GPU the kernel would read or write outside the array)")
        if active is not None:
            ix = np.where(active, ix, 0)
        return buf, ix, active

    @staticmethod
    def gather(buf, ix):
        """``buf[ix]`` with CuPy's raw indexing: ``ix`` the C-order position, whatever the strides."""
        if buf.size == 0:                        # only lanes that do not run read it
            return np.zeros(np.shape(ix), buf.dtype)
        if buf.ndim == 0:
            return np.broadcast_to(buf, np.shape(ix)).copy()
        return buf[np.unravel_index(ix, buf.shape)]

    @staticmethod
    def scatter(buf, ix, values):
        """``buf[ix] = values`` (several lanes writing one element: the last one here, a race on a GPU)."""
        if ix.size == 0:
            return
        if buf.ndim == 0:
            buf[()] = values[-1]
        else:
            buf[np.unravel_index(ix, buf.shape)] = values

    def binop(self, op, a, b):
        if op in ("<<", ">>"):
            if a.t.kind == "f" or b.t.kind == "f":
                raise self.refuse(f"{op!r} on a floating value")
            t = _promote(a.t)
            f = np.left_shift if op == "<<" else np.right_shift
            return Value(f(a.to(t), b.to(_promote(b.t)).astype(t)), t)
        t = arith(a.t, b.t)
        x, y = a.to(t), b.to(t)
        if op in ("<", "<=", ">", ">=", "==", "!="):
            return Value(_NP_BIN[op](x, y), BOOL)
        if op == "/":
            if t.kind == "f":
                return Value(np.asarray(np.true_divide(x, y)).astype(t, copy=False), t)
            return Value(_int_div(x, y, t), t)
        if op == "%":
            if t.kind == "f":
                raise self.refuse("'%' on a floating value (C has fmod for that)")
            return Value(np.where(y == 0, 0, np.fmod(x, np.where(y == 0, 1, y))).astype(t, copy=False), t)
        if op in ("&", "|", "^") and t.kind == "f":
            raise self.refuse(f"{op!r} on a floating value")
        return Value(np.asarray(_NP_BIN[op](x, y)).astype(t, copy=False), t)

    def call(self, name, args):
        f, _, kind = FUNCS[name]
        if kind == "pred":
            return Value(f(args[0].a), BOOL)
        t = args[0].t
        for a in args[1:]:
            t = arith(t, a.t)
        if kind == "single":
            t = F32
        elif kind == "float":
            t = F64 if t.kind != "f" else (F32 if t.itemsize == 2 else t)
        elif kind == "int" and t.kind == "f" and t.itemsize == 2:
            t = F32
        elif kind == "int":
            t = _promote(t) if t.kind != "f" else t
        return Value(np.asarray(f(*(a.to(t) for a in args))).astype(t, copy=False), t)


def _int_div(x, y, t):
    """C's integer division: truncated toward zero (0 for a zero divisor, undefined in C)."""
    safe = np.where(y == 0, 1, y)
    q = np.floor_divide(x, safe)
    if t.kind == "i":
        q = q + ((np.remainder(x, safe) != 0) & ((x < 0) != (safe < 0)))
    return np.where(y == 0, 0, q).astype(t, copy=False)
