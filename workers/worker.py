"""`ddm worker expert`: serve one expert from its RabbitMQ queue, with dynamic batching.

The worker is a handler on the consumer runtime (ddm.runtime.consumer), which owns the connection,
reconnects, heartbeat, dead letters, metrics server and stop; this file decodes, batches, runs the
forward pass, replies and acks. One thread does everything; deliveries that arrive during a forward
pass wait in the socket and pika's buffers and form the next batch.

Why no compute thread: a router keeps one request in flight per expert replica, so with one router there
is no next batch to collect while one computes (with several, what arrives meanwhile simply forms the
next batch), and the two thread hand-offs (to a compute thread and back through add_callback_threadsafe)
cost 0.3-0.9 ms per request here, up to 60% of the per-step transport budget (docs/BENCHMARKS.md). The
price: AMQP and Redis heartbeats wait while a forward pass runs. So a batch runs in slices (at most the
largest bucket, as Expert.velocity would split it anyway), and between slices, once KEEPALIVE_S has
passed, the connection is serviced (process_data_events: AMQP heartbeats, the Redis heartbeat timer, new
deliveries into the next batch). A busy worker keeps beating, so it is never taken for a gone one (issue
23); only a single slice longer than the heartbeat allowance (DDM_HEARTBEAT_TTL_S - DDM_HEARTBEAT_S)
still hides it. So slices are sized from that allowance and the time a row takes here
(workers/slices.py); a device too slow even for the smallest slice is logged.

Delivery: a request is acked only after its reply was published, so a worker that dies mid-batch
leaves its requests unacked and the broker redelivers them to another replica (velocity is a pure
function: serving a request twice is harmless).
"""

from __future__ import annotations

import logging
import os
import re
import socket
import time
from pathlib import Path

import numpy as np

from ddm.runtime.consumer import MAX_WAIT_S, Session
from ddm.runtime.signals import serve_from_args
from ddm.runtime.stage import Delivery, Stage
from ddm.schema.deployment import Deployment
from ddm.schema.errors import ConfigError, SchemaError, expected
from ddm.schema.messages import VelocityReply, VelocityRequest
from ddm.schema.names import check_expert_id, check_worker_id
from ddm.schema.precision import check_precision
from ddm.schema.sample_space import LEGACY, SampleSpace
from ddm.schema.settings import Settings, redact
from ddm.workers.batcher import Batcher, BatchResult, Outcome, serve_batch
from ddm.workers.buckets import parse_bucket_flag
from ddm.workers.expert import DEFAULT_BUCKETS
from ddm.workers.memory import resident_bytes
from ddm.workers.metrics import ExpertMetrics
from ddm.workers.selftest import startup_check
from ddm.workers.slices import SHARE_OF_ALLOWANCE, SliceSizer
from ddm.workers.stats import WorkerStats
from ddm.workers.text_rows import text_embeddings

log = logging.getLogger(__name__)

STATS_LOG_S = 10.0  # at most one stats line per this many seconds
KEEPALIVE_S = 1.0  # between slices of an oversize batch, service the connection at most this often
# slice sizes for an expert without buckets, up to the router's largest request (workers/slices.py)
EAGER_SLICE_SIZES = (1, 2, 4, 8, 16, 32, 64)


def default_worker_id(expert_id: int) -> str:
    host = re.sub(r"[^A-Za-z0-9_.:@-]", "-", socket.gethostname())[:80] or "host"
    return f"expert{expert_id}-{host}-{os.getpid()}"


