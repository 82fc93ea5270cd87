"""Latent datasets: a dataset's images encoded once by an autoencoder (`ddm data encode`), read back by
name through load_dataset as "<dataset>~<encoder_id>" (e.g. "emoji~ae-3f8309732a81").

    DATA_DIR/latents/<dataset>~<encoder_id>.npz   <split>_latents float32 [N, C, h, w] (normalised, the
                                                  card's shift and scale), <split>_labels int64 [N]
    DATA_DIR/latents/<dataset>~<encoder_id>.json  what made it: the autoencoder card, and per split the
                                                  source data's sha256 and count; the npz file's sha256

A latent dataset has the interface the training commands use (name, split, images, labels, classes,
sha256, sample_space, as_model_input, label_counts), so partitioning, expert and router training run
on latents through the same commands; its sample space is the autoencoder's latent space with the
data's classes. Read with allow_pickle=False, and the npz's digest is checked against the sidecar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from ddm.ops.data.files import resolve_data_dir
from ddm.ops.data.splits import format_split, parse_split, split_sha256
from ddm.schema.atomic import atomic_path, write_json_atomic
from ddm.schema.autoencoder_card import AutoencoderCard, latent_dataset_name, split_latent_name
from ddm.schema.checkpoint_meta import file_sha256
from ddm.schema.errors import ConfigError, expected
from ddm.schema.sample_space import SampleSpace

FOLDER = "latents"


@dataclass(frozen=True, eq=False)
class LatentDataset:
    """A loaded split of a latent dataset: images float32 latents [N, C, h, w], labels int64 [N]."""

    name: str
    split: str
    images: np.ndarray
    labels: np.ndarray
    space: SampleSpace

    def __len__(self) -> int:
        return int(self.images.shape[0])

    @property
    def classes(self) -> tuple[str, ...]:
        return self.space.class_names

    @property
    def sample_space(self) -> SampleSpace:
        return self.space

    @cached_property
    def sha256(self) -> str:
        """Hex sha256 of name, split, shape, latent bytes (float32 little-endian) and labels."""
        return split_sha256(b"ddm-latent-dataset-v1", self.name, self.split, self.images, self.labels, "<f4")

    def label_counts(self) -> np.ndarray:
        return np.bincount(self.labels, minlength=len(self.classes)).astype(np.int64)

    def as_model_input(self) -> np.ndarray:
        """The latents as they are: they are the model's input."""
        return self.images


def latent_paths(data_dir: Path, name: str) -> tuple[Path, Path]:
    folder = Path(data_dir) / FOLDER
    return folder / f"{name}.npz", folder / f"{name}.json"


def write_latents(splits: dict, autoencoder, data_dir: Path, progress=print) -> dict:
    """Encode loaded splits ({"train": Dataset, ...}, one dataset) and write the latent dataset's files
    under data_dir; returns the sidecar record."""
    card: AutoencoderCard = autoencoder.card
    first = next(iter(splits.values()))
    arrays, record_splits = {}, {}
    for split, ds in splits.items():
        if ds.sample_space.shape != card.pixel_space.shape:
            want = f"{ds.name} images {card.pixel_space.describe()} (the autoencoder's)"
            raise ConfigError(expected(want, ds.sample_space.describe()))
        z = autoencoder.encode(ds.as_model_input())
        arrays[f"{split}_latents"], arrays[f"{split}_labels"] = z.astype(np.float32), ds.labels
        record_splits[split] = {"count": len(ds), "data_sha256": ds.sha256, "abs_max": float(np.abs(z).max())}
        progress(f"  {split}: {len(ds)} images -> latents {z.shape[1:]}, |z| max {np.abs(z).max():.2f}")
    name = latent_dataset_name(first.name, card.encoder_id)
    npz, sidecar = latent_paths(data_dir, name)
    npz.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(npz) as tmp:
        np.savez(tmp, **arrays)
    record = {
        "name": name,
        "dataset": first.name,
        "classes": list(first.classes),
        "autoencoder": str(autoencoder.folder),
        "card": card.to_dict(),
        "splits": record_splits,
        "npz_sha256": file_sha256(npz),
    }
    write_json_atomic(sidecar, record)
    return record


def load_latent_dataset(name: str, split_spec: str, data_dir=None) -> LatentDataset:
    """A split of a latent dataset written by `ddm data encode`, checked against its sidecar."""
    base, encoder_id = split_latent_name(name)
    npz, sidecar = latent_paths(resolve_data_dir(data_dir), name)
    if not (npz.is_file() and sidecar.is_file()):
        raise ConfigError(
            expected(f"the latents {npz} and {sidecar.name}", "no such files")
            + f"; write them with `ddm data encode {base} --autoencoder <folder with {encoder_id}>`"
        )
    record = json.loads(sidecar.read_text())
    if file_sha256(npz) != record.get("npz_sha256"):
        raise ConfigError(
            expected(f"{npz} with the sha256 its sidecar records", "another file: encode again")
        )
    card = AutoencoderCard.from_dict(record["card"], str(sidecar))
    split, start, stop = parse_split(split_spec)
    with np.load(npz, allow_pickle=False) as arrays:
        if f"{split}_latents" not in arrays:
            raise ConfigError(expected(f"a split in {sorted(record['splits'])} of {name}", split))
        latents, labels = arrays[f"{split}_latents"], arrays[f"{split}_labels"]
    total = len(latents)
    stop = total if stop is None else stop
    if start >= total or stop > total:
        raise ConfigError(expected(f"a range inside {split}[0:{total}]", split_spec))
    images, labels = latents[start:stop].astype(np.float32), labels[start:stop].astype(np.int64)
    images.setflags(write=False)
    labels.setflags(write=False)
    # the latents' shape and range, the data's classes (an autoencoder may encode another data set)
    space = SampleSpace(card.latent_shape, card.value_range, len(record["classes"]), tuple(record["classes"]))
    return LatentDataset(name, format_split(split, start, stop, total), images, labels, space)
