"""The OpenAI-compatible images endpoint (issue 39 part 1) with the official `openai` package as the
client, on the real stack: two PyTorch experts (label sets that overlap, mixed by the label-prior
router), the real router worker, RabbitMQ and Redis, and the web UI's production command (gunicorn's
gevent worker) with DDM_UI_TOKEN set, which the client sends as its api_key.

- images.generate returns the in-process sampler's images for the same spec and seed (the PNG holds
  uint8 pixels: equal to the pipeline's stored result drawn to uint8, and within one level of the
  local sampler's, whose floats differ by <= 1e-4); response_format "url" gives the same images;
- stream=True with partial_images: the partial events in order, then one completed event per image,
  equal to the images of the same request without streaming;
- refusals in OpenAI's error object through the package's exception classes: an unknown model (404),
  a size the deployment does not make (400), an unknown field (400), a wrong key (401), no key (401).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from ddm.ops.up.supervisor import stop_processes
from ddm.ops.up.ui import PRODUCTION_COMMAND
from ddm.schema.flow import to_uint8
from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline, local_reference, service_env
from tests.support.services import free_port, wait_healthy
from tests.support.text import TEXT_SPACE, needs_text_encoder, text_conditioning, write_text_deployment_file

openai = pytest.importorskip("openai")  # the dev extra pins it

TOKEN = "sesame-openai-39"
STEPS = 6
EXTRAS = {"seed": 5, "steps": STEPS, "strategy": "full", "guidance_scale": 1.5}


@contextlib.contextmanager
def production_ui(env: dict[str, str], logs: Path):
    """The UI's production command (gunicorn, one gevent worker) with `env`, on a free port, a token set;
    yields its URL once /healthz answers."""
    port = free_port()
    env = {**env, "DDM_UI_BIND": f"127.0.0.1:{port}", "DDM_UI_TOKEN": TOKEN, "DDM_LOG_LEVEL": "warning"}
    path = logs / f"ui-{port}.log"
    with open(path, "wb") as log:
        argv = [sys.executable, "-m", *shlex.split(PRODUCTION_COMMAND)]
        proc = subprocess.Popen(argv, env=env, cwd=logs, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            wait_healthy(url, proc, path)
            yield url
        finally:
            stop_processes([proc], grace_s=20)


@pytest.fixture(scope="module")
def stack(shared_labels_deployment, tmp_path_factory):
    """(the pipeline, the UI's URL): experts a0 and b0, a router, and the gunicorn UI with a token."""
    logs = tmp_path_factory.mktemp("openai-logs")
    with Pipeline(shared_labels_deployment, logs) as pipe:
        pipe.up({"a0": 0, "b0": 1})
        with production_ui(pipe.env, logs) as url:
            yield pipe, url


def client(url: str, key: str = TOKEN):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=120)


def model_name(stack) -> str:
    return stack[0].client().deployment().name


def decode(b64_png: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64_png))))


