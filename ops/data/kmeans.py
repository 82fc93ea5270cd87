"""numpy PCA and k-means (k-means++ seeds, Lloyd's iterations, optionally weighted), and the rule
that places a sample in a k-means partition's cluster (ddm.schema.partition.KMeansModel)."""

from __future__ import annotations

import numpy as np

from ddm.schema.errors import ConfigError, expected
from ddm.schema.partition import KMeansModel

_CHUNK = 8192  # rows per block, to bound memory on the 60k-image train split


def _pixels(images: np.ndarray) -> np.ndarray:
    """uint8 [n, ...] (28x28 grey, [C, H, W] colour) -> float64 [n, P] in [-1, 1], P numbers per image;
    float latents (a latent dataset, ddm.ops.data.latents) as they are: k-means on learned features."""
    flat = images.reshape(images.shape[0], -1).astype(np.float64)
    return flat / 127.5 - 1.0 if images.dtype == np.uint8 else flat


def pca_fit(images: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """mean [P], components [dims, P] (top eigenvectors of the pixel covariance, sign-fixed); P numbers
    per image (784 for 28x28 grey, 3072 for 3x32x32)."""
    n = images.shape[0]
    pixels = int(np.prod(images.shape[1:]))
    total = np.zeros(pixels)
    for i in range(0, n, _CHUNK):
        total += _pixels(images[i : i + _CHUNK]).sum(axis=0)
    mean = total / n
    cov = np.zeros((pixels, pixels))
    for i in range(0, n, _CHUNK):
        x = _pixels(images[i : i + _CHUNK]) - mean
        cov += x.T @ x
    cov /= max(n - 1, 1)
    _, vecs = np.linalg.eigh(cov)  # ascending eigenvalues
    components = vecs[:, ::-1][:, :dims].T.copy()
    # Eigenvector signs are arbitrary; make the largest-magnitude entry positive for reproducibility.
    flip = np.sign(components[np.arange(dims), np.abs(components).argmax(axis=1)])
    components *= flip[:, None]
    return mean, components


def pca_project(images: np.ndarray, mean: np.ndarray, components: np.ndarray) -> np.ndarray:
    """uint8 [n, ...] (P numbers per image, as pca_fit read) -> float64 [n, D]."""
    out = np.empty((images.shape[0], components.shape[0]))
    for i in range(0, images.shape[0], _CHUNK):
        out[i : i + _CHUNK] = (_pixels(images[i : i + _CHUNK]) - mean) @ components.T
    return out


def sqdist(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Squared euclidean distances [n, k] (clamped at 0 against rounding)."""
    d = (x * x).sum(axis=1)[:, None] - 2.0 * (x @ c.T) + (c * c).sum(axis=1)[None, :]
    return np.maximum(d, 0.0)


def nearest(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """int64 [n]: index of the nearest row of c for each row of x (ties -> lowest index)."""
    out = np.empty(x.shape[0], dtype=np.int64)
    for i in range(0, x.shape[0], _CHUNK):
        out[i : i + _CHUNK] = sqdist(x[i : i + _CHUNK], c).argmin(axis=1)
    return out


def _kmeanspp(x: np.ndarray, k: int, rng: np.random.Generator, w: np.ndarray) -> np.ndarray:
    """k-means++ seeding (D^2 sampling, weighted)."""
    first = rng.choice(x.shape[0], p=w / w.sum())
    cents = [x[first]]
    d2 = sqdist(x, x[first][None])[:, 0]
    for _ in range(1, k):
        p = w * d2
        # All remaining mass at distance 0 (duplicates): fall back to weights alone.
        idx = rng.choice(x.shape[0], p=p / p.sum()) if p.sum() > 0 else rng.choice(x.shape[0], p=w / w.sum())
        cents.append(x[idx])
        d2 = np.minimum(d2, sqdist(x, x[idx][None])[:, 0])
    return np.array(cents)


def kmeans_fit(
    x: np.ndarray,
    k: int,
    rng: np.random.Generator,
    *,
    weights: np.ndarray | None = None,
    max_iter: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means (optionally weighted) from k-means++ seeds. Returns centroids [k, D], labels [n].

    No cluster is left empty: an empty one takes the point farthest from its centroid. On return
    the labels are each point's nearest centroid unless max_iter ran out.
    """
    n = x.shape[0]
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    if k > n:
        raise ConfigError(expected(f"k <= {n} points", k))
    cents = _kmeanspp(x, k, rng, w)
    labels = np.full(n, -1, dtype=np.int64)
    for _ in range(max_iter):
        d = sqdist(x, cents)
        new = d.argmin(axis=1)
        fixed = False
        for j in range(k):
            if not np.any(new == j):
                # Take the point that is worst served by its current centroid, from a cluster that
                # can spare it.
                counts = np.bincount(new, minlength=k)
                cost = d[np.arange(n), new] * w
                cost[counts[new] <= 1] = -1.0
                new[int(cost.argmax())] = j
                fixed = True
        if not fixed and np.array_equal(new, labels):
            break
        labels = new
        for j in range(k):
            members = labels == j
            cents[j] = np.average(x[members], axis=0, weights=w[members])
    return cents, labels


def kmeans_features(model: KMeansModel, images: np.ndarray) -> np.ndarray:
    """uint8 [N, ...] (the partition dataset's images) -> float64 [N, D]: the model's PCA features."""
    return pca_project(images, model.mean, model.components)


def kmeans_assign(model: KMeansModel, feats: np.ndarray) -> np.ndarray:
    """int64 [N]: the cluster of each feature row: its nearest fine centroid's cluster."""
    return model.fine_to_cluster[nearest(feats, model.fine_centroids)]
