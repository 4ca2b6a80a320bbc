"""ag.viz: draw_graph (matplotlib only) and to_dot show the graph behind a tensor, summarised when big."""
import gc
import re
import sys
import time
import weakref

import pytest

import autograd_gpu as ag

pytest.importorskip("matplotlib")
from autograd_gpu import viz  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402


def micrograd_example(device="cpu"):
    """micrograd's x = -4 example: y = -20, dy/dx = 46."""
    x = ag.tensor(-4.0, device=device, requires_grad=True)
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    return x, y


def boxes(fig):
    return [p for p in fig.axes[0].patches if isinstance(p, FancyBboxPatch)]


def texts(fig):
    return "\n".join(t.get_text() for t in fig.axes[0].texts)


def assert_valid_dot(dot):
    assert dot.startswith("digraph")
    assert dot.count("{") == dot.count("}") and dot.rstrip().endswith("}")
    for line in dot.splitlines()[1:-1]:
        assert line.rstrip().endswith(";"), line


def test_draw_graph_writes_png_and_svg(tmp_path, device):
    x, y = micrograd_example(device)
    fig = viz.draw_graph(y, tmp_path / "g.png")
    viz.draw_graph(y, str(tmp_path / "g.svg"))
    png, svg = (tmp_path / "g.png").read_bytes(), (tmp_path / "g.svg").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 1000
    assert b"<svg" in svg
    assert len(boxes(fig)) == 13          # 11 ops + the leaf x + the output y


def test_draw_graph_shows_ops_values_and_gradients_after_backward():
    x, y = micrograd_example()
    before = texts(viz.draw_graph(y, params={"x": x}))
    assert "Relu" in before and "Mul" in before and "data -4" in before and "grad" not in before
    y.backward()
    after = texts(viz.draw_graph(y, params={"x": x}))
    assert "grad 46" in after and "data -20" in after


def test_draw_graph_without_values_shows_shapes_only():
    x, y = micrograd_example()
    y.backward()
    text = texts(viz.draw_graph(y, show_values=False))
    assert "() float32" in text and "data" not in text and "grad" not in text


def test_to_dot_names_ops_and_leaf_shapes():
    w = ag.randn(3, 4, requires_grad=True)
    b = ag.zeros(4, requires_grad=True)
    loss = ag.tanh(ag.ones(2, 3) @ w + b).sum()
    dot = viz.to_dot(loss, params={"w": w})
    assert_valid_dot(dot)
    for name in ("MatMul", "BroadcastTo", "Add", "Tanh", "Sum", "(3, 4) float32", "(4,) float32", "w\\n"):
        assert name in dot, name
    assert len(re.findall(r"->", dot)) == 7       # w, b -> BroadcastTo -> Add <- MatMul; Tanh, Sum, y


def test_multi_output_edges_name_the_output():
    a = ag.randn(4, 6, requires_grad=True)
    p, q, r = ag.split(a, 2, 1)
    dot = viz.to_dot((p * r).sum() + q.sum())
    assert "out 0 (4, 2)" in dot and "out 2 (4, 2)" in dot


def test_long_chain_is_collapsed_and_fast(tmp_path):
    x = ag.tensor([1.0, 2.0], requires_grad=True)
    y = x
    for i in range(10_000):
        y = ag.tanh(y) if i % 2 else y * 0.5
    y = y.sum()
    y.backward()
    start = time.perf_counter()
    fig = viz.draw_graph(y, tmp_path / "chain.png")
    dot = viz.to_dot(y)
    assert time.perf_counter() - start < 5.0
    assert len(boxes(fig)) <= 3                     # leaf, one "10001 ops" box, output
    assert "10001 ops" in texts(fig) and "10001 ops" in dot
    assert "grad [" in texts(fig)
    assert_valid_dot(dot)


def test_wide_graph_keeps_the_nodes_nearest_the_output(tmp_path):
    ws = [ag.randn(2, requires_grad=True) for _ in range(5)]
    y = ag.ones(2)
    for i in range(2000):
        y = ag.tanh(y * ws[i % 5] + 1)
    y = y.sum()
    start = time.perf_counter()
    fig = viz.draw_graph(y, tmp_path / "wide.png", max_nodes=40)
    assert time.perf_counter() - start < 5.0
    assert len(boxes(fig)) <= 40 + 1
    assert re.search(r"\d+ earlier nodes", texts(fig))
    dot = viz.to_dot(y, max_nodes=10)
    assert_valid_dot(dot)
    hidden = int(re.search(r"(\d+) earlier nodes", dot).group(1))
    shown = sum(int(n) for n in re.findall(r"(\d+) ops:", dot))
    assert 1000 < hidden < 6000 + 5 + 1 and shown > 0


def test_small_graph_is_not_summarised():
    _, y = micrograd_example()
    assert "ops:" not in viz.to_dot(y, max_nodes=13)
    assert "ops:" in viz.to_dot(y, max_nodes=12)


def test_leaf_and_constant_tensors_draw_as_one_box():
    x = ag.tensor(2.0, requires_grad=True)
    assert len(boxes(viz.draw_graph(x))) == 1
    assert viz.to_dot(ag.ones(3)).count("[label=") == 1


def test_bad_arguments_raise_clear_errors(tmp_path):
    _, y = micrograd_example()
    with pytest.raises(TypeError, match="expected a Tensor, got list"):
        viz.draw_graph([1.0])
    with pytest.raises(ValueError, match=r"\.png, \.svg or \.pdf, got .*g\.txt"):
        viz.draw_graph(y, tmp_path / "g.txt")
    with pytest.raises(ValueError, match="max_nodes must be an int >= 2, got 1"):
        viz.to_dot(y, max_nodes=1)


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # makes `import matplotlib` fail
    _, y = micrograd_example()
    with pytest.raises(ImportError, match=r'pip install matplotlib \(or pip install -e "\.\[examples\]" in a checkout'):
        viz.draw_graph(y)


def test_the_figure_keeps_no_tensor_alive():
    x = ag.randn(3, requires_grad=True)
    y = (ag.exp(x) * 2).sum()
    fig = viz.draw_graph(y)
    ref, node = weakref.ref(y), weakref.ref(y.grad_fn)
    del y
    gc.collect()
    assert ref() is None and node() is None and fig is not None
