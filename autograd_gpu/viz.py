"""Seeing the graph: draw_graph (matplotlib only, PNG/SVG/PDF) and to_dot (Graphviz text).

Both read the graph that produced ``y`` from the nodes alone: ``y.grad_fn`` and each node's
``_next`` edges (None, a leaf Tensor, a node, or ``(node, output_nr)``). Intermediate tensors are
not kept by the graph, so the picture shows op nodes, the leaf tensors that require grad (shape,
dtype, value when small, ``.grad`` once set) and the output ``y``. The walk is iterative, so graphs
of any depth work, and nothing here keeps a tensor alive after the call returns.

Big graphs are summarised in two steps, applied only while the graph has more than ``max_nodes``
boxes: (1) every run of ops linked one to one (the first op's only consumer is the next op, whose
only input is the first) becomes one box "N ops" listing the op names; (2) if that is still too
many, only the ``max_nodes - 1`` boxes nearest the output (breadth first from ``y``) are kept and
one box "... K earlier nodes" stands for the rest, K counted in original ops and leaves.
"""
import os
from collections import deque

from .tensor import Tensor

__all__ = ["draw_graph", "to_dot"]

_INSTALL_HINT = ('draw_graph needs matplotlib; install it with pip install matplotlib (or pip install -e ".[examples]" in '
                 'a checkout of autograd_gpu)')
_FONT = 9.0                     # points, before the figure is scaled down to fit
_CHAR_W = 0.61 * _FONT          # DejaVu Sans Mono advance width
_LINE_H = 1.3 * _FONT
_PAD_X, _PAD_Y = 7.0, 5.0
_GAP_X, _GAP_Y = 46.0, 14.0     # between layers (columns) and between boxes in a column
_DUMMY_H = 6.0                  # the slot a long edge takes in a column it crosses
_MAX_INCHES = 72.0
_STYLE = {                      # kind -> (fill colour, edge colour, rounded)
    "op": ("#dbe9f6", "#3b6ea5", False),
    "chain": ("#e8e8e8", "#555555", False),
    "more": ("#f4f4f4", "#888888", False),
    "leaf": ("#e2f3df", "#3f8f3a", True),
    "out": ("#fde8d0", "#c0701c", True),
}


class _V:
    """One box: its kind (op, chain, more, leaf, out), label lines, and how many graph nodes it stands for."""
    __slots__ = ("kind", "lines", "count", "names")

    def __init__(self, kind, lines, count=1, names=None):
        self.kind, self.lines, self.count, self.names = kind, lines, count, names


class _Graph:
    """Boxes and edges {(src, dst): {label: multiplicity}}, src feeding dst."""

    def __init__(self):
        self.verts, self.edges = [], {}

    def add(self, v):
        self.verts.append(v)
        return len(self.verts) - 1

    def link(self, u, v, label=None, count=1):
        e = self.edges.setdefault((u, v), {})
        e[label] = e.get(label, 0) + count

    def adjacency(self):
        """(preds, succs): for each box, the boxes that feed it and those it feeds."""
        preds = [[] for _ in self.verts]
        succs = [[] for _ in self.verts]
        for u, v in self.edges:
            preds[v].append(u)
            succs[u].append(v)
        return preds, succs

    def edge_label(self, u, v):
        """'x2' when one output feeds a box twice; 'out 1 (2, 3)' for the outputs of multi-output ops."""
        parts = [" ".join(([label] if label else []) + ([f"x{c}"] if c > 1 else []))
                 for label, c in self.edges[(u, v)].items()]
        return ", ".join(p for p in parts if p)


# --------------------------------------------------------------------------- reading the graph
def _fmt_number(v):
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _fmt_value(t):
    """A short text for a tensor's values (nested lists for arrays)."""
    return _fmt_list(t.tolist())


def _fmt_list(vals):
    if isinstance(vals, list):
        return "[" + ", ".join(_fmt_list(v) for v in vals) + "]"
    return _fmt_number(vals)


def _tensor_lines(t, title, show_values):
    lines = [title] if title else []
    lines.append(f"{tuple(t.shape)} {t.dtype}")
    if not show_values:
        return lines
    small = t.data.size <= 4
    if small:
        lines.append("data " + _fmt_value(t))
    g = t.grad
    if g is not None:
        lines.append("grad " + _fmt_value(g) if small else f"|grad| {_fmt_number(_norm(g))}")
    return lines


