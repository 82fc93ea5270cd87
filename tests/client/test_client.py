"""The client against the real RabbitMQ and Redis: validation against the serving router's descriptor
before queueing (no deployment file), the job hash and the queued message at submit, and status /
frames / result read from a stream filled by hand in the router's format (docs/PROTOCOL.md "Redis
layout"). Every test has its own prefix and cleans up."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import numpy as np
import pika
import pytest

from ddm.client import Client, JobFailedError, JobNotFoundError, JobTimeoutError, NoDeploymentError, following
from ddm.router.deployment_loader import describe, load_policy
from ddm.router.store import JobStore
from ddm.runtime.amqp import declare_topology
from ddm.schema import jobs
from ddm.schema.codec import packb
from ddm.schema.deployment import Deployment
from ddm.schema.descriptor import DeploymentDescriptor
from ddm.schema.errors import DDMError, SchemaError, ServiceUnavailableError
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.topology import CONTENT_TYPE
from tests.support.fakes import write_fake_deployment
from tests.support.services import amqp_channel, drain

# ---------------------------------------------------------------- fixtures


@pytest.fixture
def split_deployment(tmp_path) -> Path:
    experts = [("a", "torch", range(5)), ("b", "jax", range(5, 10))]
    return write_fake_deployment(tmp_path / "split", experts, "oracle")


@pytest.fixture
def shared_deployment(tmp_path) -> Path:
    experts = [("a", "torch", range(7)), ("b", "torch", range(3, 10))]
    return write_fake_deployment(tmp_path / "shared", experts, "label-prior")


@pytest.fixture
def client(prefix, amqp_url, redis_url):
    c = Client(amqp_url, redis_url, prefix)
    yield c
    c.close()


def publish(client: Client, path: Path, **changes) -> DeploymentDescriptor:
    """Publish the descriptor of the deployment at `path` (with `changes`), as its router would."""
    deployment = Deployment.load(path)
    descriptor = dataclasses.replace(describe(deployment, load_policy(deployment), "r-1"), **changes)
    JobStore(client.redis, client.names, 600).publish_descriptor(descriptor, 60)
    return descriptor


def queued(client: Client) -> list[tuple[pika.BasicProperties, bytes]]:
    """Every message now in the client's jobs queue (taken off it)."""
    with amqp_channel() as ch:
        declare_topology(ch, client.names)  # a queue to read, though nothing was submitted yet
    return drain(client.names.jobs)


def put_job(client: Client, job_id: str, status: str, steps: int, n: int = 2, **extra) -> JobSpec:
    """A job hash as the router writes it (all values strings)."""
    spec = JobSpec(job_id, (3,) * n, steps=steps, strategy="top1")
    fields = {"status": status, "spec": spec.to_json(), "step": "0", "steps": str(steps), "n": str(n)}
    fields |= {"strategy": "top1", "guidance": "1.5", "created_at": f"{time.time():.3f}"}
    client.redis.hset(client.names.job(job_id), mapping={**fields, **extra})
    return spec


def put_frame(client: Client, job_id: str, step: int, steps: int, n: int = 2) -> Frame:
    x = np.full((n, 1, 32, 32), step / steps, np.float32)
    weights = np.tile(np.array([[0.25, 0.75]], np.float32), (n, 1))
    frame = Frame.from_latent(job_id, step, step / steps, x, (1,), weights, 3.5)
    # In one transaction, as the router's script writes them: written apart, a waiter could read the
    # stream's end after the frame and the step before it, and block for a frame that never comes.
    with client.redis.pipeline(transaction=True) as pipe:
        pipe.xadd(client.names.traj(job_id), jobs.traj_entry(frame))
        pipe.hset(client.names.job(job_id), mapping={"step": str(step), "status": "running"})
        pipe.execute()
    return frame


def finish(client: Client, job_id: str, x: np.ndarray) -> None:
    client.redis.set(client.names.result(job_id), jobs.encode_result(x))
    client.redis.hset(client.names.job(job_id), mapping=jobs.done_fields(time.time()))


# ---------------------------------------------------------------- submit


