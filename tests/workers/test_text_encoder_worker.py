"""`ddm worker text-encoder` (issue 37 part 2), the third stage on the stage base, on the real broker:
it answers a job's prompts with the real encoder's embeddings and digest; a worker killed holding a
request loses nothing (the broker gives it to the next one); an encoder of other weights refuses to
start, naming both digests; a request that breaks the rules is dead-lettered with the reason."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import time

import numpy as np
import pika
import pytest

from ddm.schema.text_messages import EncodeRequest
from ddm.schema.topology import CONTENT_TYPE
from tests.support.harness import DDM_CLI, Pipeline, service_env
from tests.support.services import amqp_channel
from tests.support.text import (
    ask_encoder,
    encoder_reply,
    needs_text_encoder,
    text_encoder,
    text_spec,
    write_text_deployment_file,
)

PROMPTS = ("a red apple", "")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    needs_text_encoder()
    from ddm.ops.random_experts import make_random_expert
    from tests.support.text import TEXT_SPACE

    root = tmp_path_factory.mktemp("text")
    make_random_expert(root / "e0", "torch", (), sample_space=TEXT_SPACE)
    return write_text_deployment_file(root, ["e0"])


def test_the_encoder_answers_with_the_real_embeddings_and_its_digest(deployment, tmp_path):
    with Pipeline(deployment, tmp_path) as pipe:
        pipe.start_text_encoder("text")
        pipe.wait_ready("text")
        with amqp_channel() as ch:
            reply = encoder_reply(
                ch, ask_encoder(ch, pipe.names.text_queue, EncodeRequest("job-1", "job-1.encode", PROMPTS))
            )
    want, truncated = text_encoder().encode(list(PROMPTS))
    assert reply.digest == text_spec().digest and reply.truncated == tuple(truncated) == (False, False)
    assert reply.embeddings.shape == (2, 384) and np.array_equal(reply.embeddings, want)


def test_an_encoder_killed_holding_a_request_loses_nothing(deployment, tmp_path):
    with Pipeline(deployment, tmp_path) as pipe:
        doomed = pipe.start_text_encoder("doomed")
        pipe.wait_ready("doomed")
        doomed.send_signal(signal.SIGSTOP)  # consuming, frozen: the request will sit in it, unacked
        with amqp_channel() as ch:
            reply_to = ask_encoder(ch, pipe.names.text_queue, EncodeRequest("job-2", "job-2.encode", PROMPTS))
            deadline = time.monotonic() + 30
            while ch.queue_declare(pipe.names.text_queue, passive=True).method.message_count:
                assert time.monotonic() < deadline, "the request never reached the frozen encoder"
                time.sleep(0.05)
            pipe.procs.pop("doomed")
            doomed.send_signal(signal.SIGKILL)
            doomed.wait(timeout=10)
            pipe.start_text_encoder("rescuer")
            reply = encoder_reply(ch, reply_to)
    assert reply.worker_id == "rescuer" and reply.request_id == "job-2.encode"
    assert np.array_equal(reply.embeddings, text_encoder().encode(list(PROMPTS))[0])


def test_an_encoder_of_other_weights_refuses_to_start_naming_both_digests(tmp_path):
    needs_text_encoder()
    from ddm.ops.random_experts import make_random_expert
    from tests.support.text import TEXT_SPACE

    make_random_expert(tmp_path / "e0", "torch", (), sample_space=TEXT_SPACE)
    other = dataclasses.replace(text_spec(), digest="0" * 64)
    path = write_text_deployment_file(tmp_path, ["e0"], spec=other)
    argv = [*DDM_CLI, "worker", "text-encoder", "--deployment", str(path), "--worker-id", "t"]
    done = subprocess.run(argv, env=service_env("ddm-t-"), capture_output=True, text=True, timeout=120)
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "0" * 12 in said and text_spec().digest[:12] in said, said[-2000:]


def test_a_prompt_with_control_characters_is_dead_lettered_with_the_reason(deployment, tmp_path):
    with Pipeline(deployment, tmp_path) as pipe:
        pipe.start_text_encoder("text")
        pipe.wait_ready("text")
        bad = EncodeRequest("job-3", "job-3.encode", ("ok",)).encode().replace(b"ok", b"o\x07")
        with amqp_channel() as ch:
            props = pika.BasicProperties(
                reply_to="nowhere", content_type=CONTENT_TYPE, type=EncodeRequest.TYPE
            )
            ch.basic_publish("", pipe.names.text_queue, bad, props)
            deadline = time.monotonic() + 30
            while (got := ch.basic_get(pipe.names.dead_letter_queue, auto_ack=True))[0] is None:
                assert time.monotonic() < deadline, "nothing was dead-lettered"
                time.sleep(0.05)
        assert "control character" in str(got[1].headers)
