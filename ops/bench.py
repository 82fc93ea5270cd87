"""`ddm bench`: the pipeline against the in-process limit and against the seed's HTTP-per-step design,
in one run, on one machine, with the same experts, router and steps.

    limit     router.sampler.sample_local in this process, one batch of B images (B = 1, 4, 16, 64)
    pipeline  C concurrent jobs of one image each through RabbitMQ and Redis (ops/bench_pipeline.py)
    http      the same C jobs, each step an HTTP POST of an .npz per chosen expert (ops/bench_http.py)

Images are labelled 0, 1, ..., 9, 0, ... in every mode, so each mode asks the experts for the same
rows. Throughput is images per second of wall time; the ratios compare a pipeline level with the limit
at the batch of the same size and with the HTTP baseline at the same concurrency. Every level runs
`repeat` times, the three designs back to back each time (measure_all); tables show medians, the
JSON keeps every run. After each 1-job pipeline run comes the transport floor (ops/broker_floor.py:
a minimal RabbitMQ consumer's round trip of a one-row request, back to back, around a busy wait as
long as the forward pass and around expert 0's real forward pass), to read the 1-job overhead against.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.schema.deployment import Deployment
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


# ---------------------------------------------------------------- the limit


class LimitSampler:
    """The experts and the policy loaded in this process: sample_local on one batch of B images."""

    def __init__(self, cfg: BenchConfig):
        from ddm.router.deployment_loader import load_experts, load_policy

        deployment = Deployment.load(cfg.deployment)
        self.cfg = cfg
        self.policy = load_policy(deployment)
        self.velocity = {k: e.velocity for k, e in load_experts(deployment).items()}
        for batch in cfg.limit_batches:  # warm every batch size once (first calls allocate and plan)
            self.measure(batch, steps=2)

    def measure(self, batch: int, steps: int | None = None) -> dict:
        from ddm.router.sampler import sample_local

        started = time.perf_counter()
        sample_local(self.velocity, self.policy, batch_spec(batch, self.cfg, steps))
        wall = time.perf_counter() - started
        return {"batch": batch, "images_per_s": batch / wall, "wall_s": wall}


# ---------------------------------------------------------------- the seed's design


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServers:
    """One Flask expert server process per expert (as the seed ran them); the jobs' loops run here."""

    def __init__(self, cfg: BenchConfig, log_dir: Path):
        self.cfg = cfg
        self.log_dir = log_dir
        self.deployment = Deployment.load(cfg.deployment)
        self.servers: list[subprocess.Popen] = []
        self.urls: dict[int, str] = {}

    def __enter__(self) -> HttpServers:
        from ddm.ops.bench_http import wait_healthy
        from ddm.ops.cmd_up import expert_thread_env
        from ddm.router.deployment_loader import load_policy

        self.policy = load_policy(self.deployment)
        env = {**os.environ, **expert_thread_env(self.deployment.num_experts)}  # as the pipeline's workers
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            for entry in self.deployment.experts:
                port = free_port()
                log = open(self.log_dir / f"http-expert{entry.id}.log", "wb")  # noqa: SIM115 - the child's
                self.servers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "ddm.ops.bench_http"]
                        + ["--deployment", str(self.deployment.path), "--expert", str(entry.id)]
                        + ["--port", str(port)],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                    )
                )
                self.urls[entry.id] = f"http://127.0.0.1:{port}"
            for url in self.urls.values():
                wait_healthy(url, timeout=300)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        from ddm.ops.supervisor import stop_processes

        stop_processes(self.servers, grace_s=10)

    def measure(self, jobs: int, steps: int | None = None) -> dict:
        from ddm.ops.bench_http import run_http_jobs

        started = time.perf_counter()
        latency = run_http_jobs(self.policy, self.urls, job_specs(jobs, self.cfg, steps), jobs)
        wall = time.perf_counter() - started
        return {
            "jobs": jobs,
            "images_per_s": jobs / wall,
            "latency_p50_s": float(np.percentile(latency, 50)),
            "latency_p95_s": float(np.percentile(latency, 95)),
        }


