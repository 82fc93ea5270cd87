"""Per-job deadlines on the real pipeline: a job still queued past its deadline is cancelled unrun when a
router takes it, a running one at its next stored step, each saying so in its error; a job done within
its deadline is untouched."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from ddm.client import JobCancelledError
from ddm.schema.messages import JobSpec
from tests.support.harness import DDM_CLI, Pipeline


def test_jobs_past_their_deadline_are_cancelled_and_say_so(shared_labels_deployment, tmp_path):
    with Pipeline(shared_labels_deployment, tmp_path) as pipe:
        pipe.up({"a": 0, "b": 1}, routers=())
        with pipe.client() as client:
            queued = client.submit(JobSpec.new([2], steps=4), check=False, deadline_s=0.2)
            time.sleep(0.5)  # no router yet: it is past its deadline in the queue
            pipe.start_router("router")
            pipe.wait_ready("router")
            st = client.wait(queued, timeout=60)
            assert (st.status.value, st.step, st.started_at) == ("cancelled", 0, None), st
            assert st.error.startswith("deadline passed: not done by its deadline, 20")  # a date

            argv = [*DDM_CLI, "submit", "--labels", "7", "--n", "1", "--steps", "1000", "--deadline", "0.5"]
            done = subprocess.run([*argv, "--json"], env=pipe.env, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            long = json.loads(done.stdout)["job_id"]
            st = client.wait(long, timeout=120)
            assert st.status.value == "cancelled" and 0 < st.step < 1000, st
            assert st.error.startswith("deadline passed") and st.finished_at - st.deadline_at < 5
            with pytest.raises(JobCancelledError, match=r"at step \d+/1000\): deadline passed"):
                client.result(long, timeout=5)
            print(f"1000-step job with a 0.5 s deadline: cancelled at step {st.step}, {st.error}")

            easy = client.submit(JobSpec.new([7], steps=2), deadline_s=60)
            assert client.wait(easy, timeout=60).status.value == "done"
            assert client.status(easy).error is None


def test_a_deadline_must_be_positive(settings):
    from ddm.client.client import Client
    from ddm.schema.errors import SchemaError

    with Client(settings=settings) as client:
        for bad in (0, -1, float("nan"), float("inf"), "5", True):
            with pytest.raises(SchemaError, match="deadline_s, a number of seconds > 0"):
                client.submit(JobSpec.new([1]), check=False, deadline_s=bad)
