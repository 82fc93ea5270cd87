"""`ddm bench`: the pipeline against the in-process limit and against the HTTP-per-step baseline, in
one run, on one machine, with the same experts, router and steps.

    limit     router.sampler.sample_local in this process, one batch of B images (B = 1, 4, 16, 64)
    pipeline  C concurrent jobs of one image each through RabbitMQ and Redis (ddm.ops.bench.pipeline)
    http      the same C jobs, each step an HTTP POST of an .npz per chosen expert
              (ddm.ops.bench.http_baseline)

Images are labelled 0, 1, ..., 9, 0, ... in every mode, so each mode asks the experts for the same
rows. Throughput is images per second of wall time; the ratios compare a pipeline level with the limit
at the batch of the same size and with the HTTP baseline at the same concurrency. Every level runs
`repeat` times, the three designs back to back each time (measure_all); tables show medians, the
JSON keeps every run. After each 1-job pipeline run comes the transport floor (ddm.ops.bench.broker_floor:
a minimal RabbitMQ consumer's round trip of a one-row request, back to back, around a busy wait as
long as the forward pass and around expert 0's real forward pass), to read the 1-job overhead against.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddm.ops.bench.jobs import BenchConfig, batch_spec, job_specs
from ddm.ops.bench.report import header, median_row, ratios
from ddm.ops.up.bringup import expert_thread_env
from ddm.schema.deployment import Deployment

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
        from ddm.schema.resolved import ResolvedJob

        started = time.perf_counter()
        sample_local(self.velocity, self.policy, ResolvedJob.of(batch_spec(batch, self.cfg, steps)))
        wall = time.perf_counter() - started
        return {"batch": batch, "images_per_s": batch / wall, "wall_s": wall}


# ---------------------------------------------------------------- the HTTP-per-step baseline


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServers:
    """One Flask expert server process per expert (as the HTTP-per-step design ran them); the jobs'
    loops run here."""

    def __init__(self, cfg: BenchConfig, log_dir: Path):
        self.cfg = cfg
        self.log_dir = log_dir
        self.deployment = Deployment.load(cfg.deployment)
        self.servers: list[subprocess.Popen] = []
        self.urls: dict[int, str] = {}

    def __enter__(self) -> HttpServers:
        from ddm.ops.bench.http_wire import wait_healthy
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
                        [sys.executable, "-m", "ddm.ops.bench.http_server"]
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
        from ddm.ops.up.supervisor import stop_processes

        stop_processes(self.servers, grace_s=10)

    def measure(self, jobs: int, steps: int | None = None) -> dict:
        from ddm.ops.bench.http_baseline import run_http_jobs

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
    from ddm.ops.bench.broker_floor import EchoFloor
    from ddm.ops.bench.pipeline import PipelineProcesses, run_level

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
    from ddm.ops.bench.pipeline import run_level

    row = run_level(procs, job_specs(level, cfg))
    progress(
        f"{tag} pipeline {level:>3} jobs: {row['images_per_s']:7.2f} images/s, "
        f"p50 {row['latency_p50_s']:.2f} s, overhead {row['overhead_ms_p50']:.2f} ms/step, "
        f"batch {row['mean_batch_size']:.1f}"
    )
    return row


def _floor_step(floor, one_job: dict, tag: str, progress) -> dict:
    """The minimal consumer's round trip (ddm.ops.bench.broker_floor) back to back, around a busy wait as long
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


def run(cfg: BenchConfig, work_dir: Path, progress=print) -> dict:
    started = time.time()
    runs = measure_all(cfg, work_dir / "logs", progress)
    limit = [median_row(rows) for rows in runs.limit.values()]
    pipeline = [median_row(rows) for rows in runs.pipeline.values()]
    http = [median_row(rows) for rows in runs.http.values()]
    result = {
        "format": 4,
        **header(cfg),
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
