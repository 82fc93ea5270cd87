"""The numbers of one `ddm bench` run: medians over repeats, paired ratios, the machine, and the
Markdown table and floor line it prints (docs/BENCHMARKS.md holds them)."""

from __future__ import annotations

import os
import platform
import socket
import time
from pathlib import Path

import numpy as np

from ddm.schema.deployment import Deployment


def median_row(runs: list[dict]) -> dict:
    """One row per level: the median of each number over the repeats (the level itself stays an int),
    and the repeats' throughputs if they have one. Values that are not numbers are taken from the first
    run."""
    row = {}
    for key, first in runs[0].items():
        numeric = isinstance(first, int | float) and not isinstance(first, bool)
        row[key] = float(np.median([r[key] for r in runs])) if numeric else first
    for key in ("batch", "jobs"):
        if key in row:
            row[key] = int(row[key])
    if "images_per_s" in row:
        row["images_per_s_runs"] = [r["images_per_s"] for r in runs]
    return row


def paired_ratio(numerator: list[dict], denominator: list[dict] | None) -> float | None:
    """Median over the repeats of numerator / denominator images/s, each repeat with its own pair (the
    two were measured minutes apart at most, so drift cancels); None without a denominator."""
    if not denominator:
        return None
    pairs = zip(numerator, denominator, strict=True)
    return float(np.median([a["images_per_s"] / b["images_per_s"] for a, b in pairs]))


def ratios(limit_runs: dict, pipeline_runs: dict, http_runs: dict) -> list[dict]:
    """Per concurrency: pipeline / limit (batch of the same size) and pipeline / HTTP, paired by repeat."""
    return [
        {
            "jobs": jobs,
            "pipeline_over_limit": paired_ratio(runs, limit_runs.get(jobs)),
            "pipeline_over_http": paired_ratio(runs, http_runs.get(jobs)),
        }
        for jobs, runs in pipeline_runs.items()
    ]


def machine() -> dict:
    return {
        "host": socket.gethostname(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "XLA_FLAGS": os.environ.get("XLA_FLAGS"),
    }


def describe(deployment: Path) -> dict:
    from ddm.workers.checkpoint import read_meta

    d = Deployment.load(deployment)
    experts = []
    for e in d.experts:
        meta = read_meta(e.checkpoint)
        experts.append({"id": e.id, "framework": meta.get("framework"), "preset": meta.get("preset")})
    return {"path": str(deployment), "name": d.name, "router": d.router.kind, "experts": experts}


def header(cfg) -> dict:
    """What every bench JSON starts with: when, on what machine, which experts, which jobs."""
    return {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "deployment": describe(cfg.deployment),
        "steps": cfg.steps,
        "solver": cfg.solver,
        "grid": cfg.grid,
        "nfe": cfg.nfe,
        "strategy": cfg.strategy,
        "guidance": cfg.guidance,
        "repeat": cfg.repeat,
    }


def fmt(value, spec: str = ".2f", suffix: str = "") -> str:
    """A table cell: '-' for a number the run did not measure."""
    return "-" if value is None else format(value, spec) + suffix


def rate(row: dict) -> str:
    """Median images/s, and the range over the repeats when there were several."""
    if not row:
        return "-"
    runs = row.get("images_per_s_runs", [])
    spread = f" ({min(runs):.2f}-{max(runs):.2f})" if len(runs) > 1 else ""
    return f"{row['images_per_s']:.2f}{spread}"


def latency(row: dict) -> str:
    """Median and 95th-percentile job latency, in seconds."""
    return f"{row['latency_p50_s']:.2f} / {row['latency_p95_s']:.2f}"


def table(result: dict) -> str:
    """The Markdown table `ddm bench` prints (and docs/BENCHMARKS.md holds)."""
    limit = {row["batch"]: row for row in result["limit"]}
    http = {row["jobs"]: row for row in result["http"]}
    ratio = {row["jobs"]: row for row in result["ratios"]}
    lines = [
        "| jobs | limit img/s (batch = jobs) | pipeline img/s | p50 / p95 latency (s) | overhead ms/step "
        "p50 | mean batch | HTTP img/s | HTTP p50 (s) | pipeline / limit | pipeline / HTTP |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    for row in result["pipeline"]:
        jobs = row["jobs"]
        lim, base, r = limit.get(jobs, {}), http.get(jobs, {}), ratio[jobs]
        lines.append(
            f"| {jobs} | {rate(lim)} | {rate(row)} | "
            f"{latency(row)} | {row['overhead_ms_p50']:.2f} | "
            f"{row['mean_batch_size']:.1f} | {rate(base)} | "
            f"{fmt(base.get('latency_p50_s'))} | {fmt(r['pipeline_over_limit'])}x | "
            f"{fmt(r['pipeline_over_http'])}x |"
        )
    return "\n".join(lines)


def floor_line(result: dict) -> str:
    """The transport floor of the run (ddm.ops.bench.broker_floor), to print under the table."""
    floor = result["transport_floor"]
    if floor is None:
        return "transport floor: not measured (it runs after the 1-job level)"
    return (
        f"transport floor under the 1-job overhead ({result['median_overhead_ms_1_job']:.2f} ms): a minimal "
        f"RabbitMQ consumer's round trip of a one-row request, minus its work, is {floor['bare_ms']:.2f} ms "
        f"back to back, {floor['around_busy_wait_ms']:.2f} ms around a {floor['hold_ms']:.1f} ms busy wait "
        f"and {floor['around_forward_ms']:.2f} ms around expert 0's forward pass"
    )
