"""Regenerate autograd_gpu/data/datasets/digits.npz, the 8x8 handwritten digits shipped with the package.

Source: the "Optical Recognition of Handwritten Digits" data set of the UCI Machine Learning Repository
(E. Alpaydin, C. Kaynak, 1998; https://archive.ics.uci.edu/dataset/80, licensed CC BY 4.0), in the copy
scikit-learn ships as sklearn/datasets/data/digits.csv.gz (the 1,797-image test set; used by
sklearn.datasets.load_digits). Each CSV row holds 64 pixel counts in 0..16 (row-major 8x8) and the label.

Steps (scikit-learn is only downloaded, never installed):
    pip download scikit-learn --no-deps -d /tmp/skl         # or pass --wheel to an existing wheel
    python tools/make_digits.py --wheel /tmp/skl/scikit_learn-*.whl

The .npz holds: images uint8 (1797, 8, 8), labels uint8 (1797,), is_test bool (1797,) (a fixed split of
360 test / 1,437 train images drawn once with numpy.random.default_rng(0).permutation; stored so that it
never depends on NumPy's generator streams), and source, a provenance string. Written with
np.savez_compressed; loads with allow_pickle=False. Generated from scikit-learn 1.9.1.
"""
import argparse
import glob
import gzip
import io
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

CSV = "sklearn/datasets/data/digits.csv.gz"
OUT = os.path.join(os.path.dirname(__file__), "..", "autograd_gpu", "data", "datasets", "digits.npz")
N_TEST = 360
SOURCE = ("UCI ML Optical Recognition of Handwritten Digits (Alpaydin & Kaynak 1998), CC BY 4.0, "
          "https://archive.ics.uci.edu/dataset/80; copied from scikit-learn's " + CSV)


def fetch_wheel(dest):
    """Download the scikit-learn wheel (no dependencies, not installed) into dest and return its path."""
    subprocess.run([sys.executable, "-m", "pip", "download", "scikit-learn", "--no-deps", "-d", dest], check=True)
    return sorted(glob.glob(os.path.join(dest, "scikit_learn-*.whl")))[-1]


def read_digits(wheel):
    """(images uint8 (N, 8, 8), labels uint8 (N,)) from the CSV inside the wheel."""
    with zipfile.ZipFile(wheel) as z:
        table = np.loadtxt(io.BytesIO(gzip.decompress(z.read(CSV))), delimiter=",", dtype=np.int64)
    if table.shape != (1797, 65) or table[:, :64].min() < 0 or table[:, :64].max() > 16:
        raise SystemExit(f"unexpected digits table: shape {table.shape}")
    return table[:, :64].reshape(-1, 8, 8).astype(np.uint8), table[:, 64].astype(np.uint8)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", help="a scikit-learn wheel already downloaded (default: pip download one)")
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        images, labels = read_digits(args.wheel or fetch_wheel(tmp))
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[np.random.default_rng(0).permutation(len(labels))[:N_TEST]] = True
    np.savez_compressed(args.out, images=images, labels=labels, is_test=is_test, source=np.array(SOURCE))
    print(f"wrote {os.path.normpath(args.out)}: {len(labels)} images, {is_test.sum()} test, "
          f"{os.path.getsize(args.out)} bytes")


if __name__ == "__main__":
    main()