def _norm(g):
    """The L2 norm of a gradient as a Python float (outside any graph)."""
    d = g.detach()
    return float((d * d).sum().item()) ** 0.5


def _out_label(node, k):
    """The label of the edge leaving output k of a node with several outputs (None for one output)."""
    if node._n_out <= 1:
        return None
    meta = node.__dict__.get("_out_meta")
    return f"out {k} {tuple(meta[k][0])}" if meta and meta[k] is not None else f"out {k}"


def _read(y, params, show_values, where):
    """The full graph behind y: one box per op node, per leaf that requires grad, and one for y."""
    if not isinstance(y, Tensor):
        raise TypeError(f"{where}: expected a Tensor, got {type(y).__name__}")
    names = _param_names(params, where)
    g = _Graph()
    out = g.add(_V("out", _tensor_lines(y, names.get(id(y), "output"), show_values)))
    root = y.grad_fn
    if root is None:
        return g, out
    ids = {}

    def op_box(node):
        i = ids.get(id(node))
        if i is None:
            i = ids[id(node)] = g.add(_V("op", [node.name()], names=[node.name()]))
            stack.append(node)
        return i

    stack = []
    g.link(op_box(root), out, _out_label(root, y._output_nr))
    while stack:
        node = stack.pop()
        v = ids[id(node)]
        for e in node._next:
            if e is None:
                continue
            if isinstance(e, Tensor):
                u = ids.get(id(e))
                if u is None:
                    u = ids[id(e)] = g.add(_V("leaf", _tensor_lines(e, names.get(id(e)), show_values)))
                g.link(u, v)
                continue
            m, k = e if e.__class__ is tuple else (e, 0)
            g.link(op_box(m), v, _out_label(m, k))
    return g, out


def _param_names(params, where):
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise TypeError(f"{where}: params must be a dict of name -> Tensor, got {type(params).__name__}")
    return {id(t): str(name) for name, t in params.items()}


# --------------------------------------------------------------------------- summarising
def _rebuild(g, mapping, new_verts):
    """A graph with boxes new_verts; old box i becomes mapping[i] (None: dropped)."""
    h = _Graph()
    h.verts = new_verts
    for (u, v), labels in g.edges.items():
        a, b = mapping[u], mapping[v]
        if a is None or b is None or a == b or new_verts[b].kind == "more":
            continue
        if new_verts[a].kind == "more":          # one plain edge, whatever it stands for
            h.edges[(a, b)] = {None: 1}
            continue
        for label, count in labels.items():
            h.link(a, b, label, count)
    return h


def _chain_label(names):
    counts = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    parts = [n if c == 1 else f"{n} x{c}" for n, c in counts.items()]
    if len(parts) > 4:
        parts = parts[:3] + ["..."]
    return [f"{len(names)} ops:", ", ".join(parts)]


def _collapse_chains(g):
    """Merge every run of ops linked one to one into a single 'N ops' box."""
    preds, succs = g.adjacency()

    def linked(u, v):   # u's only consumer is v and v's only input is u (once)
        return (g.verts[u].kind == "op" and g.verts[v].kind == "op" and len(succs[u]) == 1
                and len(preds[v]) == 1 and sum(g.edges[(u, v)].values()) == 1)

    mapping = [None] * len(g.verts)
    new = []
    for i, v in enumerate(g.verts):
        if mapping[i] is not None or (v.kind == "op" and len(preds[i]) == 1 and linked(preds[i][0], i)):
            continue                     # already placed, or not the head of its run
        run = [i]
        while v.kind == "op" and len(succs[run[-1]]) == 1 and linked(run[-1], succs[run[-1]][0]):
            run.append(succs[run[-1]][0])
        if len(run) == 1:
            box = v
        else:
            names = [n for j in run for n in g.verts[j].names]
            box = _V("chain", _chain_label(names), len(names), names)
        for j in run:
            mapping[j] = len(new)
        new.append(box)
    return _rebuild(g, mapping, new)


