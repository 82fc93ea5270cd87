"""The router's step writes against real Redis and RabbitMQ: a failing job's finished steps land before
its failed status, so they are stored and get its expiry (the router stores a burst's steps only after
sending the next ones, so a failure can find steps not yet written)."""

from __future__ import annotations

import os
import uuid

import numpy as np
import pika
import pytest

from ddm.ops.cleanup import delete_prefix
from ddm.router.worker import RouterWorker
from ddm.schema.messages import Frame, JobSpec
from ddm.schema.settings import Settings

AMQP_URL = os.environ.get("DDM_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REDIS_URL = os.environ.get("DDM_REDIS_URL", "redis://127.0.0.1:6379/0")


@pytest.fixture
def settings():
    prefix = f"rw{uuid.uuid4().hex[:8]}."
    yield Settings.from_env({"DDM_PREFIX": prefix, "DDM_AMQP_URL": AMQP_URL, "DDM_REDIS_URL": REDIS_URL})
    delete_prefix(AMQP_URL, REDIS_URL, prefix, [0, 1])


def test_fail_stores_pending_steps_before_the_failed_status(settings, label_split_deployment):
    router = RouterWorker(settings, label_split_deployment)
    spec = JobSpec.new([1, 2], steps=4)
    router.store.start(spec.job_id, router.worker_id, 0, spec)
    x = np.zeros((2, 1, 32, 32), np.float32)
    frame = Frame.from_latent(spec.job_id, 1, 0.25, x, (0,), np.array([[1.0, 0.0]] * 2, np.float32), 3.0)
    router._writes.append((frame, x, 3.0))  # finished this burst, not stored yet

    conn = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    try:
        ch = conn.channel()  # a real delivery for _fail to ack, as the job message would be
        queue = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", queue, spec.encode())
        method, _, _ = ch.basic_get(queue, auto_ack=False)
        router._channel = ch
        router._fail(spec.job_id, method.delivery_tag, "boom")
        assert ch.queue_declare(queue, passive=True).method.message_count == 0  # acked, not requeued
    finally:
        conn.close()

    r, names = router.store.r, settings.names
    assert r.xlen(names.traj(spec.job_id)) == 1, "the pending frame was stored"
    assert r.hget(names.job(spec.job_id), "status") == b"failed"
    for key in (names.traj(spec.job_id), names.state(spec.job_id), names.job(spec.job_id)):
        assert 0 < r.ttl(key) <= settings.job_ttl_s, f"{key} expires with the job"
