"""Compile once, start fast: the traced model of every batch bucket saved with torch.jit.save and loaded
with torch.jit.load at the next start (DDM_TRACE_CACHE_DIR; the Neuron image mounts a volume there).

A file is used only under its exact key: the weights' sha256, the model (its config and the sha256 of
the UNet's source), the bucket, the device, the toolchain versions (torch, torch-neuronx, neuronx-cc,
...) and the compiler arguments. Anything else changed
means another file, so a stale executable is never served. Each file has a sidecar with its own
sha256, checked before loading: a truncated or swapped file is compiled again, not loaded.

torch.jit.load runs TorchScript from the file, so a file is loaded only when it, its sidecar and the
folder belong to the worker's user and no one else can write them (the folder is created 0700): the
cache holds the worker's own output, never a file a user hands in. Files are never evicted: each new
set of weights adds one file per bucket (delete the folder to reclaim it; the next start compiles).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ddm.schema.atomic import atomic_path, write_text_atomic
from ddm.schema.checkpoint_meta import file_sha256

log = logging.getLogger(__name__)
OFF = ("", "0", "off", "none")


def private(path: Path) -> bool:
    """Owned by this process's user and not writable by group or others: only we could have put it there."""
    st = path.stat()
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


@dataclass(frozen=True)
class TraceKey:
    """Everything a traced bucket depends on."""

    weights_sha256: str
    model: str  # the UNet config and source digest: same weights in another architecture trace differently
    bucket: int
    device: str
    toolchain: tuple[tuple[str, str | None], ...]  # sorted (package, version) pairs
    compiler_args: tuple[str, ...]

    def digest(self) -> str:
        text = json.dumps(self.describe(), sort_keys=True)  # one record: the file name and the sidecar agree
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def describe(self) -> dict:
        return {
            "weights_sha256": self.weights_sha256,
            "model": self.model,
            "bucket": self.bucket,
            "device": self.device,
            "toolchain": dict(self.toolchain),
            "compiler_args": list(self.compiler_args),
        }


@dataclass
class TraceCache:
    """folder None: no cache (every start compiles). `compiled` and `loaded` count what happened."""

    folder: Path | None
    compiled: int = 0
    loaded: int = 0
    compile_s: float = field(default=0.0)

    @classmethod
    def from_settings(cls) -> TraceCache:
        from ddm.schema.settings import Settings

        path = Settings.from_env().trace_cache_dir
        return cls(None if path.lower() in OFF else Path(os.path.expanduser(path)))

    def get(self, key: TraceKey, compile_fn: Callable[[], torch.jit.ScriptModule]) -> torch.jit.ScriptModule:
        """The traced module of `key`: loaded from the folder when a checked file is there, else
        compile_fn() (counted), saved for the next start."""
        if self.folder is not None:
            module = self._load(key)
            if module is not None:
                self.loaded += 1
                return module
        import time

        start = time.perf_counter()
        module = compile_fn()
        self.compile_s += time.perf_counter() - start
        self.compiled += 1
        if self.folder is not None:
            self._save(key, module)
        return module

    def _paths(self, key: TraceKey) -> tuple[Path, Path]:
        name = f"bucket{key.bucket}-{key.digest()}"
        return self.folder / f"{name}.pt", self.folder / f"{name}.json"

    def _load(self, key: TraceKey) -> torch.jit.ScriptModule | None:
        model_path, meta_path = self._paths(key)
        if not (model_path.is_file() and meta_path.is_file()):
            return None
        if not all(private(p) for p in (self.folder, model_path, meta_path)):
            log.warning(
                "not loading traced bucket %d: %s must be owned by this user and writable by no one else "
                "(torch.jit.load runs its files as code); compiling instead",
                key.bucket,
                self.folder,
            )
            return None
        try:
            meta = json.loads(meta_path.read_text())
            matches = isinstance(meta, dict) and meta.get("key") == key.describe()
            if not matches or meta.get("sha256") != file_sha256(model_path):
                log.warning(
                    "traced bucket %d at %s does not match its record: compiling again",
                    key.bucket,
                    model_path,
                )
                return None
            return torch.jit.load(str(model_path))
        except (OSError, ValueError, RuntimeError) as exc:
            log.warning(
                "traced bucket %d at %s unreadable (%s): compiling again", key.bucket, model_path, exc
            )
            return None

    def _save(self, key: TraceKey, module: torch.jit.ScriptModule) -> None:
        model_path, meta_path = self._paths(key)
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            with atomic_path(model_path) as tmp:
                torch.jit.save(module, str(tmp))
                record = {"key": key.describe(), "sha256": file_sha256(tmp)}
            # the module first, its record last: a record names a whole file
            write_text_atomic(meta_path, json.dumps(record, indent=1, sort_keys=True))
        except OSError as exc:  # a read-only or full volume costs the next start a compile, nothing more
            log.warning("could not save traced bucket %d to %s: %s", key.bucket, self.folder, exc)
