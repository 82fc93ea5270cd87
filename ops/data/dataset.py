"""A loaded split of a known dataset (images, labels, content hash), and loading one from disk."""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ddm.ops.data.catalog import DATASETS, DataFile, get_spec
from ddm.ops.data.files import find_split_files, resolve_data_dir
from ddm.ops.data.idx import parse_idx, read_raw
from ddm.ops.data.splits import format_split, parse_split, split_sha256
from ddm.schema.autoencoder_card import split_latent_name
from ddm.schema.errors import ConfigError, expected
from ddm.schema.flow import NUM_CLASSES, pad_to_32
from ddm.schema.sample_space import SampleSpace

if TYPE_CHECKING:
    from ddm.ops.data.latents import LatentDataset


def _spec_shape(name: str) -> tuple[int, ...]:
    spec = DATASETS.get(name)
    return spec.image_shape if spec else (28, 28)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A loaded split: images uint8 [N, *image_shape], labels int64 [N] (both read-only).

    image_shape is the catalog's: [28, 28] for MNIST and Fashion-MNIST (and any unknown name),
    [3, S, S] channel-first RGB for emoji. `split` is canonical ("test[:8000]", "test"); together
    with `name` and the bytes it makes `sha256`, which a partition manifest records so training
    refuses data other than what was partitioned.
    """

    name: str
    split: str
    images: np.ndarray
    labels: np.ndarray

    def __post_init__(self) -> None:
        images, labels = self.images, self.labels
        shape = _spec_shape(self.name)
        if images.dtype != np.uint8 or images.ndim != 1 + len(shape) or images.shape[1:] != shape:
            want = f"images uint8 [N, {', '.join(map(str, shape))}]"
            raise ConfigError(expected(want, f"{images.dtype} {images.shape}"))
        if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
            raise ConfigError(expected(f"labels [N={images.shape[0]}]", labels.shape))
        labels = labels.astype(np.int64)
        k = len(self.classes)
        if labels.size and (labels.min() < 0 or labels.max() >= k):
            raise ConfigError(expected(f"labels in [0, {k})", (int(labels.min()), int(labels.max()))))
        images = np.array(images, copy=True)
        images.setflags(write=False)
        labels.setflags(write=False)
        object.__setattr__(self, "images", images)
        object.__setattr__(self, "labels", labels)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @cached_property
    def sha256(self) -> str:
        """Hex sha256 of name, split, shape, image bytes and labels (split_sha256)."""
        return split_sha256(b"ddm-dataset-v1", self.name, self.split, self.images, self.labels)

    @property
    def classes(self) -> tuple[str, ...]:
        spec = DATASETS.get(self.name)
        return spec.classes if spec else tuple(str(c) for c in range(NUM_CLASSES))

    @property
    def sample_space(self) -> SampleSpace:
        """What its model input is (as_model_input): [C, 32, 32] or its catalog size, in [-1, 1],
        conditioned on its classes, named as the catalog names them."""
        shape = self.images.shape[1:]
        sample = (1, 32, 32) if len(shape) == 2 else tuple(int(n) for n in shape)
        return SampleSpace(sample, (-1.0, 1.0), len(self.classes), self.classes)

    def label_counts(self) -> np.ndarray:
        """int64 [len(classes)]: samples per class."""
        return np.bincount(self.labels, minlength=len(self.classes)).astype(np.int64)

    def as_model_input(self) -> np.ndarray:
        """float32 [N, C, 32, 32] in [-1, 1], the UNet's input layout: MNIST-like 28x28 padded to 32
        (zero border = -1, C = 1); channel-first images (emoji) scaled as they are (x / 127.5 - 1)."""
        if self.images.ndim == 4:
            return self.images.astype(np.float32) / 127.5 - 1.0
        return pad_to_32(self.images)


def label_histogram(labels: np.ndarray, num_classes: int = NUM_CLASSES) -> np.ndarray:
    """int64 [num_classes] (the dataset's classes; 10 for MNIST): how many of each class in a label
    array."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes).astype(np.int64)


def md5_hex(data: bytes) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def _load_checked(path: Path, df: DataFile, verify: bool) -> np.ndarray:
    raw = read_raw(path)
    if verify:
        got = md5_hex(raw)
        if got != df.raw_md5:
            raise ConfigError(
                f"{path}: {expected(f'the official {df.raw_name} (decompressed md5 {df.raw_md5})', got)}; "
                "the file is corrupt or belongs to another dataset - remove it and fetch again"
            )
    return parse_idx(raw, str(path))


def load_dataset(
    name: str, split_spec: str, data_dir: str | Path | None = None, *, verify: bool = True
) -> Dataset | LatentDataset:
    """Load a split of a known dataset, e.g. load_dataset("mnist", "test[:8000]").

    A latent dataset's name ("emoji~ae-3f8309732a81") loads its latents (ddm.ops.data.latents).
    data_dir=None resolves through resolve_data_dir (flag, $DDM_DATA_DIR, ./data). With verify (the
    default) the decompressed files must match the official md5s.
    """
    if split_latent_name(name) is not None:  # "<dataset>~<encoder_id>": latents of `ddm data encode`
        from ddm.ops.data.latents import load_latent_dataset

        return load_latent_dataset(name, split_spec, data_dir)
    spec = get_spec(name)
    split, start, stop = parse_split(split_spec)
    if spec.source == "render":
        return _load_rendered(name, split, start, stop, split_spec, data_dir)
    images_path, labels_path = find_split_files(name, split, resolve_data_dir(data_dir))
    images_df, labels_df = spec.files[split]
    images = _load_checked(images_path, images_df, verify)
    labels = _load_checked(labels_path, labels_df, verify)
    if images.ndim != 3 or images.shape[1:] != (28, 28) or images.dtype != np.uint8:
        raise ConfigError(
            f"{images_path}: {expected('uint8 images [N, 28, 28]', f'{images.dtype} {images.shape}')}"
        )
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise ConfigError(f"{labels_path}: {expected(f'{images.shape[0]} labels [N]', labels.shape)}")
    return _slice(name, split, start, stop, split_spec, images, labels)


def _stop(split, start, stop, split_spec, total: int) -> int:
    """The range's end (None: the split's end), or a ConfigError when it leaves the split."""
    stop = total if stop is None else stop
    if start >= total or stop > total:
        raise ConfigError(expected(f"a range inside {split}[0:{total}]", split_spec))
    return stop


def _slice(name, split, start, stop, split_spec, images, labels) -> Dataset:
    total = images.shape[0]
    stop = _stop(split, start, stop, split_spec, total)
    return Dataset(
        name=name,
        split=format_split(split, start, stop, total),
        images=images[start:stop],
        labels=labels[start:stop].astype(np.int64),
    )


def _rendered_split(name, split, data_dir):
    """(the rendered cache, the rows of its arrays in `split`): "test" is the held-out split, "train"
    the rest, each in emoji-test.txt order. The cache is rendered first when there is none (seconds;
    `ddm data fetch emoji` does it ahead and prints the checksum)."""
    from ddm.ops.data.emoji_cache import ensure_cache

    rendered, note = ensure_cache(resolve_data_dir(data_dir), DATASETS[name].image_shape[-1])
    if note != "present and valid":
        print(f"{name}: {note}, checksum {rendered.meta['checksum']}", file=sys.stderr)
    held = rendered.arrays["heldout"]
    return rendered, np.flatnonzero(held if split == "test" else ~held)


def _load_rendered(name, split, start, stop, split_spec, data_dir) -> Dataset:
    """A split of a rendered dataset (emoji) from its cache (_rendered_split)."""
    rendered, rows = _rendered_split(name, split, data_dir)
    a = rendered.arrays
    return _slice(name, split, start, stop, split_spec, a["images"][rows], a["labels"][rows])


def rendered_rows(name: str, split_spec: str, data_dir: str | Path | None = None):
    """(the rendered cache, int64 rows): image i of load_dataset(name, split_spec) is row rows[i] of the
    cache's arrays (its code points, name, subgroup, family), for a rendered dataset (emoji)."""
    spec = get_spec(name)
    if spec.source != "render":
        raise ConfigError(expected("a rendered dataset (emoji, emoji-64)", name))
    split, start, stop = parse_split(split_spec)
    rendered, rows = _rendered_split(name, split, data_dir)
    return rendered, rows[start : _stop(split, start, stop, split_spec, len(rows))]
