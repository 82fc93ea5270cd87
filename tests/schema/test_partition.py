"""The partition manifest record (schema/partition.py): encode/decode, its content id, one writer."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ddm.schema.errors import ConfigError
from ddm.schema.partition import (
    ClusterInfo,
    PartitionManifest,
    check_label_groups,
    read_manifest,
    write_manifest,
)

LABELS = np.array([0, 5, 1, 6, 7, 2])  # the split's labels; 0-4 -> cluster 0, 5-9 -> cluster 1


def label_split() -> PartitionManifest:
    """A labels manifest of a six-sample split, built by hand."""
    assignments = (LABELS >= 5).astype(np.int64)
    clusters = []
    for k, group in enumerate((range(0, 5), range(5, 10))):
        counts = np.bincount(LABELS[assignments == k], minlength=10)
        clusters.append(ClusterInfo(k, int(counts.sum()), tuple(int(c) for c in counts), tuple(group)))
    draft = PartitionManifest(
        id="",
        dataset="mnist",
        split="test[:6]",
        data_sha256="ab" * 32,
        method="labels",
        num_clusters=2,
        clusters=tuple(clusters),
        assignments=assignments,
    )
    return draft.with_content_id()


def test_encode_decode_round_trip():
    m = label_split()
    back = PartitionManifest.decode(m.encode())
    assert back.id == m.id == m.content_id() and len(m.id) == 12
    assert back.clusters == m.clusters and back.to_json() == m.to_json()
    np.testing.assert_array_equal(back.assignments, [0, 1, 0, 1, 1, 0])
    assert len(m.encode().splitlines()) == len(m.to_json()) + 2  # braces and one line per top-level key


def test_assignments_are_read_only_and_indices_cover_them():
    m = label_split()
    with pytest.raises(ValueError):
        m.assignments[0] = 1
    np.testing.assert_array_equal(m.indices(0), [0, 2, 5])
    np.testing.assert_array_equal(m.indices(1), [1, 3, 4])
    with pytest.raises(ConfigError, match="cluster id"):
        m.indices(2)


def test_an_edited_manifest_is_refused():
    text = label_split().encode().replace('"test[:6]"', '"test[:7]"')
    with pytest.raises(ConfigError, match="edited or is corrupt"):
        PartitionManifest.decode(text, "p.json")
    with pytest.raises(ConfigError, match="JSON partition manifest"):
        PartitionManifest.decode("{nope")


def test_write_and_read(tmp_path):
    m = label_split()
    path = write_manifest(tmp_path / "runs" / "p.json", m)
    assert sorted(p.name for p in path.parent.iterdir()) == ["p.json"]  # no temporary file left
    assert read_manifest(path).id == m.id
    with pytest.raises(ConfigError, match="cannot read partition manifest"):
        read_manifest(tmp_path / "missing.json")


def test_identity_is_what_a_checkpoint_records():
    m = label_split()
    assert m.identity() == {
        "id": m.id,
        "dataset": "mnist",
        "split": "test[:6]",
        "data_sha256": "ab" * 32,
        "method": "labels",
        "num_clusters": 2,
    }


class FakeSplit(SimpleNamespace):
    """What check_dataset reads of a loaded split: name, split, sha256 and its length."""

    def __len__(self) -> int:
        return self.n


def test_check_dataset_refuses_other_data():
    m = label_split()
    m.check_dataset(FakeSplit(name="mnist", split="test[:6]", sha256="ab" * 32, n=6))
    with pytest.raises(ConfigError, match="data sha256"):
        m.check_dataset(FakeSplit(name="mnist", split="test[:6]", sha256="cd" * 32, n=6))
    with pytest.raises(ConfigError, match="was made from mnist test"):
        m.check_dataset(FakeSplit(name="mnist", split="test", sha256="ab" * 32, n=6))


def test_label_groups_must_cover_each_label_once():
    check_label_groups([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]])
    with pytest.raises(ConfigError, match=r"missing labels: \[9\]"):
        check_label_groups([[0, 1, 2, 3, 4], [5, 6, 7, 8]])
    with pytest.raises(ConfigError, match=r"more than one group: \[4\]"):
        check_label_groups([[0, 1, 2, 3, 4], [4, 5, 6, 7, 8, 9]])