def test_submit_creates_the_hash_and_a_decodable_persistent_message(client, split_deployment):
    publish(client, split_deployment)
    spec = JobSpec.new([0, 7, 7], steps=20, strategy="oracle", guidance=2.0, seed=5)
    t0 = time.time()
    assert client.submit(spec, queue_anyway=True) == spec.job_id  # no expert workers in this test
    st = client.status(spec.job_id)
    assert st.status is JobStatus.QUEUED
    assert (st.step, st.steps, st.n) == (0, 20, 3)
    assert st.strategy is None and st.guidance is None  # the router records what it resolves
    assert t0 - 1 <= st.created_at <= time.time() + 1
    assert st.spec == spec
    assert client.redis.zscore(client.names.jobs_index, spec.job_id) == pytest.approx(st.created_at)
    [(props, body)] = queued(client)
    assert JobSpec.decode(body) == spec
    assert props.content_type == CONTENT_TYPE
    assert props.delivery_mode == 2
    assert props.correlation_id == props.message_id == spec.job_id
    assert props.type == "job_spec"


def test_trim_index_drops_only_old_entries_whose_job_expired(client):
    ttl = client.settings.job_ttl_s
    old = time.time() - ttl - 60
    client.redis.zadd(client.names.jobs_index, {"gone": old, "alive": old, "recent": time.time() - 60})
    put_job(client, "alive", "queued", steps=4)  # queued for longer than the TTL: still listed
    store = JobStore(client.redis, client.names, ttl)
    assert store.trim_index() == 1
    listed = {job_id.decode() for job_id in client.redis.zrange(client.names.jobs_index, 0, -1)}
    assert listed == {"alive", "recent"}
    assert store.trim_index() == 0


def test_trim_index_reaches_expired_entries_behind_a_full_page_of_live_ones(client):
    """Before, each call read the same 200 oldest over-age entries: live ones there (queued for long)
    hid every expired entry behind them forever."""
    ttl = client.settings.job_ttl_s
    old = time.time() - ttl - 600
    live = {f"live{i}": old + i for i in range(5)}
    client.redis.zadd(client.names.jobs_index, live | {f"gone{i}": old + 10 + i for i in range(3)})
    for job_id in live:
        put_job(client, job_id, "queued", steps=4)
    store = JobStore(client.redis, client.names, ttl)
    dropped = [store.trim_index(batch=2) for _ in range(5)]
    assert sum(dropped) == 3, dropped
    listed = {job_id.decode() for job_id in client.redis.zrange(client.names.jobs_index, 0, -1)}
    assert listed == set(live)


def test_trim_index_pages_through_entries_that_share_a_score(client):
    ttl = client.settings.job_ttl_s
    old = time.time() - ttl - 600
    live = {f"live{i}": old for i in range(5)}  # five live entries, one score, ahead of the expired
    client.redis.zadd(client.names.jobs_index, live | {f"x-gone{i}": old for i in range(3)})  # sort after
    for job_id in live:
        put_job(client, job_id, "queued", steps=4)
    store = JobStore(client.redis, client.names, ttl)
    assert sum(store.trim_index(batch=2) for _ in range(6)) == 3
    listed = {job_id.decode() for job_id in client.redis.zrange(client.names.jobs_index, 0, -1)}
    assert listed == set(live)


def test_submit_twice_is_refused(client):
    spec = JobSpec.new([1], steps=3)
    client.submit(spec, check=False)
    with pytest.raises(SchemaError, match="already exists"):
        client.submit(spec, check=False)
    assert len(queued(client)) == 1


@pytest.mark.parametrize(
    ("deployment", "spec", "match"),
    [
        ("shared", JobSpec.new([3], strategy="oracle"), r"strategy in \['top1', 'topk:2', 'full'\]"),
        ("split", JobSpec.new([3], strategy="topk:3"), r"strategy in \['oracle', 'top1', 'topk:2', 'full'\]"),
        ("one", JobSpec.new([8]), r"labels some expert was trained on \[0, 1, 2, 3, 4\], got \[8\]"),
    ],
)
def test_the_serving_deployment_refuses_before_anything_is_queued(
    client, split_deployment, shared_deployment, deployment, spec, match
):
    if deployment == "one":  # expert 0 of the split alone
        split = publish(client, split_deployment)
        one = {"experts": split.experts[:1], "strategies": ("top1", "full"), "default_strategy": "top1"}
        descriptor = publish(client, split_deployment, **one)
    else:
        descriptor = publish(client, split_deployment if deployment == "split" else shared_deployment)
    assert client.deployment() == descriptor
    with pytest.raises(SchemaError, match=match) as info:
        client.submit(spec)
    assert "served by r-1" in str(info.value)
    assert not client.redis.exists(client.names.job(spec.job_id))
    assert queued(client) == []


