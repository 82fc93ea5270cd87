"""The one consumer runtime of the long-running workers (the expert worker and the router worker).

It owns everything that is not the worker's own job: connect with bounded backoff, a channel and a
confirm-mode channel per connection, qos, consumers, timers that die with their connection, the
Redis heartbeat, dead-lettering, the metrics and health server, reconnect after a broker loss, and a
stop that works from a signal handler or another thread. A worker supplies a Handler:

    start()             once, before the first connection (load and compile a model)
    attach(session)     per connection: declare topology, qos, consume, timers
    pump()              after every burst of deliveries and timers (serve a due batch, send due steps)
    wait_s()            how long the runtime may wait for deliveries before pump() must run again
    detach(session, lost) the connection ends: hand back what waits (clean) or forget it (lost);
                        returns how many deliveries were dropped, for the log
    beat_static()       the heartbeat's fixed fields (role, host, ...), asked once after start()
    count_refused(queue) a delivery of `queue` the runtime dead-lettered itself (undecodable properties)
    stats               counters with fields(), and beat_extra() -> more dynamic heartbeat fields

A stage (a worker that answers requests: the expert, the decoder) serves through its Session: reply()
publishes and then acks, ack() settles, dead_letter() refuses with a reason, and check_redelivered() is
the crash-loop guard (ddm/runtime/crash_guard.py): a redelivered message is served alone and counted,
and one that has ended `DDM_CRASH_LIMIT` workers is dead-lettered with the last error instead. A
worker that dies of an exception leaves that error on the messages it was serving.

Hooks see every delivery and every pump: `before(event, queue)` and `after(event, queue, seconds)`,
event "deliver" or "pump". Timings of the seams come from hooks (and metrics), not from patching the
workers' private methods.

One thread does everything: pika's BlockingConnection is not thread-safe, so the connection thread is
the only one that touches it (stop() from elsewhere only wakes it). The one exception is the heartbeat's
Redis write (ddm/runtime/heartbeat.py BackgroundBeats): that thread snapshots the record, another writes
it, so a far or absent Redis never stalls serving.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

import pika

from ddm.runtime.amqp import CONNECTION_ERRORS, LoginRefusedError, connect, declare_topology
from ddm.runtime.crash_guard import CrashGuard, Suspect
from ddm.runtime.deadletter import dead_letter
from ddm.runtime.heartbeat import BackgroundBeats, Heartbeat
from ddm.runtime.metrics import serve_metrics
from ddm.runtime.property_guard import undecodable
from ddm.schema.errors import ServiceUnavailableError
from ddm.schema.settings import Settings, redact
from ddm.schema.topology import CONTENT_TYPE

log = logging.getLogger(__name__)

MAX_WAIT_S = 0.25  # longest wait for deliveries: bounds how late a stop request is noticed
MAX_BACKOFF_S = 10.0


class ConsumerCancelledError(ConnectionError):
    """The broker cancelled one of our consumers (queue deleted, node failure): reconnect, redeclare."""


class Hook(Protocol):
    def before(self, event: str, queue: str | None) -> None: ...

    def after(self, event: str, queue: str | None, seconds: float) -> None: ...


def run_hooked(hooks: tuple[Hook, ...], event: str, queue: str | None, fn: Callable, *args) -> None:
    """fn(*args) with every hook's before/after around it (and nothing around it without hooks)."""
    if not hooks:
        fn(*args)
        return
    for hook in hooks:
        hook.before(event, queue)
    started = time.perf_counter()
    fn(*args)
    for hook in hooks:
        hook.after(event, queue, time.perf_counter() - started)


class Handler(Protocol):
    def start(self) -> None: ...

    def attach(self, session: Session) -> None: ...

    def pump(self) -> None: ...

    def wait_s(self) -> float: ...

    def detach(self, session: Session, lost: bool) -> int: ...

    def beat_static(self) -> dict[str, object]: ...

    def count_refused(self, queue: str) -> None: ...

    def beat_extra(self) -> dict[str, object]: ...


