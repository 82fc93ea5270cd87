"""`ddm jobs --status S --limit N --json` on the real Redis and broker: jobs queued (no router serves the
prefix), one cancelled through the client and one marked done the way its router's store does, listed
by status, newest first, at most N."""

from __future__ import annotations

import json
import subprocess

from ddm.schema.messages import JobSpec
from tests.support.harness import DDM_CLI, service_env


def ddm_jobs(settings, *args: str) -> subprocess.CompletedProcess:
    env = service_env(settings.prefix)
    return subprocess.run([*DDM_CLI, "jobs", *args], env=env, capture_output=True, text=True, timeout=60)


def listed(settings, *args: str) -> list[tuple[str, str]]:
    done = ddm_jobs(settings, *args, "--json")
    assert done.returncode == 0, done.stderr
    return [(j["job_id"], j["status"]) for j in json.loads(done.stdout)]


def test_jobs_by_status_newest_first(settings):
    from ddm.client.client import Client

    with Client(settings=settings) as client:
        ids = [client.submit(JobSpec.new([1], steps=2, seed=i), check=False) for i in range(5)]
        client.cancel(ids[1])  # queued, no router holds it: cancelled at once
        client.redis.hset(settings.names.job(ids[3]), "status", "done")
    queued = [ids[4], ids[2], ids[0]]  # newest first
    assert listed(settings, "--status", "queued") == [(i, "queued") for i in queued]
    assert listed(settings, "--status", "queued", "--limit", "2") == [(i, "queued") for i in queued[:2]]
    assert listed(settings, "--status", "cancelled") == [(ids[1], "cancelled")]
    assert listed(settings, "--status", "done") == [(ids[3], "done")]
    assert listed(settings, "--status", "failed") == []
    assert [i for i, _ in listed(settings)] == ids[::-1]

    table = ddm_jobs(settings, "--status", "queued")
    assert table.returncode == 0 and table.stdout.splitlines()[0].split()[:2] == ["JOB", "STATUS"]
    assert [line.split()[0] for line in table.stdout.splitlines()[1:]] == queued
    bad = ddm_jobs(settings, "--status", "lost")
    assert bad.returncode == 2 and "invalid choice: 'lost'" in bad.stderr
