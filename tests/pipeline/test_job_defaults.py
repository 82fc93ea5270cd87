"""What a job means is the serving deployment's word, wherever it was submitted from: a job that
leaves strategy and guidance unset gets the router's defaults, recorded in its job hash, and equals
the local sampler resolved the same way."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from ddm.ops.random_experts import make_random_expert
from ddm.schema.deployment import Deployment
from ddm.schema.errors import SchemaError
from ddm.schema.messages import JobSpec
from tests.support.harness import DDM_CLI, Pipeline, local_reference


@pytest.fixture(scope="module")
def guided_deployment(tmp_path_factory):
    """Label split whose owner chose guidance 8 and top1, where a client that guessed would use 1 and
    oracle (random weights barely heed the label: a large scale makes the difference visible)."""
    root = tmp_path_factory.mktemp("guided")
    make_random_expert(root / "e0", "torch", range(0, 5), seed=0)
    make_random_expert(root / "e1", "jax", range(5, 10), seed=1)
    experts = [("e0", "cpu"), ("e1", "cpu")]
    path = root / "deployment.toml"
    return Deployment.build(path, experts, "label-prior", guidance=8.0, strategy="top1").write()


@pytest.fixture(scope="module")
def guided_pipeline(guided_deployment, tmp_path_factory):
    with Pipeline(guided_deployment, tmp_path_factory.mktemp("logs")) as pipe:
        yield pipe.up({"e0": 0, "e1": 1})


def test_submit_from_another_directory_gets_the_deployments_defaults(
    guided_pipeline, guided_deployment, tmp_path
):
    pipe = guided_pipeline
    run = dict(
        env=pipe.env, cwd=tmp_path, capture_output=True, text=True, timeout=180
    )  # no deployment file here
    npy = tmp_path / "p.npy"
    args = [
        "submit",
        "--labels",
        "2,8",
        "--n",
        "1",
        "--steps",
        "6",
        "--seed",
        "7",
        "--wait",
        "--npy",
        str(npy),
    ]
    done = subprocess.run([*DDM_CLI, *args], **run)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()

    got = np.load(npy)
    spec = JobSpec(job_id, (2, 8), steps=6, seed=7)
    want = local_reference(guided_deployment, spec)  # resolved from the deployment: top1, guidance 8
    assert np.abs(got - want).max() <= 1e-4
    guessed = local_reference(
        guided_deployment, JobSpec(job_id, (2, 8), steps=6, strategy="oracle", guidance=1.0, seed=7)
    )
    assert np.abs(got - guessed).max() > 1e-3, "the defaults must matter for this test to mean anything"

    status = subprocess.run([*DDM_CLI, "status", job_id, "--json"], **run)
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert (shown["strategy"], shown["guidance"]) == ("top1", 8.0)
    assert (shown["spec"]["strategy"], shown["spec"]["guidance"]) == (None, None), "the job as submitted"


def test_a_job_may_still_choose_its_own(guided_pipeline, guided_deployment):
    client = guided_pipeline.client()
    spec = JobSpec.new([1, 6], steps=5, strategy="full", guidance=1.0, seed=3)
    client.submit(spec)
    got = client.result(spec.job_id, timeout=120)
    assert np.abs(got - local_reference(guided_deployment, spec)).max() <= 1e-4
    st = client.status(spec.job_id)
    assert (st.strategy, st.guidance) == ("full", 1.0)


def test_the_descriptor_is_published_and_refuses_what_it_cannot_serve(guided_pipeline):
    client = guided_pipeline.client()
    d = client.deployment()
    assert (d.default_strategy, d.default_guidance, d.router_kind) == ("top1", 8.0, "label-prior")
    assert d.strategies == ("oracle", "top1", "topk:2", "full")
    with pytest.raises(SchemaError, match="strategy in"):
        client.submit(JobSpec.new([3], strategy="topk:3"))