def test_no_router_serving_is_said_plainly(client):
    spec = JobSpec.new([1])
    with pytest.raises(
        NoDeploymentError, match=r"no router is serving under prefix .*`ddm up` / `ddm worker r"
    ):
        client.submit(spec)
    assert isinstance(NoDeploymentError("x"), ServiceUnavailableError)
    assert not client.redis.exists(client.names.job(spec.job_id))
    assert queued(client) == []


def test_spec_rules_refuse_before_queueing(client):
    for bad in (dict(steps=0), dict(steps=1001), dict(guidance=25.0), dict(strategy="top-2")):
        with pytest.raises(SchemaError, match="expected"):
            JobSpec.new([1], **bad)
    with pytest.raises(SchemaError, match="labels"):
        JobSpec.new([1] * 65)
    with pytest.raises(SchemaError, match="a JobSpec"):
        client.submit({"labels": [1]})
    assert queued(client) == []


def test_broker_down_leaves_no_queued_hash(client, redis_url):
    down = Client("amqp://guest:guest@127.0.0.1:1/%2F", redis_url, client.names.prefix)
    spec = JobSpec.new([1])
    with pytest.raises(ServiceUnavailableError, match=r"127\.0\.0\.1:1.*rabbitmq-server"):
        down.submit(spec, check=False)
    assert not client.redis.exists(client.names.job(spec.job_id))
    down.close()


def test_redis_down_says_where_and_how(amqp_url):
    down = Client(amqp_url, "redis://127.0.0.1:1/0", "t-down.")
    with pytest.raises(ServiceUnavailableError, match=r"127\.0\.0\.1:1.*redis-server"):
        down.status("abc")


# ---------------------------------------------------------------- status, frames, result


def test_status_types_every_field(client):
    put_job(
        client,
        "j1",
        "running",
        10,
        step="4",
        started_at="100.5",
        updated_at="101.25",
        mean_step_ms="12.5",
        router="r-1",
        resumed_from="3",
        finished_at="",
    )
    st = client.status("j1")
    assert st.status is JobStatus.RUNNING
    assert (st.step, st.steps, st.n, st.resumed_from) == (4, 10, 2, 3)
    assert (st.started_at, st.updated_at, st.mean_step_ms) == (100.5, 101.25, 12.5)
    assert (st.strategy, st.guidance) == ("top1", 1.5)
    assert st.finished_at is None
    assert st.router == "r-1" and st.job_id == "j1"


def test_unknown_job(client):
    with pytest.raises(JobNotFoundError, match="no job nope"):
        client.status("nope")
    with pytest.raises(JobNotFoundError):
        list(client.frames("nope"))
    with pytest.raises(JobNotFoundError):
        client.result("nope", timeout=1)
    with pytest.raises(SchemaError, match="job_id"):
        client.status("bad id!")


def test_frames_replay_then_follow_live(client):
    steps = 6
    put_job(client, "live", "running", steps)
    written = [put_frame(client, "live", s, steps) for s in (1, 2)]

    def router():
        for s in range(3, steps + 1):
            time.sleep(0.05)
            written.append(put_frame(client, "live", s, steps))
        finish(client, "live", np.ones((2, 1, 32, 32), np.float32))

    thread = threading.Thread(target=router)
    thread.start()
    got = list(client.frames("live", timeout=10))
    thread.join()
    assert [f.step for f in got] == list(range(1, steps + 1))
    assert all(np.array_equal(a.x, b.x) and a.experts == b.experts for a, b in zip(got, written, strict=True))
    np.testing.assert_array_equal(got[0].weights, [[0.25, 0.75]] * 2)


def test_frames_without_follow_and_duplicate_steps(client):
    put_job(client, "dup", "running", 5)
    for s in (1, 2, 2, 3):  # a resumed router may write the step it resumed at again
        put_frame(client, "dup", s, 5)
    assert [f.step for f in client.frames("dup", follow=False)] == [1, 2, 3]


def test_frames_end_when_the_job_fails(client):
    put_job(client, "bad", "running", 5)
    put_frame(client, "bad", 1, 5)
    client.redis.hset(client.names.job("bad"), mapping={"status": "failed", "error": "expert 1 gone"})
    assert [f.step for f in client.frames("bad", timeout=5)] == [1]


def test_result_waits_for_done(client):
    put_job(client, "r", "running", 2)
    x = np.random.default_rng(0).standard_normal((2, 1, 32, 32)).astype(np.float32)

    def router():
        time.sleep(0.2)
        put_frame(client, "r", 1, 2)
        put_frame(client, "r", 2, 2)
        finish(client, "r", x)

    thread = threading.Thread(target=router)
    thread.start()
    t0 = time.monotonic()
    out = client.result("r", timeout=10)
    thread.join()
    assert time.monotonic() - t0 < 2.0  # woken by the stream, not by a slow poll
    np.testing.assert_array_equal(out, x)
    assert out.dtype == np.float32 and out.flags.writeable


