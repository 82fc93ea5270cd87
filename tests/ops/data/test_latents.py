"""Latent datasets (issue 29, part 2): a split encoded once, read back by name through load_dataset,
partitioned by k-means on the autoencoder's features and trained on through the same commands; a latent
file that is not what its sidecar says is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ddm.ops.cli import main
from ddm.ops.data.dataset import Dataset, load_dataset
from ddm.ops.data.latents import latent_paths, write_latents
from ddm.ops.data.partitions import assign_clusters, make_partition
from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.errors import ConfigError
from ddm.schema.partition import write_manifest
from ddm.workers.autoencoder.checkpoint import load_autoencoder
from ddm.workers.checkpoint import read_meta
from tests.support.latent import train_tiny_autoencoder


def emoji_like(n: int, seed: int) -> Dataset:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
    return Dataset("emoji", "train" if seed == 0 else "test", images, rng.integers(0, 9, n))


@pytest.fixture(scope="module")
def encoded(tmp_path_factory):
    """(data dir, the latent dataset's name, the autoencoder) for 96 train and 32 test images."""
    root = tmp_path_factory.mktemp("latents")
    ae = load_autoencoder(train_tiny_autoencoder(root / "ae", steps=5))
    record = write_latents(
        {"train": emoji_like(96, 0), "test": emoji_like(32, 1)}, ae, root, progress=lambda s: None
    )
    return root, record["name"], ae


def test_a_latent_dataset_loads_by_name_with_its_space_and_its_data_classes(encoded):
    root, name, ae = encoded
    assert name == f"emoji~{ae.card.encoder_id}"
    ds = load_dataset(name, "train[:40]", root)
    assert (ds.name, ds.split, len(ds)) == (name, "train[:40]", 40)
    assert ds.sample_space.shape == (4, 8, 8) and ds.sample_space.num_classes == 9  # emoji's, not the AE's 3
    assert ds.sample_space.value_range == ae.card.value_range
    np.testing.assert_allclose(
        ds.as_model_input(), ae.encode(emoji_like(96, 0).as_model_input()[:40]), atol=1e-6
    )
    assert load_dataset(name, "test", root).sha256 != ds.sha256


def test_kmeans_on_latents_clusters_learned_features_and_assigns_new_latents(encoded):
    root, name, _ = encoded
    ds = load_dataset(name, "train", root)
    manifest = make_partition(ds, "kmeans:3", fine=8, dims=6)
    assert manifest.dataset == name and manifest.kmeans.mean.shape == (256,)  # 4x8x8 latent numbers
    np.testing.assert_array_equal(assign_clusters(manifest, ds.images), manifest.assignments)
    held = load_dataset(name, "test", root)
    assert set(assign_clusters(manifest, held.images).tolist()) <= {0, 1, 2}


def test_an_expert_trains_on_latents_through_the_same_command(encoded, tmp_path):
    root, name, ae = encoded
    manifest = write_manifest(
        tmp_path / "part.json", make_partition(load_dataset(name, "train", root), "all")
    )
    out = tmp_path / "expert"
    argv = ["train", "expert", "--framework", "torch", "--partition", str(manifest), "--expert", "0"]
    assert (
        main(
            [
                *argv,
                "--preset",
                "tiny",
                "--steps",
                "2",
                "--data-dir",
                str(root),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    card = read_meta(out)["card"]
    assert card["sample_space"]["shape"] == [4, 8, 8]
    assert card["sample_space"]["value_range"] == list(ae.card.value_range)
    assert card["trained_on"]["partition"]["dataset"] == name  # names the encoder: a decoder must match


def test_a_latent_file_that_is_not_its_sidecars_or_missing_is_refused(encoded, tmp_path):
    root, name, _ = encoded
    npz, sidecar = latent_paths(root, name)
    record = json.loads(sidecar.read_text())
    (tmp_path / "latents").mkdir()
    copy_npz, copy_sidecar = latent_paths(tmp_path, name)
    copy_npz.write_bytes(npz.read_bytes()[:-8] + b"\0" * 8)
    copy_sidecar.write_text(json.dumps(record))
    with pytest.raises(ConfigError, match="with the sha256 its sidecar records"):
        load_dataset(name, "train", tmp_path)
    with pytest.raises(ConfigError, match="ddm data encode emoji --autoencoder"):
        load_dataset("emoji~ae-000000000000", "train", tmp_path)
    with pytest.raises(ConfigError, match=r"a split in \['test', 'train'\]"):
        np.savez(copy_npz, train_latents=np.zeros((1, 4, 8, 8), np.float32))
        record["npz_sha256"] = file_sha256(copy_npz)
        record["splits"] = {"test": {}, "train": {}}
        copy_sidecar.write_text(json.dumps(record))
        load_dataset(name, "test", tmp_path)


def test_pixels_cluster_by_learned_features_and_held_out_rows_are_placed_by_them(encoded):
    root, name, _ = encoded
    pixels, latents = emoji_like(96, 0), load_dataset(name, "train", root)
    manifest = make_partition(pixels, "kmeans:3", fine=8, dims=6, features=latents)
    assert manifest.dataset == "emoji" and manifest.kmeans.source == name
    assert manifest.kmeans.mean.shape == (256,)  # it reads latents, not the 3072 pixels
    np.testing.assert_array_equal(assign_clusters(manifest, latents.images), manifest.assignments)
    with pytest.raises(ConfigError, match="of 256 numbers each"):
        assign_clusters(manifest, pixels.images)  # pixels are not what this rule reads
    # and the other way round: latents clustered by their pixels
    by_pixels = make_partition(latents, "kmeans:3", fine=8, dims=6, features=pixels)
    assert by_pixels.dataset == name and by_pixels.kmeans.source == "emoji"
    with pytest.raises(ConfigError, match="features of the same rows"):
        make_partition(pixels, "kmeans:3", fine=8, dims=6, features=load_dataset(name, "test", root))
