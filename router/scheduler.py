"""The router's scheduling, pure: no broker, no Redis, a clock passed in (tests use a fake one).

Each job is a small state machine: due -> planned (rows held per expert) -> requests in flight ->
every reply in -> combine, Euler -> due again, or done. Calls report what the glue must do in an
Outbox: requests to publish, finished steps to store, jobs done or failed.

    flush(out)          plan every due step with ONE router call per strategy, then send each expert
                        requests carrying the rows of all due jobs it serves (ROWS_PER_REQUEST at most)
    on_reply(reply, out) the rows of a request are in: a job whose every expert answered steps
    sweep(out)          resend requests older than the timeout (velocity is pure: duplicates are
                        harmless); fail their jobs after max_attempts sends

An expert has at most as many of our requests in flight as it has slots (its queue's consumers, set
by the glue); rows that fall due meanwhile are held and ride the next request, so jobs submitted a few
milliseconds apart merge into one batch at the next step instead of alternating at the expert.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ddm.router.policies import RoutingPolicy
from ddm.router.sampler import JobArrays, StepPlan, plan_steps
from ddm.schema.errors import DDMError, SchemaError
from ddm.schema.messages import Frame, VelocityReply, VelocityRequest

ROWS_PER_REQUEST = 64  # rows of several jobs share one request up to this (the experts' largest bucket)
MAX_ATTEMPTS = 5  # sends of one request before its jobs fail for good


@dataclass
class JobRun:
    """One running job: its arrays, its latent after `step` steps, and the step in progress."""

    arrays: JobArrays
    tag: object  # the glue's handle on the job message (its delivery tag), opaque here
    x: np.ndarray  # float32 [n,1,32,32]
    step: int  # steps done
    plan: StepPlan | None = None
    got: dict[int, np.ndarray] = field(default_factory=dict)  # expert -> its rows' velocities
    compute_ms: float = 0.0  # the slowest expert forward pass that served this step
    step_started: float = 0.0
    step_ms_total: float = 0.0
    steps_run: int = 0

    @property
    def job_id(self) -> str:
        return self.arrays.spec.job_id

    @property
    def finished(self) -> bool:
        return self.step >= self.arrays.spec.steps


@dataclass(frozen=True)
class Part:
    """The rows of one job's step inside a request, in request order."""

    job_id: str
    step: int
    rows: int


@dataclass
class Request:
    expert: int
    body: bytes
    parts: list[Part]
    sent_at: float
    attempts: int = 1


@dataclass(frozen=True)
class Send:
    expert: int
    request_id: str
    body: bytes
    resend: bool = False


@dataclass(frozen=True)
class StepDone:
    """A finished step to store: its frame, the full-precision latent, the job's mean step time."""

    frame: Frame
    x: np.ndarray
    mean_step_ms: float
    latency_ms: float


@dataclass
class Outbox:
    """What one scheduler call asks the glue to do, in this order: publish, store, settle."""

    sends: list[Send] = field(default_factory=list)
    steps: list[StepDone] = field(default_factory=list)
    done: list[JobRun] = field(default_factory=list)
    failed: list[tuple[JobRun, str]] = field(default_factory=list)


