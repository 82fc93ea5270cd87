"""`ddm partition --features captions` (issue 37 part 8, the cluster choice): k-means on the pooled
all-MiniLM-L6-v2 embedding of each emoji's CLDR name, with the real encoder and the real emoji. The
clusters follow the names, not the pixels; held-out emoji are placed by their names for the router's
evaluation; features of other rows are refused."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.ops.data.caption_features import CAPTIONS, caption_features
from ddm.ops.data.dataset import load_dataset
from ddm.ops.data.emoji_captions import load_captions
from ddm.ops.data.kmeans import kmeans_assign, kmeans_features
from ddm.ops.data.partitions import make_partition
from ddm.ops.eval.router_data import router_eval_set
from ddm.schema.errors import ConfigError
from ddm.schema.partition import read_manifest


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return tmp_path_factory.mktemp("data")


def test_caption_clusters_follow_the_names_and_place_held_out_emoji_by_theirs(data, tmp_path):
    from ddm.ops.cli import main

    out = tmp_path / "p.json"
    argv = ["partition", "--dataset", "emoji", "--by", "kmeans:4", "--features", "captions"]
    assert main([*argv, "--data-dir", str(data), "--out", str(out)]) == 0
    manifest = read_manifest(out)
    assert manifest.kmeans.source == CAPTIONS and "name" in manifest.kmeans.input
    names = load_captions("emoji", "train", data).captions
    # what no pixel clustering does: every flag ("flag: Japan", ...) in one cluster, whatever its colours
    flags = manifest.assignments[[i for i, name in enumerate(names) if (name or "").startswith("flag:")]]
    assert len(flags) > 200 and np.bincount(flags).max() / len(flags) >= 0.95
    pixels = make_partition(load_dataset("emoji", "train", data), "kmeans:4")
    pixel_flags = pixels.assignments[[i for i, name in enumerate(names) if (name or "").startswith("flag:")]]
    assert np.bincount(pixel_flags).max() / len(pixel_flags) < 0.95

    held = router_eval_set(manifest, load_dataset("emoji", "train", data), "test", data)
    test_names = caption_features("emoji", "test", data).images
    assert np.array_equal(
        held.clusters, kmeans_assign(manifest.kmeans, kmeans_features(manifest.kmeans, test_names))
    )


def test_features_of_other_rows_are_refused(data):
    train = load_dataset("emoji", "train[:64]", data)
    other = caption_features("emoji", "train[64:128]", data)
    with pytest.raises(ConfigError, match="features of the same rows"):
        make_partition(train, "kmeans:2", fine=8, dims=8, features=other)
