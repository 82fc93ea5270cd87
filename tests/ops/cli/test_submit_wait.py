"""`ddm submit --wait` that stops waiting for a job that goes on, at its --timeout or on a Ctrl-C, says
where the job stands and how to follow, fetch or cancel it (it used to ask "is a router worker
running?" of a job visibly running, and a Ctrl-C printed only "interrupted"). Real RabbitMQ and Redis:
a stand-in router takes the job from the prefix's ddm.jobs and records its steps with the router's own
store (tests/support/fakes.FakeCluster)."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time

import pytest

from ddm.ops.cli import main
from ddm.runtime.amqp import declare_topology
from ddm.schema.messages import JobSpec
from tests.support.fakes import FakeCluster, write_fake_deployment
from tests.support.services import AMQP_URL, REDIS_URL, amqp_channel


@pytest.fixture
def cluster(prefix, monkeypatch, tmp_path):
    monkeypatch.setenv("DDM_PREFIX", prefix)
    monkeypatch.setenv("DDM_AMQP_URL", AMQP_URL)
    monkeypatch.setenv("DDM_REDIS_URL", REDIS_URL)
    fake = FakeCluster(prefix)
    with amqp_channel() as ch:
        declare_topology(ch, fake.names, range(2))  # as the workers do at their start
    fake.publish(write_fake_deployment(tmp_path))
    fake.all_workers()
    yield fake
    fake.close()


def stand_in_router(cluster: FakeCluster, steps_done: int, then=None) -> threading.Thread:
    """Takes the next job off ddm.jobs, records it running, writes `steps_done` frames, calls `then`."""

    def run():
        with amqp_channel() as ch:
            deadline = time.monotonic() + 20
            while (got := ch.basic_get(cluster.names.jobs, auto_ack=True))[0] is None:
                assert time.monotonic() < deadline, "no job was queued"
                time.sleep(0.05)
        spec = dataclasses.replace(JobSpec.decode(got[2]), strategy="oracle", guidance=1.0)
        from ddm.schema.resolved import ResolvedJob

        cluster.store.start(spec.job_id, "w-router", 0, ResolvedJob.of(spec))
        for step in range(1, steps_done + 1):
            cluster.frame(spec, step)
        if then is not None:
            then(spec)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def submit_and_wait(timeout_s: int, steps: int = 10) -> int:
    """`ddm submit --wait` of a one-image job of `steps` steps (queued whatever the cluster says)."""
    argv = ["submit", "--queue-anyway", "--label", "1", "--n", "1", "--steps", str(steps), "--wait"]
    return main([*argv, "--timeout", str(timeout_s)])


def wait_beside_router(cluster, capsys, timeout_s: int, steps_done: int, then=None) -> tuple[int, str, str]:
    """submit_and_wait while a stand-in router runs `steps_done` steps: (exit code, job id, stderr)."""
    router = stand_in_router(cluster, steps_done=steps_done, then=then)
    rc = submit_and_wait(timeout_s)
    router.join(5)
    out, err = capsys.readouterr()
    return rc, out.strip(), err


def test_a_timeout_says_the_job_runs_on_at_its_step(cluster, capsys):
    rc, job, err = wait_beside_router(cluster, capsys, timeout_s=3, steps_done=3)
    assert rc == 1, err
    assert f"no end within --timeout 3 s: job {job} is still running at step 3/10; it goes on." in err
    assert f"`ddm status {job}`" in err and f"`ddm cancel {job}`" in err
    assert "is a router worker running" not in err


def test_a_timeout_before_any_router_took_it_asks_for_one(cluster, capsys):
    assert submit_and_wait(timeout_s=1, steps=4) == 1
    err = capsys.readouterr().err
    assert "is still queued: no router has taken it (is a router worker running? `ddm up`)" in err


def test_ctrl_c_stops_waiting_not_the_job_and_says_so(cluster, capsys):
    # a terminal's `ddm submit` has Python's default SIGINT handler; pin it here: a test run started as a
    # background job of a non-interactive shell inherits SIGINT ignored (POSIX), and Python keeps that
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_stops_waiting(cluster, capsys)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_stops_waiting(cluster, capsys):
    def ctrl_c(spec):
        os.kill(os.getpid(), signal.SIGINT)  # as the terminal sends it
        time.sleep(0.2)
        cluster.frame(spec, 3)  # wakes the waiting XREAD, so the handler runs

    rc, job, err = wait_beside_router(cluster, capsys, timeout_s=30, steps_done=2, then=ctrl_c)
    assert rc == 130, err
    assert f"ddm submit: interrupted, stopped waiting: job {job} is still running at step " in err
    assert f"`ddm status {job}`" in err and f"`ddm cancel {job}`" in err
    assert cluster.r.hget(cluster.names.job(job), "status") == b"running"  # nobody cancelled it
