"""The transport floor: one bare RabbitMQ request/reply round trip on this machine, right now.

An echo consumer in its own process answers each message with itself; the client sends a one-row
VelocityRequest-sized body and waits for the echo before sending the next, both on pika's
BlockingConnection as the workers use it. No decoding, no model, no Redis: whatever the pipeline's
per-step overhead adds above this number is ours, the rest is the broker, pika and the machine.

The echo can hold each message for a while, busy, before it answers (the first 8 bytes of the body
say how long): with the hold set to the expert's forward pass, the client and the broker sit idle as
long as the router and the broker do at one job. That matters here: on this VM, code that runs after
a few ms of idle runs several times slower (`python -m ddm.ops.bench_hops`), so the floor at one job
is well above the back-to-back round trip.

`ddm bench` measures both in every repeat, right after the 1-job level, because this VM's floor moves
with the time of day as much as the pipeline does (docs/BENCHMARKS.md). `ddm.ops.bench_hops` uses the
same round trips to take an expert worker apart.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import struct
import time
import uuid

import numpy as np
import pika

from ddm.schema.errors import DDMError
from ddm.schema.settings import redact

READY_TIMEOUT_S = 30.0
HOLD = struct.Struct("<d")  # the echo's hold in seconds, at the start of each body


def one_row_request() -> bytes:
    """An encoded one-row VelocityRequest: the size of what the router sends an expert at 1 job."""
    from ddm.schema.messages import VelocityRequest

    x = np.random.default_rng(0).standard_normal((1, 1, 32, 32), dtype=np.float32)
    one = (np.full(1, 0.5, np.float32), np.zeros(1, np.int64), np.ones(1, np.float32))
    return VelocityRequest("floor.1", x, *one).encode()


def _echo(url: str, queue: str, ready) -> None:
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, auto_delete=True)  # gone when this consumer disconnects

    def on_message(channel, method, props, body):
        (hold_s,) = HOLD.unpack_from(body)
        until = time.perf_counter() + hold_s
        while time.perf_counter() < until:  # busy, like a forward pass: this CPU does not idle
            pass
        channel.basic_publish(
            "", props.reply_to, body, pika.BasicProperties(correlation_id=props.correlation_id)
        )
        channel.basic_ack(method.delivery_tag)

    ch.basic_consume(queue, on_message)
    ready.set()
    ch.start_consuming()


def round_trips(url: str, queue: str, bodies: list[bytes]) -> list[tuple[float, float, bytes]]:
    """(sent, received, reply body) per request to `queue`, one request in flight at a time
    (time.perf_counter: CLOCK_MONOTONIC, comparable across processes on one host)."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    reply_queue = ch.queue_declare("", exclusive=True).method.queue
    got: list[tuple[float, bytes]] = []
    ch.basic_consume(reply_queue, lambda c, m, p, b: got.append((time.perf_counter(), b)), auto_ack=True)
    out = []
    try:
        for i, body in enumerate(bodies):
            got.clear()
            sent = time.perf_counter()
            props = pika.BasicProperties(reply_to=reply_queue, correlation_id=str(i))
            ch.basic_publish("", queue, body, props)
            deadline = sent + READY_TIMEOUT_S
            while not got:
                if time.perf_counter() > deadline:
                    raise DDMError(f"no reply from {queue} within {READY_TIMEOUT_S:g} s")
                conn.process_data_events(time_limit=1)
            out.append((sent, got[0][0], got[0][1]))
    finally:
        conn.close()
    return out


class EchoFloor:
    """An echo consumer process kept up for a whole benchmark; `measure()` any number of times.

    with EchoFloor(url) as floor:
        floor.measure()  # median round trip in ms
    """

    def __init__(self, url: str):
        self.url = url
        self.queue = f"ddm-floor-{uuid.uuid4().hex[:8]}"
        self._ready = mp.get_context("spawn").Event()
        self._proc = mp.get_context("spawn").Process(
            target=_echo, args=(url, self.queue, self._ready), daemon=True
        )

    def __enter__(self) -> EchoFloor:
        self._proc.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready.wait(0.1):
            if not self._proc.is_alive() or time.monotonic() > deadline:
                self._proc.terminate()
                raise DDMError(
                    f"the echo consumer for the transport floor did not start (is RabbitMQ up at "
                    f"{redact(self.url)}?)"
                )
        return self

    def __exit__(self, *exc) -> None:
        self._proc.terminate()
        self._proc.join(timeout=10)

    def measure(self, n: int = 200, warmup: int = 20, hold_ms: float = 0.0) -> float:
        """Median round trip in ms of n one-row requests (after `warmup` unmeasured ones), minus
        hold_ms: the time the echo holds each one, busy, before it answers."""
        body = HOLD.pack(hold_ms / 1e3) + one_row_request()
        trips = round_trips(self.url, self.queue, [body] * (n + warmup))[warmup:]
        return statistics.median((back - sent) * 1e3 - hold_ms for sent, back, _ in trips)
