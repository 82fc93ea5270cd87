"""Queue positions on the real pipeline: six jobs of mixed priorities queued behind no router (plus a
stale entry and a cancel) have exact positions, and a router taking one job at a time then starts them
in exactly that order; with jobs measured, a job queued behind a running one gets a finite estimate."""

from __future__ import annotations

import hashlib
import json
import time

import msgpack
import pika

from ddm.router.intake import refused_job
from ddm.schema.jobs import queued_fields, spec_digest
from ddm.schema.messages import JobSpec, JobStatus
from ddm.schema.topology import CONTENT_TYPE
from tests.support.fakes import write_fake_deployment
from tests.support.harness import Pipeline
from tests.support.services import amqp_channel

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
            pipe.redis.zadd(pipe.names.queue, {"gone-job": 0.5})  # an entry whose hash is gone: never counted
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


def test_refused_job_names_the_digest_the_job_was_created_with():
    for spec in [
        JobSpec.new([3, 3], steps=7, seed=4),
        JobSpec.new([1], steps=3, strategy="top1", guidance=1.5, solver="heun", grid="shift:3"),
    ]:
        assert refused_job(spec.encode(), 1 << 20) == (spec.job_id, spec_digest(spec))
    spec = JobSpec.new([3])
    other = msgpack.packb({"type": "job_spec", "version": 1, **spec.to_dict(), "seed": 99})
    assert refused_job(other, 1 << 20)[1] != spec_digest(spec)  # another spec under that id
    for body in (b"\xc1 not msgpack", msgpack.packb([1]), msgpack.packb({"job_id": "no spaces allowed"})):
        assert refused_job(body, 1 << 20) is None


def dead_letters(names) -> int:
    with amqp_channel() as ch:
        return ch.queue_declare(names.dead_letter_queue, passive=True).method.message_count


def publish_raw(names, body: bytes, job_id: str) -> None:
    props = pika.BasicProperties(content_type=CONTENT_TYPE, message_id=job_id, delivery_mode=2)
    with amqp_channel() as ch:
        ch.basic_publish("", names.jobs, body, props)


def test_a_dead_lettered_job_leaves_the_queue_failed_and_never_another_spec(tmp_path, monkeypatch):
    import ddm.client.client as client_module

    with Pipeline(write_fake_deployment(tmp_path / "dep"), tmp_path) as pipe:
        pipe.start_router("router")
        pipe.wait_ready("router")
        r, names = pipe.redis, pipe.names
        with pipe.client() as client:
            # 1. a message the router refuses (the wrong content type): its own queued job fails
            monkeypatch.setattr(client_module, "CONTENT_TYPE", "application/json")
            wrong_type = client.submit(JobSpec.new([3], steps=2), check=False)
            monkeypatch.undo()
            # 2. a message from a newer client (a field this router does not know), its hash as that
            # client writes it: the digest of the spec it sent
            newer = JobSpec.new([3], steps=2)
            fields = {**newer.to_dict(), "future": 1}
            r.hset(names.job(newer.job_id), mapping=queued_fields(newer, time.time()))
            canonical = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
            r.hset(names.job(newer.job_id), "digest", hashlib.sha256(canonical).hexdigest())
            r.zadd(names.queue, {newer.job_id: 1.0})
            publish_raw(names, msgpack.packb({"type": "job_spec", "version": 1, **fields}), newer.job_id)
            # 3. a message whose id names another spec: the job that id names is left as it is
            monkeypatch.setattr(client, "_publish", lambda *args, **kwargs: None)
            real = client.submit(JobSpec.new([3], steps=2, seed=1), check=False)
            monkeypatch.undo()
            publish_raw(names, JobSpec(real, (5,), steps=2, seed=2).encode(), real)

            deadline = time.monotonic() + 60
            while dead_letters(names) < 3:
                assert time.monotonic() < deadline, "the router did not dead-letter the three messages"
                time.sleep(0.1)
            for job_id in (wrong_type, newer.job_id):
                st = client.status(job_id)
                assert st.status is JobStatus.FAILED and st.error.startswith("dead-lettered: "), st
                assert r.zscore(names.queue, job_id) is None and 0 < r.ttl(names.job(job_id)) <= 86400
            assert "refused job" in client.status(wrong_type).error
            assert "undecodable job" in client.status(newer.job_id).error
            assert client.status(real).status is JobStatus.QUEUED
            assert client.queue_position(real).position == 1