# ---------------------------------------------------------------- one run, levels interleaved


@dataclass
class Runs:
    """Every measurement of one `ddm bench` run: {level: [row per repeat]} per design, and the
    transport floor per repeat (when 1 job is one of the levels)."""

    limit: dict[int, list]
    pipeline: dict[int, list]
    http: dict[int, list]
    floor: list[dict]


def measure_all(cfg: BenchConfig, log_dir: Path, progress=print) -> Runs:
    """Every level `cfg.repeat` times. Each repeat measures every level of the three designs back to
    back (limit batch B, pipeline at C jobs, HTTP at C jobs; the order reversed every other repeat)
    while all their processes stay up, so slow drift of a shared machine hits the three alike instead
    of whichever design ran last. The transport floor follows each 1-job pipeline run."""
    from ddm.ops.bench_pipeline import PipelineProcesses, run_level
    from ddm.ops.broker_floor import EchoFloor
    from ddm.ops.cmd_up import expert_thread_env

    runs = Runs(
        limit={b: [] for b in cfg.limit_batches},
        pipeline={c: [] for c in cfg.concurrency},
        http={c: [] for c in cfg.concurrency} if cfg.http else {},
        floor=[],
    )
    limit = LimitSampler(cfg)
    with contextlib.ExitStack() as stack:
        procs = stack.enter_context(PipelineProcesses(cfg.deployment, log_dir))
        http = stack.enter_context(HttpServers(cfg, log_dir)) if cfg.http else None
        floor = None
        if 1 in cfg.concurrency:
            # expert 0: the one label 0 (the 1-job level's label) goes to in the shipped label split
            first = procs.deployment.experts[0]
            threads = expert_thread_env(procs.deployment.num_experts)
            floor = stack.enter_context(
                EchoFloor(procs.settings.amqp_url, first.checkpoint, first.device, threads)
            )
        run_level(procs, job_specs(max(cfg.concurrency), cfg, steps=2))  # warm-up
        if http is not None:
            http.measure(max(cfg.concurrency), steps=2)
        designs = [(_limit_step, limit, runs.limit), (_pipeline_step, procs, runs.pipeline)]
        designs.append((_http_step, http, runs.http))
        for repeat in range(1, cfg.repeat + 1):
            tag = f"[{repeat}/{cfg.repeat}]"
            order = designs if repeat % 2 else designs[::-1]  # alternate which design goes first
            for level in sorted({*cfg.limit_batches, *cfg.concurrency}):
                for step, runner, results in order:
                    if runner is None or level not in results:
                        continue
                    results[level].append(step(runner, cfg, level, tag, progress))
                    if step is _pipeline_step and level == 1:
                        runs.floor.append(_floor_step(floor, results[1][-1], tag, progress))
    return runs


def _limit_step(limit: LimitSampler, cfg: BenchConfig, level: int, tag: str, progress) -> dict:
    row = limit.measure(level)
    progress(f"{tag} limit    batch {level:>3}: {row['images_per_s']:7.2f} images/s")
    return row


def _pipeline_step(procs, cfg: BenchConfig, level: int, tag: str, progress) -> dict:
    from ddm.ops.bench_pipeline import run_level

    row = run_level(procs, job_specs(level, cfg))
    progress(
        f"{tag} pipeline {level:>3} jobs: {row['images_per_s']:7.2f} images/s, "
        f"p50 {row['latency_p50_s']:.2f} s, overhead {row['overhead_ms_p50']:.2f} ms/step, "
        f"batch {row['mean_batch_size']:.1f}"
    )
    return row


def _floor_step(floor, one_job: dict, tag: str, progress) -> dict:
    """The minimal consumer's round trip (ops/broker_floor.py) back to back, around a busy wait as long
    as the 1-job run's forward pass, and around expert 0's real forward pass; each minus the work."""
    hold_ms = one_job["compute_ms_p50"]
    row = {
        "bare_ms": floor.measure(),
        "hold_ms": hold_ms,
        "around_busy_wait_ms": floor.measure(busy_ms=hold_ms),
        "around_forward_ms": floor.measure(forward=True),
    }
    progress(
        f"{tag} floor    minimal consumer: {row['bare_ms']:.2f} ms back to back, "
        f"{row['around_busy_wait_ms']:.2f} around a {hold_ms:.1f} ms busy wait, "
        f"{row['around_forward_ms']:.2f} around the forward pass"
    )
    return row


