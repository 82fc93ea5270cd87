"""Prompts through the pipeline (issue 37 parts 2 and 3): a text job's prompts are encoded once by
`ddm worker text-encoder`, the embeddings stored in Redis and read by key by the experts (one torch, one
JAX); the image equals the in-process sampler's within 1e-4, with classifier-free guidance against the
empty prompt and against a negative prompt. A kill -9 of the text encoder (holding the request), of an
expert and of the router mid-job changes nothing. Each row of a text request carries 32 bytes of keys,
not an embedding."""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager

import numpy as np
import pytest

from ddm.schema.conditioning import Conditioning
from ddm.schema.messages import JobSpec, JobStatus, VelocityRequest
from tests.support.harness import Pipeline, local_reference, local_references
from tests.support.services import amqp_channel
from tests.support.text import TEXT_SPACE, needs_text_encoder, text_spec, write_text_deployment_file


@pytest.fixture(scope="module")
def text_deployment(tmp_path_factory):
    """Two random-weight text experts (pooled), torch and JAX, mixed by their data share."""
    root = _two_text_experts(tmp_path_factory.mktemp("text"))
    return write_text_deployment_file(root, ["e0", "e1"], router="label-prior", strategy="full", guidance=2.0)


@pytest.fixture(scope="module")
def prompt_router_deployment(tmp_path_factory):
    """The same two experts behind a prompt-aware learned router (top1), trained for a few steps to send
    "a red apple" to expert 0 and "a blue heart" to expert 1 whatever x_t is."""
    from ddm.router.router_net import RouterConfig
    from ddm.router.train_router import train_router
    from ddm.workers.text_conditions import encode_prompts
    from ddm.workers.training import FitOptions
    from tests.support.text import text_encoder

    root = _two_text_experts(tmp_path_factory.mktemp("prompt-router"))
    n = 32
    clusters = np.arange(n) % 2
    table = encode_prompts([[PROMPTS[k]] for k in clusters], text_encoder())
    images = np.random.default_rng(0).uniform(-1, 1, (n, *TEXT_SPACE.shape)).astype(np.float32)
    cfg = RouterConfig.for_space(2, TEXT_SPACE, channels=4, text_width=table.width)
    meta = {"partition": {}, "conditioning": Conditioning("text", text_spec()).to_dict()}
    train_router(
        images,
        np.zeros(n, np.int64),
        clusters,
        cfg,
        root / "router",
        meta,
        fit=FitOptions(steps=40, batch=16, progress=False),
        text=table,
    )
    return write_text_deployment_file(root, ["e0", "e1"], router="learned", strategy="top1", guidance=2.0)


def _two_text_experts(root):
    """root/e0 (torch) and root/e1 (JAX): random-weight pooled text experts of TEXT_SPACE."""
    needs_text_encoder()
    from ddm.ops.random_experts import make_random_expert

    conditioning = Conditioning("text", text_spec())
    for k, framework in enumerate(("torch", "jax")):
        make_random_expert(
            root / f"e{k}", framework, (), sample_space=TEXT_SPACE, conditioning=conditioning, seed=k
        )
    return root


@contextmanager
def text_pipeline(deployment, log_dir, **options):
    """A Pipeline (options: its own) with both experts, a router and the text encoder "text", all ready."""
    with Pipeline(deployment, log_dir, **options) as pipe:
        pipe.start_text_encoder("text")
        pipe.up({"e0": 0, "e1": 1})
        pipe.wait_ready("text")
        yield pipe


PROMPTS = ("a red apple", "a blue heart")
SPECS = [
    JobSpec.new([None, None], steps=6, seed=1, prompt="a red apple"),  # guided against the empty prompt
    JobSpec.new([None, None], steps=6, seed=2, prompt="a blue heart", negative_prompt="red", guidance=3.0),
]


def test_text_jobs_equal_the_in_process_sampler_with_guidance_and_negative_prompts(text_deployment, tmp_path):
    references = local_references(text_deployment, SPECS)  # the experts loaded (and compiled) once
    with text_pipeline(text_deployment, tmp_path) as pipe:
        client = pipe.client()
        for spec in SPECS:
            client.submit(spec)
        for spec, reference in zip(SPECS, references, strict=True):
            x = client.result(spec.job_id, timeout=120)
            assert np.abs(x - reference).max() <= 1e-4
        assert pipe.counter("text", "requests", 2) == 2  # once per job, not per step
        # Client.generate(prompt=...): no labels to give, the deployment's null label on every image
        x = client.generate(prompt="a red apple", n=2, steps=6, seed=1, timeout=120)
        assert np.abs(x - references[0]).max() <= 1e-4
        stored = pipe.redis.keys(f"{pipe.prefix}ddm:text:*")
        assert len(stored) == 4  # two prompts, the empty prompt and "red" (the third job's are stored)


