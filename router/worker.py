"""The router worker: many sampling jobs at once, event-driven, resumable.

Each job is a small state machine advanced by events on one pika connection (no thread per job):

    job message  -> load or resume state -> the job's step is due
    reply        -> when the step's last reply is in: combine, Euler, write frame + state to Redis,
                    then the next step is due (or finish: result, status, ack)
    after every burst of events: plan every due step with ONE router call, then send each expert ONE
                    request carrying the rows of all due jobs it serves (up to ROWS_PER_REQUEST)
    timer        -> resend requests older than the timeout (velocity is pure: duplicates are harmless)

Concurrent jobs therefore reach the experts as one message and one forward pass, and a learned
router runs once per burst instead of once per job. An expert has at most as many of our requests in
flight as its queue has consumers (replicas); rows that fall due meanwhile are held and ride the next
request. Jobs submitted a few milliseconds apart thus merge into one batch at the next step instead
of alternating at the expert forever.

The job message is acked only when the job is done or failed for good, so if this process dies the
broker redelivers the job and whichever router gets it resumes from the last step stored in Redis.
Routing, mixing and the Euler step are router/sampler.py's, the same code `ddm sample --local` runs.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import socket
import time
import uuid
from dataclasses import dataclass, field

import numpy as np
import pika
import redis

from ddm.router.deployment_loader import load_policy
from ddm.router.sampler import StepPlan, combine, initial_noise, plan_steps
from ddm.router.store import JobStore
from ddm.schema.deployment import Deployment
from ddm.schema.errors import DDMError, SchemaError
from ddm.schema.flow import euler_step, time_grid
from ddm.schema.messages import Frame, JobSpec, JobStatus, VelocityReply, VelocityRequest
from ddm.schema.settings import Settings
from ddm.schema.topology import CONTENT_TYPE, REASON_HEADER, SOURCE_QUEUE_HEADER, WORKER_HEADER
from ddm.workers.amqp import CONNECTION_ERRORS, connect, declare_topology
from ddm.workers.metrics import RouterMetrics, serve_metrics
from ddm.workers.redis_conn import connect_redis

log = logging.getLogger("ddm.router")

SWEEP_S = 0.25  # how often pending requests are checked for timeouts
MAX_ATTEMPTS = 5  # sends of one request before its job fails for good
ROWS_PER_REQUEST = 64  # rows of several jobs share one request up to this (the experts' largest bucket)


@dataclass(frozen=True)
class Part:
    """The rows of one job's step inside a request, in request order."""

    job_id: str
    step: int
    rows: int


@dataclass
class Pending:
    expert: int
    body: bytes
    parts: list[Part]
    sent_at: float
    attempts: int = 1


@dataclass
class JobRun:
    spec: JobSpec
    delivery_tag: int
    x: np.ndarray  # float32 [n,1,32,32], the latent after `step` steps
    step: int  # steps done
    resumed_from: int
    grid: np.ndarray
    labels: np.ndarray
    guidance: np.ndarray
    plan: StepPlan | None = None
    got: dict[int, np.ndarray] = field(default_factory=dict)
    compute_ms: float = 0.0  # the slowest expert forward pass that served this step
    step_started: float = 0.0
    step_ms_total: float = 0.0
    steps_run: int = 0