class Scheduler:
    def __init__(
        self,
        policy: RoutingPolicy,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        rows_per_request: int = ROWS_PER_REQUEST,
        max_attempts: int = MAX_ATTEMPTS,
    ):
        self.policy = policy
        self.timeout_s = timeout_s
        self.clock = clock
        self.rows_per_request = rows_per_request
        self.max_attempts = max_attempts
        self.jobs: dict[str, JobRun] = {}
        self.pending: dict[str, Request] = {}
        self.slots: dict[int, int] = {}  # expert -> requests in flight allowed (its queue's consumers)
        self._due: list[JobRun] = []
        self._held: dict[int, list[JobRun]] = {}  # expert -> planned jobs waiting for a free slot
        self._request_prefix = "r"
        self._request_seq = 0

    def reset(self, request_prefix: str) -> None:
        """Forget every job and request (the connection they lived on is gone: the broker redelivers
        the job messages, and whoever gets them resumes from Redis). Replies to requests of an earlier
        prefix match nothing."""
        self.jobs.clear()
        self.pending.clear()
        self._due.clear()
        self._held.clear()
        self._request_prefix = request_prefix
        self._request_seq = 0

    # ------------------------------------------------------------ jobs

    def start(self, job: JobRun, out: Outbox) -> None:
        """Take a job (fresh or resumed at job.step); its next step falls due at the next flush."""
        self.jobs[job.job_id] = job
        if job.finished:
            self._settle(job, out)
        else:
            self._due.append(job)

    def _live(self, job: JobRun) -> bool:
        return self.jobs.get(job.job_id) is job

    def fail(self, job: JobRun, error: str, out: Outbox) -> None:
        """Fail a job for good; rows of it still in flight are skipped when they come back."""
        if self.jobs.pop(job.job_id, None) is job:
            out.failed.append((job, error))

    def drop(self, job_id: str) -> JobRun | None:
        """Forget a job with no outcome (another router owns it now, or Redis went away): its rows in
        flight are skipped when they come back."""
        return self.jobs.pop(job_id, None)

    def _settle(self, job: JobRun, out: Outbox) -> None:
        self.jobs.pop(job.job_id, None)
        out.done.append(job)

    # ------------------------------------------------------------ sending

    def flush(self, out: Outbox) -> None:
        """Plan every due step and send the rows of all of them. Also sends rows held earlier whose
        expert has a free slot again: a reply or a dropped request frees one without making a step due."""
        due = [job for job in self._due if self._live(job)]
        self._due.clear()
        by_strategy: dict = {}
        for job in due:
            by_strategy.setdefault(job.arrays.strategy, []).append(job)
        planned: list[JobRun] = []
        for strategy, jobs in by_strategy.items():
            try:
                plans = plan_steps(
                    self.policy,
                    strategy,
                    [j.x for j in jobs],
                    [j.arrays.t(j.step) for j in jobs],
                    [j.arrays.labels for j in jobs],
                )
            except DDMError as exc:
                for j in jobs:
                    self.fail(j, f"routing step {j.step + 1}: {exc}", out)
                continue
            for job, plan in zip(jobs, plans, strict=True):
                job.plan, job.got, job.compute_ms = plan, {}, 0.0
                planned.append(job)
        sent = self.clock()  # a step's latency_ms runs from here: transport, queueing, compute
        for job in planned:
            job.step_started = sent
            for k in job.plan.rows:
                self._held.setdefault(k, []).append(job)
        for k in list(self._held):
            self._dispatch(k, out)

    def _in_flight(self, expert: int) -> int:
        return sum(1 for p in self.pending.values() if p.expert == expert)

    def _dispatch(self, expert: int, out: Outbox) -> None:
        """Send the rows held for `expert` in as many requests as it has free slots (at least one row
        each, at most rows_per_request); what does not fit waits for a reply to free a slot."""
        held = [job for job in self._held.pop(expert, []) if self._live(job) and expert not in job.got]
        free = self.slots.get(expert, 1) - self._in_flight(expert)
        if not held or free <= 0:
            if held:
                self._held[expert] = held
            return
        total = sum(len(job.plan.rows[expert]) for job in held)
        size = min(self.rows_per_request, math.ceil(total / free))  # spread over the free replicas
        chunk: list[JobRun] = []
        rows = 0
        while held and free > 0:
            n = len(held[0].plan.rows[expert])
            if chunk and rows + n > size:
                self._request(expert, chunk, out)
                free -= 1
                chunk, rows = [], 0
                continue
            chunk.append(held.pop(0))
            rows += n
        if chunk:  # the loop ends with a chunk only when every held job is in it
            self._request(expert, chunk, out)
        if held:
            self._held[expert] = held

    def _request(self, expert: int, jobs: list[JobRun], out: Outbox) -> None:
        """One VelocityRequest to `expert` with the rows it serves of each job, at each job's own t."""
        inputs = [job.arrays.inputs(job.x, job.step, job.plan.rows[expert]) for job in jobs]
        x, t, y, g = (np.concatenate(column) for column in zip(*inputs, strict=True))
        self._request_seq += 1
        request_id = f"{self._request_prefix}.{self._request_seq}"
        body = VelocityRequest(request_id, x, t, y, g).encode()
        parts = [Part(job.job_id, job.step, len(job.plan.rows[expert])) for job in jobs]
        self.pending[request_id] = Request(expert, body, parts, sent_at=self.clock())
        out.sends.append(Send(expert, request_id, body))

    # ------------------------------------------------------------ replies

    def _waiting(self, request: Request) -> list[JobRun]:
        """The jobs that still wait for this request's rows (failed or finished ones do not)."""
        jobs = []
        for part in request.parts:
            job = self.jobs.get(part.job_id)
            if job is not None and job.step == part.step and request.expert not in job.got:
                jobs.append(job)
        return jobs

    def on_reply(self, reply: VelocityReply, out: Outbox) -> None:
        request = self.pending.pop(reply.request_id, None)
        if request is None:  # a duplicate after a resend, or a reply from an earlier connection
            return
        want = sum(part.rows for part in request.parts)
        if reply.v.shape[0] != want or reply.expert_id != request.expert:
            error = (
                f"expert {request.expert} answered {reply.v.shape[0]} rows as expert {reply.expert_id}; "
                f"expected {want} rows from expert {request.expert}"
            )
            for job in self._waiting(request):
                self.fail(job, error, out)
            return
        waiting = {job.job_id: job for job in self._waiting(request)}
        offset = 0
        for part in request.parts:
            v = reply.v[offset : offset + part.rows]
            offset += part.rows
            job = waiting.get(part.job_id)
            if job is None:  # the job failed or moved on meanwhile
                continue
            job.got[request.expert] = v
            job.compute_ms = max(job.compute_ms, reply.compute_ms)
            if len(job.got) == len(job.plan.rows):
                self._step(job, out)

    def _step(self, job: JobRun, out: Outbox) -> None:
        """Every expert answered: mix, Euler, and the frame to store; then the next step or done."""
        arrays, i = job.arrays, job.step
        x = arrays.advance(job.x, i, job.plan, job.got)
        latency_ms = (self.clock() - job.step_started) * 1000.0
        try:
            frame = Frame.from_latent(
                job.job_id,
                i + 1,
                arrays.t(i + 1),
                x,
                job.plan.experts,
                job.plan.weights,
                latency_ms,
                job.compute_ms,
            )
        except SchemaError as exc:  # the latent diverged (NaN or beyond float16): fail, do not store it
            self.fail(job, f"step {i + 1}: {exc}", out)
            return
        job.x, job.step = x, i + 1
        job.step_ms_total += latency_ms
        job.steps_run += 1
        out.steps.append(StepDone(frame, x, job.step_ms_total / job.steps_run, latency_ms))
        if job.finished:
            self._settle(job, out)
        else:
            self._due.append(job)

    # ------------------------------------------------------------ timeouts

    def sweep(self, out: Outbox) -> None:
        """Resend requests that timed out; fail their jobs after max_attempts sends."""
        now = self.clock()
        for request_id, p in list(self.pending.items()):
            if now - p.sent_at < self.timeout_s:
                continue
            waiting = self._waiting(p)
            if not waiting:  # every job in it finished or failed meanwhile
                self.pending.pop(request_id, None)
            elif p.attempts >= self.max_attempts:
                self.pending.pop(request_id, None)
                error = (
                    f"expert {p.expert} did not answer {request_id} after {p.attempts} sends of "
                    f"{self.timeout_s:g} s each (is a worker for it running?)"
                )
                for job in waiting:
                    self.fail(job, error, out)
            else:
                p.attempts += 1
                p.sent_at = now
                out.sends.append(Send(p.expert, request_id, p.body, resend=True))
