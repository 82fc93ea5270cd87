"""Client.submit's broker side, on the real RabbitMQ and Redis: a connection the broker dropped while the
client sat idle is reopened and the call run again (a BlockingConnection answers no heartbeats while
idle; the broker resets it after a few minutes), failures are ddm errors, never pika's; and a job that
a worker nobody runs would serve (an expert, a latent deployment's decoder) is refused at submit.

The broker's reset is made at once, on this test's own connection only (found by its name; other tests
share the broker): `rabbitmqctl close_connection` (CONNECTION_FORCED), or the broker's end of the socket
destroyed with `ss -K` (the reset an idle client meets: pika's StreamLostError)."""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import subprocess
from collections.abc import Callable

import pika.exceptions
import pytest

from ddm.client import Client, DecoderUnavailableError, ExpertUnavailableError
from ddm.client.aio import AsyncClient
from ddm.client.broker import BrokerLink, client_connection_name
from ddm.router.store import JobStore
from ddm.runtime.amqp import declare_topology
from ddm.schema.autoencoder_card import DecoderInfo, LatentPreview
from ddm.schema.errors import DDMError, ServiceUnavailableError
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.sample_space import SampleSpace
from tests.support.descriptors import demo_descriptor
from tests.support.services import amqp_channel, drain, free_port, rabbitmqctl

# demo_descriptor's samples are 1x32x32: a decoder that reads their one channel and makes RGB pixels
DECODER = DecoderInfo(
    "ae-0123456789ab",
    SampleSpace((3, 32, 32), (-1.0, 1.0)),
    LatentPreview(((1.0,), (1.0,), (1.0,)), (0.0, 0.0, 0.0)),
)


@pytest.fixture
def client(settings):
    c = Client(settings=settings)
    yield c
    c.close()


@pytest.fixture
def workers(client) -> Callable[..., None]:
    """workers(*queues): a consumer on each queue until the test ends, which is all a worker is to
    Client.submit's check."""
    with amqp_channel() as ch:
        declare_topology(ch, client.names, range(2), jobs=False, decoder=True)

        def consume(*queues: str) -> None:
            for queue in queues:
                ch.basic_consume(queue, lambda *delivery: None)

        yield consume


def serve(client: Client, **changes) -> None:
    """Publish demo_descriptor (with `changes`) as a router would: experts 0 and 1, no decoder."""
    JobStore(client.redis, client.names, 600).publish_descriptor(demo_descriptor(**changes), 60)


def queued_ids(client: Client) -> list[str]:
    """The job ids of every message now in the client's jobs queue (taken off it)."""
    return [props.message_id for props, _ in drain(client.names.jobs)]


def broker_pids(client: Client) -> dict[str, str]:
    """pid -> peer port of every connection the broker lists under the client's name."""
    name = client_connection_name(client.names.prefix)
    listed = rabbitmqctl("list_connections", "pid", "peer_port", "client_properties")
    if listed.returncode != 0:
        pytest.skip(f"rabbitmqctl cannot list connections: {listed.stderr.strip()[:200]}")
    rows = [line.split("\t") for line in listed.stdout.splitlines() if f'"{name}"' in line]
    return {row[0]: row[1] for row in rows}


def drop_connection(client: Client, how: str) -> str:
    """End the client's connection from the broker's side, as an idle timeout does (the close frame or
    the reset is on its way when this returns); its pid."""
    listed = broker_pids(client)
    assert len(listed) == 1, f"expected the client's one connection, got {listed}"
    ((pid, port),) = listed.items()
    if how == "close":
        assert rabbitmqctl("close_connection", pid, "idle test").returncode == 0
    else:  # destroy the broker's end of the socket: the client reads a reset
        if shutil.which("ss") is None:
            pytest.skip("ss is not installed here")
        killed = subprocess.run(["ss", "-K", "dst", "127.0.0.1", "dport", "=", port], capture_output=True)
        if killed.returncode != 0:
            pytest.skip(f"ss -K cannot destroy sockets here: {killed.stderr.decode()[:200]}")
    return pid


# ---------------------------------------------------------------- a connection dropped while idle


@pytest.mark.parametrize("how", ["close", "reset"])
def test_a_client_idle_past_the_brokers_reset_submits_on_its_first_call(client, workers, how):
    serve(client)
    workers(client.names.expert_queue(0), client.names.expert_queue(1))
    first = client.submit(JobSpec.new([1], steps=3))
    dropped = drop_connection(client, how)
    # checks both expert queues (the call that raised pika's error before), then publishes
    second = client.submit(JobSpec.new([1, 7], steps=3, strategy="full"))
    assert client.status(second).status is JobStatus.QUEUED
    assert queued_ids(client) == [first, second]  # each job once
    assert set(broker_pids(client)) - {dropped}, "a new connection under the client's name"


