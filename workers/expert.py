"""The one door every caller uses: `Expert.velocity(x, t, y, guidance)` in numpy.

Framework-specific experts (workers/torch_expert/expert.py, workers/jax_expert/expert.py) implement
only `_forward` on a batch; this base class validates inputs, adds the null-class rows for
classifier-free guidance, and pads to a fixed set of batch buckets where the backend needs static
shapes (JAX, Neuron), so that no shape outside the buckets is ever compiled.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from ddm.schema.errors import SchemaError, expected
from ddm.schema.flow import IMAGE_SHAPE, NULL_CLASS, NUM_CLASSES, guided_velocity
from ddm.schema.precision import DEFAULT_PRECISION
from ddm.workers.buckets import run_bucketed
from ddm.workers.frameworks import expert_framework

DEFAULT_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class ExpertMeta:
    """What a caller may know about an expert without touching its weights."""

    framework: str  # a name in ddm.workers.frameworks.FRAMEWORKS
    preset: str
    config: Any  # the framework's config object (its record's `config` class: UNetConfig for torch, jax)
    expert: int  # cluster id in the partition it was trained on
    partition_id: str
    classes: tuple[int, ...]  # labels present in its training cluster
    steps: int  # training steps
    device: str  # where it runs now: cpu, cuda, neuron, cpu-traced, gpu
    path: str
    precision: str = DEFAULT_PRECISION  # fp32 | tf32 | bf16 (schema/precision.py)

    @classmethod
    def from_json(cls, meta: dict, device: str, path: str, precision: str = DEFAULT_PRECISION) -> ExpertMeta:
        return cls(
            framework=meta["framework"],
            preset=meta.get("preset", "?"),
            config=expert_framework(meta["framework"], "meta.json framework").config_from(meta["config"]),
            expert=int(meta.get("expert", 0)),
            partition_id=str(meta.get("partition", {}).get("id", "")),
            classes=tuple(int(c) for c in meta.get("classes", range(NUM_CLASSES))),
            steps=int(meta.get("steps", 0)),
            device=device,
            path=path,
            precision=precision,
        )


def check_inputs(x, t, y, guidance) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate and normalise velocity inputs; returns x f32 [B,1,32,32], t f32 [B], y i64 [B], g f32 [B]."""
    x = np.asarray(x)
    if x.dtype != np.float32 or x.ndim != 4 or x.shape[1:] != IMAGE_SHAPE:
        raise SchemaError(expected("x float32 [B, 1, 32, 32]", f"{x.dtype} {x.shape}"))
    B = x.shape[0]
    t = np.asarray(t, dtype=np.float32).reshape(-1)
    y = np.asarray(y)
    if t.shape != (B,):
        raise SchemaError(expected(f"t [B={B}]", t.shape))
    if y.shape != (B,) or not np.issubdtype(y.dtype, np.integer):
        raise SchemaError(expected(f"y integer [B={B}]", f"{y.dtype} {y.shape}"))
    if B and (y.min() < 0 or y.max() > NULL_CLASS):
        raise SchemaError(expected(f"labels in [0, {NULL_CLASS}]", (int(y.min()), int(y.max()))))
    g = np.broadcast_to(np.asarray(guidance, dtype=np.float32), (B,)).copy()
    return x, t, y.astype(np.int64), g


class Expert(ABC):
    """A loaded expert. Subclasses set `meta` and `buckets` and implement `_forward`."""

    meta: ExpertMeta
    # Batch sizes the backend runs; None = any size (eager PyTorch). Padded to the next one otherwise.
    buckets: tuple[int, ...] | None = None
    max_batch: int = 256  # larger inputs are split into chunks of this many rows
    # what loading compiled: {"compiled": buckets compiled, "loaded": buckets from a cache, "compile_s"}
    compile_report: dict | None = None

    def velocity(self, x, t, y, guidance=1.0) -> np.ndarray:
        """v(x, t, y) with classifier-free guidance.

        x float32 [B,1,32,32], t float32 [B] in [0,1], y int64 [B] (0-9, or 10 = unconditional),
        guidance scalar or [B]. Rows whose guidance is not 1 get an extra null-class row in the same
        forward pass: v = v_null + g * (v_y - v_null). Returns float32 [B,1,32,32].
        """
        x, t, y, g = check_inputs(x, t, y, guidance)
        B = len(x)
        guided = np.flatnonzero(g != 1.0)
        if len(guided):
            x = np.concatenate([x, x[guided]])
            t = np.concatenate([t, t[guided]])
            y = np.concatenate([y, np.full(len(guided), NULL_CLASS, dtype=np.int64)])
        v = self._run(x, t, y)
        out = v[:B].copy()
        if len(guided):
            out[guided] = guided_velocity(out[guided], v[B:], g[guided])
        return out

    def _run(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        limit = self.buckets[-1] if self.buckets else self.max_batch
        return run_bucketed(self._forward, (x, t, y), self.buckets, limit)

    def warmup(self) -> None:
        """Run every bucket once (compiles them where the backend compiles)."""
        for b in self.buckets or (1,):
            x = np.zeros((b, *IMAGE_SHAPE), np.float32)
            self._forward(x, np.zeros(b, np.float32), np.zeros(b, np.int64))

    @abstractmethod
    def _forward(self, x: np.ndarray, t: np.ndarray, y: np.ndarray) -> np.ndarray:
        """x f32 [b,1,32,32], t f32 [b], y i64 [b] -> v f32 [b,1,32,32]; b is a bucket when buckets is set."""
