"""`ddm worker text-encoder` serving CLIP (issue 38): a text deployment whose [text_encoder] table names a
CLIP text_encoder/ and tokenizer/ folder (ops/random_clip.py, outside the deployment's folder
as the Paris importer writes it) is served on the real broker, and the embeddings it replies equal the
in-process encoder's (what `ddm sample --local` reads), bit for bit; a worker whose deployment names
other CLIP weights refuses to start, naming both digests."""

from __future__ import annotations

import dataclasses
import subprocess

import numpy as np
import pytest

from ddm.ops.random_clip import write_clip_fixture
from ddm.schema.conditioning import Conditioning
from ddm.schema.deployment import Deployment
from ddm.schema.text_messages import EncodeRequest, embedding_key
from tests.support.harness import DDM_CLI, Pipeline, service_env
from tests.support.services import amqp_channel
from tests.support.text import TEXT_SPACE, ask_encoder, encoder_reply

pytest.importorskip("transformers")

PROMPTS = ("a photo of a cat", "", " ".join(["word"] * 200))


def _write(root, folders, spec=None):
    """root/deployment.toml conditioned on the CLIP `folders` (text_encoder/, tokenizer/) or on `spec`."""
    from ddm.workers.clip_text_encoder import clip_text_spec
    from tests.support.fakes import write_deployment

    text_dir, tokenizer_dir = folders
    root.mkdir(parents=True, exist_ok=True)
    return write_deployment(
        root,
        ["e0"],  # a text-encoder worker reads no expert: the folder need not exist
        sample_space=TEXT_SPACE,
        conditioning=Conditioning("text", spec or clip_text_spec(text_dir, tokenizer_dir)),
        text_encoder={"checkpoint": str(text_dir), "tokenizer": str(tokenizer_dir)},
    )


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    paris = tmp_path_factory.mktemp("paris")
    return write_clip_fixture(paris / "text_encoder", paris / "tokenizer")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, folders):
    return _write(tmp_path_factory.mktemp("out"), folders)


def test_the_worker_serves_clip_equal_to_the_in_process_encoder(deployment, tmp_path):
    from ddm.workers.text_rows import local_lookup

    d = Deployment.load(deployment)
    spec = d.conditioning.text
    with Pipeline(deployment, tmp_path) as pipe:
        pipe.start_text_encoder("text")
        pipe.wait_ready("text")
        with amqp_channel() as ch:
            request = EncodeRequest("job-1", "job-1.encode", PROMPTS)
            reply = encoder_reply(ch, ask_encoder(ch, pipe.names.text_queue, request))
        assert pipe.heartbeat("text")["device"] == "cpu"
    lookup, truncated = local_lookup(spec, PROMPTS, source=d.text_encoder)  # as `ddm sample --local`
    want = np.stack(lookup([embedding_key(spec, p) for p in PROMPTS]))
    assert reply.digest == spec.digest and reply.truncated == tuple(truncated) == (False, False, True)
    assert reply.embeddings.shape == (3, 77, 32) and np.array_equal(reply.embeddings, want)


def test_a_worker_pointed_at_other_clip_weights_refuses_to_start_naming_both(folders, tmp_path):
    from ddm.workers.clip_text_encoder import clip_text_spec

    real = clip_text_spec(*folders)
    other = _write(tmp_path, folders, dataclasses.replace(real, digest="0" * 64))
    argv = [*DDM_CLI, "worker", "text-encoder", "--deployment", str(other), "--worker-id", "t"]
    done = subprocess.run(argv, env=service_env("ddm-t-"), capture_output=True, text=True, timeout=180)
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert "0" * 64 in said and real.digest in said, said[-2000:]
