"""The stage base: a worker that consumes one request type from one queue and replies with one reply
type (the expert worker, the decoder worker and the text-encoder worker), in the manner of kombu's
ConsumerMixin: the base owns the request/reply shell, a stage is the small part that differs.

The shell (every stage gets it, and gets it the same way):
- the consumer runtime (ddm/runtime/consumer.py): connection, reconnects, heartbeat, metrics, stop;
- per delivery: the properties check (reply_to, content type: stage_request.py), decode with the
  message size bound, the stage's own check (its sample space), dead-letter with the reason on failure;
- the crash-loop guard: a redelivered request is served alone and counted (crash_guard.py);
- reply properties, publish, then ack (never the other way round); a reply that cannot be built is
  dead-lettered ("reply refused: ..."); stats of refusals;
- and, for `run_from_args`, the one signal policy of every worker (ddm/runtime/signals.py).

A stage sets REQUEST (a schema message class with decode() and check_space()) and implements:

    load()               once, before the first connection: load and compile the model
    check(request)       the stage's own checks of a decoded request (SchemaError refuses it)
    answer(delivery)     serve one accepted delivery: reply() or refuse() it
    beat_fields()        its heartbeat fields beyond role, host, region, pid and queue

Hooks with working defaults: declare(session) (its queue's topology), attach_more(session) (more
consumers), accept(delivery) (default: answer it now, alone if redelivered; the expert batches instead),
pump() and wait_s() (nothing is due), hand_back(session) (nothing waits), beat_extra() ({}).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from ddm.runtime.consumer import MAX_WAIT_S, ConsumerRuntime, OnRuntime, Session
from ddm.runtime.stage_request import check_request_properties
from ddm.schema.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delivery:
    """A decoded request with what is needed to reply to it, ack it or dead-letter it."""

    request: Any  # the stage's REQUEST
    delivery_tag: int
    arrived: float  # time.monotonic() when it was received
    body: bytes  # the original message, kept for dead-lettering
    properties: Any  # pika.BasicProperties of the original (reply_to, correlation_id)
    redelivered: bool = False  # a worker held it before and never settled it: served alone


class Stage(OnRuntime):
    """Consume `queue`, answer each request with one reply. run() blocks until stop() (callable from
    any thread or a signal handler); `ready` is set while consuming."""

    REQUEST: ClassVar[type]
    role: ClassVar[str]
    prefetch: int = 4

    def __init__(
        self,
        settings: Settings,
        worker_id: str,
        queue: str,
        stats,
        metrics,
        *,
        metrics_port: int | None = None,
        hooks=(),
    ):
        self.settings = settings
        self.names = settings.names
        self.worker_id = worker_id
        self.queue = queue
        self.stats = stats
        self.metrics = metrics
        self.session: Session | None = None
        self.runtime = ConsumerRuntime(
            settings, worker_id, self, metrics, metrics_port=metrics_port, hooks=hooks
        )

    # ------------------------------------------------------------ lifecycle (and OnRuntime's)

    def run(self) -> None:
        """Load, then serve until stop(); reconnects on broker loss. With a metrics port, /metrics and
        /healthz answer from the start (503 until consuming)."""
        try:
            self.runtime.run()
        finally:
            log.info("%s worker %s stopped; %s", self.role, self.worker_id, self.stats.summary())

    # ------------------------------------------------------------ what a stage implements

    def load(self) -> None:
        raise NotImplementedError

    def check(self, request) -> None:
        raise NotImplementedError

    def answer(self, delivery: Delivery) -> None:
        raise NotImplementedError

    def beat_fields(self) -> dict[str, object]:
        return {}

    # ------------------------------------------------------------ hooks with working defaults

    def declare(self, session: Session) -> None:
        session.declare(jobs=False)

    def attach_more(self, session: Session) -> None:
        pass

    def accept(self, delivery: Delivery) -> None:
        """A decoded, checked request arrived: answer it now (alone, and counted, if redelivered)."""
        if self.admit(delivery):
            self.answer(delivery)

    def pump(self) -> None:
        pass

    def wait_s(self) -> float:
        return MAX_WAIT_S

    def hand_back(self, session: Session, lost: bool) -> int:
        """The session ends: nack (clean) or forget (lost) what waits; how many deliveries that was."""
        return 0

    def beat_extra(self) -> dict[str, object]:
        return {}

    # ------------------------------------------------------------ the shell (the runtime's handler)

    def start(self) -> None:
        self.load()

    def attach(self, session: Session) -> None:
        self.declare(session)
        session.channel.basic_qos(prefetch_count=self.prefetch)
        session.consume(self.queue, self.on_message)
        self.attach_more(session)
        self.session = session

    def detach(self, session: Session, lost: bool) -> int:
        self.session = None
        if not lost:
            session.cancel_consumers()  # first: nothing more arrives while what waits goes back
        return self.hand_back(session, lost)

    def beat_static(self) -> dict[str, object]:
        where = {"host": socket.gethostname(), "region": self.settings.region, "pid": os.getpid()}
        return {"role": self.role, **self.beat_fields(), **where, "queue": self.queue}

    def count_refused(self, queue: str) -> None:
        self.stats.dead_lettered += 1
        self.metrics.dead_lettered.inc()

    def on_message(self, ch, method, props, body: bytes) -> None:
        """Every consumer of a stage delivers here: checked, decoded, checked again, then accepted."""
        try:
            check_request_properties(props)
            request = self.REQUEST.decode(body, max_bytes=self.settings.max_message_bytes)
            self.check(request)
        except Exception as exc:  # SchemaError, or anything a malformed body could raise
            self.refuse(method.delivery_tag, props, body, f"{type(exc).__name__}: {exc}")
            return
        self.accept(Delivery(request, method.delivery_tag, time.monotonic(), body, props, method.redelivered))

    # ------------------------------------------------------------ what a stage's answer uses

    def log_start(self, what: str) -> None:
        """The line a stage logs when it has loaded (what it serves, from where), by its own module's
        logger: a reader filters a stage's lines by its module, as before the base."""
        logging.getLogger(type(self).__module__).info("%s worker %s: %s", self.role, self.worker_id, what)

    def admit(self, delivery: Delivery) -> bool:
        """Whether to serve `delivery` now: False for a redelivered one that has ended DDM_CRASH_LIMIT
        workers (dead-lettered here with the last error: crash_guard.py)."""
        return not delivery.redelivered or self.session.check_redelivered(
            delivery.delivery_tag, delivery.properties, delivery.body, self.queue
        )

    def reply(self, delivery: Delivery, body: bytes, reply_type: str) -> None:
        """Publish the reply to the requester's queue, then ack the request."""
        self.session.reply(delivery.delivery_tag, delivery.properties, body, reply_type)

    def refuse(self, delivery_tag: int, props, body: bytes, reason: str) -> None:
        """Dead-letter a request with `reason` (ddm/runtime/deadletter.py), and count it."""
        self.session.dead_letter(delivery_tag, props, body, reason, self.queue)
        self.count_refused(self.queue)
