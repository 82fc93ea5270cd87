"""The real RabbitMQ and Redis the tests run on, and per-test isolation on them: every queue and key a
test makes carries a unique prefix, deleted afterwards (tests/conftest.py `prefix` is the fixture)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

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


def free_port() -> int:
    """A TCP port nothing listens on now (for a server a test starts)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
