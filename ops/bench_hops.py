"""Where the per-step transport time goes at one job: a diagnostic for docs/BENCHMARKS.md.

    python -m ddm.ops.bench_hops [--preset tiny] [--n 200]

1. a bare pika round trip: publish, an echo consumer in another process, reply; once with pika's
   BlockingConnection on both sides (what the workers use) and once with its asynchronous
   SelectConnection on both sides;
2. the idle penalty: the same bit of Python (encoding a one-row request) timed right after the process
   slept 0, 1, 3 and 10 ms. On this 2-vCPU VM code that runs after a few ms of idle is several times
   slower, and at one job every process in the chain wakes from such an idle at every step;
3. a real expert worker (random weights of the preset, own process) answering one-row requests from a
   bare client, with the worker's steps timed: publish -> worker callback, callback -> forward pass
   (decode, batcher, the loop), forward pass -> replying (reply encoding), publish + ack; the rest is
   the broker back. Then the same forward pass in a minimal consumer (ops/broker_floor.py): what the
   worker adds above it is the worker's own code.

Times are medians in ms; CLOCK_MONOTONIC (time.perf_counter) is shared by processes on one host.
Needs RabbitMQ at DDM_AMQP_URL (default local guest).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import tempfile
import time
import timeit
import uuid
from pathlib import Path

import pika

from ddm.ops.broker_floor import EchoFloor, one_row, one_row_request, round_trips
from ddm.schema.settings import Settings


def _select_echo_server(url: str, queue: str) -> None:
    """The echo consumer on pika's asynchronous SelectConnection (callbacks straight from the ioloop)."""

    def on_message(channel, method, props, body):
        channel.basic_publish(
            "", props.reply_to, body, pika.BasicProperties(correlation_id=props.correlation_id)
        )
        channel.basic_ack(method.delivery_tag)

    def on_channel(channel):
        channel.queue_declare(
            queue, auto_delete=True, callback=lambda _: channel.basic_consume(queue, on_message)
        )

    conn = pika.SelectConnection(
        pika.URLParameters(url), on_open_callback=lambda c: c.channel(on_open_callback=on_channel)
    )
    conn.ioloop.start()


def _select_round_trips(url: str, queue: str, body: bytes, n: int) -> list[float]:
    """Round-trip seconds of n requests, one in flight at a time, from a SelectConnection client."""
    out: list[float] = []
    state: dict = {}

    def send():
        state["sent"] = time.perf_counter()
        props = pika.BasicProperties(reply_to=state["reply_queue"], correlation_id=str(len(out)))
        state["channel"].basic_publish("", queue, body, props)

    def on_reply(channel, method, props, reply):
        out.append(time.perf_counter() - state["sent"])
        if len(out) >= n:
            conn.close()
        else:
            send()

    def on_reply_queue(frame):
        state["reply_queue"] = frame.method.queue
        state["channel"].basic_consume(frame.method.queue, on_reply, auto_ack=True)
        send()

    def on_channel(channel):
        state["channel"] = channel
        channel.queue_declare("", exclusive=True, callback=on_reply_queue)

    conn = pika.SelectConnection(
        pika.URLParameters(url),
        on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
        on_close_callback=lambda *_: conn.ioloop.stop(),
    )
    conn.ioloop.start()
    return out


def echo_rtt_ms(url: str, n: int, asynchronous: bool = False) -> float:
    """Median round trip of a one-row request through an echo consumer in another process."""
    if not asynchronous:
        with EchoFloor(url) as floor:
            return floor.measure(n)
    queue = f"ddm-hops-echo-{uuid.uuid4().hex[:8]}"
    server = mp.get_context("spawn").Process(target=_select_echo_server, args=(url, queue), daemon=True)
    server.start()
    time.sleep(1.0)
    try:
        return statistics.median(rtt * 1e3 for rtt in _select_round_trips(url, queue, one_row_request(), n))
    finally:
        server.terminate()


def serialisation_ms() -> float:
    """Encode + decode of a one-row VelocityRequest and its VelocityReply, in ms (best of 3 x 2000)."""
    from ddm.schema.messages import VelocityReply, VelocityRequest

    x, *one = one_row()

    def both():
        VelocityRequest.decode(VelocityRequest("r.1", x, *one).encode())
        VelocityReply.decode(VelocityReply("r.1", x, 0, "w", 3.0, 1).encode())

    return min(timeit.repeat(both, number=2000, repeat=3)) / 2000 * 1e3


def idle_penalty_us(idles_ms: tuple[float, ...] = (0, 1, 3, 10), n: int = 300) -> dict[float, float]:
    """Median microseconds to encode a one-row VelocityRequest right after sleeping idle_ms (0: back
    to back), per idle."""
    from ddm.schema.messages import VelocityRequest

    x, *one = one_row()
    for _ in range(n):  # first calls allocate
        VelocityRequest("r.1", x, *one).encode()
    out = {}
    for idle in idles_ms:
        times = []
        for _ in range(n):
            if idle:
                time.sleep(idle / 1e3)
            start = time.perf_counter()
            VelocityRequest("r.1", x, *one).encode()
            times.append(time.perf_counter() - start)
        out[idle] = statistics.median(times) * 1e6
    return out


