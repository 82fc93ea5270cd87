"""A degraded result is loud (issue 23): a `full` job that ran without expert 1 (it has no worker, and
the deployment degrades by default) warns through Client.result, raises with on_degraded="raise", and
makes `ddm submit --wait` exit 3 naming the expert and the steps, unless the job asked for degradation
itself. Real RabbitMQ, Redis and worker processes."""

from __future__ import annotations

import dataclasses
import subprocess
import time

import pytest

from ddm.client import DegradedResultWarning, JobDegradedError
from ddm.ops.cli.exit_codes import DEGRADED, OK
from ddm.router.worker import OBSERVE_S
from ddm.schema.deployment import Deployment
from tests.support.harness import DDM_CLI, Pipeline

pytestmark = pytest.mark.serial  # waits out the expert-loss grace, on a clock


@pytest.fixture(scope="module")
def pipe(shared_labels_deployment, tmp_path_factory):
    """Expert 0 only, on a deployment whose jobs degrade by default (the file's own setting)."""
    served = Deployment.load(shared_labels_deployment)
    degrading = dataclasses.replace(
        served, path=served.path.with_name("deployment-degrade.toml"), on_expert_loss="degrade"
    ).write()
    with Pipeline(degrading, tmp_path_factory.mktemp("loud"), env={"DDM_EXPERT_LOSS_GRACE_S": "0.5"}) as pipe:
        pipe.up({"a0": 0})
        # The precondition these tests are about: the router counts expert 1 as gone. It does once it has
        # seen its queue without a consumer for the loss grace (0.5 s), looking every OBSERVE_S (0.5 s).
        # A job that starts before that plans on expert 1 as live, and its step then waits for it instead
        # of degrading (noticed, not fixed: an in-flight step is not re-planned when its expert goes): on
        # a quiet machine the first job came that fast and failed after the 30 s expert wait.
        time.sleep(3 * (OBSERVE_S + 0.5))
        yield pipe


def test_the_client_warns_or_raises_on_a_degraded_result(pipe):
    client = pipe.client()
    with pytest.warns(DegradedResultWarning, match=r"expert 1 left out at steps 1-3"):
        client.generate([5], steps=3, strategy="full", queue_anyway=True, timeout=60)
    with pytest.raises(JobDegradedError, match=r"expert 1 left out at steps 1-3") as caught:
        client.generate([5], steps=3, strategy="full", queue_anyway=True, timeout=60, on_degraded="raise")
    assert caught.value.images.shape == (1, 1, 32, 32) and caught.value.degraded == {1: (1, 2, 3)}


@pytest.mark.parametrize(("asked", "code"), [((), DEGRADED), (("--on-expert-loss", "degrade"), OK)])
def test_submit_wait_exits_3_on_a_degraded_result_it_did_not_ask_for(pipe, tmp_path, asked, code):
    argv = [*DDM_CLI, "submit", "--labels", "5", "--steps", "3", "--strategy", "full", "--queue-anyway"]
    done = subprocess.run(
        [*argv, "--wait", *asked], env=pipe.env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == code, done.stderr
    assert "was degraded: expert 1 left out at steps 1-3 (no live worker)" in done.stderr
