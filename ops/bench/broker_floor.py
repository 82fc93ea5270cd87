"""The transport floor: one bare RabbitMQ request/reply round trip on this machine, right now.

A minimal consumer in its own process echoes each one-row VelocityRequest-sized message back,
prefixed with how long it worked on it (8 bytes); the client waits for the answer before sending the
next, both on pika's BlockingConnection as the workers use it. No decoding, no batching, no router,
no Redis. Before it answers, the consumer does one of three things, and the round trip is reported
minus that work:

    nothing        the round trip back to back: pika and the broker alone;
    a busy wait    as long as the expert's forward pass: the client and the broker now sit idle as
                   long as the router and the broker do at one job, and on this VM code that runs
                   after a few ms of idle runs several times slower (docs/BENCHMARKS.md);
    the forward    the real expert's forward pass on one row, whose memory traffic may also leave the
                   consumer's caches cold for the publish and the next receive.

The last is the least any design pays per step at one job when a message broker stands between the
router and an expert on this machine; what the pipeline's 1-job overhead adds above it is the
pipeline's own code. `ddm bench` measures all three right after every 1-job run (this VM's floor
moves as much as the pipeline does).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import struct
import time
import uuid
from pathlib import Path

import numpy as np
import pika

from ddm.schema.errors import DDMError
from ddm.schema.settings import redact

READY_TIMEOUT_S = 120.0  # start-up: loading the expert (a JAX one compiles one bucket) comes first
REPLY_TIMEOUT_S = 30.0
WORKED = struct.Struct("<d")  # every answer starts with the seconds the consumer worked before it
FORWARD = "forward"  # message type: run the expert's forward pass; "busy:<seconds>": busy wait


def one_row() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fields of a one-row request, what the router sends an expert at 1 job: x f32 [1,1,32,32],
    t f32 [1], y i64 [1], guidance f32 [1]."""
    x = np.random.default_rng(0).standard_normal((1, 1, 32, 32), dtype=np.float32)
    return x, np.full(1, 0.5, np.float32), np.zeros(1, np.int64), np.ones(1, np.float32)


def one_row_request(request_id: str = "floor.1") -> bytes:
    """An encoded one-row VelocityRequest."""
    from ddm.schema.messages import VelocityRequest

    return VelocityRequest(request_id, *one_row()).encode()


def _load_forward(checkpoint: str, device: str):
    """A no-argument function that runs the expert's forward pass on one fixed row."""
    from ddm.workers import load_expert

    expert = load_expert(checkpoint, device, buckets=(1,))
    x, t, y, _ = one_row()
    expert.velocity(x, t, y)  # first call: allocations, lazy init
    return lambda: expert.velocity(x, t, y)


def _consumer(url: str, queue: str, ready, checkpoint: str | None, device: str, env: dict) -> None:
    os.environ.update(env)  # the expert workers' thread settings, before the expert's framework loads
    forward = _load_forward(checkpoint, device) if checkpoint else None
    conn = pika.BlockingConnection(pika.URLParameters(url))
    ch = conn.channel()
    ch.queue_declare(queue, auto_delete=True)  # gone when this consumer disconnects

    def on_message(channel, method, props, body):
        start = time.perf_counter()
        if props.type == FORWARD and forward is not None:
            forward()
        elif props.type and props.type.startswith("busy:"):
            until = start + float(props.type[5:])
            while time.perf_counter() < until:  # busy, like a forward pass: this CPU does not idle
                pass
        worked = time.perf_counter() - start
        reply_props = pika.BasicProperties(correlation_id=props.correlation_id)
        channel.basic_publish("", props.reply_to, WORKED.pack(worked) + body, reply_props)
        channel.basic_ack(method.delivery_tag)

    ch.basic_consume(queue, on_message)
    ready.set()
    ch.start_consuming()


def round_trips(
    url: str, queue: str, bodies: list[bytes], message_type: str | None = None, alive=lambda: True
) -> list[tuple[float, float, bytes]]:
    """(sent, received, reply body) per request to `queue`, one request in flight at a time
    (time.perf_counter: CLOCK_MONOTONIC, comparable across processes on one host). `alive()` says
    whether the consumer still runs: a dead one's requests vanish, so waiting on them would only hang."""
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
            props = pika.BasicProperties(reply_to=reply_queue, correlation_id=str(i), type=message_type)
            ch.basic_publish("", queue, body, props)
            deadline = sent + REPLY_TIMEOUT_S
            while not got:
                if not alive():
                    raise DDMError(f"the consumer of {queue} died (its traceback is above)")
                if time.perf_counter() > deadline:
                    raise DDMError(f"no reply from {queue} within {REPLY_TIMEOUT_S:g} s")
                conn.process_data_events(time_limit=0.5)
            out.append((sent, got[0][0], got[0][1]))
    finally:
        conn.close()
    return out


class EchoFloor:
    """The minimal consumer, kept up for a whole benchmark; `measure()` any number of times.

        with EchoFloor(url, checkpoint="checkpoints/mnist/expert0_torch") as floor:
            floor.measure()                 # back to back, ms
            floor.measure(busy_ms=6.0)      # around a 6 ms busy wait, minus the wait
            floor.measure(forward=True)     # around the expert's forward pass, minus the pass

    checkpoint (optional, needed for forward=True) is loaded with `device` and the environment
    `env` (e.g. the expert workers' OMP_NUM_THREADS).
    """

    def __init__(self, url: str, checkpoint: str | Path | None = None, device: str = "auto", env=None):
        self.url = url
        self.has_expert = checkpoint is not None
        self.queue = f"ddm-floor-{uuid.uuid4().hex[:8]}"
        ctx = mp.get_context("spawn")
        self._ready = ctx.Event()
        path = str(checkpoint) if checkpoint else None
        args = (url, self.queue, self._ready, path, device, dict(env or {}))
        self._proc = ctx.Process(target=_consumer, args=args, daemon=True)

    def __enter__(self) -> EchoFloor:
        self._proc.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not self._ready.wait(0.1):
            if not self._proc.is_alive() or time.monotonic() > deadline:
                self.__exit__()
                raise DDMError(
                    f"the minimal consumer for the transport floor did not start (is RabbitMQ up at "
                    f"{redact(self.url)}? does the expert load? its traceback is above)"
                )
        return self

    def __exit__(self, *exc) -> None:
        self._proc.terminate()
        self._proc.join(timeout=10)
        if self._proc.is_alive():  # stuck in C code that ignores SIGTERM
            self._proc.kill()
            self._proc.join()

    def measure(self, n: int = 200, warmup: int = 20, busy_ms: float = 0.0, forward: bool = False) -> float:
        """Median round trip in ms of n one-row requests (after `warmup` unmeasured ones), minus what
        the consumer worked on each: a busy wait of busy_ms, or the expert's forward pass."""
        if forward and not self.has_expert:
            raise DDMError("EchoFloor.measure(forward=True) needs the consumer started with a checkpoint")
        if not busy_ms >= 0:
            raise DDMError(f"busy_ms: expected a wait >= 0 ms, got {busy_ms!r}")
        kind = FORWARD if forward else f"busy:{float(busy_ms) / 1e3:.6f}"
        bodies = [one_row_request()] * (n + warmup)
        trips = round_trips(self.url, self.queue, bodies, kind, alive=self._proc.is_alive)[warmup:]
        return statistics.median(
            (back - sent - WORKED.unpack_from(reply)[0]) * 1e3 for sent, back, reply in trips
        )
