"""Partitions of a dataset split into K expert clusters, and the manifest that records them.

The manifest is the only thing decentralized training shares: each expert trains on
`manifest.indices(k)` of the split it names (checked by hash), and the router learns
p(cluster | x_t, t, y) from the same `assignments`. The monolith is the same training command on a
one-cluster manifest (`partition_one`).

Methods:
  labels   clusters are label sets ("labels:0-4,5-9"); the oracle router is label -> cluster.
  kmeans   two-stage clustering as in the DDM paper: many fine k-means centroids, then the fine
           centroids merged into K clusters by k-means weighted by fine-cluster size.
  random   balanced random shards; a baseline with no assignment rule for new samples.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NUM_CLASSES

from .data import Dataset, label_histogram

MANIFEST_VERSION = 1
METHODS = ("labels", "kmeans", "random")
PCA_INPUT = "28x28 pixels scaled to [-1, 1], flattened to 784 (row-major)"

# ---------------------------------------------------------------------------------------------
# Specs: "labels:0-4,5-9" | "kmeans:K" | "random:K" | "all"
# ---------------------------------------------------------------------------------------------

_BY_EXAMPLE = "'labels:0-4,5-9', 'labels:0+2+4-6,1+3+7-9', 'kmeans:4', 'random:4' or 'all'"


@dataclass(frozen=True)
class PartitionSpec:
    """A parsed --by value. groups is set for method "labels" only."""

    method: str  # "labels" | "kmeans" | "random" | "all"
    k: int
    groups: tuple[tuple[int, ...], ...] | None = None


def parse_label_groups(text: str) -> list[list[int]]:
    """'0-4,5-9' -> [[0..4], [5..9]]; '0+2+4-6,1+3+7-9' -> [[0,2,4,5,6], [1,3,7,8,9]].

    Groups are separated by ',', items inside a group by '+', an item is a label or a range 'a-b'.
    Every label 0..9 must appear exactly once.
    """
    groups: list[list[int]] = []
    for group_text in text.split(","):
        group: list[int] = []
        for item in group_text.split("+"):
            item = item.strip()
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
            if m is None:
                raise ConfigError(expected(f"label groups like {_BY_EXAMPLE}", f"'{item}' in '{text}'"))
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) is not None else lo
            if hi < lo:
                raise ConfigError(expected("a range a-b with a <= b", item))
            group.extend(range(lo, hi + 1))
        groups.append(group)
    check_label_groups(groups)
    return groups


def check_label_groups(groups: list[list[int]]) -> None:
    """Every label 0..9 exactly once across non-empty groups; ConfigError naming what is wrong."""
    flat = [int(x) for g in groups for x in g]
    if any(len(g) == 0 for g in groups):
        raise ConfigError(expected("non-empty label groups", groups))
    out_of_range = sorted({x for x in flat if not 0 <= x < NUM_CLASSES})
    missing = sorted(set(range(NUM_CLASSES)) - set(flat))
    dupes = sorted({x for x in flat if flat.count(x) > 1})
    problems = []
    if out_of_range:
        problems.append(f"labels outside 0-{NUM_CLASSES - 1}: {out_of_range}")
    if missing:
        problems.append(f"missing labels: {missing}")
    if dupes:
        problems.append(f"labels in more than one group: {dupes}")
    if problems:
        raise ConfigError(
            f"expected every label 0-{NUM_CLASSES - 1} in exactly one group (e.g. {_BY_EXAMPLE}), "
            f"got {groups}: " + "; ".join(problems)
        )


def parse_by(spec: str) -> PartitionSpec:
    """Parse a --by value: 'labels:0-4,5-9' | 'kmeans:K' | 'random:K' | 'all'."""
    text = spec.strip() if isinstance(spec, str) else ""
    if text == "all":
        return PartitionSpec("all", 1, (tuple(range(NUM_CLASSES)),))
    method, sep, arg = text.partition(":")
    if not sep or method not in METHODS:
        raise ConfigError(expected(f"a partition like {_BY_EXAMPLE}", spec))
    if method == "labels":
        groups = parse_label_groups(arg)
        return PartitionSpec("labels", len(groups), tuple(tuple(g) for g in groups))
    if not re.fullmatch(r"\d+", arg.strip()) or int(arg) < 1:
        raise ConfigError(expected(f"{method}:K with an integer K >= 1, e.g. {method}:4", spec))
    return PartitionSpec(method, int(arg))


# ---------------------------------------------------------------------------------------------
# The manifest
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterInfo:
    id: int
    count: int
    label_counts: tuple[int, ...]  # 10 ints
    labels: tuple[int, ...] | None = None  # the label set, method "labels" only

    def to_json(self) -> dict:
        out = {"id": self.id, "count": self.count, "label_counts": list(self.label_counts)}
        if self.labels is not None:
            out["labels"] = list(self.labels)
        return out


@dataclass(frozen=True, eq=False)
class KMeansModel:
    """What it takes to place a new sample: PCA features, then nearest fine centroid -> its cluster.

    mean float64 [784], components float64 [D, 784], fine_centroids [F, D], fine_to_cluster int64 [F],
    centroids [K, D] (the merged centroids: size-weighted means of each cluster's fine centroids).
    """

    mean: np.ndarray
    components: np.ndarray
    fine_centroids: np.ndarray
    fine_to_cluster: np.ndarray
    centroids: np.ndarray
    fine: int
    seed: int

    def features(self, images: np.ndarray) -> np.ndarray:
        """uint8 [N, 28, 28] -> float64 [N, D]."""
        return pca_project(images, self.mean, self.components)

    def assign_features(self, feats: np.ndarray) -> np.ndarray:
        return self.fine_to_cluster[nearest(feats, self.fine_centroids)]

    def to_json(self) -> dict:
        return {
            "features": {
                "kind": "pca",
                "input": PCA_INPUT,
                "dims": int(self.components.shape[0]),
                "mean": self.mean.tolist(),
                "components": self.components.tolist(),
            },
            "fine": self.fine,
            "seed": self.seed,
            "assign_rule": "nearest fine centroid (euclidean, feature space), then fine_to_cluster",
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
            mean = np.asarray(feat["mean"], dtype=np.float64)
            components = np.asarray(feat["components"], dtype=np.float64)
            fine_centroids = np.asarray(d["fine_centroids"], dtype=np.float64)
            fine_to_cluster = np.asarray(d["fine_to_cluster"], dtype=np.int64)
            centroids = np.asarray(d["centroids"], dtype=np.float64)
            model = cls(
                mean, components, fine_centroids, fine_to_cluster, centroids, int(d["fine"]), int(d["seed"])
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(
                f"manifest kmeans section: {expected('mean, components, centroids ...', exc)}"
            ) from exc
        D = components.shape[0] if components.ndim == 2 else -1
        shapes_ok = (
            mean.shape == (784,)
            and components.ndim == 2
            and components.shape[1] == 784
            and fine_centroids.ndim == 2
            and fine_centroids.shape[1] == D
            and fine_to_cluster.shape == (fine_centroids.shape[0],)
            and centroids.shape == (k, D)
            and fine_to_cluster.size > 0
            and fine_to_cluster.min() >= 0
            and fine_to_cluster.max() < k
        )
        if not shapes_ok:
            raise ConfigError(
                "manifest kmeans section: "
                + expected(
                    f"mean [784], components [D, 784], fine_centroids [F, D], "
                    f"fine_to_cluster [F] in 0..{k - 1}, centroids [{k}, D]",
                    (
                        mean.shape,
                        components.shape,
                        fine_centroids.shape,
                        fine_to_cluster.shape,
                        centroids.shape,
                    ),
                )
            )
        return model


@dataclass(frozen=True, eq=False)
class Manifest:
    """A partition of one dataset split into K clusters; saved as JSON (version 1).

    assignments int64 [N]: cluster id of every sample of the split, in split order.
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

    # -- building -----------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        ds: Dataset,
        method: str,
        assignments: np.ndarray,
        *,
        label_sets: list[list[int]] | None = None,
        seed: int | None = None,
        kmeans: KMeansModel | None = None,
    ) -> Manifest:
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
                    label_counts=tuple(int(x) for x in label_histogram(ds.labels[mask])),
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
        draft = cls(
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
        return draft._with_id()

    def _content_hash(self) -> str:
        body = self.to_json()
        body.pop("id")
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def _with_id(self) -> Manifest:
        object.__setattr__(self, "id", self._content_hash())
        self.assignments.setflags(write=False)
        return self

    @classmethod
    def one_cluster(cls, ds: Dataset) -> Manifest:
        """The monolith: every sample in cluster 0 (method "labels" with all ten labels)."""
        return partition_one(ds)

    # -- JSON ---------------------------------------------------------------------------------

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

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # One line per top-level key keeps the file diffable without spelling out 8,000 numbers.
        body = self.to_json()
        lines = [f"  {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in body.items()]
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("{\n" + ",\n".join(lines) + "\n}\n")
        tmp.replace(path)
        return path

    @classmethod
    def from_json(cls, d: object, source: str = "<manifest>") -> Manifest:
        def bad(what: str, got: object) -> ConfigError:
            return ConfigError(f"{source}: {expected(what, got)}")

        if not isinstance(d, dict):
            raise bad("a JSON object", type(d).__name__)
        if d.get("version") != MANIFEST_VERSION:
            raise bad(f"manifest version {MANIFEST_VERSION}", d.get("version"))
        required = (
            "id",
            "dataset",
            "split",
            "data_sha256",
            "method",
            "num_clusters",
            "clusters",
            "assignments",
        )
        missing = [key for key in required if key not in d]
        if missing:
            raise bad(f"keys {list(required)}", f"missing {missing}")
        if d["method"] not in METHODS:
            raise bad(f"method in {METHODS}", d["method"])
        k = d["num_clusters"]
        if not isinstance(k, int) or k < 1:
            raise bad("num_clusters >= 1", k)
        try:
            assignments = np.asarray(d["assignments"], dtype=np.int64)
        except (TypeError, ValueError) as exc:
            raise bad("assignments: a list of ints", str(exc)) from exc
        if assignments.ndim != 1 or assignments.size == 0:
            raise bad("assignments [N] with N >= 1", assignments.shape)
        if assignments.min() < 0 or assignments.max() >= k:
            raise bad(f"assignments in 0..{k - 1}", (int(assignments.min()), int(assignments.max())))
        clusters_raw = d["clusters"]
        if not isinstance(clusters_raw, list) or len(clusters_raw) != k:
            raise bad(f"{k} clusters", len(clusters_raw) if isinstance(clusters_raw, list) else clusters_raw)
        counts = np.bincount(assignments, minlength=k)
        clusters = []
        for i, c in enumerate(clusters_raw):
            try:
                info = ClusterInfo(
                    id=int(c["id"]),
                    count=int(c["count"]),
                    label_counts=tuple(int(x) for x in c["label_counts"]),
                    labels=tuple(int(x) for x in c["labels"]) if c.get("labels") is not None else None,
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise bad("clusters[i] with id, count, label_counts", c) from exc
            if info.id != i or info.count != counts[i] or len(info.label_counts) != NUM_CLASSES:
                raise bad(
                    f"clusters[{i}] with id {i}, count {counts[i]} (from assignments), "
                    f"{NUM_CLASSES} label counts",
                    c if len(str(c)) < 200 else {"id": info.id, "count": info.count},
                )
            if sum(info.label_counts) != info.count:
                raise bad(f"clusters[{i}].label_counts summing to count {info.count}", sum(info.label_counts))
            clusters.append(info)
        if d["method"] == "labels":
            if any(c.labels is None for c in clusters):
                raise bad("a label set in every cluster of a labels manifest", "a cluster without 'labels'")
            check_label_groups([list(c.labels) for c in clusters])
        kmeans = None
        if d["method"] == "kmeans":
            if "kmeans" not in d:
                raise bad("a 'kmeans' section in a kmeans manifest", "none")
            kmeans = KMeansModel.from_json(d["kmeans"], k)
        seed = d.get("seed")
        if d["method"] == "random" and not isinstance(seed, int):
            raise bad("an integer 'seed' in a random manifest", seed)
        m = cls(
            id=str(d["id"]),
            dataset=str(d["dataset"]),
            split=str(d["split"]),
            data_sha256=str(d["data_sha256"]),
            method=d["method"],
            num_clusters=k,
            clusters=tuple(clusters),
            assignments=assignments,
            seed=seed,
            kmeans=kmeans,
        )
        m.assignments.setflags(write=False)
        got_id = m._content_hash()
        if got_id != m.id:
            raise bad(
                f"content hash {m.id} (the manifest's id)", f"{got_id}: the file was edited or is corrupt"
            )
        return m

    @classmethod
    def load(cls, path: str | Path) -> Manifest:
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read partition manifest {path}: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}: {expected('a JSON partition manifest', str(exc))}") from exc
        return cls.from_json(d, str(path))

    # -- use ----------------------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self.assignments.shape[0])

    def indices(self, cluster_id: int) -> np.ndarray:
        """int64 [n_k]: positions in the split of the samples of one cluster (ascending)."""
        if not 0 <= int(cluster_id) < self.num_clusters:
            raise ConfigError(expected(f"a cluster id in 0..{self.num_clusters - 1}", cluster_id))
        return np.flatnonzero(self.assignments == int(cluster_id)).astype(np.int64)

    def assign(self, images: np.ndarray, labels: np.ndarray | None = None) -> np.ndarray:
        """Cluster ids int64 [N] of new samples by the manifest's rule.

        images uint8 [N, 28, 28] (kmeans), labels int [N] (labels method).
        """
        if self.method == "random":
            raise ConfigError(
                "a random partition has no assignment rule for new samples: its shards are a seeded "
                "shuffle of the split's indices; use manifest.assignments for the split's own samples, "
                "or partition by labels or kmeans"
            )
        if self.method == "labels":
            if labels is None:
                raise ConfigError(expected("labels for a labels partition", None))
            labels = np.asarray(labels, dtype=np.int64)
            if labels.size and (labels.min() < 0 or labels.max() >= NUM_CLASSES):
                raise ConfigError(expected(f"labels in 0..{NUM_CLASSES - 1}", (labels.min(), labels.max())))
            table = np.full(NUM_CLASSES, -1, dtype=np.int64)
            for c in self.clusters:
                table[list(c.labels)] = c.id
            return table[labels]
        images = np.asarray(images)
        if images.dtype != np.uint8 or images.ndim != 3 or images.shape[1:] != (28, 28):
            raise ConfigError(expected("images uint8 [N, 28, 28]", f"{images.dtype} {images.shape}"))
        return self.kmeans.assign_features(self.kmeans.features(images))

    def check_dataset(self, ds: Dataset) -> None:
        """Refuse data other than what was partitioned (name, split and bytes)."""
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

    def summary(self, class_names: tuple[str, ...] | None = None) -> str:
        """A small text table: per-cluster counts and label histograms."""
        head = f"{'cluster':>7} {'count':>6} {'share':>6}  " + " ".join(f"{c:>5}" for c in range(NUM_CLASSES))
        lines = [
            f"partition {self.id}: {self.dataset} {self.split}, method {self.method}, "
            f"{self.num_clusters} cluster(s), {len(self)} samples",
            head,
        ]
        total = len(self)
        for c in self.clusters:
            row = f"{c.id:>7} {c.count:>6} {100 * c.count / total:>5.1f}%  "
            row += " ".join(f"{n:>5}" for n in c.label_counts)
            if c.labels is not None:
                row += f"   labels {format_labels(c.labels)}"
            lines.append(row)
        if class_names and class_names != tuple(str(i) for i in range(NUM_CLASSES)):
            lines.append("classes: " + ", ".join(f"{i}={n}" for i, n in enumerate(class_names)))
        return "\n".join(lines)


def format_labels(labels: tuple[int, ...]) -> str:
    """(0, 1, 2, 4, 5) -> '0-2+4-5' (the --by syntax for one group)."""
    parts, run = [], []
    for x in sorted(labels):
        if run and x == run[-1] + 1:
            run.append(x)
        else:
            if run:
                parts.append(run)
            run = [x]
    if run:
        parts.append(run)
    return "+".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in parts)


# ---------------------------------------------------------------------------------------------
# Partition methods
# ---------------------------------------------------------------------------------------------


def partition_labels(ds: Dataset, groups: list[list[int]]) -> Manifest:
    """Cluster k = the samples whose label is in groups[k]; every label in exactly one group."""
    groups = [[int(x) for x in g] for g in groups]
    check_label_groups(groups)
    table = np.empty(NUM_CLASSES, dtype=np.int64)
    for k, g in enumerate(groups):
        table[g] = k
    return Manifest.build(ds, "labels", table[ds.labels], label_sets=groups)


def partition_one(ds: Dataset) -> Manifest:
    """The monolith's manifest: one cluster holding every sample (labels method, all ten labels)."""
    return partition_labels(ds, [list(range(NUM_CLASSES))])


def partition_random(ds: Dataset, K: int, seed: int = 0) -> Manifest:
    """Balanced random shards: sizes differ by at most one."""
    if not 1 <= K <= len(ds):
        raise ConfigError(expected(f"1 <= K <= {len(ds)} samples", K))
    perm = np.random.default_rng(seed).permutation(len(ds))
    assignments = np.empty(len(ds), dtype=np.int64)
    assignments[perm] = np.arange(len(ds)) % K
    return Manifest.build(ds, "random", assignments, seed=int(seed))


def partition_kmeans(ds: Dataset, K: int, fine: int = 64, seed: int = 0, dims: int = 50) -> Manifest:
    """Two-stage k-means, as in the DDM paper: `fine` centroids, merged into K by weighted k-means.

    Features are a PCA of the pixels (scaled to [-1, 1]) to `dims` dimensions. The paper clustered
    DINOv2 embeddings; no pretrained encoder is available offline here, and for MNIST-sized images a
    PCA of the pixels keeps the global layout (stroke positions, overall shape) that decides what a
    denoiser must learn, which is what a cluster should group. Each sample belongs to the cluster of
    its nearest fine centroid (this is also `Manifest.assign`'s rule for new samples, so the router
    and the experts agree); `centroids` are the size-weighted means of each cluster's fine centroids.
    """
    N = len(ds)
    if not 1 <= K <= fine:
        raise ConfigError(expected(f"1 <= K <= fine ({fine})", K))
    if fine > N:
        raise ConfigError(expected(f"fine <= {N} samples", fine))
    if not 1 <= dims <= min(784, N):
        raise ConfigError(expected(f"1 <= dims <= {min(784, N)}", dims))
    rng = np.random.default_rng(seed)
    mean, components = pca_fit(ds.images, dims)
    feats = pca_project(ds.images, mean, components)

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
        inertia = float(np.sum(weights * _sqdist(fine_centroids, cents)[np.arange(len(merge)), merge]))
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
    )
    return Manifest.build(ds, "kmeans", model.assign_features(feats), seed=int(seed), kmeans=model)


