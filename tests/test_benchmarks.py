"""The benchmark suite runs end to end in its tiny mode, so it cannot rot."""
import json

import numpy as np
import pytest

from benchmarks.__main__ import main


def test_benchmarks_tiny_run_writes_json_table_and_plots(tmp_path):
    pytest.importorskip("matplotlib")
    results = main(["--tiny", "--device", "cpu", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "benchmarks.json").read_text())
    assert {r["workload"] for r in data["rows"]} == {"op_overhead", "mlp_step", "mlp_adam_step", "mlp_sub_step", "cnn_step", "elementwise_4m", "moons_step",
                                                       "matmul_1024", "deep_chain",
                                                       "transformer_step", "lstm_step", "per_example_grads", "unet_step"}
    for r in data["rows"]:
        assert r["ours"]["median"] > 0 and r["ours"]["min"] <= r["ours"]["median"] <= r["ours"]["max"]
    assert data["sweep"] and data["machine"]["cores"] >= 1
    table = (tmp_path / "benchmarks.md").read_text()
    assert "| op_overhead | cpu |" in table and "ours / PyTorch" in table and "compiled / PyTorch" in table
    assert all(r["compiled"]["median"] > 0 for r in data["rows"] if r["workload"] in
               ("op_overhead", "elementwise_4m", "moons_step", "mlp_step", "cnn_step"))
    for name in ("time_by_device.png", "ours_vs_baselines.png", "speedup_vs_size.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert results["scale"] == "tiny"


def test_distributed_benchmarks_tiny_run(tmp_path):
    from benchmarks import distributed
    if not distributed.available():
        pytest.skip('needs mpi4py and mpiexec: pip install -e ".[distributed]"')
    results = main(["--tiny", "--only", "distributed", "--out", str(tmp_path)])
    d = results["distributed"]
    assert d["allreduce"] and all(r["ours_us"] > 0 and r["mpi4py_us"] > 0 for r in d["allreduce"])
    assert d["training"]["one_rank"]["ranks"] == 1 and d["training"]["two_ranks"]["ranks"] == 2
    assert "ours / mpi4py" in (tmp_path / "benchmarks.md").read_text()


@pytest.mark.gpu
def test_cuda_workloads_with_the_compiled_column_run_tiny(tmp_path):
    """The CUDA rows (compiled = generated kernels + CUDA graph) and the copy-bandwidth baseline of
    elementwise_4m; `AG_CUDA=standin` runs them on the CuPy stand-in."""
    import autograd_gpu as ag
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the stand-in)")
    pytest.importorskip("matplotlib")
    main(["--tiny", "--device", "cuda", "--only", "elementwise_4m", "mlp_step", "--out", str(tmp_path)])
    rows = {r["workload"]: r for r in json.loads((tmp_path / "benchmarks.json").read_text())["rows"]}
    assert rows["mlp_step"]["compiled"]["median"] > 0
    e = rows["elementwise_4m"]
    assert e["copy_gb_per_s"] > 0 and e["compiled_fraction_of_copy"] > 0
    from benchmarks import launches
    if launches.available():              # the launches/step column, counted on the stand-in
        assert rows["mlp_step"]["launches"] > 0 and "launches/step" in (tmp_path / "benchmarks.md").read_text()


@pytest.mark.gpu
def test_launches_only_counts_the_issue_steps_without_timing(tmp_path):
    from benchmarks import launches
    if not launches.available():
        pytest.skip("launch counts need the CuPy stand-in (AG_CUDA=standin)")
    logs = main(["--tiny", "--device", "cuda", "--launches-only", "--only", "op_chain", "mlp_step",
                 "--out", str(tmp_path)])
    assert logs["op_chain_forward"].launches == logs["op_chain_ops"] + 1      # one per op, and the sum
    assert logs["mlp_step"].launches > 0
    assert "| mlp_step |" in (tmp_path / "launches.md").read_text()


def test_mlp_sub_step_variants_do_the_same_arithmetic():
    """The eager `p.sub_(p.grad * lr)` step, the hand-written NumPy step and PyTorch's end with the same
    weights after a few steps, so the benchmark compares like with like."""
    from benchmarks.workloads import mlp_sub_step
    steps, _ = mlp_sub_step("cpu", "tiny")
    for _ in range(3):
        for f in steps.values():
            f()
    ours = steps["ours"].params()
    for name in [k for k in steps if k != "ours"]:
        theirs = steps[name].params()
        assert len(theirs) == len(ours)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=name)
    assert any(not np.allclose(a, b) for a, b in zip(ours, mlp_sub_step("cpu", "tiny")[0]["ours"].params()))


def test_unet_step_is_the_same_network_as_pytorchs():
    """unet_step's PyTorch variant starts from our weights and, two Adam steps later, has the same ones:
    the benchmark times the same arithmetic (ConvTranspose2d, GroupNorm, interpolate, reflect pad)."""
    pytest.importorskip("torch")
    from benchmarks.unet_bench import unet_step
    steps, meta = unet_step("cpu", "tiny")
    start = [a.copy() for a in steps["ours"].params()]     # the live arrays: Adam updates them in place
    for _ in range(2):
        steps["ours"]()
        steps["torch"]()
    ours, theirs = steps["ours"].params(), steps["torch"].params()
    assert len(ours) == len(theirs) == 44 and "U-Net" in meta["what"]
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    assert all(not np.allclose(a, b) for a, b in zip(start, ours))        # every parameter moved


@pytest.mark.gpu
def test_unet_step_runs_on_cuda(tmp_path):
    import autograd_gpu as ag
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the stand-in)")
    pytest.importorskip("matplotlib")
    main(["--tiny", "--device", "cuda", "--only", "unet_step", "--out", str(tmp_path)])
    row, = json.loads((tmp_path / "benchmarks.json").read_text())["rows"]
    assert row["workload"] == "unet_step" and row["device"] == "cuda" and row["ours"]["median"] > 0
