"""The client's side of issue 40 item 3, against the real Redis and RabbitMQ: Client.submit refuses a
label equal to the class count (a class past the last) naming the range, before anything is queued;
None is an unconditional image, queued as null; a job hash an older client stored with K still reads."""

from __future__ import annotations

import pytest

from ddm.client import Client
from ddm.router.store import JobStore
from ddm.runtime.amqp import declare_topology
from ddm.schema.descriptor import labels_summary
from ddm.schema.errors import SchemaError
from ddm.schema.messages import JobSpec
from tests.support.fakes import descriptor_of, write_fake_deployment
from tests.support.services import amqp_channel, drain


@pytest.fixture
def client(prefix, amqp_url, redis_url):
    c = Client(amqp_url, redis_url, prefix)
    yield c
    c.close()


def queued(client: Client) -> list:
    with amqp_channel() as ch:
        declare_topology(ch, client.names)
    return drain(client.names.jobs)


def test_submit_refuses_k_and_queues_null(client, tmp_path):
    path = write_fake_deployment(tmp_path / "d")
    descriptor = descriptor_of(path, "r-1", router_kind="learned")  # a router that reads x_t
    JobStore(client.redis, client.names, 600).publish_descriptor(descriptor, 60)
    k = JobSpec.new([3, 10], strategy="full")
    with pytest.raises(SchemaError, match=r"labels in 0..9, or null \(an unconditional image\).*\[10\]"):
        client.submit(k, queue_anyway=True)
    assert not client.redis.exists(client.names.job(k.job_id)) and queued(client) == []

    ok = JobSpec.new([3, None], strategy="full")
    client.submit(ok, queue_anyway=True)
    [(_, body)] = queued(client)
    assert JobSpec.decode(body).labels == (3, None)
    assert client.status(ok.job_id).labels == (3, None)


def test_a_job_hash_stored_with_k_by_an_older_client_still_reads(client):
    old = JobSpec("0123456789abcdef", (3, 10), steps=2, strategy="full")  # K: the null label before null
    fields = {"status": "queued", "spec": old.to_json(), "step": "0", "steps": "2", "n": "2"}
    client.redis.hset(client.names.job(old.job_id), mapping=fields)
    status = client.status(old.job_id)
    assert status.labels == (3, 10) and labels_summary(status.labels) == "3,unconditional"