class Session:
    """One live broker connection of a runtime: its work channel, a confirm-mode channel for dead
    letters, its consumers and timers. Everything here is called on the connection thread."""

    def __init__(self, conn: pika.BlockingConnection, runtime: ConsumerRuntime):
        self.conn = conn
        self.runtime = runtime
        self.names = runtime.settings.names
        self.channel = conn.channel()
        self._confirm = conn.channel()
        self._confirm.confirm_delivery()
        self._tags: list[str] = []
        self._refusals: list[tuple] = []  # dead letters to send at the next pump (dead_letter)
        self._suspects: dict[int, Suspect] = {}  # redelivered messages being served alone, by tag

    @property
    def open(self) -> bool:
        return self.conn.is_open and self.runtime.session is self

    def declare(
        self, expert_ids: Iterable[int] = (), *, jobs: bool, decoder: bool = False, text: bool = False
    ) -> None:
        declare_topology(
            self.channel,
            self.names,
            expert_ids,
            jobs=jobs,
            queue_type=self.runtime.settings.queue_type,
            decoder=decoder,
            text=text,
        )

    def consume(self, queue: str, callback: Callable, *, auto_ack: bool = False) -> str:
        """basic_consume with the runtime's hooks around every delivery. A delivery whose properties
        did not decode (ddm/runtime/property_guard.py) never reaches `callback`: it is dead-lettered with its
        raw body and the reason (dropped with a log line when auto_ack already settled it)."""
        hooks = self.runtime.hooks

        def guarded(ch, method, props, body):
            why = undecodable(props)
            if why is None:
                callback(ch, method, props, body)
            elif auto_ack:
                log.warning("dropped a message from %s: %s", queue, why)
            else:
                self.dead_letter(method.delivery_tag, props, body, why, queue)
                self.runtime.handler.count_refused(queue)

        def on_delivery(*delivery):
            run_hooked(hooks, "deliver", queue, guarded, *delivery)

        tag = self.channel.basic_consume(queue, on_delivery if hooks else guarded, auto_ack=auto_ack)
        self._tags.append(tag)
        return tag

    def cancel_consumers(self) -> None:
        """Stop deliveries; pika requeues those it had not dispatched yet."""
        for tag in self._tags:
            self.channel.basic_cancel(tag)
        self._tags.clear()

    def check_consumers(self) -> None:
        for tag in self._tags:
            if tag not in self.channel.consumer_tags:
                raise ConsumerCancelledError(f"the broker cancelled our consumer {tag}")

    def every(self, interval_s: float, fn: Callable[[], None], *, now: bool = True) -> None:
        """Run fn now (or, with now=False, first after interval_s) and then every interval_s while this
        session lives."""

        def tick() -> None:
            if not self.open:
                return  # the connection is gone; the next session schedules its own timers
            fn()
            self.conn.call_later(interval_s, tick)

        if now:
            tick()
        else:
            self.conn.call_later(interval_s, tick)

    # ------------------------------------------------------------ serving a stage's requests

    def check_redelivered(self, delivery_tag: int, props, body: bytes, queue: str) -> bool:
        """Before a stage serves a redelivered message (alone: ddm/runtime/crash_guard.py), count the
        attempt. False: the message has ended `crash_limit` workers; it is dead-lettered with the last
        error instead, and must not be served."""
        suspect, reason = self.runtime.crash_guard.attempt(queue, body, props.headers)
        if reason is not None:
            self.dead_letter(delivery_tag, props, body, reason, queue)
            self.runtime.handler.count_refused(queue)
            return False
        if suspect is not None:
            self._suspects[delivery_tag] = suspect
        return True

    def reply(self, delivery_tag: int, props, body: bytes, reply_type: str) -> None:
        """Publish a stage's reply to the requester's queue, then ack the request (only after its reply
        was handed to the broker: a worker that dies between the two leaves it to be redelivered)."""
        out = pika.BasicProperties(
            correlation_id=props.correlation_id, content_type=CONTENT_TYPE, type=reply_type
        )
        self.channel.basic_publish("", props.reply_to, body, out)
        self.ack(delivery_tag)

    def ack(self, delivery_tag: int) -> None:
        self.channel.basic_ack(delivery_tag)
        self._settled(delivery_tag)

    def _settled(self, delivery_tag: int) -> None:
        suspect = self._suspects.pop(delivery_tag, None)
        if suspect is not None:
            self.runtime.crash_guard.settled(suspect)

    def blame(self, error: BaseException) -> None:
        """This worker is dying of `error`: the redelivered messages it was serving carry it."""
        for suspect in self._suspects.values():
            self.runtime.crash_guard.blame(suspect, error)

    def dead_letter(self, delivery_tag: int, props, body: bytes, reason: str, queue: str) -> None:
        """Refuse a delivery: to ddm.dead with the reason and the original properties, confirmed, then
        settled (ddm.runtime.deadletter) at the next pump, not here. Why: a delivery callback that waits
        for a broker confirm lets pika queue the next delivery meanwhile, and pika dispatches a channel's
        deliveries until none is left before it runs a timer: under a flood of bad messages the worker's
        timers (heartbeat, descriptor, sweeps) starved for seconds. Deferred, a callback returns at once
        and the prefetch window bounds what waits."""
        self._refusals.append((delivery_tag, props, body, reason, queue))

    def flush_dead_letters(self) -> None:
        """Carry out the refusals made since the last pump (the runtime calls this before every pump)."""
        refusals, self._refusals = self._refusals, []
        for delivery_tag, props, body, reason, queue in refusals:
            dead_letter(
                self.channel,
                self._confirm,
                self.names,
                delivery_tag,
                props,
                body,
                reason=reason,
                queue=queue,
                worker_id=self.runtime.worker_id,
            )
            self._settled(delivery_tag)


