"""The one way this code base writes a file that others read: into a temporary file beside it, then
`os.replace` over it, so a reader (or a crash) sees the old whole file or the new whole file, never half.

schema/ is the lowest floor, so every package (and ops) may use it; it needs nothing but the standard
library.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path to write `path`'s new content at; moved over `path` when the block ends cleanly,
    removed when it raises. The temporary file sits in the same folder (os.replace is atomic only within
    one file system), is hidden, has a name no other writer picks (replicas may share a volume, and pids
    repeat across containers) and keeps `path`'s suffix (numpy's savez appends .npz to a name without)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.tmp{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json_atomic(path: str | Path, data: dict) -> Path:
    """data as indented JSON with sorted keys (the form of every record this code base writes)."""
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
