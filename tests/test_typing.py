"""The package's annotations as a user's type checker sees them: mypy on small user programs.

CI also runs ``python -m mypy autograd_gpu`` over the whole package (.ci/run); these tests check what the
annotations promise a caller: the registry's names (ag.exp, F.relu, x.sum(), the operators) are known,
the annotated entry points accept what they document, and a wrong call is an error.
"""
import pathlib
import textwrap

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    """check(source) -> mypy's error lines for that source, checked as a user's module (the package's own
    mypy configuration; one cache for the module's tests, so the package is analysed once)."""
    tmp = tmp_path_factory.mktemp("typing")
    cache = tmp / "cache"

    def run(source, name="user_code"):
        path = tmp / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        out, err, _ = mypy_api.run([str(path), "--config-file", str(ROOT / "pyproject.toml"),
                                    "--cache-dir", str(cache), "--no-error-summary", "--show-error-codes"])
        assert "INTERNAL ERROR" not in out + err, out + err
        return [line for line in out.splitlines() if line.startswith(str(path))]
    return run


def _here(monkeypatch):
    monkeypatch.chdir(ROOT)          # mypy finds the package in the checkout, as CI's run does


def test_a_training_script_type_checks(check, monkeypatch):
    _here(monkeypatch)
    errors = check("""
        import autograd_gpu as ag
        import autograd_gpu.nn.functional as F

        model = ag.nn.Sequential(ag.nn.Linear(4, 8), ag.nn.ReLU(), ag.nn.Linear(8, 2))
        opt = ag.optim.Adam(model.parameters(), lr=1e-3)
        x = ag.randn(16, 4)
        y = ag.randint(0, 2, (16,))
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        w = ag.zeros(3, requires_grad=True, device="cpu", dtype=ag.float64)
        z = (ag.exp(w) * 2 + 1).sum() / w.shape[0] - ag.linalg.norm(w) + ag.fft.fft(w).real.sum()
        z.backward(retain_graph=True)
        g: ag.Tensor | None = w.grad
        n: int = w.ndim + w.numel() + len(list(model.parameters()))
        mask: ag.Tensor = (w > 0) & (w <= 1) | ~(w == 0)
        w2: ag.Tensor = -w @ w + abs(w)[0]
        m: ag.nn.Linear = ag.nn.Linear(2, 2).train().eval().to("cpu").float()
        state = model.state_dict()
        missing, unexpected = model.load_state_dict(state)
        opt.load_state_dict(opt.state_dict())
    """)
    assert errors == []


def test_wrong_calls_are_type_errors(check, monkeypatch):
    _here(monkeypatch)
    errors = check("""
        import autograd_gpu as ag

        a = ag.zeros(2, requires_grad="yes")
        b: ag.nn.Sequential = ag.nn.Linear(2, 2).train()
        c: ag.Tensor = ag.randn(2).item
        d = ag.arange(0, 5, device=3)
        ag.optim.SGD([ag.zeros(1)], lr=0.1).step(closure=3)
    """)
    lines = sorted({int(e.split(":")[1]) for e in errors})
    assert lines == [4, 5, 6, 7, 8], "\n".join(errors)


def test_op_tables_are_checked_as_keywords(check, monkeypatch):
    """OpTest(..., **options): a typed table is checked like written-out keywords (a misspelt key, a
    wrong value type), which a plain dict(...) would hide."""
    _here(monkeypatch)
    errors = check("""
        from autograd_gpu.ops.registry import OpTest, OpTestOptions, UNARY, COMPLEX

        good = OpTest(UNARY, ref="np.exp", **OpTestOptions(domain=(0.1, 2.0), grad=False))
        typo = OpTestOptions(domian=(0.1, 2.0))
        wrong = OpTestOptions(grad="no")
        twice = OpTest(UNARY, ref="np.exp", dtypes=(), **COMPLEX)
    """, name="op_tables")
    lines = sorted({int(e.split(":")[1]) for e in errors})
    assert lines == [5, 6, 7], "\n".join(errors)
