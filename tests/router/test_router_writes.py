"""The router's step writes against real Redis and RabbitMQ: a failing job's finished steps land before
its failed status, so they are stored and get its expiry (the router stores a burst's steps only after
sending the next ones, so a failure can find steps not yet written)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ddm.router.intake import Delivery
from ddm.router.outbox import StepDone
from ddm.router.worker import RouterWorker
from ddm.schema.messages import Frame, JobSpec
from tests.support.services import amqp_channel


def test_fail_stores_pending_steps_before_the_failed_status(settings, label_split_deployment):
    router = RouterWorker(settings, label_split_deployment)
    spec = JobSpec.new([1, 2], steps=4)
    assert router.store.acquire(spec.job_id)  # the router runs the job: it holds its lease
    router.store.start(spec.job_id, router.worker_id, 0, router.descriptor.resolve(spec), spec)
    x = np.zeros((2, 1, 32, 32), np.float32)
    frame = Frame.from_latent(spec.job_id, 1, 0.25, x, (0,), np.array([[1.0, 0.0]] * 2, np.float32), 3.0)
    router._writes.append(StepDone(frame, x, 3.0, 3.0))  # finished this burst, not stored yet

    with amqp_channel() as ch:  # a real delivery for _fail to ack, as the job message would be
        queue = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", queue, spec.encode())
        method, props, body = ch.basic_get(queue, auto_ack=False)
        router._session = SimpleNamespace(channel=ch)
        router._settle_failed(spec.job_id, Delivery(method.delivery_tag, spec, props, body), "boom")
        assert ch.queue_declare(queue, passive=True).method.message_count == 0  # acked, not requeued

    r, names = router.store.r, settings.names
    assert r.xlen(names.traj(spec.job_id)) == 1, "the pending frame was stored"
    job = router.store.job(spec.job_id)
    assert (job.status.value, job.error, job.strategy, job.guidance) == ("failed", "boom", "oracle", 1.0)
    for key in (names.traj(spec.job_id), names.state(spec.job_id), names.job(spec.job_id)):
        assert 0 < r.ttl(key) <= settings.job_ttl_s, f"{key} expires with the job"
    assert not r.exists(names.lease(spec.job_id)), "the lease ends with the job"
