"""Jobs on a far expert (its worker on another simulated host, 40 ms round trip) leave in staggered
cohorts (router/experts.py) instead of riding one request per step in lock step, and every job still
equals the local sampler. Real RabbitMQ, Redis and workers; the link is a namespace behind a proxy."""

from __future__ import annotations

import time

import numpy as np
import pytest

from ddm.schema.messages import JobSpec
from tests.support.harness import Pipeline, local_references
from tests.support.links import spawn_args, worker_link

# the cohorts are sized from measured forward passes against the link's round trip: on two cores saturated
# by the parallel phase a tiny forward pass looks long, and the count it asserts slips (23 of 24)
pytestmark = pytest.mark.serial

JOBS, STEPS = 6, 12
SETTLE_S = 1.5  # three heartbeats of the harness's workers (0.5 s): the counters include every pass


def test_jobs_due_together_on_a_far_expert_go_in_cohorts_and_equal_the_local_sampler(
    label_split_deployment, tmp_path
):
    """The jobs are queued before the router starts, so their steps fall due together: the first one
    rides one request (nothing is measured yet), and from then on a lock-stepped router would send
    one request a step (about STEPS forward passes). Tiny experts compute far less than the link, so
    every row becomes a cohort of its own."""
    with worker_link(one_way_ms=20) as link, Pipeline(label_split_deployment, tmp_path) as pipe:
        pipe.start_expert(1, "b0", **spawn_args(link))
        pipe.start_expert(0, "a0")
        pipe.wait_ready("a0", "b0")
        client = pipe.client()
        specs = [
            JobSpec.new([5 + i % 5], steps=STEPS, strategy="oracle", guidance=1.0, seed=i)
            for i in range(JOBS)
        ]
        for spec in specs:
            client.submit(spec, check=False)  # no router yet, so no descriptor to check against
        pipe.start_router()
        got = [client.result(spec.job_id, timeout=120) for spec in specs]
        time.sleep(SETTLE_S)
        passes = int(pipe.heartbeat("b0")["batches"])
    print(
        f"link {'namespace' if link.isolated else 'loopback'}: {JOBS} jobs x {STEPS} steps, {passes} passes"
    )
    assert passes >= 2 * STEPS, f"{passes} forward passes for {STEPS} steps: the jobs moved in lock step"
    for spec, want, have in zip(specs, local_references(label_split_deployment, specs), got, strict=True):
        assert np.abs(have - want).max() <= 1e-4, spec.job_id