def test_wait_returns_soon_after_an_end_that_follows_the_last_frame(client, monkeypatch):
    """The status says done a little after the last frame (always a separate write; for a latent job
    after decoding): no further frame wakes the waiter, so it used to sleep out a whole POLL_S. POLL_S is
    made 30 s here, so the bound below says "not a poll" without timing a busy machine closely."""
    monkeypatch.setattr(following, "POLL_S", 30.0)
    put_job(client, "end", "running", 2)
    ended = []

    def router():
        time.sleep(0.1)
        put_frame(client, "end", 1, 2)
        put_frame(client, "end", 2, 2)
        time.sleep(0.05)  # the router's last write, or a decoder, between the frame and the status
        finish(client, "end", np.zeros((2, 1, 32, 32), np.float32))
        ended.append(time.monotonic())

    thread = threading.Thread(target=router)
    thread.start()
    st = client.wait("end", timeout=60)
    returned = time.monotonic()
    thread.join()
    assert st.status is JobStatus.DONE
    lag = returned - ended[0]
    assert lag < 10, f"wait returned {lag:.2f} s after the job ended (slept out a poll after the last frame)"


def test_wait_wakes_on_frames_stored_between_its_status_read_and_its_stream_read(client, monkeypatch):
    """The interleaving CI once hit: the waiter reads the status (step 0), then the router stores every
    frame and the end before the waiter's first XREAD. Reading after "$" missed them and slept a poll."""
    monkeypatch.setattr(following, "POLL_S", 30.0)
    put_job(client, "race", "running", 2)
    read_status = client.status

    def status_then_the_router_runs(job_id):
        st = read_status(job_id)
        if st.status is JobStatus.RUNNING and st.step == 0:
            put_frame(client, "race", 1, 2)
            put_frame(client, "race", 2, 2)  # the end comes a second later: no frame wakes anyone then
        return st

    monkeypatch.setattr(client, "status", status_then_the_router_runs)
    end = threading.Timer(1.0, lambda: finish(client, "race", np.zeros((2, 1, 32, 32), np.float32)))
    end.start()
    t0 = time.monotonic()
    st = client.wait("race", timeout=20)
    end.join()
    assert st.status is JobStatus.DONE
    assert time.monotonic() - t0 < 10, "the frames stored after the status read did not wake the waiter"


def test_result_of_a_failed_job_raises_its_error(client):
    put_job(client, "f", "failed", 3, error="strategy 'oracle' needs experts with disjoint label sets")
    with pytest.raises(JobFailedError, match="disjoint label sets") as info:
        client.result("f", timeout=1)
    assert info.value.job_id == "f"


def test_result_with_a_wrong_shape_is_refused(client):
    put_job(client, "w", "done", 3, n=2)
    client.redis.set(client.names.result("w"), packb(np.zeros((3, 1, 32, 32), np.float32)))
    # the result carries its shape (a router in any sample space may have written it): n is checked
    with pytest.raises(SchemaError, match=r"float32 array \[2, C, H, W\], got 'float32 \[3, 1, 32, 32\]'"):
        client.result("w", timeout=1)


def test_timeouts(client):
    put_job(client, "q", "queued", 4)
    t0 = time.monotonic()
    with pytest.raises(JobTimeoutError, match="not finished after 0.3 s: still queued"):
        client.result("q", timeout=0.3)
    with pytest.raises(JobTimeoutError, match="no frame after step 0/4"):
        list(client.frames("q", timeout=0.3))
    assert time.monotonic() - t0 < 3.0
    assert isinstance(JobTimeoutError("x"), TimeoutError | DDMError)


# ---------------------------------------------------------------- the CLI on top


def _fake_router(client: Client, descriptor: DeploymentDescriptor, stop: threading.Event) -> None:
    """Takes jobs off the queue and 'runs' them as the router does: resolves and records the spec, one
    frame per step, then a result of all-steps values."""
    store = JobStore(client.redis, client.names, 600)
    with amqp_channel() as ch:
        declare_topology(ch, client.names)
        while not stop.is_set():
            method, _, body = ch.basic_get(client.names.jobs)
            if method is None:
                time.sleep(0.05)
                continue
            spec = JobSpec.decode(body)
            store.start(spec.job_id, "r-1", 0, descriptor.resolve(spec))
            for s in range(1, spec.steps + 1):
                put_frame(client, spec.job_id, s, spec.steps, n=spec.n)
            finish(client, spec.job_id, np.full((spec.n, 1, 32, 32), 0.5, np.float32))
            ch.basic_ack(method.delivery_tag)


