"""The router's scheduling, pure: no broker, no Redis, a clock passed in (tests use a fake one).

Each job is a small state machine: due -> planned (rows held per expert) -> requests in flight ->
every reply in -> combine -> due again for the step's next evaluation (Heun, midpoint), or the solver's
update (router/solvers.py) -> due again for the next step, or done. Calls report what the glue must do
in an Outbox: requests to publish, finished steps to store, jobs done or failed.

    flush(out)          plan every due step with ONE router call per strategy, then send each expert
                        requests carrying the rows of all due jobs it serves (ROWS_PER_REQUEST at most)
    on_reply(reply, out) the rows of a request are in: a job whose every expert answered steps
    observe(k, ...)     what the glue saw of expert k's queue and heartbeats (router/experts.py): an
                        expert just lost makes the mixing jobs waiting on it route around it
    sweep(out)          per request in flight: hedge a late one to another replica, wait for a busy
                        expert, resend a lost one (velocity is pure: duplicates are harmless), fail
                        jobs whose expert makes no progress or stays gone past the grace period
                        (router/sweeping.py, the timer half, mixed in)

An expert has at most its window of our requests in flight (router/experts.py: one per replica on a
local link); rows that fall due meanwhile are held and ride the next request, so jobs submitted a few
milliseconds apart merge into one batch at the next step instead of alternating at the expert. A far
expert's rows go in staggered cohorts instead (router/experts.py): one request per cohort, each
released one estimated forward pass after the previous one (next_release_s tells the glue when).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from ddm.router.experts import ExpertHealth
from ddm.router.jobrun import JobRun, Part, Request
from ddm.router.outbox import Outbox, Send, StepDone
from ddm.router.policies import RoutingPolicy
from ddm.router.sampler import combine, plan_steps
from ddm.router.sweeping import Sweeping
from ddm.schema.errors import DDMError, SchemaError
from ddm.schema.messages import Frame, VelocityReply, VelocityRequest
from ddm.schema.precision import DEFAULT_PRECISION

ROWS_PER_REQUEST = 64  # rows of several jobs share one request up to this (the experts' largest bucket)
MAX_ATTEMPTS = 5  # sends of one request before its jobs fail for good


class Scheduler(Sweeping):
    def __init__(
        self,
        policy: RoutingPolicy,
        *,
        timeout_s: float,
        clock: Callable[[], float] = time.monotonic,
        rows_per_request: int = ROWS_PER_REQUEST,
        max_attempts: int = MAX_ATTEMPTS,
        grace_s: float = 30.0,
        loss_grace_s: float = 10.0,
        hedge_floor_ms: float = 250.0,
        hedge_max_fraction: float = 0.05,
        describe: Callable[[int], str] = lambda k: f"expert {k}",
    ):
        self.policy = policy
        self.timeout_s = timeout_s
        self.clock = clock
        self.rows_per_request = rows_per_request
        self.max_attempts = max_attempts
        self.grace_s = grace_s
        self.describe = describe  # expert id -> how error messages name it (with its queue)
        self.jobs: dict[str, JobRun] = {}
        self.pending: dict[str, Request] = {}
        self.experts = {
            k: ExpertHealth(
                k,
                timeout_s * max_attempts,
                hedge_floor_ms,
                hedge_max_fraction,
                loss_grace_s=loss_grace_s,
                last_progress=clock(),
            )
            for k in range(policy.num_experts)
        }
        self._due: list[JobRun] = []
        self._held: dict[int, list[JobRun]] = {}  # expert -> planned jobs waiting for a free slot
        self._release_at: dict[int, float] = {}  # far expert -> when its next cohort may leave
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
        self._release_at.clear()
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

    # ------------------------------------------------------------ experts

    def observe(
        self,
        expert: int,
        consumers: int,
        depth: int,
        heartbeats: int | None,
        served: int | None,
        *,
        beats_trusted: bool = True,
    ) -> None:
        """What the glue saw of one expert: its queue's consumers and ready depth, its workers' live
        heartbeats and their total forward passes (beats_trusted False: Redis was away until moments ago,
        so expired heartbeats prove nothing). An expert just judged gone (router/experts.py: absent for
        its loss grace) sends every mixing job waiting on it back to planning (it routes around it at the
        next flush). Requests sent to an expert while it is absent wait in its queue; a returning replica
        serves them."""
        health = self.experts[expert]
        waiting = self._in_flight(expert) > 0
        changed = health.observe(
            self.clock(), consumers, depth, heartbeats, served, waiting=waiting, beats_trusted=beats_trusted
        )
        if changed and not health.live:
            for job in list(self.jobs.values()):
                if job.plan is not None and job.arrays.job.routes_around and self._needs(job, expert):
                    self._replan(job)
            self._forget_unwanted()

    def rejudge(self) -> None:
        """After the router's own broker failover: every expert's absence clock starts again."""
        now = self.clock()
        for health in self.experts.values():
            health.rejudge(now)

    def _forget_unwanted(self) -> None:
        """Stop counting requests no job waits for any more against their expert's window."""
        for request_id, p in list(self.pending.items()):
            if not self._waiting(p):
                del self.pending[request_id]

    def _gone(self) -> frozenset[int]:
        return frozenset(k for k, h in self.experts.items() if not h.live)

    @staticmethod
    def _needs(job: JobRun, expert: int) -> bool:
        return expert in job.plan.rows and expert not in job.got

    def _replan(self, job: JobRun) -> None:
        """Plan the job's step again (an expert it waits on is gone): replies to the old plan are ignored."""
        for held in self._held.values():
            if job in held:
                held.remove(job)
        job.plan, job.got = None, {}
        job.round += 1
        self._due.append(job)

    # ------------------------------------------------------------ sending

    def flush(self, out: Outbox) -> None:
        """Plan every due step and send the rows of all of them. Also sends rows held earlier whose
        expert has a free slot again: a reply or a dropped request frees one without making a step due."""
        due = [job for job in self._due if self._live(job)]
        self._due.clear()
        by_strategy: dict = {}  # (strategy, whether it routes around a gone expert) -> jobs
        for job in due:
            by_strategy.setdefault((job.arrays.strategy, job.arrays.job.routes_around), []).append(job)
        planned: list[JobRun] = []
        gone = self._gone()
        for job in due:
            job.x_eval, job.t_eval = job.arrays.eval_point(job.x, job.step, job.mixed)
        for (strategy, around), jobs in by_strategy.items():
            try:
                plans = plan_steps(
                    self.policy,
                    strategy,
                    [j.x_eval for j in jobs],
                    [j.t_eval for j in jobs],
                    [j.routing_input for j in jobs],
                    gone if around else frozenset(),
                )
            except DDMError as exc:
                for j in jobs:
                    self.fail(j, f"routing step {j.step + 1}: {exc}", out)
                continue
            for job, plan in zip(jobs, plans, strict=True):
                job.plan, job.got, job.compute_ms, job.precisions = plan, {}, 0.0, {}
                planned.append(job)
        sent = self.clock()  # a step's latency_ms runs from here: transport, queueing, compute
        for job in planned:
            if not job.mixed:  # the step's first evaluation
                job.step_started = sent
            for k in job.plan.rows:
                self._held.setdefault(k, []).append(job)
        for k in list(self._held):
            self._dispatch(k, out)

    def _in_flight(self, expert: int) -> int:
        return sum(1 for p in self.pending.values() if p.expert == expert)

    def next_release_s(self) -> float | None:
        """Seconds until a held cohort of a far expert may leave (None: none waits for its time; one
        that waits for a free slot in the window leaves on a reply, which wakes the glue anyway)."""
        now = self.clock()
        times = [
            at
            for k, at in self._release_at.items()
            if self._held.get(k) and self.experts[k].far and self._in_flight(k) < self.experts[k].window()
        ]
        return max(0.0, min(times) - now) if times else None

    def _dispatch(self, expert: int, out: Outbox) -> None:
        """Send the rows held for `expert` in as many requests as its window has room for: one per
        replica when they fit (at least one row each, at most rows_per_request), so the rows due
        together stay one batch; rows that fall due later use the rest of the window at once instead of
        waiting a round trip for a reply. A far expert gets them in staggered cohorts."""
        held = [job for job in self._held.pop(expert, []) if self._live(job) and self._needs(job, expert)]
        health = self.experts[expert]
        if health.far:
            self._dispatch_cohort(expert, held, out)
            return
        free = health.window() - self._in_flight(expert)
        if not held or free <= 0:
            if held:
                self._held[expert] = held
            return
        total = sum(len(job.plan.rows[expert]) for job in held)
        spread = min(free, max(1, health.consumers))
        size = min(self.rows_per_request, math.ceil(total / spread))
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

    def _dispatch_cohort(self, expert: int, held: list[JobRun], out: Outbox) -> None:
        """A far expert: one cohort of the held rows (all the rows it serves, held and in flight, split
        into health.cohorts of them), once the previous cohort has had its estimated forward pass; the
        rest stay held for the next release, so cohorts reach the expert as it frees up."""
        health = self.experts[expert]
        now = self.clock()
        full = self._in_flight(expert) >= health.window()
        if not held or full or now < self._release_at.get(expert, -math.inf):
            if held:
                self._held[expert] = held
            return
        rows_in_flight = sum(
            part.rows for p in self.pending.values() if p.expert == expert for part in p.parts
        )
        total = rows_in_flight + sum(len(job.plan.rows[expert]) for job in held)
        size = min(self.rows_per_request, math.ceil(total / health.cohorts(total)))
        chunk, rows = [], 0
        while held and (not chunk or rows + len(held[0].plan.rows[expert]) <= size):
            rows += len(held[0].plan.rows[expert])
            chunk.append(held.pop(0))
        self._request(expert, chunk, out)
        self._release_at[expert] = now + health.pass_ms(rows) / 1e3 / max(1, health.consumers)
        if held:
            self._held[expert] = held

    def _request(self, expert: int, jobs: list[JobRun], out: Outbox) -> None:
        """One VelocityRequest to `expert` with the rows it serves of each job, at each job's own t."""
        inputs = [job.arrays.inputs(job.x_eval, job.t_eval, job.plan.rows[expert]) for job in jobs]
        columns = [np.concatenate(column) for column in zip(*inputs, strict=True)]  # x, t, y, g[, text_keys]
        self._request_seq += 1
        request_id = f"{self._request_prefix}.{self._request_seq}"
        body = VelocityRequest(request_id, *columns).encode()
        parts = [Part(job.job_id, job.step, job.round, len(job.plan.rows[expert])) for job in jobs]
        now = self.clock()
        self.pending[request_id] = Request(expert, body, parts, sent_at=now, first_sent=now)
        self.experts[expert].sent()
        out.sends.append(Send(expert, request_id, body))

    # ------------------------------------------------------------ replies

    def _waiting(self, request: Request) -> list[JobRun]:
        """The jobs that still wait for this request's rows (failed, finished or re-planned ones do not)."""
        jobs = []
        for part in request.parts:
            job = self.jobs.get(part.job_id)
            current = (
                job is not None and job.plan is not None and (job.step, job.round) == (part.step, part.round)
            )
            if current and self._needs(job, request.expert):
                jobs.append(job)
        return jobs

    def on_reply(self, reply: VelocityReply, out: Outbox) -> None:
        request = self.pending.pop(reply.request_id, None)
        if request is None:  # a duplicate after a resend or hedge, or a reply from an earlier connection
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
        now, health = self.clock(), self.experts[request.expert]
        timed = request.attempts == 1 and not request.hedged_to and request.first_sent >= health.live_since
        round_trip_ms = (now - request.first_sent) * 1000.0
        health.replied(
            now, round_trip_ms, reply.compute_ms, reply.worker_id, request.first_sent, timed=timed, rows=want
        )
        waiting = {job.job_id: job for job in self._waiting(request)}
        offset = 0
        for part in request.parts:
            v = reply.v[offset : offset + part.rows]
            offset += part.rows
            job = waiting.get(part.job_id)
            if job is None:  # the job failed, moved on or was re-planned meanwhile
                continue
            job.got[request.expert] = v
            job.compute_ms = max(job.compute_ms, reply.compute_ms)
            job.precisions[request.expert] = reply.precision
            if len(job.got) == len(job.plan.rows):
                self._evaluated(job, out)

    def _evaluated(self, job: JobRun, out: Outbox) -> None:
        """Every expert answered an evaluation: mix; then the step's next evaluation, or the step."""
        job.mixed.append(combine(job.plan, job.got, job.arrays.spec.n, job.arrays.space.shape))
        job.missing.update(job.plan.missing)
        if job.first_plan is None:
            job.first_plan = job.plan
        if len(job.mixed) == job.arrays.solver.stages:
            self._step(job, out)
            return
        job.plan, job.got = None, {}
        job.round += 1  # replies to the finished evaluation's requests are not the next one's
        self._due.append(job)

    def _step(self, job: JobRun, out: Outbox) -> None:
        """Every evaluation of the step is in: the solver's update, and the frame to store (with the
        routing of the step's first evaluation); then the next step or done."""
        arrays, i, plan = job.arrays, job.step, job.first_plan
        x, history = arrays.advance(job.x, i, job.mixed, job.history)
        missing = tuple(sorted(job.missing))
        job.mixed, job.first_plan, job.missing = [], None, set()
        latency_ms = (self.clock() - job.step_started) * 1000.0
        precisions = tuple(job.precisions.get(k, DEFAULT_PRECISION) for k in plan.experts)
        try:
            frame = Frame.from_latent(
                job.job_id, i + 1, arrays.t(i + 1), x, plan.experts, plan.weights, latency_ms, job.compute_ms,
                missing, () if set(precisions) <= {DEFAULT_PRECISION} else precisions,
            )  # fmt: skip
        except SchemaError as exc:  # the latent diverged (NaN or beyond float16): fail, do not store it
            self.fail(job, f"step {i + 1}: {exc}", out)
            return
        job.x, job.step, job.history = x, i + 1, history
        job.plan, job.got = None, {}
        job.step_ms_total += latency_ms
        job.steps_run += 1
        for k in missing:
            job.degraded.setdefault(k, []).append(i + 1)
        out.steps.append(
            StepDone(frame, x, job.step_ms_total / job.steps_run, latency_ms, dict(job.degraded), history)
        )
        if job.finished:
            self._settle(job, out)
        else:
            self._due.append(job)
