"""Static batch shapes: the experts (JAX, Neuron, cpu-traced) and the learned router compile one
executable per bucket size and pad every batch to the next bucket, so no other shape is ever
compiled while serving. One implementation for both."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ddm.schema.errors import ConfigError, expected


def bucket_for(n: int, buckets: tuple[int, ...]) -> int:
    """Smallest bucket >= n (n <= max bucket)."""
    for b in buckets:
        if b >= n:
            return b
    raise ValueError(f"batch {n} exceeds the largest bucket {buckets[-1]}")


def pad_rows(a: np.ndarray, size: int) -> np.ndarray:
    """Pad axis 0 to `size` by repeating the last row (finite values keep every backend happy)."""
    if len(a) == size:
        return a
    return np.concatenate([a, np.repeat(a[-1:], size - len(a), axis=0)], axis=0)


def run_bucketed(
    forward: Callable[..., np.ndarray],
    arrays: tuple[np.ndarray, ...],
    buckets: tuple[int, ...] | None,
    limit: int,
) -> np.ndarray:
    """forward(*arrays) over rows in chunks of at most `limit` (the largest bucket), each padded to its
    bucket when `buckets` is set (None: eager backends, any size); returns float32 rows, concatenated."""
    chunks = []
    for start in range(0, len(arrays[0]), limit):
        part = [a[start : start + limit] for a in arrays]
        n = len(part[0])
        if buckets:
            size = bucket_for(n, buckets)
            part = [pad_rows(a, size) for a in part]
        chunks.append(np.asarray(forward(*part), dtype=np.float32)[:n])
    return np.concatenate(chunks) if len(chunks) > 1 else chunks[0]


def parse_bucket_flag(text: str | None) -> tuple[int, ...] | None:
    """'1,2,4,8' -> (1, 2, 4, 8); None or '' -> None (the default buckets)."""
    if not text:
        return None
    try:
        return tuple(int(b) for b in text.split(",") if b.strip())
    except ValueError:
        raise ConfigError(expected("--buckets like 1,2,4,8", text)) from None
