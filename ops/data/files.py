"""Where dataset files are: the data directory, the folders searched, and the files of a split."""

from __future__ import annotations

import os
from pathlib import Path

from ddm.ops.data.catalog import SPLITS, DataFile, get_spec
from ddm.schema.errors import ConfigError, expected


def resolve_data_dir(flag: str | Path | None = None) -> Path:
    """The data directory: the flag, else $DDM_DATA_DIR, else ./data."""
    if flag:
        return Path(flag).expanduser()
    env = os.environ.get("DDM_DATA_DIR")
    if env:
        return Path(env).expanduser()
    return Path("data")


def search_dirs(name: str, data_dir: Path) -> list[Path]:
    """Where files of a dataset are looked for, in order."""
    spec = get_spec(name)
    return [data_dir / name, data_dir, *(Path(d) for d in spec.offline_dirs)]


def find_file(df: DataFile, directory: Path) -> Path | None:
    for candidate in (directory / df.name, directory / df.raw_name):
        if candidate.is_file():
            return candidate
    return None


def find_split_files(name: str, split: str, data_dir: Path) -> tuple[Path, Path]:
    """(images path, labels path) of a split, both from the first directory holding both."""
    spec = get_spec(name)
    if split not in spec.files:
        raise ConfigError(expected(f"a split in {SPLITS}", split))
    images_df, labels_df = spec.files[split]
    dirs = search_dirs(name, data_dir)
    for d in dirs:
        images, labels = find_file(images_df, d), find_file(labels_df, d)
        if images is not None and labels is not None:
            return images, labels
    looked = ", ".join(str(d) for d in dirs)
    raise ConfigError(
        f"{name} {split} files ({images_df.name}, {labels_df.name}, gzipped or not) not found; looked in "
        f"{looked}. With a network: `ddm data fetch {name} --data-dir {data_dir}`; {spec.offline_hint}."
    )