class ExpertWorker(Stage):
    """Consume `<prefix>ddm.expert.<k>`, batch requests, run one forward per batch, reply, ack.

    run() blocks until stop() (callable from any thread or a signal handler). `ready` is set while
    the worker is consuming. `expert` may be passed pre-loaded (tests); otherwise run() loads it with
    load_expert, which compiles every bucket, before it consumes anything.
    """

    REQUEST = VelocityRequest
    role = "expert"

    def __init__(
        self,
        settings: Settings,
        deployment_path: str | Path,
        expert_id: int,
        *,
        device: str | None = None,
        precision: str | None = None,
        max_batch: int | None = None,
        max_wait_ms: float | None = None,
        buckets: tuple[int, ...] | None = None,
        worker_id: str | None = None,
        expert=None,
        metrics_port: int | None = None,
        hooks=(),
    ):
        self.expert_id = check_expert_id(expert_id)
        deployment = Deployment.load(deployment_path)
        entry = deployment.expert(expert_id)
        self.conditioning = deployment.conditioning
        self._embeddings = None  # a text deployment's: prompt embeddings in Redis (load())
        self.checkpoint = entry.checkpoint
        self.device = device or entry.device
        self.precision = check_precision(precision or entry.precision)
        self.max_batch = settings.max_batch if max_batch is None else int(max_batch)
        self.max_wait_ms = settings.max_wait_ms if max_wait_ms is None else float(max_wait_ms)
        if self.max_batch < 1 or not 0 <= self.max_wait_ms <= 10_000:
            raise ConfigError(
                expected("max_batch >= 1 and max_wait_ms in [0, 10000]", (max_batch, max_wait_ms))
            )
        self.buckets = tuple(sorted(buckets)) if buckets else DEFAULT_BUCKETS
        if self.buckets[0] < 1:
            raise ConfigError(expected("bucket sizes >= 1", self.buckets))
        worker_id = check_worker_id(worker_id or default_worker_id(expert_id))
        self.prefetch = 2 * self.max_batch  # several routers: the next batch is here when one finishes
        self.expert = expert
        self._batcher = Batcher(self.max_batch, self.max_wait_ms / 1e3)
        self._logged = (0.0, 0)  # (monotonic time, batches) of the last stats line
        metrics = ExpertMetrics(self.expert_id, worker_id)
        queue = settings.names.expert_queue(expert_id)
        super().__init__(
            settings, worker_id, queue, WorkerStats(), metrics, metrics_port=metrics_port, hooks=hooks
        )

    # ------------------------------------------------------------ the stage

    def load(self) -> None:
        if self.expert is None:
            from ddm.workers import load_expert

            self.expert = load_expert(self.checkpoint, self.device, self.buckets, self.precision)
        if self.conditioning.kind == "text":
            self._embeddings = text_embeddings(self.expert, self.conditioning, self.settings)
        self.expert.warmup()  # every bucket once: no compile or first-call cost on the first request
        meta = self.expert.meta
        self.log_start(describe_stack(self.expert))
        check = startup_check(self.expert, self.checkpoint)  # raises, so nothing is served, on a mismatch
        if check is not None:
            log.info(
                "start-up self-test: bucket %d within %.0e of the CPU (%.2e)",
                check.bucket,
                check.tolerance,
                check.error,
            )
        log.info(
            "expert worker %s: expert %d (%s on %s, %s, buckets %s) from %s; queue %s at %s; "
            "max batch %d rows, max wait %g ms, prefetch %d",
            self.worker_id,
            self.expert_id,
            meta.framework,
            meta.device,
            meta.precision,
            self.expert.buckets or "any (eager)",
            self.checkpoint,
            self.queue,
            redact(self.settings.amqp_url),
            self.max_batch,
            self.max_wait_ms,
            self.prefetch,
        )
        self._logged = (time.monotonic(), 0)
        self._slices = SliceSizer(
            self.expert.buckets or EAGER_SLICE_SIZES,
            self.settings.heartbeat_ttl_s - self.settings.heartbeat_s,
        )
        try:
            self._slices.observe(*timed_forward(self.expert, self.sample_space, self._slices.sizes[-1]))
        except Exception as exc:  # noqa: BLE001 - sized after the first batch instead; serving decides
            log.warning("could not time a forward pass at start (%r): slices sized after a batch", exc)
        log.info(
            "slices of oversize batches: %d rows (%.1f ms a row; half the heartbeat allowance is %.1f s)",
            self._slices.rows,
            self._slices.s_per_row * 1e3,
            self._slices.budget_s,
        )

    def declare(self, session: Session) -> None:
        session.declare([self.expert_id], jobs=False)

    def attach_more(self, session: Session) -> None:
        # No queue probe here: a passive declare is a broker round trip on this, the serving thread,
        # which from a far host stalled a forward pass at every heartbeat (docs/BENCHMARKS.md). The
        # routers export this queue's depth (router/expert_probe.py), next to the broker.
        # this replica's own queue: a router hedges a late request to a replica that answers (classic and
        # exclusive whatever DDM_QUEUE_TYPE says: it lives and dies with this connection)
        own = self.names.replica_queue(self.expert_id, self.worker_id)
        session.channel.queue_declare(own, exclusive=True, auto_delete=True)
        session.consume(own, self.on_message)

    def check(self, request: VelocityRequest) -> None:
        # another sample space than this expert's (its card): dead-lettered naming both shapes
        request.check_space(self.sample_space)
        if (request.text_keys is not None) != (self._embeddings is not None):
            raise SchemaError(
                expected(
                    f"a request {'with' if self._embeddings else 'without'} prompt embedding keys (this "
                    f"expert is conditioned on {self.conditioning.describe()})",
                    "the other kind",
                )
            )

    def accept(self, delivery: Delivery) -> None:
        self._batcher.add(delivery)  # served by pump() once its batch is due

    def hand_back(self, session: Session, lost: bool) -> int:
        """Clean stop: hand back what waits (the last batch was answered). Lost connection: forget what
        waits; the broker redelivers it."""
        waiting = self._batcher.drain()
        if not lost:
            for item in waiting:
                session.channel.basic_nack(item.delivery_tag, requeue=True)
        return len(waiting)

    def wait_s(self) -> float:
        """Until the pending batch is due."""
        wait = self._batcher.wait_s(time.monotonic())
        return MAX_WAIT_S if wait is None else wait

    def pump(self) -> None:
        self._serve_due_batch()

    def beat_fields(self) -> dict[str, object]:
        meta = self.expert.meta
        return {
            "expert_id": self.expert_id,
            "framework": meta.framework,
            "device": meta.device,
            "precision": meta.precision,
            "max_batch": self.max_batch,
            "max_wait_ms": self.max_wait_ms,
            "buckets": ",".join(map(str, self.expert.buckets or ())) or "any",
            "weights_bytes": getattr(self.expert, "weights_bytes", None),
        }

    def beat_extra(self) -> dict[str, object]:
        now = time.monotonic()
        last_t, last_batches = self._logged
        if now - last_t >= STATS_LOG_S and self.stats.batches != last_batches:
            self._logged = (now, self.stats.batches)
            log.info("%s: %s", self.worker_id, self.stats.summary())
        return {"rss_bytes": resident_bytes()}

    # ------------------------------------------------------------ batching

    def _serve_due_batch(self) -> None:
        """If a batch is due: one forward pass, then its replies, dead letters and acks."""
        wait = self._batcher.wait_s(time.monotonic())
        if wait is None or wait > 0:
            return
        items = self._batcher.take()
        if not self.admit(items[0]):  # a redelivered one (alone) that kept killing workers
            return
        keepalive = _KeepAlive(self.session.conn)
        try:
            result = serve_batch(
                self.expert,
                items,
                self.expert_id,
                self.worker_id,
                chunk_rows=self._slices.rows,
                between=keepalive,
                lookup=None if self._embeddings is None else self._embeddings.get,
            )
        except Exception as exc:  # a bug, not a bad request: still answer every delivery
            log.exception("serving a batch of %d request(s) failed", len(items))
            result = BatchResult([Outcome(it, None, f"internal error: {exc!r}") for it in items], 0, 0.0)
        keepalive.raise_if_lost()  # the runtime reconnects; the broker redelivers the batch
        self._slices.observe(result.rows, result.compute_ms / 1e3)
        if keepalive.longest_s > self._slices.budget_s / SHARE_OF_ALLOWANCE:
            log.warning(
                "a %d-row batch went %.1f s without servicing its connection, longer than the heartbeat "
                "allows (%.1f s): this worker looked silent meanwhile; even its smallest slice (%d rows) "
                "is too slow on this device: compile a smaller bucket, or raise DDM_HEARTBEAT_TTL_S",
                result.rows,
                keepalive.longest_s,
                self._slices.budget_s / SHARE_OF_ALLOWANCE,
                self._slices.sizes[0],
            )
        self._reply(result)

    def _reply(self, result: BatchResult) -> None:
        """Publish each reply, then ack its request; dead-letter failures with their reason. The batch is
        counted first, so a client holding its reply finds it in the worker's counters."""
        now = time.monotonic()
        served = [o for o in result.outcomes if o.reply is not None]
        if result.rows:
            latencies = [now - o.item.arrived for o in served]
            self.stats.record_batch(result.rows, len(served), result.compute_ms)
            self.metrics.record_batch(result.rows, result.compute_ms, latencies)
        for o in result.outcomes:
            if o.reply is None:
                self.refuse(o.item.delivery_tag, o.item.properties, o.item.body, o.error)
            else:
                self.reply(o.item, o.reply, VelocityReply.TYPE)

    @property
    def sample_space(self) -> SampleSpace:
        """The space this worker serves: its expert's card's (the legacy one for an expert without)."""
        card = getattr(self.expert, "card", None)
        return card.sample_space if card is not None else LEGACY


