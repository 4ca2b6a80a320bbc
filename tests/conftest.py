import collections
import os

import pytest

import autograd_gpu as ag

# AG_CUDA=standin runs every CUDA code path on the strict CuPy stand-in (NumPy underneath): the `gpu`
# tests then run on a machine without a GPU, as CI does with `AG_CUDA=standin python -m pytest -m gpu`.
_CUDA_MODE = os.environ.get("AG_CUDA", "")
_CUDA_DEVICE = os.environ.get("AG_CUDA_DEVICE", "cuda")      # the GPU the `cuda` tests run on
if _CUDA_MODE == "standin":
    from autograd_gpu.testing import cupy_standin
    cupy_standin.install()
elif _CUDA_MODE not in ("", "real"):
    raise pytest.UsageError(f"AG_CUDA: expected 'standin' or 'real' (or unset), got {_CUDA_MODE!r}")


def pytest_report_header(config):
    from autograd_gpu.backends import cupy_backend
    if cupy_backend.simulated():
        from autograd_gpu.testing import cupy_standin
        return (f"cuda: simulated by the CuPy stand-in ({cupy_standin.N_DEVICES} devices, "
                f"CuPy {cupy_standin.CUPY_VERSION}'s API)")
    return f"cuda: {'available' if ag.cuda.is_available() else 'not available (gpu tests skip)'}"


def _cuda_param():
    reason = None
    try:
        if not ag.cuda.is_available():
            reason = "CuPy or a CUDA GPU is missing"
    except Exception as e:  # a broken CUDA install must skip, not error
        reason = f"CUDA unusable: {e}"
    marks = [pytest.mark.gpu] + ([pytest.mark.skip(reason=reason)] if reason else [])
    return pytest.param(_CUDA_DEVICE, marks=marks, id="cuda")


DEVICES = [pytest.param("cpu", id="cpu"), _cuda_param()]


# -- the second GPU runs what depends on the GPU's index, not the whole suite again --------------------
# `AG_CUDA=standin AG_CUDA_DEVICE=cuda:1 python -m pytest -m gpu` (README, .ci/run) runs after the same
# command on GPU 0. What it can find that the GPU 0 run cannot is code whose behaviour depends on the
# index: on a GPU other than 0 the backend has a `context` (backends/cupy_backend.py), so Function.apply
# enters the device, the engine sums gradients and in-place updates go through `backend.call`, backward
# never takes Function.of's array shortcut, the elementwise fast path for Python numbers is skipped, the
# CUDA fuser launches its kernels and graphs inside the device, and anything naming "cuda" (= cuda:0)
# instead of its input's device lands on the wrong GPU, which raises. So on that GPU run:
# - every test taking the `device` fixture: its device is now cuda:1 (and cuda:1 is current), so every
#   op, layer, optimizer, transform and compiled program it touches runs through the paths above;
# - except the op table's repeats: per op (an OpInfo test id) one test, its gradcheck (forward and
#   backward of the op on that GPU, in float64), or its first dtype's forward when it has no gradient.
#   The forward in its other dtypes and the gradgradcheck add nothing index-dependent: dtype does not
#   touch device handling, and on a GPU other than 0 the first backward already goes through
#   Function.apply for every op it calls, as the recorded double backward does (test_ops.py runs them all
#   on GPU 0; test_compile.py's op table has one test per op and keeps it);
# - every test marked `device_index`: it names GPU indices, mixes devices (cuda:1 while cuda:0 is
#   current, CPU with GPU, the compiled program on the second GPU) or follows AG_CUDA_DEVICE itself
#   (test_no_sync.py). Those that name their GPUs run the same body as on GPU 0, now after the rest of
#   the suite has left its state (backends, caches, memory pools, random states) on cuda:1;
# - no other `gpu` test: it names "cuda" itself (the CUDA fuser's own tests, the CUDA benchmarks, the
#   MPI/NCCL jobs on the stand-in, whose ranks use "cuda" whatever AG_CUDA_DEVICE says, the op table's
#   CUDA-equals-CPU test), so it would run the very same body on the very same GPU as the GPU 0 run.
# `--all-gpu-tests` runs every selected test on that GPU instead.
_CUDA_INDEX = ag.device(_CUDA_DEVICE).index if _CUDA_DEVICE.startswith("cuda") else 0
_OP_TABLE_ON_ANOTHER_GPU = ("test_gradcheck", "test_forward_matches_numpy")     # by preference, see above


