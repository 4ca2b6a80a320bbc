"""python -m benchmarks --device cpu cuda --out results/ [--quick] [--only mlp_step ...] [--launches-only]

Runs every workload on every requested device next to its baselines (hand-written NumPy/CuPy, and
PyTorch when importable), then writes results/benchmarks.json (every figure plus the machine),
results/benchmarks.md (the table) and PNG plots. See benchmarks/README.md for how to read them.
On CUDA run on the CuPy stand-in (``AG_CUDA=standin``) each row also has the kernel launches of one
step ("launches/step"); ``--launches-only`` counts them without timing anything (benchmarks/launches.py)."""
import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import report, distributed, launches  # noqa: E402
from benchmarks.timing import measure, sync_fn, machine, cupy_module  # noqa: E402
from benchmarks.workloads import WORKLOADS, COMPILED, mlp_step, peak_memory, device_ms  # noqa: E402

REPEATS = {"full": 30, "quick": 9, "tiny": 1}
SWEEP = {"full": (1, 2, 4, 8, 16, 32, 64), "quick": (1, 4, 16), "tiny": (1, 2)}
SWEEP_BASE = 32          # the MLP hidden width is SWEEP_BASE * k


# the training steps also timed in torch.compile's habit: the model compiled, loss, backward and optimizer
# step outside (ag.compile(model); outputs that require grad get a compiled backward): "model_compiled"
MODEL_COMPILED = ("mlp_step", "cnn_step")


def model_compiled_step(ours):
    """``ours`` (``opt.zero_grad(); F.cross_entropy(model(x), y).backward(); opt.step()``) with the model
    compiled and everything else outside: the same model, optimizer and batch, read from its closure."""
    import autograd_gpu as ag
    import autograd_gpu.nn.functional as F
    cells = dict(zip(ours.__code__.co_freevars, (c.cell_contents for c in ours.__closure__)))
    model, opt, x, y = (cells[k] for k in ("model", "opt", "x", "y"))
    cmodel = ag.compile(model)

    def step():
        opt.zero_grad()
        F.cross_entropy(cmodel(x), y).backward()
        opt.step()
    return step


