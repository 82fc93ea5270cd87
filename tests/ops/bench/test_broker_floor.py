"""The transport floor's minimal consumer, against the real broker."""

import time

import pika
import pytest

from ddm.ops.bench.broker_floor import FORWARD, WORKED, EchoFloor, one_row_request, round_trips
from ddm.ops.random_experts import write_label_split
from ddm.schema.deployment import Deployment
from ddm.schema.errors import DDMError
from ddm.schema.settings import Settings

URL = Settings.from_env().amqp_url


def _queue_exists(queue: str) -> bool:
    conn = pika.BlockingConnection(pika.URLParameters(URL))
    try:
        conn.channel().queue_declare(queue, passive=True)
        return True
    except pika.exceptions.ChannelClosedByBroker:  # 404
        return False
    finally:
        if conn.is_open:
            conn.close()


@pytest.mark.serial  # its floors are timings (under 50 ms)
def test_consumer_does_the_work_asked_and_the_floor_subtracts_it(tmp_path):
    expert = Deployment.load(write_label_split(tmp_path / "experts", "tiny")).experts[0]
    with EchoFloor(URL, expert.checkpoint) as floor:
        (_, _, busy), (_, _, fwd) = [
            round_trips(URL, floor.queue, [one_row_request()], kind)[0] for kind in ("busy:0.05", FORWARD)
        ]
        assert WORKED.unpack_from(busy)[0] >= 0.05 and WORKED.unpack_from(fwd)[0] > 0
        assert busy[WORKED.size :] == one_row_request()  # the echo, after the header
        # minus a 50 ms wait: a floor that forgot to subtract it could not come out under 50 ms
        assert 0 < floor.measure(n=5, warmup=1, busy_ms=50) < 50
        assert 0 < floor.measure(n=10, warmup=2) < 50
        assert 0 < floor.measure(n=10, warmup=2, forward=True) < 50
        queue = floor.queue
    deadline = time.monotonic() + 10  # the broker deletes an auto-delete queue soon after its consumer
    while _queue_exists(queue):
        assert time.monotonic() < deadline, f"{queue} outlived its consumer"
        time.sleep(0.2)


def test_a_dead_consumer_is_an_error_not_a_hang():
    with EchoFloor(URL) as floor:
        started = time.monotonic()
        with pytest.raises(DDMError, match="died"):
            round_trips(URL, floor.queue, [one_row_request()], "busy:x", alive=floor._proc.is_alive)
        assert time.monotonic() - started < 10


def test_bad_requests_for_the_floor_are_refused():
    with EchoFloor(URL) as floor:
        with pytest.raises(DDMError, match="checkpoint"):
            floor.measure(n=1, forward=True)
        with pytest.raises(DDMError, match=">= 0 ms"):
            floor.measure(n=1, busy_ms=-1)


def test_unreachable_broker_fails_fast_and_says_where():
    floor = EchoFloor("amqp://guest:guest@127.0.0.1:1/%2F")
    with pytest.raises(DDMError, match=r"RabbitMQ up at amqp://guest:\*+@127\.0\.0\.1:1/"):
        floor.__enter__()
