"""Redis plumbing shared by the workers, the router, the client and `ddm up` (redis-py).

The twin of ddm/runtime/amqp.py: one place that opens a connection and, when nothing answers, says
exactly which address failed and how to start a server.

DDM_REDIS_URL takes redis-py's own forms (redis://, rediss://, unix://) and one of ours for Redis
Sentinel, which redis-py has no URL parser for:

    redis+sentinel://[[username]:password@]host1[:port1][,host2[:port2]...]/service-name[/db]
                     [?sentinel_password=password]

The sentinels (port 26379 unless given) are asked for the master of `service-name`; the password (and
username) authenticate to that master. `sentinel_password` (percent-encoded) authenticates to the
sentinels themselves (their `requirepass`); without it they are asked with no password. The client
follows a failover by itself: its pool asks the sentinels again on a new connection (docs/DEPLOY.md).
"""

from __future__ import annotations

import logging
import random
import re
import time
import urllib.parse
from dataclasses import dataclass

import redis
import redis.exceptions
import redis.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry

from ddm.schema.errors import ConfigError, ServiceUnavailableError, expected
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
    # redis-py's repr says only "network:ConnectionError"; its text names the cause (an unknown host...)
    return ServiceUnavailableError(
        f"no Redis answered at {redact(url)} after {tried} attempt(s) ({type(exc).__name__}: {exc}). "
        f"{HOW_TO_START}"
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
    `url`: any form redis_client takes (a Sentinel URL included).
    """
    client = redis_client(url, socket_timeout=socket_timeout, connect_timeout=connect_timeout)
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


# ---------------------------------------------------------------- clients and the Sentinel URL

SENTINEL_SCHEME = "redis+sentinel://"
SENTINEL_PORT = 26379
_SERVICE_RE = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_HOST_RE = re.compile(r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9_.-]+))(?::(?P<port>[0-9]{1,5}))?")
SENTINEL_FORM = (
    "redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/service-name[/db]"
    "[?sentinel_password=password]"
)
_QUERY_RE = re.compile(r"sentinel_password=(?P<secret>[^&#=\s]*)")


@dataclass(frozen=True)
class SentinelURL:
    """A parsed redis+sentinel:// URL (repr without the password)."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_password: str | None = None  # the sentinels' own (requirepass), not the master's

    def __repr__(self) -> str:
        secret = "None" if self.password is None else "'***'"
        sentinel_secret = "None" if self.sentinel_password is None else "'***'"
        return (
            f"SentinelURL(sentinels={self.sentinels!r}, service={self.service!r}, db={self.db}, "
            f"username={self.username!r}, password={secret}, sentinel_password={sentinel_secret})"
        )


def _bad_sentinel_url(url: str, why: str) -> ConfigError:
    # A malformed URL may hold a password redact() cannot see (an unencoded '/' or '@' in it): everything
    # before the last '@' is hidden, the user name too; so is everything after sentinel_password=.
    head, _, rest = url.partition("://")
    rest = re.sub(r"([?&]sentinel_password=).*", r"\1***", rest)
    _, at, tail = rest.rpartition("@")
    shown = f"{head}://***@{tail}" if at else url
    return ConfigError(f"DDM_REDIS_URL: {expected(f'{SENTINEL_FORM} ({why})', shown)}")


def _sentinel_hosts(url: str, hosts: str) -> tuple[tuple[str, int], ...]:
    found = []
    for part in hosts.split(","):
        m = _HOST_RE.fullmatch(part)
        if m is None:
            raise _bad_sentinel_url(url, f"a sentinel as host or host:port, not {part!r}")
        port = int(m["port"] or SENTINEL_PORT)
        if not 1 <= port <= 65535:
            raise _bad_sentinel_url(url, f"a port in 1..65535, not {port}")
        found.append((m["ip6"] or m["host"], port))
    return tuple(found)


def parse_sentinel_url(url: str) -> SentinelURL:
    """Split a redis+sentinel:// URL; ConfigError (password redacted) for anything else."""
    if not url.startswith(SENTINEL_SCHEME):
        raise _bad_sentinel_url(url, f"the scheme {SENTINEL_SCHEME}")
    rest, question, query = url[len(SENTINEL_SCHEME) :].partition("?")
    netloc, _, path = rest.partition("/")
    found = _QUERY_RE.fullmatch(query) if question else None
    if (question and found is None) or "#" in rest or any(c.isspace() for c in rest) or "@" in path:
        raise _bad_sentinel_url(
            url,
            "no fragment or spaces, no query but ?sentinel_password=...; percent-encode / ? # @ & = "
            "in a password",
        )
    sentinel_password = (urllib.parse.unquote(found["secret"]) or None) if found else None
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username = urllib.parse.unquote(user) or None
        password = urllib.parse.unquote(secret) if colon else None
    parts = path.split("/")
    if not path or len(parts) > 2 or not _SERVICE_RE.fullmatch(parts[0]):
        raise _bad_sentinel_url(url, "a service name of [A-Za-z0-9_.-] after the hosts")
    db = parts[1] if len(parts) == 2 else "0"
    if not re.fullmatch(r"[0-9]{1,5}", db):
        raise _bad_sentinel_url(url, f"a database number, not {db!r}")
    hosts_found = _sentinel_hosts(url, hosts)
    return SentinelURL(hosts_found, parts[0], int(db), username, password, sentinel_password)


def sentinel_kwargs(parsed: SentinelURL, timeout: float) -> dict:
    """How every ddm process asks the sentinels of `parsed` (redis-py's Sentinel(sentinel_kwargs=...)).

    Sentinels answer small queries: bounded timeouts even when the data connection has none (XREAD BLOCK),
    and no retries, so a sentinel that is down costs one refused connection before the next is asked
    (redis-py's default retry backs off about 4 s per sentinel, for every master lookup); and the URL's
    sentinel_password, the sentinels' own requirepass, when it has one."""
    asking = {"socket_connect_timeout": timeout, "socket_timeout": timeout, "retry": Retry(NoBackoff(), 0)}
    if parsed.sentinel_password is not None:
        asking["password"] = parsed.sentinel_password
    return asking


def redis_client(
    url: str, *, socket_timeout: float | None = None, connect_timeout: float = 5.0
) -> redis.Redis:
    """A redis.Redis (bytes in, bytes out) for `url`, not connected yet: redis-py's URL forms, or a
    redis+sentinel:// URL (the master of its service, found and followed through the sentinels)."""
    options = {
        "socket_connect_timeout": connect_timeout,
        "socket_timeout": socket_timeout,
        "health_check_interval": 30,
    }
    if not url.startswith(SENTINEL_SCHEME):
        return redis.Redis.from_url(url, **options)
    parsed = parse_sentinel_url(url)
    sentinel = redis.sentinel.Sentinel(
        list(parsed.sentinels), sentinel_kwargs=sentinel_kwargs(parsed, connect_timeout)
    )
    return sentinel.master_for(
        parsed.service, db=parsed.db, username=parsed.username, password=parsed.password, **options
    )
