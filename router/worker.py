"""The router worker: many sampling jobs at once, event-driven, resumable.

The glue between three pieces: the consumer runtime (ddm.runtime.consumer: connection, reconnects,
heartbeat, dead letters, metrics server, stop), the pure scheduler (router/scheduler.py: which rows go
to which expert when, timeouts, the Euler steps) and the job store in Redis (router/store.py). This
file decodes deliveries, hands them to the scheduler, and carries out its Outbox: publish requests,
store finished steps, settle jobs (ack their message).

    job message  -> router/intake.py decides against Redis: refuse a reused id (dead letter), ack an
                    ended job, hold a job another router owns, or take its lease, resolve it with this
                    router's descriptor, resume it from its stored state -> scheduler
    reply        -> scheduler.on_reply (a DecodeReply or an EncodeReply: the stages, router/worker_stages.py)
    after every burst of events (pump): scheduler.flush sends every due step, then the finished steps
                    are stored in Redis while the experts compute
    job done     -> stored as done; a latent deployment's first goes to ddm.decoder for its pixels
    timers       -> sweep (hedges, resends, expert loss); leases; held deliveries asked again; observe
                    each expert (consumers, depth, heartbeats); refresh the descriptor and the index

Redis going away pauses the router (_pause, router/worker_outage.py) instead of ending it; the
stages' glue (decoder, text encoder) lives in router/worker_stages.py. The job message is acked only when
the job is done, failed or cancelled: if this process dies, the broker redelivers the job and
whichever router gets it resumes from the last step stored in Redis.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid

import pika
import redis

from ddm.router.deployment_loader import read_deployment
from ddm.router.expert_probe import probe_experts, report_looks
from ddm.router.intake import Delivery, Fail, Hold, Intake, Refuse, Run, Settle, refused_job
from ddm.router.metrics import RouterMetrics
from ddm.router.notify import Notifier
from ddm.router.outbox import Outbox, Send
from ddm.router.scheduler import Scheduler
from ddm.router.stage_calls import StageCalls
from ddm.router.stats import RouterStats
from ddm.router.store import JobStore
from ddm.router.worker_outage import OutageAndLeases
from ddm.router.worker_stages import StageGlue
from ddm.runtime.consumer import ConsumerRuntime, OnRuntime, Session
from ddm.runtime.embeddings import EmbeddingStore
from ddm.runtime.redis_conn import REDIS_CONNECTION_ERRORS, connect_redis
from ddm.runtime.signals import serve_from_args
from ddm.schema.decode_messages import DecodeReply
from ddm.schema.deployment import Deployment
from ddm.schema.errors import SchemaError, expected
from ddm.schema.messages import JobSpec, JobStatus, VelocityReply, VelocityRequest
from ddm.schema.settings import Settings
from ddm.schema.text_messages import EncodeReply
from ddm.schema.topology import CONTENT_TYPE

log = logging.getLogger("ddm.router")

SWEEP_S = 0.25  # how often requests in flight are checked for timeouts
WAIT_S = 0.5  # longest wait for deliveries when nothing else is due
RETRY_S = 1.0  # how often held deliveries (another router's job, or Redis away) ask again
OBSERVE_S = 0.5  # how often each expert's queue and heartbeats are looked at (a lost one is known in 2 s)


class RouterWorker(OnRuntime, OutageAndLeases, StageGlue):
    def __init__(
        self,
        settings: Settings,
        deployment_path,
        worker_id: str | None = None,
        max_jobs: int = 64,
        metrics_port: int | None = None,
        hooks=(),
    ):
        self.settings = settings
        self.names = settings.names
        self.deployment = Deployment.load(deployment_path)
        loaded = read_deployment(self.deployment)  # every meta.json once; policy and descriptor from it
        self.policy = loaded.policy()
        self.worker_id = worker_id or f"router-{socket.gethostname()}-{os.getpid()}"
        self.descriptor = loaded.describe(self.policy, self.worker_id)
        self.max_jobs = max_jobs
        # The lease outlives a missed renewal or two; renewed three times per its life.
        self.lease_ttl_s = float(settings.heartbeat_ttl_s)
        self.store = JobStore(
            connect_redis(settings.redis_url, attempts=None),
            self.names,
            settings.job_ttl_s,
            owner=f"{self.worker_id}:{uuid.uuid4().hex[:8]}",
            lease_ttl_s=self.lease_ttl_s,
        )
        # completion webhooks: POSTed on a thread of their own, never from the step loop
        self.notifier = Notifier(self.store.r, self.names)
        self.store.ended = self.notifier.ended
        self.embeddings = EmbeddingStore(self.store.r, self.names, settings.job_ttl_s)  # a text job's prompts
        self.intake = Intake(self.store, self.descriptor, self.policy, self.worker_id)
        self.waiting: list[Delivery] = []  # held unacked: another router's job, or Redis away
        self.paused = False  # Redis did not answer: no steps run until it does
        self.scheduler = Scheduler(
            self.policy,
            timeout_s=settings.request_timeout_s,
            grace_s=settings.expert_grace_s,
            loss_grace_s=settings.expert_loss_grace_s,
            hedge_floor_ms=settings.hedge_floor_ms,
            hedge_max_fraction=settings.hedge_max_fraction,
            describe=lambda k: f"expert {k} (queue {self.names.expert_queue(k)})",
        )
        # the decoder's and the text encoder's calls: resent with the experts' timeout, given up after
        # their grace
        self.stage_calls = StageCalls(
            settings.request_timeout_s, settings.expert_grace_s + settings.request_timeout_s
        )
        self.stats = RouterStats()
        self.metrics = RouterMetrics(self.worker_id)
        self.metrics.in_flight.set_function(lambda: len(self.scheduler.jobs))
        for k in range(self.deployment.num_experts):
            self.metrics.hedges.labels(str(k))  # export zeros from the start, so rate() works at once
        self.runtime = ConsumerRuntime(
            settings, self.worker_id, self, self.metrics, metrics_port=metrics_port, hooks=hooks
        )
        self._session: Session | None = None
        self._reply_queue = ""
        self._writes = []  # StepDone of steps finished but not yet in Redis
        self._observed_at = -1.0  # monotonic time of the last look at the experts
        # heartbeats prove nothing until Redis has been back long enough for every worker to beat again
        self._beats_trusted_at = -1.0

    # ------------------------------------------------------------ lifecycle (and OnRuntime's)

    def run(self) -> None:
        """Serve until stop(); reconnect with bounded backoff when the broker goes away."""
        try:
            self.runtime.run()
        finally:
            self.notifier.close()  # what is queued gets a short while to go out

    # ------------------------------------------------------------ the runtime's handler

    def start(self) -> None:
        log.info(
            "router %s: deployment %s, %d experts, router %s, strategies %s (default %s, guidance %g)",
            self.worker_id,
            self.deployment.name,
            self.deployment.num_experts,
            self.deployment.router.kind,
            ",".join(self.descriptor.strategies),
            self.descriptor.default_strategy,
            self.descriptor.default_guidance,
        )

    def attach(self, session: Session) -> None:
        ch = session.channel
        session.declare(
            range(self.deployment.num_experts),
            jobs=True,
            decoder=self.descriptor.decoder is not None,
            text=self.descriptor.conditioning.kind == "text",
        )
        ch.basic_qos(prefetch_count=self.max_jobs)
        # Our own exclusive reply queue: direct reply-to is unsuited to hundreds of replies a second.
        self._reply_queue = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
        self.scheduler.reset(uuid.uuid4().hex[:12])  # replies to an earlier connection match nothing
        self.scheduler.rejudge()  # a failover moves the experts' consumers too: judge them afresh
        self._session = session
        session.consume(self._reply_queue, self._guarded(self._on_reply), auto_ack=True)
        session.consume(self.names.jobs, self._guarded(self._on_job))
        session.every(SWEEP_S, self._guarded(self._sweep))
        session.every(self.lease_ttl_s / 3, self._guarded(self._renew))
        session.every(RETRY_S, self._retry)
        session.every(OBSERVE_S, self._guarded(self._observe))
        session.every(self.settings.heartbeat_s, self._refresh)
        session.every(self.settings.heartbeat_s, self._probe_queues)

    def detach(self, session: Session, lost: bool) -> int:
        # Unacked job messages go back to the queue when the connection closes; whoever gets them
        # resumes from Redis. Nothing in memory is needed for that.
        calling = [d.job.job_id for d in self.stage_calls.clear()]  # resumed by whoever gets them
        dropped = len(self.scheduler.jobs) + len(self.waiting) + len(calling)
        try:
            self._store_steps()  # computed steps are valid whatever happened to the broker
            self.store.release(list(self.scheduler.jobs) + calling)  # their redeliveries are free at once
        except redis.RedisError as exc:  # then the jobs resume from their previous stored step
            log.warning("could not store %d finished step(s): %r", len(self._writes), exc)
            self._writes.clear()
        self.scheduler.reset("")
        self.waiting.clear()  # their delivery tags die with the channel
        self._session = None
        return dropped

    def wait_s(self) -> float:
        """Until the next event, or the next cohort a far expert may be sent (router/scheduler.py)."""
        release_s = self.scheduler.next_release_s()
        return WAIT_S if release_s is None else min(WAIT_S, release_s)

    def pump(self) -> None:
        """Send every step the last events made due, then store the finished ones: the Redis round
        trip overlaps the experts' forward pass instead of delaying it."""
        if not self.paused:
            self._guarded(self._flush_and_store)()

    def _flush_and_store(self) -> None:
        self._carry_out(self.scheduler.flush)
        self._store_steps()

    def beat_static(self) -> dict[str, object]:
        return {
            "role": "router",
            "host": socket.gethostname(),
            "region": self.settings.region,
            "pid": os.getpid(),
            "deployment": self.deployment.name,
        }

    def beat_extra(self) -> dict[str, object]:
        return {"jobs_running": len(self.scheduler.jobs)}

    # ------------------------------------------------------------ deliveries

    def _on_job(self, ch, method, props, body: bytes) -> None:
        try:
            if props.content_type not in (None, CONTENT_TYPE):  # as the experts check their requests
                raise SchemaError(expected(f"content_type {CONTENT_TYPE!r}", props.content_type))
        except SchemaError as exc:
            self._refuse(method.delivery_tag, props, body, f"refused job: {exc}")
            return
        try:
            spec = JobSpec.decode(body)
            # labels outside the deployment's sample space (0..K-1, or K: the null class) are malformed
            # here, as a request in another space is at an expert: dead-lettered with the reason
            spec.check_space(self.descriptor.sample_space)
        except SchemaError as exc:
            self._refuse(method.delivery_tag, props, body, f"undecodable job: {exc}")
            return
        delivery = Delivery(method.delivery_tag, spec, props, body)
        if self.paused:
            self.waiting.append(delivery)
            return
        try:
            self._admit(delivery)
        except REDIS_CONNECTION_ERRORS:  # held with the others, asked again once Redis answers (_retry)
            self.waiting.append(delivery)
            raise

    def _admit(self, delivery: Delivery) -> None:
        """Carry out what the intake decides about one job delivery (fresh or held)."""
        running = self.scheduler.jobs.get(delivery.spec.job_id)
        if running is not None and running.tag.spec == delivery.spec:
            # The same job delivered again (published twice, or held while another router ran it and
            # then ours): the run in progress covers it.
            self._session.channel.basic_ack(delivery.tag)
            return
        decision = self.intake.decide(delivery)
        if isinstance(decision, Refuse):
            log.warning("refusing a job message: %s", decision.reason)
            self._refuse(delivery.tag, delivery.props, delivery.body, decision.reason)
        elif isinstance(decision, Settle):
            self._session.channel.basic_ack(delivery.tag)  # it ended before a crash lost the ack
        elif isinstance(decision, Hold):
            self.waiting.append(delivery)
        elif isinstance(decision, Fail):
            self._settle_failed(delivery.spec.job_id, delivery, decision.error)
        elif isinstance(decision, Run):
            job = decision.job
            self.metrics.jobs.labels(JobStatus.RUNNING.value).inc()
            if job.step:
                log.info("job %s resumed at step %d/%d", job.job_id, job.step, job.arrays.spec.steps)
            self._observe_if_one_is_gone()
            self._start_job(job)

    def _refuse(self, tag: int, props, body: bytes, reason: str) -> None:
        """Dead-letter a job message; a queued job created for that very message fails with the reason
        (else it would wait in the queue, ahead of later jobs, until its hash expires)."""
        self._session.dead_letter(tag, props, body, reason, self.names.jobs)
        self.count_refused(self.names.jobs)
        named = refused_job(body, self.settings.max_message_bytes)
        if named is None:
            return
        try:
            if self.store.fail_refused(*named, f"dead-lettered: {reason}"):
                log.warning("job %s failed: its message was dead-lettered", named[0])
        except redis.RedisError as exc:  # its queued hash expires after queued_ttl_s anyway
            log.warning("could not fail job %s after dead-lettering its message (%r)", named[0], exc)

    def count_refused(self, queue: str) -> None:
        if queue == self.names.jobs:  # (replies are auto-acked: a bad one is dropped, not refused)
            self.metrics.jobs.labels("dead_lettered").inc()

    def _on_reply(self, ch, method, props, body: bytes) -> None:
        if props.type in (DecodeReply.TYPE, EncodeReply.TYPE):
            self._on_stage_reply(props.type, body)
            return
        try:
            reply = VelocityReply.decode(body)
            reply.check_space(self.descriptor.sample_space)  # an expert in another space: not mixed in
        except SchemaError as exc:
            log.warning("dropping an undecodable reply: %s", exc)
            return
        self._carry_out(lambda out: self.scheduler.on_reply(reply, out))

    def _sweep(self) -> None:
        self._carry_out(self.scheduler.sweep)
        self._sweep_stage_calls()

    # ------------------------------------------------------------ carrying out the scheduler's word

    def _carry_out(self, call) -> None:
        """Run one scheduler call and do what its Outbox says: publish, then queue the finished steps
        for storing, then settle the jobs that ended (their steps stored first)."""
        out = Outbox()
        call(out)
        for send in out.sends:
            self._publish(send)
            if send.replica is not None:
                self.stats.hedges += 1
                self.metrics.hedges.labels(str(send.expert)).inc()
                log.info("hedging %s to replica %s of expert %d", send.request_id, send.replica, send.expert)
            elif send.resend:
                self.stats.resends += 1
                self.metrics.resends.inc()
                log.info("resending %s to expert %d", send.request_id, send.expert)
        for done in out.steps:
            self.stats.steps += 1
            self.metrics.steps.inc()
            self.metrics.step.observe(done.latency_ms / 1e3)
        self._writes.extend(out.steps)
        for job in out.done:
            self._store_steps()  # the last frame lands before the status says done
            if self.descriptor.decoder is not None:
                self._decode(job)
            else:
                self._finish(job)
        for job, error in out.failed:
            self._settle_failed(job.job_id, job.tag, error)

    def _finish(self, job, image=None) -> None:
        """Store a job as done (with a latent deployment's decoded image) and ack its message."""
        if not self.store.finish(job.job_id, job.x, image):
            self.waiting.append(job.tag)  # another router owns it now
            return
        self._session.channel.basic_ack(job.tag.tag)
        self.stats.jobs_done += 1
        self.metrics.jobs.labels(JobStatus.DONE.value).inc()

    def _settle_failed(self, job_id: str, delivery: Delivery, error: str) -> None:
        log.warning("job %s failed: %s", job_id, error)
        self._store_steps()  # its finished steps land before the status says failed (and expires them)
        if not self.store.fail(job_id, error):
            self.waiting.append(delivery)  # another router owns it now
            return
        self._session.channel.basic_ack(delivery.tag)
        self.stats.jobs_failed += 1
        self.metrics.jobs.labels(JobStatus.FAILED.value).inc()

    def _store_steps(self) -> None:
        """Every step finished in this burst, to Redis in one transaction: before any reply to its next
        step is read and before its job is marked done, so frames land in order and a resumed job never
        skips a step. A crash between sending a step and storing the one before costs one recomputed
        step, nothing else (velocity is a pure function)."""
        if self._writes:
            steps, self._writes = self._writes, []
            written = self.store.write_steps(
                [(d.frame, d.x, d.mean_step_ms, d.degraded, d.history) for d in steps]
            )
            for job_id in written.lost:
                self._lose(job_id)
            for job_id in written.cancelled:
                self._cancel(job_id)

    def _cancel(self, job_id: str) -> None:
        """A client cancelled this job and its latest step is stored: stop it there, mark it cancelled
        (its frames stay) and ack its message. A job that ended meanwhile (done, failed) keeps that end."""
        job = self.scheduler.drop(job_id)  # its rows still in flight are skipped when they come back
        if job is None:
            return
        if not self.store.cancel(job_id):
            self.waiting.append(job.tag)  # another router owns it now
            return
        log.info("job %s cancelled at step %d/%d", job_id, job.step, job.arrays.spec.steps)
        if self._session.channel.is_open:  # else the redelivery finds it ended and is settled
            self._session.channel.basic_ack(job.tag.tag)
        self.metrics.jobs.labels(JobStatus.CANCELLED.value).inc()

    def _publish(self, send: Send) -> None:
        """To the expert's queue (its replicas compete), or a hedge to one replica's own queue."""
        expert = send.expert
        queue = self.names.expert_queue(expert)
        if send.replica is not None:
            queue = self.names.replica_queue(expert, send.replica)
        props = self._request_props(send.request_id, VelocityRequest.TYPE)
        self._session.channel.basic_publish("", queue, send.body, props)
        self.metrics.requests.labels(str(expert)).inc()

    def _request_props(self, request_id: str, kind: str) -> pika.BasicProperties:
        """A request's properties (to an expert or the decoder): replies to our queue, by request id."""
        return pika.BasicProperties(
            reply_to=self._reply_queue,
            correlation_id=request_id,
            content_type=CONTENT_TYPE,
            type=kind,
            delivery_mode=1,  # transient: a lost request is resent by the sweep
        )

    def _observe_if_one_is_gone(self) -> None:
        """Before a job starts: an expert that looked gone may have come up since (at most every 0.1 s)."""
        if (
            not all(h.live for h in self.scheduler.experts.values())
            and time.monotonic() > self._observed_at + 0.1
        ):
            self._observe()

    def _observe(self) -> None:
        """Every OBSERVE_S: what the broker and the heartbeats say of each expert, to the scheduler."""
        self._observed_at = time.monotonic()
        looks = probe_experts(self._session.channel, self.store.r, self.names, self.deployment.num_experts)
        trusted = self._observed_at >= self._beats_trusted_at
        report_looks(self.scheduler, looks, self.metrics, self.names, beats_trusted=trusted)

    def _probe_queues(self) -> None:
        """Every heartbeat: the depth of the jobs queue and, for a latent deployment, of the decoder's (the
        router sits next to the broker; a worker probing its own queue would wait a round trip of its
        link on its serving thread). Expert queues are exported with every look at the experts."""
        channel = self._session.channel
        self.metrics.probe_queue(channel, self.names.jobs)
        if self.descriptor.decoder is not None:
            self.metrics.probe_queue(channel, self.names.decoder_queue)

    def _refresh(self) -> None:
        """Every heartbeat: the descriptor again (it expires when no router refreshes it), the jobs index
        trimmed, stale queue entries dropped."""
        try:
            self.store.publish_descriptor(self.descriptor, int(self.settings.heartbeat_ttl_s))
            self.store.trim_index()
            self.store.prune_queue()
        except redis.RedisError as exc:
            log.warning("could not refresh the descriptor in Redis (%r); will retry", exc)


def run_from_args(args) -> int:
    """Entry of `ddm worker router` (flags in ddm.ops.cli.worker)."""
    return serve_from_args(RouterWorker, args, max_jobs=args.max_jobs)
