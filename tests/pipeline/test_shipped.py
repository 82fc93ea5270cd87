"""Every shipped deployment through the real pipeline (RabbitMQ, Redis, one worker process per expert and
a router) equals the local sampler within 1e-4: checkpoints/mnist (1x32x32, a PyTorch and a JAX UNet),
checkpoints/fashion-mnist (four UNets) and checkpoints/emoji (3x32x32 RGB, UNets and DiTs in both
frameworks, experts trained on velocity, DDPM eps and DDPM v, each converted to the one velocity by its
worker). A short job per deployment, routed by its learned router under top-2, so two experts serve
most images at most steps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline, local_reference

CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"
SHIPPED = ("mnist", "fashion-mnist", "emoji")


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_deployment_through_the_pipeline_equals_the_local_sampler(name, tmp_path):
    deployment = Deployment.load(CHECKPOINTS / name / "deployment.toml")
    k, space = deployment.num_experts, deployment.sample_space
    labels = list(range(space.num_classes))[:6]
    spec = JobSpec.new(labels, steps=5, strategy="topk:2", guidance=1.5, seed=4)
    with Pipeline(deployment.path, tmp_path) as pipe:
        client = pipe.up({f"e{e}": e for e in range(k)}).client()
        described = client.deployment()
        assert described.sample_space == space
        client.submit(spec)
        got = client.result(spec.job_id, timeout=240)
        served = {e for frame in client.frames(spec.job_id, follow=False) for e in frame.experts}
    want = local_reference(deployment.path, spec)
    assert got.shape == want.shape == (len(labels), *space.shape)
    diff = float(np.abs(got - want).max())
    print(f"{name}: max |pipeline - local| = {diff:.2e}, experts served {sorted(served)}")
    assert diff <= 1e-4
    assert len(served) >= 2  # the router mixes experts, so the equality covers more than one
    if name == "emoji":  # the colour deployment's point: every expert its own recipe, one velocity
        cards = [e.card for e in described.experts]
        assert {c["framework"] for c in cards} == {"torch", "jax"}
        assert {c["architecture"] for c in cards} == {"unet", "dit"}
        assert len({c["objective"] for c in cards}) >= 2, cards