def make_partition(
    ds: Dataset, spec: PartitionSpec | str, *, seed: int = 0, fine: int = 64, dims: int = 50
) -> Manifest:
    """Dispatch a --by value to the partition function."""
    if isinstance(spec, str):
        spec = parse_by(spec)
    if spec.method == "all":
        return partition_one(ds)
    if spec.method == "labels":
        return partition_labels(ds, [list(g) for g in spec.groups])
    if spec.method == "kmeans":
        return partition_kmeans(ds, spec.k, fine=fine, seed=seed, dims=dims)
    return partition_random(ds, spec.k, seed=seed)


# ---------------------------------------------------------------------------------------------
# numpy k-means and PCA
# ---------------------------------------------------------------------------------------------

_CHUNK = 8192  # rows per block, to bound memory on the 60k-image train split


def _pixels(images: np.ndarray) -> np.ndarray:
    """uint8 [n, 28, 28] -> float64 [n, 784] in [-1, 1]."""
    return images.reshape(images.shape[0], -1).astype(np.float64) / 127.5 - 1.0


def pca_fit(images: np.ndarray, dims: int) -> tuple[np.ndarray, np.ndarray]:
    """mean [784], components [dims, 784] (top eigenvectors of the pixel covariance, sign-fixed)."""
    n = images.shape[0]
    total = np.zeros(784)
    for i in range(0, n, _CHUNK):
        total += _pixels(images[i : i + _CHUNK]).sum(axis=0)
    mean = total / n
    cov = np.zeros((784, 784))
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
    """uint8 [n, 28, 28] -> float64 [n, D]."""
    out = np.empty((images.shape[0], components.shape[0]))
    for i in range(0, images.shape[0], _CHUNK):
        out[i : i + _CHUNK] = (_pixels(images[i : i + _CHUNK]) - mean) @ components.T
    return out


