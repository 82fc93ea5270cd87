"""The openai package's client against a shipped deployment served by `ddm up` (issue 39: "generates
images against the shipped deployments through the new endpoint, with and without streaming, and the
returned images equal `ddm sample` for the same spec and seed")."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import numpy as np

from ddm.client.client import Client
from ddm.router.deployment_loader import load_decoder
from ddm.schema.deployment import Deployment
from ddm.schema.flow import to_uint8
from ddm.schema.settings import Settings
from tests.support.harness import local_reference


def png_pixels(b64_png: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(b64_png))))


def openai_equals_ddm_sample(url: str, env: dict, deployment_path: Path, prompt: str, **extras) -> str:
    """images.generate (b64_json) and the same request streamed with two partial images, on the UI at
    `url` (no key: `ddm up` sets none): both give, as PNG pixels, the in-process sampler's images (and
    decoder's, for a latent deployment) for the spec the endpoint queued, within one uint8 level (the
    floats agree within 1e-4), and exactly the pipeline's stored result drawn to uint8. Returns a line
    to print."""
    import openai

    client = openai.OpenAI(base_url=url.rstrip("/") + "/v1", api_key="none-set", max_retries=0, timeout=300)
    model = client.models.list().data[0].id
    resp = client.images.generate(model=model, prompt=prompt, n=2, extra_body=extras)
    got = np.stack([png_pixels(d.b64_json) for d in resp.data])
    events = list(
        client.images.generate(
            model=model, prompt=prompt, n=2, stream=True, partial_images=2, extra_body=extras
        )
    )
    kinds = [e.type for e in events]
    assert kinds == ["image_generation.partial_image"] * 4 + ["image_generation.completed"] * 2, kinds
    streamed = np.stack([png_pixels(e.b64_json) for e in events[4:]])

    deployment = Deployment.load(deployment_path)
    with Client(settings=Settings.from_env(env)) as c:
        job = c.status(resp.to_dict()["job_id"])
        stored = c.result(job.job_id, timeout=60)
    want = local_reference(deployment_path, job.spec)
    if deployment.decoder is not None:
        want = load_decoder(deployment).decode(want)
    value_range = job.picture_space().value_range
    assert np.array_equal(got, to_uint8(stored, value_range))
    diffs = [np.abs(a.astype(int) - to_uint8(want, value_range).astype(int)) for a in (got, streamed)]
    assert max(int(d.max()) for d in diffs) <= 1, [int(d.max()) for d in diffs]
    return (
        f"openai on {deployment.name}: {got.shape} images, {int((diffs[0] > 0).sum())} of {diffs[0].size} "
        f"uint8 values off the local sampler's by one (streamed: {int((diffs[1] > 0).sum())})"
    )