def _timed_worker(prefix: str, deployment: str, marks_path: str) -> None:
    """An ExpertWorker whose callbacks record (event, time); the marks are written on SIGTERM."""
    os.environ["DDM_PREFIX"] = prefix
    import ddm.workers.worker as W

    marks: list[tuple[str, float]] = []

    def wrap(name: str, event: str, after: str | None = None):
        original = getattr(W.ExpertWorker, name)

        def timed(self, *args, **kwargs):
            marks.append((event, time.perf_counter()))
            result = original(self, *args, **kwargs)
            if after:
                marks.append((after, time.perf_counter()))
            return result

        setattr(W.ExpertWorker, name, timed)

    wrap("_on_message", "received")
    wrap("_reply", "replying", after="published")
    serve_batch = W.serve_batch

    def timed_serve_batch(*args, **kwargs):
        marks.append(("computing", time.perf_counter()))
        return serve_batch(*args, **kwargs)

    W.serve_batch = timed_serve_batch

    def dump(*_):
        Path(marks_path).write_text(json.dumps(marks))
        os._exit(0)

    signal.signal(signal.SIGTERM, dump)
    W.ExpertWorker(Settings.from_env(), deployment, 0).run()


def worker_hops_ms(url: str, deployment: Path, n: int) -> dict[str, float]:
    from ddm.ops.cleanup import delete_prefix
    from ddm.schema.messages import VelocityReply
    from ddm.schema.names import Names

    with tempfile.TemporaryDirectory(prefix="ddm-hops-") as tmp:
        prefix, marks_path = f"hops{uuid.uuid4().hex[:6]}.", str(Path(tmp) / "marks.json")
        worker = mp.get_context("spawn").Process(
            target=_timed_worker, args=(prefix, str(deployment), marks_path)
        )
        worker.start()
        time.sleep(10.0)  # load and compile
        bodies = [one_row_request(f"hops.{i}") for i in range(n)]
        try:
            trips = round_trips(url, Names(prefix).expert_queue(0), bodies)
        finally:
            worker.terminate()
            worker.join()
            delete_prefix(url, Settings.from_env().redis_url, prefix, [0])  # its queues are durable
        marks = json.loads(Path(marks_path).read_text())
    by_event = {
        e: [t for name, t in marks if name == e][-n:]
        for e in ("received", "computing", "replying", "published")
    }
    compute = [VelocityReply.decode(body).compute_ms for _, _, body in trips]
    sent, back = [s for s, _, _ in trips], [r for _, r, _ in trips]

    def median_gap(a, b, minus=None):
        gaps = [
            (y - x) * 1e3 - (minus[i] if minus else 0.0) for i, (x, y) in enumerate(zip(a, b, strict=True))
        ]
        return statistics.median(gaps)

    return {
        "round trip minus compute": median_gap(sent, back, compute),
        "publish -> worker callback": median_gap(sent, by_event["received"]),
        "callback -> forward pass": median_gap(by_event["received"], by_event["computing"]),
        "forward pass -> replying, minus compute": median_gap(
            by_event["computing"], by_event["replying"], compute
        ),
        "publish reply + ack": median_gap(by_event["replying"], by_event["published"]),
        "broker back to the client": median_gap(by_event["published"], back),
        "compute (for scale)": statistics.median(compute),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="tiny", choices=("tiny", "small", "base"))
    parser.add_argument("--n", type=int, default=200, help="requests per measurement")
    args = parser.parse_args(argv)
    url = Settings.from_env().amqp_url
    print(f"serialisation, one-row request and reply, encode + decode: {serialisation_ms():.3f} ms")
    print(f"bare pika round trip (echo consumer, BlockingConnection): {echo_rtt_ms(url, args.n):.2f} ms")
    print(f"bare pika round trip (echo consumer, SelectConnection): {echo_rtt_ms(url, args.n, True):.2f} ms")
    penalty = idle_penalty_us()
    print(
        f"encode a one-row request right after an idle of {' / '.join(f'{i:g}' for i in penalty)} ms: "
        f"{' / '.join(f'{us:.0f}' for us in penalty.values())} us"
    )
    from ddm.ops.random_experts import write_label_split
    from ddm.schema.deployment import Deployment

    with tempfile.TemporaryDirectory(prefix="ddm-hops-") as tmp:
        deployment = write_label_split(Path(tmp) / "experts", args.preset)
        for name, ms in worker_hops_ms(url, deployment, args.n).items():
            print(f"expert worker, {name}: {ms:.2f} ms")
        expert = Deployment.load(deployment).experts[0]
        with EchoFloor(url, expert.checkpoint, expert.device) as floor:
            ms = floor.measure(args.n, forward=True)
        print(f"minimal consumer around the same forward pass, round trip minus it: {ms:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
