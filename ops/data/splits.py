"""Split specs: Python slicing on an official split; and a loaded split's content hash.

A split is named like "test", "train", "test[:8000]", "test[8000:]", "test[100:200]". Offline, the
convention is to train on test[:8000] and evaluate on test[8000:] (the 60k MNIST training split is
not shipped with the workspace).
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from ddm.schema.errors import ConfigError, expected

_SPLIT_RE = re.compile(r"^(train|test)(?:\[(\d*):(\d*)\])?$")
_SPLIT_EXAMPLE = "'test', 'train', 'test[:8000]', 'test[8000:]' or 'test[100:200]'"


def parse_split(spec: str) -> tuple[str, int, int | None]:
    """Parse a split spec into (split, start, stop).

    'test[:8000]' -> ('test', 0, 8000); 'test[8000:]' -> ('test', 8000, None); 'train' -> ('train', 0, None).
    stop=None means "to the end"; bounds are checked against the data in load_dataset.
    """
    m = _SPLIT_RE.match(spec.strip()) if isinstance(spec, str) else None
    if m is None:
        raise ConfigError(expected(f"a split like {_SPLIT_EXAMPLE}", spec))
    split, start_s, stop_s = m.groups()
    start = int(start_s) if start_s else 0
    stop = int(stop_s) if stop_s else None
    if stop is not None and stop <= start:
        raise ConfigError(expected(f"a non-empty range (start < stop) like {_SPLIT_EXAMPLE}", spec))
    return split, start, stop


def format_split(split: str, start: int, stop: int, total: int) -> str:
    """Canonical spelling of a resolved split: bounds equal to the defaults are left out."""
    if start == 0 and stop == total:
        return split
    return f"{split}[{start if start else ''}:{stop if stop != total else ''}]"


def heldout_split(split: str) -> str | None:
    """'test[:8000]' -> 'test[8000:]' (the rest of the same split), else None."""
    name, start, stop = parse_split(split)
    return f"{name}[{stop}:]" if start == 0 and stop is not None else None


def split_sha256(
    tag: bytes, name: str, split: str, images: np.ndarray, labels: np.ndarray, dtype: str | None = None
) -> str:
    """Hex sha256 of a loaded split: tag (its kind and version), name, split, the images' shape and bytes
    (as `dtype`; None: their own), labels (int64 little-endian). One recipe for pixel and latent data."""
    h = hashlib.sha256()
    h.update(tag + b"\0")
    h.update(name.encode() + b"\0" + split.encode() + b"\0")
    h.update(str(images.shape).encode() + b"\0")
    h.update(np.ascontiguousarray(images, dtype=dtype).tobytes())
    h.update(labels.astype("<i8").tobytes())
    return h.hexdigest()
