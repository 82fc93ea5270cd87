"""The pipeline side of `ddm bench`: real worker processes on the real RabbitMQ and Redis, under a
prefix of their own, and the measurement of one concurrency level through the client library."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import astuple, dataclass
from pathlib import Path

import numpy as np

from ddm.client.client import Client
from ddm.ops.cleanup import delete_prefix
from ddm.ops.up.bringup import expert_thread_env
from ddm.ops.up.supervisor import stop_processes
from ddm.runtime.redis_conn import redis_client
from ddm.schema.deployment import Deployment
from ddm.schema.errors import DDMError
from ddm.schema.heartbeat import WorkerHeartbeat
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.names import Names
from ddm.schema.settings import Settings

READY_TIMEOUT_S = 300.0  # a JAX expert compiles its buckets at start (15-40 s on a busy 2-core CPU)


class PipelineProcesses:
    """One expert worker per expert and one router, as `ddm up` runs them, isolated by a fresh prefix;
    and the text-encoder and decoder stages of a deployment that has them."""

    def __init__(self, deployment: Path, log_dir: Path, settings: Settings | None = None):
        base = settings or Settings.from_env()
        self.deployment = Deployment.load(deployment)
        self.prefix = f"bench{uuid.uuid4().hex[:8]}."
        self.names = Names(self.prefix)
        self.env = {
            **os.environ,
            "DDM_PREFIX": self.prefix,
            "DDM_AMQP_URL": base.amqp_url,
            "DDM_REDIS_URL": base.redis_url,
            "DDM_HEARTBEAT_S": "0.25",  # fresh batch counters right after each level
            "PYTHONUNBUFFERED": "1",
        }
        self.settings = Settings.from_env(self.env)
        self.log_dir = log_dir
        self.cwd: Path | None = None  # the children's working directory (default: ours)
        self.procs: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> PipelineProcesses:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        threads = expert_thread_env(self.deployment.num_experts)  # as `ddm up` runs them
        try:
            for entry in self.deployment.experts:
                self._spawn(f"bench-expert{entry.id}", ["expert", "--expert", str(entry.id)], threads)
            if self.deployment.conditioning.kind == "text":
                self._spawn("bench-text-encoder", ["text-encoder"])
            if self.deployment.decoder is not None:
                self._spawn("bench-decoder", ["decoder"])
            self._spawn("bench-router", ["router"])
            self._wait_ready()
        except BaseException:  # a worker that never got ready: stop the others too
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        stop_processes(self.procs.values(), grace_s=10)
        expert_ids = [e.id for e in self.deployment.experts]
        delete_prefix(self.settings.amqp_url, self.settings.redis_url, self.prefix, expert_ids)

    def expert_ids(self) -> list[str]:
        return [name for name in self.procs if name.startswith("bench-expert")]

    def command(self, name: str, argv: list[str]) -> list[str]:
        """The command line of child `name` running `ddm <argv>` (subclasses wrap it)."""
        return [sys.executable, "-m", "ddm.ops.cli", *argv]

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - owned by the child
        argv = ["worker", *args, "--deployment", str(self.deployment.path), "--worker-id", name]
        self.procs[name] = subprocess.Popen(
            self.command(name, argv),
            env={**self.env, **(env or {})},
            cwd=self.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def _wait_ready(self) -> None:
        r = redis_client(self.settings.redis_url)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(r.exists(self.names.worker(name)) for name in self.procs):
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise DDMError(f"{name} exited with {proc.returncode}; see {self.log_dir / name}.log")
            if time.monotonic() > deadline:
                raise DDMError(f"workers not ready after {READY_TIMEOUT_S:g} s; logs in {self.log_dir}")
            time.sleep(0.2)
        r.close()

    def expert_counters(self) -> dict[int, ExpertCounters]:
        """Each expert's counters, summed over its workers' latest heartbeats."""
        r = redis_client(self.settings.redis_url)
        totals: dict[int, ExpertCounters] = {}
        for name in self.expert_ids():
            beat = WorkerHeartbeat.decode(r.hgetall(self.names.worker(name)))
            totals[beat.expert_id] = totals.get(beat.expert_id, ExpertCounters()) + ExpertCounters.of(beat)
        r.close()
        return totals


@dataclass(frozen=True)
class ExpertCounters:
    """An expert's heartbeat counters since its start: requests, forward passes, rows, compute time."""

    requests: int = 0
    batches: int = 0
    rows: int = 0
    compute_ms: float = 0.0

    @classmethod
    def of(cls, beat: WorkerHeartbeat) -> ExpertCounters:
        c = beat.counters
        batches = int(c.get("batches", 0))
        compute_ms = float(c.get("mean_compute_ms", 0.0)) * batches  # the heartbeat keeps the mean
        return cls(int(c.get("requests", 0)), batches, int(c.get("rows", 0)), compute_ms)

    def __add__(self, other: ExpertCounters) -> ExpertCounters:
        return ExpertCounters(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def __sub__(self, other: ExpertCounters) -> ExpertCounters:
        return ExpertCounters(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True)))


