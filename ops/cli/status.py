"""`ddm status`: one job's state from Redis (a table or --json), or the most recent jobs. Shows the
strategy and guidance, and the solver, time grid and number of velocity evaluations (NFE), the router
resolved (the job's own, or the serving deployment's defaults), and a queued job's place in the queue
with an estimate of when it starts (schema/queue.py)."""

from __future__ import annotations

import argparse
import time

from ddm.ops.cli.job_flags import JOB_ID_HELP
from ddm.schema.descriptor import labels_summary
from ddm.schema.jobs import JobHash, degraded_text
from ddm.schema.messages import JobStatus
from ddm.schema.queue import QueuePosition
from ddm.schema.solver import Solver


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Show a job's status from Redis (DDM_REDIS_URL, DDM_PREFIX): progress, the strategy and guidance, "
        "the solver, time grid and evaluations (NFE) the router resolved, timings, errors; a queued job's "
        "position in the queue and an estimate of when it starts, from the throughput measured over recent "
        "jobs. "
        "Without a JOB, --recent lists the newest jobs."
    )
    parser.add_argument(
        "job",
        nargs="?",
        help=JOB_ID_HELP,
    )
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument("--recent", type=int, metavar="N", default=None, help="list the N newest jobs")


def _when(ts: float | None, now: float) -> str:
    if ts is None:
        return "-"
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))
    return f"{stamp} ({now - ts:.1f} s ago)"


def _routing(job: JobHash) -> str:
    """The strategy and guidance the router resolved; before it started, what the job asked for."""
    if job.strategy is not None:
        return f"{job.strategy}, guidance {job.guidance:g}"
    spec = job.spec
    asked = [spec.strategy if spec and spec.strategy else "the deployment's default"]
    asked.append(f"guidance {spec.guidance:g}" if spec and spec.guidance is not None else "default guidance")
    return ", ".join(asked) + " (not resolved yet)"


def _sampling(job: JobHash) -> str:
    """'heun on the uniform grid, 16 evaluations (8 steps x 2)': the solver, grid and NFE the router
    resolved (a router from before solvers recorded none: it ran Euler on the uniform grid); before it
    started, what the job asked for."""
    if job.strategy is not None:
        solver, grid = job.solver or "euler", job.grid or "uniform"
        nfe = job.nfe if job.nfe is not None else Solver.parse(solver).nfe(job.steps)
        per_step = Solver.parse(solver).stages
        cost = f"{job.steps} steps x {per_step}" if per_step > 1 else f"1 per step, {job.steps} steps"
        return f"{solver} on the {grid} grid, {nfe} evaluations ({cost})"
    spec = job.spec
    solver = spec.solver if spec and spec.solver else "the deployment's default solver"
    grid = f"the {spec.grid} grid" if spec and spec.grid else "the default grid"
    return f"{solver} on {grid} (not resolved yet)"


def format_status(job: JobHash, now: float | None = None, queue: QueuePosition | None = None) -> str:
    """A job hash (Client.status) as aligned `key  value` lines; a queued job's place (Client.queue_position)
    as `queued  position 3 of 7, starts in about 12 s (...)`."""
    now = time.time() if now is None else now
    progress = f"{job.step}/{job.steps} steps"
    if job.steps:
        progress += f" ({100 * job.step / job.steps:.0f}%)"
    rows = [
        ("job", job.job_id),
        ("status", job.status.value),
        *_queue_row(job, queue),
        ("progress", progress),
        ("images", f"{job.n} (labels {_labels(job)})"),
        ("priority", str(job.priority or 0)),
        ("strategy", _routing(job)),
        ("solver", _sampling(job)),
        ("expert loss", job.on_expert_loss or "-"),
        ("seed", str(job.seed)),
        ("router", job.router or "-"),
        ("attempts", str(job.attempts)),
        ("created", _when(job.created_at, now)),
        ("started", _when(job.started_at, now)),
        ("updated", _when(job.updated_at, now)),
        ("finished", _when(job.finished_at, now)),
    ]
    if job.mean_step_ms is not None:
        rows.append(("mean step", f"{job.mean_step_ms:.1f} ms"))
    if job.resumed_from:
        rows.append(("resumed", f"from step {job.resumed_from}"))
    if job.degraded:
        rows.append(("degraded", degraded_text(job.degraded)))
    if job.error:
        rows.append(("error", job.error))
    if job.cancel_requested_at is not None and not job.status.terminal:
        rows.append(("cancel", f"requested {_when(job.cancel_requested_at, now)}; stops at its next step"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def _labels(job: JobHash) -> str:
    """Its labels by its own deployment's class names (recorded at start), else as digits."""
    return labels_summary(job.labels, job.space.class_names) if job.space else labels_summary(job.labels)


def _queue_row(job: JobHash, queue: QueuePosition | None) -> list[tuple[str, str]]:
    if job.status is not JobStatus.QUEUED:
        return []
    if queue is None:  # submitted by a client from before queue positions, or it started just now
        return [("queued", "position unknown")]
    return [("queued", queue.text())]


def format_recent(jobs: list[tuple[str, JobHash | None]], now: float | None = None) -> str:
    now = time.time() if now is None else now
    header = ("JOB", "STATUS", "STEP", "N", "STRATEGY", "GUIDANCE", "AGE", "ERROR")
    rows = [header]
    for job_id, job in jobs:
        if job is None:
            rows.append((job_id, "(expired)", "-", "-", "-", "-", "-", ""))
            continue
        rows.append(
            (
                job_id,
                job.status.value,
                f"{job.step}/{job.steps}",
                str(job.n),
                job.strategy or "-",
                "-" if job.guidance is None else f"{job.guidance:g}",
                f"{now - job.created_at:.0f} s" if job.created_at is not None else "-",
                (job.error or "")[:60],
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _recent_json(jobs: list[tuple[str, JobHash | None]]) -> list[dict]:
    return [job.to_dict() if job is not None else {"job_id": job_id, "status": None} for job_id, job in jobs]


def main(args: argparse.Namespace) -> int:
    from ddm.client.client import Client
    from ddm.ops.command_kit import print_json
    from ddm.schema.errors import ConfigError

    if args.job is None and args.recent is None:
        raise ConfigError("expected a JOB id or --recent N (see `ddm status --help`)")
    with Client() as client:
        if args.job is not None:
            job = client.job_id(args.job)  # a unique prefix will do
            st = client.status(job)
            queue = client.queue_position(job) if st.status is JobStatus.QUEUED else None
            if args.json:
                print_json(st.to_dict() | {"queue": queue.to_dict() if queue is not None else None})
            else:
                print(format_status(st, queue=queue))
        if args.recent is not None:
            jobs = client.recent(args.recent)
            if args.json:
                print_json(_recent_json(jobs))
            else:
                print(format_recent(jobs) if jobs else f"no jobs under prefix {client.names.prefix!r}")
    return 0
