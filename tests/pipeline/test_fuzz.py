"""The fuzz run (ops/fuzz/run.py) at test size, on the real broker, Redis and workers: every category
of hostile message, the hostile AMQP properties included, into the jobs queue and every expert queue
while jobs of every strategy run. Nothing is lost (each comes back as a dead letter with its reason),
nothing altered (each job equals the local sampler, none degraded), no worker stops, nothing unpickles.
DDM_FUZZ_MESSAGES and DDM_FUZZ_JOBS raise the counts (the 10k run of docs/DEPLOY.md)."""

from __future__ import annotations

import os

from ddm.ops.fuzz.messages import CATEGORIES
from ddm.ops.fuzz.run import run_fuzz
from tests.support.harness import Pipeline


def test_hostile_messages_lose_nothing_and_alter_nothing(shared_labels_deployment, tmp_path):
    messages = int(os.environ.get("DDM_FUZZ_MESSAGES", "400"))
    jobs = int(os.environ.get("DDM_FUZZ_JOBS", "6"))
    with Pipeline(shared_labels_deployment, tmp_path, timeout_s=30.0) as pipe:
        pipe.up({"a0": 0, "b0": 1})
        report = run_fuzz(pipe.settings, shared_labels_deployment, messages=messages, jobs=jobs, seed=0)
    print(report.to_dict())
    assert set(report.sent) == set(CATEGORIES) and all(report.sent.values()), "every category was sent"
    assert report.dead_lettered == report.sent, "each hostile message refused once, with its reason"
    assert report.ok, report.to_dict()
