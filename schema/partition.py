"""The partition manifest: the one file decentralized training shares (JSON, version 1).

Each expert trains on `manifest.indices(k)` of the split the manifest names (checked by hash), and
the router learns p(cluster | x_t, t, y) from the same `assignments`. The manifest's `id` is a hash
of its content, so an edited or corrupted file is refused on read.

    PartitionManifest.encode() / decode(text)   the JSON text, checked on the way in
    write_manifest(path, manifest)              the one writer (atomic)
    read_manifest(path)                         the reader

How manifests are made (label groups, k-means, random shards) lives in ddm.ops.data.partitions.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ddm.schema.atomic import write_text_atomic
from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NUM_CLASSES

MANIFEST_VERSION = 1
METHODS = ("labels", "kmeans", "random")
PIXELS = 28 * 28  # MNIST's and Fashion-MNIST's: other datasets' pixel counts are their own (pca_input)
PCA_INPUT = "28x28 pixels scaled to [-1, 1], flattened to 784 (row-major)"


def pca_input(pixels: int) -> str:
    """What the manifest says its PCA reads: PCA_INPUT for 784 grey pixels (so MNIST manifests keep their
    bytes and ids), else the count of numbers per image (channels first, then rows)."""
    if pixels == PIXELS:
        return PCA_INPUT
    return f"images scaled to [-1, 1], flattened to {pixels} (channels first, row-major)"


ASSIGN_RULE = "nearest fine centroid (euclidean, feature space), then fine_to_cluster"
REQUIRED_KEYS = ("id", "dataset", "split", "data_sha256", "method", "num_clusters", "clusters", "assignments")
# What a checkpoint records about the partition it was trained on (PartitionManifest.identity()).
IDENTITY_KEYS = ("id", "dataset", "split", "data_sha256", "method", "num_clusters")


def check_label_groups(groups: list[list[int]], num_classes: int = NUM_CLASSES) -> None:
    """Every label 0..num_classes-1 (the dataset's classes: 10 for MNIST) exactly once across non-empty
    groups; ConfigError naming what is wrong."""
    flat = [int(x) for g in groups for x in g]
    if any(len(g) == 0 for g in groups):
        raise ConfigError(expected("non-empty label groups", groups))
    out_of_range = sorted({x for x in flat if not 0 <= x < num_classes})
    missing = sorted(set(range(num_classes)) - set(flat))
    dupes = sorted({x for x in flat if flat.count(x) > 1})
    problems = []
    if out_of_range:
        problems.append(f"labels outside 0-{num_classes - 1}: {out_of_range}")
    if missing:
        problems.append(f"missing labels: {missing}")
    if dupes:
        problems.append(f"labels in more than one group: {dupes}")
    if problems:
        raise ConfigError(
            f"expected every label 0-{num_classes - 1} in exactly one group (e.g. 'labels:0-4,5-9'), "
            f"got {groups}: " + "; ".join(problems)
        )


@dataclass(frozen=True)
class ClusterInfo:
    id: int
    count: int
    label_counts: tuple[int, ...]  # one per class of the dataset (10 for MNIST)
    labels: tuple[int, ...] | None = None  # the label set, method "labels" only

    def to_json(self) -> dict:
        out = {"id": self.id, "count": self.count, "label_counts": list(self.label_counts)}
        if self.labels is not None:
            out["labels"] = list(self.labels)
        return out

    @classmethod
    def from_json(cls, c: dict) -> ClusterInfo:
        labels = c.get("labels")
        return cls(
            id=int(c["id"]),
            count=int(c["count"]),
            label_counts=tuple(int(x) for x in c["label_counts"]),
            labels=tuple(int(x) for x in labels) if labels is not None else None,
        )


@dataclass(frozen=True, eq=False)
class KMeansModel:
    """What it takes to place a new sample: PCA features, then nearest fine centroid -> its cluster.

    mean float64 [P], components float64 [D, P] (P numbers per image: 784 for MNIST's 28x28 grey, 3072
    for 3x32x32 RGB), fine_centroids [F, D], fine_to_cluster int64 [F],
    centroids [K, D] (the merged centroids: size-weighted means of each cluster's fine centroids).
    The arithmetic lives in ddm.ops.data.kmeans.
    """

    mean: np.ndarray
    components: np.ndarray
    fine_centroids: np.ndarray
    fine_to_cluster: np.ndarray
    centroids: np.ndarray
    fine: int
    seed: int
    # what the PCA reads (pca_input's words by default); and the dataset whose rows it reads when that
    # is not the manifest's own: a latent dataset "<dataset>~<encoder_id>" of the same split (k-means on
    # learned features), or the pixel dataset of a latent one (k-means on pixels). "" = the manifest's.
    input: str = ""
    source: str = ""

    def to_json(self) -> dict:
        features = {
            "kind": "pca",
            "input": self.input or pca_input(int(self.mean.shape[0])),
            "dims": int(self.components.shape[0]),
            "mean": self.mean.tolist(),
            "components": self.components.tolist(),
        }
        if self.source:  # absent otherwise: every manifest before sources keeps its bytes and id
            features["source"] = self.source
        return {
            "features": features,
            "fine": self.fine,
            "seed": self.seed,
            "assign_rule": ASSIGN_RULE,
            "centroids": self.centroids.tolist(),
            "fine_centroids": self.fine_centroids.tolist(),
            "fine_to_cluster": self.fine_to_cluster.tolist(),
        }

    @classmethod
    def from_json(cls, d: dict, k: int) -> KMeansModel:
        try:
            feat = d["features"]
            if feat.get("kind") != "pca":
                raise ConfigError(expected("features.kind 'pca'", feat.get("kind")))
            model = cls(
                mean=np.asarray(feat["mean"], dtype=np.float64),
                components=np.asarray(feat["components"], dtype=np.float64),
                fine_centroids=np.asarray(d["fine_centroids"], dtype=np.float64),
                fine_to_cluster=np.asarray(d["fine_to_cluster"], dtype=np.int64),
                centroids=np.asarray(d["centroids"], dtype=np.float64),
                fine=int(d["fine"]),
                seed=int(d["seed"]),
                input=str(feat.get("input", "")),
                source=str(feat.get("source", "")),
            )
        except ConfigError:
            raise
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(
                f"manifest kmeans section: {expected('mean, components, centroids ...', exc)}"
            ) from exc
        model._check_shapes(k)
        return model

    def _check_shapes(self, k: int) -> None:
        mean, components, fine, to_cluster, centroids = (
            self.mean,
            self.components,
            self.fine_centroids,
            self.fine_to_cluster,
            self.centroids,
        )
        D = components.shape[0] if components.ndim == 2 else -1
        shapes_ok = (
            mean.ndim == 1
            and mean.size > 0
            and components.ndim == 2
            and components.shape[1] == mean.shape[0]
            and fine.ndim == 2
            and fine.shape[1] == D
            and to_cluster.shape == (fine.shape[0],)
            and centroids.shape == (k, D)
            and to_cluster.size > 0
            and to_cluster.min() >= 0
            and to_cluster.max() < k
        )
        if not shapes_ok:
            want = (
                f"mean [P], components [D, P], fine_centroids [F, D], "
                f"fine_to_cluster [F] in 0..{k - 1}, centroids [{k}, D]"
            )
            got = (mean.shape, components.shape, fine.shape, to_cluster.shape, centroids.shape)
            raise ConfigError("manifest kmeans section: " + expected(want, got))


@dataclass(frozen=True, eq=False)
class PartitionManifest:
    """A partition of one dataset split into K clusters.

    assignments int64 [N]: cluster id of every sample of the split, in split order (read-only).
    """

    id: str
    dataset: str
    split: str
    data_sha256: str
    method: str
    num_clusters: int
    clusters: tuple[ClusterInfo, ...]
    assignments: np.ndarray
    seed: int | None = None  # method "random" (and kmeans, also inside `kmeans`)
    kmeans: KMeansModel | None = None
    version: int = MANIFEST_VERSION

    def __post_init__(self) -> None:
        assignments = np.array(self.assignments, dtype=np.int64, copy=True)
        assignments.setflags(write=False)
        object.__setattr__(self, "assignments", assignments)

    def with_content_id(self) -> PartitionManifest:
        """This manifest with `id` set to the hash of its content (how a new manifest gets its id)."""
        return replace(self, id=self.content_id())

    def content_id(self) -> str:
        body = self.to_json()
        body.pop("id")
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    # -- encode / decode ----------------------------------------------------------------------

    def to_json(self) -> dict:
        out: dict = {
            "version": self.version,
            "id": self.id,
            "dataset": self.dataset,
            "split": self.split,
            "data_sha256": self.data_sha256,
            "method": self.method,
            "num_clusters": self.num_clusters,
            "clusters": [c.to_json() for c in self.clusters],
        }
        if self.seed is not None:
            out["seed"] = self.seed
        if self.kmeans is not None:
            out["kmeans"] = self.kmeans.to_json()
        out["assignments"] = self.assignments.tolist()
        return out

    def encode(self) -> str:
        """The manifest file's text: one line per top-level key keeps it diffable without spelling
        out 8,000 numbers one per line."""
        body = self.to_json()
        lines = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in body.items()]
        return "{\n" + ",\n".join(lines) + "\n}\n"

    @classmethod
    def decode(cls, text: str, source: str = "<manifest>") -> PartitionManifest:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source}: {expected('a JSON partition manifest', str(exc))}") from exc
        return cls.from_json(d, source)

    @classmethod
    def from_json(cls, d: object, source: str = "<manifest>") -> PartitionManifest:
        """A manifest from its JSON object, every invariant checked (id = content hash included)."""
        _check_header(d, source)
        k = d["num_clusters"]
        assignments = _decode_assignments(d["assignments"], k, source)
        clusters = _decode_clusters(d["clusters"], np.bincount(assignments, minlength=k), source)
        method = d["method"]
        if method == "labels":
            if any(c.labels is None for c in clusters):
                raise _bad(
                    source, "a label set in every cluster of a labels manifest", "a cluster without 'labels'"
                )
            check_label_groups([list(c.labels) for c in clusters], len(clusters[0].label_counts))
        if method == "kmeans" and "kmeans" not in d:
            raise _bad(source, "a 'kmeans' section in a kmeans manifest", "none")
        seed = d.get("seed")
        if method == "random" and not isinstance(seed, int):
            raise _bad(source, "an integer 'seed' in a random manifest", seed)
        m = cls(
            id=str(d["id"]),
            dataset=str(d["dataset"]),
            split=str(d["split"]),
            data_sha256=str(d["data_sha256"]),
            method=method,
            num_clusters=k,
            clusters=clusters,
            assignments=assignments,
            seed=seed,
            kmeans=KMeansModel.from_json(d["kmeans"], k) if method == "kmeans" else None,
        )
        got_id = m.content_id()
        if got_id != m.id:
            raise _bad(
                source,
                f"content hash {m.id} (the manifest's id)",
                f"{got_id}: the file was edited or is corrupt",
            )
        return m

    # -- use ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.assignments.shape[0])

    def identity(self) -> dict:
        """What a checkpoint records about the partition it was trained on."""
        return {key: getattr(self, key) for key in IDENTITY_KEYS}

    def indices(self, cluster_id: int) -> np.ndarray:
        """int64 [n_k]: positions in the split of the samples of one cluster (ascending)."""
        if not 0 <= int(cluster_id) < self.num_clusters:
            raise ConfigError(expected(f"a cluster id in 0..{self.num_clusters - 1}", cluster_id))
        return np.flatnonzero(self.assignments == int(cluster_id)).astype(np.int64)

    def check_dataset(self, ds) -> None:
        """Refuse data other than what was partitioned: ds has the name, split, sha256 and length of
        a loaded split (ddm.ops.data.dataset.Dataset)."""
        if (ds.name, ds.split) != (self.dataset, self.split):
            raise ConfigError(
                f"partition {self.id} was made from {self.dataset} {self.split}, "
                f"got {ds.name} {ds.split}: load the split the manifest names"
            )
        if ds.sha256 != self.data_sha256:
            raise ConfigError(
                f"partition {self.id}: {self.dataset} {self.split} "
                f"{expected(f'data sha256 {self.data_sha256[:16]}...', ds.sha256[:16] + '...')}; "
                "the data files differ from those the manifest was built from"
            )
        if len(ds) != len(self):
            raise ConfigError(expected(f"{len(self)} samples", len(ds)))


def _bad(source: str, what: str, got: object) -> ConfigError:
    return ConfigError(f"{source}: {expected(what, got)}")


def _check_header(d: object, source: str) -> None:
    if not isinstance(d, dict):
        raise _bad(source, "a JSON object", type(d).__name__)
    if d.get("version") != MANIFEST_VERSION:
        raise _bad(source, f"manifest version {MANIFEST_VERSION}", d.get("version"))
    missing = [key for key in REQUIRED_KEYS if key not in d]
    if missing:
        raise _bad(source, f"keys {list(REQUIRED_KEYS)}", f"missing {missing}")
    if d["method"] not in METHODS:
        raise _bad(source, f"method in {METHODS}", d["method"])
    k = d["num_clusters"]
    if not isinstance(k, int) or k < 1:
        raise _bad(source, "num_clusters >= 1", k)


def _decode_assignments(raw: object, k: int, source: str) -> np.ndarray:
    try:
        assignments = np.asarray(raw, dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise _bad(source, "assignments: a list of ints", str(exc)) from exc
    if assignments.ndim != 1 or assignments.size == 0:
        raise _bad(source, "assignments [N] with N >= 1", assignments.shape)
    if assignments.min() < 0 or assignments.max() >= k:
        raise _bad(source, f"assignments in 0..{k - 1}", (int(assignments.min()), int(assignments.max())))
    return assignments


def _decode_clusters(raw: object, counts: np.ndarray, source: str) -> tuple[ClusterInfo, ...]:
    """The clusters list, each checked against the counts the assignments imply."""
    k = len(counts)
    if not isinstance(raw, list) or len(raw) != k:
        raise _bad(source, f"{k} clusters", len(raw) if isinstance(raw, list) else raw)
    clusters = []
    for i, c in enumerate(raw):
        try:
            info = ClusterInfo.from_json(c)
        except (KeyError, TypeError, ValueError) as exc:
            raise _bad(source, "clusters[i] with id, count, label_counts", c) from exc
        classes = len(clusters[0].label_counts) if clusters else len(info.label_counts)
        if (
            info.id != i
            or info.count != counts[i]
            or not info.label_counts
            or len(info.label_counts) != classes
        ):
            raise _bad(
                source,
                f"clusters[{i}] with id {i}, count {counts[i]} (from assignments), "
                f"{classes} label counts (one per class, as every cluster)",
                c if len(str(c)) < 200 else {"id": info.id, "count": info.count},
            )
        if sum(info.label_counts) != info.count:
            raise _bad(
                source, f"clusters[{i}].label_counts summing to count {info.count}", sum(info.label_counts)
            )
        clusters.append(info)
    return tuple(clusters)


def write_manifest(path: str | Path, manifest: PartitionManifest) -> Path:
    """The one writer of manifest files: the encoded text to a temporary file, renamed over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, manifest.encode())


def read_manifest(path: str | Path) -> PartitionManifest:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read partition manifest {path}: {exc.strerror or exc}") from exc
    return PartitionManifest.decode(text, str(path))
