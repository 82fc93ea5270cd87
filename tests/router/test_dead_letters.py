"""A real router dead-letters a job message it cannot decode exactly as PROTOCOL.md section 5 says: the body
unchanged, the original properties, delivery_mode 2, and the reason / queue / worker headers added to the
original headers; the original is settled (not requeued, not left unacked)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import msgpack
import pika
import pytest

from ddm.schema.topology import CONTENT_TYPE, REASON_HEADER, SOURCE_QUEUE_HEADER, WORKER_HEADER
from tests.support.fakes import write_fake_deployment
from tests.support.harness import Pipeline
from tests.support.services import amqp_channel

DOC = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"
ROUTER = "router-dl"

# the properties a dead letter copies from the original (PROTOCOL.md section 5 names each of them)
COPIED = ("content_type", "content_encoding", "correlation_id", "reply_to", "message_id", "timestamp")
COPIED += ("type", "app_id")

POISON = {
    "not msgpack": b"\xc1 not msgpack",
    "a JobSpec with steps 5000": msgpack.packb(
        {"type": "job_spec", "version": 1, "job_id": "dl-1", "labels": [1], "steps": 5000}
        | {"strategy": None, "guidance": None, "seed": 0}
    ),
    # decodes (labels up to MAX_CLASSES), but not in this deployment's sample space (10 classes)
    "a JobSpec with label 11": msgpack.packb(
        {"type": "job_spec", "version": 1, "job_id": "dl-2", "labels": [11], "steps": 2}
        | {"strategy": None, "guidance": None, "seed": 0}
    ),
}


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    """One router on a fresh prefix (fake checkpoints: it never needs an expert here)."""
    root = tmp_path_factory.mktemp("dead_letters")
    with Pipeline(write_fake_deployment(root / "dep"), root) as pipe:
        pipe.start_router(ROUTER)
        pipe.wait_ready(ROUTER)
        yield pipe


def dead_letter_of(channel, queue: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while (got := channel.basic_get(queue, auto_ack=True))[0] is None:
        assert time.monotonic() < deadline, "no dead letter arrived"
        time.sleep(0.05)
    return got[1], got[2]


def properties(label: str) -> pika.BasicProperties:
    return pika.BasicProperties(
        content_type=CONTENT_TYPE,
        content_encoding="identity",
        correlation_id=f"corr-{label}",
        reply_to="amq.gen-nobody",
        message_id=f"msg-{label}",
        timestamp=1_732_300_000,
        type="job_spec",
        app_id="dead-letter-test",
        delivery_mode=pika.DeliveryMode.Persistent,
        headers={"x-trace": f"trace-{label}", "x-count": 3},
    )


@pytest.mark.parametrize("label", list(POISON))
def test_router_dead_letters_keep_body_and_properties(router, label):
    names = router.names
    sent = properties(re.sub(r"\W", "-", label))
    with amqp_channel() as ch:
        ch.basic_publish("", names.jobs, POISON[label], sent)
        got, body = dead_letter_of(ch, names.dead_letter_queue)
        jobs = ch.queue_declare(names.jobs, passive=True).method
    assert body == POISON[label]
    assert {p: getattr(got, p) for p in COPIED} == {p: getattr(sent, p) for p in COPIED}
    assert got.delivery_mode == 2
    headers = dict(got.headers)
    reason = headers.pop(REASON_HEADER)
    assert reason.startswith("undecodable job: expected "), reason
    if "label 11" in label:
        assert "labels in 0..9, or null (an unconditional image), got [11]" in reason, reason
    assert headers == {
        **sent.headers,
        SOURCE_QUEUE_HEADER: names.jobs,
        WORKER_HEADER: ROUTER,
    }
    # settled: neither requeued nor held unacked by the router (which stays up)
    assert jobs.message_count == 0
    assert router.procs[ROUTER].poll() is None
    assert router.counter(ROUTER, "jobs_failed", 0) == 0


def test_protocol_doc_names_what_is_copied():
    section5 = DOC.read_text().split("## 5. Errors and dead letters", 1)[1].split("\n## 6.", 1)[0]
    assert [p for p in COPIED if f"`{p}`" not in section5] == []
    for header in (REASON_HEADER, SOURCE_QUEUE_HEADER, WORKER_HEADER):
        assert f"`{header}`" in section5
    assert "confirm-mode channel" in section5 and "router" in section5
