"""ddm.ops.data: IDX reader, splits, lookup, loading and download (synthetic data unless marked)."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from ddm.ops.data.catalog import DATASETS, DataFile, DatasetSpec
from ddm.ops.data.dataset import Dataset, load_dataset
from ddm.ops.data.download import download, fetch, file_is_valid
from ddm.ops.data.files import resolve_data_dir
from ddm.ops.data.idx import parse_idx, read_idx
from ddm.ops.data.splits import format_split, parse_split
from ddm.schema.errors import ConfigError
from tests.support.data import SHARED, needs_shared_mnist

FASHION = Path("/usr/share/datasets/fashion-mnist")


def idx_bytes(arr: np.ndarray) -> bytes:
    codes = {"uint8": 0x08, "int8": 0x09, "int16": 0x0B, "int32": 0x0C, "float32": 0x0D, "float64": 0x0E}
    head = bytes([0, 0, codes[arr.dtype.name], arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return head + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def synthetic_arrays(n: int = 50, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, 28, 28), dtype=np.uint8), rng.integers(0, 10, n).astype(np.uint8)


def write_split(
    directory: Path, images: np.ndarray, labels: np.ndarray, split: str = "test", gz: bool = True
):
    directory.mkdir(parents=True, exist_ok=True)
    images_df, labels_df = DATASETS["mnist"].files[split]
    for df, arr in ((images_df, images), (labels_df, labels)):
        blob = idx_bytes(arr)
        if gz:
            (directory / df.name).write_bytes(gzip.compress(blob))
        else:
            (directory / df.raw_name).write_bytes(blob)


# --- IDX ---------------------------------------------------------------------------------------


def test_read_idx_plain_and_gzip_detected_by_magic(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    plain = tmp_path / "plain.gz"  # misleading extension: detection is by content
    plain.write_bytes(idx_bytes(arr))
    zipped = tmp_path / "zipped.idx"
    zipped.write_bytes(gzip.compress(idx_bytes(arr)))
    np.testing.assert_array_equal(read_idx(plain), arr)
    np.testing.assert_array_equal(read_idx(zipped), arr)


def test_read_idx_big_endian_types_come_back_native(tmp_path):
    arr = np.array([[1, -2, 300000], [4, 5, -6]], dtype=np.int32)
    (tmp_path / "a").write_bytes(idx_bytes(arr))
    out = read_idx(tmp_path / "a")
    assert out.dtype == np.dtype("int32") and out.dtype.isnative
    np.testing.assert_array_equal(out, arr)


def test_read_idx_rejects_bad_magic(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x00\x08\x01" + struct.pack(">I", 3) + b"abc")
    with pytest.raises(ConfigError, match="expected IDX magic"):
        read_idx(tmp_path / "bad")


def test_read_idx_rejects_unknown_type_code():
    with pytest.raises(ConfigError, match="type code"):
        parse_idx(b"\x00\x00\x07\x01" + struct.pack(">I", 1) + b"a")


def test_read_idx_rejects_truncated_payload(tmp_path):
    blob = idx_bytes(np.zeros((4, 28, 28), dtype=np.uint8))
    (tmp_path / "short").write_bytes(blob[:-10])
    with pytest.raises(ConfigError, match=r"expected 3136 payload bytes.*got 3126 \(truncated"):
        read_idx(tmp_path / "short")
    (tmp_path / "long").write_bytes(blob + b"x")
    with pytest.raises(ConfigError, match="trailing"):
        read_idx(tmp_path / "long")


def test_read_idx_rejects_truncated_header_and_gzip(tmp_path):
    with pytest.raises(ConfigError, match="header"):
        parse_idx(b"\x00\x00\x08\x03\x00\x00")
    blob = gzip.compress(idx_bytes(np.zeros((10, 28, 28), dtype=np.uint8)))
    (tmp_path / "cut.gz").write_bytes(blob[: len(blob) // 2])
    with pytest.raises(ConfigError, match="gzip"):
        read_idx(tmp_path / "cut.gz")


# --- splits ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, want",
    [
        ("test", ("test", 0, None)),
        ("train", ("train", 0, None)),
        ("test[:8000]", ("test", 0, 8000)),
        ("test[8000:]", ("test", 8000, None)),
        ("test[100:200]", ("test", 100, 200)),
        ("train[:]", ("train", 0, None)),
    ],
)
def test_parse_split(spec, want):
    assert parse_split(spec) == want


@pytest.mark.parametrize(
    "spec", ["valid", "test[5]", "test[:-5]", "test[10:5]", "test[3:3]", "test[:8000", ""]
)
def test_parse_split_rejects_bad_syntax_with_example(spec):
    with pytest.raises(ConfigError, match=r"test\[:8000\]"):
        parse_split(spec)


def test_format_split_is_canonical():
    assert format_split("test", 0, 10, 10) == "test"
    assert format_split("test", 0, 8, 10) == "test[:8]"
    assert format_split("test", 8, 10, 10) == "test[8:]"
    assert format_split("test", 2, 5, 10) == "test[2:5]"


# --- data directory and loading ----------------------------------------------------------------


def test_resolve_data_dir(monkeypatch):
    monkeypatch.setenv("DDM_DATA_DIR", "/env/dir")
    assert resolve_data_dir("/flag/dir") == Path("/flag/dir")
    assert resolve_data_dir(None) == Path("/env/dir")
    monkeypatch.delenv("DDM_DATA_DIR")
    assert resolve_data_dir(None) == Path("data")


def test_load_dataset_slices_and_hash(tmp_path):
    images, labels = synthetic_arrays(50)
    write_split(tmp_path / "mnist", images, labels)
    full = load_dataset("mnist", "test", tmp_path, verify=False)
    head = load_dataset("mnist", "test[:30]", tmp_path, verify=False)
    tail = load_dataset("mnist", "test[30:]", tmp_path, verify=False)
    assert (len(full), len(head), len(tail)) == (50, 30, 20)
    assert (full.split, head.split, tail.split) == ("test", "test[:30]", "test[30:]")
    assert load_dataset("mnist", "test[0:50]", tmp_path, verify=False).split == "test"
    np.testing.assert_array_equal(tail.images, images[30:])
    assert head.labels.dtype == np.int64 and not head.images.flags.writeable
    assert head.sha256 == load_dataset("mnist", "test[:30]", tmp_path, verify=False).sha256
    assert len({full.sha256, head.sha256, tail.sha256}) == 3
    x = head.as_model_input()
    assert x.shape == (30, 1, 32, 32) and x.dtype == np.float32 and x.min() >= -1 and x.max() <= 1


def test_load_dataset_range_past_the_end_is_an_error(tmp_path):
    write_split(tmp_path / "mnist", *synthetic_arrays(20))
    with pytest.raises(ConfigError, match=r"inside test\[0:20\]"):
        load_dataset("mnist", "test[:30]", tmp_path, verify=False)


def test_load_dataset_looks_in_data_dir_itself_and_plain_files(tmp_path):
    images, labels = synthetic_arrays(10)
    write_split(tmp_path, images, labels, gz=False)
    ds = load_dataset("mnist", "test", tmp_path, verify=False)
    np.testing.assert_array_equal(ds.labels, labels)


def test_load_dataset_verifies_official_checksum(tmp_path):
    write_split(tmp_path / "mnist", *synthetic_arrays(10))
    with pytest.raises(ConfigError, match="decompressed md5 2646ac647ad5339dbf082846283269ea"):
        load_dataset("mnist", "test", tmp_path)


def test_missing_files_say_where_and_how(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_dataset("mnist", "train", tmp_path)
    text = str(err.value)
    assert str(tmp_path / "mnist") in text and "ddm data fetch mnist" in text and "DDM_DATA_DIR" in text


def test_unknown_dataset():
    with pytest.raises(ConfigError, match="fashion-mnist"):
        load_dataset("cifar10", "test")


def test_dataset_validates_arrays():
    with pytest.raises(ConfigError, match=r"uint8 \[N, 28, 28\]"):
        Dataset("x", "test", np.zeros((2, 28, 28), np.float32), np.zeros(2, np.int64))
    with pytest.raises(ConfigError, match="labels in"):
        Dataset("x", "test", np.zeros((2, 28, 28), np.uint8), np.array([0, 10]))


# --- download ----------------------------------------------------------------------------------


def test_download_checks_md5_and_cleans_up(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"hello idx")
    good = hashlib.md5(b"hello idx").hexdigest()
    download(src.as_uri(), tmp_path / "out" / "a.bin", good)
    assert (tmp_path / "out" / "a.bin").read_bytes() == b"hello idx"
    with pytest.raises(ConfigError, match="expected md5 0+"):
        download(src.as_uri(), tmp_path / "out" / "b.bin", "0" * 32)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.bin"]


def test_download_without_network_says_so(tmp_path):
    with pytest.raises(ConfigError, match="no network.*use the offline copy"):
        download(
            "http://127.0.0.1:9/x.gz",
            tmp_path / "x.gz",
            "0" * 32,
            timeout=5,
            offline_hint="use the offline copy",
        )
    assert list(tmp_path.iterdir()) == []


def test_fetch_downloads_then_skips(tmp_path, monkeypatch, capsys):
    images, labels = synthetic_arrays(12)
    server = tmp_path / "server"
    server.mkdir()
    files = {}
    for split, (img, lab) in {"test": (images, labels)}.items():
        pair = []
        for stem, arr in ((f"{split}-images.gz", img), (f"{split}-labels.gz", lab)):
            raw = idx_bytes(arr)
            blob = gzip.compress(raw)
            (server / stem).write_bytes(blob)
            pair.append(DataFile(stem, hashlib.md5(blob).hexdigest(), hashlib.md5(raw).hexdigest()))
        files[split] = tuple(pair)
    toy = DatasetSpec("toy", server.as_uri() + "/", files, tuple("0123456789"), (), "no offline copy")
    monkeypatch.setitem(DATASETS, "toy", toy)
    paths = fetch("toy", tmp_path / "d", ("test",))
    assert paths == [tmp_path / "d" / "toy" / "test-images.gz", tmp_path / "d" / "toy" / "test-labels.gz"]
    shutil.rmtree(server)  # a second fetch must not need the network
    assert fetch("toy", tmp_path / "d", ("test",)) == paths
    assert "present and valid" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="expected splits"):
        fetch("toy", tmp_path / "d", ("valid",))


# --- real data (skipped where the shared copy is absent) ---------------------------------------


def test_real_mnist_test_split():
    needs_shared_mnist()
    ds = load_dataset("mnist", "test", SHARED)
    assert ds.images.shape == (10000, 28, 28)
    assert ds.label_counts().tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    head = load_dataset("mnist", "test[:8000]", SHARED)
    np.testing.assert_array_equal(head.labels, ds.labels[:8000])
    assert head.sha256 == load_dataset("mnist", "test[:8000]", SHARED).sha256


def test_real_mnist_files_have_the_official_payload():
    needs_shared_mnist()
    for df in DATASETS["mnist"].files["test"]:
        assert file_is_valid(SHARED / "mnist" / df.name, df)


def test_real_fashion_mnist_if_installed():
    if not (FASHION / "t10k-images-idx3-ubyte.gz").exists():
        pytest.skip(f"Fashion-MNIST not installed at {FASHION} (apt-get install dataset-fashion-mnist)")
    ds = load_dataset("fashion-mnist", "test", "/nonexistent")  # found in the offline location
    assert len(ds) == 10000 and ds.label_counts().tolist() == [1000] * 10
    assert ds.classes[9] == "Ankle boot"
