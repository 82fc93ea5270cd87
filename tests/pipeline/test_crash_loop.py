"""A request that kills every expert worker serving it is dead-lettered after DDM_CRASH_LIMIT of them,
with the error that killed the last one, and the next job through that expert is exact (issue 36, the
crash-loop guard of ddm/runtime/crash_guard.py). Before, the broker handed it to the next replica
forever: every worker restart died again, and every job needing that expert waited behind it.

The poisoned worker is the real expert with one trap (tests/support/poison_worker.py): a BaseException
from inside its forward pass, which no handler catches, as a native crash or an escaped bug would end it.
A supervisor here restarts it each time it exits, as `ddm up`, Compose and Kubernetes do. Real
RabbitMQ, Redis and worker processes."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np
import pika

from ddm.schema.messages import JobSpec, VelocityRequest
from ddm.schema.topology import CONTENT_TYPE, REASON_HEADER
from tests.support.harness import Pipeline, local_reference
from tests.support.poison_worker import POISON
from tests.support.services import amqp_channel

CRASH_LIMIT = 2


class Supervisor:
    """Keeps one poison-sensitive expert worker running: restarts it whenever it exits, counting exits."""

    def __init__(self, pipe: Pipeline, expert: int):
        self.pipe, self.expert = pipe, expert
        self.exits: list[int] = []
        self._stop = threading.Event()
        self._proc = self._start()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _start(self) -> subprocess.Popen:
        name = f"poisoned{len(self.exits)}"
        log = open(self.pipe.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        argv = [sys.executable, "-m", "tests.support.poison_worker", str(self.pipe.deployment)]
        proc = subprocess.Popen(
            [*argv, str(self.expert), name], env=self.pipe.env, stdout=log, stderr=subprocess.STDOUT
        )
        self.pipe.procs[name] = proc  # the pipeline stops it with the rest
        return proc

    def _watch(self) -> None:
        while not self._stop.is_set():
            if self._proc.poll() is not None:
                self.exits.append(self._proc.returncode)
                self._proc = self._start()
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def __enter__(self) -> Supervisor:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()  # before the pipeline stops its processes: no restart after that


def test_a_request_that_kills_its_workers_is_dead_lettered_after_the_limit(
    shared_labels_deployment, tmp_path
):
    env = {"DDM_CRASH_LIMIT": str(CRASH_LIMIT)}
    with Pipeline(shared_labels_deployment, tmp_path, timeout_s=30.0, env=env) as pipe:
        pipe.start_expert(1, "b0")
        pipe.start_router()
        with Supervisor(pipe, expert=0) as supervisor:
            pipe.wait_ready("b0", "router", "poisoned0")
            got = publish_and_wait_for_its_dead_letter(pipe, supervisor)
        assert got[1].message_id == "poison.1"
        reason = got[1].headers[REASON_HEADER]
        assert f"crashed {CRASH_LIMIT} workers" in reason, reason
        assert "Poisoned: this request kills the worker that serves it" in reason, reason
        assert len(supervisor.exits) == CRASH_LIMIT and all(code != 0 for code in supervisor.exits)

        # the expert is served again, exactly: a job that needs it at every step equals ddm sample
        pipe.wait_ready(f"poisoned{len(supervisor.exits)}")
        client = pipe.client()
        spec = JobSpec.new([1, 2], steps=4, strategy="top1", seed=5)  # labels only expert 0 was trained on
        client.submit(spec)
        got_x = client.result(spec.job_id, timeout=120)
        assert np.abs(got_x - local_reference(shared_labels_deployment, spec)).max() <= 1e-4
        assert not client.status(spec.job_id).degraded


def publish_and_wait_for_its_dead_letter(pipe: Pipeline, supervisor: Supervisor):
    """Publish the poison request to expert 0; its one dead letter (basic_get's triple), no reply."""
    x = np.full((1, 1, 32, 32), POISON, np.float32)
    ones = np.ones(1, np.float32)
    poison = VelocityRequest("poison.1", x, np.full(1, 0.5, np.float32), np.full(1, 4), ones)
    with amqp_channel() as ch:
        reply_to = ch.queue_declare("", exclusive=True).method.queue
        props = pika.BasicProperties(reply_to=reply_to, content_type=CONTENT_TYPE, message_id="poison.1")
        ch.basic_publish("", pipe.names.expert_queue(0), poison.encode(), props)
        deadline = time.monotonic() + 180
        while (got := ch.basic_get(pipe.names.dead_letter_queue, auto_ack=True))[0] is None:
            assert time.monotonic() < deadline, f"never dead-lettered; worker exits: {supervisor.exits}"
            time.sleep(0.2)
        assert ch.basic_get(reply_to, auto_ack=True)[0] is None, "a poison request has no reply"
        assert ch.basic_get(pipe.names.dead_letter_queue, auto_ack=True)[0] is None, "dead-lettered once"
    return got
