"""Turn benchmark results into a Markdown table and matplotlib plots."""
from pathlib import Path


def _fmt(v):
    return "-" if v is None else f"{v:.3g}" if v < 100 else f"{v:.0f}"


def describe(row):
    parts = [f"{row['workload']:>15} {row['device']:>6}: ours {_fmt(row['ours']['median'])} {row['unit']}"]
    for base in ("numpy", "torch"):
        if base in row:
            parts.append(f"{base} {_fmt(row[base]['median'])} (ratio {row['ours']['median'] / row[base]['median']:.2f})")
    if "compiled" in row:
        c = row["compiled"]["median"]
        parts.append(f"compiled {_fmt(c)}" + (f" (ratio to torch {c / row['torch']['median']:.2f})" if "torch" in row else ""))
    if "model_compiled" in row:        # ag.compile(model), loss/backward/step outside
        c = row["model_compiled"]["median"]
        parts.append(f"model compiled, backward outside {_fmt(c)}"
                     + (f" (ratio to torch {c / row['torch']['median']:.2f})" if "torch" in row else ""))
    if row.get("launches") is not None:
        parts.append(f"{row['launches']} launches/step"
                     + (f" (compiled {row['compiled_launches']})" if "compiled_launches" in row else ""))
    if "compiled_fraction_of_copy" in row:
        parts.append(f"compiled on the GPU at {row['compiled_device_gb_per_s']:.0f} GB/s, "
                     f"{row['compiled_fraction_of_copy']:.0%} of a copy's {row['copy_gb_per_s']:.0f} GB/s")
    return ", ".join(parts)


