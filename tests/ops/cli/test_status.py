"""`ddm status JOB` on the real Redis (issue 26): the solver, time grid and velocity evaluations (NFE)
the router resolved, in the text and in --json; before a router starts the job, what it asked for; a
job a router from before solvers ran (nothing recorded) as what it ran, Euler on the uniform grid."""

from __future__ import annotations

import json

import redis

from ddm.client import Client
from ddm.ops.cli import main
from ddm.router.store import JobStore
from ddm.schema.messages import JobSpec
from ddm.schema.resolved import ResolvedJob


def status_row(out: str, key: str) -> str:
    """The value of the `key  value` line of `ddm status`'s table."""
    return next(line[len(key) :].strip() for line in out.splitlines() if line.startswith(key + " "))


def test_status_prints_the_solver_grid_and_evaluations_the_router_resolved(env, capsys):
    r = redis.Redis.from_url(env.redis_url)
    store = JobStore(r, env.names, job_ttl_s=600)
    spec = JobSpec.new([3], steps=8, strategy="top1", guidance=1.0, solver="heun", grid="shift:3")
    with Client(settings=env) as client:
        client.submit(spec, check=False)
        queued = client.submit(JobSpec.new([3], steps=8), check=False)  # solver and grid left unset
    assert main(["status", queued]) == 0
    row = status_row(capsys.readouterr().out, "solver")
    assert row == "the deployment's default solver on the default grid (not resolved yet)"

    store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec))
    assert main(["status", spec.job_id]) == 0
    row = status_row(capsys.readouterr().out, "solver")
    assert row == "heun on the shift:3 grid, 16 evaluations (8 steps x 2)"
    assert main(["status", spec.job_id, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["solver"], got["grid"], got["nfe"]) == ("heun", "shift:3", 16)

    ab3 = JobSpec.new([3], steps=8, strategy="top1", guidance=1.0, solver="ab3", grid="edm")
    store.start(ab3.job_id, "w-router", 0, ResolvedJob.of(ab3))
    assert main(["status", ab3.job_id]) == 0
    assert (
        status_row(capsys.readouterr().out, "solver")
        == "ab3 on the edm grid, 8 evaluations (1 per step, 8 steps)"
    )

    old = JobSpec.new([3], steps=8, strategy="top1", guidance=1.0)
    store.start(old.job_id, "w-router", 0, ResolvedJob.of(old))
    r.hdel(env.names.job(old.job_id), "solver", "grid", "nfe")  # a router from before solvers
    assert main(["status", old.job_id]) == 0
    row = status_row(capsys.readouterr().out, "solver")
    assert row == "euler on the uniform grid, 8 evaluations (1 per step, 8 steps)"
    assert main(["status", old.job_id, "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert (got["solver"], got["grid"], got["nfe"]) == (None, None, None)  # the hash as it is
    r.close()
