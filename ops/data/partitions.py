"""Partitions of a dataset split into K expert clusters: the methods that make a manifest
(ddm.schema.partition.PartitionManifest) and the rule that places new samples in its clusters.

The monolith is the same training command on a one-cluster manifest (`partition_one`).

Methods:
  labels   clusters are label sets ("labels:0-4,5-9"); the oracle router is label -> cluster.
  kmeans   two-stage clustering as in the DDM paper: many fine k-means centroids, then the fine
           centroids merged into K clusters by k-means weighted by fine-cluster size.
  random   balanced random shards; a baseline with no assignment rule for new samples.
"""

from __future__ import annotations

import numpy as np

from ddm.ops.data.caption_features import CAPTIONS
from ddm.ops.data.dataset import Dataset, label_histogram
from ddm.ops.data.kmeans import (
    kmeans_assign,
    kmeans_features,
    kmeans_fit,
    nearest,
    pca_fit,
    pca_project,
    sqdist,
)
from ddm.ops.data.partition_spec import PartitionSpec, parse_by
from ddm.schema.autoencoder_card import split_latent_name
from ddm.schema.errors import ConfigError, expected
from ddm.schema.partition import ClusterInfo, KMeansModel, PartitionManifest, check_label_groups


def build_manifest(
    ds: Dataset,
    method: str,
    assignments: np.ndarray,
    *,
    label_sets: list[list[int]] | None = None,
    seed: int | None = None,
    kmeans: KMeansModel | None = None,
) -> PartitionManifest:
    """Fill in counts and histograms from the assignments, hash the content into `id`."""
    assignments = np.asarray(assignments, dtype=np.int64)
    k = len(label_sets) if label_sets is not None else int(assignments.max()) + 1
    if kmeans is not None:
        k = kmeans.centroids.shape[0]
    clusters = []
    for c in range(k):
        mask = assignments == c
        clusters.append(
            ClusterInfo(
                id=c,
                count=int(mask.sum()),
                label_counts=tuple(int(x) for x in label_histogram(ds.labels[mask], len(ds.classes))),
                labels=tuple(sorted(label_sets[c])) if label_sets is not None else None,
            )
        )
    empty = [c.id for c in clusters if c.count == 0]
    if empty:
        raise ConfigError(
            f"clusters {empty} would have no samples of {ds.name} {ds.split} "
            f"({expected('every cluster non-empty', [c.count for c in clusters])}); "
            "use a larger split or fewer clusters"
        )
    draft = PartitionManifest(
        id="",
        dataset=ds.name,
        split=ds.split,
        data_sha256=ds.sha256,
        method=method,
        num_clusters=k,
        clusters=tuple(clusters),
        assignments=assignments,
        seed=seed,
        kmeans=kmeans,
    )
    return draft.with_content_id()


def partition_labels(ds: Dataset, groups: list[list[int]]) -> PartitionManifest:
    """Cluster k = the samples whose label is in groups[k]; every label in exactly one group."""
    groups = [[int(x) for x in g] for g in groups]
    check_label_groups(groups, len(ds.classes))
    table = np.empty(len(ds.classes), dtype=np.int64)
    for k, g in enumerate(groups):
        table[g] = k
    return build_manifest(ds, "labels", table[ds.labels], label_sets=groups)


def partition_one(ds: Dataset) -> PartitionManifest:
    """The monolith's manifest: one cluster holding every sample (labels method, every label)."""
    return partition_labels(ds, [list(range(len(ds.classes)))])


def partition_random(ds: Dataset, K: int, seed: int = 0) -> PartitionManifest:
    """Balanced random shards: sizes differ by at most one."""
    if not 1 <= K <= len(ds):
        raise ConfigError(expected(f"1 <= K <= {len(ds)} samples", K))
    perm = np.random.default_rng(seed).permutation(len(ds))
    assignments = np.empty(len(ds), dtype=np.int64)
    assignments[perm] = np.arange(len(ds)) % K
    return build_manifest(ds, "random", assignments, seed=int(seed))


