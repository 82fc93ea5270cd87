"""Queue positions and ETAs from Redis (Client.queue_position, Client.queue_positions; `ddm status`, the
web UI). The keys, the order and the estimate are schema/queue.py's; this reads them and skips the stale
entries it meets (a job whose hash expired or that is no longer queued), so that they never count; it
removes them too unless told not to (the web UI reads without writing: the routers prune every heartbeat).
Client (ddm/client/client.py) mixes QueueReading in."""

from __future__ import annotations

import json

from ddm.client.listing import redis_errors
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import SchemaError
from ddm.schema.messages import JobStatus
from ddm.schema.names import check_job_id
from ddm.schema.queue import (
    ENDS_KEPT,
    JobEnd,
    QueuePosition,
    Throughput,
    evaluations_per_step,
    measure,
    positions,
)
from ddm.schema.solver import DEFAULT_SOLVER

PAGE = 1000  # queue entries read per round trip
QUEUED = JobStatus.QUEUED.value.encode()


def _work(steps: bytes | None, spec: bytes | None, default_solver: str) -> int:
    """A queued job's evaluations: its steps x its solver's evaluations per step (the spec's solver, else
    the serving deployment's default)."""
    n = int(steps) if steps and steps.isdigit() else 0
    try:
        solver = json.loads(spec).get("solver") if spec else None
    except (ValueError, UnicodeDecodeError, AttributeError):
        solver = None
    return n * evaluations_per_step(solver or default_solver)


def waiting_jobs(
    r, names, default_solver: str = DEFAULT_SOLVER, *, prune: bool = True
) -> list[tuple[str, float, int]]:
    """(job id, score, evaluations) of every job in names.queue whose hash says queued, in delivery order.
    The others (hash gone: expired or deleted; status running or ended) are skipped, and with `prune`
    removed from the set: a status never goes back to queued, so such an entry can only be stale."""
    out: list[tuple[str, float, int]] = []
    low = "-inf"
    while True:  # by score, not by index: entries removed meanwhile (started jobs) shift no page
        page = r.zrangebyscore(names.queue, low, "+inf", start=0, num=PAGE, withscores=True)
        if not page:
            return out
        pipe = r.pipeline(transaction=False)
        ids = [m.decode() if isinstance(m, bytes) else m for m, _ in page]
        for job_id in ids:
            pipe.hmget(names.job(job_id), "status", "steps", "spec")
        stale = []
        for job_id, (_, score), (status, steps, spec) in zip(ids, page, pipe.execute(), strict=True):
            if status == QUEUED:
                out.append((job_id, score, _work(steps, spec, default_solver)))
            else:
                stale.append(job_id)
        if stale and prune:
            r.zrem(names.queue, *stale)
        if len(page) < PAGE:
            return out
        low = f"({page[-1][1]!r}"  # every score is its own (one seq per job): exclusive after the last


def default_solver(raw: bytes | None) -> str:
    """The serving descriptor's default solver (sampling.default_solver); Euler without a readable one."""
    if raw is None:
        return DEFAULT_SOLVER
    try:
        return DeploymentDescriptor.decode(raw).sampling.default_solver
    except SchemaError:
        return DEFAULT_SOLVER


def throughput(r, names) -> Throughput | None:
    """The throughput the recent job ends in names.job_ends say (on Redis's clock); None without any.
    An entry that does not decode is not a measurement (skipped)."""
    pipe = r.pipeline(transaction=False)
    pipe.lrange(names.job_ends, 0, ENDS_KEPT - 1)
    pipe.time()
    raw, (sec, usec) = pipe.execute()
    ends = []
    for item in raw:
        try:
            ends.append(JobEnd.decode(item))
        except SchemaError:
            continue
    return measure(ends, sec + usec / 1e6)


class QueueReading:
    """queue_position() and queue_positions() for a class with `redis` and `names` (Client)."""

    @redis_errors
    def queue_positions(self, *, prune: bool = True) -> dict[str, QueuePosition]:
        """Every queued job's QueuePosition (schema/queue.py), from one reading of the queue. prune=False:
        read only (stale entries skipped, left to the routers' heartbeat to remove)."""
        descriptor = self.redis.get(self.names.deployment)
        waiting = waiting_jobs(self.redis, self.names, default_solver(descriptor), prune=prune)
        if not waiting:
            return {}
        return positions(waiting, throughput(self.redis, self.names), descriptor is not None)

    def queue_position(self, job_id: str) -> QueuePosition | None:
        """Where a queued job stands: its position (1 = next to start), the jobs queued in all, and an
        estimate of when it starts and ends (None: unknown). None when the job is not queued (started,
        ended, unknown, or submitted by a client from before queue positions)."""
        check_job_id(job_id)
        return self.queue_positions().get(job_id)
