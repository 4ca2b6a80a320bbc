"""ag.data: Dataset, TensorDataset, DataLoader, default_collate, toy sets, MNIST (IDX reader and
downloader, tested offline on files the tests write), and the shipped digits."""
import gzip
import hashlib
import io
import os
import urllib.error
import urllib.request
from collections import namedtuple

import numpy as np
import pytest

import autograd_gpu as ag
from autograd_gpu.data import DataLoader, Dataset, TensorDataset, default_collate
from autograd_gpu.data.datasets import MNIST, Digits, load_digits, make_moons, make_spiral, read_idx
from autograd_gpu.data.datasets import digits as digits_module


class Squares(Dataset):
    """A plain map-style dataset: sample i is (i, i * i)."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return ag.tensor([float(i)]), i * i


def _epoch(loader):
    return [tuple(t.tolist() for t in batch) for batch in loader]


# --------------------------------------------------------------------------- TensorDataset
def test_tensor_dataset_indexes_every_tensor(device):
    x = ag.arange(12, device=device).reshape(6, 2)
    y = ag.arange(6, device=device)
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    xi, yi = ds[4]
    assert xi.tolist() == [8, 9] and yi.item() == 4


def test_tensor_dataset_rejects_different_first_dims():
    with pytest.raises(ValueError, match=r"same first dim.*\(3, 2\), \(4,\)"):
        TensorDataset(ag.zeros(3, 2), ag.zeros(4))


def test_tensor_dataset_rejects_non_tensors_and_0d():
    with pytest.raises(TypeError, match="expected Tensors, got list"):
        TensorDataset(ag.zeros(3), [1, 2, 3])
    with pytest.raises(ValueError, match="0-d"):
        TensorDataset(ag.tensor(1.0))
    with pytest.raises(ValueError, match="at least one"):
        TensorDataset()


# --------------------------------------------------------------------------- DataLoader
def test_loader_batches_in_order_with_a_partial_last_batch(device):
    x = ag.arange(10, device=device)
    batches = list(DataLoader(TensorDataset(x, x * 2), batch_size=4))
    assert [b[0].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [b[1].tolist() for b in batches] == [[0, 2, 4, 6], [8, 10, 12, 14], [16, 18]]
    assert all(b[0].device == device for b in batches)


def test_loader_len_with_and_without_drop_last():
    ds = TensorDataset(ag.zeros(10))
    assert len(DataLoader(ds, batch_size=4)) == 3 == len(list(DataLoader(ds, batch_size=4)))
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2 == len(list(DataLoader(ds, batch_size=4, drop_last=True)))
    assert len(DataLoader(ds, batch_size=5, drop_last=True)) == 2
    assert len(DataLoader(ds, batch_size=20, drop_last=True)) == 0 == len(list(DataLoader(ds, batch_size=20, drop_last=True)))
    assert len(DataLoader(ds)) == 10


def test_drop_last_drops_only_the_partial_batch():
    loader = DataLoader(Squares(7), batch_size=3, drop_last=True)
    assert [b[1].tolist() for b in loader] == [[0, 1, 4], [9, 16, 25]]


def test_shuffle_visits_every_sample_once_per_epoch(device):
    x = ag.arange(50, device=device)
    loader = DataLoader(TensorDataset(x), batch_size=8, shuffle=True, generator=0)
    seen = [v for (b,) in loader for v in b.tolist()]
    assert sorted(seen) == list(range(50)) and seen != list(range(50))


def test_shuffle_with_a_seed_is_reproducible_and_differs_between_epochs():
    ds = TensorDataset(ag.arange(20))
    a, b = DataLoader(ds, 5, shuffle=True, generator=7), DataLoader(ds, 5, shuffle=True, generator=7)
    first = _epoch(a)
    assert first == _epoch(b)
    assert _epoch(a) != first                       # the generator advances, as in PyTorch
    other = DataLoader(ds, 5, shuffle=True, generator=np.random.default_rng(7))
    assert _epoch(other) == first                   # a NumPy Generator works the same


def test_shuffle_without_generator_follows_manual_seed():
    ds = TensorDataset(ag.arange(20))
    ag.manual_seed(3)
    first = _epoch(DataLoader(ds, 6, shuffle=True))
    ag.manual_seed(3)
    assert _epoch(DataLoader(ds, 6, shuffle=True)) == first


def test_fast_path_and_per_sample_path_give_the_same_batches():
    x, y = ag.randn(13, 3), ag.arange(13)
    fast = DataLoader(TensorDataset(x, y), 4, shuffle=True, generator=1)
    slow = DataLoader(TensorDataset(x, y), 4, shuffle=True, generator=1, collate_fn=default_collate)
    for (fx, fy), (sx, sy) in zip(fast, slow):
        np.testing.assert_array_equal(fx.numpy(), sx.numpy())
        np.testing.assert_array_equal(fy.numpy(), sy.numpy())


def test_fast_path_gathers_once_per_tensor_and_copies(monkeypatch):
    ds = TensorDataset(ag.arange(8), ag.arange(8))
    monkeypatch.setattr(TensorDataset, "__getitem__", lambda self, i: pytest.fail("per-sample call"))
    monkeypatch.setattr(Dataset, "__getitem__", lambda self, i: pytest.fail("per-sample call"))
    (x, y), = list(DataLoader(ds, batch_size=8))
    x.data[0] = 100
    assert ds.tensors[0].tolist()[0] == 0           # the batch is a copy, not a view
    (x, y), = list(DataLoader(ds, batch_size=8, shuffle=True, generator=0))
    assert x.tolist() == y.tolist() and sorted(x.tolist()) == list(range(8))


def test_subclass_overriding_getitem_is_called_per_sample():
    class Doubled(TensorDataset):
        def __getitem__(self, i):
            return tuple(t[i] * 2 for t in self.tensors)

    (x,), = list(DataLoader(Doubled(ag.arange(3)), batch_size=3))
    assert x.tolist() == [0, 2, 4]


def test_default_collate_stacks_tensors_numbers_and_arrays():
    batch = default_collate([(ag.tensor([1.0, 2.0]), 3, 0.5, np.array([1, 2]), True, "a"),
                             (ag.tensor([3.0, 4.0]), 4, 1.5, np.array([3, 4]), False, "b")])
    t, ints, floats, arrays, bools, strings = batch
    assert isinstance(batch, tuple)
    assert t.shape == (2, 2) and t.dtype == ag.float32
    assert ints.dtype == ag.int64 and ints.tolist() == [3, 4]
    assert floats.dtype == ag.float32 and floats.tolist() == [0.5, 1.5]
    assert arrays.dtype == ag.int64 and arrays.tolist() == [[1, 2], [3, 4]]
    assert bools.dtype == ag.bool_ and strings == ["a", "b"]


def test_default_collate_handles_dicts_lists_and_namedtuples():
    Pair = namedtuple("Pair", "x y")
    samples = [{"image": ag.ones(2, 2) * i, "meta": [i, Pair(i, float(i))]} for i in range(3)]
    batch = default_collate(samples)
    assert set(batch) == {"image", "meta"} and batch["image"].shape == (3, 2, 2)
    ids, pair = batch["meta"]
    assert isinstance(batch["meta"], list) and ids.tolist() == [0, 1, 2]
    assert isinstance(pair, Pair) and pair.y.tolist() == [0.0, 1.0, 2.0]


def test_loader_collates_dict_samples():
    class Records(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": ag.full((3,), float(i)), "label": i % 2}

    batches = list(DataLoader(Records(), batch_size=2))
    assert [b["label"].tolist() for b in batches] == [[0, 1], [0, 1], [0]]
    assert batches[0]["x"].shape == (2, 3)


def test_default_collate_keeps_the_graph_of_tensors_that_require_grad():
    w = ag.ones(2, requires_grad=True)
    default_collate([w * 2, w * 3]).sum().backward()
    assert w.grad.tolist() == [5.0, 5.0]


def test_default_collate_errors_are_clear():
    with pytest.raises(ValueError, match=r"same shape.*\(2,\).*\(3,\)"):
        default_collate([ag.zeros(2), ag.zeros(3)])
    with pytest.raises(ValueError, match="same length"):
        default_collate([(1, 2), (1, 2, 3)])
    with pytest.raises(TypeError, match="cannot batch samples of type object.*collate_fn"):
        default_collate([object(), object()])


def test_custom_collate_fn_receives_the_list_of_samples():
    loader = DataLoader(Squares(5), batch_size=2, collate_fn=lambda samples: [s[1] for s in samples])
    assert list(loader) == [[0, 1], [4, 9], [16]]


def test_loader_argument_errors():
    ds = TensorDataset(ag.zeros(3))
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(TypeError, match="generator must be"):
        DataLoader(ds, shuffle=True, generator="seed")
    with pytest.raises(TypeError, match="expected a dataset"):
        DataLoader(42)


# --------------------------------------------------------------------------- toy data sets
def test_make_moons_shapes_balance_and_seed(device):
    X, y = make_moons(101, noise=0.1, seed=0, device=device)
    assert X.shape == (101, 2) and X.dtype == ag.float32 and y.dtype == ag.int64 and X.device == device
    assert y.tolist().count(0) == 50 and y.tolist().count(1) == 51
    X2, _ = make_moons(101, noise=0.1, seed=0)
    np.testing.assert_array_equal(X.numpy(), X2.numpy())


def test_make_moons_without_noise_lies_on_the_two_half_circles():
    X, y = make_moons(40, seed=1)
    x, lab = X.numpy().astype(np.float64), y.numpy()
    outer, inner = x[lab == 0], x[lab == 1]
    np.testing.assert_allclose(np.hypot(outer[:, 0], outer[:, 1]), 1.0, atol=1e-6)
    np.testing.assert_allclose(np.hypot(inner[:, 0] - 1.0, inner[:, 1] - 0.5), 1.0, atol=1e-6)


def test_make_spiral_shapes_and_balance(device):
    X, y = make_spiral(50, n_classes=4, seed=0, device=device)
    assert X.shape == (200, 2) and X.dtype == ag.float32 and y.dtype == ag.int64
    assert np.bincount(y.numpy()).tolist() == [50] * 4
    assert float(ag.sqrt((X * X).sum(dim=1)).max()) <= 1.0 + 1e-6


def test_toy_sets_follow_manual_seed_and_reject_bad_sizes():
    ag.manual_seed(5)
    a = make_spiral(10)[0].numpy()
    ag.manual_seed(5)
    np.testing.assert_array_equal(a, make_spiral(10)[0].numpy())
    with pytest.raises(ValueError, match="n_samples"):
        make_moons(1)
    with pytest.raises(ValueError, match="noise"):
        make_spiral(10, noise=-1.0)


# --------------------------------------------------------------------------- IDX reader
def _idx_bytes(array, code=0x08):
    header = bytes([0, 0, code, array.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def _write(path, payload, compress):
    path.write_bytes(gzip.compress(payload) if compress else payload)
    return path


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "raw"])
def test_read_idx_reads_uint8_images(tmp_path, compress):
    images = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    path = _write(tmp_path / "images-idx3-ubyte", _idx_bytes(images), compress)
    got = read_idx(path)
    assert got.dtype == np.uint8 and got.shape == (2, 3, 4)
    np.testing.assert_array_equal(got, images)


def test_read_idx_reads_big_endian_int32_and_float64(tmp_path):
    a = np.array([[1, -2, 70000]], dtype=np.int32)
    b = np.array([0.5, -1.25], dtype=np.float64)
    np.testing.assert_array_equal(read_idx(_write(tmp_path / "a", _idx_bytes(a, 0x0C), False)), a)
    np.testing.assert_array_equal(read_idx(_write(tmp_path / "b.gz", _idx_bytes(b, 0x0E), True)), b)


def test_read_idx_wrong_magic_names_the_file(tmp_path):
    path = _write(tmp_path / "foreign.bin", b"\x89PNG\r\n\x1a\n" + bytes(100), False)
    with pytest.raises(ValueError, match=r"foreign\.bin is not an IDX file"):
        read_idx(path)


def test_read_idx_unknown_type_code_names_the_file(tmp_path):
    path = _write(tmp_path / "odd", bytes([0, 0, 0x07, 1]) + (2).to_bytes(4, "big") + b"ab", False)
    with pytest.raises(ValueError, match=r"odd has unknown IDX type code 0x07"):
        read_idx(path)


@pytest.mark.parametrize("compress", [True, False], ids=["gzip", "raw"])
def test_read_idx_truncated_file_is_an_error(tmp_path, compress):
    payload = _idx_bytes(np.zeros((4, 5, 5), dtype=np.uint8))
    path = _write(tmp_path / "short", payload[:-7], compress)
    with pytest.raises(ValueError, match=r"short is truncated: shape \(4, 5, 5\)"):
        read_idx(path)
    with pytest.raises(ValueError, match="header needs"):
        read_idx(_write(tmp_path / "tiny", payload[:9], compress))


def test_read_idx_damaged_gzip_is_an_error(tmp_path):
    data = gzip.compress(_idx_bytes(np.zeros((30, 30), dtype=np.uint8)))
    path = tmp_path / "damaged.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"damaged\.gz is a damaged gzip file"):
        read_idx(path)


# --------------------------------------------------------------------------- MNIST
N_TRAIN, N_TEST = 6, 4


def _mnist_files(rng):
    """The four MNIST file names -> gzipped IDX bytes of a tiny fake MNIST (6 train, 4 test images)."""
    files = {}
    for prefix, n in (("train", N_TRAIN), ("t10k", N_TEST)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        files[f"{prefix}-images-idx3-ubyte.gz"] = gzip.compress(_idx_bytes(images))
        files[f"{prefix}-labels-idx1-ubyte.gz"] = gzip.compress(_idx_bytes(labels))
    return files


@pytest.fixture
def fake_mnist(monkeypatch):
    """Fake MNIST bytes, with MNIST.resources pointing at their MD5s and MNIST.mirrors at fake hosts."""
    files = _mnist_files(np.random.default_rng(0))
    monkeypatch.setattr(MNIST, "resources", [(n, hashlib.md5(b).hexdigest()) for n, b in files.items()])
    monkeypatch.setattr(MNIST, "mirrors", ["https://mirror-a.invalid/mnist/", "https://mirror-b.invalid/mnist"])
    return files


class _Response(io.BytesIO):
    headers = {}                 # no Content-Length, as with a chunked reply

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _fake_urlopen(serve, log):
    """urlopen that logs each URL and answers from serve(url) -> bytes, or raises URLError for None."""
    def urlopen(url, timeout=None):
        log.append(url)
        body = serve(url)
        if body is None:
            raise urllib.error.URLError("no network in tests")
        return _Response(body)
    return urlopen


def test_mnist_reads_files_placed_in_root(tmp_path, fake_mnist, device):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name, body in fake_mnist.items():       # one gzipped, the rest uncompressed: both are read
        if name.startswith("train-images"):
            (raw / name).write_bytes(body)
        else:
            (raw / name[:-3]).write_bytes(gzip.decompress(body))
    train, test = MNIST(tmp_path, device=device), MNIST(tmp_path, train=False, device=device)
    assert len(train) == N_TRAIN and len(test) == N_TEST
    assert train.data.dtype == ag.uint8 and train.data.shape == (N_TRAIN, 28, 28)
    assert train.targets.dtype == ag.int64 and train.data.device == device
    image, label = train[2]
    assert image.shape == (1, 28, 28) and image.dtype == ag.float32
    np.testing.assert_allclose(image.numpy()[0], train.data.numpy()[2] / 255.0, rtol=1e-6)
    assert 0.0 <= float(image.min()) and float(image.max()) <= 1.0
    assert label.item() == train.targets.numpy()[2]


def test_mnist_transform_and_loader(tmp_path, fake_mnist, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _fake_urlopen(lambda url: fake_mnist[url.rsplit("/", 1)[1]], []))
    plain = MNIST(tmp_path, download=True)
    x, y = next(iter(DataLoader(plain, batch_size=4)))
    assert x.shape == (4, 1, 28, 28) and y.tolist() == plain.targets.tolist()[:4]
    flat = MNIST(tmp_path, transform=lambda img: img.reshape(784))
    fx, fy = next(iter(DataLoader(flat, batch_size=4)))
    assert fx.shape == (4, 784) and fy.tolist() == y.tolist()      # per-sample path: 0-d labels stacked
    np.testing.assert_array_equal(fx.numpy(), x.numpy().reshape(4, 784))


def test_mnist_download_writes_verified_files_to_root_mnist_raw(tmp_path, fake_mnist, monkeypatch):
    log = []
    serve = lambda url: None if "mirror-a" in url else fake_mnist[url.rsplit("/", 1)[1]]   # noqa: E731
    monkeypatch.setattr(urllib.request, "urlopen", _fake_urlopen(serve, log))
    ds = MNIST(tmp_path, train=True, download=True)
    raw = tmp_path / "MNIST" / "raw"
    assert sorted(os.listdir(raw)) == sorted(fake_mnist)          # no .part files left behind
    for name, body in fake_mnist.items():
        assert (raw / name).read_bytes() == body
    assert len(ds) == N_TRAIN
    assert log[:2] == ["https://mirror-a.invalid/mnist/train-images-idx3-ubyte.gz",
                       "https://mirror-b.invalid/mnist/train-images-idx3-ubyte.gz"]
    log.clear()
    MNIST(tmp_path, train=False, download=True)                   # verified files are not fetched again
    assert log == []


def test_mnist_download_from_a_file_url(tmp_path, fake_mnist, monkeypatch):
    served = tmp_path / "served"
    served.mkdir()
    for name, body in fake_mnist.items():
        (served / name).write_bytes(body)
    monkeypatch.setattr(MNIST, "mirrors", [served.as_uri() + "/"])
    assert len(MNIST(tmp_path / "root", train=False, download=True)) == N_TEST


def test_mnist_checksum_mismatch_is_an_error(tmp_path, fake_mnist, monkeypatch):
    monkeypatch.setattr(urllib.request, "urlopen", _fake_urlopen(lambda url: b"not the file", []))
    with pytest.raises(RuntimeError, match=r"(?s)train-images-idx3-ubyte\.gz.*MD5 checksum mismatch"):
        MNIST(tmp_path, download=True)
    assert not (tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte.gz").exists()


def test_mnist_offline_download_fails_clearly(tmp_path, fake_mnist, monkeypatch):
    log = []
    monkeypatch.setattr(urllib.request, "urlopen", _fake_urlopen(lambda url: None, log))
    with pytest.raises(RuntimeError, match=r"(?s)from any mirror.*mirror-a.*mirror-b.*offline.*download=False"):
        MNIST(tmp_path, download=True)
    assert len(log) == 2


def test_mnist_missing_files_without_download(tmp_path):
    with pytest.raises(RuntimeError, match=r"train-images-idx3-ubyte\[\.gz\] not found .*download=True"):
        MNIST(tmp_path)


def test_mnist_foreign_file_names_it(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(b"<html>404 Not Found</html>"))
    with pytest.raises(ValueError, match=r"train-images-idx3-ubyte\.gz is not an IDX file"):
        MNIST(tmp_path)


def test_mnist_mismatched_label_count_is_an_error(tmp_path, fake_mnist):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "t10k-images-idx3-ubyte.gz").write_bytes(fake_mnist["t10k-images-idx3-ubyte.gz"])
    (raw / "t10k-labels-idx1-ubyte").write_bytes(_idx_bytes(np.zeros(N_TEST + 1, dtype=np.uint8)))
    with pytest.raises(ValueError, match=r"expected 4 t10k labels"):
        MNIST(tmp_path, train=False)


# --------------------------------------------------------------------------- shipped digits
def test_shipped_digits_file_is_small_and_loads_without_pickle():
    assert os.path.getsize(digits_module.DIGITS_PATH) < 1_000_000
    with np.load(digits_module.DIGITS_PATH, allow_pickle=False) as f:
        assert f["images"].shape == (1797, 8, 8) and f["images"].dtype == np.uint8
        assert f["images"].max() == 16 and f["images"].min() == 0
        assert "CC BY 4.0" in str(f["source"])


def test_load_digits_shapes_labels_and_range(device):
    X, y = load_digits(device=device)
    assert X.shape == (1797, 64) and X.dtype == ag.float32 and y.dtype == ag.int64 and X.device == device
    assert float(X.min()) == 0.0 and float(X.max()) == 1.0
    assert np.bincount(y.numpy()).tolist() == [178, 182, 177, 183, 181, 182, 181, 179, 174, 180]
    Xtr, ytr = load_digits(split="train", flatten=False)
    Xte, yte = load_digits(split="test")
    assert Xtr.shape == (1437, 8, 8) and Xte.shape == (360, 64)
    assert sorted(set(yte.tolist())) == list(range(10))


def test_digits_split_is_fixed_and_partitions_the_set():
    _, y = load_digits()
    _, ytr = load_digits(split="train")
    _, yte = load_digits(split="test")
    assert len(ytr) == 1437 and len(yte) == 360
    assert (np.bincount(ytr.numpy()) + np.bincount(yte.numpy()) == np.bincount(y.numpy())).all()
    assert yte.tolist()[:12] == [2, 2, 3, 0, 8, 8, 7, 8, 3, 4, 0, 2]    # stored in the file, never redrawn
    with pytest.raises(ValueError, match="split"):
        load_digits(split="val")


def test_digits_dataset_samples_and_loader(device):
    ds = Digits(train=False, device=device)
    assert len(ds) == 360 and len(Digits()) == 1437
    image, label = ds[0]
    assert image.shape == (1, 8, 8) and image.dtype == ag.float32 and label.dtype == ag.int64
    x, y = next(iter(DataLoader(Digits(train=False, flatten=True, device=device), batch_size=32)))
    assert x.shape == (32, 64) and y.shape == (32,) and x.device == device
    np.testing.assert_array_equal(x.numpy()[0], image.numpy().reshape(64))


def test_loader_shuffles_digits_reproducibly():
    ds = Digits(flatten=True)
    a = [y.tolist() for _, y in DataLoader(ds, 256, shuffle=True, generator=0)]
    b = [y.tolist() for _, y in DataLoader(ds, 256, shuffle=True, generator=0)]
    assert a == b and sum(map(len, a)) == 1437