def test_cli_submit_wait_and_status(
    client, split_deployment, amqp_url, redis_url, tmp_path, monkeypatch, capsys
):
    from ddm.ops.cli import main

    monkeypatch.setenv("DDM_PREFIX", client.names.prefix)
    monkeypatch.setenv("DDM_AMQP_URL", amqp_url)
    monkeypatch.setenv("DDM_REDIS_URL", redis_url)
    monkeypatch.chdir(tmp_path)  # no deployment file anywhere near: the descriptor is the truth
    descriptor = publish(client, split_deployment, default_guidance=1.5)
    stop = threading.Event()
    thread = threading.Thread(target=_fake_router, args=(client, descriptor, stop))
    thread.start()
    try:
        argv = ["submit", "--label", "7", "--n", "3", "--steps", "4", "--wait", "--timeout", "20"]
        argv += ["--out", str(tmp_path / "g.png"), "--npy", str(tmp_path / "x.npy")]
        argv += ["--queue-anyway"]  # the fake router has no expert workers behind it
        assert main(argv) == 0
    finally:
        stop.set()
        thread.join()
    out = capsys.readouterr()
    job_id = out.out.strip()
    assert "strategy oracle, guidance 1.5" in out.err
    assert client.status(job_id).status is JobStatus.DONE
    np.testing.assert_array_equal(np.load(tmp_path / "x.npy"), np.full((3, 1, 32, 32), 0.5, np.float32))
    assert (tmp_path / "g.png").stat().st_size > 0

    assert main(["status", job_id, "--json"]) == 0
    st = json.loads(capsys.readouterr().out)
    assert (st["status"], st["step"], st["steps"], st["spec"]["labels"]) == ("done", 4, 4, [7, 7, 7])
    assert (st["strategy"], st["guidance"]) == ("oracle", 1.5), "the values the router resolved"
    assert (st["spec"]["strategy"], st["spec"]["guidance"]) == (None, None), "as submitted"
    assert main(["status", job_id]) == 0
    table = capsys.readouterr().out
    assert "status" in table and "done" in table and "4/4 steps (100%)" in table
    assert "oracle, guidance 1.5" in table
    assert main(["status", "--recent", "5"]) == 0
    assert job_id in capsys.readouterr().out
    assert main(["status", "no-such-job"]) == 1  # a runtime failure, not a usage error
    assert "no job no-such-job" in capsys.readouterr().err


def test_cli_submit_refuses_a_bad_job(client, monkeypatch, capsys, split_deployment):
    from ddm.ops.cli import main

    monkeypatch.setenv("DDM_PREFIX", client.names.prefix)
    assert main(["submit", "--label", "3", "--steps", "2000", "--no-check"]) == 2
    assert "expected steps int in 1..1000, got 2000" in capsys.readouterr().err
    assert main(["submit", "--label", "3"]) == 1  # no router serving: a service down
    assert "no router is serving under prefix" in capsys.readouterr().err
    publish(client, split_deployment)
    assert main(["submit", "--label", "3", "--strategy", "topk:5"]) == 2
    assert (
        "expected strategy in ['oracle', 'top1', 'topk:2', 'full'], got 'topk:5'" in capsys.readouterr().err
    )
    assert queued(client) == []


def test_cli_submit_json_then_cancel_while_queued(client, monkeypatch, capsys, split_deployment):
    from ddm.ops.cli import main

    monkeypatch.setenv("DDM_PREFIX", client.names.prefix)
    publish(client, split_deployment)
    assert main(["submit", "--labels", "3,8", "--n", "2", "--steps", "5", "--queue-anyway", "--json"]) == 0
    job = json.loads(capsys.readouterr().out)  # stdout is the JSON, not the bare id
    assert (job["status"], job["n"], job["spec"]["labels"]) == ("queued", 4, [3, 8, 3, 8])
    assert main(["cancel", job["job_id"]]) == 0  # no router has taken it: cancelled at once
    assert capsys.readouterr().out.strip() == f"job {job['job_id']} cancelled at step 0/5"
    assert client.status(job["job_id"]).status is JobStatus.CANCELLED
    assert main(["status", job["job_id"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cancel_requested_at"] is not None
    assert main(["cancel", "no-such-job", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["kind"] == "JobNotFoundError"
