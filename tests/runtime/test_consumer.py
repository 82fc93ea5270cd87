"""The consumer runtime on its own, against the real RabbitMQ and Redis: a minimal handler that echoes
deliveries, hooks that see every delivery and pump, the heartbeat, dead letters, stop."""

from __future__ import annotations

import threading
import time

import pika
import pytest
import redis

from ddm.router.metrics import RouterMetrics
from ddm.runtime.consumer import ConsumerRuntime, Session
from ddm.workers.stats import WorkerStats
from tests.support.services import amqp_channel


class Echo:
    """A handler: consume one queue, dead-letter bodies that say 'poison', count the rest."""

    def __init__(self, queue: str):
        self.queue = queue
        self.stats = WorkerStats()
        self.session: Session | None = None
        self.seen: list[bytes] = []
        self.pumps = 0
        self.detached: list[bool] = []

    def start(self) -> None:
        pass

    def attach(self, session: Session) -> None:
        session.channel.queue_declare(self.queue, durable=False, auto_delete=True)
        session.declare(jobs=False)  # the dead-letter exchange and queue
        session.consume(self.queue, self.on_message)
        self.session = session

    def on_message(self, ch, method, props, body: bytes) -> None:
        if body == b"poison":
            self.session.dead_letter(method.delivery_tag, props, body, "refused by the test", self.queue)
            return
        self.seen.append(body)
        self.stats.requests += 1
        ch.basic_ack(method.delivery_tag)

    def pump(self) -> None:
        self.pumps += 1

    def wait_s(self) -> float:
        return 0.05

    def detach(self, session: Session, lost: bool) -> int:
        self.detached.append(lost)
        return 0

    def beat_static(self) -> dict[str, object]:
        return {"role": "router", "host": "test", "region": "local", "pid": 1}

    def beat_extra(self) -> dict[str, object]:
        return {}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None]] = []

    def before(self, event: str, queue: str | None) -> None:
        self.events.append(("before", event, queue))

    def after(self, event: str, queue: str | None, seconds: float) -> None:
        assert seconds >= 0
        self.events.append(("after", event, queue))


@pytest.fixture
def running(settings):
    handler = Echo(f"{settings.prefix}runtime-test")
    hook = Recorder()
    runtime = ConsumerRuntime(settings, "runtime-test", handler, RouterMetrics("runtime-test"), hooks=[hook])
    thread = threading.Thread(target=runtime.run, daemon=True)
    thread.start()
    assert runtime.ready.wait(30), "the runtime did not start consuming"
    yield runtime, handler, hook
    runtime.stop()
    thread.join(30)
    assert not thread.is_alive(), "stop() did not end run()"


def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_hooks_see_every_delivery_and_pump(running):
    runtime, handler, hook = running
    with amqp_channel() as ch:
        for i in range(3):
            ch.basic_publish("", handler.queue, f"m{i}".encode())
    # The after-hook runs once the handler returns, so wait on the hook, not on handler.seen.
    wait_until(lambda: sum(e[:2] == ("after", "deliver") for e in hook.events) >= 3)
    deliveries = [e for e in hook.events if e[1] == "deliver"]
    assert len(handler.seen) == 3
    assert deliveries == [("before", "deliver", handler.queue), ("after", "deliver", handler.queue)] * 3
    wait_until(lambda: ("after", "pump", None) in hook.events)
    assert handler.pumps > 0


def test_heartbeat_is_written_and_removed_on_stop(settings, running):
    runtime, handler, _ = running
    r = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    key = settings.names.worker("runtime-test")
    wait_until(lambda: r.hget(key, "role") == "router")
    assert runtime.health() == {"consuming": True, "redis": True}
    runtime.stop()
    wait_until(lambda: not r.exists(key))
    assert handler.detached == [False], "a clean stop detaches once, not lost"
    r.close()


def test_dead_letters_keep_the_body_and_properties_with_a_reason(settings, running):
    _, handler, _ = running
    with amqp_channel() as ch:
        ch.basic_publish("", handler.queue, b"poison", pika.BasicProperties(correlation_id="c-1"))
        deadline = time.monotonic() + 10
        while (got := ch.basic_get(settings.names.dead_letter_queue, auto_ack=True))[0] is None:
            assert time.monotonic() < deadline, "no dead letter arrived"
            time.sleep(0.05)
    _, props, body = got
    assert body == b"poison" and props.correlation_id == "c-1"
    assert props.headers["x-ddm-reason"] == "refused by the test"