def test_a_prompt_aware_router_routes_each_prompt_to_its_expert_in_the_pipeline(
    prompt_router_deployment, tmp_path
):
    """The router worker reads each job's prompt embedding (stored once by the encoder stage), and the
    image equals the in-process sampler's, which reads the same embedding; the two prompts go to two
    different experts from the first step, where x_t is noise and says nothing."""
    from ddm.router.deployment_loader import load_policy
    from ddm.schema.deployment import Deployment
    from tests.support.text import text_encoder

    policy = load_policy(Deployment.load(prompt_router_deployment))
    embeddings, _ = text_encoder().encode(list(PROMPTS))
    noise = np.random.default_rng(3).standard_normal((2, *TEXT_SPACE.shape)).astype(np.float32)
    assert policy.reads_prompts
    assert policy.route_probs(noise, np.zeros(2, np.float32), embeddings).argmax(1).tolist() == [0, 1]
    specs = [JobSpec.new([None, None], steps=4, seed=5, prompt=p) for p in PROMPTS]
    references = local_references(prompt_router_deployment, specs)
    with text_pipeline(prompt_router_deployment, tmp_path) as pipe:
        client = pipe.client()
        for spec in specs:
            client.submit(spec)
        for spec, expert, reference in zip(specs, (0, 1), references, strict=True):
            x = client.result(spec.job_id, timeout=120)
            assert np.abs(x - reference).max() <= 1e-4
            assert {f.experts for f in client.frames(spec.job_id, follow=False)} == {(expert,)}


def test_a_text_requests_rows_carry_keys_not_embeddings(text_deployment):
    """Bytes per request row, text against the same request without keys: 32 bytes more a row."""
    x = np.zeros((4, *TEXT_SPACE.shape), np.float32)
    t, y, g = np.zeros(4, np.float32), np.zeros(4, np.int64), np.ones(4, np.float32)
    plain = len(VelocityRequest("r", x, t, y, g).encode())
    keyed = len(VelocityRequest("r", x, t, y, g, np.zeros((4, 2, 16), np.uint8)).encode())
    assert 32 * 4 <= keyed - plain <= 32 * 4 + 64  # the keys, and the field's name and array header


def kill_spec() -> JobSpec:
    """The job each kill test runs (a fresh id each time; the image depends on the fields only)."""
    return JobSpec.new([None, None], steps=12, seed=7, prompt="a green frog", guidance=2.0)


@pytest.fixture(scope="module")
def kill_reference(text_deployment):
    return local_reference(text_deployment, kill_spec())


@pytest.fixture(scope="module")
def kill_pipeline(text_deployment, tmp_path_factory):
    """One pipeline for the three kill tests: each kills one worker mid-job and starts its replacement
    under a new name, so the next test finds every stage served again (one start-up, not three)."""
    with text_pipeline(text_deployment, tmp_path_factory.mktemp("kill"), timeout_s=3.0) as pipe:
        yield pipe


@pytest.mark.parametrize("victim", ["text", "e1", "router"])
def test_a_kill_9_mid_job_changes_nothing(kill_pipeline, kill_reference, victim):
    pipe, spec = kill_pipeline, kill_spec()
    client = pipe.client()
    if victim == "text":  # frozen holding the request, then killed: the broker gives it to the next
        with amqp_channel() as ch:
            _until(lambda: _queue(ch, pipe.names.text_queue).consumer_count, "the encoder never consumed")
            pipe.procs["text"].send_signal(signal.SIGSTOP)
            client.submit(spec)
            _until(lambda: client.status(spec.job_id).status is JobStatus.RUNNING, "the job never started")
            time.sleep(1.0)  # the router asked (no step runs without the embeddings)
            _until(lambda: not _queue(ch, pipe.names.text_queue).message_count, "the request was not taken")
        assert client.status(spec.job_id).step == 0
        pipe.kill9("text")
        pipe.start_text_encoder("rescuer")
    else:
        client.submit(spec)
        _until(lambda: client.status(spec.job_id).step >= 3, "the job never got going")
        pipe.kill9(victim)
        if victim == "router":
            pipe.start_router("router2")
        else:
            pipe.start_expert(1, "e1b")
    x = client.result(spec.job_id, timeout=180)
    assert client.status(spec.job_id).status is JobStatus.DONE
    assert np.abs(x - kill_reference).max() <= 1e-4


def _queue(ch, queue: str):
    return ch.queue_declare(queue, passive=True).method


def _until(condition, failure: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, failure
        time.sleep(0.05)


@pytest.mark.serial  # a Redis outage timed against the router's retries
def test_a_redis_outage_while_the_encoder_answers_loses_nothing(text_deployment, private_redis, tmp_path):
    """The encoder answers while Redis is away: the router cannot store the embeddings, holds the job
    (it used to forget it: neither running nor held, its message unacked for good) and, once Redis is
    back, encodes again and runs it; the image is exact."""
    url, start, procs = private_redis
    spec = JobSpec.new([None, None], steps=6, seed=3, prompt="a yellow star", guidance=2.0)
    with text_pipeline(text_deployment, tmp_path, env={"DDM_REDIS_URL": url}) as pipe:
        client = pipe.client()
        with amqp_channel() as ch:
            _until(lambda: _queue(ch, pipe.names.text_queue).consumer_count, "the encoder never consumed")
            pipe.procs["text"].send_signal(signal.SIGSTOP)
            client.submit(spec)
            _until(lambda: client.status(spec.job_id).status is JobStatus.RUNNING, "the job never started")
            _until(lambda: not _queue(ch, pipe.names.text_queue).message_count, "the request was not taken")
        procs[-1].kill()  # kill -9 Redis; its append-only file keeps the job
        procs[-1].wait()
        pipe.procs["text"].send_signal(signal.SIGCONT)  # it answers now, into the outage
        time.sleep(3.0)
        start()
        x = client.result(spec.job_id, timeout=180)
    assert np.abs(x - local_reference(text_deployment, spec)).max() <= 1e-4