class OnRuntime:
    """The lifecycle a worker that owns a ConsumerRuntime (as self.runtime) shows: a stage, the router."""

    runtime: ConsumerRuntime

    @property
    def ready(self) -> threading.Event:
        """Set while consuming."""
        return self.runtime.ready

    @property
    def stopping(self) -> bool:
        return self.runtime.stopping

    def stop(self) -> None:
        """Ask run() to stop (safe from a signal handler or another thread): no new deliveries, finish
        the work in hand, close cleanly."""
        self.runtime.stop()


class ConsumerRuntime:
    """Run `handler` on the broker until stop(). `ready` is set while consuming."""

    def __init__(
        self,
        settings: Settings,
        worker_id: str,
        handler: Handler,
        metrics,
        *,
        metrics_port: int | None = None,
        hooks: Iterable[Hook] = (),
    ):
        self.settings = settings
        self.worker_id = worker_id
        self.handler = handler
        self.metrics = metrics
        self.metrics_port = settings.metrics_port if metrics_port is None else int(metrics_port)
        self.hooks = tuple(hooks)
        self.ready = threading.Event()
        self.session: Session | None = None
        self.heartbeat: Heartbeat | None = None
        self.crash_guard = CrashGuard(settings.redis_url, settings.names, settings.crash_limit)
        self._beats: BackgroundBeats | None = None  # writes the heartbeat off the connection's thread
        self._stop = threading.Event()
        self._run_thread: threading.Thread | None = None
        metrics.set_health(self.health)

    # ------------------------------------------------------------ control

    def stop(self) -> None:
        """Ask run() to return: no new deliveries, finish the work in hand, close cleanly."""
        self._stop.set()
        session = self.session
        # From another thread, wake the connection at once. Not from the run thread itself (a signal
        # handler there may interrupt pika while it holds the lock this call takes); the loop notices
        # the flag within MAX_WAIT_S anyway.
        if session is not None and threading.current_thread() is not self._run_thread:
            with contextlib.suppress(Exception):  # closed meanwhile: nothing to wake
                session.conn.add_callback_threadsafe(lambda: None)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def health(self) -> dict[str, bool]:
        """For /healthz (HTTP thread): reads flags only."""
        return {"consuming": self.ready.is_set(), "redis": self.heartbeat is not None and self.heartbeat.ok}

    # ------------------------------------------------------------ running

    def run(self) -> None:
        """Start the handler, then serve until stop(), reconnecting when the broker goes away."""
        self._run_thread = threading.current_thread()
        server = serve_metrics(self.metrics, self.metrics_port, self.settings.metrics_bind)
        try:
            self.handler.start()
            self.heartbeat = Heartbeat(
                self.settings.redis_url,
                self.settings.names,
                self.worker_id,
                self.handler.beat_static(),
                self.settings.heartbeat_ttl_s,
            )
            self._beats = BackgroundBeats(self.heartbeat)
            self._serve_until_stopped()
        finally:
            self.ready.clear()
            if self._beats is not None:
                self._beats.close()  # its last write lands before the record is removed
            if self.heartbeat is not None:
                self.heartbeat.remove()
                self.heartbeat.close()
            self.crash_guard.close()
            if server is not None:
                server.close()

    def _serve_until_stopped(self) -> None:
        delay = 0.25
        while not self._stop.is_set():
            conn = self._connect()
            if conn is None:
                return
            since = time.monotonic()
            try:
                self._serve(conn)
            except BaseException as exc:
                if not isinstance(exc, CONNECTION_ERRORS):  # a refused declaration, a bug: close, then end
                    with contextlib.suppress(Exception):  # the original error is the one to report
                        if not isinstance(exc, KeyboardInterrupt) and self.session is not None:
                            self.session.blame(exc)  # a second Ctrl-C is no message's fault
                        self._end(lost=True)
                    raise
                if self.session is not None:
                    self.session.blame(exc)  # a connection closed while serving a suspect, maybe for it
                dropped = self._end(lost=True)
                self.metrics.reconnects.inc()
                self.handler.stats.reconnects += 1
                log.warning(
                    "%s lost the broker (%r); reconnecting. %d delivery(ies) dropped, the broker "
                    "redelivers them",
                    self.worker_id,
                    exc,
                    dropped,
                )
                # Back off harder when sessions keep dying young (e.g. a declare the broker refuses).
                delay = 0.25 if time.monotonic() - since > 10 else min(MAX_BACKOFF_S, delay * 2)
                self._stop.wait(delay * (0.5 + random.random()))

    def _connect(self) -> pika.BlockingConnection | None:
        """Connect with bounded exponential backoff and jitter; None if stop() was called meanwhile."""
        delay = 0.25
        while not self._stop.is_set():
            try:
                return connect(self.settings.amqp_url, attempts=1, name=self.worker_id)
            except LoginRefusedError as exc:
                # a worker outlives a password rotation on the broker: keep trying, loudly and slowly
                log.error("%s; retrying in %.0f s", exc, MAX_BACKOFF_S)
                self._stop.wait(MAX_BACKOFF_S)
            except (ServiceUnavailableError, *CONNECTION_ERRORS) as exc:
                log.warning("%s; retrying in about %.1f s", exc, delay)
                self._stop.wait(delay * (0.5 + random.random()))
                delay = min(MAX_BACKOFF_S, delay * 2)
        return None

    def _serve(self, conn: pika.BlockingConnection) -> None:
        session = self.session = Session(conn, self)
        self.handler.attach(session)
        # The first beat of a session is written here, before `ready`: whoever waits for ready finds
        # the record (ddm up, the tests). Later ones go through the background writer.
        self.heartbeat.beat(self.handler.stats, **self.handler.beat_extra())
        session.every(self.settings.heartbeat_s, self._beat, now=False)  # the beat above was the first
        self.ready.set()
        log.info("%s consuming at %s", self.worker_id, redact(self.settings.amqp_url))
        while not self._stop.is_set():
            self._pump()
            conn.process_data_events(time_limit=min(MAX_WAIT_S, max(0.0, self.handler.wait_s())))
            session.check_consumers()
        self._pump()  # what the last events made due: answer it before handing the rest back
        session.flush_dead_letters()  # and the refusals that pump made
        self._end(lost=False)

    def _pump(self) -> None:
        if self.session is not None:
            self.session.flush_dead_letters()
        run_hooked(self.hooks, "pump", None, self.handler.pump)

    def _end(self, *, lost: bool) -> int:
        """The session ends: the handler hands back or forgets what it holds, then the connection
        closes (unacked deliveries go back to their queues)."""
        self.ready.clear()
        session, self.session = self.session, None
        if session is None:
            return 0
        dropped = self.handler.detach(session, lost)
        with contextlib.suppress(Exception):  # a broken connection may fail to close in many ways
            if session.conn.is_open:
                session.conn.close()
        return dropped

    def _beat(self) -> None:
        self._beats.post(self.heartbeat.record(self.handler.stats, **self.handler.beat_extra()))
