"""A latent deployment through the real pipeline (issue 29, part 3): the router asks the decoder stage
for a finished job's pixels; the result keeps the latents and the pixels, equal to `ddm sample`'s
in-process decoding; a decoder killed holding the request loses nothing; latents of the wrong shape are
dead-lettered with the reason."""

from __future__ import annotations

import signal
import time

import numpy as np
import pika
import pytest

from ddm.ops.fuzz.messages import filled_message
from ddm.ops.fuzz.run import run_fuzz
from ddm.router.deployment_loader import load_decoder
from ddm.schema.decode_messages import DecodeRequest
from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.topology import CONTENT_TYPE, REASON_HEADER
from tests.support.harness import Pipeline, local_reference
from tests.support.latent import write_latent_deployment
from tests.support.metrics import scrape, value
from tests.support.services import amqp_channel, free_port


@pytest.fixture(scope="module")
def latent_deployment(tmp_path_factory):
    return write_latent_deployment(tmp_path_factory.mktemp("latent"))


def reference(deployment, spec: JobSpec) -> tuple[np.ndarray, np.ndarray]:
    """(latents, pixels) of `ddm sample --local`."""
    z = local_reference(deployment, spec)
    return z, load_decoder(Deployment.load(deployment)).decode(z)


@pytest.fixture(scope="module")
def metrics_ports() -> dict[str, int]:
    """Where the serving fixture's decoder and router serve /metrics."""
    return {"decoder": free_port(), "router": free_port()}


@pytest.fixture(scope="module")
def serving(latent_deployment, metrics_ports, tmp_path_factory):
    """Two experts, a decoder and a router; the router and the decoder serve /metrics on metrics_ports."""
    with Pipeline(latent_deployment, tmp_path_factory.mktemp("logs")) as pipe:
        pipe.start_decoder(env={"DDM_METRICS_PORT": str(metrics_ports["decoder"])})
        pipe.start_expert(0, "e0")
        pipe.start_expert(1, "e1")
        pipe.start_router(env={"DDM_METRICS_PORT": str(metrics_ports["router"])})
        pipe.wait_ready("decoder", "e0", "e1", "router")
        yield pipe


def test_the_pipeline_decodes_like_the_local_sampler_and_keeps_both(serving, latent_deployment):
    client = serving.client()
    assert client.deployment().decoder is not None  # the descriptor publishes it (and its preview)
    spec = JobSpec.new([0, 1, 2], steps=4, strategy="full", guidance=1.0, seed=3)
    client.submit(spec)
    pixels = client.result(spec.job_id, timeout=120)
    latents = client.result(spec.job_id, timeout=1, latent=True)
    want_z, want_x = reference(latent_deployment, spec)
    assert latents.shape == (3, 4, 8, 8) and pixels.shape == (3, 3, 32, 32)
    assert np.abs(latents - want_z).max() <= 1e-4
    assert np.abs(pixels - want_x).max() <= 1e-4
    assert serving.counter("decoder", "requests", 1) >= 1


def test_the_router_exports_the_decoder_queue_depth_and_the_decoder_probes_nothing(serving, metrics_ports):
    """A passive declare is a broker round trip: a decoder far from the broker would wait it on its
    serving thread, so the router (next to the broker) exports the decoder queue's depth."""
    queue = ("ddm_queue_messages", (("queue", serving.names.decoder_queue),))
    router = scrape(metrics_ports["router"])
    assert router[queue] >= 0
    assert ("ddm_queue_messages", (("queue", serving.names.jobs),)) in router
    decoder = scrape(metrics_ports["decoder"])
    assert value(decoder, "ddm_ready") == 1
    assert not [name for name, _ in decoder if name == "ddm_queue_messages"]


def test_a_decoder_killed_holding_the_request_loses_nothing(latent_deployment, tmp_path):
    # a request timeout far above the test: only the broker's redelivery can save the request
    with Pipeline(latent_deployment, tmp_path, timeout_s=120) as pipe:
        doomed = pipe.start_decoder("doomed")
        pipe.up({"e0": 0, "e1": 1})
        pipe.wait_ready("doomed")
        doomed.send_signal(signal.SIGSTOP)  # consuming, frozen: the request will sit in it, unacked
        client = pipe.client()
        spec = JobSpec.new([1, 2], steps=3, strategy="full", guidance=1.0, seed=5)
        client.submit(spec)
        with amqp_channel() as ch:
            deadline = time.monotonic() + 60
            while client.status(spec.job_id).step < spec.steps or _ready(ch, pipe.names.decoder_queue):
                assert time.monotonic() < deadline, "the decode request never reached the frozen decoder"
                time.sleep(0.1)
        time.sleep(0.5)
        assert client.status(spec.job_id).status is JobStatus.RUNNING  # every step stored, no pixels yet
        pipe.procs.pop("doomed")
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
        pipe.start_decoder("rescuer")
        pixels = client.result(spec.job_id, timeout=60)
        assert np.abs(pixels - reference(latent_deployment, spec)[1]).max() <= 1e-4
        assert pipe.counter("rescuer", "requests", 1) == 1


