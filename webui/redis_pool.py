"""The web UI's one Redis pool: bounded, and blocking when full.

redis-py's default pool refuses the 101st concurrent connection ("Too many connections"), which turned
a busy UI into 503s on every route. Here every part of the UI (routes, socket events, the frame reader,
the replayer, the cluster monitor, submits) shares one redis.BlockingConnectionPool sized from the
serving threads (UIConfig.redis_max_connections): a caller that finds every connection busy waits up to
UIConfig.redis_wait_s for one (back-pressure), and only then gets redis' ConnectionError, which the
routes answer as 503 "unavailable".

Connections are named (CLIENT SETNAME) `ddm-webui:<prefix>`, so `CLIENT LIST` shows what the UI holds.
"""

from __future__ import annotations

import redis
import redis.sentinel

from ddm.client.client import Client
from ddm.runtime.redis_conn import SENTINEL_SCHEME, parse_sentinel_url, sentinel_kwargs
from ddm.schema.settings import Settings

SOCKET_TIMEOUT_S = 10.0  # no command the UI sends blocks longer (XREAD BLOCK is below a second)
CONNECT_TIMEOUT_S = 5.0


class _SentinelBlockingPool(redis.sentinel.SentinelConnectionPool, redis.BlockingConnectionPool):
    """The master of a Sentinel service, through a blocking pool (redis-py has no such class)."""


def client_name(settings: Settings) -> str:
    return f"ddm-webui:{settings.prefix}"


def ui_redis(settings: Settings, max_connections: int, wait_s: float) -> redis.Redis:
    """A redis.Redis (bytes in and out) on a blocking pool of at most `max_connections` connections."""
    options = {
        "max_connections": max_connections,
        "timeout": wait_s,  # BlockingConnectionPool: how long to wait for a free connection
        "socket_timeout": SOCKET_TIMEOUT_S,
        "socket_connect_timeout": CONNECT_TIMEOUT_S,
        "health_check_interval": 30,
        "client_name": client_name(settings),
    }
    url = settings.redis_url
    if not url.startswith(SENTINEL_SCHEME):
        return redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(url, **options))
    parsed = parse_sentinel_url(url)
    # as every ddm process asks sentinels: bounded, no retries, with the URL's sentinel_password
    sentinel = redis.sentinel.Sentinel(
        list(parsed.sentinels), sentinel_kwargs=sentinel_kwargs(parsed, CONNECT_TIMEOUT_S)
    )
    return sentinel.master_for(
        parsed.service,
        connection_pool_class=_SentinelBlockingPool,
        db=parsed.db,
        username=parsed.username,
        password=parsed.password,
        **options,
    )


class UIClient(Client):
    """ddm.client.client.Client on the UI's shared pool instead of a connection of its own."""

    def __init__(self, settings: Settings, shared: redis.Redis):
        super().__init__(settings=settings)
        self._shared = shared

    @property
    def redis(self) -> redis.Redis:
        return self._shared

    def close(self) -> None:
        super().close()  # its AMQP connection; the pool belongs to UIState, which closes it
