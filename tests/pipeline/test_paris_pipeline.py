"""Paris, imported and served across both frameworks (issue 38): a fixture in Paris's exact layout
(tests/support/paris_fixture.py) imported with `ddm import paris` (expert 1 in Flax), then served by the
real pipeline: CLIP as the text-encoder stage (77 token embeddings per prompt, stored once per job), two
experts on two frameworks, Paris's router in the router worker, the VAE as the decoder stage, Paris's
sampling by default (guidance 7.5 against "", top-2, the flow-matching timesteps). The pipeline equals
the in-process sampler within 1e-4; `ddm sample` equals Paris's own loop (tests/support/paris_reference.py,
written apart from all of this) from the same initial noise."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from ddm.schema.deployment import Deployment
from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline, local_references
from tests.support.paris_fixture import write_paris_fixture

pytest.importorskip("diffusers")  # the import extra (in dev: CI installs it)

STEPS = 5
NOISE_SEED = 11


@pytest.fixture(scope="module")
def paris(tmp_path_factory):
    return write_paris_fixture(tmp_path_factory.mktemp("paris") / "paris")


@pytest.fixture(scope="module")
def deployment(paris, tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "paris"
    done = subprocess.run(
        [sys.executable, "-m", "ddm.ops.cli", "import", "paris", str(paris), "--out", str(out), "--jax", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out / "deployment.toml"


def noise(n: int) -> np.ndarray:
    return np.random.default_rng(NOISE_SEED).standard_normal((n, 4, 8, 8)).astype(np.float32)


def test_the_pipeline_serves_paris_as_the_in_process_sampler(deployment, tmp_path):
    from ddm.router.deployment_loader import load_decoder

    specs = [
        JobSpec.new([None, None], steps=STEPS, seed=1, prompt="a red apple on a wooden table"),
        JobSpec.new([None], steps=STEPS, seed=2, prompt="a lighthouse", negative_prompt="fog", guidance=3.0),
    ]
    latents = local_references(deployment, specs)
    decoder = load_decoder(Deployment.load(deployment))
    with Pipeline(deployment, tmp_path) as pipe:
        pipe.start_text_encoder("text")
        pipe.start_decoder()
        pipe.up({"e0": 0, "e1": 1})
        pipe.wait_ready("text", "decoder")
        client = pipe.client()
        for spec in specs:
            client.submit(spec)
        for spec, z in zip(specs, latents, strict=True):
            pixels = client.result(spec.job_id, timeout=240)
            difference = np.abs(pixels - decoder.decode(z)).max()
            print(f"\npipeline vs in-process, {spec.n} images: max |pixel difference| {difference:.2e}")
            assert difference <= 1e-4
            frames = list(client.frames(spec.job_id, follow=False))
            assert len(frames) == STEPS
            assert {len(f.experts) for f in frames} == {2}  # top-2 at every step: both frameworks serve
        assert pipe.counter("text", "requests", 2) >= 2  # the encoder stage, once per job


def test_ddm_sample_equals_paris_own_sampling_loop(paris, deployment, tmp_path):
    from tests.support.paris_reference import paris_sample

    prompt, x0 = "a corgi wearing sunglasses", noise(2)
    np.save(tmp_path / "noise.npy", x0)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddm.ops.cli",
            "sample",
            "--deployment",
            str(deployment),
            "--prompt",
            prompt,
            "--n",
            "2",
            "--steps",
            str(STEPS),
            "--init-noise",
            str(tmp_path / "noise.npy"),
            "--out",
            str(tmp_path / "paris.png"),
            "--npy",
            str(tmp_path / "paris.npy"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    _, want = paris_sample(paris, prompt, x0, STEPS)  # guidance 7.5, top-2: the deployment's defaults
    got = np.load(tmp_path / "paris.npy")
    assert got.shape == want.shape == (2, 3, 16, 16)
    assert np.abs(want).max() > 0.05  # a picture, not zeros
    print(f"\nddm sample vs Paris's loop: max |pixel difference| {np.abs(got - want).max():.2e}")
    assert np.abs(got - want).max() <= 1e-4