def partition_kmeans(
    ds: Dataset, K: int, fine: int = 64, seed: int = 0, dims: int = 50, features=None
) -> PartitionManifest:
    """Two-stage k-means, as in the DDM paper: `fine` centroids, merged into K by weighted k-means.

    Features are a PCA of the samples to `dims` dimensions: of `ds`'s own (pixels scaled to [-1, 1], or
    a latent dataset's latents: the autoencoder's learned features), or of `features`, another dataset
    of the same rows (a latent dataset of `ds`'s split: cluster pixels by learned features; or a latent
    dataset's pixels: cluster latents by pixels); the manifest records which (KMeansModel.source). The
    paper clustered DINOv2 embeddings; no pretrained encoder is available offline here, so the learned
    features are our own autoencoder's, and for MNIST-sized images a PCA of the pixels keeps the global
    layout (stroke positions, overall shape) that decides what a denoiser must learn. Each sample
    belongs to the cluster of its nearest fine centroid (this is also `assign_clusters`'s rule for new
    samples, so the router and the experts agree); `centroids` are the size-weighted means of each
    cluster's fine centroids.
    """
    source = ""
    if features is not None:
        check_same_rows(ds, features)
        source = features.name
    rows = (features if features is not None else ds).images
    N = len(ds)
    pixels = int(np.prod(rows.shape[1:]))  # 784 for 28x28 grey, 3072 for 3x32x32 RGB, 256 for 4x8x8
    if not 1 <= K <= fine:
        raise ConfigError(expected(f"1 <= K <= fine ({fine})", K))
    if fine > N:
        raise ConfigError(expected(f"fine <= {N} samples", fine))
    if not 1 <= dims <= min(pixels, N):
        raise ConfigError(expected(f"1 <= dims <= {min(pixels, N)}", dims))
    rng = np.random.default_rng(seed)
    mean, components = pca_fit(rows, dims)
    feats = pca_project(rows, mean, components)

    # Stage 1: fine clusters. Drop any fine centroid that ends up nearest to no sample, so every
    # fine cluster (and hence every merged cluster) holds at least one sample.
    fine_centroids, _ = kmeans_fit(feats, fine, rng)
    fine_labels = nearest(feats, fine_centroids)
    keep = np.bincount(fine_labels, minlength=fine) > 0
    fine_centroids = fine_centroids[keep]
    fine_labels = nearest(feats, fine_centroids)
    weights = np.bincount(fine_labels, minlength=fine_centroids.shape[0]).astype(np.float64)
    if fine_centroids.shape[0] < K:
        raise ConfigError(expected(f"K <= {fine_centroids.shape[0]} non-empty fine clusters", K))

    # Stage 2: merge fine centroids into K, weighted by fine-cluster size; a few restarts are cheap.
    best = None
    for _ in range(10):
        cents, merge = kmeans_fit(fine_centroids, K, rng, weights=weights)
        inertia = float(np.sum(weights * sqdist(fine_centroids, cents)[np.arange(len(merge)), merge]))
        if best is None or inertia < best[0]:
            best = (inertia, cents, merge)
    _, coarse, fine_to_cluster = best

    # Number clusters by size (largest first) so ids do not depend on k-means' arbitrary order.
    sizes = np.bincount(fine_to_cluster, weights=weights, minlength=K)
    order = np.argsort(-sizes, kind="stable")
    relabel = np.empty(K, dtype=np.int64)
    relabel[order] = np.arange(K)
    fine_to_cluster = relabel[fine_to_cluster]
    coarse = coarse[order]

    model = KMeansModel(
        mean=mean,
        components=components,
        fine_centroids=fine_centroids,
        fine_to_cluster=fine_to_cluster,
        centroids=coarse,
        fine=int(fine),
        seed=int(seed),
        input=_rows_described(source, rows.dtype, pixels),
        source=source,
    )
    return build_manifest(ds, "kmeans", kmeans_assign(model, feats), seed=int(seed), kmeans=model)