def test_generate_equals_the_local_sampler(stack, shared_labels_deployment):
    pipe, url = stack
    name = model_name(stack)
    assert [m.id for m in client(url).models.list()] == [name]
    t0 = time.monotonic()
    resp = client(url).images.generate(
        model=name, prompt="3", n=2, size="32x32", response_format="b64_json", extra_body=EXTRAS
    )
    print(f"images.generate: {time.monotonic() - t0:.2f} s")
    got = np.stack([decode(d.b64_json) for d in resp.data])  # uint8 [2, 32, 32] greyscale
    assert got.shape == (2, 32, 32) and got.dtype == np.uint8
    assert resp.size == "32x32" and resp.output_format == "png"

    job_id = resp.to_dict()["job_id"]
    c = pipe.client()
    spec = c.status(job_id).spec
    assert (spec.labels, spec.steps, spec.seed, spec.strategy, spec.guidance) == (
        (3, 3),
        STEPS,
        5,
        "full",
        1.5,
    )
    assert np.array_equal(got, to_uint8(c.result(job_id, timeout=30)))  # exactly the stored result
    want = local_reference(shared_labels_deployment, JobSpec.new([3, 3], **_spec_options()))
    diff = np.abs(got.astype(int) - to_uint8(want).astype(int))
    print(f"uint8 |endpoint - local|: max {diff.max()}, {int((diff > 0).sum())} of {diff.size} pixels differ")
    assert diff.max() <= 1

    # the same request for URLs: the same images (same spec, same seed), each its own PNG at its own size
    by_url = client(url).images.generate(
        model=name, prompt="3", n=2, response_format="url", extra_body=EXTRAS
    )
    for d, want_png in zip(by_url.data, got, strict=True):
        req = urllib.request.Request(d.url, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.headers["Content-Type"] == "image/png"
            assert np.array_equal(decode(base64.b64encode(r.read()).decode()), want_png)
        with pytest.raises(urllib.error.HTTPError) as no_key:
            urllib.request.urlopen(d.url, timeout=30)
        assert no_key.value.code == 401  # a result needs the key, as result.png does


def _spec_options() -> dict:
    return {"steps": STEPS, "seed": EXTRAS["seed"], "strategy": "full", "guidance": EXTRAS["guidance_scale"]}


def test_stream_sends_partial_images_then_the_completed_ones(stack):
    _, url = stack
    name = model_name(stack)
    t0 = time.monotonic()
    stream = client(url).images.generate(
        model=name, prompt="7", n=2, stream=True, partial_images=2, extra_body=EXTRAS
    )
    events = list(stream)
    print(f"stream: {len(events)} events in {time.monotonic() - t0:.2f} s")
    kinds = [e.type for e in events]
    partial, completed = "image_generation.partial_image", "image_generation.completed"
    assert kinds == [partial] * 4 + [completed] * 2  # 2 partials (steps 2 and 4) x 2 images, then 2 images
    assert [e.partial_image_index for e in events[:4]] == [0, 0, 1, 1]
    assert [e.to_dict()["image_index"] for e in events] == [0, 1, 0, 1, 0, 1]
    assert all(e.size == "32x32" and e.output_format == "png" for e in events)
    streamed = np.stack([decode(e.b64_json) for e in events[4:]])
    partials = np.stack([decode(e.b64_json) for e in events[:4]])
    assert partials.shape == (4, 32, 32) and not np.array_equal(partials[2:], streamed)  # x_t, not x_1

    plain = client(url).images.generate(model=name, prompt="7", n=2, extra_body=EXTRAS)
    assert np.array_equal(np.stack([decode(d.b64_json) for d in plain.data]), streamed)
    # the partials are the job's frames at steps 2 and 4, drawn as the page draws them (the same spec and
    # seed: the same trajectory as the plain request's job)
    frames = {f.step: f for f in stack[0].client().frames(plain.to_dict()["job_id"], follow=False)}
    want = np.concatenate([to_uint8(frames[step].x.astype(np.float32)) for step in (2, 4)])
    assert np.array_equal(partials, want)


def test_a_stream_closed_early_cancels_its_job(stack):
    pipe, url = stack
    c = pipe.client()
    stream = client(url).images.generate(
        model=model_name(stack), prompt="4", n=4, stream=True, partial_images=3, extra_body={"steps": 400}
    )
    first = next(iter(stream))
    assert first.type == "image_generation.partial_image"
    # the waiting request holds up nobody: the UI answers others meanwhile (expected: milliseconds)
    t0 = time.monotonic()
    with urllib.request.urlopen(url + "/healthz", timeout=30) as health:
        assert health.status == 200
    assert time.monotonic() - t0 < 5.0
    assert c.status(c.recent(1)[0][0]).status.value == "running"  # ... while the job runs
    stream.close()
    (job_id, job), *_ = c.recent(1)
    deadline = time.monotonic() + 120
    while not job.status.terminal and time.monotonic() < deadline:
        time.sleep(0.2)
        job = c.status(job_id)
    print(f"closed after step 100: job {job.status.value} at step {job.step}/{job.steps}")
    assert job.status.value == "cancelled" and job.step < job.steps


def test_refusals_are_openai_errors(stack):
    _, url = stack
    name = model_name(stack)
    with pytest.raises(openai.NotFoundError) as unknown:
        client(url).images.generate(model="dall-e-3", prompt="3")
    assert unknown.value.body["code"] == "model_not_found" and name in unknown.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        client(url).models.retrieve("dall-e-3")
    assert client(url).models.retrieve(name).id == name

    with pytest.raises(openai.BadRequestError) as size:
        client(url).images.generate(model=name, prompt="3", size="1024x1024")
    assert size.value.body["param"] == "size" and "'32x32'" in size.value.body["message"]
    with pytest.raises(openai.BadRequestError) as field:
        client(url).images.generate(model=name, prompt="3", extra_body={"sampler": "ddim"})
    assert field.value.body["param"] == "sampler"
    with pytest.raises(openai.BadRequestError) as label:
        client(url).images.generate(model=name, prompt="a cat")
    assert label.value.body["param"] == "prompt"
    with pytest.raises(openai.BadRequestError) as steps:
        client(url).images.generate(model=name, prompt="3", extra_body={"steps": 0})
    assert "steps" in steps.value.body["message"]
    with pytest.raises(openai.BadRequestError) as negative:
        client(url).images.generate(model=name, prompt="3", extra_body={"negative_prompt": "blurry"})
    assert negative.value.body["param"] == "negative_prompt"
    with pytest.raises(openai.BadRequestError) as priority:
        client(url).images.generate(model=name, prompt="3", extra_body={"priority": 99})
    assert "priority" in priority.value.body["message"]

    with pytest.raises(openai.AuthenticationError) as wrong:
        client(url, key="not-the-token").images.generate(model=name, prompt="3")
    assert wrong.value.body["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        client(url, key="not-the-token").models.list()
    # no key at all (the openai package always sends one): a plain request
    body = json.dumps({"model": name, "prompt": "3"}).encode()
    req = urllib.request.Request(
        url + "/v1/images/generations", data=body, headers={"Content-Type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as none:
        urllib.request.urlopen(req, timeout=30)
    assert none.value.code == 401
    error = json.loads(none.value.read())["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "invalid_api_key"


def test_no_router_and_too_many_wrong_keys(prefix, tmp_path):
    """A UI on a prefix no router serves: no models, 503 for a generation; 30 wrong keys from one
    address in a minute (DDM_UI_JOBS_PER_MINUTE), then 429 with Retry-After, the right key too."""
    with production_ui(service_env(prefix), tmp_path) as url:
        assert client(url).models.list().data == []
        with pytest.raises(openai.InternalServerError) as none:
            client(url).images.generate(prompt="3")
        assert none.value.status_code == 503 and none.value.body["code"] == "no_deployment"
        for i in range(30):
            with pytest.raises(openai.AuthenticationError):
                client(url, key=f"wrong-{i}").models.list()
        for key in ("wrong-again", TOKEN):
            with pytest.raises(openai.RateLimitError) as limited:
                client(url, key=key).images.generate(prompt="3")
            assert limited.value.body["type"] == "rate_limit_error"
            assert int(limited.value.response.headers["Retry-After"]) >= 1


@pytest.fixture(scope="module")
def text_stack(tmp_path_factory):
    """A text deployment: two random-weight PyTorch experts conditioned on prompts (3x16x16 RGB), the
    real text encoder worker, the router (label prior, full, guidance 2) and the UI."""
    needs_text_encoder()
    from ddm.ops.random_experts import make_random_expert

    root = tmp_path_factory.mktemp("openai-text")
    for k in range(2):
        make_random_expert(
            root / f"e{k}", "torch", (), sample_space=TEXT_SPACE, conditioning=text_conditioning(), seed=k
        )
    deployment = write_text_deployment_file(
        root, ["e0", "e1"], name="prompts", router="label-prior", strategy="full", guidance=2.0
    )
    with Pipeline(deployment, root) as pipe:
        pipe.start_text_encoder()
        pipe.up({"t0": 0, "t1": 1})
        pipe.wait_ready("text")
        with production_ui(pipe.env, root) as url:
            yield pipe, url, deployment


def test_a_text_prompt_equals_the_local_sampler(text_stack):
    pipe, url, deployment = text_stack
    t0 = time.monotonic()
    resp = client(url).images.generate(
        model="prompts", prompt="a red heart", n=2, size="16x16",
        extra_body={"negative_prompt": "blue", "seed": 4, "steps": STEPS},
    )  # fmt: skip
    print(f"text images.generate: {time.monotonic() - t0:.2f} s")
    got = np.stack([decode(d.b64_json) for d in resp.data])
    assert got.shape == (2, 16, 16, 3)  # RGB
    job_id = resp.to_dict()["job_id"]
    spec = pipe.client().status(job_id).spec
    assert (spec.prompt, spec.negative_prompt, spec.labels) == ("a red heart", "blue", (None, None))
    assert np.array_equal(got, to_uint8(pipe.client().result(job_id, timeout=30)))
    want = JobSpec.new([0, 0], steps=STEPS, seed=4, prompt="a red heart", negative_prompt="blue")
    diff = np.abs(got.astype(int) - to_uint8(local_reference(deployment, want)).astype(int))
    print(f"text uint8 |endpoint - local|: max {diff.max()}, {int((diff > 0).sum())} of {diff.size} differ")
    assert diff.max() <= 1
    with pytest.raises(openai.BadRequestError) as size:
        client(url).images.generate(model="prompts", prompt="a red heart", size="32x32")
    assert "'16x16'" in size.value.body["message"]


def test_the_http_client_with_a_key_equals_the_broker_client(stack, shared_labels_deployment):
    """HttpClient (ddm/client/http.py): a user with an API key and no broker or Redis of their own gets
    the stored float32 result, equal to the broker client's and within 1e-4 of the in-process sampler;
    another user's key cannot read it, a wrong key is refused, a spent quota says when to come back."""
    from ddm.client import AccessRefusedError, HttpClient, JobNotFoundError
    from ddm.webui.keys import KeyStore

    pipe, url = stack
    broker = pipe.client()
    store = KeyStore(broker.redis, broker.names)
    alice = HttpClient(url, api_key=store.create("alice", "submit", rate_per_min=2)[1])
    bob = HttpClient(url, api_key=store.create("bob", "submit")[1])
    labels = [8, 3, 3]  # any order, repeats: a whole spec, not the page's form
    x = alice.generate(labels, n=1, timeout=120, **_spec_options())
    assert x.dtype == np.float32 and x.shape == (3, 1, 32, 32)
    job_id = alice.jobs()[0]["job_id"]
    assert alice.status(job_id)["owner"] == "alice" and broker.status(job_id).spec.labels == tuple(labels)
    assert np.array_equal(x, broker.result(job_id, timeout=30))
    want = local_reference(shared_labels_deployment, JobSpec.new(labels, **_spec_options()))
    print(f"HttpClient |pipeline - local|: max {float(np.abs(x - want).max()):.2e}")
    assert np.abs(x - want).max() <= 1e-4
    with pytest.raises(JobNotFoundError):
        bob.result(job_id, timeout=5)  # another user's job reads as no job
    assert bob.jobs() == []
    with pytest.raises(AccessRefusedError) as wrong:
        HttpClient(url, api_key=alice._headers["Authorization"][7:-1]).me()
    assert wrong.value.status == 401
    alice.submit(JobSpec.new([1], steps=2))  # the second of alice's 2 a minute
    with pytest.raises(AccessRefusedError) as spent:
        alice.submit(JobSpec.new([1], steps=2))
    assert (spent.value.status, spent.value.kind) == (429, "rate_limited") and spent.value.retry_after_s >= 1
