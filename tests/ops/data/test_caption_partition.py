"""`ddm partition --features captions` (issue 37 part 8, the cluster choice): k-means on the pooled
all-MiniLM-L6-v2 embedding of each emoji's CLDR name, with the real encoder and the real emoji. The
clusters follow the names, not the pixels; held-out emoji are placed by their names for the router's
evaluation; features of other rows are refused. The names are encoded once, into a file of `ddm data
embed-captions`' format, which every step then reads (--prompt-embeddings)."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.ops.data.caption_features import CAPTIONS, CaptionFeatures, caption_features
from ddm.ops.data.dataset import load_dataset
from ddm.ops.data.emoji_captions import load_captions
from ddm.ops.data.kmeans import kmeans_assign, kmeans_features
from ddm.ops.data.partitions import make_partition
from ddm.ops.eval.router_data import router_eval_set
from ddm.schema.errors import ConfigError
from ddm.schema.partition import read_manifest


def test_caption_clusters_follow_the_names_and_place_held_out_emoji_by_theirs(tmp_path):
    from ddm.ops.cli import main
    from ddm.workers.stored_prompts import write_stored_prompts
    from ddm.workers.text_encoder import load_text_encoder

    data, stored, out = tmp_path / "data", tmp_path / "names.npz", tmp_path / "p.json"
    names = load_captions("emoji", "train", data).captions
    test_names = load_captions("emoji", "test", data).captions
    write_stored_prompts(stored, [n for n in (*names, *test_names) if n], load_text_encoder("pooled"))

    argv = ["partition", "--dataset", "emoji", "--by", "kmeans:4", "--features", "captions"]
    assert main([*argv, "--prompt-embeddings", str(stored), "--data-dir", str(data), "--out", str(out)]) == 0
    manifest = read_manifest(out)
    assert manifest.kmeans.source == CAPTIONS and "name" in manifest.kmeans.input
    flag_rows = [i for i, name in enumerate(names) if (name or "").startswith("flag:")]
    # what no pixel clustering does: every flag ("flag: Japan", ...) in one cluster, whatever its colours
    flags = manifest.assignments[flag_rows]
    assert len(flags) > 200 and np.bincount(flags).max() / len(flags) >= 0.95
    pixel_flags = make_partition(load_dataset("emoji", "train", data), "kmeans:4").assignments[flag_rows]
    assert np.bincount(pixel_flags).max() / len(pixel_flags) < 0.95

    held = router_eval_set(manifest, load_dataset("emoji", "train", data), "test", data, str(stored))
    by_name = caption_features("emoji", "test", data, str(stored)).images
    assert np.array_equal(
        held.clusters, kmeans_assign(manifest.kmeans, kmeans_features(manifest.kmeans, by_name))
    )


def test_features_of_other_rows_are_refused(tmp_path):
    train = load_dataset("emoji", "train[:64]", tmp_path)
    rng = np.random.default_rng(0)
    other = CaptionFeatures(
        CAPTIONS, "train[64:128]", train.labels, rng.normal(size=(64, 8)).astype(np.float32)
    )
    with pytest.raises(ConfigError, match="features of the same rows"):
        make_partition(train, "kmeans:2", fine=8, dims=8, features=other)