def _keep_nearest(g, out, budget):
    """Keep the `budget` boxes nearest the output; one 'K earlier nodes' box stands for the rest."""
    preds, _ = g.adjacency()
    keep, seen, queue = [], {out}, deque([out])
    while queue and len(keep) < budget:
        v = queue.popleft()
        keep.append(v)
        for u in preds[v]:
            if u not in seen:
                seen.add(u)
                queue.append(u)
    hidden = sum(v.count for v in g.verts) - sum(g.verts[v].count for v in keep)
    mapping = [len(keep)] * len(g.verts)
    for i, v in enumerate(keep):
        mapping[v] = i
    more = _V("more", ["...", f"{hidden} earlier nodes"], hidden)
    return _rebuild(g, mapping, [g.verts[v] for v in keep] + [more]), mapping[out]


def _summarise(g, out, max_nodes, where):
    if not isinstance(max_nodes, int) or isinstance(max_nodes, bool) or max_nodes < 2:
        raise ValueError(f"{where}: max_nodes must be an int >= 2, got {max_nodes!r}")
    if len(g.verts) <= max_nodes:
        return g, out
    g = _collapse_chains(g)
    out = next(i for i, v in enumerate(g.verts) if v.kind == "out")
    if len(g.verts) <= max_nodes:
        return g, out
    return _keep_nearest(g, out, max_nodes - 1)


def _graph(y, max_nodes, params, show_values, where):
    g, out = _read(y, params, show_values, where)
    return _summarise(g, out, max_nodes, where)


# --------------------------------------------------------------------------- DOT
def _dot_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


_DOT_SHAPE = {"op": 'shape=box, style=filled', "chain": 'shape=box, style="filled,dashed"',
              "more": 'shape=box, style="filled,dashed"', "leaf": 'shape=box, style="rounded,filled"',
              "out": 'shape=box, style="rounded,filled"'}


