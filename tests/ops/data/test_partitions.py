"""ddm.ops.data: label, k-means and random partitions and their manifest (synthetic data unless marked)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddm.ops import cli
from ddm.ops.data.dataset import Dataset, load_dataset
from ddm.ops.data.kmeans import kmeans_fit
from ddm.ops.data.partition_spec import PartitionSpec, format_labels, parse_by, parse_label_groups
from ddm.ops.data.partitions import (
    assign_clusters,
    make_partition,
    partition_kmeans,
    partition_labels,
    partition_one,
    partition_random,
)
from ddm.ops.data.previews import preview_grid, summary
from ddm.schema.errors import ConfigError
from ddm.schema.partition import PartitionManifest, read_manifest, write_manifest
from tests.support.data import SHARED, needs_shared_mnist
from tests.support.fakes import synthetic


@pytest.fixture(scope="module")
def ds() -> Dataset:
    return synthetic()


@pytest.fixture(scope="module")
def km(ds) -> PartitionManifest:
    return partition_kmeans(ds, 2, fine=16, seed=0, dims=8)


# --- specs -------------------------------------------------------------------------------------


def test_parse_by():
    assert parse_by("labels:0-4,5-9") == PartitionSpec("labels", 2, ((0, 1, 2, 3, 4), (5, 6, 7, 8, 9)))
    assert parse_by("kmeans:4") == PartitionSpec("kmeans", 4)
    assert parse_by("random:3") == PartitionSpec("random", 3)
    assert parse_by("all").k == 1
    assert parse_by("labels:0,1,2,3,4,5,6,7,8,9").k == 10


def test_parse_label_groups_with_plus():
    assert parse_label_groups("0+2+4-6, 1+3+7-9") == [[0, 2, 4, 5, 6], [1, 3, 7, 8, 9]]
    assert format_labels((0, 2, 4, 5, 6)) == "0+2+4-6"


@pytest.mark.parametrize(
    "spec, message",
    [
        ("labels:0-4", r"missing labels: \[5, 6, 7, 8, 9\]"),
        ("labels:0-5,5-9", r"in more than one group: \[5\]"),
        ("labels:0-4,5-10", r"outside 0-9: \[10\]"),
        ("labels:4-0,5-9", "a <= b"),
        ("labels:0-4,,5-9", "labels:0-4,5-9"),
        ("kmeans:0", "K >= 1"),
        ("kmeans:x", "K >= 1"),
        ("spectral:2", "kmeans:4"),
        ("labels", "labels:0-4,5-9"),
    ],
)
def test_parse_by_errors(spec, message):
    with pytest.raises(ConfigError, match=message):
        parse_by(spec)


# --- methods -----------------------------------------------------------------------------------


def test_labels_partition_exact_counts(ds):
    m = partition_labels(ds, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]])
    assert m.method == "labels" and m.num_clusters == 2 and len(m) == len(ds)
    hist = np.bincount(ds.labels, minlength=10)
    assert [c.count for c in m.clusters] == [hist[:5].sum(), hist[5:].sum()]
    assert list(m.clusters[0].label_counts) == hist[:5].tolist() + [0] * 5
    np.testing.assert_array_equal(m.assignments, (ds.labels >= 5).astype(np.int64))
    np.testing.assert_array_equal(assign_clusters(m, ds.images, ds.labels), m.assignments)
    np.testing.assert_array_equal(ds.labels[m.indices(1)] >= 5, True)


def test_labels_partition_refuses_empty_cluster():
    small = synthetic(n_per_class=1)
    tiny = Dataset("mnist", "test", small.images[small.labels < 5], small.labels[small.labels < 5])
    with pytest.raises(ConfigError, match="no samples"):
        partition_labels(tiny, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]])


def test_one_cluster_is_the_monolith(ds):
    m = partition_one(ds)
    assert m.num_clusters == 1 and m.clusters[0].count == len(ds) and m.clusters[0].labels == tuple(range(10))
    assert m.id == make_partition(ds, "all").id
    np.testing.assert_array_equal(m.indices(0), np.arange(len(ds)))


def test_random_partition_balanced_and_seeded(ds):
    m = partition_random(ds, 3, seed=1)
    counts = sorted(c.count for c in m.clusters)
    assert counts[-1] - counts[0] <= 1 and sum(counts) == len(ds)
    np.testing.assert_array_equal(m.assignments, partition_random(ds, 3, seed=1).assignments)
    assert not np.array_equal(m.assignments, partition_random(ds, 3, seed=2).assignments)
    with pytest.raises(ConfigError, match="no assignment rule"):
        assign_clusters(m, ds.images, ds.labels)


def test_kmeans_deterministic_nonempty_and_sensible(ds, km):
    again = partition_kmeans(ds, 2, fine=16, seed=0, dims=8)
    assert again.id == km.id
    np.testing.assert_array_equal(again.assignments, km.assignments)
    assert all(c.count > 0 for c in km.clusters)
    assert km.kmeans.centroids.shape == (2, 8) and km.kmeans.components.shape == (8, 784)
    # The two block rows are the dominant structure: each cluster holds one of them.
    top = ds.labels < 5
    assert {frozenset(np.unique(km.assignments[top])), frozenset(np.unique(km.assignments[~top]))} == {
        frozenset({0}),
        frozenset({1}),
    }


def test_kmeans_more_clusters_nonempty(ds):
    m = partition_kmeans(ds, 5, fine=20, seed=3, dims=10)
    assert m.num_clusters == 5 and all(c.count > 0 for c in m.clusters)
    assert [c.count for c in m.clusters] == sorted((c.count for c in m.clusters), reverse=True)


def test_kmeans_assign_matches_assignments(ds, km):
    np.testing.assert_array_equal(assign_clusters(km, ds.images), km.assignments)
    np.testing.assert_array_equal(assign_clusters(km, ds.images[17:40]), km.assignments[17:40])


def test_kmeans_argument_checks(ds):
    with pytest.raises(ConfigError, match="K <= fine"):
        partition_kmeans(ds, 20, fine=16)
    with pytest.raises(ConfigError, match="fine <= 200"):
        partition_kmeans(ds, 2, fine=500)


def test_kmeans_fit_weighted_two_blobs():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 0.1, (30, 2)), rng.normal(5, 0.1, (30, 2))])
    cents, labels = kmeans_fit(x, 2, np.random.default_rng(0), weights=np.ones(60))
    assert len(set(labels[:30])) == 1 and len(set(labels[30:])) == 1 and labels[0] != labels[-1]
    np.testing.assert_allclose(sorted(cents[:, 0]), [0, 5], atol=0.1)


# --- manifest ----------------------------------------------------------------------------------


@pytest.mark.parametrize("by", ["labels:0-4,5-9", "random:3", "kmeans:2", "all"])
def test_manifest_round_trip(ds, tmp_path, by):
    m = make_partition(ds, by, seed=0, fine=16, dims=8)
    loaded = read_manifest(write_manifest(tmp_path / "p.json", m))
    assert loaded.id == m.id and len(m.id) == 12
    assert (loaded.dataset, loaded.split, loaded.data_sha256) == ("mnist", "test", ds.sha256)
    assert loaded.clusters == m.clusters
    np.testing.assert_array_equal(loaded.assignments, m.assignments)
    if m.method != "random":
        np.testing.assert_array_equal(assign_clusters(loaded, ds.images, ds.labels), m.assignments)
    loaded.check_dataset(ds)


def test_manifest_detects_edits(ds, tmp_path):
    path = write_manifest(tmp_path / "p.json", partition_labels(ds, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]))
    body = json.loads(path.read_text())
    body["split"] = "test[:100]"
    path.write_text(json.dumps(body))
    with pytest.raises(ConfigError, match="edited or is corrupt"):
        read_manifest(path)
    body = json.loads(path.read_text())
    body["assignments"][0] = 1 - body["assignments"][0]
    path.write_text(json.dumps(body))
    with pytest.raises(ConfigError, match="count"):
        read_manifest(path)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda b: b.update(version=2), "manifest version 1"),
        (lambda b: b.pop("assignments"), "missing"),
        (lambda b: b.update(method="spectral"), "method in"),
        (lambda b: b.update(assignments=[0, 7]), r"assignments in 0\.\.1"),
    ],
)
def test_manifest_load_validates(ds, tmp_path, edit, message):
    body = partition_labels(ds, [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]).to_json()
    edit(body)
    (tmp_path / "p.json").write_text(json.dumps(body))
    with pytest.raises(ConfigError, match=message):
        read_manifest(tmp_path / "p.json")


def test_manifest_load_not_json(tmp_path):
    (tmp_path / "p.json").write_text("{nope")
    with pytest.raises(ConfigError, match="JSON partition manifest"):
        read_manifest(tmp_path / "p.json")
    with pytest.raises(ConfigError, match="cannot read"):
        read_manifest(tmp_path / "missing.json")


def test_check_dataset_hash_mismatch(ds):
    m = partition_one(ds)
    other = synthetic(seed=1)  # same name and split, different bytes
    with pytest.raises(ConfigError, match="data sha256"):
        m.check_dataset(other)
    with pytest.raises(ConfigError, match="was made from mnist test"):
        m.check_dataset(synthetic(split="test[:100]"))


def test_indices_cover_the_split(ds, km):
    idx = np.sort(np.concatenate([km.indices(k) for k in range(km.num_clusters)]))
    np.testing.assert_array_equal(idx, np.arange(len(ds)))
    with pytest.raises(ConfigError, match="cluster id"):
        km.indices(2)


def test_preview_grid_and_summary(ds, km):
    grid = preview_grid(km, ds)
    assert grid.shape == (2 * 28 + 3 * 2, 8 * 28 + 9 * 2) and grid.dtype == np.uint8
    text = summary(km)
    assert "method kmeans" in text and str(km.clusters[0].count) in text


# --- real data (skipped where the shared copy is absent) ---------------------------------------


def test_real_mnist_partitions_and_cli(tmp_path, capsys):
    needs_shared_mnist()
    ds = load_dataset("mnist", "test[:8000]", SHARED)
    out = tmp_path / "p.json"
    rc = cli.main(
        ["partition", "--dataset", "mnist", "--split", "test[:8000]", "--by", "labels:0-4,5-9"]
        + ["--data-dir", str(SHARED), "--out", str(out), "--preview", str(tmp_path / "p.png")]
    )
    assert rc == 0 and (tmp_path / "p.png").exists()
    m = read_manifest(out)
    m.check_dataset(ds)
    hist = ds.label_counts()
    assert [c.count for c in m.clusters] == [hist[:5].sum(), hist[5:].sum()] == [4103, 3897]
    assert "4103" in capsys.readouterr().out
    km = partition_kmeans(ds, 2, seed=0)
    assert all(c.count > 0 for c in km.clusters)
    np.testing.assert_array_equal(assign_clusters(km, ds.images[:500]), km.assignments[:500])
