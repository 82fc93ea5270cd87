"""An imported diffusers deployment through the real pipeline (issue 38 part 3): two DiTTransformer2DModel
folders as experts (DDPM eps with learned sigma, converted at the expert) and an AutoencoderKL as the
decoder stage, served in place by worker processes on the real broker and Redis; a job's latents and
pixels equal the in-process sampler's (`ddm sample --local`) within 1e-4."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.ops.importers.diffusers_dit import import_dit
from ddm.ops.random_diffusers import write_dit, write_vae
from ddm.router.deployment_loader import load_decoder
from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline, local_reference


@pytest.fixture(scope="module")
def dit_deployment(tmp_path_factory):
    """Two random tiny DiTs (every class each: label-prior routing) and a tiny VAE, imported."""
    root = tmp_path_factory.mktemp("diffusers")
    dits = [write_dit(root / "dit0", seed=0), write_dit(root / "dit1", seed=1)]
    return import_dit(dits, write_vae(root / "vae"), root / "deployment", device="cpu", preview_samples=2)


def test_an_imported_dit_deployment_serves_like_the_local_sampler(dit_deployment, tmp_path):
    with Pipeline(dit_deployment, tmp_path) as pipe:
        pipe.start_decoder()
        pipe.up({"e0": 0, "e1": 1})
        pipe.wait_ready("decoder")
        client = pipe.client()
        descriptor = client.deployment()
        assert descriptor.decoder is not None and descriptor.sample_space.shape == (4, 8, 8)
        mixed = JobSpec.new([0, 3, 9], steps=4, strategy="full", guidance=4.0, seed=7)  # both experts, guided
        default = JobSpec.new([5, 2], steps=3, seed=8)  # the deployment's defaults (guidance 4)
        for spec in (mixed, default):
            client.submit(spec)
        for spec in (mixed, default):
            pixels = client.result(spec.job_id, timeout=180)
            latents = client.result(spec.job_id, timeout=1, latent=True)
            want_z = local_reference(dit_deployment, spec)
            want_x = load_decoder(Deployment.load(dit_deployment)).decode(want_z)
            assert latents.shape == (len(spec.labels), 4, 8, 8) and pixels.shape == (
                len(spec.labels),
                3,
                16,
                16,
            )
            assert np.abs(want_z).max() > 0.1 and np.abs(want_x).max() > 0  # real images, not zeros
            assert np.abs(latents - want_z).max() <= 1e-4
            assert np.abs(pixels - want_x).max() <= 1e-4
        assert pipe.counter("e1", "requests", 1) >= 1  # the full mix asked both experts
        assert pipe.counter("decoder", "requests", 2) >= 2
