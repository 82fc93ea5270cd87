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
import io
import json
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from ddm.ops.up.supervisor import stop_processes
from ddm.ops.up.ui import PRODUCTION_COMMAND
from ddm.schema.flow import to_uint8
from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline, local_reference
from tests.support.services import free_port, wait_healthy

openai = pytest.importorskip("openai")  # the dev extra pins it

TOKEN = "sesame-openai-39"
STEPS = 6
EXTRAS = {"seed": 5, "steps": STEPS, "strategy": "full", "guidance_scale": 1.5}


@pytest.fixture(scope="module")
def stack(shared_labels_deployment, tmp_path_factory):
    """(the pipeline, the UI's URL): experts a0 and b0, a router, and the gunicorn UI with a token."""
    logs = tmp_path_factory.mktemp("openai-logs")
    with Pipeline(shared_labels_deployment, logs) as pipe:
        pipe.up({"a0": 0, "b0": 1})
        port = free_port()
        env = {
            **pipe.env,
            "DDM_UI_BIND": f"127.0.0.1:{port}",
            "DDM_UI_TOKEN": TOKEN,
            "DDM_LOG_LEVEL": "warning",
        }
        path = logs / "ui.log"
        with open(path, "wb") as log:
            argv = [sys.executable, "-m", *shlex.split(PRODUCTION_COMMAND)]
            proc = subprocess.Popen(argv, env=env, cwd=logs, stdout=log, stderr=subprocess.STDOUT)
            try:
                url = f"http://127.0.0.1:{port}"
                wait_healthy(url, proc, path)
                yield pipe, url
            finally:
                stop_processes([proc], grace_s=20)


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