def _rows_described(source: str, dtype, width: int) -> str:
    """KMeansModel.input: what the PCA reads, where it is not uint8 pixels."""
    if source == CAPTIONS:
        return f"pooled embeddings of each image's name, {width} wide"
    return "" if dtype == np.uint8 else f"latents flattened to {width} (channels first, row-major)"


def check_same_rows(ds, features) -> None:
    """`features` holds the same samples as `ds`, row for row: one is the other's latent dataset (the
    name "<dataset>~<encoder_id>"), or its caption features (ddm.ops.data.caption_features), of the
    same split, with the same labels."""
    names = {ds.name, features.name}
    related = features.name == CAPTIONS or any(
        split_latent_name(n) and split_latent_name(n)[0] in names for n in names
    )
    same = related and ds.split == features.split and np.array_equal(ds.labels, features.labels)
    if not same:
        raise ConfigError(
            expected(
                f"features of the same rows as {ds.name} {ds.split}: its latent dataset (or, for a latent "
                "dataset, its pixels), or its captions, of that split",
                f"{features.name} {features.split}",
            )
        )


def make_partition(
    ds: Dataset, spec: PartitionSpec | str, *, seed: int = 0, fine: int = 64, dims: int = 50, features=None
) -> PartitionManifest:
    """Dispatch a --by value to the partition function (features: kmeans's, see partition_kmeans)."""
    if isinstance(spec, str):
        spec = parse_by(spec, len(ds.classes))
    if spec.method == "all":
        return partition_one(ds)
    if spec.method == "labels":
        return partition_labels(ds, [list(g) for g in spec.groups])
    if spec.method == "kmeans":
        return partition_kmeans(ds, spec.k, fine=fine, seed=seed, dims=dims, features=features)
    return partition_random(ds, spec.k, seed=seed)


def assign_clusters(
    manifest: PartitionManifest, images: np.ndarray, labels: np.ndarray | None = None
) -> np.ndarray:
    """Cluster ids int64 [N] of new samples by the manifest's rule.

    images [N, ...] as the dataset the k-means reads holds them (kmeans): uint8 pixels, or float32
    latents of a latent dataset (manifest.kmeans.source names it when it is not the manifest's own);
    labels int [N] (labels method).
    """
    if manifest.method == "random":
        raise ConfigError(
            "a random partition has no assignment rule for new samples: its shards are a seeded "
            "shuffle of the split's indices; use manifest.assignments for the split's own samples, "
            "or partition by labels or kmeans"
        )
    if manifest.method == "labels":
        if labels is None:
            raise ConfigError(expected("labels for a labels partition", None))
        labels = np.asarray(labels, dtype=np.int64)
        classes = len(manifest.clusters[0].label_counts)  # the dataset's classes
        if labels.size and (labels.min() < 0 or labels.max() >= classes):
            raise ConfigError(expected(f"labels in 0..{classes - 1}", (labels.min(), labels.max())))
        table = np.full(classes, -1, dtype=np.int64)
        for c in manifest.clusters:
            table[list(c.labels)] = c.id
        return table[labels]
    images = np.asarray(images)
    pixels = manifest.kmeans.mean.shape[0]  # what the manifest's PCA reads
    if (
        images.dtype not in (np.uint8, np.float32)
        or images.ndim < 2
        or int(np.prod(images.shape[1:])) != pixels
    ):
        want = (
            f"images uint8 (pixels) or float32 (latents) [N, ...] of {pixels} numbers each (as its k-means)"
        )
        raise ConfigError(expected(want, f"{images.dtype} {images.shape}"))
    return kmeans_assign(manifest.kmeans, kmeans_features(manifest.kmeans, images))