def _sqdist(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Squared euclidean distances [n, k] (clamped at 0 against rounding)."""
    d = (x * x).sum(axis=1)[:, None] - 2.0 * (x @ c.T) + (c * c).sum(axis=1)[None, :]
    return np.maximum(d, 0.0)


def nearest(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """int64 [n]: index of the nearest row of c for each row of x (ties -> lowest index)."""
    out = np.empty(x.shape[0], dtype=np.int64)
    for i in range(0, x.shape[0], _CHUNK):
        out[i : i + _CHUNK] = _sqdist(x[i : i + _CHUNK], c).argmin(axis=1)
    return out


def _kmeanspp(x: np.ndarray, k: int, rng: np.random.Generator, w: np.ndarray) -> np.ndarray:
    """k-means++ seeding (D^2 sampling, weighted)."""
    first = rng.choice(x.shape[0], p=w / w.sum())
    cents = [x[first]]
    d2 = _sqdist(x, x[first][None])[:, 0]
    for _ in range(1, k):
        p = w * d2
        # All remaining mass at distance 0 (duplicates): fall back to weights alone.
        idx = rng.choice(x.shape[0], p=p / p.sum()) if p.sum() > 0 else rng.choice(x.shape[0], p=w / w.sum())
        cents.append(x[idx])
        d2 = np.minimum(d2, _sqdist(x, x[idx][None])[:, 0])
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
        d = _sqdist(x, cents)
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


def preview_grid(manifest: Manifest, ds: Dataset, per_cluster: int = 8, gap: int = 2) -> np.ndarray:
    """uint8 [H, W]: one row per cluster, `per_cluster` samples spread evenly over the cluster."""
    manifest.check_dataset(ds)
    K = manifest.num_clusters
    H = K * 28 + (K + 1) * gap
    W = per_cluster * 28 + (per_cluster + 1) * gap
    grid = np.full((H, W), 64, dtype=np.uint8)
    for k in range(K):
        idx = manifest.indices(k)
        pick = idx[np.linspace(0, len(idx) - 1, num=min(per_cluster, len(idx))).round().astype(int)]
        for j, i in enumerate(pick):
            y, x = gap + k * (28 + gap), gap + j * (28 + gap)
            grid[y : y + 28, x : x + 28] = ds.images[i]
    return grid