def run_workload(name, device, scale, log):
    steps, meta = WORKLOADS[name](device, scale)
    if name in COMPILED:                 # the same step under ag.compile (traced in the warm-up)
        import autograd_gpu as ag
        steps["compiled"] = ag.compile(steps["ours"])
    if name in MODEL_COMPILED:
        steps["model_compiled"] = model_compiled_step(steps["ours"])
    libs = {"ours": "ours", "compiled": "ours", "model_compiled": "ours",
            "numpy": "cupy" if device.startswith("cuda") else "numpy", "torch": "torch"}
    timed = {k: (f, sync_fn(device, libs[k])) for k, f in steps.items()}
    reps = REPEATS[scale] if name != "deep_chain" else max(1, REPEATS[scale] // 5)
    deep = name == "deep_chain"
    res = measure(timed, reps, warmup=1 if deep else 3, rounds=1 if deep else 3, block_warmup=0 if deep else 0.25)
    scale_to = 1e6 / meta["per"] if meta["unit"] == "us/op" else 1e3
    row = {"workload": name, "device": device, "what": meta["what"], "unit": meta["unit"]}
    for k, (med, lo, hi) in res.items():
        row[k] = {"median": med * scale_to, "min": lo * scale_to, "max": hi * scale_to}
    if "flops" in meta:
        row["ours_tflops"] = meta["flops"] / res["ours"][0] / 1e12
    if "elements" in meta:               # bytes a perfect fused kernel would move: read x, write grad
        row["ours_gb_per_s"] = meta["elements"] * 4 * 2 / res["ours"][0] / 1e9
        if "compiled" in res:
            row["compiled_gb_per_s"] = meta["elements"] * 4 * 2 / res["compiled"][0] / 1e9
    if meta.get("copy_gb_per_s"):        # CUDA: the measured copy bandwidth, and the compiled step against it
        row["copy_gb_per_s"] = meta["copy_gb_per_s"]
        if "compiled" in steps:          # the GPU's time for the compiled step, measured as the copy is
            ms = device_ms(cupy_module(), steps["compiled"])
            if ms:
                row["compiled_device_gb_per_s"] = meta["elements"] * 4 * 2 / (ms * 1e-3) / 1e9
                row["compiled_fraction_of_copy"] = row["compiled_device_gb_per_s"] / meta["copy_gb_per_s"]
    if name == "deep_chain" and device == "cpu":
        row["ours_peak_mb"] = peak_memory(steps["ours"]) / 1e6
    if str(device).startswith("cuda") and launches.available():     # counted on the stand-in only
        row["launches"] = launches.count(steps["ours"], warmup=0).launches
        if "compiled" in steps:
            row["compiled_launches"] = launches.count(steps["compiled"], warmup=0).launches
    log(report.describe(row))
    return row


def run_sweep(device, scale, log):
    rows = []
    for k in SWEEP[scale]:
        width = SWEEP_BASE * k
        steps, meta = mlp_step(device, "full" if scale != "tiny" else "tiny", width=width if scale != "tiny" else None)
        libs = {"ours": "ours", "numpy": "cupy" if device.startswith("cuda") else "numpy", "torch": "torch"}
        res = measure({n: (f, sync_fn(device, libs[n])) for n, f in steps.items()}, REPEATS[scale])
        rows.append({"device": device, "k": k, "width": width,
                     **{n: v[0] * 1e3 for n, v in res.items()}})
        log(f"  sweep {device} width {width}: ours {rows[-1]['ours']:.3f} ms")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", nargs="+", default=["cpu"], help="devices to run on: cpu, cuda, cuda:1 ...")
    p.add_argument("--out", default="results", help="folder for benchmarks.json, benchmarks.md and plots")
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats (under a minute on 2 CPU cores)")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)      # for the test suite
    p.add_argument("--only", nargs="*", choices=sorted(WORKLOADS) + ["sweep", "distributed", "op_chain"],
                   help="run only these workloads (distributed: all-reduce and DDP jobs under mpiexec)")
    p.add_argument("--launches-only", action="store_true",
                   help="on cuda with AG_CUDA=standin: count kernel launches per step (the issue's steps, or "
                        "--only's), no timing; writes launches.md")
    args = p.parse_args(argv)
    scale = "tiny" if args.tiny else "quick" if args.quick else "full"
    launches.use_standin_if_asked()
    if args.launches_only:
        return launches_only(args, scale)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(WORKLOADS) + ["sweep"] + (["distributed"] if scale == "full" else [])
    t0 = time.time()
    results = {"machine": machine(args.device), "scale": scale, "rows": [], "sweep": []}
    if "distributed" in names:          # CPU over MPI, whatever --device says
        results["distributed"] = distributed.run(scale, print)
    for device in args.device:
        for name in names:
            if name == "distributed":
                continue
            if name == "sweep":
                results["sweep"] += run_sweep(device, scale, print)
            elif name == "op_chain":           # --launches-only's name for the per-op workload
                results["rows"].append(run_workload("op_overhead", device, scale, print))
            else:
                results["rows"].append(run_workload(name, device, scale, print))
    results["seconds"] = round(time.time() - t0, 1)
    (out / "benchmarks.json").write_text(json.dumps(results, indent=2))
    (out / "benchmarks.md").write_text(report.markdown(results))
    written = report.plots(results, out) if results["rows"] else []     # the plots are of workloads
    print(f"wrote {out / 'benchmarks.json'}, {out / 'benchmarks.md'}" + "".join(f", {w}" for w in written)
          + f" in {results['seconds']} s")
    return results


def launches_only(args, scale):
    if not launches.available():
        sys.exit("--launches-only counts on the CuPy stand-in: run with AG_CUDA=standin")
    device = next((d for d in args.device if d.startswith("cuda")), "cuda")
    names = [n for n in (args.only or launches.DEFAULT) if n not in ("sweep", "distributed")]
    logs = launches.measure(scale, names, device)
    text = f"Kernel launches per eager step on {device} (CuPy stand-in), scale {scale}:\n\n" + launches.table(logs)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "launches.md").write_text(text)
    return logs


if __name__ == "__main__":
    main()