def test_an_async_client_idle_past_the_reset_submits_on_its_first_call(client, workers):
    serve(client)
    workers(client.names.expert_queue(0), client.names.expert_queue(1))

    async def submit_twice() -> list[str]:
        c = AsyncClient(client=client)
        ids = [await c.submit(JobSpec.new([2], steps=3))]
        await asyncio.to_thread(drop_connection, client, "reset")
        ids.append(await c.submit(JobSpec.new([8], steps=3)))
        await c.close()
        return ids

    submitted = asyncio.run(submit_twice())
    assert queued_ids(client) == submitted


def test_a_reopen_that_fails_is_a_ddm_error_and_leaves_no_job(client, workers):
    serve(client)
    workers(client.names.expert_queue(0), client.names.expert_queue(1))
    client.submit(JobSpec.new([1], steps=3))
    gone = f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F"
    client.settings = dataclasses.replace(client.settings, amqp_url=gone)  # the broker moved away
    drop_connection(client, "close")
    spec = JobSpec.new([1], steps=3)
    with pytest.raises(ServiceUnavailableError, match="no RabbitMQ answered at") as refused:
        client.submit(spec)
    assert not isinstance(refused.value, pika.exceptions.AMQPError)
    assert not client.redis.exists(client.names.job(spec.job_id))


class _FakeConnection:
    is_open = True

    def process_data_events(self, time_limit=None) -> None:
        pass

    def close(self) -> None:
        self.is_open = False


class _FakeChannel:
    is_open = True

    def __init__(self):
        self.connection = _FakeConnection()


def _fake_link(opened: list) -> BrokerLink:
    """A BrokerLink on fake channels; each one it opens goes in `opened`."""

    def open_channel():
        opened.append(_FakeChannel())
        return opened[-1]

    return BrokerLink(open_channel)


def _raising(error: Exception):
    def operation(channel):
        raise error

    return operation


def test_an_operation_that_fails_again_after_a_reopen_is_a_service_error():
    opened: list[_FakeChannel] = []
    lost = _raising(pika.exceptions.StreamLostError("Transport indicated EOF"))
    with pytest.raises(ServiceUnavailableError, match="could not publish job j1 on ddm.jobs: .*StreamLost"):
        _fake_link(opened).run("publish job j1 on ddm.jobs", lost)
    assert len(opened) == 2 and not any(ch.connection.is_open for ch in opened)


def test_any_other_broker_error_is_a_ddm_error_at_once():
    opened: list[_FakeChannel] = []
    odd = _raising(pika.exceptions.UnexpectedFrameError("a frame"))
    with pytest.raises(DDMError, match="could not count the consumers of q: the broker answered"):
        _fake_link(opened).run("count the consumers of q", odd)
    assert len(opened) == 1 and not opened[0].connection.is_open  # not retried; the next call starts clean


# ---------------------------------------------------------------- workers nobody runs


def test_a_latent_job_without_a_decoder_worker_is_refused_at_submit(client, workers):
    serve(client, decoder=DECODER)
    workers(client.names.expert_queue(0), client.names.expert_queue(1))
    spec = JobSpec.new([1], steps=3)
    with pytest.raises(DecoderUnavailableError) as refused:
        client.submit(spec)
    said = str(refused.value)
    assert client.names.decoder_queue in said and "`ddm worker decoder" in said and "--queue-anyway" in said
    assert not client.redis.exists(client.names.job(spec.job_id)) and queued_ids(client) == []

    anyway = client.submit(JobSpec.new([1], steps=3), queue_anyway=True)
    workers(client.names.decoder_queue)
    served = client.submit(JobSpec.new([1], steps=3))
    assert queued_ids(client) == [anyway, served]


def test_a_job_missing_an_expert_and_the_decoder_is_told_both(client, workers):
    serve(client, decoder=DECODER)
    workers(client.names.expert_queue(0))
    with pytest.raises(ExpertUnavailableError) as refused:
        client.submit(JobSpec.new([7], steps=3))  # the oracle sends label 7 to expert 1
    said = str(refused.value)
    assert "[1]" in said and client.names.expert_queue(1) in said
    assert client.names.decoder_queue in said and "--queue-anyway" in said


def test_ddm_submit_says_why_a_latent_job_is_refused(client, workers, monkeypatch, capsys):
    from ddm.ops.cli import main

    monkeypatch.setenv("DDM_PREFIX", client.names.prefix)
    monkeypatch.setenv("DDM_AMQP_URL", client.settings.amqp_url)
    monkeypatch.setenv("DDM_REDIS_URL", client.settings.redis_url)
    serve(client, decoder=DECODER)
    workers(client.names.expert_queue(0), client.names.expert_queue(1))
    assert main(["submit", "--label", "3", "--steps", "3"]) == 1  # a service down, as for an expert
    err = capsys.readouterr().err
    assert err.startswith("ddm submit: error: job ")
    assert f"no worker serves {client.names.decoder_queue}" in err
    assert "`ddm worker decoder --deployment D`" in err and "--queue-anyway" in err
    assert queued_ids(client) == []
    assert main(["submit", "--label", "3", "--steps", "3", "--queue-anyway"]) == 0
    assert queued_ids(client) == [capsys.readouterr().out.strip()]