def pytest_addoption(parser):
    parser.addoption("--all-gpu-tests", action="store_true",
                     help="with AG_CUDA_DEVICE=cuda:N (N > 0), run every selected test on that GPU, not "
                          "only those whose behaviour depends on the GPU index (tests/conftest.py)")


def _depends_on_the_gpu_index(items):
    """The items the second GPU's run keeps (the rule above)."""
    keep, op_table = set(), collections.defaultdict(list)
    for item in items:
        if item.get_closest_marker("gpu") is None or item.get_closest_marker("device_index") is not None:
            keep.add(item)
        elif "device" in getattr(item, "fixturenames", ()):
            info = getattr(getattr(item, "callspec", None), "params", {}).get("info")
            if getattr(info, "name", None) is None:
                keep.add(item)
            else:
                op_table[(item.path, info.name)].append(item)
    for group in op_table.values():
        chosen = group
        for name in _OP_TABLE_ON_ANOTHER_GPU:       # a renamed op-table test keeps all its tests here
            named = [item for item in group if item.originalname == name]
            if named:
                chosen = named[:1]
                break
        keep.update(chosen)
    return keep


def pytest_collection_modifyitems(config, items):
    if _CUDA_INDEX == 0 or config.getoption("--all-gpu-tests"):
        return
    keep = _depends_on_the_gpu_index(items)
    config.hook.pytest_deselected(items=[item for item in items if item not in keep])
    items[:] = [item for item in items if item in keep]


# -- skips and expected failures: one line per reason, not one per test ------------------------------
def pytest_terminal_summary(terminalreporter):
    """Each distinct skip (and xfail) reason once, with its count and where (pyproject's -r leaves out
    the per-test lines)."""
    counts, where, totals = collections.Counter(), collections.defaultdict(set), {}
    for kind in ("skipped", "xfailed"):
        reports = terminalreporter.stats.get(kind, ())
        if reports:
            totals[kind] = len(reports)
        for rep in reports:
            if kind == "xfailed":
                reason = f"xfail: {rep.wasxfail}" if rep.wasxfail else "xfail"
            elif isinstance(rep.longrepr, tuple):
                reason = rep.longrepr[2].removeprefix("Skipped: ")
            else:
                reason = str(rep.longrepr)
            counts[reason] += 1
            where[reason].add(os.path.basename(rep.nodeid.split("::")[0]))
    if not counts:
        return
    terminalreporter.write_sep("-", " and ".join(f"{n} {kind}" for kind, n in totals.items()) + ", by reason")
    for reason, n in counts.most_common():
        files = sorted(where[reason])
        at = ", ".join(files[:3]) + (f" and {len(files) - 3} more files" if len(files) > 3 else "")
        terminalreporter.write_line(f"{n:6d}  {reason}  ({at})")


@pytest.fixture(params=DEVICES)
def device(request):
    if request.param.startswith("cuda:"):      # AG_CUDA_DEVICE=cuda:1: the same tests on another GPU
        ag.cuda.set_device(request.param)
    return request.param


@pytest.fixture
def standin():
    """The CuPy stand-in module (autograd_gpu.testing.cupy_standin), for tests that read its transfer and
    launch logs; skips without CUDA or on a real GPU (whose counts come from elsewhere)."""
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs these on the CuPy stand-in)")
    from autograd_gpu.backends import cupy_backend
    if not cupy_backend.simulated():
        pytest.skip("counts transfers and launches: the CuPy stand-in's logs (AG_CUDA=standin)")
    from autograd_gpu.testing import cupy_standin
    return cupy_standin


@pytest.fixture(autouse=True)
def _restore_global_state():
    yield
    ag.set_default_dtype(ag.float32)
    ag.set_default_device("cpu")
    ag.cuda.set_sync_debug_mode("default")
    if _CUDA_DEVICE.startswith("cuda:"):
        ag.cuda.set_device(0)
    from autograd_gpu.backends import _backends
    for b in _backends.values():        # a failed device-side check must not surface in the next test
        b.discard_checks()
