"""A message whose AMQP properties pika cannot decode (a header timestamp of 2**63, an unknown field
type, ...) is dead-lettered once by the worker that received it, with its raw body and the reason, and
the worker keeps its connection and keeps serving (issue 23, hole 1). Before the guard, such a message
ended the receiving connection, came back to the next consumer, and stopped every router for good.
Real RabbitMQ, Redis and worker processes."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from ddm.ops.fuzz.properties import hostile_properties, timestamp_header
from ddm.runtime.property_guard import RAW_PROPERTIES_HEADER, install
from ddm.schema.messages import JobSpec
from ddm.schema.topology import REASON_HEADER, SOURCE_QUEUE_HEADER
from tests.support.harness import Pipeline, local_reference
from tests.support.services import amqp_channel


def dead_letters(channel, queue: str, want: int, timeout: float = 30.0) -> list:
    """(properties, body) of `want` dead letters (and of any more that arrive within a moment)."""
    got, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < want:
        method, props, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            time.sleep(0.05)
            continue
        got.append((props, body))
    time.sleep(1.0)
    while (extra := channel.basic_get(queue, auto_ack=True))[0] is not None:
        got.append(extra[1:])
    return got


@pytest.fixture(scope="module")
def pipe(label_split_deployment, tmp_path_factory):
    with Pipeline(label_split_deployment, tmp_path_factory.mktemp("poison")) as pipe:
        pipe.up({"a0": 0, "b0": 1})
        yield pipe


def test_a_poison_job_and_a_poison_request_are_dead_lettered_once_and_the_next_job_completes(
    pipe, label_split_deployment
):
    install()  # this test's own reader of ddm.dead must survive what it reads, like every ddm process
    names = pipe.names
    bodies = {names.jobs: b"poison job", names.expert_queue(0): b"poison request"}
    with amqp_channel() as ch:
        for queue, body in bodies.items():
            ch.basic_publish("", queue, body, timestamp_header(2**63, reply_to=b"amq.gen-nobody"))
        letters = dead_letters(ch, names.dead_letter_queue, want=2)
    assert sorted(body for _, body in letters) == sorted(bodies.values()), "each dead-lettered exactly once"
    for props, body in letters:
        headers = props.headers
        assert headers[SOURCE_QUEUE_HEADER] == next(q for q, b in bodies.items() if b == body)
        assert "undecodable AMQP properties: OverflowError" in headers[REASON_HEADER]
        assert headers[RAW_PROPERTIES_HEADER], "the properties kept as bytes, not as the table that broke"
    spec = JobSpec.new([1, 7], steps=6, strategy="oracle", seed=3)
    got = pipe.client().generate([1, 7], steps=6, strategy="oracle", seed=3, timeout=60)
    assert np.abs(got - local_reference(label_split_deployment, spec)).max() <= 1e-4
    logs = "".join(p.read_text() for p in pipe.log_dir.glob("*.log"))
    assert "lost the broker" not in logs, "no worker lost its connection over a message"


def test_every_hostile_property_category_is_refused_with_the_worker_still_serving(pipe):
    """Each category of ops/fuzz/properties.py, sent to the jobs queue and to an expert queue."""
    install()
    names = pipe.names
    cases = list(hostile_properties(random.Random(1), reply_to=b"amq.gen-nobody"))
    with amqp_channel() as ch:
        for i, (_, props) in enumerate(cases):
            ch.basic_publish("", names.jobs, f"job {i}".encode(), props)
            ch.basic_publish("", names.expert_queue(1), f"request {i}".encode(), props)
        letters = dead_letters(ch, names.dead_letter_queue, want=2 * len(cases))
    assert len(letters) == 2 * len(cases), [label for label, _ in cases]
    assert all("undecodable AMQP properties" in p.headers[REASON_HEADER] for p, _ in letters)
    got = pipe.client().generate([6], steps=4, strategy="oracle", seed=0, timeout=60)
    assert got.shape[0] == 1