def _http_step(http: HttpServers, cfg: BenchConfig, level: int, tag: str, progress) -> dict:
    row = http.measure(level)
    rate, p50 = row["images_per_s"], row["latency_p50_s"]
    progress(f"{tag} http     {level:>3} jobs: {rate:7.2f} images/s, p50 {p50:.2f} s")
    return row


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


# ---------------------------------------------------------------- report


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

    def fmt(value, spec=".2f"):
        return "-" if value is None else format(value, spec)

    def rate(row):
        """Median images/s, and the range over the repeats when there were several."""
        if not row:
            return "-"
        runs = row.get("images_per_s_runs", [])
        spread = f" ({min(runs):.2f}-{max(runs):.2f})" if len(runs) > 1 else ""
        return f"{row['images_per_s']:.2f}{spread}"

    for row in result["pipeline"]:
        jobs = row["jobs"]
        lim, base, r = limit.get(jobs, {}), http.get(jobs, {}), ratio[jobs]
        lines.append(
            f"| {jobs} | {rate(lim)} | {rate(row)} | "
            f"{row['latency_p50_s']:.2f} / {row['latency_p95_s']:.2f} | {row['overhead_ms_p50']:.2f} | "
            f"{row['mean_batch_size']:.1f} | {rate(base)} | "
            f"{fmt(base.get('latency_p50_s'))} | {fmt(r['pipeline_over_limit'])}x | "
            f"{fmt(r['pipeline_over_http'])}x |"
        )
    return "\n".join(lines)


def floor_line(result: dict) -> str:
    """The transport floor of the run (ops/broker_floor.py), to print under the table."""
    floor = result["transport_floor"]
    if floor is None:
        return "transport floor: not measured (it runs after the 1-job level)"
    return (
        f"transport floor under the 1-job overhead ({result['median_overhead_ms_1_job']:.2f} ms): a minimal "
        f"RabbitMQ consumer's round trip of a one-row request, minus its work, is {floor['bare_ms']:.2f} ms "
        f"back to back, {floor['around_busy_wait_ms']:.2f} ms around a {floor['hold_ms']:.1f} ms busy wait "
        f"and {floor['around_forward_ms']:.2f} ms around expert 0's forward pass"
    )


def run(cfg: BenchConfig, work_dir: Path, progress=print) -> dict:
    started = time.time()
    runs = measure_all(cfg, work_dir / "logs", progress)
    limit = [median_row(rows) for rows in runs.limit.values()]
    pipeline = [median_row(rows) for rows in runs.pipeline.values()]
    http = [median_row(rows) for rows in runs.http.values()]
    result = {
        "format": 4,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "deployment": describe(cfg.deployment),
        "steps": cfg.steps,
        "strategy": cfg.strategy,
        "guidance": cfg.guidance,
        "repeat": cfg.repeat,
        "limit": limit,
        "pipeline": pipeline,
        "http": http,
        "ratios": ratios(runs.limit, runs.pipeline, runs.http),
        # the minimal consumer's round trips (ms; each the median over the repeats, like the rows):
        # the floor under the 1-job overhead; None without a 1-job level
        "transport_floor": median_row(runs.floor) if runs.floor else None,
        # every run, in the order measured per level
        "runs": {
            "limit": [row for rows in runs.limit.values() for row in rows],
            "pipeline": [row for rows in runs.pipeline.values() for row in rows],
            "http": [row for rows in runs.http.values() for row in rows],
            "transport_floor": runs.floor,
        },
        "wall_s": time.time() - started,
    }
    result["median_overhead_ms_1_job"] = next(
        (row["overhead_ms_p50"] for row in pipeline if row["jobs"] == 1), None
    )
    return result
