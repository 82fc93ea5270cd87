"""Job priorities on the real broker: a high-priority job queued behind 50 low-priority ones starts first
when a router (one job at a time) comes up."""

from __future__ import annotations

import json
import subprocess
import time

from ddm.schema.messages import JobSpec
from tests.support.harness import DDM_CLI, Pipeline

LOW = 50


def test_a_high_priority_job_starts_before_50_queued_low_ones(shared_labels_deployment, tmp_path):
    with Pipeline(shared_labels_deployment, tmp_path) as pipe:
        pipe.up({"a": 0, "b": 1}, routers=())  # experts only: the jobs wait in ddm.jobs
        with pipe.client() as client:
            low = [
                client.submit(JobSpec.new([3], steps=1, seed=i), check=False) for i in range(LOW)
            ]  # no priority: what every client sent before priorities existed
            cmd = [*DDM_CLI, "submit", "--labels", "3", "--n", "1", "--steps", "1"]
            done = subprocess.run(
                [*cmd, "--no-check", "--priority", "9", "--json"],
                env=pipe.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            high = json.loads(done.stdout)["job_id"]

            t0 = time.monotonic()
            pipe.start_router("router", extra=["--max-jobs", "1"])
            ended = client.wait(high, timeout=180)
            took = time.monotonic() - t0
            assert ended.status.value == "done", ended.error
            before = [
                j for j in low if (s := client.status(j)).started_at and s.started_at < ended.started_at
            ]
            print(
                f"high-priority job done {took:.1f} s after the router started; low jobs before it: {before}"
            )
            assert before == [], f"{len(before)} of {LOW} low-priority jobs started before the high one"
