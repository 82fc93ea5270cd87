"""The real RabbitMQ and Redis the tests run on, and per-test isolation on them: every queue and key a
test makes carries a unique prefix, deleted afterwards (tests/conftest.py `prefix` is the fixture)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pika

from ddm.ops.cleanup import delete_prefix

AMQP_URL = os.environ.get("DDM_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
REDIS_URL = os.environ.get("DDM_REDIS_URL", "redis://127.0.0.1:6379/0")


def new_prefix() -> str:
    """A queue and key prefix no other test (or run) uses."""
    return f"t{uuid.uuid4().hex[:10]}."


def cleanup_prefix(prefix: str, experts: int = 8) -> None:
    """Delete every Redis key and every queue/exchange a test made under `prefix`."""
    delete_prefix(AMQP_URL, REDIS_URL, prefix, range(experts))


@contextmanager
def amqp_channel(url: str = AMQP_URL) -> Iterator[pika.adapters.blocking_connection.BlockingChannel]:
    """A channel on its own blocking connection, closed afterwards."""
    conn = pika.BlockingConnection(pika.URLParameters(url))
    try:
        yield conn.channel()
    finally:
        conn.close()


def drain(queue: str) -> list[tuple[pika.BasicProperties, bytes]]:
    """Every message now in `queue` as (properties, body), taken off it."""
    out = []
    with amqp_channel() as ch:
        while (got := ch.basic_get(queue, auto_ack=True))[0] is not None:
            out.append(got[1:])
    return out


def free_port() -> int:
    """A TCP port nothing listens on now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 30) -> None:
    """Until url/healthz answers 200; fails with the process's log if it exits or takes too long."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "the UI did not start:\n" + log.read_text()
        time.sleep(0.2)


def rabbitmqctl(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`rabbitmqctl -q ARGS` on the local broker (its output in .stdout); the test is skipped where
    rabbitmqctl is not installed."""
    import shutil

    import pytest

    if shutil.which("rabbitmqctl") is None:
        pytest.skip("rabbitmqctl is not installed here")
    return subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, text=True, timeout=timeout)
