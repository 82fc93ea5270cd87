"""Cancelling a job, piece by piece against the real Redis: the client's request (Client.cancel), the
step script that reports it (JobStore.write_steps), the router's end of it (JobStore.cancel, lease-
checked), and the intake that settles a cancelled job's message unrun. The whole path with real
workers is in tests/pipeline/test_cli_pipeline.py."""

from __future__ import annotations

import numpy as np
import pytest

from ddm.client import Client, JobCancelledError, JobNotFoundError
from ddm.router.intake import Delivery, Run, Settle
from ddm.router.store import JobStore, StepWrites
from ddm.router.worker import RouterWorker
from ddm.schema import jobs
from ddm.schema.messages import Frame, JobSpec, JobStatus
from ddm.schema.solver import SolverHistory


@pytest.fixture
def client(settings):
    with Client(settings=settings) as c:
        yield c


@pytest.fixture
def router(settings, label_split_deployment):
    """A router worker's intake and store (no broker connection: nothing here consumes)."""
    return RouterWorker(settings, label_split_deployment)


def run_job(router: RouterWorker, steps: int = 6) -> JobSpec:
    """A job this router runs: it holds the lease and recorded it running."""
    spec = JobSpec.new([1, 7], steps=steps)
    assert router.store.acquire(spec.job_id)
    router.store.start(spec.job_id, router.worker_id, 0, router.descriptor.resolve(spec), spec)
    return spec


def step(spec: JobSpec, k: int) -> tuple:
    """Step k of `spec` as the router hands it to write_steps: (frame, x, mean step ms, degraded,
    solver history)."""
    x = np.zeros((spec.n, 1, 32, 32), np.float32)
    weights = np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
    frame = Frame.from_latent(spec.job_id, k, k / spec.steps, x, (0, 1), weights, 3.0)
    return frame, x, 3.0, None, SolverHistory()


def test_a_queued_job_no_router_holds_is_cancelled_at_once_and_its_message_settled(client, router):
    spec = JobSpec.new([3], steps=4)
    client.submit(spec, check=False)
    st = client.cancel(spec.job_id)
    assert st.status is JobStatus.CANCELLED and st.finished_at is not None
    assert st.cancel_requested_at is not None
    assert 0 < client.redis.ttl(client.names.job(spec.job_id)) <= client.settings.job_ttl_s
    assert client.wait(spec.job_id, timeout=1).status is JobStatus.CANCELLED  # an end state
    with pytest.raises(JobCancelledError, match=f"job {spec.job_id} was cancelled"):
        client.result(spec.job_id, timeout=1)
    # the router that takes its message later acks it without running it
    assert isinstance(router.intake.decide(Delivery(1, spec, None, spec.encode())), Settle)
    assert not client.redis.exists(client.names.lease(spec.job_id))


def test_a_running_job_stops_at_its_next_stored_step(client, router):
    spec = run_job(router)
    assert router.store.write_steps([step(spec, 1)]) == StepWrites(lost=[], cancelled=[])
    st = client.cancel(spec.job_id)
    assert st.status is JobStatus.RUNNING and st.cancel_requested_at is not None  # the router decides
    written = router.store.write_steps([step(spec, 2)])
    assert written == StepWrites(lost=[], cancelled=[spec.job_id])
    assert router.store.cancel(spec.job_id)
    st = client.status(spec.job_id)
    assert (st.status, st.step) == (JobStatus.CANCELLED, 2)
    assert [f.step for f in client.frames(spec.job_id, follow=False)] == [1, 2], "its frames are kept"
    names = client.names
    assert not client.redis.exists(names.state(spec.job_id)), "nothing will resume it"
    assert not client.redis.exists(names.lease(spec.job_id)), "the lease ends with the job"
    assert 0 < client.redis.ttl(names.traj(spec.job_id)) <= client.settings.job_ttl_s
    # a step still in flight when it was cancelled is not written: the lease is gone
    assert router.store.write_steps([step(spec, 3)]) == StepWrites(lost=[spec.job_id], cancelled=[])
    assert client.status(spec.job_id).step == 2


def test_only_the_lease_holder_ends_a_cancelled_job(client, router, settings):
    spec = run_job(router)
    client.cancel(spec.job_id)
    other = JobStore(client.redis, settings.names, settings.job_ttl_s, owner="another-router")
    assert not other.cancel(spec.job_id)
    assert client.status(spec.job_id).status is JobStatus.RUNNING


def test_a_cancel_requested_job_whose_router_died_is_ended_by_the_next_one(client, router):
    spec = run_job(router)
    client.cancel(spec.job_id)
    router.store.release([spec.job_id])  # as if its router died and its lease expired
    assert isinstance(router.intake.decide(Delivery(1, spec, None, spec.encode())), Settle)
    assert client.status(spec.job_id).status is JobStatus.CANCELLED


def test_a_job_that_ended_is_left_as_it_is(client, router):
    spec = run_job(router)
    assert router.store.finish(spec.job_id, np.zeros((2, 1, 32, 32), np.float32))
    st = client.cancel(spec.job_id)
    assert st.status is JobStatus.DONE and st.cancel_requested_at is None
    with pytest.raises(JobNotFoundError, match="no job nope"):
        client.cancel("nope")


def test_a_fresh_job_still_runs(router):
    """The intake's other answers are unchanged by the cancel check."""
    spec = JobSpec.new([2], steps=3)
    assert isinstance(router.intake.decide(Delivery(1, spec, None, spec.encode())), Run)
    assert jobs.CANCEL_FIELD in jobs.FIELDS
