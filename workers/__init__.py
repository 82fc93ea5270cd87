"""The expert side: the twin models, training, checkpoints, and `load_expert`, the one door to an
expert. Which frameworks an expert may be written in: ddm.workers.frameworks; which model it is:
ddm.workers.architectures."""

from __future__ import annotations

from pathlib import Path

from ddm.schema.precision import DEFAULT_PRECISION
from ddm.workers.expert import DEFAULT_BUCKETS, Expert, ExpertMeta


def load_expert(
    path: str | Path,
    device: str = "auto",
    buckets: tuple[int, ...] = DEFAULT_BUCKETS,
    precision: str = DEFAULT_PRECISION,
) -> Expert:
    """Load an expert checkpoint folder for inference, whatever its framework.

    device: torch: auto | cpu | cuda | neuron | cpu-traced; jax: auto | cpu | gpu.
    precision: fp32 | tf32 | bf16 where the device has it (schema/precision.py).
    Static-shape backends (jax, cuda, neuron, cpu-traced) compile every bucket here, before returning.
    """
    from ddm.workers.checkpoint import check_weights_digest, read_meta
    from ddm.workers.frameworks import expert_framework

    meta = read_meta(path)  # refuses a framework or architecture the registries do not know, naming them
    check_weights_digest(path, meta)  # the weights its card describes, when the card records their sha256
    load = expert_framework(meta["framework"]).load
    return load(path, meta, device=device, buckets=buckets, precision=precision)


__all__ = ["DEFAULT_BUCKETS", "Expert", "ExpertMeta", "load_expert"]
