"""`ddm worker expert`: serve one expert from its RabbitMQ queue, with dynamic batching.

One thread does everything: it owns the pika BlockingConnection (pika is not thread-safe), consumes,
decodes, batches, runs the forward pass, publishes the replies, acks, dead-letters and beats the
Redis heartbeat (connection.call_later). Deliveries that arrive during a forward pass wait in the
socket and pika's buffers and form the next batch.

Why no compute thread: a router keeps one request in flight per expert replica, so with one router
there is no next batch to collect while one computes (with several, what arrives meanwhile simply forms
the next batch), and the two thread hand-offs (to a compute thread and back through
add_callback_threadsafe) cost 0.3-0.9 ms per request here, up to 60% of the per-step transport budget
(docs/BENCHMARKS.md). The price: AMQP and Redis heartbeats wait while a forward pass runs. A batch
takes milliseconds to a few seconds; one longer than the Redis heartbeat allowance
(DDM_HEARTBEAT_TTL_S - DDM_HEARTBEAT_S) hides the worker from `ddm status` meanwhile and is logged, and
one beyond the broker's 60 s would cost the connection and be redelivered: lower --max-batch.

Delivery: a request is acked only after its reply was published, so a worker that dies mid-batch
leaves its requests unacked and the broker redelivers them to another replica (velocity is a pure
function: serving a request twice is harmless).
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pika
import pika.exceptions

from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, SchemaError, ServiceUnavailableError, expected
from ddm.schema.messages import VelocityReply, VelocityRequest
from ddm.schema.names import check_expert_id, check_worker_id
from ddm.schema.settings import Settings, redact
from ddm.schema.topology import CONTENT_TYPE
from ddm.workers.amqp import CONNECTION_ERRORS, connect, declare_topology
from ddm.workers.batcher import Batcher, BatchResult, Outcome, Pending, serve_batch
from ddm.workers.deadletter import dead_letter
from ddm.workers.expert import DEFAULT_BUCKETS
from ddm.workers.heartbeat import Heartbeat, WorkerStats
from ddm.workers.metrics import ExpertMetrics, serve_metrics

log = logging.getLogger(__name__)

MAX_TICK_S = 0.25  # longest process_data_events wait: bounds how late a stop request is noticed
STATS_LOG_S = 10.0  # at most one stats line per this many seconds


class ConsumerCancelledError(ConnectionError):
    """The broker cancelled our consumer (queue deleted, node failure): reconnect and redeclare."""


def default_worker_id(expert_id: int) -> str:
    host = re.sub(r"[^A-Za-z0-9_.:@-]", "-", socket.gethostname())[:80] or "host"
    return f"expert{expert_id}-{host}-{os.getpid()}"


class ExpertWorker:
    """Consume `<prefix>ddm.expert.<k>`, batch requests, run one forward per batch, reply, ack.

    run() blocks until stop() (callable from any thread or a signal handler). `ready` is set while
    the worker is consuming. `expert` may be passed pre-loaded (tests); otherwise run() loads it with
    load_expert, which compiles every bucket, before it consumes anything.
    """

    def __init__(
        self,
        settings: Settings,
        deployment_path: str | Path,
        expert_id: int,
        *,
        device: str | None = None,
        max_batch: int | None = None,
        max_wait_ms: float | None = None,
        buckets: tuple[int, ...] | None = None,
        worker_id: str | None = None,
        expert=None,
        metrics_port: int | None = None,
    ):
        self.settings = settings
        self.names = settings.names
        self.expert_id = check_expert_id(expert_id)
        entry = Deployment.load(deployment_path).expert(expert_id)
        self.checkpoint = entry.checkpoint
        self.device = device or entry.device
        self.max_batch = settings.max_batch if max_batch is None else int(max_batch)
        self.max_wait_ms = settings.max_wait_ms if max_wait_ms is None else float(max_wait_ms)
        if self.max_batch < 1 or not 0 <= self.max_wait_ms <= 10_000:
            raise ConfigError(
                expected("max_batch >= 1 and max_wait_ms in [0, 10000]", (max_batch, max_wait_ms))
            )
        self.buckets = tuple(sorted(buckets)) if buckets else DEFAULT_BUCKETS
        if self.buckets[0] < 1:
            raise ConfigError(expected("bucket sizes >= 1", self.buckets))
        self.worker_id = check_worker_id(worker_id or default_worker_id(expert_id))
        self.queue = self.names.expert_queue(expert_id)
        self.prefetch = 2 * self.max_batch  # several routers: the next batch is here when one finishes
        self.expert = expert
        self.stats = WorkerStats()
        self.metrics = ExpertMetrics(self.expert_id, self.worker_id)
        self.metrics.set_health(self._health)
        self.metrics_port = settings.metrics_port if metrics_port is None else int(metrics_port)
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._batcher = Batcher(self.max_batch, self.max_wait_ms / 1e3)
        self._conn: pika.BlockingConnection | None = None
        self._channel = None
        self._dlx = None  # second channel, in confirm mode, for dead letters
        self._heartbeat: Heartbeat | None = None
        self._run_thread: threading.Thread | None = None
        self._logged = (0.0, 0)  # (monotonic time, batches) of the last stats line

    # ------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        """Ask run() to stop: no new requests, finish the batch being computed, close cleanly."""
        self._stop.set()
        conn = self._conn
        # From another thread, wake process_data_events at once. Not from the run thread itself (a
        # signal handler there may interrupt pika while it holds the lock this call takes); the loop
        # notices the flag within MAX_TICK_S anyway.
        if conn is not None and threading.current_thread() is not self._run_thread:
            with contextlib.suppress(Exception):  # closed meanwhile: nothing to wake
                conn.add_callback_threadsafe(lambda: None)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        """Load the expert (compiling all buckets), then serve until stop(); reconnects on broker loss.
        With a metrics port, /metrics and /healthz answer from the start (503 until consuming)."""
        server = serve_metrics(self.metrics, self.metrics_port)
        try:
            self._run()
        finally:
            if server is not None:
                server.close()

    def _health(self) -> dict[str, bool]:
        """For /healthz (HTTP thread): reads flags only."""
        return {"consuming": self.ready.is_set(), "redis": self._heartbeat is not None and self._heartbeat.ok}

    def _run(self) -> None:
        self._run_thread = threading.current_thread()
        if self.expert is None:
            from ddm.workers import load_expert

            self.expert = load_expert(self.checkpoint, self.device, buckets=self.buckets)
        self.expert.warmup()  # every bucket once: no compile or first-call cost on the first request
        meta = self.expert.meta
        self._heartbeat = Heartbeat(
            self.settings.redis_url,
            self.names,
            self.worker_id,
            {
                "role": "expert",
                "expert_id": self.expert_id,
                "framework": meta.framework,
                "device": meta.device,
                "host": socket.gethostname(),
                "region": self.settings.region,
                "pid": os.getpid(),
                "queue": self.queue,
                "max_batch": self.max_batch,
                "max_wait_ms": self.max_wait_ms,
                "buckets": ",".join(map(str, self.expert.buckets or ())) or "any",
            },
            self.settings.heartbeat_ttl_s,
        )
        log.info(
            "expert worker %s: expert %d (%s on %s, buckets %s) from %s; queue %s at %s; "
            "max batch %d rows, max wait %g ms, prefetch %d",
            self.worker_id,
            self.expert_id,
            meta.framework,
            meta.device,
            self.expert.buckets or "any (eager)",
            self.checkpoint,
            self.queue,
            redact(self.settings.amqp_url),
            self.max_batch,
            self.max_wait_ms,
            self.prefetch,
        )
        self._logged = (time.monotonic(), 0)
        delay = 0.25
        try:
            while not self._stop.is_set():
                conn = self._connect()
                if conn is None:
                    break
                since = time.monotonic()
                try:
                    self._serve(conn)
                except CONNECTION_ERRORS as exc:
                    dropped = self._lost(conn)
                    self.metrics.reconnects.inc()
                    log.warning(
                        "lost the broker (%r); reconnecting. %d waiting request(s) dropped, the broker "
                        "redelivers them",
                        exc,
                        dropped,
                    )
                    # Back off harder when sessions keep dying young (e.g. a declare the broker refuses).
                    delay = 0.25 if time.monotonic() - since > 10 else min(10.0, delay * 2)
                    self._stop.wait(delay * (0.5 + random.random()))
        finally:
            self.ready.clear()
            self._heartbeat.remove()
            self._heartbeat.close()
            log.info("expert worker %s stopped; %s", self.worker_id, self.stats.summary())

    def _connect(self) -> pika.BlockingConnection | None:
        """Connect with bounded exponential backoff; None if stop() was called meanwhile."""
        delay = 0.25
        while not self._stop.is_set():
            try:
                return connect(self.settings.amqp_url, attempts=1, name=self.worker_id)
            except (ServiceUnavailableError, *CONNECTION_ERRORS) as exc:
                log.warning("%s; retrying in about %.1f s", exc, delay)
                self._stop.wait(delay * (0.5 + random.random()))
                delay = min(10.0, delay * 2)
        return None

    def _serve(self, conn: pika.BlockingConnection) -> None:
        ch = conn.channel()
        declare_topology(ch, self.names, [self.expert_id], jobs=False)
        ch.basic_qos(prefetch_count=self.prefetch)
        dlx = conn.channel()
        dlx.confirm_delivery()
        self._conn, self._channel, self._dlx = conn, ch, dlx
        tag = ch.basic_consume(self.queue, self._on_message, auto_ack=False)
        self._schedule_beats(conn)
        self.ready.set()
        log.info("consuming %s (%s)", self.queue, self.worker_id)
        while not self._stop.is_set():
            self._serve_due_batch()
            conn.process_data_events(time_limit=self._tick())
            if tag not in ch.consumer_tags:
                raise ConsumerCancelledError(f"the broker cancelled our consumer on {self.queue}")
        self._close(conn, ch, tag)

    def _close(self, conn, ch, tag) -> None:
        """Clean stop: cancel the consumer and hand back what waits (the last batch was answered)."""
        self.ready.clear()
        ch.basic_cancel(tag)  # pika nacks (requeues) deliveries it had not dispatched to us yet
        for item in self._batcher.drain():
            ch.basic_nack(item.delivery_tag, requeue=True)
        self._conn = self._channel = self._dlx = None
        conn.close()

    def _lost(self, conn) -> int:
        """The connection (or channel) died: forget its deliveries; unacked ones are redelivered."""
        self.ready.clear()
        self._conn = self._channel = self._dlx = None
        dropped = len(self._batcher.drain())
        try:
            if conn.is_open:
                conn.close()
        except Exception:  # already broken; nothing to close cleanly
            pass
        return dropped

    # ------------------------------------------------------------ batching

    def _tick(self) -> float:
        """How long process_data_events may block: until the pending batch is due, at most MAX_TICK_S."""
        wait = self._batcher.wait_s(time.monotonic())
        return MAX_TICK_S if wait is None else min(wait, MAX_TICK_S)

    def _serve_due_batch(self) -> None:
        """If a batch is due: one forward pass, then its replies, dead letters and acks."""
        wait = self._batcher.wait_s(time.monotonic())
        if wait is None or wait > 0:
            return
        items = self._batcher.take()
        try:
            result = serve_batch(self.expert, items, self.expert_id, self.worker_id)
        except Exception as exc:  # a bug, not a bad request: still answer every delivery
            log.exception("serving a batch of %d request(s) failed", len(items))
            result = BatchResult([Outcome(it, None, f"internal error: {exc!r}") for it in items], 0, 0.0)
        allowance_s = self.settings.heartbeat_ttl_s - self.settings.heartbeat_s
        if result.compute_ms > allowance_s * 1e3:
            log.warning(
                "a batch of %d rows took %.1f s, longer than the heartbeat allows (%.1f s): this worker "
                "looked gone meanwhile, and beyond 60 s the broker drops it; lower --max-batch",
                result.rows,
                result.compute_ms / 1e3,
                allowance_s,
            )
        self._reply(self._channel, result)

    def _reply(self, ch, result: BatchResult) -> None:
        """Publish one reply per request, dead-letter failures, then ack."""
        served, now, latencies = 0, time.monotonic(), []
        for o in result.outcomes:
            if o.reply is None:
                continue
            latencies.append(now - o.item.arrived)
            props = pika.BasicProperties(
                correlation_id=o.item.correlation_id, content_type=CONTENT_TYPE, type=VelocityReply.TYPE
            )
            ch.basic_publish("", o.item.reply_to, o.reply, props)
            served += 1
        for o in result.outcomes:
            if o.reply is None:
                self._dead_letter(ch, o.item.delivery_tag, o.item.properties, o.item.body, o.error)
            else:
                ch.basic_ack(o.item.delivery_tag)  # only after its reply was handed to the broker
        if result.rows:
            self.stats.record_batch(result.rows, served, result.compute_ms)
            self.metrics.record_batch(result.rows, result.compute_ms, latencies)

    # ------------------------------------------------------------ consuming

    def _on_message(self, ch, method, props, body: bytes) -> None:
        try:
            if not props.reply_to:
                raise SchemaError(
                    expected("a reply_to property naming the requester's queue", props.reply_to)
                )
            if props.content_type not in (None, CONTENT_TYPE):
                raise SchemaError(expected(f"content_type {CONTENT_TYPE!r}", props.content_type))
            request = VelocityRequest.decode(body, max_bytes=self.settings.max_message_bytes)
        except Exception as exc:  # SchemaError, or anything a malformed body could raise
            self._dead_letter(ch, method.delivery_tag, props, body, f"{type(exc).__name__}: {exc}")
            return
        self._batcher.add(
            Pending(
                request,
                method.delivery_tag,
                props.reply_to,
                props.correlation_id,
                time.monotonic(),
                body,
                props,
            )
        )

    def _dead_letter(self, ch, delivery_tag: int, props, body: bytes, reason: str) -> None:
        """Refuse a message: to ddm.dead with the reason attached (see ddm.workers.deadletter)."""
        dead_letter(
            ch,
            self._dlx,
            self.names,
            delivery_tag,
            props,
            body,
            reason=reason,
            queue=self.queue,
            worker_id=self.worker_id,
        )
        self.stats.dead_lettered += 1
        self.metrics.dead_lettered.inc()

    # ------------------------------------------------------------ heartbeat and stats

    def _schedule_beats(self, conn) -> None:
        def beat() -> None:
            if conn is not self._conn or not conn.is_open:
                return  # this connection is gone; the next one schedules its own beats
            self._beat()
            conn.call_later(self.settings.heartbeat_s, beat)

        beat()

    def _beat(self) -> None:
        self._heartbeat.beat(self.stats)
        now = time.monotonic()
        last_t, last_batches = self._logged
        if now - last_t >= STATS_LOG_S and self.stats.batches != last_batches:
            self._logged = (now, self.stats.batches)
            log.info("%s: %s", self.worker_id, self.stats.summary())


def run_from_args(args) -> int:
    """Entry of `ddm worker expert` (flags in ddm.ops.cmd_worker)."""
    from ddm.ops.cmd_sample import resolve_deployment

    buckets = None
    if args.buckets:
        try:
            buckets = tuple(int(b) for b in args.buckets.split(",") if b.strip())
        except ValueError:
            raise ConfigError(expected("--buckets like 1,2,4,8", args.buckets)) from None
    worker = ExpertWorker(
        Settings.from_env(),
        resolve_deployment(args.deployment),
        args.expert,
        device=args.device,
        max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms,
        buckets=buckets,
        worker_id=args.worker_id,
        metrics_port=args.metrics_port,
    )

    def on_signal(signum, frame):
        if worker.stopping:  # a second Ctrl-C: stop waiting for the batch in flight
            raise KeyboardInterrupt
        log.info("signal %d: stopping after the batch in flight", signum)
        worker.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    worker.run()
    return 0
