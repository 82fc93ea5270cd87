"""Queue positions on the real pipeline: six jobs of mixed priorities queued behind no router (plus a
stale entry and a cancel) have exact positions, and a router taking one job at a time then starts them
in exactly that order; with jobs measured, a job queued behind a running one gets a finite estimate."""

from __future__ import annotations

import time

from ddm.schema.messages import JobSpec, JobStatus
from tests.support.harness import Pipeline

# (priority, seed) in submission order; a classic priority queue delivers 3, 1, 4, 0, 2, 5
MIXED = [(None, 0), (5, 1), (0, 2), (9, 3), (5, 4), (None, 5)]
DELIVERY = [3, 1, 4, 0, 2, 5]


def test_positions_are_exact_and_the_router_starts_jobs_in_that_order(shared_labels_deployment, tmp_path):
    with Pipeline(shared_labels_deployment, tmp_path) as pipe:
        pipe.up({"a": 0, "b": 1}, routers=())  # experts only: the jobs wait in ddm.jobs
        with pipe.client() as client:
            ids = [
                client.submit(JobSpec.new([3], steps=2, seed=seed), check=False, priority=p)
                for p, seed in MIXED
            ]
            order = [ids[i] for i in DELIVERY]
            pipe.redis.zadd(pipe.names.queue, {"gone-job": 0.5})  # a stale entry ahead of all: never counted
            got = client.queue_positions()
            assert [got[j].position for j in order] == [1, 2, 3, 4, 5, 6]
            assert {p.queued for p in got.values()} == {6}
            assert all(p.start_in_s is None and p.measured == 0 for p in got.values())  # nothing measured

            client.cancel(order[2])  # the jobs behind it move up
            got = client.queue_positions()
            runs = [j for j in order if j != order[2]]
            assert [got[j].position for j in runs] == [1, 2, 3, 4, 5] and order[2] not in got

            pipe.start_router("router", extra=["--max-jobs", "1"])  # one at a time: prefetch 1
            ended = [client.wait(j, timeout=180) for j in runs]
            assert [e.status for e in ended] == [JobStatus.DONE] * 5, [e.error for e in ended]
            started = sorted(runs, key=lambda j: client.status(j).started_at)
            assert started == runs, "the router started the jobs in another order than their positions"
            assert client.status(order[2]).status is JobStatus.CANCELLED
            assert client.queue_positions() == {} and pipe.redis.zcard(pipe.names.queue) == 0

            # a job queued behind a running one: its estimate rests on the five measured ends
            long = client.submit(JobSpec.new([3], steps=1000, seed=9), check=False)
            deadline = time.monotonic() + 60
            while client.status(long).status is JobStatus.QUEUED:
                assert time.monotonic() < deadline, "the router did not start the long job"
                time.sleep(0.05)
            behind = client.submit(JobSpec.new([3], steps=2, seed=10), check=False)
            place = client.queue_position(behind)
            client.cancel(long)
            assert place is not None and (place.position, place.queued) == (1, 1)
            assert place.serving and place.measured >= 5
            assert 0 < place.start_in_s < 600 and place.done_in_s > place.start_in_s
            print("queued behind a running job:", place.text())
            assert client.wait(behind, timeout=120).status is JobStatus.DONE