def expert_fields(
    before: dict[int, ExpertCounters], after: dict[int, ExpertCounters], wall_s: float, step_ms: dict
) -> dict[str, float]:
    """Per expert k over one level: expert{k}_requests, _compute_ms (mean forward pass), _busy (share
    of the wall time it computed) and _in_flight, an estimate by Little's law: requests per second x
    the mean latency of the steps it alone served (its request round trip; the router exports no
    in-flight gauge)."""
    fields = {}
    for k in sorted(after):
        d = after[k] - before.get(k, ExpertCounters())
        latencies = step_ms.get((k,)) or [ms for experts, v in step_ms.items() if k in experts for ms in v]
        round_trip_s = float(np.mean(latencies)) / 1e3 if latencies else 0.0
        fields |= {
            f"expert{k}_requests": d.requests,
            f"expert{k}_compute_ms": d.compute_ms / d.batches if d.batches else 0.0,
            f"expert{k}_busy": d.compute_ms / 1e3 / wall_s,
            f"expert{k}_in_flight": d.requests / wall_s * round_trip_s,
        }
    return fields


def run_level(procs: PipelineProcesses, specs: list[JobSpec], heartbeat_s: float = 0.25) -> dict:
    """Submit every job at once, wait for all, and measure: images/s, job latency, per-step overhead
    (the router's step wall time minus the expert forward pass that served it), mean batch size."""
    before = procs.expert_counters()
    with Client(settings=procs.settings) as client:
        # The specs are explicit (strategy and guidance set), so no descriptor is needed; skipping the
        # check also lets `bench.ab` drive revisions whose routers publish none.
        ids = [client.submit(spec, check=False) for spec in specs]
        statuses = [client.wait(job_id, timeout=1800) for job_id in ids]
        failed = [st for st in statuses if st.status is not JobStatus.DONE]
        if failed:
            raise DDMError(f"{len(failed)} benchmark job(s) failed, e.g. {failed[0].error}")
        step_ms, overhead_ms, compute_ms = [], [], []
        by_experts: dict[tuple[int, ...], list[float]] = {}  # step latencies by the experts that served
        for job_id in ids:
            for frame in client.frames(job_id, follow=False):
                step_ms.append(frame.latency_ms)
                by_experts.setdefault(tuple(frame.experts), []).append(frame.latency_ms)
                overhead_ms.append(frame.latency_ms - frame.compute_ms)
                compute_ms.append(frame.compute_ms)
    time.sleep(3 * heartbeat_s)  # the workers' next heartbeats carry the counters of this level
    after = procs.expert_counters()
    created = [st.created_at for st in statuses]
    finished = [st.finished_at for st in statuses]
    latency = np.asarray(finished) - np.asarray(created)
    images = sum(spec.n for spec in specs)
    wall_s = max(finished) - min(created)
    batches = sum(c.batches for c in after.values()) - sum(c.batches for c in before.values())
    rows = sum(c.rows for c in after.values()) - sum(c.rows for c in before.values())
    return {
        "jobs": len(specs),
        "images_per_s": images / wall_s,
        "latency_p50_s": float(np.percentile(latency, 50)),
        "latency_p95_s": float(np.percentile(latency, 95)),
        "step_ms_p50": float(np.median(step_ms)),
        "compute_ms_p50": float(np.median(compute_ms)),
        "overhead_ms_p50": float(np.median(overhead_ms)),
        "overhead_ms_p95": float(np.percentile(overhead_ms, 95)),
        "mean_batch_size": rows / batches if batches else 0.0,
        "forward_passes": batches,
        **expert_fields(before, after, wall_s, by_experts),
    }