class _KeepAlive:
    """Called between slices of an oversize batch: services the connection (heartbeats, timers, new
    deliveries) once KEEPALIVE_S has passed. An error there (a lost connection, a callback's) is kept,
    not raised inside serve_batch (which would take it for a failed forward pass), and raised after
    the batch by raise_if_lost()."""

    def __init__(self, conn):
        self.conn = conn
        self.started = self.last = time.monotonic()
        self.longest_s = 0.0  # the longest stretch without servicing the connection
        self.lost: BaseException | None = None

    def __call__(self) -> None:
        now = time.monotonic()
        if self.lost is not None or now - self.last < KEEPALIVE_S:
            return
        self.longest_s = max(self.longest_s, now - self.last)
        try:
            self.conn.process_data_events(time_limit=0)
        except Exception as exc:  # noqa: BLE001 - raised after the batch, never as a forward-pass error
            self.lost = exc
        self.last = time.monotonic()

    def raise_if_lost(self) -> None:
        self.longest_s = max(self.longest_s, time.monotonic() - self.last)
        if self.lost is not None:
            raise self.lost


def describe_stack(expert) -> str:
    """One log line: what runs the expert, at which versions, and what loading it compiled."""
    from ddm.workers.frameworks import expert_framework

    meta = expert.meta
    parts = [f"{meta.architecture} {meta.preset} in {meta.framework} on {meta.device} at {meta.precision}"]
    parts.append(expert_framework(meta.framework).toolchain(meta.device))
    if expert.compile_report:
        r = expert.compile_report
        parts.append(
            f"{r['compiled']} buckets compiled ({r['compile_s']:.1f} s), {r['loaded']} loaded from cache"
        )
    return "; ".join(parts)


def run_from_args(args) -> int:
    """Entry of `ddm worker expert` (flags in ddm.ops.cli.worker)."""
    return serve_from_args(
        ExpertWorker,
        args,
        args.expert,
        device=args.device,
        precision=args.precision,
        max_batch=args.max_batch,
        max_wait_ms=args.max_wait_ms,
        buckets=parse_bucket_flag(args.buckets),
    )


def timed_forward(expert, space: SampleSpace, rows: int) -> tuple[int, float]:
    """(rows, seconds) of one unguided forward pass of `rows` zero samples (after warmup: no compile)."""
    x = np.zeros((rows, *space.shape), np.float32)
    t, y = np.full(rows, 0.5, np.float32), np.full(rows, space.null_class, np.int64)
    text = {"cond": expert.null_condition(rows)} if getattr(expert, "text_width", 0) else {}  # not y
    started = time.perf_counter()
    expert.velocity(x, t, y, 1.0, **text)
    return rows, time.perf_counter() - started
