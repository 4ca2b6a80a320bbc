"""The benchmarks that look closer at one thing (benchmarks/mlp_floor.py, cuda_probe.py, eager_profile.py) run
end to end in their tiny mode, so they cannot rot."""
import pytest

import autograd_gpu as ag


def test_mlp_floor_times_the_floor_the_compiled_step_and_pytorch():
    pytest.importorskip("torch")
    from autograd_gpu.backends import mkl_blas
    from benchmarks import mlp_floor
    if not mkl_blas.available():
        pytest.skip("the floor calls MKL: pip install mkl")
    got = mlp_floor.main(["--tiny", "--repeats", "6"])     # checks the floor's gradients against PyTorch's too
    assert {"floor", "compiled", "torch"} <= set(got) and all(med > 0 for med, _, _ in got.values())


@pytest.mark.gpu
def test_cuda_probe_runs_every_section(capsys):
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the stand-in)")
    from benchmarks import cuda_probe
    cuda_probe.main(["--tiny", "--only", *cuda_probe.SECTIONS])
    out = capsys.readouterr().out
    assert "elementwise_4m: stats" in out and "no_graph" in out and "device ms: compiled step" in out
    assert "cudaMemcpy (copyto)" in out and "profile of elementwise_4m compiled" in out
    assert "raised" not in out
    assert "launch cost on 1024 float32" in out and "ours: x + y (no_grad)" in out


@pytest.mark.gpu
def test_eager_profile_times_and_profiles_each_step(capsys):
    if not ag.cuda.is_available():
        pytest.skip("CuPy or a CUDA GPU is missing (AG_CUDA=standin runs this on the stand-in)")
    from benchmarks import eager_profile
    eager_profile.main(["--scale", "tiny", "--steps", "2", "--top", "5", "--only", "mlp_step", "cnn_step"])
    out = capsys.readouterr().out
    assert "== mlp_step:" in out and "== cnn_step:" in out and "calls/step" in out
    assert "matmul with out=" in out
