"""What a partition looks like: a text table of its clusters, and a picture of some of their samples."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ddm.ops.data.dataset import Dataset
from ddm.ops.data.partition_spec import format_labels
from ddm.schema.flow import NUM_CLASSES
from ddm.schema.partition import PartitionManifest


def summary(manifest: PartitionManifest, class_names: tuple[str, ...] | None = None) -> str:
    """A small text table: per-cluster counts and label histograms."""
    classes = len(manifest.clusters[0].label_counts)  # the dataset's (10 for MNIST)
    head = f"{'cluster':>7} {'count':>6} {'share':>6}  " + " ".join(f"{c:>5}" for c in range(classes))
    lines = [
        f"partition {manifest.id}: {manifest.dataset} {manifest.split}, method {manifest.method}, "
        f"{manifest.num_clusters} cluster(s), {len(manifest)} samples",
        head,
    ]
    total = len(manifest)
    for c in manifest.clusters:
        row = f"{c.id:>7} {c.count:>6} {100 * c.count / total:>5.1f}%  "
        row += " ".join(f"{n:>5}" for n in c.label_counts)
        if c.labels is not None:
            row += f"   labels {format_labels(c.labels)}"
        lines.append(row)
    if class_names and class_names != tuple(str(i) for i in range(NUM_CLASSES)):
        lines.append("classes: " + ", ".join(f"{i}={n}" for i, n in enumerate(class_names)))
    return "\n".join(lines)


def preview_grid(manifest: PartitionManifest, ds: Dataset, per_cluster: int = 8, gap: int = 2) -> np.ndarray:
    """uint8 [H, W] (grey datasets) or [H, W, 3] (channel-first RGB ones, emoji): one row per cluster,
    `per_cluster` samples spread evenly over the cluster."""
    manifest.check_dataset(ds)
    K = manifest.num_clusters
    rgb = ds.images.ndim == 4
    h, w = ds.images.shape[-2:]
    H = K * h + (K + 1) * gap
    W = per_cluster * w + (per_cluster + 1) * gap
    grid = np.full((H, W, 3) if rgb else (H, W), 64, dtype=np.uint8)
    for k in range(K):
        idx = manifest.indices(k)
        pick = idx[np.linspace(0, len(idx) - 1, num=min(per_cluster, len(idx))).round().astype(int)]
        for j, i in enumerate(pick):
            y, x = gap + k * (h + gap), gap + j * (w + gap)
            grid[y : y + h, x : x + w] = ds.images[i].transpose(1, 2, 0) if rgb else ds.images[i]
    return grid


def save_preview(manifest: PartitionManifest, ds: Dataset, path: str | Path) -> Path:
    """preview_grid as a PNG, pixels doubled."""
    from PIL import Image

    grid = preview_grid(manifest, ds)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(grid).resize((grid.shape[1] * 2, grid.shape[0] * 2), Image.NEAREST).save(path)
    return path


def class_grid(images: np.ndarray, labels: np.ndarray, num_classes: int, per_class: int = 12, gap: int = 2):
    """uint8 [H, W, 3] (or [H, W] for grey images): one row per class, `per_class` samples spread evenly
    over the class (in dataset order).

    images uint8 [N, 3, h, w] (channel-first RGB) or [N, h, w]; the gaps are dark grey.
    """
    images = np.asarray(images)
    rgb = images.ndim == 4
    h, w = images.shape[-2:]
    H = num_classes * h + (num_classes + 1) * gap
    W = per_class * w + (per_class + 1) * gap
    grid = np.full((H, W, 3) if rgb else (H, W), 40, dtype=np.uint8)
    for k in range(num_classes):
        idx = np.flatnonzero(np.asarray(labels) == k)
        pick = (
            idx[np.linspace(0, len(idx) - 1, num=min(per_class, len(idx))).round().astype(int)]
            if len(idx)
            else idx
        )
        for j, i in enumerate(pick):
            y, x = gap + k * (h + gap), gap + j * (w + gap)
            grid[y : y + h, x : x + w] = images[i].transpose(1, 2, 0) if rgb else images[i]
    return grid


def save_class_grid(images: np.ndarray, labels: np.ndarray, num_classes: int, path: str | Path, **kw) -> Path:
    """class_grid as a PNG."""
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(class_grid(images, labels, num_classes, **kw)).save(path, optimize=True)
    return path
