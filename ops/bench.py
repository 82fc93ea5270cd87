"""`ddm bench`: the pipeline against the in-process limit and against the seed's HTTP-per-step design,
in one run, on one machine, with the same experts, router and steps.

    limit     router.sampler.sample_local in this process, one batch of B images (B = 1, 4, 16, 64)
    pipeline  C concurrent jobs of one image each through RabbitMQ and Redis (ops/bench_pipeline.py)
    http      the same C jobs, each step an HTTP POST of an .npz per chosen expert (ops/bench_http.py)

Images are labelled 0, 1, ..., 9, 0, ... in every mode, so each mode asks the experts for the same
rows. Throughput is images per second of wall time; the ratios compare a pipeline level with the limit
at the batch of the same size and with the HTTP baseline at the same concurrency.
"""

from __future__ import annotations

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


def bench_limit(cfg: BenchConfig, progress=print) -> list[dict]:
    from ddm.router.deployment_loader import load_experts, load_policy
    from ddm.router.sampler import sample_local

    deployment = Deployment.load(cfg.deployment)
    policy = load_policy(deployment)
    experts = load_experts(deployment)
    velocity = {k: e.velocity for k, e in experts.items()}
    for batch in cfg.limit_batches:  # warm every batch size once (first calls allocate and plan)
        sample_local(velocity, policy, batch_spec(batch, cfg, steps=2))
    rows = []
    for batch in cfg.limit_batches:
        started = time.perf_counter()
        sample_local(velocity, policy, batch_spec(batch, cfg))
        wall = time.perf_counter() - started
        rows.append({"batch": batch, "images_per_s": batch / wall, "wall_s": wall})
        progress(f"limit    batch {batch:>3}: {batch / wall:7.2f} images/s")
    return rows


# ---------------------------------------------------------------- the pipeline


def bench_pipeline(cfg: BenchConfig, log_dir: Path, progress=print) -> list[dict]:
    from ddm.ops.bench_pipeline import PipelineProcesses, run_level

    with PipelineProcesses(cfg.deployment, log_dir) as procs:
        run_level(procs, job_specs(max(cfg.concurrency), cfg, steps=2))  # warm-up
        rows = []
        for jobs in cfg.concurrency:
            row = run_level(procs, job_specs(jobs, cfg))
            rows.append(row)
            progress(
                f"pipeline {jobs:>3} jobs: {row['images_per_s']:7.2f} images/s, "
                f"p50 {row['latency_p50_s']:.2f} s, overhead {row['overhead_ms_p50']:.2f} ms/step, "
                f"batch {row['mean_batch_size']:.1f}"
            )
    return rows


# ---------------------------------------------------------------- the seed's design


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_http(cfg: BenchConfig, log_dir: Path, progress=print) -> list[dict]:
    """One Flask expert server process per expert (as the seed ran them); the jobs' loops run here."""
    from ddm.ops.bench_http import run_http_jobs, wait_healthy
    from ddm.ops.cmd_up import expert_thread_env
    from ddm.ops.supervisor import stop_processes
    from ddm.router.deployment_loader import load_policy

    deployment = Deployment.load(cfg.deployment)
    policy = load_policy(deployment)
    servers, urls = [], {}
    env = {**os.environ, **expert_thread_env(deployment.num_experts)}  # the pipeline's workers get the same
    log_dir.mkdir(parents=True, exist_ok=True)
    try:
        for entry in deployment.experts:
            port = free_port()
            log = open(log_dir / f"http-expert{entry.id}.log", "wb")  # noqa: SIM115 - owned by the child
            servers.append(
                subprocess.Popen(
                    [sys.executable, "-m", "ddm.ops.bench_http", "--deployment", str(deployment.path)]
                    + ["--expert", str(entry.id), "--port", str(port)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                )
            )
            urls[entry.id] = f"http://127.0.0.1:{port}"
        for url in urls.values():
            wait_healthy(url, timeout=300)
        run_http_jobs(policy, urls, job_specs(max(cfg.concurrency), cfg, steps=2), max(cfg.concurrency))
        rows = []
        for jobs in cfg.concurrency:
            started = time.perf_counter()
            latency = run_http_jobs(policy, urls, job_specs(jobs, cfg), jobs)
            wall = time.perf_counter() - started
            rows.append(
                {
                    "jobs": jobs,
                    "images_per_s": jobs / wall,
                    "latency_p50_s": float(np.percentile(latency, 50)),
                    "latency_p95_s": float(np.percentile(latency, 95)),
                }
            )
            p50 = rows[-1]["latency_p50_s"]
            progress(f"http     {jobs:>3} jobs: {jobs / wall:7.2f} images/s, p50 {p50:.2f} s")
        return rows
    finally:
        stop_processes(servers, grace_s=10)


# ---------------------------------------------------------------- report


def ratios(limit: list[dict], pipeline: list[dict], http: list[dict]) -> list[dict]:
    by_batch = {row["batch"]: row["images_per_s"] for row in limit}
    by_jobs = {row["jobs"]: row["images_per_s"] for row in http}
    out = []
    for row in pipeline:
        jobs = row["jobs"]
        out.append(
            {
                "jobs": jobs,
                "pipeline_over_limit": row["images_per_s"] / by_batch[jobs] if jobs in by_batch else None,
                "pipeline_over_http": row["images_per_s"] / by_jobs[jobs] if jobs in by_jobs else None,
            }
        )
    return out


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

    for row in result["pipeline"]:
        jobs = row["jobs"]
        lim, base, r = limit.get(jobs, {}), http.get(jobs, {}), ratio[jobs]
        lines.append(
            f"| {jobs} | {fmt(lim.get('images_per_s'))} | {row['images_per_s']:.2f} | "
            f"{row['latency_p50_s']:.2f} / {row['latency_p95_s']:.2f} | {row['overhead_ms_p50']:.2f} | "
            f"{row['mean_batch_size']:.1f} | {fmt(base.get('images_per_s'))} | "
            f"{fmt(base.get('latency_p50_s'))} | {fmt(r['pipeline_over_limit'])}x | "
            f"{fmt(r['pipeline_over_http'])}x |"
        )
    return "\n".join(lines)


def run(cfg: BenchConfig, work_dir: Path, progress=print) -> dict:
    started = time.time()
    limit = bench_limit(cfg, progress)
    pipeline = bench_pipeline(cfg, work_dir / "logs", progress)
    http = bench_http(cfg, work_dir / "logs", progress) if cfg.http else []
    result = {
        "format": 1,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": machine(),
        "deployment": describe(cfg.deployment),
        "steps": cfg.steps,
        "strategy": cfg.strategy,
        "guidance": cfg.guidance,
        "limit": limit,
        "pipeline": pipeline,
        "http": http,
        "ratios": ratios(limit, pipeline, http),
        "wall_s": time.time() - started,
    }
    result["median_overhead_ms_1_job"] = next(
        (row["overhead_ms_p50"] for row in pipeline if row["jobs"] == 1), None
    )
    return result
