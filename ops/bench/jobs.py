"""What every design of `ddm bench` is asked to do: the run's settings and its jobs (images labelled
0, 1, ..., 9, 0, ... in every mode, so each mode asks the experts for the same rows)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.errors import expected
from ddm.schema.messages import JobSpec


@dataclass(frozen=True)
class BenchConfig:
    deployment: Path
    steps: int = 50
    strategy: str = "top1"
    guidance: float = 1.0
    limit_batches: tuple[int, ...] = (1, 4, 16, 64)
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    http: bool = True
    repeat: int = 3  # every level this many times; tables report the median


def job_specs(count: int, cfg: BenchConfig, steps: int | None = None) -> list[JobSpec]:
    """`count` jobs of one image each, labels 0..9 cycling, seeds 0.."""
    return [
        JobSpec.new([i % 10], steps=steps or cfg.steps, strategy=cfg.strategy, guidance=cfg.guidance, seed=i)
        for i in range(count)
    ]


def batch_spec(batch: int, cfg: BenchConfig, steps: int | None = None) -> JobSpec:
    labels = [i % 10 for i in range(batch)]
    return JobSpec.new(labels, steps=steps or cfg.steps, strategy=cfg.strategy, guidance=cfg.guidance, seed=0)


def parse_levels(text: str) -> tuple[int, ...]:
    """'1,4,16' -> (1, 4, 16): concurrency levels or batch sizes, each in 1..64 (an argparse type)."""
    try:
        levels = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(expected("comma-separated integers like 1,4,16,64", text)) from None
    if not levels or min(levels) < 1 or max(levels) > 64:
        raise argparse.ArgumentTypeError(expected("levels in 1..64", text))
    return levels
