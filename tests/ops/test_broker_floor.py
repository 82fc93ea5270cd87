"""The transport floor's echo consumer, against the real broker."""

import pika
import pytest

from ddm.ops.broker_floor import EchoFloor
from ddm.schema.errors import DDMError
from ddm.schema.settings import Settings


def test_floor_is_a_round_trip_and_leaves_no_queue_behind():
    url = Settings.from_env().amqp_url
    with EchoFloor(url) as floor:
        assert 0 < floor.measure(n=10, warmup=2) < 1000
        queue = floor.queue
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):  # 404: auto-deleted with its consumer
            conn.channel().queue_declare(queue, passive=True)
    finally:
        conn.close()


def test_unreachable_broker_fails_fast_and_says_where():
    floor = EchoFloor("amqp://guest:guest@127.0.0.1:1/%2F")
    with pytest.raises(DDMError, match=r"RabbitMQ up at amqp://guest:\*+@127\.0\.0\.1:1/"):
        floor.__enter__()
