"""The samples a freshly trained router is scored on: held-out data placed by the manifest's rule, or,
for random shards (no rule for new samples) or a split with nothing held out, a sample of the training
split, said so."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.ops.data.caption_features import CAPTIONS, caption_features
from ddm.ops.data.dataset import Dataset, load_dataset
from ddm.ops.data.partitions import assign_clusters
from ddm.ops.data.splits import heldout_split
from ddm.schema.partition import PartitionManifest

TRAINING_SAMPLE = 2000  # images of the training split scored when there is no held-out rule


@dataclass(frozen=True)
class RouterEvalSet:
    images: np.ndarray  # float32 [N,1,32,32]
    labels: np.ndarray  # int64 [N]
    clusters: np.ndarray  # int64 [N]: each image's true cluster
    where: str  # what the images are, for reports and plots
    split: str | None = None  # the held-out split they are, row for row (None: a sample of the training rows)


def router_eval_set(
    manifest: PartitionManifest,
    dataset: Dataset,
    eval_split: str | None = None,
    data_dir: str | Path | None = None,
    prompt_embeddings: str | None = None,
) -> RouterEvalSet:
    """eval_split (default: the rest of the manifest's split) of the manifest's dataset, placed by
    the manifest's rule; the training `dataset` itself when there is no held-out split or rule.
    prompt_embeddings: where a caption partition's k-means finds the names' embeddings (a file of `ddm
    data embed-captions`; None: the encoder)."""
    eval_split = eval_split or heldout_split(manifest.split)
    if eval_split is not None and manifest.method != "random":
        held = load_dataset(manifest.dataset, eval_split, data_dir)
        source = manifest.kmeans.source if manifest.kmeans is not None else ""
        # the rows the k-means reads: the same held-out split of its source dataset, where it has one
        rows = held.images
        if source == CAPTIONS:
            rows = caption_features(manifest.dataset, eval_split, data_dir, prompt_embeddings).images
        elif source:
            rows = load_dataset(source, eval_split, data_dir).images
        return RouterEvalSet(
            held.as_model_input(),
            np.asarray(held.labels),
            assign_clusters(manifest, rows, held.labels),
            f"held-out {manifest.dataset} {held.split}",
            eval_split,
        )
    idx = np.random.default_rng(0).permutation(len(dataset))[:TRAINING_SAMPLE]
    why = (
        f"{manifest.method} shards have no rule for new samples"
        if manifest.method == "random"
        else f"{manifest.dataset} has no split held out from {manifest.split!r}"
    )
    return RouterEvalSet(
        dataset.as_model_input()[idx],
        np.asarray(dataset.labels)[idx],
        manifest.assignments[idx],
        f"{len(idx)} training samples ({why})",
    )