def markdown(results):
    m = results["machine"]
    lines = [f"Measured on {m['cpu']} ({m['cores']} cores)" + (f", GPU {m['gpu']}" if m.get("gpu") else "")
             + f"; Python {m['python']}, NumPy {m['numpy']}" + (f", CuPy {m['cupy']}" if m.get("cupy") else "")
             + (f", PyTorch {m['torch']}" if m.get("torch") else "")
             + (f"; our CPU products: {m['cpu_blas']}" if m.get("cpu_blas") else "") + f"; scale: {results['scale']}.", "",
             "| workload | device | unit | ours (median [min-max]) | by hand (NumPy/CuPy) | ours / by hand | PyTorch | ours / PyTorch | compiled | compiled / PyTorch | model compiled, backward outside | launches/step |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        o = r["ours"]
        cells = [r["workload"], r["device"], r["unit"], f"{_fmt(o['median'])} [{_fmt(o['min'])}-{_fmt(o['max'])}]"]
        for base in ("numpy", "torch"):
            b = r.get(base)
            cells += [_fmt(b["median"]), f"{o['median'] / b['median']:.2f}"] if b else ["-", "-"]
        c, t = r.get("compiled"), r.get("torch")
        cells += [_fmt(c["median"]) if c else "-", f"{c['median'] / t['median']:.2f}" if c and t else "-"]
        mc = r.get("model_compiled")
        cells.append("-" if mc is None else _fmt(mc["median"]) + (f" ({mc['median'] / t['median']:.2f}x PyTorch)" if t else ""))
        # kernel launches of one eager step, counted on the CuPy stand-in (empty on the CPU and on real CuPy)
        n = r.get("launches")
        cells.append("-" if n is None else f"{n}" + (f" (compiled {r['compiled_launches']})"
                                                      if "compiled_launches" in r else ""))
        lines.append("| " + " | ".join(cells) + " |")
    extras = [(r["workload"], r["device"], k, r[k]) for r in results["rows"]
              for k in ("ours_tflops", "ours_gb_per_s", "ours_peak_mb", "compiled_gb_per_s", "compiled_device_gb_per_s",
                        "copy_gb_per_s", "compiled_fraction_of_copy") if k in r]
    if extras:
        # gb_per_s: from the synchronised step time (host included); device_gb_per_s and the copy: the GPU's
        # time, CUDA events around one call behind a busy GPU (benchmarks/workloads.py, device_ms)
        lines += ["", "| workload | device | figure | value |", "|---|---|---|---|"]
        lines += [f"| {w} | {d} | {k.replace('ours_', '')} | {v:.3g} |" for w, d, k, v in extras]
    if results["sweep"]:
        lines += ["", "MLP step time (ms) as the hidden width grows:", "",
                  "| width | " + " | ".join(sorted({s['device'] for s in results['sweep']})) + " |",
                  "|---|" + "---|" * len({s['device'] for s in results['sweep']})]
        for w in sorted({s["width"] for s in results["sweep"]}):
            row = {s["device"]: s["ours"] for s in results["sweep"] if s["width"] == w}
            lines.append(f"| {w} | " + " | ".join(_fmt(row.get(d)) for d in sorted(row)) + " |")
    if results.get("distributed"):
        from .distributed import markdown as distributed_markdown
        lines.append(distributed_markdown(results["distributed"]))
    return "\n".join(lines) + "\n"


def plots(results, out):
    """CPU vs GPU time per workload, speedup vs size, ours vs PyTorch; returns the files written."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots (pip install matplotlib)")
        return []
    out = Path(out)
    written = []
    rows = results["rows"]
    devices = sorted({r["device"] for r in rows})
    names = [n for n in dict.fromkeys(r["workload"] for r in rows)]

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(devices))
    for i, d in enumerate(devices):
        vals = [next((r["ours"]["median"] for r in rows if r["workload"] == n and r["device"] == d), 0) for n in names]
        ax.bar([k + i * width for k in range(len(names))], vals, width, label=d)
    ax.set_xticks([k + width * (len(devices) - 1) / 2 for k in range(len(names))])
    ax.set_xticklabels([f"{n}\n({next(r['unit'] for r in rows if r['workload'] == n)})" for n in names], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("time (log scale)")
    ax.set_title("autograd_gpu: time per workload and device")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "time_by_device.png", dpi=110)
    plt.close(fig)
    written.append(out / "time_by_device.png")

    fig, ax = plt.subplots(figsize=(8, 4))
    for base, marker in (("torch", "o"), ("numpy", "s")):
        for d in devices:
            pts = [(n, r["ours"]["median"] / r[base]["median"]) for n in names for r in rows
                   if r["workload"] == n and r["device"] == d and base in r]
            if pts:
                ax.plot([names.index(n) for n, _ in pts], [v for _, v in pts], marker=marker, linestyle="",
                        label=f"ours / {'PyTorch' if base == 'torch' else 'by hand'} ({d})")
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, fontsize=7)
    ax.set_ylabel("time ratio (lower is better)")
    ax.set_title("autograd_gpu against its baselines")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "ours_vs_baselines.png", dpi=110)
    plt.close(fig)
    written.append(out / "ours_vs_baselines.png")

    sweep = results["sweep"]
    if sweep:
        fig, ax = plt.subplots(figsize=(6, 4))
        for d in sorted({s["device"] for s in sweep}):
            pts = sorted((s["width"], s["ours"]) for s in sweep if s["device"] == d)
            ax.plot([w for w, _ in pts], [t for _, t in pts], marker="o", label=f"ours on {d}")
        cpu = {s["width"]: s["ours"] for s in sweep if s["device"] == "cpu"}
        gpu = {s["width"]: s["ours"] for s in sweep if s["device"].startswith("cuda")}
        if cpu and gpu:
            ax2 = ax.twinx()
            ws = sorted(set(cpu) & set(gpu))
            ax2.plot(ws, [cpu[w] / gpu[w] for w in ws], color="black", linestyle="--", label="GPU speedup")
            ax2.set_ylabel("CPU time / GPU time")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("MLP hidden width")
        ax.set_ylabel("ms per training step")
        ax.set_title("Where the GPU overtakes the CPU" if cpu and gpu else "MLP step time as the width grows")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "speedup_vs_size.png", dpi=110)
        plt.close(fig)
        written.append(out / "speedup_vs_size.png")
    return written
