"""RabbitMQ plumbing shared by the expert worker, the router worker and the client (pika).

pika's BlockingConnection is not thread-safe: one connection per thread, and only that thread touches
it (another thread may only wake it, with connection.add_callback_threadsafe).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable

import pika
import pika.exceptions

from ddm.schema.errors import ServiceUnavailableError
from ddm.schema.names import Names
from ddm.schema.settings import redact
from ddm.schema.topology import work_queue_arguments

log = logging.getLogger(__name__)

# Errors after which a worker reconnects (broker restart, network blip, heartbeat timeout).
CONNECTION_ERRORS = (
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.ConnectionClosedByBroker,
    pika.exceptions.ChannelClosedByBroker,
    pika.exceptions.StreamLostError,
    pika.exceptions.ChannelWrongStateError,
    ConnectionError,
    OSError,
)


def connection_parameters(url: str, heartbeat: int = 30, name: str | None = None) -> pika.URLParameters:
    params = pika.URLParameters(url)
    if name:  # shown by `rabbitmqctl list_connections client_properties` and the management UI
        params.client_properties = {"connection_name": name}
    params.heartbeat = heartbeat
    params.blocked_connection_timeout = 60
    params.connection_attempts = 1
    params.socket_timeout = 5
    return params


def connect(
    url: str, *, attempts: int | None = 1, max_backoff_s: float = 10.0, name: str | None = None
) -> pika.BlockingConnection:
    """Open a BlockingConnection, retrying with bounded exponential backoff and jitter.

    attempts=None retries forever (workers across a broker restart); the error says where it tried.
    name labels the connection on the broker (e.g. the worker id).
    """
    delay, tried = 0.25, 0
    while True:
        tried += 1
        try:
            return pika.BlockingConnection(connection_parameters(url, name=name))
        except pika.exceptions.AMQPConnectionError as exc:
            if attempts is not None and tried >= attempts:
                raise ServiceUnavailableError(
                    f"no RabbitMQ answered at {redact(url)} after {tried} attempt(s) ({exc!r}). Start one "
                    "(`rabbitmq-server -detached`, or `docker compose up rabbitmq`) or set DDM_AMQP_URL."
                ) from None
            log.warning("broker not reachable at %s (%r); retrying in %.1f s", redact(url), exc, delay)
            time.sleep(delay * (0.5 + random.random()))
            delay = min(max_backoff_s, delay * 2)


def declare_topology(channel, names: Names, expert_ids: Iterable[int] = (), *, jobs: bool = True) -> None:
    """Declare the dead-letter exchange/queue, ddm.jobs (unless jobs=False) and the given expert queues
    (idempotent). Expert workers pass jobs=False: declaring needs the configure permission, and an
    expert's broker user has none on ddm.jobs (docs/DEPLOY.md)."""
    channel.exchange_declare(names.dead_letter_exchange, exchange_type="direct", durable=True)
    channel.queue_declare(names.dead_letter_queue, durable=True)
    channel.queue_bind(
        names.dead_letter_queue, names.dead_letter_exchange, routing_key=names.dead_letter_queue
    )
    args = work_queue_arguments(names)
    if jobs:
        channel.queue_declare(names.jobs, durable=True, arguments=args)
    for k in expert_ids:
        channel.queue_declare(names.expert_queue(k), durable=True, arguments=args)
