"""The data code sized by the dataset's sample space (issue 25, part 1): partitions with one label
count per class, k-means on any pixel count, the evaluation classifier for C channels and K classes,
CLI labels in the deployment's classes, PNG grids in RGB."""

from __future__ import annotations

import argparse
import io

import numpy as np
import pytest

from ddm.ops.data.dataset import Dataset
from ddm.ops.data.partitions import assign_clusters, make_partition
from ddm.schema.errors import ConfigError
from ddm.schema.partition import PCA_INPUT, PartitionManifest
from ddm.schema.sample_space import LEGACY, SampleSpace


def emoji_like(n: int = 48, seed: int = 0) -> Dataset:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    return Dataset("emoji", "train", images, rng.integers(0, 9, n))


def test_partitions_of_a_colour_dataset_count_its_classes():
    ds = emoji_like()
    assert ds.sample_space.shape == (3, 32, 32) and ds.sample_space.num_classes == 9
    for by in ("kmeans:3", "labels:0-3,4-8", "all", "random:2"):
        m = make_partition(ds, by, fine=6, dims=4)
        assert all(len(c.label_counts) == 9 for c in m.clusters), by
        assert PartitionManifest.decode(m.encode()).id == m.id
    km = make_partition(ds, "kmeans:3", fine=6, dims=4)
    assert km.kmeans.mean.shape == (3072,) and PCA_INPUT not in km.encode()
    assert np.array_equal(assign_clusters(km, ds.images), km.assignments)
    with pytest.raises(ConfigError, match="3072 numbers each"):
        assign_clusters(km, np.zeros((2, 28, 28), np.uint8))
    with pytest.raises(ConfigError, match="every label 0-8 in exactly one group"):
        make_partition(ds, "labels:0-4,5-7")


def test_the_classifier_reads_c_channels_and_k_classes(tmp_path):
    import torch

    from ddm.ops.eval.classifier import Classifier, features, fit_classifier, predict
    from ddm.workers.training import FitOptions

    model = Classifier(3, 9, 16)
    assert model(torch.zeros(2, 3, 16, 16)).shape == (2, 9)
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (8, 3, 16, 16)).astype(np.float32)
    fitted = fit_classifier(
        x, rng.integers(0, 9, 8), FitOptions(epochs=1, batch=4, lr=1e-3, progress=False), num_classes=9
    )
    assert predict(fitted, x).shape == (8, 9) and features(fitted, x).shape == (8, 256)
    assert Classifier().shape == {"in_channels": 1, "num_classes": 10, "image_size": 32}


def flags(**kw) -> argparse.Namespace:
    base = {"labels": None, "label": None, "all_labels": False, "unconditional": False, "n": None}
    return argparse.Namespace(**(base | kw))


def test_cli_labels_follow_the_deployments_classes():
    from ddm.ops.cli.job_flags import job_labels

    rgb = SampleSpace((3, 32, 32), num_classes=3, class_names=("Smileys", "Animals", "Flags"))
    assert job_labels(flags(labels="0,animals,null", n=1), rgb) == ([0, 1, None], 3)
    assert job_labels(flags(all_labels=True, n=1), rgb) == ([0, 1, 2], 3)
    assert job_labels(flags(labels="3,null", n=1), LEGACY) == ([3, None], 2)
    with pytest.raises(ConfigError, match=r"labels 0..2 \(Smileys, Animals, Flags\) or null, got 5"):
        job_labels(flags(labels="5"), rgb)
    unconditional = SampleSpace((3, 32, 32))
    assert job_labels(flags(n=2), unconditional) == ([None, None], 2)


def test_png_grids_are_rgb_for_three_channels_and_unchanged_for_one():
    from PIL import Image

    from ddm.client.images import pil_images, png_bytes
    from ddm.schema.flow import to_uint8

    rgb = np.full((2, 3, 8, 8), -1.0, np.float32)
    rgb[:, 0] = 1.0  # red
    img = Image.open(io.BytesIO(png_bytes(rgb, scale=1)))
    assert img.mode == "RGB" and img.getpixel((3, 3)) == (255, 0, 0)
    assert pil_images(rgb)[0].mode == "RGB"
    grey = np.linspace(-1, 1, 2 * 32 * 32, dtype=np.float32).reshape(2, 1, 32, 32)
    before = np.round(np.clip((grey[:, 0] + 1.0) * 127.5, 0, 255)).astype(np.uint8)  # the old to_uint8
    assert np.array_equal(to_uint8(grey), before)
    assert Image.open(io.BytesIO(png_bytes(grey))).mode == "L"
    assert np.array_equal(to_uint8(rgb * 0.5, (-0.5, 0.5))[0, 0, 0], [255, 0, 0])
