"""What every design of `ddm bench` is asked to do: the run's settings and its jobs (images labelled
0, 1, ..., 9, 0, ... in every mode, so each mode asks the experts for the same rows)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ddm.schema.errors import expected
from ddm.schema.messages import JobSpec, job_options
from ddm.schema.solver import Solver


@dataclass(frozen=True)
class BenchConfig:
    deployment: Path
    steps: int = 50
    strategy: str = "top1"
    solver: str = "euler"  # schema/solver.py: Euler-50 against a few-step solver, e.g. ab2 at 8 steps
    grid: str = "uniform"
    guidance: float = 1.0
    limit_batches: tuple[int, ...] = (1, 4, 16, 64)
    concurrency: tuple[int, ...] = (1, 4, 16, 64)
    http: bool = True
    repeat: int = 3  # every level this many times; tables report the median
    first_label: int = 0  # jobs are labelled first_label, first_label + 1, ... (mod 10)
    # the WAN run (ddm.ops.bench.wan): round trips to put between these experts and the broker
    rtt_ms: tuple[float, ...] = ()
    link_experts: tuple[int, ...] = (1,)

    @property
    def nfe(self) -> int:
        """Velocity evaluations per job: its round trips to the experts."""
        return Solver.parse(self.solver).nfe(self.steps)


def job_specs(count: int, cfg: BenchConfig, steps: int | None = None) -> list[JobSpec]:
    """`count` jobs of one image each, labels first_label.. cycling through 0..9, seeds 0.."""
    return [
        JobSpec.new([(cfg.first_label + i) % 10], **job_options(cfg, steps=steps or cfg.steps, seed=i))
        for i in range(count)
    ]


def batch_spec(batch: int, cfg: BenchConfig, steps: int | None = None) -> JobSpec:
    labels = [(cfg.first_label + i) % 10 for i in range(batch)]
    return JobSpec.new(labels, **job_options(cfg, steps=steps or cfg.steps, seed=0))


def _comma_separated(text: str, convert, what: str) -> tuple:
    """'a,b,c' -> (convert(a), ...); an argparse error naming `what` when a value does not convert."""
    try:
        return tuple(convert(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(expected(f"comma-separated {what}", text)) from None


def parse_levels(text: str) -> tuple[int, ...]:
    """'1,4,16' -> (1, 4, 16): concurrency levels or batch sizes, each in 1..64 (an argparse type)."""
    levels = _comma_separated(text, int, "integers like 1,4,16,64")
    if not levels or min(levels) < 1 or max(levels) > 64:
        raise argparse.ArgumentTypeError(expected("levels in 1..64", text))
    return levels


def parse_rtts(text: str) -> tuple[float, ...]:
    """'0,20,50' -> (0.0, 20.0, 50.0): round trips in ms, each in 0..2000, no repeats (an argparse type)."""
    rtts = _comma_separated(text, float, "ms like 0,20,50,100")
    if not rtts or min(rtts) < 0 or max(rtts) > 2000 or len(set(rtts)) != len(rtts):
        raise argparse.ArgumentTypeError(expected("distinct round trips in 0..2000 ms", text))
    return rtts


def parse_ids(text: str) -> tuple[int, ...]:
    """'1' or '0,1' -> expert ids (an argparse type)."""
    ids = _comma_separated(text, int, "expert ids like 1 or 0,1")
    if not ids or min(ids) < 0 or len(set(ids)) != len(ids):
        raise argparse.ArgumentTypeError(expected("distinct expert ids >= 0", text))
    return ids
