"""Queue position and ETA: the order ddm.jobs delivers jobs in, kept in Redis, and the estimate of when a
queued job starts, from the job ends routers measured.

RabbitMQ cannot say where a message stands in a queue, so the order is kept beside it:

    names.queue       zset   job id -> queue_score(priority, seq): every job submitted and not yet
                             started. Client.submit adds it (in the transaction that creates the job
                             hash, before the publish; the queued hash expires after queued_ttl_s unless a
                             router starts the job); the router removes it when it starts the job or ends
                             it unrun, and fails a queued job whose own message it dead-letters; readers
                             skip (and prune) entries whose job hash is gone or not queued.
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

ETA: an estimate, never a promise, measured on service, not on arrivals. Work is counted in velocity
evaluations (NFE: steps x the solver's evaluations per step). Over the job ends of the last WINDOW_S
seconds that ran at least one evaluation (an end that ran none, such as a job failed before its first
step, says nothing about service): seconds per evaluation = their run time / their evaluations, and
slots = the most of them that ran at once (the largest overlap of their [at - ran_s, at] intervals; at
least 1). A queued job starts once the work ahead of it and one slot freeing (a mean run) are done at
slots / seconds per evaluation, and then runs its own evaluations at the measured speed: positions().
Idle time between jobs is not in the measure, so light load does not inflate the estimate. With no such
end in the window there is no estimate (None: "unknown").
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from .errors import SchemaError, expected
from .solver import DEFAULT_SOLVER, Solver
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
    start on this router), the steps and velocity evaluations (nfe) this run did, and how it ended.
    Records from before nfe read it as their steps (Euler)."""

    at: float
    ran_s: float
    steps: int
    status: str
    nfe: int | None = None

    @property
    def work(self) -> int:
        """Evaluations this run did (nfe; a record without it: its steps)."""
        return self.steps if self.nfe is None else self.nfe

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes | str) -> JobEnd:
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SchemaError(f"job end record: not JSON ({exc})") from None
        keys = {"at", "ran_s", "steps", "status"}
        if not isinstance(d, dict) or not keys <= set(d) <= keys | {"nfe"}:
            raise SchemaError(expected("a job end {at, ran_s, steps, status[, nfe]}", d))
        at, ran_s, steps, status, nfe = d["at"], d["ran_s"], d["steps"], d["status"], d.get("nfe")
        for name, value in (("at", at), ("ran_s", ran_s)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SchemaError(expected(f"job end {name}, a finite number", value))
        if ran_s < 0 or type(steps) is not int or steps < 0 or status not in END_STATUSES:
            raise SchemaError(expected(f"ran_s >= 0, steps >= 0, status in {END_STATUSES}", d))
        if nfe is not None and (type(nfe) is not int or nfe < 0):
            raise SchemaError(expected("job end nfe, an int >= 0", nfe))
        return cls(float(at), float(ran_s), steps, status, nfe)


def evaluations_per_step(solver: object) -> int:
    """Velocity evaluations one step of `solver` costs, by the one parser (schema/solver.py). An unset
    name, or one this version does not know (a record from a newer router), counts as the default
    solver's (Euler: 1): an estimate of the queue's wait, never a refusal."""
    try:
        return Solver.parse(solver if solver is not None else DEFAULT_SOLVER).stages
    except SchemaError:
        return Solver.parse(DEFAULT_SOLVER).stages


@dataclass(frozen=True)
class Throughput:
    """What the recent job ends that ran an evaluation say: slots (the most jobs that ran at once, at
    least 1), seconds per evaluation of one job, how many ends it rests on, and their mean run time."""

    slots: int
    s_per_nfe: float
    measured: int
    mean_ran_s: float

    @property
    def jobs_per_s(self) -> float | None:
        """Jobs the routers serve per second at the recent mean job: slots / mean run time."""
        return self.slots / self.mean_ran_s if self.mean_ran_s > 0 else None


def concurrency(ends: list[JobEnd]) -> int:
    """The largest number of the runs [at - ran_s, at] that overlap (one ending when another starts does
    not overlap it)."""
    events = sorted([(e.at - e.ran_s, 1) for e in ends] + [(e.at, -1) for e in ends])  # ends (-1) first
    most = running = 0
    for _, delta in events:
        running += delta
        most = max(most, running)
    return most


def measure(ends: list[JobEnd], now: float, window_s: float = WINDOW_S) -> Throughput | None:
    """The throughput of the ends within `window_s` before `now` (Redis's clock) that ran an evaluation;
    None with none."""
    recent = [e for e in ends if e.at >= now - window_s and e.work > 0]
    if not recent:
        return None
    s_per_nfe = sum(e.ran_s for e in recent) / sum(e.work for e in recent)
    mean_ran_s = sum(e.ran_s for e in recent) / len(recent)
    return Throughput(max(1, concurrency(recent)), s_per_nfe, len(recent), mean_ran_s)


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
    jobs_per_s: float | None = None  # jobs served per second at the recent mean job (slots / mean run)
    measured: int = 0  # job ends the estimate rests on (0: no measurement)
    serving: bool = True  # a router publishes its deployment (else nothing will start it)
    slots: int | None = None  # jobs measured running at once (None: no measurement)

    @property
    def ahead(self) -> int:
        """Jobs that will start before this one."""
        return self.position - 1

    def to_dict(self) -> dict:
        """The one JSON shape of a place (`ddm status --json`'s "queue", the web UI's job events and
        /api/jobs/<id>): the fields, start_in_s and done_in_s in whole seconds (an estimate: at least 1;
        None: unknown), "ahead" and "text" (the words `ddm status` prints)."""

        def whole(s: float | None) -> int | None:
            return None if s is None else max(1, round(s))

        return asdict(self) | {
            "start_in_s": whole(self.start_in_s),
            "done_in_s": whole(self.done_in_s),
            "ahead": self.ahead,
            "text": self.text(),
        }

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
    """The QueuePosition of every job in `waiting`: (job id, names.queue score, evaluations: steps x its
    solver's per step) of the queued jobs, in delivery order (ascending score).

    The routers serve `slots` jobs at once, each at s_per_nfe seconds per evaluation, so together
    slots / s_per_nfe evaluations a second. A job starts once the work ahead of it (the evaluations of the
    jobs before it) and one slot freeing (a mean run: the jobs running now, unseen) are done:
    (work ahead x s_per_nfe + mean_ran_s) / slots, which is position x mean_ran_s / slots when every job
    is alike; it is done its own evaluations x s_per_nfe later."""
    out, work_ahead = {}, 0
    for i, (job_id, score, work) in enumerate(waiting):
        start = done = None
        if throughput is not None and serving:
            start = (work_ahead * throughput.s_per_nfe + throughput.mean_ran_s) / throughput.slots
            done = start + work * throughput.s_per_nfe
        work_ahead += work
        out[job_id] = QueuePosition(
            job_id,
            i + 1,
            len(waiting),
            score_parts(score)[0],
            start,
            done,
            throughput.jobs_per_s if throughput is not None else None,
            throughput.measured if throughput is not None else 0,
            serving,
            throughput.slots if throughput is not None else None,
        )
    return out


def about(seconds: float) -> str:
    """A duration for people, rounded as an estimate deserves: 'about 12 s', 'about 4 min', 'about 2 h'."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"
