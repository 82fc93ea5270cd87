"""Redis plumbing shared by the workers, the router, the client and `ddm up` (redis-py).

The twin of workers/amqp.py: one place that opens a connection and, when nothing answers, says
exactly which address failed and how to start a server.
"""

from __future__ import annotations

import logging
import random
import time

import redis
import redis.exceptions

from ddm.schema.errors import ServiceUnavailableError
from ddm.schema.settings import redact

log = logging.getLogger(__name__)

# Errors that mean "the server is not there (any more)"; AuthenticationError is a ConnectionError.
REDIS_CONNECTION_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

HOW_TO_START = (
    "Start one (`redis-server --daemonize yes --bind 127.0.0.1 --port 6379`, or "
    "`docker compose up -d redis`) or set DDM_REDIS_URL."
)


def unavailable(url: str, exc: BaseException, tried: int = 1) -> ServiceUnavailableError:
    """The error every Redis caller raises when the server does not answer."""
    return ServiceUnavailableError(
        f"no Redis answered at {redact(url)} after {tried} attempt(s) ({exc!r}). {HOW_TO_START}"
    )


def connect_redis(
    url: str,
    *,
    attempts: int | None = 1,
    max_backoff_s: float = 10.0,
    socket_timeout: float | None = None,
    connect_timeout: float = 5.0,
) -> redis.Redis:
    """A redis.Redis (bytes in, bytes out) that has answered a PING.

    attempts=None retries forever with bounded exponential backoff and jitter (long-running workers);
    socket_timeout must exceed any XREAD BLOCK time used on the connection (None = no limit).
    """
    client = redis.Redis.from_url(
        url,
        socket_connect_timeout=connect_timeout,
        socket_timeout=socket_timeout,
        health_check_interval=30,
    )
    delay, tried = 0.25, 0
    while True:
        tried += 1
        try:
            client.ping()
            return client
        except REDIS_CONNECTION_ERRORS as exc:
            if attempts is not None and tried >= attempts:
                client.close()
                raise unavailable(url, exc, tried) from None
            log.warning("redis not reachable at %s (%r); retrying in %.1f s", redact(url), exc, delay)
            time.sleep(delay * (0.5 + random.random()))
            delay = min(max_backoff_s, delay * 2)
