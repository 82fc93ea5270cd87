"""A busy expert is never taken for a gone one (issue 23, hole 2): batches so large (a worker allowed
4096 rows per batch, fed 256-row requests) that one takes longer than the heartbeat TTL plus the
router's silence window keep expert 0 computing, and `full` and `topk:2` jobs queued behind them still
use it at every step and equal the local sampler. Before, its
heartbeat expired mid-batch, the router judged it gone, and the mixing jobs ran without it, `done`.
Real RabbitMQ, Redis and worker processes."""

from __future__ import annotations

import time

import numpy as np
import pika
import pytest

from ddm.schema.messages import JobSpec, VelocityRequest
from tests.support.harness import Pipeline, local_references
from tests.support.services import amqp_channel

pytestmark = pytest.mark.serial  # batches timed against the heartbeat

BUSY_REQUESTS, BUSY_ROWS = 32, 256  # two batches of 4096 rows, several seconds each on one core here


def flood(pipe, expert: int, reply_to: str) -> None:
    x = np.zeros((BUSY_ROWS, 1, 32, 32), np.float32)
    t, y, g = np.full(BUSY_ROWS, 0.5, np.float32), np.full(BUSY_ROWS, 4), np.ones(BUSY_ROWS, np.float32)
    with amqp_channel() as ch:
        for i in range(BUSY_REQUESTS):
            body = VelocityRequest(f"busy.{i}", x, t, y, g).encode()
            props = pika.BasicProperties(reply_to=reply_to, correlation_id=f"busy.{i}")
            ch.basic_publish("", pipe.names.expert_queue(expert), body, props)


def test_mixing_jobs_behind_batches_longer_than_the_heartbeat_stay_exact(shared_labels_deployment, tmp_path):
    # A 1 s heartbeat TTL and a 0.5 s loss grace: any stretch of looking silent would show at once.
    env = {"DDM_HEARTBEAT_S": "0.3", "DDM_HEARTBEAT_TTL_S": "1", "DDM_EXPERT_LOSS_GRACE_S": "0.5"}
    env["DDM_MAX_BATCH"] = "4096"
    with Pipeline(shared_labels_deployment, tmp_path, timeout_s=30.0, env=env) as pipe:
        pipe.up({"a0": 0, "b0": 1})
        time.sleep(1.0)  # the router has seen both consumers (it logs their absence before they start)
        router_log = pipe.log_dir / "router.log"
        seen = len(router_log.read_text())
        client = pipe.client()
        specs = [
            JobSpec.new([4, 5], steps=4, strategy="full", seed=1),
            JobSpec.new([3, 6], steps=4, strategy="topk:2", seed=2),
        ]
        with amqp_channel() as ch:
            reply_to = ch.queue_declare("", exclusive=True).method.queue
            flood(pipe, 0, reply_to)
            started = time.monotonic()
            for spec in specs:
                client.submit(spec)
            got = [client.result(spec.job_id, timeout=180) for spec in specs]
            waited = time.monotonic() - started
            answered = ch.queue_declare(reply_to, passive=True).method.message_count
        print(f"{BUSY_REQUESTS} x {BUSY_ROWS} rows ahead: the mixing jobs done after {waited:.1f} s")
        assert answered == BUSY_REQUESTS and waited > 5.0 + 1.0, "the jobs really waited behind long batches"
        for spec, x, want in zip(specs, got, local_references(shared_labels_deployment, specs), strict=True):
            status = client.status(spec.job_id)
            assert not status.degraded, f"{spec.strategy}: ran without {status.degraded}"
            assert np.abs(x - want).max() <= 1e-4, spec.strategy
        assert "has had no live worker" not in router_log.read_text()[seen:]
