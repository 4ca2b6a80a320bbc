#!/usr/bin/env bash
# Build the sdist and, from it, the wheel; check what each carries; install the wheel alone into a fresh
# virtualenv outside the checkout and run tools/wheel_smoke.py and the digits example there.
#   tools/check_wheel.sh [PYTHON]      (PYTHON: the interpreter with `build` installed; default python)
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
python="${1:-python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$checkout"
"$python" -m build --outdir "$work/dist" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
sdist=("$work"/dist/*.tar.gz)
wheel=("$work"/dist/*.whl)
"$python" - "${sdist[0]}" "${wheel[0]}" <<'EOF'
import sys, tarfile, zipfile
sdist, wheel = sys.argv[1:]
in_sdist = {n.split("/", 1)[1] for n in tarfile.open(sdist).getnames() if "/" in n}
in_wheel = set(zipfile.ZipFile(wheel).namelist())
missing = [f for f in ("LICENSE", "CHANGELOG.md", "autograd_gpu/py.typed", "autograd_gpu/testing/cupy_standin/cupy_api.json",
                       "examples/train_mlp.py", "docs/api.md", "docs/ops.md", "tests/conftest.py", "tools/gen_op_docs.py",
                       "benchmarks/__main__.py") if f not in in_sdist]
missing += [f"wheel: {f}" for f in ("autograd_gpu/py.typed", "autograd_gpu/testing/cupy_standin/cupy_api.json",
                                   "autograd_gpu/data/datasets/digits.npz") if f not in in_wheel]
if not any(n.endswith("LICENSE") for n in in_wheel):
    missing.append("wheel: LICENSE")
if missing:
    sys.exit(f"missing from the sdist/wheel: {missing}")
print(f"sdist: {len(in_sdist)} files, wheel: {len(in_wheel)} files; package data and LICENSE present")
EOF
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "${wheel[0]}"
cp -r "$checkout/examples" "$work/examples"            # a copy: its sys.path entry finds no source tree
cd "$work"
"$work/venv/bin/python" "$checkout/tools/wheel_smoke.py" --checkout "$checkout"
MPLBACKEND=Agg "$work/venv/bin/python" examples/train_mlp.py --smoke --out "$work/mlp.png"
echo "wheel check passed: $(basename "${wheel[0]}") in a fresh virtualenv ($(du -sm "$work/venv" | cut -f1) MB)"
