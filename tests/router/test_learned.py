"""The learned router: trains, saves, loads, pads to buckets without changing answers."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.router.learned import load_router
from ddm.router.router_net import RouterConfig
from ddm.router.train_router import accuracy_by_t, router_batch, train_router
from ddm.schema.errors import ConfigError
from ddm.workers.training import FitOptions


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two clusters that differ in brightness: learnable from x_t alone when t is large."""
    rng = np.random.default_rng(0)
    n = 256
    clusters = np.arange(n) % 2
    images = np.where(clusters[:, None, None, None] == 0, -0.8, 0.8).astype(np.float32) * np.ones(
        (n, 1, 32, 32)
    )
    images = images.astype(np.float32) + 0.05 * rng.standard_normal(images.shape).astype(np.float32)
    labels = rng.integers(0, 10, n)
    out = tmp_path_factory.mktemp("router")
    meta = train_router(
        images,
        labels,
        clusters,
        RouterConfig(num_clusters=2, channels=8),
        out,
        {"partition": {}},
        fit=FitOptions(steps=80, batch=32, progress=False),
    )
    return out, meta, images, labels, clusters


def test_router_checkpoint_and_accuracy(trained):
    out, meta, images, labels, clusters = trained
    assert meta["kind"] == "router" and meta["num_params"] > 0
    router = load_router(out, buckets=(1, 4, 8))
    curve = accuracy_by_t(router, images[:64], labels[:64], clusters[:64])
    assert len(curve["accuracy"]) == 10
    assert curve["accuracy"][-1] > 0.9  # near the data end the brightness gives the cluster away


def test_probs_are_distributions_and_padding_does_not_change_them(trained):
    out, _, images, labels, _ = trained
    router = load_router(out, buckets=(1, 4, 8))
    t = np.linspace(0, 1, 11, dtype=np.float32)
    p = router.probs(images[:11], t, labels[:11])  # 11 rows: one full bucket of 8 + 3 padded to 4
    assert p.shape == (11, 2)
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-5)
    one = np.concatenate(
        [router.probs(images[i : i + 1], t[i : i + 1], labels[i : i + 1]) for i in range(11)]
    )
    np.testing.assert_allclose(p, one, atol=1e-5)


def test_router_batches_are_pure_functions_of_seed_and_step():
    images, labels, clusters = np.zeros((10, 1, 32, 32), np.float32), np.arange(10), np.arange(10) % 2
    a = router_batch(images, labels, clusters, 8, seed=1, step=3, label_dropout=0.5)
    b = router_batch(images, labels, clusters, 8, seed=1, step=3, label_dropout=0.5)
    for u, v in zip(a, b, strict=True):
        np.testing.assert_array_equal(u, v)


def test_missing_router_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="router checkpoint"):
        load_router(tmp_path)


def test_a_prompt_aware_router_reads_pooled_embeddings_and_a_class_router_keeps_its_config(tmp_path):
    """Two clusters told apart by the prompt alone (their images are the same noise-free grey): the
    prompt-aware router learns them at every t, and with the empty prompt it cannot. A class router's
    config omits text_width, so its meta.json is as before the field."""
    from ddm.schema.conditioning import TextEncoderSpec
    from ddm.workers.text_conditions import PromptTable

    n, width = 64, 8
    clusters = np.arange(n) % 2
    images = np.zeros((n, 1, 32, 32), np.float32)
    embeddings = np.zeros((3, width), np.float32)  # row 0: the empty prompt
    embeddings[1, 0], embeddings[2, 1] = 1.0, 1.0
    spec = TextEncoderSpec("test/enc", "0" * 64, "wordpiece", 8, width, "pooled")
    table = PromptTable(embeddings, np.arange(n + 1, dtype=np.int64), 1 + clusters.astype(np.int64), spec)
    cfg = RouterConfig(num_clusters=2, channels=4, num_classes=0, text_width=width)
    train_router(
        images,
        np.zeros(n, np.int64),
        clusters,
        cfg,
        tmp_path,
        {"partition": {}},
        fit=FitOptions(steps=60, batch=32, progress=False),
        text=table,
    )
    router = load_router(tmp_path, buckets=(8,))
    t = np.full(8, 0.1, np.float32)
    with_prompt = router.probs(images[:8], t, embeddings[1 + clusters[:8]]).argmax(1)
    assert (with_prompt == clusters[:8]).all()
    empty = router.probs(images[:8], t, np.zeros((8, width), np.float32))
    np.testing.assert_allclose(empty, empty[:1].repeat(8, 0), atol=1e-6)  # x_t alone says nothing here
    assert "text_width" not in RouterConfig(num_clusters=2).to_dict()