def _ready(ch, queue: str) -> int:
    return ch.queue_declare(queue, passive=True).method.message_count


def test_latents_of_the_wrong_shape_are_dead_lettered_with_the_reason(serving):
    bad = DecodeRequest("job-x", "job-x.decode", np.zeros((2, 3, 8, 8), np.float32))
    with amqp_channel() as ch:
        reply = ch.queue_declare("", exclusive=True).method.queue
        props = pika.BasicProperties(reply_to=reply, content_type=CONTENT_TYPE, type=DecodeRequest.TYPE)
        ch.basic_publish("", serving.names.decoder_queue, bad.encode(), props)
        deadline = time.monotonic() + 30
        while (got := ch.basic_get(serving.names.dead_letter_queue, auto_ack=True))[0] is None:
            assert time.monotonic() < deadline, "nothing was dead-lettered"
            time.sleep(0.1)
        assert ch.basic_get(reply, auto_ack=True)[0] is None  # no reply for a refused request
    reason = got[1].headers[REASON_HEADER]
    assert "expected z shape [N, 4, 8, 8]" in reason and "got [2, 3, 8, 8]" in reason


def test_a_decode_request_of_huge_latents_is_dead_lettered_once_and_the_next_job_is_exact(
    serving, latent_deployment
):
    """Latents of 1e20, finite, decoded to non-finite pixels; the reply then raised outside the decoder's
    handler, the worker exited before acking, and each replica died of the same message in turn
    (issue 36: 16 exits in 90 s under `ddm up`). Now the request is refused for its magnitude."""
    huge = filled_message(
        DecodeRequest("job-huge", "job-huge.decode", np.zeros((2, 4, 8, 8), np.float32)), "z", 1e20
    )
    pid_before = serving.heartbeat("decoder")["pid"]
    with amqp_channel() as ch:
        reply = ch.queue_declare("", exclusive=True).method.queue
        props = pika.BasicProperties(reply_to=reply, content_type=CONTENT_TYPE, message_id="huge")
        ch.basic_publish("", serving.names.decoder_queue, huge, props)
        client = serving.client()
        spec = JobSpec.new([0, 2], steps=4, strategy="full", guidance=1.0, seed=11)
        client.submit(spec)
        pixels = client.result(spec.job_id, timeout=120)
        got = ch.basic_get(serving.names.dead_letter_queue, auto_ack=True)
        assert got[0] is not None and got[1].message_id == "huge", "dead-lettered"
        assert ch.basic_get(serving.names.dead_letter_queue, auto_ack=True)[0] is None, "once"
        assert ch.basic_get(reply, auto_ack=True)[0] is None
    assert "expected z within [-10000, 10000]" in got[1].headers[REASON_HEADER]
    assert np.abs(pixels - reference(latent_deployment, spec)[1]).max() <= 1e-4
    assert serving.heartbeat("decoder")["pid"] == pid_before, "the same decoder process served the job"
    assert int(serving.heartbeat("decoder")["reconnects"]) == 0


def test_stage_output_fuzz_is_refused_by_the_experts_and_the_decoder(serving, latent_deployment):
    """The fuzz's stage-output cases (ops/fuzz/messages.py) against every stage of a latent deployment:
    huge finite inputs, 0-d arrays and a forged direct reply-to address, each dead-lettered once with its
    reason, no reply, no worker lost or reconnected."""
    report = run_fuzz(
        serving.settings, latent_deployment, messages=24, jobs=0, seed=1, categories=("stage-outputs",)
    )
    print(report.to_dict())
    assert report.sent["stage-outputs"] == 24 and report.ok, report.to_dict()
    for name in ("decoder", "e0", "e1"):
        assert int(serving.heartbeat(name)["reconnects"]) == 0, name
