"""Queue position and ETA: the order ddm.jobs delivers jobs in, kept in Redis, and the estimate of when a
queued job starts, from the job ends routers measured.

RabbitMQ cannot say where a message stands in a queue, so the order is kept beside it:

    names.queue       zset   job id -> queue_score(priority, seq): every job submitted and not yet
                             started. Client.submit adds it (in the transaction that creates the job
                             hash, before the publish); the router removes it when it starts the job or
                             ends it unrun; readers prune entries whose job hash is gone or not queued.
    names.queue_seq   string INCR at submit: first in, first out within a priority, on Redis's counter
                             (not a client's clock: two clients on two hosts agree).
    names.job_ends    list   JobEnd records, newest first, at most ENDS_KEPT (LPUSH + LTRIM by the router
                             at the end of every job it ran).

Position: 1 + the jobs that will start before this one, i.e. the queued jobs with a higher priority, and
those with the same priority submitted earlier (a classic priority queue delivers the highest priority
first, first in, first out within one). "Not started" means status queued: a job a router took from the
broker but holds without running it (its lease is another router's, or Redis was away) still counts; a
job that started once and went back to the broker (its router died) does not (its status is running,
and it resumes first). Exact for a classic ddm.jobs; a quorum ddm.jobs ignores priorities (RabbitMQ 3.x)
or favours high ones only about 2:1 (4.x), so there the position is an approximation.

ETA: an estimate, never a promise. jobs_per_s is measured over the job ends of the last WINDOW_S seconds
(k ends, from the earliest start among them to the latest end: k / that span, which is right both for
jobs run one after another and for a batch run side by side); a queued job starts in about
position / jobs_per_s (with the jobs ahead weighed by their steps: positions()) and then runs for about
its steps x the measured seconds per step of recent done jobs. With no job end in the window there is
no estimate (None: "unknown").
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from .errors import SchemaError, expected
from .topology import JOB_MAX_PRIORITY

# seq below 2**SEQ_BITS keeps priorities apart; scores stay below 2**53 (exact as Redis's doubles)
SEQ_BITS = 40
MAX_SEQ = 2**SEQ_BITS - 1
ENDS_KEPT = 256  # job ends kept in names.job_ends
WINDOW_S = 900.0  # job ends older than this are not a measurement of now
END_STATUSES = ("done", "failed", "cancelled")


def queue_score(priority: int | None, seq: int) -> float:
    """The names.queue score of a job of this AMQP `priority` (None: 0) that got `seq` from INCR: a lower
    score is delivered first (higher priority first, then the lower seq)."""
    p = 0 if priority is None else priority
    if type(p) is not int or not 0 <= p <= JOB_MAX_PRIORITY:
        raise SchemaError(expected(f"priority int in 0..{JOB_MAX_PRIORITY} or None", priority))
    if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
        raise SchemaError(expected(f"queue seq int in 1..{MAX_SEQ}", seq))
    return float((JOB_MAX_PRIORITY - p) * 2**SEQ_BITS + seq)


def score_parts(score: float) -> tuple[int, int]:
    """(priority, seq) of a names.queue score (queue_score's inverse)."""
    level, seq = divmod(int(score), 2**SEQ_BITS)
    return JOB_MAX_PRIORITY - level, seq


@dataclass(frozen=True)
class JobEnd:
    """One job a router ran, at its end: when (Redis's clock), how long this run took (seconds, from its
    start on this router), steps run (done jobs; 0 otherwise) and how it ended."""

    at: float
    ran_s: float
    steps: int
    status: str

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> JobEnd:
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SchemaError(f"job end record: not JSON ({exc})") from None
        if not isinstance(d, dict) or set(d) != {"at", "ran_s", "steps", "status"}:
            raise SchemaError(expected("a job end {at, ran_s, steps, status}", d))
        at, ran_s, steps, status = d["at"], d["ran_s"], d["steps"], d["status"]
        for name, value in (("at", at), ("ran_s", ran_s)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SchemaError(expected(f"job end {name}, a finite number", value))
        if ran_s < 0 or type(steps) is not int or steps < 0 or status not in END_STATUSES:
            raise SchemaError(expected(f"ran_s >= 0, steps >= 0, status in {END_STATUSES}", d))
        return cls(float(at), float(ran_s), steps, status)


@dataclass(frozen=True)
class Throughput:
    """What the recent job ends say: jobs leaving the queue per second, seconds per step of a done job
    (None when none finished done), how many ends it rests on, and their mean run time."""

    jobs_per_s: float
    s_per_step: float | None
    measured: int
    mean_ran_s: float | None = None


def measure(ends: list[JobEnd], now: float, window_s: float = WINDOW_S) -> Throughput | None:
    """The throughput of the ends within `window_s` before `now` (Redis's clock); None with none."""
    recent = [e for e in ends if e.at >= now - window_s]
    if not recent:
        return None
    span = max(e.at for e in recent) - min(e.at - e.ran_s for e in recent)
    jobs_per_s = len(recent) / max(span, 1e-3)
    done = [e for e in recent if e.status == "done" and e.steps > 0]
    s_per_step = sum(e.ran_s for e in done) / sum(e.steps for e in done) if done else None
    mean_ran_s = sum(e.ran_s for e in recent) / len(recent)
    return Throughput(jobs_per_s, s_per_step, len(recent), mean_ran_s)


@dataclass(frozen=True)
class QueuePosition:
    """Where a queued job stands. position: 1 = the next to start; queued: jobs waiting in all (not
    started); start_in_s / done_in_s: the estimate (None: unknown, or no router serving)."""

    job_id: str
    position: int
    queued: int
    priority: int
    start_in_s: float | None = None
    done_in_s: float | None = None
    jobs_per_s: float | None = None
    measured: int = 0  # job ends the estimate rests on (0: no measurement)
    serving: bool = True  # a router publishes its deployment (else nothing will start it)

    @property
    def ahead(self) -> int:
        """Jobs that will start before this one."""
        return self.position - 1

    def to_dict(self) -> dict:
        return asdict(self) | {"ahead": self.ahead, "text": self.text()}

    def text(self) -> str:
        """'position 3 of 7, starts in about 12 s (done in about 20 s; estimate from 14 recent jobs)'."""
        where = f"position {self.position} of {self.queued}"
        if not self.serving:
            return f"{where}; no router is serving, so it starts when one does"
        if self.start_in_s is None:
            return f"{where}; no estimate yet (no job ended in the last {WINDOW_S / 60:.0f} min)"
        done = f"done in {about(self.done_in_s)}; " if self.done_in_s is not None else ""
        jobs = "job" if self.measured == 1 else "jobs"
        basis = f"estimate from {self.measured} recent {jobs}"
        return f"{where}, starts in {about(self.start_in_s)} ({done}{basis})"


def positions(
    waiting: list[tuple[str, float, int]], throughput: Throughput | None, serving: bool
) -> dict[str, QueuePosition]:
    """The QueuePosition of every job in `waiting`: (job id, names.queue score, steps) of the queued
    jobs, in delivery order (ascending score).

    With seconds per step and a mean run time measured, the jobs ahead count by their steps: the routers
    run about `slots` = jobs_per_s x mean_ran_s jobs side by side (Little's law), and a job starts once
    the work ahead of it (their steps x seconds per step) and one slot freeing (a mean run) are done:
    (work ahead + mean_ran_s) / slots, which is position / jobs_per_s when every job is alike. Otherwise
    position / jobs_per_s."""
    rate = throughput.jobs_per_s if throughput is not None else None
    per_step = throughput.s_per_step if throughput is not None else None
    measured = throughput.measured if throughput is not None else 0
    mean_ran = throughput.mean_ran_s if throughput is not None else None
    slots = rate * mean_ran if rate and mean_ran and per_step is not None else None
    out, work_ahead = {}, 0.0
    for i, (job_id, score, steps) in enumerate(waiting):
        position = i + 1
        start = None
        if rate is not None and serving:
            start = (work_ahead + mean_ran) / slots if slots else position / rate
        done = start + steps * per_step if start is not None and per_step is not None else None
        work_ahead += steps * (per_step or 0.0)
        out[job_id] = QueuePosition(
            job_id, position, len(waiting), score_parts(score)[0], start, done, rate, measured, serving
        )
    return out


def about(seconds: float) -> str:
    """A duration for people, rounded as an estimate deserves: 'about 12 s', 'about 4 min', 'about 2 h'."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"
