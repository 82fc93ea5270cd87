"""The transport floor's minimal consumer, against the real broker."""

import pika
import pytest

from ddm.ops.broker_floor import EchoFloor
from ddm.ops.random_experts import write_label_split
from ddm.schema.deployment import Deployment
from ddm.schema.errors import DDMError
from ddm.schema.settings import Settings


def test_floor_round_trips_minus_the_work_and_leaves_no_queue_behind(tmp_path):
    url = Settings.from_env().amqp_url
    expert = Deployment.load(write_label_split(tmp_path / "experts", "tiny")).experts[0]
    with EchoFloor(url, expert.checkpoint) as floor:
        bare = floor.measure(n=10, warmup=2)
        # minus a 50 ms wait: a floor that forgot to subtract it could not come out under 50 ms
        assert 0 < bare < 50 and 0 < floor.measure(n=5, warmup=1, busy_ms=50) < 50
        assert 0 < floor.measure(n=10, warmup=2, forward=True) < 50
        queue = floor.queue
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        with pytest.raises(pika.exceptions.ChannelClosedByBroker):  # 404: auto-deleted with its consumer
            conn.channel().queue_declare(queue, passive=True)
    finally:
        conn.close()


def test_forward_needs_a_checkpoint():
    with EchoFloor(Settings.from_env().amqp_url) as floor, pytest.raises(DDMError, match="checkpoint"):
        floor.measure(n=1, forward=True)


def test_unreachable_broker_fails_fast_and_says_where():
    floor = EchoFloor("amqp://guest:guest@127.0.0.1:1/%2F")
    with pytest.raises(DDMError, match=r"RabbitMQ up at amqp://guest:\*+@127\.0\.0\.1:1/"):
        floor.__enter__()