class RouterWorker:
    def __init__(
        self,
        settings: Settings,
        deployment_path,
        worker_id: str | None = None,
        max_jobs: int = 64,
        metrics_port: int | None = None,
    ):
        self.settings = settings
        self.names = settings.names
        self.deployment = Deployment.load(deployment_path)
        self.policy = load_policy(self.deployment)
        self.worker_id = worker_id or f"router-{socket.gethostname()}-{os.getpid()}"
        self.max_jobs = max_jobs
        self.store = JobStore(
            connect_redis(settings.redis_url, attempts=None), self.names, settings.job_ttl_s
        )
        self.jobs: dict[str, JobRun] = {}
        self.pending: dict[str, Pending] = {}
        self._due: list[JobRun] = []  # jobs whose next step waits for the end of this event burst
        self._writes: list[tuple[Frame, np.ndarray, float]] = []  # finished steps not yet in Redis
        self._held: dict[int, list[JobRun]] = {}  # expert -> planned jobs waiting for a free slot
        self._slots: dict[int, int] = {}  # expert -> requests in flight allowed (its queue's consumers)
        self._request_prefix = ""
        self._request_seq = 0
        self.stats = {"jobs_done": 0, "jobs_failed": 0, "steps": 0, "resends": 0, "reconnects": 0}
        self.started_at = time.time()
        self.metrics = RouterMetrics(self.worker_id)
        self.metrics.set_health(self._health)
        self.metrics.in_flight.set_function(lambda: len(self.jobs))
        self.metrics_port = settings.metrics_port if metrics_port is None else int(metrics_port)
        self._consuming = False
        self._last_beat = -1e9  # time.monotonic() of the last heartbeat Redis took
        self._stopping = False
        self._conn = None
        self._channel = None
        self._reply_queue = ""

    # -- lifecycle --------------------------------------------------------------------------------

    def run(self) -> None:
        """Serve until stop(); reconnect with bounded backoff when the broker goes away."""
        server = serve_metrics(self.metrics, self.metrics_port)
        try:
            self._run()
        finally:
            if server is not None:
                server.close()

    def _health(self) -> dict[str, bool]:
        """For /healthz (HTTP thread): reads flags only."""
        fresh = time.monotonic() - self._last_beat < self.settings.heartbeat_ttl_s
        return {"consuming": self._consuming, "redis": fresh}

    def _run(self) -> None:
        while not self._stopping:
            try:
                self._conn = connect(self.settings.amqp_url, attempts=None)
                self._serve()
            except CONNECTION_ERRORS as exc:
                if self._stopping:
                    break
                self.stats["reconnects"] += 1
                self.metrics.reconnects.inc()
                log.warning(
                    "broker connection lost (%r); %d job(s) will be redelivered and resumed",
                    exc,
                    len(self.jobs),
                )
            finally:
                self._consuming = False
                self._drop_inflight()
                self._close()
        self._clear_heartbeat()

    def stop(self) -> None:
        """Ask run() to return (safe from a signal handler or another thread)."""
        self._stopping = True

    def _serve(self) -> None:
        ch = self._conn.channel()
        self._channel = ch
        declare_topology(ch, self.names, range(self.deployment.num_experts))
        ch.basic_qos(prefetch_count=self.max_jobs)
        self._reply_queue = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
        self._request_prefix = uuid.uuid4().hex[:12]  # replies to an earlier connection match nothing
        ch.basic_consume(self._reply_queue, self._on_reply, auto_ack=True)
        ch.basic_consume(self.names.jobs, self._on_job)
        self._conn.call_later(SWEEP_S, self._sweep)
        self._heartbeat()  # also counts each expert's replicas
        self._consuming = True
        log.info(
            "router %s: %d experts, router %s, strategies %s, queue %s",
            self.worker_id,
            self.deployment.num_experts,
            self.deployment.router.kind,
            ",".join(self.policy.strategies()),
            self.names.jobs,
        )
        while not self._stopping:
            # process_data_events returns once it has dispatched a burst of deliveries and timers;
            # every step those made due is then planned and sent together, and only then stored:
            # the Redis round trip overlaps the experts' forward pass instead of delaying it.
            self._conn.process_data_events(time_limit=0.5)
            self._send_due_steps()
            self._write_steps()

    def _drop_inflight(self) -> None:
        # Unacked job messages go back to the queue when the connection closes; whoever gets them
        # resumes from Redis. Nothing in memory is needed for that.
        try:
            self._write_steps()  # computed steps are valid whatever happened to the broker
        except redis.RedisError as exc:  # then the jobs resume from their previous stored step
            log.warning("could not store %d finished step(s): %r", len(self._writes), exc)
            self._writes.clear()
        self.jobs.clear()
        self.pending.clear()
        self._due.clear()
        self._held.clear()

    def _close(self) -> None:
        try:
            if self._conn is not None and self._conn.is_open:
                self._conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection may fail in many ways
            pass
        self._conn = self._channel = None

    # -- jobs -----------------------------------------------------------------------------------

    def _on_job(self, ch, method, props, body: bytes) -> None:
        try:
            spec = JobSpec.decode(body)
        except SchemaError as exc:
            self._dead_letter(ch, method, props, body, f"undecodable job: {exc}")
            return
        if spec.job_id in self.jobs:  # the same job published twice: the run in progress covers it
            ch.basic_ack(method.delivery_tag)
            return
        status = self.store.job(spec.job_id).get("status")
        if status in (JobStatus.DONE.value, JobStatus.FAILED.value):
            ch.basic_ack(method.delivery_tag)  # finished before a crash lost the ack
            return
        try:
            self._check_supported(spec)
        except DDMError as exc:
            self.store.start(spec.job_id, self.worker_id, 0, spec)
            self._fail(spec.job_id, method.delivery_tag, str(exc))
            return
        stored = self.store.load_state(spec.job_id, spec.n)
        step, x = stored if stored is not None else (0, initial_noise(spec))
        job = JobRun(
            spec=spec,
            delivery_tag=method.delivery_tag,
            x=x,
            step=step,
            resumed_from=step,
            grid=time_grid(spec.steps),
            labels=np.asarray(spec.labels, dtype=np.int64),
            guidance=np.full(spec.n, spec.guidance, np.float32),
        )
        self.jobs[spec.job_id] = job
        self.metrics.jobs.labels(JobStatus.RUNNING.value).inc()
        self.store.start(spec.job_id, self.worker_id, step, spec)
        if step:
            log.info("job %s resumed at step %d/%d", spec.job_id, step, spec.steps)
        if step >= spec.steps:
            self._complete(job)
        else:
            self._start_step(job)

    def _check_supported(self, spec: JobSpec) -> None:
        """The router validates again: the strategy must be one this deployment can route."""
        self.policy.check_strategy(spec.strategy)

    def _start_step(self, job: JobRun) -> None:
        self._due.append(job)

    def _send_due_steps(self) -> None:
        """Plan every due step (one router call per strategy) and send each expert the rows of all of
        them, ROWS_PER_REQUEST at most per request. Also sends rows held earlier whose expert has a free
        slot again: a reply or a dropped request frees one without making any step due."""
        due = [job for job in self._due if self.jobs.get(job.spec.job_id) is job]
        self._due.clear()
        by_strategy: dict[str, list[JobRun]] = {}
        for job in due:
            by_strategy.setdefault(job.spec.strategy, []).append(job)
        planned = []
        for strategy, jobs in by_strategy.items():
            try:
                plans = plan_steps(
                    self.policy,
                    strategy,
                    [j.x for j in jobs],
                    [float(j.grid[j.step]) for j in jobs],
                    [j.labels for j in jobs],
                )
            except DDMError as exc:
                for j in jobs:
                    self._fail(j.spec.job_id, j.delivery_tag, f"routing step {j.step + 1}: {exc}")
                continue
            for job, plan in zip(jobs, plans, strict=True):
                job.plan, job.got, job.compute_ms = plan, {}, 0.0
                planned.append(job)
        sent = time.perf_counter()  # a step's latency_ms runs from here: transport, queueing, compute
        for job in planned:
            job.step_started = sent
            for k in job.plan.rows:
                self._held.setdefault(k, []).append(job)
        for k in list(self._held):
            self._dispatch(k)

    def _dispatch(self, expert: int) -> None:
        """Send the rows held for `expert` in as many requests as it has free slots (at least one row
        each, at most ROWS_PER_REQUEST); what does not fit waits for a reply to free a slot."""
        held = [
            job
            for job in self._held.pop(expert, [])
            if self.jobs.get(job.spec.job_id) is job and expert not in job.got
        ]
        free = self._slots.get(expert, 1) - sum(1 for p in self.pending.values() if p.expert == expert)
        if not held or free <= 0:
            if held:
                self._held[expert] = held
            return
        total = sum(len(job.plan.rows[expert]) for job in held)
        size = min(ROWS_PER_REQUEST, math.ceil(total / free))  # spread over the free replicas
        chunk: list[JobRun] = []
        rows = 0
        while held and free > 0:
            job = held[0]
            n = len(job.plan.rows[expert])
            if chunk and rows + n > size:
                self._send_request(expert, chunk)
                free -= 1
                chunk, rows = [], 0
                continue
            chunk.append(held.pop(0))
            rows += n
        if chunk:  # the loop ends with a chunk only when every held job is in it
            self._send_request(expert, chunk)
        if held:
            self._held[expert] = held

    def _send_request(self, expert: int, jobs: list[JobRun]) -> None:
        """One VelocityRequest to `expert` with the rows it serves of each job, at each job's own t."""
        pairs = [(job, job.plan.rows[expert]) for job in jobs]
        x = np.concatenate([job.x[rows] for job, rows in pairs])
        t = np.concatenate([np.full(len(rows), job.grid[job.step], np.float32) for job, rows in pairs])
        y = np.concatenate([job.labels[rows] for job, rows in pairs])
        g = np.concatenate([job.guidance[rows] for job, rows in pairs])
        self._request_seq += 1
        request_id = f"{self._request_prefix}.{self._request_seq}"
        body = VelocityRequest(request_id, x, t, y, g).encode()
        parts = [Part(job.spec.job_id, job.step, len(rows)) for job, rows in pairs]
        self.pending[request_id] = Pending(expert, body, parts, sent_at=time.monotonic())
        self._publish_request(expert, request_id, body)

    def _waiting_jobs(self, pending: Pending) -> list[JobRun]:
        """The jobs that still wait for this request's rows (failed or finished ones do not)."""
        jobs = []
        for part in pending.parts:
            job = self.jobs.get(part.job_id)
            if job is not None and job.step == part.step and pending.expert not in job.got:
                jobs.append(job)
        return jobs

    def _publish_request(self, expert: int, request_id: str, body: bytes) -> None:
        props = pika.BasicProperties(
            reply_to=self._reply_queue,
            correlation_id=request_id,
            content_type=CONTENT_TYPE,
            type="velocity_request",
            delivery_mode=1,  # transient: a lost request is resent by the sweep
        )
        self._channel.basic_publish("", self.names.expert_queue(expert), body, props)
        self.metrics.requests.labels(str(expert)).inc()

    def _on_reply(self, ch, method, props, body: bytes) -> None:
        try:
            reply = VelocityReply.decode(body)
        except SchemaError as exc:
            log.warning("dropping an undecodable reply: %s", exc)
            return
        pending = self.pending.pop(reply.request_id, None)
        if pending is None:  # a duplicate after a resend, or a reply from an earlier connection: harmless
            return
        want = sum(part.rows for part in pending.parts)
        if reply.v.shape[0] != want or reply.expert_id != pending.expert:
            error = (
                f"expert {pending.expert} answered {reply.v.shape[0]} rows as expert {reply.expert_id}; "
                f"expected {want} rows from expert {pending.expert}"
            )
            for job in self._waiting_jobs(pending):
                self._fail(job.spec.job_id, job.delivery_tag, error)
            return
        waiting = {job.spec.job_id: job for job in self._waiting_jobs(pending)}
        offset = 0
        for part in pending.parts:
            v = reply.v[offset : offset + part.rows]
            offset += part.rows
            job = waiting.get(part.job_id)
            if job is None:  # the job failed or moved on meanwhile
                continue
            job.got[pending.expert] = v
            job.compute_ms = max(job.compute_ms, reply.compute_ms)
            if len(job.got) == len(job.plan.rows):
                self._finish_step(job)

    def _finish_step(self, job: JobRun) -> None:
        spec, i = job.spec, job.step
        v = combine(job.plan, job.got, spec.n)
        x = euler_step(job.x, v, job.grid[i], job.grid[i + 1]).astype(np.float32)
        latency_ms = (time.perf_counter() - job.step_started) * 1000.0
        try:
            frame = Frame.from_latent(
                spec.job_id,
                i + 1,
                float(job.grid[i + 1]),
                x,
                job.plan.experts,
                job.plan.weights,
                latency_ms,
                job.compute_ms,
            )
        except SchemaError as exc:  # the latent diverged (NaN or beyond float16): fail, do not store it
            self._fail(spec.job_id, job.delivery_tag, f"step {i + 1}: {exc}")
            return
        job.x, job.step = x, i + 1
        job.step_ms_total += latency_ms
        job.steps_run += 1
        self.stats["steps"] += 1
        self.metrics.steps.inc()
        self.metrics.step.observe(latency_ms / 1e3)
        self._writes.append((frame, x, job.step_ms_total / job.steps_run))
        if job.step >= spec.steps:
            self._complete(job)
        else:
            self._start_step(job)

    def _write_steps(self) -> None:
        """Every step finished in this burst, to Redis in one transaction: before any reply to its next
        step is read and before its job is marked done, so frames land in order and a resumed job never
        skips a step. A crash between sending a step and storing the one before costs one recomputed
        step, nothing else (velocity is a pure function)."""
        if self._writes:
            self.store.write_steps(self._writes)
            self._writes = []

    def _complete(self, job: JobRun) -> None:
        self._write_steps()  # the last frame lands before the status says done
        self.store.finish(job.spec.job_id, job.x)
        self._channel.basic_ack(job.delivery_tag)
        self.jobs.pop(job.spec.job_id, None)
        self.stats["jobs_done"] += 1
        self.metrics.jobs.labels(JobStatus.DONE.value).inc()

    def _fail(self, job_id: str, delivery_tag: int, error: str) -> None:
        log.warning("job %s failed: %s", job_id, error)
        self._write_steps()  # its finished steps land before the status says failed (and expires them)
        self.store.fail(job_id, error)
        self._channel.basic_ack(delivery_tag)
        self.jobs.pop(job_id, None)  # its rows in pending requests are skipped when they come back
        self.stats["jobs_failed"] += 1
        self.metrics.jobs.labels(JobStatus.FAILED.value).inc()

    def _dead_letter(self, ch, method, props, body: bytes, reason: str) -> None:
        headers = {
            REASON_HEADER: reason[:1000],
            SOURCE_QUEUE_HEADER: self.names.jobs,
            WORKER_HEADER: self.worker_id,
        }
        ch.basic_publish(
            self.names.dead_letter_exchange,
            self.names.dead_letter_queue,
            body,
            pika.BasicProperties(headers=headers, delivery_mode=2, content_type=props.content_type),
        )
        ch.basic_ack(method.delivery_tag)
        self.metrics.jobs.labels("dead_lettered").inc()
        log.warning("dead-lettered a job message: %s", reason)

    # -- timers ---------------------------------------------------------------------------------

    def _sweep(self) -> None:
        """Resend requests that timed out; fail their job after MAX_ATTEMPTS sends."""
        now = time.monotonic()
        timeout = self.settings.request_timeout_s
        for request_id, p in list(self.pending.items()):
            if now - p.sent_at < timeout:
                continue
            waiting = self._waiting_jobs(p)
            if not waiting:  # every job in it finished or failed meanwhile
                self.pending.pop(request_id, None)
            elif p.attempts >= MAX_ATTEMPTS:
                self.pending.pop(request_id, None)
                for job in waiting:
                    self._fail(
                        job.spec.job_id,
                        job.delivery_tag,
                        f"expert {p.expert} did not answer {request_id} "
                        f"after {p.attempts} sends of {timeout:g} s each (is a worker for it running?)",
                    )
            else:
                p.attempts += 1
                p.sent_at = now
                self.stats["resends"] += 1
                self.metrics.resends.inc()
                log.info("resending %s to expert %d (attempt %d)", request_id, p.expert, p.attempts)
                self._publish_request(p.expert, request_id, p.body)
        if self._conn is not None and self._conn.is_open:
            self._conn.call_later(SWEEP_S, self._sweep)

    def _count_replicas(self) -> None:
        """Requests in flight allowed per expert = consumers on its queue (at least one)."""
        for k in range(self.deployment.num_experts):
            method = self._channel.queue_declare(self.names.expert_queue(k), passive=True).method
            self._slots[k] = max(1, method.consumer_count)

    def _heartbeat(self) -> None:
        self._count_replicas()  # replicas come and go; the heartbeat period is often enough
        record = {
            "worker_id": self.worker_id,
            "role": "router",
            "host": socket.gethostname(),
            "region": self.settings.region,
            "pid": os.getpid(),
            "deployment": self.deployment.name,
            "jobs_running": len(self.jobs),
            "started_at": f"{self.started_at:.3f}",
            "updated_at": f"{time.time():.3f}",
            **self.stats,
        }
        key = self.names.worker(self.worker_id)
        pipe = self.store.r.pipeline()
        pipe.hset(key, mapping=record)
        pipe.expire(key, int(self.settings.heartbeat_ttl_s))
        pipe.sadd(self.names.workers_index, self.worker_id)
        pipe.execute()
        self.store.trim_index()
        self._last_beat = time.monotonic()
        if self._conn is not None and self._conn.is_open:
            self._conn.call_later(self.settings.heartbeat_s, self._heartbeat)

    def _clear_heartbeat(self) -> None:
        try:
            self.store.r.delete(self.names.worker(self.worker_id))
            self.store.r.srem(self.names.workers_index, self.worker_id)
        except Exception:  # noqa: BLE001 - best effort at exit
            pass


def run_from_args(args) -> int:
    from ddm.ops.cmd_sample import resolve_deployment

    worker = RouterWorker(
        Settings.from_env(),
        resolve_deployment(args.deployment),
        worker_id=args.worker_id,
        max_jobs=args.max_jobs,
        metrics_port=args.metrics_port,
    )
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    try:
        worker.run()
    except KeyboardInterrupt:
        worker.stop()
    return 0
