"""Queue positions and ETAs (schema/queue.py, ddm/client/queue.py) on the real RabbitMQ and Redis: the
positions the client reads are the order the broker hands the job messages out (taken off ddm.jobs
with basic_get, no router), a cancel moves the jobs behind up, stale entries never count and are
removed, and the router's store takes a job out when it starts and measures its end (the ETA)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from ddm.client import Client
from ddm.client.queue import default_solver, waiting_jobs
from ddm.router.store import JobStore
from ddm.schema.messages import JobSpec
from ddm.schema.queue import JobEnd
from tests.client.test_client import publish, put_job, queued
from tests.support.fakes import write_fake_deployment

# (priority, seed): submitted in this order; the broker must deliver 3, 1, 4, 0, 2, 5
MIXED = [(None, 0), (5, 1), (0, 2), (9, 3), (5, 4), (None, 5)]
DELIVERY = [3, 1, 4, 0, 2, 5]


@pytest.fixture
def client(prefix, amqp_url, redis_url):
    c = Client(amqp_url, redis_url, prefix)
    yield c
    c.close()


@pytest.fixture
def deployment(tmp_path) -> Path:
    return write_fake_deployment(tmp_path / "dep", [("a", "torch", range(10))], "oracle")


def submit_mixed(client: Client) -> list[str]:
    return [
        client.submit(JobSpec.new([3], steps=10 + i, seed=seed), check=False, priority=p)
        for i, (p, seed) in enumerate(MIXED)
    ]


def places(client: Client, ids: list[str]) -> list[int | None]:
    got = client.queue_positions()
    return [got[j].position if j in got else None for j in ids]


def test_positions_are_the_order_the_broker_delivers(client):
    ids = submit_mixed(client)
    expected = [ids[i] for i in DELIVERY]
    got = client.queue_positions()
    assert sorted(got, key=lambda j: got[j].position) == expected
    assert [got[j].position for j in expected] == [1, 2, 3, 4, 5, 6]
    assert {p.queued for p in got.values()} == {6}
    assert [got[j].priority for j in expected] == [9, 5, 5, 0, 0, 0]
    one = client.queue_position(ids[4])
    assert (one.position, one.ahead, one.queued) == (3, 2, 6)
    # no router has measured anything and none serves: no estimate, said as such
    assert one.start_in_s is None and one.measured == 0 and not one.serving
    # the broker's own order: what a router would be handed, one message at a time
    delivered = [props.message_id for props, _ in queued(client)]
    assert delivered == expected


def test_a_cancel_moves_the_jobs_behind_up(client):
    ids = submit_mixed(client)
    order = [ids[i] for i in DELIVERY]
    client.cancel(order[1])  # untaken: cancelled at once, out of the queue in the same transaction
    assert not client.redis.zscore(client.names.queue, order[1])
    assert client.queue_position(order[1]) is None
    assert places(client, order) == [1, None, 2, 3, 4, 5]
    assert {p.queued for p in client.queue_positions().values()} == {5}


def test_stale_entries_do_not_count_and_are_removed(client):
    ids = submit_mixed(client)
    r, names = client.redis, client.names
    # ahead of everyone: a job that ended and one that runs (left by a router from before queue positions)
    put_job(client, "ended", "done", steps=5)
    put_job(client, "running", "running", steps=5)
    r.zadd(names.queue, {"ended": 2.0, "running": 3.0})
    assert places(client, [ids[i] for i in DELIVERY]) == [1, 2, 3, 4, 5, 6]
    assert r.zcard(names.queue) == 6
    # a read-only reader (the web UI) skips them and leaves them to the routers
    r.zadd(names.queue, {"ended": 2.0})
    assert len(client.queue_positions(prune=False)) == 6 and r.zcard(names.queue) == 7
    # the router's heartbeat prunes too, a page at a time, whoever reads
    r.zadd(names.queue, {"gone2": 1.0})
    store = JobStore(r, names, 600)
    assert store.prune_queue(batch=1) == 1
    assert store.prune_queue(batch=1) == 1
    assert r.zcard(names.queue) == 6


DIES_BEFORE_PUBLISH = """
import os, sys
from ddm.client import Client
from ddm.schema.messages import JobSpec
client = Client()
client._publish = lambda *args, **kwargs: os._exit(3)  # killed between its transaction and its publish
client.submit(JobSpec(sys.argv[1], (3,), steps=5), check=False, priority=9)
"""


def test_a_client_that_died_before_its_publish_leaves_no_entry_forever(client):
    ids = submit_mixed(client)
    r, names = client.redis, client.names
    assert 0 < r.ttl(names.job(ids[0])) <= client.settings.queued_ttl_s  # every queued hash expires
    dead = uuid.uuid4().hex
    env = os.environ | {"DDM_PREFIX": names.prefix, "DDM_QUEUED_TTL_S": "2"}
    env |= {"DDM_AMQP_URL": client.settings.amqp_url, "DDM_REDIS_URL": client.settings.redis_url}
    assert subprocess.run([sys.executable, "-c", DIES_BEFORE_PUBLISH, dead], env=env).returncode == 3
    # a queued hash with no message behind it: nothing tells it from one whose message waits in the
    # broker, so it counts (priority 9: second, ahead of five) while its hash lives ...
    assert client.queue_position(dead).position == 2 and 0 < r.ttl(names.job(dead)) <= 2
    assert places(client, [ids[i] for i in DELIVERY]) == [1, 3, 4, 5, 6, 7]
    deadline = time.monotonic() + 10
    while r.exists(names.job(dead)):  # ... and expires with it
        assert time.monotonic() < deadline, "the dead client's queued hash did not expire"
        time.sleep(0.1)
    assert client.queue_position(dead) is None
    assert places(client, [ids[i] for i in DELIVERY]) == [1, 2, 3, 4, 5, 6]
    assert r.zscore(names.queue, dead) is None  # the reader pruned it
    assert [props.message_id for props, _ in queued(client)] == [ids[i] for i in DELIVERY]


def test_queued_jobs_weigh_by_their_evaluations(client, deployment):
    from ddm.schema.solver import SamplingOffer

    heun = client.submit(JobSpec.new([3], steps=10, solver="heun"), check=False)
    plain = client.submit(JobSpec.new([3], steps=10), check=False)
    # no descriptor: a job that names no solver is Euler's, one evaluation a step
    assert [w for _, _, w in waiting_jobs(client.redis, client.names)] == [20, 10]
    # the serving deployment's default solver counts for the job that names none
    publish(client, deployment, sampling=SamplingOffer(default_solver="midpoint"))
    served = default_solver(client.redis.get(client.names.deployment))
    assert served == "midpoint"
    weighed = waiting_jobs(client.redis, client.names, served)
    assert [(j, w) for j, _, w in weighed] == [(heun, 20), (plain, 20)]
    # and so the readers weigh them: one measured end of 10 evaluations in 1 s, one slot
    client.redis.lpush(client.names.job_ends, JobEnd(client.redis.time()[0], 1.0, 10, "done", 10).encode())
    got = client.queue_positions()
    assert got[plain].start_in_s == pytest.approx(20 * 0.1 + 1.0)


def test_the_router_takes_a_job_out_at_start_and_its_end_is_the_eta(client, deployment):
    descriptor = publish(client, deployment)
    ids = submit_mixed(client)
    order = [ids[i] for i in DELIVERY]
    store = JobStore(client.redis, client.names, 600)
    assert client.queue_position(order[2]).start_in_s is None  # serving, but nothing measured yet

    for job_id in order[:2]:  # a router runs the first two, as it would take them
        spec = client.status(job_id).spec
        assert client.redis.ttl(client.names.job(job_id)) > 0  # queued: expires unless started
        store.start(job_id, "r-1", 0, descriptor.resolve(spec), spec)
        assert client.redis.zscore(client.names.queue, job_id) is None  # the router's own ZREM
        assert client.redis.ttl(client.names.job(job_id)) == -1  # started: expires after its end only
        assert client.queue_position(job_id) is None
        time.sleep(0.05)
        assert store.finish(job_id, np.zeros((1, 1, 32, 32), np.float32))
    assert places(client, order) == [None, None, 1, 2, 3, 4]
    ends = [JobEnd.decode(e) for e in client.redis.lrange(client.names.job_ends, 0, -1)]
    assert [e.status for e in ends] == ["done", "done"] and all(e.ran_s >= 0.04 for e in ends)
    assert [e.steps for e in ends] == [client.status(j).steps for j in reversed(order[:2])]
    assert [e.nfe for e in ends] == [e.steps for e in ends]  # Euler: one evaluation a step

    first, last = client.queue_position(order[2]), client.queue_position(order[5])
    assert first.serving and first.measured == 2 and first.slots == 1
    assert 0 < first.start_in_s < last.start_in_s < 60
    assert first.done_in_s > first.start_in_s
    assert "position 1 of 4, starts in about" in first.text()

    # a job a router took but cannot run ends unrun: it leaves the queue, and it was not a measurement
    store.fail(order[3], "cannot route it")
    assert client.redis.zscore(client.names.queue, order[3]) is None
    assert places(client, order) == [None, None, 1, None, 2, 3]
    assert client.redis.llen(client.names.job_ends) == 2


def test_a_job_end_records_the_evaluations_this_run_did(client, deployment):
    descriptor = publish(client, deployment)
    store = JobStore(client.redis, client.names, 600)
    done, cancelled = (client.submit(JobSpec.new([3], steps=6, solver="heun"), check=False) for _ in "ab")
    for job_id in (done, cancelled):
        spec = client.status(job_id).spec
        store.start(job_id, "r-1", 2 if job_id == done else 0, descriptor.resolve(spec), spec)
    store.finish(done, np.zeros((1, 1, 32, 32), np.float32))
    client.redis.hset(client.names.job(cancelled), "step", "3")  # stored 3 steps, then cancelled
    store.cancel(cancelled)
    ends = [JobEnd.decode(e) for e in client.redis.lrange(client.names.job_ends, 0, -1)]
    # newest first: the cancel ran 3 steps (6 evaluations), the resumed done job 4 (8)
    assert [(e.status, e.steps, e.nfe) for e in ends] == [("cancelled", 3, 6), ("done", 4, 8)]


def test_a_failed_publish_leaves_no_queue_entry(client, redis_url):
    down = Client("amqp://guest:guest@127.0.0.1:1/%2F", redis_url, client.names.prefix)
    with pytest.raises(Exception):  # noqa: B017 - which error is test_client's business
        down.submit(JobSpec.new([1]), check=False)
    down.close()
    assert client.redis.zcard(client.names.queue) == 0


def test_ddm_status_prints_the_place_and_json_carries_it(client, deployment, monkeypatch, capsys):
    import json

    from ddm.ops.cli import main

    monkeypatch.setenv("DDM_PREFIX", client.names.prefix)
    descriptor = publish(client, deployment)
    ids = submit_mixed(client)
    order = [ids[i] for i in DELIVERY]
    assert main(["status", order[2]]) == 0
    out = capsys.readouterr().out
    assert "\nqueued       position 3 of 6; no estimate yet (no job ended in the last 15 min)\n" in out
    store = JobStore(client.redis, client.names, 600)  # one job measured: an estimate, said as one
    spec = client.status(order[0]).spec
    store.start(order[0], "r-1", 0, descriptor.resolve(spec), spec)
    store.finish(order[0], np.zeros((1, 1, 32, 32), np.float32))
    assert main(["status", order[2], "--json"]) == 0
    place = json.loads(capsys.readouterr().out)["queue"]
    assert (place["position"], place["queued"], place["ahead"], place["measured"]) == (2, 5, 1, 1)
    assert place["start_in_s"] > 0 and "starts in about" in place["text"] and "1 recent job)" in place["text"]
    assert main(["status", order[0], "--json"]) == 0  # not queued: no place
    assert json.loads(capsys.readouterr().out)["queue"] is None


def test_the_async_client_reads_a_place_too(client):
    import asyncio

    from ddm.client import AsyncClient

    ids = submit_mixed(client)

    async def read():
        return await AsyncClient(client=client).queue_position(ids[3])

    assert asyncio.run(read()).position == 1
