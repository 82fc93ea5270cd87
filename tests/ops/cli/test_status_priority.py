"""`ddm status` shows a job's priority, in the text and the JSON (issue 40 part 6), and names its labels by
the job's own deployment once a router recorded it."""

from __future__ import annotations

import json

import redis

from ddm.client import Client
from ddm.ops.cli import main
from ddm.router.store import JobStore
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob
from ddm.schema.sample_space import SampleSpace

GROUPS = SampleSpace((3, 32, 32), (-1.0, 1.0), 2, ("Smileys", "Flags"))


def test_status_shows_the_priority_and_the_jobs_own_label_names(env, capsys):
    urgent = JobSpec.new([1], steps=2, strategy="top1", guidance=1.0)
    plain = JobSpec.new([0], steps=2)
    with Client(settings=env) as client:
        client.submit(urgent, check=False, priority=7)
        client.submit(plain, check=False)
    assert main(["status", urgent.job_id]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines() if line.strip())
    assert rows["priority"] == "7"
    assert main(["status", plain.job_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["priority"] is None  # none asked: 0, the lowest
    r = redis.Redis.from_url(env.redis_url)
    JobStore(r, env.names, 600).start(urgent.job_id, "w-router", 0, ResolvedJob.of(urgent, GROUPS), urgent)
    r.close()
    assert main(["status", urgent.job_id]) == 0
    assert "(labels Flags)" in capsys.readouterr().out