def to_dot(y, max_nodes=200, *, params=None, show_values=True):
    """Graphviz DOT text of the graph that produced y, summarised as draw_graph does beyond
    max_nodes boxes; params optionally names tensors: {name: tensor}."""
    g, _ = _graph(y, max_nodes, params, show_values, "to_dot")
    lines = ["digraph autograd {", "  rankdir=LR;",
             '  node [fontname="DejaVu Sans Mono", fontsize=10];', '  edge [fontsize=9];']
    for i, v in enumerate(g.verts):
        label = "\\n".join(s.replace("\\", "\\\\").replace('"', '\\"') for s in v.lines)
        fill = _STYLE[v.kind][0]
        lines.append(f'  n{i} [label="{label}", {_DOT_SHAPE[v.kind]}, fillcolor="{fill}"];')
    for u, v in g.edges:
        label = g.edge_label(u, v)
        lines.append(f"  n{u} -> n{v}" + (f" [label={_dot_str(label)}]" if label else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- layout
def _box_size(v):
    width = max(len(s) for s in v.lines) * _CHAR_W + 2 * _PAD_X
    return width, len(v.lines) * _LINE_H + 2 * _PAD_Y


def _topological(n, preds, succs):
    """Boxes in an order where every box comes after all the boxes that feed it (Kahn)."""
    missing = [len(p) for p in preds]
    order = [i for i in range(n) if missing[i] == 0]
    for v in order:                     # the list grows while we walk it
        for w in succs[v]:
            missing[w] -= 1
            if missing[w] == 0:
                order.append(w)
    return order


def _layers(n, preds, succs):
    """Longest path from the sources; then each source moves next to its first consumer."""
    layer = [0] * n
    order = _topological(n, preds, succs)
    for v in order:
        if preds[v]:
            layer[v] = 1 + max(layer[u] for u in preds[v])
    for v in order:
        if not preds[v] and succs[v]:
            layer[v] = min(layer[w] for w in succs[v]) - 1
    ranks = {r: i for i, r in enumerate(sorted(set(layer)))}
    return [ranks[r] for r in layer]


def _with_dummies(g, layer, succs):
    """Route edges that skip layers through dummy boxes, one per skipped layer; the edges leaving
    one box share their dummies (a bus with a branch to each consumer): (layer, paths)."""
    layer = list(layer)
    paths = {}
    for u, targets in enumerate(succs):
        bus = []                       # bus[i]: the dummy in layer layer[u] + 1 + i
        for v in targets:
            while len(bus) < layer[v] - layer[u] - 1:
                layer.append(layer[u] + 1 + len(bus))
                bus.append(len(layer) - 1)
            paths[(u, v)] = [u] + bus[:layer[v] - layer[u] - 1] + [v]
    return layer, paths


def _crossings(rows, pos, down):
    total = 0
    for row in rows[:-1]:
        segs = sorted((pos[a], pos[b]) for a in row for b in down[a])
        for i, (_, b1) in enumerate(segs):
            total += sum(1 for _, b2 in segs[i + 1:] if b2 < b1)
    return total


def _order(layer, paths):
    """Boxes of each layer ordered to reduce crossings: barycenter sweeps, the best order kept."""
    n = len(layer)
    up, down = [[] for _ in range(n)], [[] for _ in range(n)]
    for a, b in dict.fromkeys(seg for path in paths.values() for seg in zip(path, path[1:])):   # shared once
        down[a].append(b)
        up[b].append(a)
    rows = [[] for _ in range(max(layer) + 1)]
    for v in range(n):
        rows[layer[v]].append(v)
    pos = {v: i for row in rows for i, v in enumerate(row)}
    best = ([list(r) for r in rows], _crossings(rows, pos, down))
    for sweep in range(6):
        forward = sweep % 2 == 0
        for r in (range(1, len(rows)) if forward else range(len(rows) - 2, -1, -1)):
            nbrs = up if forward else down
            key = {v: (sum(pos[u] for u in nbrs[v]) / len(nbrs[v]) if nbrs[v] else pos[v]) for v in rows[r]}
            rows[r].sort(key=key.__getitem__)
            pos.update((v, i) for i, v in enumerate(rows[r]))
        c = _crossings(rows, pos, down)
        if c < best[1]:
            best = ([list(r) for r in rows], c)
    return best[0], up, down


def _place_row(row, want, height):
    """y centres for one column: as near `want` as the order and the gaps allow."""
    ys = []
    for i, v in enumerate(row):
        y = want[v]
        if i:
            y = max(y, ys[-1] + (height[row[i - 1]] + height[v]) / 2 + _GAP_Y)
        ys.append(y)
    shift = sum(y - want[v] for y, v in zip(ys, row)) / len(row)
    return [y - shift for y in ys]


def _coordinates(rows, up, down, width, height, gaps):
    """(x, y) of every box centre and the left/right x of every column; gaps[r] precedes column r."""
    ycen = {}
    for row in rows:
        acc = 0.0
        for v in row:
            ycen[v] = acc + height[v] / 2
            acc += height[v] + _GAP_Y
    for sweep in range(8):
        forward = sweep % 2 == 0
        nbrs = up if forward else down
        for row in (rows if forward else rows[::-1]):
            want = {v: (sum(ycen[u] for u in nbrs[v]) / len(nbrs[v]) if nbrs[v] else ycen[v]) for v in row}
            ycen.update(zip(row, _place_row(row, want, height)))
    top = min(ycen[v] - height[v] / 2 for v in ycen)
    cols, x = [], 0.0
    for r, row in enumerate(rows):
        x += gaps[r]
        w = max(width[v] for v in row)
        cols.append((x, x + w))
        x += w
    xcen = {v: sum(cols[r]) / 2 for r, row in enumerate(rows) for v in row}
    return {v: (xcen[v], ycen[v] - top + _GAP_Y) for v in ycen}, cols


def _layout(g):
    """Box centres and sizes, edge polylines, and the drawing's extent (points, y downwards)."""
    preds, succs = g.adjacency()
    n = len(g.verts)
    layer, paths = _with_dummies(g, _layers(n, preds, succs), succs)
    rows, up, down = _order(layer, paths)
    sizes = [_box_size(v) for v in g.verts] + [(0.0, _DUMMY_H)] * (len(layer) - n)
    width = [s[0] for s in sizes]
    height = [s[1] for s in sizes]
    gaps = [_GAP_X / 2] + [_GAP_X] * (len(rows) - 1)
    for (u, v) in g.edges:             # an edge label sits in the gap before its target's column
        label = g.edge_label(u, v)
        if label:
            gaps[layer[v]] = max(gaps[layer[v]], len(label) * _CHAR_W * 0.85 + 36)
    xy, cols = _coordinates(rows, up, down, width, height, gaps)
    lines = {}
    for (u, v), path in paths.items():
        pts = [(xy[u][0] + width[u] / 2, xy[u][1])]
        for d in path[1:-1]:
            left, right = cols[layer[d]]
            pts += [(left, xy[d][1]), (right, xy[d][1])]
        pts.append((xy[v][0] - width[v] / 2, xy[v][1]))
        lines[(u, v)] = pts
    extent = (cols[-1][1] + _GAP_X / 2, max(xy[v][1] + height[v] / 2 for v in xy) + _GAP_Y)
    return xy, width, height, lines, extent


# --------------------------------------------------------------------------- drawing
def _edge_path(pts, Path):
    """Bezier curves with horizontal tangents between columns, straight lines through columns."""
    verts, codes = [pts[0]], [Path.MOVETO]
    for i in range(1, len(pts)):
        (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        if i % 2:                    # a gap between columns
            dx = (x1 - x0) / 2
            verts += [(x0 + dx, y0), (x1 - dx, y1), (x1, y1)]
            codes += [Path.CURVE4] * 3
        else:                        # across a column, in the edge's own slot
            verts.append((x1, y1))
            codes.append(Path.LINETO)
    return Path(verts, codes)


def _draw(g):
    from matplotlib.figure import Figure
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.patches import FancyBboxPatch, FancyArrowPatch
    from matplotlib.path import Path

    xy, width, height, lines, (w, h) = _layout(g)
    scale = min(1.0, _MAX_INCHES * 72 / max(w, h))
    fig = Figure(figsize=(w * scale / 72, h * scale / 72), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, w)
    ax.set_ylim(h, 0)
    ax.axis("off")
    for (u, v), pts in lines.items():
        ax.add_patch(FancyArrowPatch(path=_edge_path(pts, Path), arrowstyle="-|>", mutation_scale=9 * scale,
                                     lw=0.9 * scale, color="#444444", shrinkA=0, shrinkB=0, zorder=1))
        label = g.edge_label(u, v)
        if label:
            (x0, y0), (x1, y1) = pts[-2], pts[-1]
            ax.text((x0 + x1) / 2, (y0 + y1) / 2, label, fontsize=(_FONT - 1.5) * scale, ha="center",
                    va="center", family="monospace", color="#333333", zorder=3,
                    bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none"))
    for i, v in enumerate(g.verts):
        fill, edge, rounded = _STYLE[v.kind]
        (x, y), bw, bh = xy[i], width[i], height[i]
        style = "round,pad=0,rounding_size=6" if rounded else "square,pad=0"
        ax.add_patch(FancyBboxPatch((x - bw / 2, y - bh / 2), bw, bh, boxstyle=style, fc=fill, ec=edge,
                                    lw=1.0 * scale, ls="--" if v.kind in ("chain", "more") else "-", zorder=2))
        ax.text(x, y, "\n".join(v.lines), fontsize=_FONT * scale, ha="center", va="center",
                family="monospace", linespacing=1.3, zorder=3,
                weight="bold" if v.kind == "op" else "normal")
    return fig


def draw_graph(y, path=None, *, max_nodes=60, show_values=True, params=None):
    """Draw the graph that produced y with matplotlib (Agg), left to right: ops as square boxes,
    leaf tensors and y as rounded boxes with shape, dtype, value (<= 4 elements) and .grad once set
    (its norm when larger), arrows from inputs to consumers. Over max_nodes boxes, one-to-one runs
    of ops become one "N ops: Tanh, Mul, ..." box, then only the max_nodes - 1 boxes nearest y are
    kept beside one "... K earlier nodes" box. Saves to path when given (.png, .svg or .pdf, by
    suffix) and returns the Figure; params optionally names tensors: {name: tensor}."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError(_INSTALL_HINT) from None
    fmt = None
    if path is not None:
        fmt = os.path.splitext(os.fspath(path))[1].lower().lstrip(".")
        if fmt not in ("png", "svg", "pdf"):
            raise ValueError(f"draw_graph: expected a path ending in .png, .svg or .pdf, got {os.fspath(path)!r}")
    g, _ = _graph(y, max_nodes, params, show_values, "draw_graph")
    fig = _draw(g)
    if path is not None:
        fig.savefig(path, format=fmt)
    return fig
