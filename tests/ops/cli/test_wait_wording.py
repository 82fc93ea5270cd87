"""What `ddm` says and exits with at two edges (issue 40 part 7): a wait that runs out on a RUNNING job
does not ask whether a router runs (one does: it is running), and a broker that refuses the login exits
1, a service problem, as README says, not 2 (usage)."""

from __future__ import annotations

import pytest
import redis

from ddm.client import Client, JobTimeoutError
from ddm.ops.cli import main
from ddm.router.store import JobStore
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob


def test_a_wait_on_a_running_job_says_it_goes_on(env):
    spec = JobSpec.new([3], steps=8, strategy="top1", guidance=1.0)
    with Client(settings=env) as client:
        client.submit(spec, check=False)
        with pytest.raises(JobTimeoutError, match="still queued, no router has taken it"):
            client.wait(spec.job_id, timeout=0.3)
        r = redis.Redis.from_url(env.redis_url)
        JobStore(r, env.names, job_ttl_s=600).start(spec.job_id, "w-router", 2, ResolvedJob.of(spec))
        with pytest.raises(JobTimeoutError) as caught:
            client.wait(spec.job_id, timeout=0.3)
        r.close()
    assert "running at step 0/8; it goes on" in str(caught.value)
    assert "is a router worker running" not in str(caught.value)


def test_a_refused_login_is_a_service_failure(env, monkeypatch, capsys):
    url = env.amqp_url.replace("guest:guest@", "guest:wrong@")
    monkeypatch.setenv("DDM_AMQP_URL", url)
    assert main(["submit", "--label", "1", "--n", "1", "--queue-anyway", "--no-check"]) == 1
    assert "refused" in capsys.readouterr().err.lower()
