"""A job that starts from a given noise (issue 38 part 4, `--init-noise FILE.npy`), on the real RabbitMQ,
Redis, router and expert workers: the pipeline's result equals the in-process sampler's from the same
noise (and not the seed's); the spec names the noise by its digest; a noise of the wrong shape is refused
at submit; a job whose stored noise is gone, or replaced by another, fails saying so; `ddm sample
--init-noise` gives the same images whatever the seed.

Before: every job started from default_rng(seed)'s noise, and no path took another.
"""

from __future__ import annotations

import subprocess
import time

import numpy as np
import pytest

from ddm.client import JobFailedError
from ddm.schema.errors import SchemaError
from ddm.schema.init_noise import noise_digest
from ddm.schema.jobs import encode_result
from ddm.schema.messages import JobSpec
from tests.support.harness import DDM_CLI, Pipeline, local_reference

STEPS = 6


@pytest.fixture(scope="module")
def pipeline(shared_labels_deployment, tmp_path_factory):
    with Pipeline(shared_labels_deployment, tmp_path_factory.mktemp("logs")) as pipe:
        yield pipe.up({"a": 0, "b": 1})


def noise(n: int, seed: int = 11) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 1, 32, 32)).astype(np.float32)


def test_the_pipeline_starts_from_the_given_noise(pipeline, shared_labels_deployment):
    x0 = noise(3)
    with pipeline.client() as c:
        job = c.submit(JobSpec.new([1, 5, 8], steps=STEPS, seed=2), init_noise=x0)
        got = c.result(job, timeout=120)
        spec = c.status(job).spec
        seeded = c.generate([1, 5, 8], steps=STEPS, seed=2, timeout=120)
    assert spec.init_noise == noise_digest(x0)
    want = local_reference(shared_labels_deployment, spec, x0)
    assert np.abs(got - want).max() <= 1e-4
    assert np.abs(got - seeded).max() > 0.1  # the seed's noise was not used
    # `ddm resubmit` repeats it from the same noise, under a new id
    again = subprocess.run(
        [*DDM_CLI, "resubmit", job], env=pipeline.env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0, again.stderr
    with pipeline.client() as c:
        repeat = again.stdout.strip()
        assert repeat != job and c.status(repeat).spec.init_noise == spec.init_noise
        assert np.abs(c.result(repeat, timeout=120) - got).max() <= 1e-4


def test_a_wrong_noise_is_refused_or_fails_the_job(pipeline):
    with pipeline.client() as c:
        with pytest.raises(SchemaError, match=r"shape \[2, 1, 32, 32\]"):
            c.submit(JobSpec.new([1, 2], steps=STEPS), init_noise=noise(3))
        with pytest.raises(SchemaError, match="finite"):
            c.submit(JobSpec.new([1], steps=STEPS), init_noise=np.full((1, 1, 32, 32), np.nan, np.float32))
        # a spec naming a noise with none stored (a client writing its own), and one whose noise was swapped
        lost = JobSpec.new([1], steps=STEPS, init_noise=noise_digest(noise(1)))
        swapped = JobSpec.new([1], steps=STEPS, init_noise=noise_digest(noise(1)))
        c.redis.set(c.names.init_noise(swapped.job_id), encode_result(noise(1, seed=99)))
        with pytest.raises(SchemaError, match="pass it"):
            c.submit(lost)  # the client refuses what could only fail at the router
        for spec, words in ((lost, "none is stored"), (swapped, "not the one its spec names")):
            c._publish(spec.job_id, spec.encode())  # as a client of its own would, with no hash
            deadline = time.monotonic() + 60
            while not c.redis.exists(c.names.job(spec.job_id)) and time.monotonic() < deadline:
                time.sleep(0.05)  # the router writes the hash when it takes the job
            with pytest.raises(JobFailedError, match=words):
                c.result(spec.job_id, timeout=60)


def test_ddm_sample_starts_from_the_file_whatever_the_seed(shared_labels_deployment, tmp_path):
    path = tmp_path / "x0.npy"
    sample = [
        *DDM_CLI,
        "sample",
        "--deployment",
        str(shared_labels_deployment),
        "--labels",
        "3,8",
        "--n",
        "1",
    ]
    sample += ["--steps", str(STEPS), "--init-noise", str(path), "--out", str(tmp_path / "x.png")]
    np.save(path, noise(2))
    outs = []
    for seed in ("1", "7"):
        out = tmp_path / f"s{seed}.npy"
        done = subprocess.run([*sample, "--seed", seed, "--npy", str(out)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        outs.append(np.load(out))
    assert np.array_equal(outs[0], outs[1])
    np.save(path, noise(3))
    refused = subprocess.run(sample, capture_output=True, text=True)
    assert refused.returncode != 0 and "[2, 1, 32, 32]" in refused.stderr, refused.stderr
